"""Simulation-based calibration (Talts et al. 2018) of the default sampler (issue 22, item 4).

Why margins: BM³KL's pseudo-likelihood L′ is no distribution over labels (Σ_δ L′(δ | f) depends
on f), so drawing labels from the model and refitting is no valid SBC. The augmented model with
per-observation margins m is a proper generative model (docs/math.md §1.8): with the labels δ
held fixed as covariates,

    θ = (e, ς, ν, a, b) ~ p0 (docs/math.md §2),  λ_ci ~ Exp(γ0),  m_ci ~ N(δ_ci f_ci − λ_ci, λ_ci),

and the sampler's target with margins m (``MCMC.run(key, K, delta, None, m)``) is exactly the
posterior of (θ, λ) given m; at m ≡ 1 it is the BM³KL posterior. So each replication draws
(θ, λ, m) from this model, runs the default sampler on m and ranks the true values among the
posterior draws; under a correct sampler every rank is uniform on {0, …, L}.

Per replication: 2-D inputs X ~ N(0, I) (N = 60), labels from a noisy linear (binary, C = 1)
or nearest-of-three-centres (3-class, C = 3) rule, P = 4 unit-diagonal Gaussian kernels of
widths 0.5, 1, 2, 4; the default prior (``PRIORS["default"]``) and the estimator's default
sampler (``"collapsed_log"``, step 0.01, 10 leapfrog steps, ``nu_update="gibbs"``, n_active 32,
300 adapting warm-up sweeps) run by the estimator's :class:`~bayesmkl.sampler.runner.
ChainRunner`, 3 chains. Post-warm-up, each chain is thinned to 33 draws (L = 99) at thinning
t = 10; when the smallest bulk ESS of the ranked quantities over the unthinned draws is below
L, the chains are extended and t doubled, up to 80 (Talts et al.'s advice: thin to about L
independent draws); replications still short are counted. Ranked quantities: each w_m, each
b_c, f_ci at three fixed training points, Σλ, the mean of log ν and the log joint density
(−potential energy; for the truth, :func:`bayesmkl.model.classification.log_joint` with the
margins). A rank
is the number of draws below the truth (ties broken at random).

Summary: per quantity a χ² test of uniformity of the ranks in 10 bins, Bonferroni-adjusted over
all quantities of both problems; ``min_p`` is the smallest adjusted p-value (issue 22 target:
``min_p ≥ 0.01``). The machinery must be able to fail: two deliberately wrong samplers run on the
first replications of the binary problem (same data and keys): ``lam_ignores_margin`` (the λ step
uses m ≡ 1, a threading bug) and ``no_log_jacobian`` (the log-e HMC move without its Jacobian).

Resumable (``benchmarks/_common.py``): each replication is one unit, written at once with the
commit and the load average; a restart skips the finished ones. Writes
``benchmarks/results/sbc.json``, ``sbc.md`` and ``sbc_ranks.png``.

Usage::

    OPENBLAS_NUM_THREADS=1 nohup nice -n 5 .venv/bin/python benchmarks/sbc.py \\
        [--reps 200] [--wrong-reps 50] [--problems binary,3-class] [--variants no_log_jacobian]
        [--tiny] [--out STEM] [--fresh] [--summary-only] [--pair-path residual] [--landmarks M]

``--landmarks M`` runs the same SBC for the landmark (reduced-support) model of docs/math.md §16:
each replication draws M landmark rows uniformly among its N points (Z = X[idx]), the kernels
are K(X, Z) ``(P, N, M)``, the truth is drawn from the landmark model's prior (a, ν, ς of shape
(C, M); f = A Ψ_wᵀ + b over all N points; λ and m over the N points as above) and the sampler
is the same default sampler on the landmark block (``BM3KL(..., landmarks=True)``: (a, b) in
weight space, the collapsed target over Ψ_w); the ranked f are at the same three training
points. The wrong variants apply unchanged (they patch the λ step and the log-e move, which the
landmark sweep shares); a third, ``ab_half_nu``, applies to the landmark path only: its
weight-space (a, b) step reads ν/2 for the landmark weights' prior variances (a threading bug
of the one conditional the landmark model changes most). Writes ``results/sbc_landmarks``
unless ``--out`` says otherwise.

``--pair-path`` forces the route of the pairwise kernel-weight updates
(:data:`bayesmkl.sampler.simplex.PAIR_PATHS`; at P = 4 the sampler's own choice is ``"gram"``,
which forms M): a forced run records the route in its settings and writes
``results/sbc_pairs_<route>`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from scipy import stats

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, UnitStore, json_default, machine_info, md_table, write_atomic  # noqa: E402

from bayesmkl.estimators._fitting import enable_compilation_cache  # noqa: E402
from bayesmkl.model.classification import (  # noqa: E402
    PRIORS,
    combine_kernels,
    decision_values,
    kernel_decision_values,
    log_joint,
)
from bayesmkl.sampler import conditionals as cond  # noqa: E402
from bayesmkl.sampler import moves, runner, simplex  # noqa: E402
from bayesmkl.sampler.runner import ChainRunner  # noqa: E402
from bayesmkl.sampler.sampler import BM3KL  # noqa: E402

PROBLEMS = {"binary": 1, "3-class": 3}
VARIANTS = ("correct", "lam_ignores_margin", "no_log_jacobian", "ab_half_nu")
FULL = dict(N=60, widths=(0.5, 1.0, 2.0, 4.0), chains=3, per_chain=33, warmup=300, chunk=50,
            thin=10, max_thin=80, bins=10, points=3)  # fmt: skip
TINY = dict(N=12, widths=(0.7, 2.0), chains=2, per_chain=2, warmup=20, chunk=10, thin=2,
            max_thin=4, bins=5, points=1)  # fmt: skip
SEED = 224


def gaussian_kernels(X, widths):
    """Unit-diagonal Gaussian kernels exp(−‖x − y‖²/(2σ²)): ``(P, N, N)``."""
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return np.stack([np.exp(-d2 / (2.0 * s**2)) for s in widths])


def landmark_rows(problem: str, rep: int, N: int, M: int):
    """The M landmark rows of a replication: a uniform subset of its N points, sorted (a stream
    of its own, so that the exact model's draws do not move)."""
    rng = np.random.default_rng([SEED, 7, list(PROBLEMS).index(problem), rep])
    return np.sort(rng.choice(N, M, replace=False))


def simulate(problem: str, rep: int, cfg: dict, hyper, landmarks: int = 0):
    """One replication's data and truth, from the generative model with margins (docstring);
    ``landmarks = M > 0``: the landmark model's, with K(X, Z) ``(P, N, M)``."""
    C, N, P = PROBLEMS[problem], cfg["N"], len(cfg["widths"])
    rng = np.random.default_rng([SEED, list(PROBLEMS).index(problem), rep])
    X = rng.normal(size=(N, 2))
    if C == 1:
        y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=N) > 0).astype(int)
        delta = np.where(y == 1, 1.0, -1.0)[None, :]
    else:
        centres = np.array([[1.0, 0.0], [-0.5, 0.87], [-0.5, -0.87]])
        d = np.sum((X[:, None, :] + 0.3 * rng.normal(size=(N, 1, 2)) - centres) ** 2, axis=-1)
        delta = np.where(np.argmin(d, axis=1)[None, :] == np.arange(C)[:, None], 1.0, -1.0)
    K = gaussian_kernels(X, cfg["widths"])
    S = N  # the sample weights' support: N points, or M landmarks
    if landmarks:
        if not 0 < landmarks <= N:
            raise ValueError(f"--landmarks must be in 1..N = {N}; got {landmarks}")
        K = K[:, :, landmark_rows(problem, rep, N, landmarks)]
        S = landmarks
    h = hyper
    e = rng.gamma(h.eta, 1.0, size=P)
    varsigma = rng.gamma(h.beta_a, 1.0 / h.kappa, size=(C, S))
    nu = rng.gamma(h.alpha_a, 1.0 / varsigma)
    a = rng.normal(size=(C, S)) * np.sqrt(nu)
    b = rng.normal(size=C) * np.sqrt(h.bias_prior_var)
    lam = rng.exponential(1.0 / h.gamma0, size=(C, N))
    f = np.asarray(true_decision_values(K, e / e.sum(), a, b, bool(landmarks)))
    margin = delta * f - lam + np.sqrt(lam) * rng.normal(size=(C, N))
    z = {"e": e, "varsigma": varsigma, "nu": nu, "a": a, "b": b, "lam": lam}
    return K, delta, margin, z


