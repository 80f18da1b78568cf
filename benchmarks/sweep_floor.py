"""The default sampler's sweep against a floor model of its arithmetic, block by block.

What is timed: the sampler :class:`~bayesmkl.BM3KLClassifier` builds by default — the
:class:`~bayesmkl.sampler.sampler.BM3KL` kernel with the estimator's default prior, move
(``"collapsed_log"``), L, step size and ν update, checked against the estimator's own parameters
so the two cannot drift apart — run by :class:`~bayesmkl.sampler.runner.ChainRunner` (the
estimator's vectorised chains, one compiled ``lax.scan`` chunk), for 1 chain and for the
estimator's 4, compile excluded (the chunk is compiled and run once before timing). Each core
count runs in its own subprocess pinned with ``taskset`` (``XLA_FLAGS`` thread options do not
pin XLA's CPU client here: a 1500² GEMM still keeps two cores busy under them, while
``taskset -c 0`` halves its speed and keeps one).

**The floor model** (:func:`block_costs`): per chain and sweep, each block of the default sweep
has flops (split into GEMM-like, Cholesky and triangular-solve flops) and compulsory bytes
(the arrays it must read or write once; data re-read inside a block counts again only when it
does not fit in the last-level cache), as formulas in (N, P, C, s = ``n_active``,
L = ``n_leapfrog``). Its floor is

    floor_block = max(bytes / bandwidth, gemm_flops / gemm_rate + chol_flops / chol_rate(N))

with the read bandwidth (a jitted sum over a large float64 array), the GEMM rates (float64 and
float32, 2000² matmul) and the Cholesky rate at the block's size measured in the same process.
Element-wise work (random draws, the log joint's sums) is not counted: its floor is its bytes.
``floor_ms`` of a row is the sum over blocks times the number of chains. The dot, Cholesky and
triangular-solve flops of every formula are checked against a count over the block's jaxpr
(:func:`jaxpr_flops`) in ``tests/test_benchmark_metrics.py``.

**The profile**: each block's jitted pure function (from :mod:`bayesmkl.sampler.steps` and the
modules it calls) timed alone at the shape, on one chain's state after the timed sweeps; a block
whose time is more than 10× its floor with under 0.1 ms per sequential step is reported as
latency-bound (its time goes to many small sequential steps — loop iterations, random-number
generation, small kernels — not arithmetic); one far above its floor in few large steps, as
above floor. Memory traffic counts only arrays larger than the last-level cache (smaller ones
may stay cached from sweep to sweep, so counting them would not give a floor).

Blocks: ``phi`` Φ = A·K_m; ``w_M`` M = Φ V⁻¹ Φᵀ and v (the pairwise updates' quadratic form);
``w_pairs`` the ⌈4P⌉ sequential pair updates of w (from P = 256 kernels without M: they carry
the residual, and there is no ``w_M`` block); ``hmc`` the collapsed HMC in log e (active
sets, L + 2 gradient evaluations, the mass-matrix products) — or, when
:func:`~bayesmkl.sampler.collapsed.n_active_for` turns the collapse off (s = 0, the ORL shape),
HMC on the conditional of e; ``kw`` K_w = Σ w_m K_m; ``ab`` the (a, b) Gaussian step
(K_w diag(ν_c) K_w + Λ_c, Cholesky, solves); ``lam`` λ | f (with f = A K_w + b); ``tpbn`` ν and ς;
``f_logjoint`` the reported f and log joint.

The load: the script refuses to record when the 1-minute load average is above
:data:`MAX_LOAD` at its start, unless ``--allow-load`` is given; every row carries the load
average read just before its timing (which counts this run's own threads: up to 1 on one
core, 2 on two) and ``other_cpu_cores``, the CPU time other processes used during the timing
(from ``/proc/stat``) in cores.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/sweep_floor.py [--quick] [--allow-load]

Writes ``benchmarks/results/sweep_floor.json`` (resumable units: one per shape and core count)
and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    UnitStore,
    best_time,
    json_default,
    machine_info,
    md_table,
    synthetic_kernels,
    write_atomic,
)

SHAPES = [(398, 16, 1), (145, 793, 1), (500, 100, 5), (280, 3088, 40)]  # (N, P, C)
QUICK_SHAPES = [(40, 4, 1), (30, 6, 3)]
#: Sweeps per timed chunk (a chunk is one compiled scan; ORL's sweep takes seconds).
SWEEPS = {(398, 16, 1): 20, (145, 793, 1): 10, (500, 100, 5): 5, (280, 3088, 40): 1}
CHAINS = (1, 4)
#: Load average above which the script refuses to record without ``--allow-load``.
MAX_LOAD = 1.5
#: A block is latency-bound above this multiple of its floor (with small sequential steps).
LATENCY_FACTOR = 10.0
#: Kernels above this many bytes in float64 are stored in float32 (as the estimator allows).
F32_ABOVE = 1.5 * 2**30
BLOCKS = ("phi", "w_M", "w_pairs", "hmc", "kw", "ab", "lam", "tpbn", "f_logjoint")


# =============================================================================================
# the floor model
# =============================================================================================
def llc_bytes() -> int:
    """The last-level cache's size (bytes) from sysfs; 32 MiB when unreadable."""
    best = 0
    for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = p.read_text().strip().upper()
            best = max(best, int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20}.get(text[-1], 1))
        except (OSError, ValueError):
            continue
    return best or 32 * 2**20


