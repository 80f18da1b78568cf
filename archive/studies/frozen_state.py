"""Does the default kernel-weight move sample w | λ, ν exactly on a realistic problem? (issue 9)

Breast cancer (70/30 split, seed 0), BSVM-16 pool (P = 16, N = 398), the paper's
hyper-parameters. One posterior draw of (λ, ν) is taken from a default run (chain 0 after
warm-up) and frozen; the sample scales below ``NU_ACTIVE`` are set to ``NU_PRUNED`` (1e-300:
their sample weights are then 0 to 150 digits, so the conditional is exactly that of the
active points, and an exact reference needs only them). Two samplers then target the same
conditional p(w | λ, ν) — (a, b) integrated out, Gamma(η, 1) prior on e:

* **default**: the package's default sweep (collapsed move: pairwise Gibbs on the simplex,
  collapsed HMC with the n_active largest ν (64 in the stored results), scale refresh, then
  (a, b) | w, λ, ν) with λ, ν, ς held fixed, so that its w-marginal is p(w | λ, ν);
* **nuts**: NumPyro NUTS on φ = log e of the same density with *every* active sample weight
  integrated out (:func:`bayesmkl.inference.collapsed.collapsed_log_lik` with Φ_I = 0).

4 chains each. The mean and sd of every w_m and the mean of U(w) = −log p(T | w, λ, ν) are
compared by z = (x̂_default − x̂_nuts) / √(MCSE_default² + MCSE_nuts²) (ArviZ MCSE); the
default move passes where every |z| ≤ 3 (with 2·P + 1 statistics, a few |z| near 3 are
expected by chance: the table lists them all).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/frozen_state.py [--samples 600]

Writes ``benchmarks/results/frozen_state.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from arviz_stats.base import array_stats
from numpyro.infer import MCMC, NUTS

sys.path.insert(0, str(Path(__file__).parent))
from move_compare import load_data, run  # noqa: E402
from nu_diagnose import frozen_sweep  # noqa: E402

from bayesmkl._x64 import x64_scope  # noqa: E402
from bayesmkl.inference import collapsed as coll  # noqa: E402
from bayesmkl.inference import sampler as kmod  # noqa: E402
from bayesmkl.likelihood import pseudo_observations  # noqa: E402

NU_ACTIVE = 1e-4
NU_PRUNED = 1e-300
TAU = 1e-4  # the paper's bias prior variance (BM3KL's default)
SITES = ("e", "a", "b", "lam", "nu", "varsigma")


def frozen_state(K, delta, warmup, cache: Path):
    """Chain 0's first post-warm-up draw of a default run (cached), pruned scales set tiny."""
    if cache.exists():
        z0 = dict(np.load(cache))
    else:
        _, z = run({}, K, delta, warmup, 1)
        z0 = {k: np.asarray(z[k][0, 0]) for k in SITES}
        np.savez(cache, **z0)
    z0["nu"] = np.where(z0["nu"] < NU_ACTIVE, NU_PRUNED, z0["nu"])
    z0["a"] = np.where(z0["nu"] < NU_ACTIVE, 0.0, z0["a"])
    return z0


def collapsed_target(K, delta, z0):
    """log p(T | w, λ, ν) with every active sample weight and b integrated out: a function of w."""
    nu = jnp.asarray(z0["nu"])
    n_act = int(np.max(np.sum(z0["nu"] >= NU_ACTIVE, axis=-1)))
    C, N = nu.shape
    zeros = jnp.zeros((K.shape[0], C, N))
    data = coll.collapsed_setup(K, jnp.zeros((C, N)), nu, zeros, n_act)
    T, V = pseudo_observations(delta, jnp.asarray(z0["lam"]))
    return jax.jit(lambda w: coll.collapsed_log_lik(w, data, T, V, TAU)), n_act


def run_nuts(loglik, P, warmup, samples, seed=1):
    def potential(phi):  # φ = log e, e ~ Gamma(1, 1): log p(φ) = φ − e^φ
        e = jnp.exp(phi)
        return jnp.sum(e - phi) - loglik(e / jnp.sum(e))

    mcmc = MCMC(
        NUTS(potential_fn=potential, target_accept_prob=0.9), num_warmup=warmup,
        num_samples=samples, num_chains=4, chain_method="vectorized", progress_bar=False,
    )  # fmt: skip
    init = jnp.log(jax.random.gamma(jax.random.key(seed + 7), 1.0, (4, P)))
    mcmc.run(jax.random.key(seed), init_params=init, extra_fields=("diverging",))
    phi = np.asarray(mcmc.get_samples(group_by_chain=True))
    e = np.exp(phi)
    return e / e.sum(-1, keepdims=True), float(np.mean(mcmc.get_extra_fields()["diverging"]))