def true_decision_values(K, w, a, b, landmarks: bool):
    """f ``(C, N)`` at the true values: A K_w + b (exact) or A Ψ_wᵀ + b (landmark model)."""
    if landmarks:
        return kernel_decision_values(jnp.asarray(K), jnp.asarray(w), jnp.asarray(a),
                                      jnp.asarray(b), landmarks=True)  # fmt: skip
    return decision_values(combine_kernels(jnp.asarray(K), jnp.asarray(w)), jnp.asarray(a),
                           jnp.asarray(b))  # fmt: skip


def quantities(w, a, b, lam, nu, neg_pe, K, points, landmarks: bool = False):
    """Ranked quantities of draws with leading axes ``(chains, draws)``: ``{name: (..., )}``.
    ``landmarks``: K is K(X, Z) ``(P, N, M)`` and a is ``(..., C, M)``."""
    Kp = np.swapaxes(K[:, points, :], 1, 2) if landmarks else K[:, :, points]  # (P, ·, J)
    Kcols = np.einsum("...p,pnj->...nj", w, Kp)  # K_w[:, points] (exact), Ψ_w[points, :]ᵀ
    f = np.einsum("...cn,...nj->...cj", a, Kcols) + b[..., None]
    out = {f"w[{m}]": w[..., m] for m in range(w.shape[-1])}
    out.update({f"b[{c}]": b[..., c] for c in range(b.shape[-1])})
    for c in range(f.shape[-2]):
        out.update({f"f[{c},{i}]": f[..., c, j] for j, i in enumerate(points)})
    out["sum_lam"] = lam.sum(axis=(-2, -1))
    out["mean_log_nu"] = np.log(nu).mean(axis=(-2, -1))
    out["log_joint"] = neg_pe
    return out


