"""Per-sweep time of the compiled BM3KL Gibbs sweep against the machine's roofline.

Measures, in one run: the read bandwidth (a jitted sum over a 1 GiB float64 array) and the GEMM
rate (2000×2000 matmul, float64 and float32); then for each shape (N, P, C) the compiled
per-sweep time of :func:`bayesmkl.sampler.sweep` (``move="stable"``, L = 10), the best
formulation of the unavoidable operations timed alone, and a lower bound

    bound = Σ_ops max(bytes_op / bandwidth, flops_op / peak)

over: two passes over the stored kernels (Φ = A·K_m for all m, K_w = Σ w_m K_m), the C Gaussian
steps (K_w diag(ν_c) K_w, Cholesky, solves: about 7/3·C·N³ flops), f = A K_w, and the
L·O(PCN) inner steps (counted as memory traffic only when Φ does not fit in the last-level
cache). Compile time is reported apart. Kernels larger than 1.5 GiB in float64 are stored in
float32 (the ORL shape, 280 × 3088 × 40).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/sweep_floor.py [--quick]

Writes ``benchmarks/results/sweep_floor.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    best_time,
    block,
    compile_time,
    current_rss_gib,
    machine_info,
    md_table,
    rss_gib,
    synthetic_kernels,
    write_results,
)

# the low-level sweep runs outside bayesmkl's entry points, which scope 64-bit JAX themselves
jax.config.update("jax_enable_x64", True)


# =============================================================================================
# the sweep-floor benchmark
# =============================================================================================
SHAPES = [(145, 793, 1), (241, 91, 1), (500, 100, 5), (280, 3088, 40)]  # (N, P, C)
L_STEPS = 10


def measure_bandwidth(gib: float = 1.0, reps: int = 5) -> float:
    """Read bandwidth (bytes/s): a jitted sum over a ``gib`` GiB float64 array."""
    n = int(gib * 2**30 // 8)
    x = jnp.ones((n,), jnp.float64)
    f = jax.jit(jnp.sum)
    t, _ = best_time(f, x, reps=reps)
    del x
    return n * 8 / t


def measure_peak(n: int = 2000, dtype=jnp.float64, reps: int = 5) -> float:
    """GEMM rate (flop/s) of an n×n matmul in ``dtype``."""
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    t, _ = best_time(jax.jit(jnp.matmul), a, b, reps=reps)
    return 2.0 * n**3 / t


def op_counts(N: int, P: int, C: int, itemsize: int, L: int = L_STEPS, cache_bytes=None):
    """Unavoidable operations of one sweep: name -> (bytes, flops, dtype_of_arith)."""
    kb = P * N * N * itemsize
    phi_bytes = P * C * N * 8
    kdt = "f32" if itemsize == 4 else "f64"
    inner_bytes = 2 * L * phi_bytes if (cache_bytes is None or phi_bytes > cache_bytes) else 0
    return {
        "phi_pass (A·K_m, all m)": (kb, 2.0 * P * C * N * N, kdt),
        "kw_pass (Σ w_m K_m)": (kb, 2.0 * P * N * N, kdt),
        # M_c = K_w diag(ν_c) K_w (GEMM) + Cholesky + 2 triangular solves + 3 GEMVs with K_w
        "gaussian_step (C × N³)": (
            (C + 1) * N * N * 8,
            C * (2.0 * N**3 + N**3 / 3.0 + 4.0 * N**2 + 6.0 * N**2),
            "f64",
        ),
        "f = A K_w": (N * N * 8, 2.0 * C * N * N, "f64"),
        "inner steps (L × O(PCN))": (inner_bytes, L * 4.0 * P * C * N, "f64"),
    }


def bound_seconds(ops, bw, peak64, peak32):
    total = 0.0
    per = {}
    for name, (nbytes, flops, dt) in ops.items():
        peak = peak32 if dt == "f32" else peak64
        t = max(nbytes / bw, flops / peak)
        per[name] = t
        total += t
    return total, per


def time_shape(N, P, C, bw, peak64, peak32, reps, cache_bytes):
    from bayesmkl.model.classification import Hyper, combine_kernels, decision_values
    from bayesmkl.sampler import SweepConfig, build_sweep, init_state
    from bayesmkl.sampler import conditionals as cond
    from bayesmkl.sampler.sampler import CLASSIFICATION

    dtype = np.float32 if P * N * N * 8 > 1.5 * 2**30 else np.float64
    rss0 = current_rss_gib()
    K, delta = synthetic_kernels(P, N, C, dtype=dtype)
    del_rss_k = current_rss_gib() - rss0
    config = SweepConfig(hyper=Hyper.paper(), move="stable", step_size=0.01,
                         n_leapfrog=L_STEPS).validate()  # fmt: skip
    state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, config).state
    sweep_pair = build_sweep(CLASSIFICATION, config, 0)

    def sweep(state, K, delta):
        return sweep_pair(state, K, delta)[0]

    # a realistic state: a few sweeps from the start
    one = jax.jit(sweep)
    t_compile, one_c = compile_time(one, state, K, delta)
    for _ in range(3):
        state = one_c(state, K, delta)
    block(state)

    n_inner = 5

    @jax.jit
    def many(state, K, delta):
        return jax.lax.fori_loop(0, n_inner, lambda i, s: sweep(s, K, delta), state)

    t_compile_loop, many_c = compile_time(many, state, K, delta)
    t_many, t_many_med = best_time(many_c, state, K, delta, reps=reps)
    sweep_s = t_many / n_inner
    t_one, _ = best_time(one_c, state, K, delta, reps=reps)

    # --- the best-formulated operations alone ---
    z = state.z
    w = z["e"] / jnp.sum(z["e"])
    Kw = combine_kernels(K, w)
    f_phi_gemm = jax.jit(cond.per_kernel_decisions)
    f_phi_einsum = jax.jit(
        lambda K, a: jnp.einsum("cj,mji->mci", a.astype(K.dtype), K).astype(jnp.float64)
    )
    f_kw = jax.jit(combine_kernels)
    f_ab = jax.jit(partial(cond.sample_ab, tau=1e-4))
    Phi = f_phi_gemm(K, z["a"])
    eta = 1.0

    def inner(e, Phi, b, lam):
        def body(i, e):
            _, g = cond.e_potential_and_grad(e, Phi, b, delta, lam, eta)
            return e - 1e-6 * g

        return jax.lax.fori_loop(0, L_STEPS, body, e)

    f_inner = jax.jit(inner)
    f_lam = jax.jit(lambda k, f: cond.sample_lam(k, f, delta, 100.0))
    f_nu = jax.jit(lambda k, a, vs: cond.sample_nu(k, a, vs, 1.0))
    f_vs = jax.jit(lambda k, nu: cond.sample_varsigma(k, nu, 1.0, 0.1, 1e-10))
    key = jax.random.key(1)
    timings = {
        "phi_gemm": best_time(f_phi_gemm, K, z["a"], reps=reps)[0],
        "phi_einsum_naive": best_time(f_phi_einsum, K, z["a"], reps=reps)[0],
        "kw_gemv": best_time(f_kw, K, w, reps=reps)[0],
        "gaussian_step": best_time(f_ab, key, Kw, delta, z["lam"], z["nu"], reps=reps)[0],
        "inner_steps": best_time(f_inner, z["e"], Phi, z["b"], z["lam"], reps=reps)[0],
        "lam": best_time(f_lam, key, decision_values(Kw, z["a"], z["b"]), reps=reps)[0],
        "nu": best_time(f_nu, key, z["a"], z["varsigma"], reps=reps)[0],
        "varsigma": best_time(f_vs, key, z["nu"], reps=reps)[0],
    }
    ops_s = timings["phi_gemm"] + timings["kw_gemv"] + timings["gaussian_step"]
    substeps_sum = sum(v for k, v in timings.items() if k != "phi_einsum_naive")
    ops = op_counts(N, P, C, np.dtype(dtype).itemsize, cache_bytes=cache_bytes)
    bound, per = bound_seconds(ops, bw, peak64, peak32)
    cost = {}
    try:
        ca = many.lower(state, K, delta).compile().cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        cost = {k: float(v) / n_inner for k, v in ca.items()
                if k in ("flops", "bytes accessed", "transcendentals")}  # fmt: skip
    except Exception as err:  # pragma: no cover - depends on the backend
        cost = {"error": repr(err)}
    return {
        "N": N, "P": P, "C": C, "kernel_dtype": np.dtype(dtype).name,
        "kernel_gib": P * N * N * np.dtype(dtype).itemsize / 2**30,
        "rss_increase_for_K_gib": del_rss_k,
        "sweep_s": sweep_s, "sweep_s_single_dispatch": t_one,
        "sweep_s_median": t_many_med / n_inner,
        "ops_s": ops_s, "bound_s": bound, "ratio": sweep_s / bound,
        "ratio_vs_ops": sweep_s / ops_s, "substeps_sum_s": substeps_sum,
        "bound_terms_s": per, "substep_s": timings,
        "compile_s": t_compile, "compile_loop_s": t_compile_loop,
        "xla_cost_analysis_per_sweep": cost, "peak_rss_gib": rss_gib(),
    }  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, skip the ORL shape")
    ap.add_argument("--shapes", default=None, help="e.g. '145,793,1;241,91,1' (N,P,C)")
    ap.add_argument("--name", default="sweep_floor")
    args = ap.parse_args(argv)
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    elif args.quick:
        shapes = SHAPES[:3]
    reps = 3 if args.quick else 7
    t0 = time.time()
    bw = measure_bandwidth(reps=reps)
    peak64 = measure_peak(dtype=jnp.float64, reps=reps)
    peak32 = measure_peak(dtype=jnp.float32, reps=reps)
    cache_bytes = 105 * 2**20  # L3 of the benchmark machine; Φ below this stays in cache
    print(f"bandwidth {bw / 1e9:.2f} GB/s, peak f64 {peak64 / 1e9:.1f} GFLOP/s, "
          f"f32 {peak32 / 1e9:.1f} GFLOP/s", flush=True)  # fmt: skip
    rows = []
    for N, P, C in shapes:
        r = time_shape(N, P, C, bw, peak64, peak32, reps, cache_bytes)
        r.update(bandwidth_Bps=bw, peak_f64_flops=peak64, peak_f32_flops=peak32)
        rows.append(r)
        print(
            f"(N,P,C)=({N},{P},{C}): sweep {r['sweep_s'] * 1e3:.2f} ms, "
            f"bound {r['bound_s'] * 1e3:.2f} ms, ratio {r['ratio']:.2f}, "
            f"ops {r['ops_s'] * 1e3:.2f} ms, compile {r['compile_s']:.1f} s",
            flush=True,
        )
    md = [
        f"# sweep_floor\n\nMachine: {machine_info()}\n",
        f"Read bandwidth {bw / 1e9:.2f} GB/s (sum over 1 GiB float64); GEMM 2000² "
        f"{peak64 / 1e9:.1f} GFLOP/s (f64), {peak32 / 1e9:.1f} GFLOP/s (f32).\n",
        "bound = Σ_ops max(bytes/bandwidth, flops/peak); ratio = sweep_s / bound_s "
        "(target ≤ 1.5). ops = Φ GEMM + K_w GEMV + Gaussian step timed alone.\n",
    ]
    table = [{
        "(N,P,C)": f"({r['N']},{r['P']},{r['C']})", "K dtype": r["kernel_dtype"],
        "sweep ms": r["sweep_s"] * 1e3, "ops ms": r["ops_s"] * 1e3, "bound ms": r["bound_s"] * 1e3,
        "ratio": r["ratio"], "Φ GEMM ms": r["substep_s"]["phi_gemm"] * 1e3,
        "Φ einsum ms": r["substep_s"]["phi_einsum_naive"] * 1e3,
        "K_w ms": r["substep_s"]["kw_gemv"] * 1e3,
        "Gauss ms": r["substep_s"]["gaussian_step"] * 1e3,
        "inner ms": r["substep_s"]["inner_steps"] * 1e3,
        "λ+ν+ς ms": (r["substep_s"]["lam"] + r["substep_s"]["nu"]
                     + r["substep_s"]["varsigma"]) * 1e3,
        "compile s": r["compile_s"],
    } for r in rows]  # fmt: skip
    cols = list(table[0])
    md.append(md_table(table, cols, {c: "{:.3g}" for c in cols}))
    write_results(args.name, {"shapes": rows, "wall_s": time.time() - t0, "quick": args.quick},
                  "\n".join(md))  # fmt: skip


if __name__ == "__main__":
    main()
