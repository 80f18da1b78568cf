"""Study: do pair updates of the kernel weights with λ integrated out (w | a, b, ν; then
λ | f) raise the kernel weights' ESS per sweep?

A UCI set of ``../shared/data/uci`` (``--data``, default magic), a stratified subsample of
``--n`` training rows (seed 0; at most 2,000 of the rest for testing), the default classifier
with ``n_landmarks=M`` (or the exact model, ``--m exact``) and fixed run length (300 warm-up
sweeps, ``--draws`` draws, 4 chains, no calibration), the sampler's ``marginal_pairs`` (pair
updates per kernel and sweep of :func:`bayesmkl.sampler.simplex.pairwise_marginal`, 0 =
none) set through the estimator's kernel factory. Per unit: sampling seconds (compilation
excluded), the smallest bulk ESS of the kernel weights (also per draw), the smallest and
median bulk ESS of the decision values at 300 training rows, and both per second; the load
average when the unit ended. Resumable: one JSON entry per unit.

    BAYESMKL_DATA=../shared/data/uci OPENBLAS_NUM_THREADS=1 \
        python archive/studies/inner_cycles.py [--data magic] [--n 4000]
        [--m 100|exact] [--pairs 0,16] [--draws 1000] [--kernel n_active=100,n_leapfrog=3]

``--kernel`` passes further settings to the sampler kernel (integers), for the full collapse
of the landmark weights (``n_active`` = M) at shorter trajectories; with ``--pairs 0`` the
script also runs after the move was taken out.

Runs at the commit that added it (the session of 2026-11-28, 22:49 UTC); the move was taken
out of the package in the next commit.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "marginal_pairs"


def unit(name: str, n: int, M: int | None, pairs: float, draws: int, kernel=None) -> dict:
    import arviz as az
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    import bayesmkl.estimators.classifier as clf_module
    from bayesmkl import BM3KLClassifier
    from bayesmkl.datasets import load_uci

    X, y = load_uci(name)
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, train_size=n, test_size=min(2000, len(y) - n), random_state=0, stratify=y
    )
    base = clf_module.BM3KL
    extra = {**(kernel or {}), **({"marginal_pairs": pairs} if pairs else {})}
    clf_module.BM3KL = lambda *a, **k: base(*a, **{**k, **extra})
    try:
        clf = BM3KLClassifier(
            random_state=0, n_landmarks=M, num_warmup=300, num_samples=draws,
            calibration=None, progress_bar=False,
        )  # fmt: skip
        clf.fit(Xtr, ytr)
    finally:
        clf_module.BM3KL = base
    r = clf.run_report_
    secs = r.seconds - r.compile_seconds
    w = clf.posterior_["w"]
    F = np.asarray(clf.decision_draws(Xtr[:300]))[..., 0]  # (chains · draws, 300)
    F = F.reshape(w.shape[0], w.shape[1], -1)
    ess_w = min(float(az.ess(w[..., j])) for j in range(w.shape[-1]))
    ess_f = np.array([float(az.ess(F[..., j])) for j in range(F.shape[-1])])
    return {
        "data": name, "n": n, "M": M, "pairs": pairs, "draws": draws, "kernel": kernel,
        "sampling_s": secs,
        "compile_s": r.compile_seconds,
        "ess_w_min": ess_w, "ess_f_min": float(ess_f.min()),
        "ess_f_median": float(np.median(ess_f)),
        "ess_w_min_per_draw": ess_w / (4 * draws), "ess_w_min_per_s": ess_w / secs,
        "ess_f_min_per_s": float(ess_f.min()) / secs,
        "ess_f_median_per_s": float(np.median(ess_f)) / secs,
        "logloss": float(log_loss(yte, clf.predict_proba(Xte))),
        "loadavg": os.getloadavg(),
    }  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="magic")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--m", default="100")
    ap.add_argument("--pairs", default="0,16")
    ap.add_argument("--kernel", default="", help="k=v,... integer sampler-kernel settings")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--freeze-nu", action="store_true",
                    help="diagnostic, not a sampler of the model: hold nu at 1 (a prior "
                         "variance of 1 for every landmark weight)")  # fmt: skip
    args = ap.parse_args()
    if args.freeze_nu:
        import jax.numpy as jnp

        import bayesmkl.sampler.steps as steps

        steps.tpbn_gibbs_step = lambda k_nu, k_vs, a, vs, hyper, ig: (jnp.ones_like(a), vs)
    path = OUT.with_suffix(".json")
    done = json.loads(path.read_text()) if path.exists() else {}
    for m in args.m.split(","):
        M = None if m == "exact" else int(m)
        for p in args.pairs.split(","):
            key = f"{args.data} n={args.n} M={m} pairs={p} draws={args.draws}"
            kernel = dict((k, int(v)) for k, v in (kv.split("=") for kv in args.kernel.split(",")
                                                   if kv))  # fmt: skip
            if kernel:
                key += " " + args.kernel
            if args.freeze_nu:
                key += " nu frozen at 1"
            if key in done:
                continue
            t0 = time.perf_counter()
            done[key] = unit(args.data, args.n, M, float(p), args.draws, kernel)
            print(key, round(time.perf_counter() - t0), "s", done[key], flush=True)
            path.write_text(json.dumps(done, indent=1))
    rows = ["| unit | sampling s | ESS w min | ESS w min per draw | ESS f min | ESS f median "
            "| w min /s | f min /s | log-loss | load |", "|" + "---|" * 10]  # fmt: skip
    cols = (("sampling_s", ".0f"), ("ess_w_min", ".0f"), ("ess_w_min_per_draw", ".4f"),
            ("ess_f_min", ".0f"), ("ess_f_median", ".0f"), ("ess_w_min_per_s", ".2f"),
            ("ess_f_min_per_s", ".2f"), ("logloss", ".4f"))  # fmt: skip
    for key, u in done.items():  # "—": not recorded by that run
        cells = [format(u[c], f) if u.get(c) is not None else "—" for c, f in cols]
        rows.append(f"| {key} | " + " | ".join(cells) + f" | {u['loadavg'][0]:.2f} |")
    OUT.with_suffix(".md").write_text("# marginal_pairs study\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