def block_costs(N, P, C, s, L, isz=8, n_pairs=None, llc=32 * 2**20, large_p=None) -> dict:
    """Per chain and sweep: ``{block: {"gemm", "gemm32", "chol", "trsm", "bytes", "steps"}}``.

    ``gemm`` are float64 dot flops (2 per multiply-add), ``gemm32`` float32 ones (the passes
    over float32 kernels), ``chol`` Cholesky flops (n³/3 per factor; the factor sizes are
    ``chol_n``), ``trsm`` triangular-solve flops, ``bytes`` the compulsory memory traffic and
    ``steps`` the number of sequential steps the block takes (1 for one vectorised pass).
    ``s`` is the active-set size of the collapsed move (0: HMC on the conditional of e),
    ``isz`` the kernels' item size, ``n_pairs`` the pair updates (default ⌈4P⌉), ``llc`` the
    last-level cache in bytes. ``large_p`` (default: P ≥
    :data:`~bayesmkl.sampler.simplex.LARGE_P`) models the sampler's large-P forms: the pair
    updates carry the residual instead of M (no ``w_M`` block; O(C N) per update, their edge
    directions gathered from D = Φ/√V), and the HMC's identity mass has no P × P products.
    """
    from bayesmkl.sampler.simplex import LARGE_P

    large_p = P >= LARGE_P if large_p is None else bool(large_p)
    n_pairs = int(np.ceil(4.0 * P)) if n_pairs is None else int(n_pairs)
    f8, kb = 8, P * N * N * isz
    phi = P * C * N * f8
    k32 = isz == 4

    def again(nbytes, times=1):  # memory traffic only for arrays beyond the last-level cache
        return nbytes * times if nbytes > llc else 0

    out = {}
    gk = 2.0 * P * C * N * N
    out["phi"] = dict(gemm=0.0 if k32 else gk, gemm32=gk if k32 else 0.0,
                      bytes=again(kb) + again(phi), steps=1)  # fmt: skip
    if large_p:
        # D = Φ/√V and r = (T − b)/√V − Σ w_m D_m once (the sum a dot), then per update
        # d = D_j − D_k, q = ‖d‖², ⟨d, r⟩ and r ← r − Δx d: 7 C N; D read at two random rows
        # per update, from memory when it does not fit in the cache
        d_bytes = P * C * N * f8
        out["w_pairs"] = dict(gemm=2.0 * P * C * N, vec=P * C * N + 7.0 * C * N * n_pairs,
                              bytes=again(phi) + again(d_bytes)
                              + (2 * n_pairs * C * N * f8 if d_bytes > llc else 0),
                              steps=n_pairs)  # fmt: skip
    else:
        out["w_M"] = dict(gemm=2.0 * P * P * C * N + 2.0 * P * C * N,
                          bytes=again(phi) + again(P * P * f8), steps=1)  # fmt: skip
        out["w_pairs"] = dict(gemm=(2.0 * P * P if P > 1 else 0.0), vec=3.0 * P * n_pairs,
                              bytes=again(P * P * f8, max(1, 2 * n_pairs // max(P, 1))),
                              steps=n_pairs if P > 1 else 0)  # fmt: skip
    ev = L + 2  # gradient evaluations: the start, L leapfrog steps, the end
    # Lᵀg once per gradient (carried), Lp once per step; none for the identity of large P
    mass = 0.0 if large_p else (2.0 * L + 1.0) * 2.0 * P * P
    mass_bytes = 0 if large_p else again(P * P * f8, 2 * L + 1)
    if s > 0:
        s1 = s + 1
        # one evaluation of the collapsed potential and its gradient (reverse mode): the
        # w-contractions with K_A and Φ_I and their adjoints, G = I + WᵀW and its adjoint, the
        # (s+1)² Cholesky and its adjoint (one GEMM, two solves with s+1 right-hand sides)
        ev_dot = (4.0 * P * C * N * s + 4.0 * P * C * N + 6.0 * C * N * s1 * s1
                  + 2.0 * C * s1**3 + 12.0 * C * N * s1 + 4.0 * C * s1 * s1)  # fmt: skip
        gathered = P * C * N * s * f8
        out["hmc"] = dict(
            # Φ of the active points: a dot, or from P = 256 on a product and sum (vec)
            gemm=(0.0 if large_p else 2.0 * P * C * N * s) + ev * ev_dot + mass,
            vec=2.0 * P * C * N * s if large_p else 0.0,
            chol=ev * C * s1**3 / 3.0, trsm=ev * (2.0 * C * s1**3 + 6.0 * C * s1 * s1),
            chol_n=s1,
            bytes=again(P * C * N * s * isz) + again(gathered, 2 * ev) + mass_bytes,
            steps=L + 2,
        )  # fmt: skip
    else:  # the analytic gradient of the conditional of e: two passes over Φ per evaluation
        out["hmc"] = dict(gemm=ev * (4.0 * P * C * N + 2.0 * P) + mass,
                          bytes=again(phi, 2 * ev) + mass_bytes,
                          steps=L + 2)  # fmt: skip
    gw = 2.0 * P * N * N
    out["kw"] = dict(gemm=0.0 if k32 else gw, gemm32=gw if k32 else 0.0,
                     bytes=again(kb) + again(N * N * f8), steps=1)  # fmt: skip
    out["ab"] = dict(gemm=2.0 * C * N**3 + 6.0 * C * N * N, chol=C * N**3 / 3.0,
                     trsm=2.0 * C * N * N, chol_n=N,
                     bytes=again(N * N * f8) + again(2 * C * N * N * f8), steps=1)  # fmt: skip
    out["lam"] = dict(gemm=2.0 * C * N * N, bytes=again(N * N * f8), steps=1)
    out["tpbn"] = dict(gemm=0.0, bytes=again(4 * C * N * f8), steps=1)
    out["f_logjoint"] = dict(gemm=2.0 * C * N * N, bytes=again(N * N * f8), steps=1)
    for v in out.values():
        for k in ("gemm", "gemm32", "chol", "trsm", "vec"):
            v.setdefault(k, 0.0)
    return out


def block_floor_s(cost: dict, rates: dict, chol_rate) -> tuple[float, str]:
    """``(seconds, "flops" or "bytes")``: max(bytes / bandwidth, flops / rates) of one block;
    ``chol_rate(n)`` is the measured Cholesky rate at size n (flop/s)."""
    t_mem = cost["bytes"] / rates["bandwidth_Bps"]
    t_flop = (cost["gemm"] + cost["vec"] + cost["trsm"]) / rates["gemm_f64_flops"]
    t_flop += cost["gemm32"] / rates["gemm_f32_flops"]
    if cost["chol"]:
        t_flop += cost["chol"] / chol_rate(cost["chol_n"])
    return (t_flop, "flops") if t_flop >= t_mem else (t_mem, "bytes")


def jaxpr_flops(fn, *args) -> dict:
    """Dot (``dot_general``: 2 flops per multiply-add), Cholesky (n³/3 per factor) and
    triangular-solve (n² per right-hand side) flops of ``fn(*args)``'s jaxpr: scans count their
    body ``length`` times, conds their costliest branch, while loops nothing (their trip count
    is data-dependent: the slice sampler, the jitter retry that runs only when a factor fails).
    """
    import jax
    from jax.extend import core as jcore

    def walk(jaxpr, mult, acc):
        for eqn in jaxpr.eqns:
            p = eqn.primitive.name
            shapes = [getattr(v.aval, "shape", ()) for v in eqn.invars]
            if p == "dot_general":
                (lc, _), _ = eqn.params["dimension_numbers"]
                k = float(np.prod([shapes[0][i] for i in lc])) if lc else 1.0
                acc["dot"] += mult * 2.0 * float(np.prod(eqn.outvars[0].aval.shape)) * k
            elif p == "cholesky":
                s = shapes[0]
                acc["chol"] += mult * float(np.prod(s[:-2])) * s[-1] ** 3 / 3.0
            elif p == "triangular_solve":
                acc["trsm"] += mult * float(np.prod(shapes[1])) * shapes[0][-1]
            subs = []
            for val in eqn.params.values():
                for j in val if isinstance(val, (list, tuple)) else [val]:
                    jj = getattr(j, "jaxpr", j)
                    if isinstance(jj, jcore.Jaxpr):
                        subs.append(jj)
            if p == "while":
                continue
            if p == "cond":
                branch = [walk(j, mult, {"dot": 0.0, "chol": 0.0, "trsm": 0.0}) for j in subs]
                worst = max(branch, key=lambda b: sum(b.values()))
                for k in acc:
                    acc[k] += worst[k]
                continue
            m = mult * (eqn.params["length"] if p == "scan" else 1)
            for j in subs:
                walk(j, m, acc)
        return acc

    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    return walk(jaxpr, 1.0, {"dot": 0.0, "chol": 0.0, "trsm": 0.0})


# =============================================================================================
# measured rates
# =============================================================================================
def measure_rates(quick: bool) -> dict:
    """Read bandwidth, float64 and float32 GEMM rates of this process (its cores)."""
    import jax
    import jax.numpy as jnp

    reps = 3 if quick else 5
    n = (2**27 if quick else 2**30) // 8
    x = jnp.ones((n,), jnp.float64)
    t, _ = best_time(jax.jit(jnp.sum), x, reps=reps)
    del x
    rates = {"bandwidth_Bps": n * 8 / t}
    m = 1000 if quick else 2000
    for name, dt in (("gemm_f64_flops", jnp.float64), ("gemm_f32_flops", jnp.float32)):
        a = jax.random.normal(jax.random.key(0), (m, m), dt)
        t, _ = best_time(jax.jit(jnp.matmul), a, a, reps=reps)
        rates[name] = 2.0 * m**3 / t
    return rates


def measure_chol_rate(n: int, reps: int = 5) -> float:
    """Cholesky rate (flop/s, n³/3 flops per factor) of n × n float64 SPD matrices, factored
    as one batch large enough (about 3·10⁷ flops) that the call's dispatch does not count: the
    rate of a factor of that size inside a compiled program."""
    import jax
    import jax.numpy as jnp

    batch = int(max(1, min(3e7 / (n**3 / 3.0), 2**24 // (n * n))))
    a = jax.random.normal(jax.random.key(2), (batch, n, n))
    spd = jnp.einsum("bij,bkj->bik", a, a) / n + jnp.eye(n)
    t, _ = best_time(jax.jit(jnp.linalg.cholesky), spd, reps=reps)
    return batch * n**3 / 3.0 / t


def _busy_s() -> float:
    """CPU seconds all processes have spent busy (``/proc/stat``), or NaN."""
    try:
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """CPU cores that other processes used between ``start()`` and ``stop()``."""

    def start(self):
        self.t, self.busy, self.own = time.perf_counter(), _busy_s(), sum(os.times()[:2])

    def stop(self) -> float:
        dt = time.perf_counter() - self.t
        other = (_busy_s() - self.busy) - (sum(os.times()[:2]) - self.own)
        return round(max(other, 0.0) / dt, 2) if dt > 0 else float("nan")


# =============================================================================================
# the default sampler, and its blocks
# =============================================================================================
def default_kernel():
    """The classifier's default sampler, built as :class:`bayesmkl.BM3KLClassifier` builds it,
    and the estimator's number of chains. Raises when ``BM3KL()``'s defaults and the
    estimator's differ, so that the benchmark cannot time a sampler the estimator does not run.
    """
    from bayesmkl import BM3KLClassifier
    from bayesmkl.estimators._fitting import resolve_hyper
    from bayesmkl.sampler.sampler import BM3KL

    est = BM3KLClassifier()
    kernel = BM3KL(*resolve_hyper(est), move=est.sampler, step_size=est.step_size,
                   n_leapfrog=int(est.n_leapfrog), nu_update=est.nu_update,
                   adapt_sweeps=int(est.num_warmup))  # fmt: skip
    plain = BM3KL(adapt_sweeps=int(est.num_warmup))
    if kernel.config != plain.config:
        raise SystemExit(f"BM3KL() {plain.config} is not the estimator's {kernel.config}")
    return kernel, int(est.num_chains)


def time_sweeps(kernel, chains, K, delta, n_sweeps, reps, key):
    """Per-sweep seconds (best, median) of ``chains`` vectorised chains, compile excluded; the
    runner after the runs (its ``last_state`` a realistic state) and the first run's seconds
    (compile included)."""
    import jax

    from bayesmkl.sampler.runner import ChainRunner

    runner = ChainRunner(kernel, chains, n_sweeps)
    t = time.perf_counter()
    runner.run(key, K, delta)  # compiles, then n_sweeps sweeps from the initial state
    jax.block_until_ready(runner.last_state)
    first = time.perf_counter() - t
    times = []
    for _ in range(reps):  # on from the last state, with its own per-chain keys
        runner.post_warmup_state = runner.last_state
        t = time.perf_counter()
        runner.run(runner.last_state.rng_key, K, delta)
        jax.block_until_ready(runner.last_state)
        times.append(time.perf_counter() - t)
    return min(times) / n_sweeps, float(np.median(times)) / n_sweeps, runner, first


def block_functions(kernel, K, delta, state):
    """``{block: (jitted function, args)}``: each block of the default sweep as a pure function
    of one chain's ``state`` (a :class:`~bayesmkl.sampler.state.State`); the blocks the sweep
    runs at this P (no ``w_M`` on the large-P route)."""
    import jax
    import jax.numpy as jnp

    from bayesmkl.model.classification import combine_kernels, decision_values
    from bayesmkl.sampler import collapsed as coll
    from bayesmkl.sampler import conditionals as cond
    from bayesmkl.sampler import simplex, steps
    from bayesmkl.sampler.moves import exact_hmc_move
    from bayesmkl.sampler.sampler import CLASSIFICATION

    cfg = kernel.config
    z, h = state.z, state.hyper
    P, (C, N) = K.shape[0], delta.shape
    s = coll.n_active_for(P, C, N, cfg.n_active) if cfg.spec.collapsed else 0
    n_pairs = max(1, int(np.ceil(cfg.pairs_per_kernel * P)))
    T, V = CLASSIFICATION.pseudo_observations(z, delta, None, None)
    Phi = cond.per_kernel_decisions(K, z.a)
    residual = simplex.uses_residual_path(P)  # the large-P route: no M
    M, v = (None, None) if residual else simplex.quadratic_form(Phi, z.b, T, V)
    w = z.e / jnp.sum(z.e)
    Kw = combine_kernels(K, w)
    key = jax.random.key(7)
    step = jnp.exp(state.adapt_state.log_step_avg)

    def hmc(key, e, K, a, b, nu, lam, Phi, T, V, tau, eta, step):
        if s > 0:
            data = coll.collapsed_setup(K, a, nu, Phi, s)
            pg = coll.collapsed_potential_and_grad(data, T, V, tau, eta)
        else:
            pg = partial(cond.e_potential_and_grad, Phi=Phi, b=b, delta=delta, lam=lam, eta=eta)
        res = exact_hmc_move(key, e, jnp.zeros_like(e), step, pg, n_leapfrog=cfg.n_leapfrog,
                             position=cfg.spec.position)  # fmt: skip
        return res.e, res.accept_prob

    def pairs(key, w, M, v, eta):
        return simplex.pairwise_gibbs(key, w, M, v, eta, n_pairs, eta_is_one=cfg.eta_is_one,
                                      return_capped=True)  # fmt: skip

    def pairs_residual(key, w, Phi, b, T, V, eta):
        return simplex.pairwise_gibbs_residual(
            key, w, Phi, b, T, V, eta, n_pairs, eta_is_one=cfg.eta_is_one, return_capped=True
        )

    def lam(key, Kw, a, b):
        return steps.lam_step(key, decision_values(Kw, a, b), delta, h.gamma0)

    def tpbn(k1, k2, a, varsigma):
        return steps.tpbn_gibbs_step(k1, k2, a, varsigma, h, cfg.hyper.alpha_a == 1.0)

    def f_logjoint(Kw, z):
        f = decision_values(Kw, z.a, z.b)
        return f, CLASSIFICATION.log_joint(z, f, delta, h, None, None)

    k2 = jax.random.key(8)
    tau = h.bias_prior_var
    if residual:
        weight_blocks = {"w_pairs": (pairs_residual, (key, w, Phi, z.b, T, V, h.eta))}
    else:
        weight_blocks = {"w_M": (simplex.quadratic_form, (Phi, z.b, T, V)),
                         "w_pairs": (pairs, (key, w, M, v, h.eta))}  # fmt: skip
    return {
        "phi": (cond.per_kernel_decisions, (K, z.a)),
        **weight_blocks,
        "hmc": (hmc, (key, z.e, K, z.a, z.b, z.nu, z.lam, Phi, T, V, tau, h.eta, step)),
        "kw": (combine_kernels, (K, w)),
        "ab": (steps.gaussian_ab_step, (key, Kw, T, V, z.nu, tau)),
        "lam": (lam, (key, Kw, z.a, z.b)),
        "tpbn": (tpbn, (key, k2, z.a, z.varsigma)),
        "f_logjoint": (f_logjoint, (Kw, z)),
    }, s


# =============================================================================================
# one unit: a shape on this process's cores
# =============================================================================================
def run_unit(N, P, C, cores, n_sweeps, reps, rates, llc, quick):
    import jax

    kernel, est_chains = default_kernel()
    chains_list = tuple(sorted({1, est_chains}))
    dtype = np.float32 if P * N * N * 8 > F32_ABOVE else np.float64
    K, delta = synthetic_kernels(P, N, C, dtype=dtype)
    cfg = kernel.config
    key = jax.random.key(0)
    rows, runner1 = [], None
    for chains in chains_list:
        load = round(os.getloadavg()[0], 2)
        other = OtherLoad()
        other.start()
        best, med, runner, first = time_sweeps(kernel, chains, K, delta, n_sweeps, reps, key)
        rows.append({"chains": chains, "sweep_ms": best * 1e3, "sweep_ms_median": med * 1e3,
                     "first_run_s": first, "loadavg": load, "other_cpu_cores": other.stop(),
                     "loadavg_end": round(os.getloadavg()[0], 2)})  # fmt: skip
        print(f"  ({N},{P},{C}) cores={cores} chains={chains}: {best * 1e3:.2f} ms/sweep "
              f"(first run {first:.1f} s, load {load})", flush=True)  # fmt: skip
        if chains == 1:
            runner1 = runner
    # one chain's state after the timed sweeps
    state = jax.tree.map(lambda x: x[0], runner1.last_state).state
    fns, s = block_functions(kernel, K, delta, state)
    costs = block_costs(N, P, C, s, cfg.n_leapfrog, np.dtype(dtype).itemsize,
                        int(np.ceil(cfg.pairs_per_kernel * P)), llc)  # fmt: skip
    chol = {n: measure_chol_rate(n, reps=3 if quick else 5) for n in {N, s + 1} if n > 1}
    blocks = {}
    for name, (fn, args) in fns.items():
        jf = jax.jit(fn)
        jax.block_until_ready(jf(*args))
        t, _ = best_time(jf, *args, reps=reps + 2, min_time=20.0)
        blocks[name] = {"measured_ms": t * 1e3}
    floor_chain = sum(block_floor_s(c, rates, lambda n: chol[n])[0] for c in costs.values()) * 1e3
    for r in rows:
        r.update(N=N, P=P, C=C, cores=cores, floor_ms=floor_chain * r["chains"],
                 ratio=r["sweep_ms"] / (floor_chain * r["chains"]), n_active=s,
                 n_leapfrog=cfg.n_leapfrog, kernel_dtype=np.dtype(dtype).name,
                 n_sweeps=n_sweeps, reps=reps)  # fmt: skip
    return {"rows": rows, "blocks": blocks, "rates": rates,
            "chol_rate_flops": {str(n): r for n, r in chol.items()}, "llc_bytes": llc,
            "move": cfg.move, "nu_update": cfg.nu_update}  # fmt: skip


def worker(args, shapes) -> None:
    """Run the units of this process's core count (the parent pinned it with ``taskset``)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    if args.cache_dir:
        jax.config.update("jax_compilation_cache_dir", args.cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    cores = len(os.sched_getaffinity(0))
    store = UnitStore(args.out.with_suffix(".json"), unit_config(args, shapes))
    rates, llc = None, llc_bytes()
    for N, P, C in shapes:
        key = UnitStore.key(f"{N},{P},{C}", f"cores={cores}")
        if store.done(key):
            continue
        if rates is None:
            rates = measure_rates(args.quick)
            print(f"cores={cores}: bandwidth {rates['bandwidth_Bps'] / 1e9:.2f} GB/s, GEMM "
                  f"{rates['gemm_f64_flops'] / 1e9:.1f} GFLOP/s f64, "
                  f"{rates['gemm_f32_flops'] / 1e9:.1f} f32", flush=True)  # fmt: skip
        n_sweeps = args.sweeps or (10 if args.quick else SWEEPS.get((N, P, C), 5))
        reps = args.reps or (2 if (N, P, C) == (280, 3088, 40) else 3)
        store.add(key, run_unit(N, P, C, cores, n_sweeps, reps, rates, llc, args.quick))


def unit_config(args, shapes) -> dict:
    return {"shapes": [list(s) for s in shapes], "quick": bool(args.quick),
            "sweeps": args.sweeps, "reps": args.reps}  # fmt: skip


# =============================================================================================
# the report
# =============================================================================================
def verdict(measured_ms: float, floor_ms: float, steps: int) -> str:
    """``"near floor"`` (within 3×), ``"latency-bound"`` (over :data:`LATENCY_FACTOR`× and
    under 0.1 ms per sequential step: many small steps) or ``"above floor"`` (the steps are
    large, but run far below the measured rates)."""
    if measured_ms <= 3.0 * floor_ms:
        return "near floor"
    if measured_ms > LATENCY_FACTOR * floor_ms and measured_ms / max(steps, 1) < 0.1:
        return "latency-bound"
    return "above floor"


def unit_floors(res: dict) -> dict:
    """Each block's costs, floor (ms, per chain), what bounds it, its measured time and
    verdict, from a unit's shape, rates and measurements (the floor is computed here, from the
    formulas of :func:`block_costs`, not stored by the worker)."""
    r0 = res["rows"][0]
    isz = np.dtype(r0["kernel_dtype"]).itemsize
    costs = block_costs(r0["N"], r0["P"], r0["C"], r0["n_active"], r0["n_leapfrog"], isz,
                        None, res["llc_bytes"])  # fmt: skip
    chol = {int(n): v for n, v in res["chol_rate_flops"].items()}
    out = {}
    for name, c in costs.items():
        floor, by = block_floor_s(c, res["rates"], lambda n: chol[n])
        m = res["blocks"][name]["measured_ms"]
        out[name] = {**c, "floor_ms": floor * 1e3, "bound_by": by, "measured_ms": m,
                     "verdict": verdict(m, floor * 1e3, c["steps"])}  # fmt: skip
    return out


def summarise(store_path: Path, allow_load: bool, start_load) -> tuple[list, str]:
    data = json.loads(store_path.read_text())
    units = data["units"]
    rows, md_blocks = [], []
    for rec in units.values():
        res = rec["result"]
        r0 = res["rows"][0]
        floors = unit_floors(res)
        floor_chain = sum(b["floor_ms"] for b in floors.values())
        for r in res["rows"]:
            rows.append({**r, "floor_ms": floor_chain * r["chains"],
                         "ratio": r["sweep_ms"] / (floor_chain * r["chains"])})  # fmt: skip
        res["blocks"] = floors
        tab = [{"block": name, "GEMM flops": b["gemm"] + b["gemm32"], "chol flops": b["chol"],
                "bytes": b["bytes"], "seq. steps": b["steps"], "floor ms": b["floor_ms"],
                "bound by": b["bound_by"], "measured ms": b["measured_ms"],
                "measured/floor": (b["measured_ms"] / b["floor_ms"] if b["floor_ms"] > 0
                                   else "no counted work"),
                "verdict": b["verdict"]}
               for name, b in res["blocks"].items()]  # fmt: skip
        total = sum(b["measured_ms"] for b in res["blocks"].values())
        top = sorted(res["blocks"].items(), key=lambda kv: -kv[1]["measured_ms"])[:3]
        share = ", ".join(f"{n} {b['measured_ms'] / total:.0%}"
                          + f" ({b['verdict']})"
                          for n, b in top)  # fmt: skip
        rt = res["rates"]
        md_blocks.append(
            f"### (N, P, C) = ({r0['N']}, {r0['P']}, {r0['C']}), {r0['cores']} core(s)\n\n"
            f"s = {r0['n_active']}, L = {r0['n_leapfrog']}, kernels {r0['kernel_dtype']}; "
            f"bandwidth {rt['bandwidth_Bps'] / 1e9:.2f} GB/s, GEMM "
            f"{rt['gemm_f64_flops'] / 1e9:.1f} (f64) / {rt['gemm_f32_flops'] / 1e9:.1f} (f32) "
            f"GFLOP/s, Cholesky " + ", ".join(f"{v / 1e9:.1f} GFLOP/s at n = {n}"
                                            for n, v in res["chol_rate_flops"].items())
            + f". Blocks alone sum to {total:.3g} ms per chain against a 1-chain sweep of "
            f"{r0['sweep_ms']:.3g} ms; most time: {share}.\n\n"
            + md_table(tab, list(tab[0]), {c: "{:.3g}" for c in tab[0]})
        )  # fmt: skip
    rows.sort(key=lambda r: (r["P"] * r["N"] ** 2 * r["C"], r["cores"], r["chains"]))
    loads = [r["loadavg"] for r in rows]
    head = [
        "# sweep_floor: the default sampler against its floor\n",
        f"Machine: {machine_info()}\n",
        "The default sampler (`BM3KLClassifier()`'s: move `collapsed_log`, `nu_update='gibbs'`, "
        "the default prior) per sweep through `ChainRunner`, compile excluded; floor = Σ over "
        "blocks of max(bytes / bandwidth, flops / rate), rates measured in the same process, "
        "times the number of chains; ratio = sweep / floor. `load` is the 1-minute load average "
        "before the row's timing (this run's own threads included); `others` the CPU cores "
        "other processes used during it.\n",
    ]
    if allow_load and loads:
        head.append(
            f"**Recorded with --allow-load: load average {start_load} at the start, "
            f"{min(loads):.2f}–{max(loads):.2f} at the rows; these times are not those of an "
            "idle machine.**\n"
        )
    cols = ["(N,P,C)", "K dtype", "s", "cores", "chains", "sweep ms", "floor ms", "ratio",
            "load", "others"]  # fmt: skip
    table = [{"(N,P,C)": f"({r['N']},{r['P']},{r['C']})", "K dtype": r["kernel_dtype"],
              "s": r["n_active"], "cores": r["cores"], "chains": r["chains"],
              "sweep ms": r["sweep_ms"], "floor ms": r["floor_ms"], "ratio": r["ratio"],
              "load": r["loadavg"], "others": r["other_cpu_cores"]} for r in rows]  # fmt: skip
    fmt = {c: "{:.3g}" for c in ("sweep ms", "floor ms", "ratio", "load", "others")}
    md = "\n".join(head) + "\n" + md_table(table, cols, fmt) + "\n## Blocks, per chain\n\n"
    md += (
        "Each block's jitted function timed alone on one chain's state (dispatch included, so "
        "blocks under ~0.05 ms measure the call, not the work). Verdict: *near floor* within 3× "
        f"its floor; *latency-bound* above {LATENCY_FACTOR:g}× with under 0.1 ms per sequential "
        "step (the time goes to many small steps: the pair updates' slice-sampling loops, "
        "random draws, small kernels); *above floor* otherwise (few, large steps that run far "
        "below the measured rates). Bytes count only arrays larger than the last-level cache.\n\n"
        + "\n".join(md_blocks)
    )
    return rows, md


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny shapes, to check the script")
    ap.add_argument("--allow-load", action="store_true",
                    help=f"record even when the load average is above {MAX_LOAD}")  # fmt: skip
    ap.add_argument("--shapes", default=None, help="e.g. '145,793,1;398,16,1' (N,P,C)")
    ap.add_argument("--cores", default="1,2", help="core counts, each in its own process")
    ap.add_argument("--sweeps", type=int, default=None, help="sweeps per timed chunk")
    ap.add_argument("--reps", type=int, default=None, help="timed chunks per row")
    ap.add_argument("--out", type=Path, default=None, help="results path without suffix")
    ap.add_argument("--fresh", action="store_true", help="ignore finished units")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / ("sweep_floor_quick" if args.quick else "sweep_floor")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    if args.worker:
        return worker(args, shapes)

    load = round(os.getloadavg()[0], 2)
    if load > MAX_LOAD and not args.allow_load:
        raise SystemExit(
            f"load average {load} > {MAX_LOAD}: refusing to record timings on a busy machine "
            "(wait, or pass --allow-load to record them with the load marked)"
        )
    path = args.out.with_suffix(".json")
    if args.fresh and path.exists():
        path.unlink()
    first_load = None
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if old.get("units"):  # else the load before the first unit's first timing
                first = next(iter(old["units"].values()))["result"]["rows"][0]["loadavg"]
                first_load = old.get("start_loadavg", first)
        except ValueError:
            pass
    UnitStore(path, unit_config(args, shapes))  # refuse another configuration before starting
    cache = tempfile.mkdtemp(prefix="sweep-floor-cache-")
    ncpu = len(os.sched_getaffinity(0))
    try:
        for cores in (int(c) for c in args.cores.split(",")):
            if cores > ncpu:
                print(f"skipping {cores} cores: this machine has {ncpu}", flush=True)
                continue
            cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores])
            cmd = ["taskset", "-c", cpus, sys.executable, __file__, "--worker",
                   "--out", str(args.out), "--cache-dir", cache]  # fmt: skip
            cmd += ["--quick"] if args.quick else []
            cmd += ["--shapes", ";".join(",".join(map(str, s)) for s in shapes)]
            cmd += [f"--sweeps={args.sweeps}"] if args.sweeps else []
            cmd += [f"--reps={args.reps}"] if args.reps else []
            proc = subprocess.run(cmd)
            if proc.returncode != 0:
                raise SystemExit(proc.returncode)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    store = UnitStore(path, unit_config(args, shapes))
    load = first_load if first_load is not None else load  # a resumed run keeps the first's
    rows, md = summarise(path, args.allow_load, load)
    for rec in store.units.values():  # floors are the summary's (formulas), not the workers'
        rec["result"]["blocks"] = {n: {"measured_ms": b["measured_ms"]}
                                   for n, b in rec["result"]["blocks"].items()}  # fmt: skip
    store.save(benchmark="sweep_floor", machine=machine_info(), start_loadavg=load,
               allow_load=bool(args.allow_load), rows=rows)  # fmt: skip
    write_atomic(args.out.with_suffix(".md"), md)
    print(f"wrote {path} and .md")
    print(json.dumps([{k: r[k] for k in ("N", "P", "C", "cores", "chains", "sweep_ms",
                                         "floor_ms", "ratio", "loadavg")} for r in rows],
                     default=json_default))  # fmt: skip


if __name__ == "__main__":
    main()
