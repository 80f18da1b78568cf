"""Stress test of the estimator's default sampler: NaN runs and silent failures (issue 11).

Protocol (full run): every shared UCI data set — binary (sonar, liver, ionosphere, pima, heart,
breast) and multiclass (wine, glass, and mfeat with its Fourier view only, subsampled to 500
rows, 50 per class) — plus the data of ``../shared/repro/nan_divergence.py`` (350 rows, 12
distinct), each with a stratified 70/30 split (seed 0), × γ0 ∈ {1, 100, 10000} × 5 seeds ×
2,000 sweeps (1,000 warm-up + 1,000 kept). The 5 seeds are the 5 chains of one
``BM3KLClassifier`` fit with ``num_chains=5, chain_method="vectorized"`` (NumPyro splits one key
into 5 chain keys), with the estimator's DEFAULT sampler and hyper-parameters otherwise.

Counted per run (= per chain):

* ``nan_run``: some kept draw of the chain is NaN/inf;
* ``raised`` / ``warned``: the fit raised (``SamplerDivergenceError``) or warned
  (``SamplerDivergenceWarning``);
* ``silent_failure``: a NaN run with neither, or test probabilities returned non-finite without
  an exception, or labels derived from NaN probabilities.

Writes ``benchmarks/results/stress.json`` (``{"runs", "nan_runs", "silent_failures", ...,
"rows": [...]}``) and ``stress.md``; ``--quick`` (repro + liver + wine, 200 sweeps) writes
``stress_quick.*``; ``--tiny`` (a 60-row synthetic set, 6 sweeps, 2 chains, γ0 ∈ {1, 100},
no calibration refits: a smoke run) writes ``stress_tiny.*``.

Resumable (``benchmarks/_resume.py``): every fit (data set × γ0) is written to the JSON as soon
as it ends, with the package commit and the load average; a restart with the same settings
skips the fits already there (``--fresh`` starts over).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/stress.py [--quick | --tiny]
        [--datasets repro,wine] [--gammas 1,100] [--sweeps 2000] [--chains 5] [--out STEM]
        [--fresh]

Cost: the sampler's (a, b) step is O(C·N³) per sweep, so pima and breast (N = 537 and 398 train
points) dominate; the full protocol is several CPU-hours on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _resume import UnitStore, tiny_data, write_atomic  # noqa: E402
from sweep_floor import RESULTS, _default, machine_info, md_table  # noqa: E402

from bayesmkl import BM3KLClassifier  # noqa: E402
from bayesmkl._checks import SamplerDivergenceError, SamplerDivergenceWarning  # noqa: E402
from bayesmkl.datasets import make_duplicated_rows  # noqa: E402

BINARY = ("sonar", "liver", "ionosphere", "pima", "heart", "breast")
MULTICLASS = ("wine", "glass", "mfeat-fou")
FULL = ("repro",) + BINARY + MULTICLASS
QUICK = ("repro", "liver", "wine")
GAMMAS = (1.0, 100.0, 10000.0)


def load(name: str):
    """``(X, y)`` or ``None`` when the shared data are absent."""
    if name == "repro":
        return make_duplicated_rows()
    if name == "tiny":
        return tiny_data()
    from bayesmkl.datasets import find_uci_dir, load_mfeat, load_uci

    if find_uci_dir() is None:
        return None
    if name.startswith("mfeat"):
        views, y = load_mfeat(views=(name.split("-", 1)[1],))
        rng = np.random.default_rng(0)
        idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == k), 50, replace=False)
                                      for k in np.unique(y)]))  # fmt: skip
        return views[0][idx], y[idx]
    return load_uci(name)


def split(X, y, seed=0, test=0.3):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=test, random_state=seed, stratify=y)


def run_one(name, X, y, gamma0, chains, sweeps, calibration="cv"):
    """One vectorized fit; one row per chain."""
    Xtr, Xte, ytr, yte = split(X, y)
    warmup = sweeps // 2
    clf = BM3KLClassifier(
        gamma0=gamma0,
        num_warmup=warmup,
        num_samples=sweeps - warmup,
        num_chains=chains,
        chain_method="vectorized",
        random_state=0,
        progress_bar=False,
        calibration=calibration,
    )
    raised, warned = "", False
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clf.fit(Xtr, ytr)
        except SamplerDivergenceError as exc:
            raised = str(exc)
    fit_s = time.perf_counter() - t0
    warned = any(issubclass(w.category, SamplerDivergenceWarning) for w in caught)
    post = getattr(clf, "posterior_", None)
    if post is None:
        raise RuntimeError(f"{name}: the fit failed before sampling: {raised}")
    finite = np.ones(chains, bool)
    for v in post.values():
        finite &= np.isfinite(v.reshape(chains, -1)).all(axis=1)
    # per-chain test predictions (through the estimator's guarded path, all draws at once)
    pred_error = ""
    P = None
    try:
        P = clf.proba_draws(Xte)  # (chains·draws, M, K), chain-major
    except (FloatingPointError, ValueError) as exc:
        pred_error = f"{type(exc).__name__}: {exc}"
    rows = []
    for c in range(chains):
        row = {
            "dataset": name,
            "n_train": len(ytr),
            "n_classes": len(np.unique(y)),
            "n_kernels": len(clf.kernel_names_),
            "gamma0": gamma0,
            "chain": c,
            "sweeps": sweeps,
            "sampler": clf.sampler,
            "nan_run": bool(not finite[c]),
            "raised": bool(raised),
            "warned": bool(warned),
            "diverging_frac": float(np.mean(clf.sample_stats_["diverging"][c])),
            "fit_s": round(fit_s, 2),
        }
        returned_nonfinite = False
        if P is not None:
            Pc = P.reshape(chains, -1, *P.shape[1:])[c].mean(axis=0)
            returned_nonfinite = not np.all(np.isfinite(Pc))
            labels = clf.classes_[np.argmax(Pc, axis=1)]
            row["test_accuracy"] = round(float(np.mean(labels == yte)), 4)
        else:
            row["test_accuracy"] = None
            row["prediction_error"] = pred_error[:200]
        row["silent_failure"] = bool(
            (row["nan_run"] and not (row["raised"] or row["warned"])) or returned_nonfinite
        )
        rows.append(row)
    if raised:
        rows[0]["error"] = raised[:300]
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="repro + liver + wine, 200 sweeps")
    ap.add_argument(
        "--tiny", action="store_true",
        help="smoke run: a 60-row synthetic set, 6 sweeps, 2 chains, γ0 1 and 100, raw rule",
    )  # fmt: skip
    ap.add_argument("--datasets", help="comma-separated subset of " + ",".join(FULL + ("tiny",)))
    ap.add_argument("--gammas", help="comma-separated γ0 values (default 1,100,10000)")
    ap.add_argument("--sweeps", type=int, help="sweeps per chain (default 2000; quick 200)")
    ap.add_argument("--chains", type=int, default=None, help="seeds = vectorized chains (5)")
    ap.add_argument("--out", help="results path stem (default benchmarks/results/stress[_quick])")
    ap.add_argument("--fresh", action="store_true", help="ignore the fits already in the JSON")
    args = ap.parse_args(argv)
    default_names = ("tiny",) if args.tiny else (QUICK if args.quick else FULL)
    names = args.datasets.split(",") if args.datasets else default_names
    default_gammas = (1.0, 100.0) if args.tiny else GAMMAS
    gammas = tuple(float(g) for g in args.gammas.split(",")) if args.gammas else default_gammas
    sweeps = args.sweeps or (6 if args.tiny else 200 if args.quick else 2000)
    chains = args.chains or (2 if args.tiny else 5)
    calibration = None if args.tiny else "cv"
    stem = "stress_tiny" if args.tiny else "stress_quick" if args.quick else "stress"
    out = Path(args.out) if args.out else RESULTS / stem
    from bayesmkl.estimator import enable_compilation_cache

    enable_compilation_cache()  # a restarted run loads the programs compiled before
    store = UnitStore(
        out.with_suffix(".json"),
        {"sweeps": sweeps, "chains": chains, "calibration": calibration,
         "sampler": BM3KLClassifier().sampler, "split": "stratified 70/30, seed 0"},
        fresh=args.fresh, default=_default,
    )  # fmt: skip
    rows, skipped = [], []
    for name in names:
        data = None
        for g in gammas:
            key = store.key(name, f"gamma0={g:g}")
            if store.done(key):
                rows += store.result(key)
                continue
            data = load(name) if data is None else data
            if data is None:
                skipped.append(name)
                print(f"{name}: shared UCI data not found; skipped", flush=True)
                break
            got = run_one(name, *data, g, chains, sweeps, calibration)
            rows += got
            print(
                f"{name:>10} γ0={g:<7g} nan={sum(r['nan_run'] for r in got)} "
                f"silent={sum(r['silent_failure'] for r in got)} raised={got[0]['raised']} "
                f"acc={[r['test_accuracy'] for r in got]} fit {got[0]['fit_s']:.1f} s",
                flush=True,
            )
            store.add(key, got)
    summary = {
        "runs": len(rows),
        "nan_runs": sum(r["nan_run"] for r in rows),
        "silent_failures": sum(r["silent_failure"] for r in rows),
        "raised_runs": sum(r["raised"] for r in rows),
        "warned_runs": sum(r["warned"] for r in rows),
        "protocol": {
            "datasets": list(names),
            "skipped": skipped,
            "gamma0": list(gammas),
            "seeds_as_vectorized_chains": chains,
            "sweeps_per_chain": sweeps,
            "split": "stratified 70/30, seed 0",
            "sampler": rows[0]["sampler"] if rows else None,
            "quick": bool(args.quick),
            "tiny": bool(args.tiny),
            "calibration": calibration,
        },
    }
    md = [
        "# Stress test: NaN runs and silent failures (issue 11)\n",
        f"{summary['runs']} runs (chains), {summary['nan_runs']} NaN runs, "
        f"{summary['silent_failures']} silent failures, {summary['raised_runs']} runs in fits "
        f"that raised, {summary['warned_runs']} in fits that warned. Sampler: "
        f"`{summary['protocol']['sampler']}`, {sweeps} sweeps per chain, "
        f"{chains} vectorized chains per fit, γ0 ∈ {list(gammas)}.\n",
        md_table(
            rows,
            [
                "dataset",
                "n_train",
                "n_classes",
                "gamma0",
                "chain",
                "nan_run",
                "raised",
                "warned",
                "silent_failure",
                "diverging_frac",
                "test_accuracy",
                "fit_s",
            ],
        ),  # fmt: skip
    ]
    if skipped:
        md.append(f"\nSkipped (no shared data): {', '.join(skipped)}\n")
    store.save(benchmark=stem, machine=machine_info(), **summary, rows=rows)
    write_atomic(out.with_suffix(".md"), "\n".join(md))
    print(f"wrote {out.with_suffix('.json')} and .md")
    return summary


if __name__ == "__main__":
    main()