def stats(w, loglik):
    """Per statistic: estimate, MCSE, ESS for mean and sd of each w_m and the mean of U."""
    U = -np.asarray(jax.vmap(jax.vmap(loglik))(jnp.asarray(w)))
    out = {}
    for name, x, method in [
        *[(f"mean w{m}", w[..., m], "mean") for m in range(w.shape[-1])],
        *[(f"sd w{m}", w[..., m], "sd") for m in range(w.shape[-1])],
        ("mean U", U, "mean"),
    ]:
        est = float(np.mean(x)) if method == "mean" else float(np.std(x))
        mcse = float(array_stats.mcse(x, chain_axis=0, draw_axis=1, method=method))
        ess = float(array_stats.ess(x, chain_axis=0, draw_axis=1, method="bulk"))
        out[name] = {"est": est, "mcse": mcse, "ess": ess}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--samples", type=int, default=600)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bayesmkl_frozen_state.npz"))
    args = ap.parse_args()
    out = Path(__file__).parent / "results"
    with x64_scope():
        K, delta = load_data()
        z0 = frozen_state(K, delta, args.warmup, args.cache)
        loglik, n_act = collapsed_target(K, delta, z0)
        init = {k: np.broadcast_to(v, (4, *v.shape)).copy() for k, v in z0.items()}
        plain = kmod.sweep
        kmod.sweep = frozen_sweep(("nu", "varsigma", "lam"))
        try:
            t = time.perf_counter()
            _, z = run({}, K, delta, args.warmup, args.samples, init_params=init)
            t_default = time.perf_counter() - t
        finally:
            kmod.sweep = plain
        t = time.perf_counter()
        w_nuts, div = run_nuts(loglik, K.shape[0], args.warmup, args.samples)
        t_nuts = time.perf_counter() - t
        s_def, s_nuts = stats(np.asarray(z["w"]), loglik), stats(w_nuts, loglik)
    rows = []
    for k in s_def:
        a, b = s_def[k], s_nuts[k]
        zval = (a["est"] - b["est"]) / np.hypot(a["mcse"], b["mcse"])
        rows.append({"statistic": k, "default": a["est"], "nuts": b["est"], "z": float(zval),
                     "ess_default": a["ess"], "ess_nuts": b["ess"]})  # fmt: skip
    worst = max(abs(r["z"]) for r in rows)
    meta = {
        "data": "breast cancer, 70/30 seed 0, bsvm16, paper hyper-parameters",
        "active_points": n_act, "chains": 4, "warmup": args.warmup, "samples": args.samples,
        "seconds_default": round(t_default, 1), "seconds_nuts": round(t_nuts, 1),
        "nuts_divergence_rate": div, "max_abs_z": worst, "passes_3_mcse": worst <= 3.0,
    }  # fmt: skip
    (out / "frozen_state.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [
        "# Frozen-state check of the default move (breast cancer, bsvm16)",
        "",
        f"One posterior draw of (λ, ν) frozen ({n_act} active sample weights, the rest at "
        f"ν = {NU_PRUNED:g}); 4 chains × ({args.warmup} + {args.samples}) of the default sweep "
        f"with λ, ν, ς fixed ({t_default:.0f} s) against 4 chains of NUTS on log e of "
        f"p(w | λ, ν) with all of (a, b) integrated out ({t_nuts:.0f} s, divergence rate "
        f"{div:.3f}). z = difference / √(MCSE² + MCSE²). Largest |z|: {worst:.2f} "
        f"({'within' if worst <= 3 else 'NOT within'} 3 MCSE).",
        "",
        "| statistic | default | NUTS | z | ESS default | ESS NUTS |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['statistic']} | {r['default']:.5g} | {r['nuts']:.5g} | {r['z']:.2f} | "
            f"{r['ess_default']:.0f} | {r['ess_nuts']:.0f} |"
        )
    (out / "frozen_state.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