@contextlib.contextmanager
def variant_patch(variant: str):
    """The deliberately wrong samplers (module docstring), patched in while tracing."""
    if variant == "correct":
        yield
        return
    saved = (cond.sample_lam, moves.POSITIONS["log"], cond.sample_ab_weight_space)
    if variant == "lam_ignores_margin":
        cond.sample_lam = lambda key, f, delta, g0, weight=None, margin=None: saved[0](
            key, f, delta, g0, weight
        )
    elif variant == "no_log_jacobian":
        moves.POSITIONS["log"] = (jnp.log, jnp.exp, lambda u, U, gU: (U, jnp.exp(u) * gU))
    elif variant == "ab_half_nu":
        cond.sample_ab_weight_space = lambda key, Psi_w, T, V, nu, tau: saved[2](
            key, Psi_w, T, V, 0.5 * nu, tau
        )
    runner.clear_chunk_cache()  # the chunks are keyed by configuration, not by these patches
    try:
        yield
    finally:
        cond.sample_lam, moves.POSITIONS["log"], cond.sample_ab_weight_space = saved
        runner.clear_chunk_cache()


def replication(problem: str, rep: int, variant: str, cfg: dict, hyper, landmarks: int = 0) -> dict:
    """Simulate, sample, rank: one unit."""
    assert (
        cfg["warmup"] % cfg["chunk"] == 0
        and (cfg["chains"] * cfg["per_chain"] + 1) % cfg["bins"] == 0
    )
    t0 = time.perf_counter()
    K, delta, margin, z = simulate(problem, rep, cfg, hyper, landmarks)
    lm = bool(landmarks)
    points = list(range(cfg["points"]))
    w_true = z["e"] / z["e"].sum()
    f_true = true_decision_values(K, w_true, z["a"], z["b"], lm)
    zj = {k: jnp.asarray(v) for k, v in z.items()}
    lj_true = float(log_joint(zj, f_true, jnp.asarray(delta), hyper, margin=jnp.asarray(margin)))
    truth = quantities(w_true, z["a"], z["b"], z["lam"], z["nu"], lj_true, K, points, lm)
    kernel = BM3KL(*hyper, move="collapsed_log", step_size=0.01, n_leapfrog=10,
                   nu_update="gibbs", adapt_sweeps=cfg["warmup"], landmarks=lm)  # fmt: skip
    run = ChainRunner(kernel, cfg["chains"], cfg["chunk"])
    args = (jnp.asarray(K), jnp.asarray(delta), None, jnp.asarray(margin))
    key = jax.random.key(1_000_003 * list(PROBLEMS).index(problem) + rep)
    kept, sweeps, stats_ = [], 0, {"accept": [], "diverging": 0}
    thin = cfg["thin"]
    with variant_patch(variant):
        while True:
            need = cfg["warmup"] + cfg["per_chain"] * thin
            while sweeps < need:
                run.run(key, *args, extra_fields=("potential_energy", "accept_prob", "diverging"))
                run.post_warmup_state = run.last_state
                key = run.last_state.rng_key
                sweeps += cfg["chunk"]
                if sweeps > cfg["warmup"]:
                    d, x = run.get_samples(), run.get_extra_fields()
                    kept.append(quantities(d["w"], d["a"], d["b"], d["lam"], d["nu"],
                                           -x["potential_energy"], K, points, lm))  # fmt: skip
                    stats_["accept"].append(float(np.mean(x["accept_prob"])))
                    stats_["diverging"] += int(np.sum(x["diverging"]))
            n = cfg["per_chain"] * thin
            draws = {q: np.concatenate([k[q] for k in kept], axis=1)[:, :n] for q in truth}
            ess = {q: float(effective_sample_size(v)) for q, v in draws.items()}
            L = cfg["chains"] * cfg["per_chain"]
            if min(ess.values()) >= L or thin >= cfg["max_thin"]:
                break
            thin *= 2
    rng = np.random.default_rng([SEED, 99, list(PROBLEMS).index(problem), rep])
    ranks = {}
    for q, v in draws.items():
        sub = v[:, thin - 1 :: thin].ravel()  # (chains · per_chain,) = L draws
        below, ties = int(np.sum(sub < truth[q])), int(np.sum(sub == truth[q]))
        ranks[q] = below + int(rng.integers(0, ties + 1))
    return {
        "ranks": ranks, "ess_bulk": ess, "min_ess": min(ess.values()),
        "rhat_max": float(max(split_gelman_rubin(v) for v in draws.values())),
        "thin": thin, "sweeps_per_chain": sweeps, "short": min(ess.values()) < L,
        "accept_mean": float(np.mean(stats_["accept"])), "diverging": stats_["diverging"],
        "step_size": float(np.mean(np.asarray(run.last_state.step_size))),
        "capped": int(np.max(np.asarray(run.last_state.capped))),
        "seconds": round(time.perf_counter() - t0, 2),
    }  # fmt: skip


def chi2_uniform(ranks, L: int, bins: int):
    """χ² statistic and p-value of the ranks ∈ {0..L} against the uniform, ``bins`` bins."""
    counts = np.bincount(np.asarray(ranks) * bins // (L + 1), minlength=bins)
    chi2, p = stats.chisquare(counts)
    return counts.tolist(), float(chi2), float(p)


def summarise(rows: dict, cfg: dict) -> dict:
    """Per (problem, variant): per-quantity χ² tests, Bonferroni over the group's family."""
    L = cfg["chains"] * cfg["per_chain"]
    out = {}
    for group, recs in rows.items():
        names = list(recs[0]["ranks"])
        per_q = {}
        for q in names:
            counts, chi2, p = chi2_uniform([r["ranks"][q] for r in recs], L, cfg["bins"])
            per_q[q] = {"counts": counts, "chi2": chi2, "p": p}
        out[group] = {
            "replications": len(recs), "quantities": per_q,
            "short_ess": int(sum(r["short"] for r in recs)),
            "thin_counts": {str(t): sum(r["thin"] == t for r in recs)
                            for t in sorted({r["thin"] for r in recs})},
            "median_seconds": float(np.median([r["seconds"] for r in recs])),
            "diverging": int(sum(r["diverging"] for r in recs)),
            "post_warmup_chain_sweeps": int(sum((r["sweeps_per_chain"] - cfg["warmup"])
                                                * cfg["chains"] for r in recs)),
            "capped": int(sum(r["capped"] > 0 for r in recs)),
            "rhat_max": float(max(r["rhat_max"] for r in recs)),
            "min_ess_quantiles_0_5_50": [float(np.percentile([r["min_ess"] for r in recs], q))
                                         for q in (0, 5, 50)],
        }  # fmt: skip
    correct = [g for g in out if g.endswith("| correct")]
    family = sum(len(out[g]["quantities"]) for g in correct)
    for g, s in out.items():
        m = family if g in correct else len(s["quantities"])
        for q in s["quantities"].values():
            q["p_adj"] = min(1.0, q["p"] * m)
        s["bonferroni_family"] = m
        s["min_p"] = min(q["p_adj"] for q in s["quantities"].values())
    return out


def plot(summary: dict, cfg: dict, path: Path, ncol: int = 10) -> None:
    """Rank histograms: one panel per quantity, each (problem, sampler) on its own rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = [(g, i) for g, s in summary.items() for i in range(-(-len(s["quantities"]) // ncol))]
    fig, axes = plt.subplots(len(layout), ncol, figsize=(1.25 * ncol, 1.3 * len(layout)),
                             squeeze=False)  # fmt: skip
    for r, (g, part) in enumerate(layout):
        s, B = summary[g], cfg["bins"]
        lo, hi = stats.binom.ppf([0.005, 0.995], s["replications"], 1.0 / B)
        items = list(s["quantities"].items())[part * ncol : (part + 1) * ncol]
        for c in range(ncol):
            ax = axes[r, c]
            ax.set_xticks([])
            if c >= len(items):
                ax.axis("off")
                continue
            q, v = items[c]
            ax.axhspan(lo, hi, color="0.85")
            ax.bar(np.arange(B), v["counts"], width=1.0, color="C0" if "correct" in g else "C3")
            ax.set_ylim(0, max(hi, max(v["counts"])) * 1.1)
            ax.set_title(f"{q}  p={v['p_adj']:.2g}", fontsize=6)
            ax.tick_params(labelsize=5)
        name = g.replace(" | ", "\n") + f"\n(n={s['replications']})"
        axes[r, 0].set_ylabel(name if part == 0 else "", fontsize=6)
    fig.suptitle(f"SBC rank histograms ({cfg['bins']} bins; grey: 99% band of a uniform bin "
                 "count; p: Bonferroni-adjusted χ²)", fontsize=8)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(summary: dict, settings: dict) -> str:
    M = settings.get("landmarks")
    title = ("# Simulation-based calibration of the default sampler (issue 22, item 4)\n"
             if not M else
             f"# Simulation-based calibration of the landmark sampler (docs/math.md §16, issue 45):"
             f" M = {M} landmark rows among N = {settings['N']} points\n")  # fmt: skip
    md = [title,
          "Design: `benchmarks/sbc.py` (module docstring); settings "
          f"`{settings}`. Ranks among L = {settings['L']} thinned draws, χ² test of "
        f"{settings['bins']} bins per "
          "quantity, p-values Bonferroni-adjusted over all quantities of the correct sampler on "
          "both problems (the wrong variants: over their own quantities).\n"]  # fmt: skip
    rows = []
    for g, s in summary.items():
        rows.append({"problem | sampler": g, "replications": s["replications"],
                     "min adjusted p": f"{s['min_p']:.3g}", "family": s["bonferroni_family"],
                     "ESS < L": s["short_ess"], "thinning used": s["thin_counts"],
                     "divergent sweeps": f"{s['diverging']} of {s['post_warmup_chain_sweeps']}",
                     "capped": s["capped"],
                     "max R-hat": f"{s['rhat_max']:.3f}",
                     "median s / rep": f"{s['median_seconds']:.0f}"})  # fmt: skip
    md += [md_table(rows, list(rows[0])) if rows else "(no replications yet)\n"]
    md.append("\n" + verdict(summary) + "\n")
    for g, s in summary.items():
        md.append(f"\n## {g}\n")
        qrows = [{"quantity": q, "bin counts": " ".join(map(str, v["counts"])),
                  "χ²": f"{v['chi2']:.1f}", "p": f"{v['p']:.3g}", "p adj.": f"{v['p_adj']:.3g}"}
                 for q, v in s["quantities"].items()]  # fmt: skip
        md.append(md_table(qrows, ["quantity", "bin counts", "χ²", "p", "p adj."]))
    return "\n".join(md)


def verdict(summary: dict) -> str:
    """The findings in words, from the numbers (rewritten with every unit)."""
    out = []
    correct = {g: s for g, s in summary.items() if g.endswith("| correct")}
    if correct:
        min_p = min(s["min_p"] for s in correct.values())
        worst = min(((q, v["p_adj"], g) for g, s in correct.items()
                     for q, v in s["quantities"].items()), key=lambda t: t[1])  # fmt: skip
        n = ", ".join(f"{s['replications']} {g.split(' |')[0]}" for g, s in correct.items())
        out.append(
            f"**Default sampler**: {n} replications; smallest Bonferroni-adjusted p = "
            f"{min_p:.3g} ({worst[0]}, {worst[2].split(' |')[0]}): the issue's target "
            f"min_p ≥ 0.01 is {'met' if min_p >= 0.01 else 'NOT met'}."
        )
    for g, s in summary.items():
        if g in correct:
            continue
        q, v = min(s["quantities"].items(), key=lambda t: t[1]["p_adj"])
        out.append(
            f"**Deliberately wrong sampler `{g.split('| ')[1]}`** ({s['replications']} "
            f"replications of the binary problem, same data and keys): smallest adjusted p = "
            f"{v['p_adj']:.3g} ({q}); SBC {'detects' if v['p_adj'] < 0.01 else 'does NOT detect'}"
            " it at this size."
        )
    return "\n\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="replications per problem (200)")
    ap.add_argument("--wrong-reps", type=int, default=50, help="per wrong variant (50; 0: none)")
    ap.add_argument("--problems", default="binary,3-class", help="binary,3-class")
    ap.add_argument("--variants", help="wrong samplers to run (default: those that apply)")
    ap.add_argument("--tiny", action="store_true", help="smoke run: N = 12, P = 2, short chains")
    ap.add_argument("--out", help="results path stem (default benchmarks/results/sbc)")
    ap.add_argument("--fresh", action="store_true", help="ignore the units already in the JSON")
    ap.add_argument("--summary-only", action="store_true", help="summarise the finished units")
    ap.add_argument(
        "--landmarks",
        type=int,
        default=0,
        help="M > 0: SBC of the landmark model with M landmark rows (docs/math.md §16)",
    )
    ap.add_argument("--pair-path", default="auto", choices=simplex.PAIR_PATHS,
                    help="route of the pair updates (auto: the sampler's choice)")  # fmt: skip
    args = ap.parse_args(argv)
    simplex.PAIR_PATH = args.pair_path  # before anything is traced
    cfg = TINY if args.tiny else FULL
    enable_compilation_cache()  # a restart loads the compiled chunks
    hyper = PRIORS["default"]
    stem = "sbc_tiny" if args.tiny else "sbc"
    if args.landmarks:
        stem += "_landmarks"
    if args.pair_path != "auto":
        stem += f"_pairs_{args.pair_path}"
    out = Path(args.out) if args.out else RESULTS / stem
    settings = {
        **cfg,
        "L": cfg["chains"] * cfg["per_chain"],
        "prior": dict(hyper._asdict()),
        "sampler": "collapsed_log, step 0.01, 10 leapfrog, nu gibbs, n_active 32",
    }
    if args.pair_path != "auto":  # (absent otherwise: older results files stay resumable)
        settings["pair_path"] = args.pair_path
    if args.landmarks:  # (likewise)
        settings["landmarks"] = args.landmarks
        # the landmark sweep's extra cycles given w (8 at P = 4, M = 20: steps.inner_cycles_for)
        settings["inner_cycles"] = "auto"
    store = UnitStore(out.with_suffix(".json"), settings, fresh=args.fresh, default=json_default)
    problems = args.problems.split(",")
    units = [(p, "correct", r) for r in range(args.reps) for p in problems]
    variants = args.variants or ",".join(VARIANTS[1:] if args.landmarks else VARIANTS[1:3])
    variants = variants.split(",")
    if set(variants) - set(VARIANTS[1:]):
        raise SystemExit(f"--variants: unknown {sorted(set(variants) - set(VARIANTS[1:]))}")
    if "ab_half_nu" in variants and not args.landmarks:
        raise SystemExit("--variants ab_half_nu patches the landmark path only: add --landmarks M")
    wrong = [("binary", v, r) for v in variants for r in range(args.wrong_reps)]
    # the wrong variants first (short; each compiles once), then the correct sampler
    for problem, variant, rep in [] if args.summary_only else wrong + units:
        key = store.key(problem, variant, f"rep {rep}")
        if store.done(key):
            continue
        res = replication(problem, rep, variant, cfg, hyper, args.landmarks)
        print(f"{key}: {res['seconds']:.1f} s, thin {res['thin']}, min ESS "
              f"{res['min_ess']:.0f}, accept {res['accept_mean']:.2f}", flush=True)  # fmt: skip
        store.add(key, res)
    rows = {}
    for key, rec in store.units.items():
        problem, variant, _ = key.split(" | ")
        rows.setdefault(f"{problem} | {variant}", []).append(rec["result"])
    order = [f"{p} | {v}" for v in VARIANTS for p in PROBLEMS]
    summary = summarise({g: rows[g] for g in order if g in rows}, cfg)
    correct = [s for g, s in summary.items() if g.endswith("| correct")]
    min_p = min((s["min_p"] for s in correct), default=None)
    store.save(benchmark="sbc", machine=machine_info(), settings=settings, min_p=min_p,
               replications={g: s["replications"] for g, s in summary.items()},
               summary=summary)  # fmt: skip
    write_atomic(out.with_suffix(".md"), markdown(summary, settings))
    if summary:
        plot(summary, cfg, out.parent / f"{out.name}_ranks.png")
    print(f"min_p = {min_p}; wrote {out.with_suffix('.json')}, .md and _ranks.png")
    return summary


if __name__ == "__main__":
    main()
