"""Benchmark: the calibration map without refits (PSIS-LOO) against the 3-fold map (issue 21).

Per (data set, split), one ``BM3KLClassifier(calibration="cv")`` fit with the estimator's default
prior and run length; on its posterior, both maps:

* ``cv``: the default 3-fold cross-fitted map (three refits on 2/3 of the data);
* ``loo``: the map fitted on PSIS-LOO-weighted training draws of the same posterior
  (``calibration="loo"``; no refit), with the share of training points whose Pareto k̂ > 0.7.

Both are applied to the same test draws, so the difference in test log-loss is the map's alone.
The fit seconds of each are reported: ``loo_s`` is the main fit plus the PSIS map, ``cv_s`` the
main fit plus the three refits.

Resumable (``_store``): every finished unit is written at once; a restart skips finished units.
Usage::

    OPENBLAS_NUM_THREADS=1 nohup .venv/bin/python benchmarks/calibration_loo.py \\
        --datasets breast-sklearn,sonar,liver,ionosphere,pima,heart,wine,glass --splits 1 &

Writes ``benchmarks/results/calibration_loo.{json,md}``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _store import ResumableResults  # noqa: E402

DATASETS = "breast-sklearn,sonar,liver,ionosphere,pima,heart,wine,glass"


def load(dataset: str):
    from bayesmkl.datasets import load_demo, load_uci

    if dataset == "breast-sklearn":
        X, y, _ = load_demo()
        return X, y
    return load_uci(dataset)


def run_unit(dataset: str, split: int, params: dict) -> dict:
    from sklearn.metrics import log_loss
    from sklearn.model_selection import StratifiedShuffleSplit

    from bayesmkl import BM3KLClassifier
    from bayesmkl._validation import validate_labels

    X, y = load(dataset)
    sss = StratifiedShuffleSplit(n_splits=split + 1, test_size=0.3, random_state=0)
    tr, te = list(sss.split(X, y))[split]
    clf = BM3KLClassifier(**params, calibration="cv", random_state=split, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        clf.fit(X[tr], y[tr])
        cv_s = time.perf_counter() - t0
    main_s = clf.run_report_.seconds
    p_cv = clf.predict_proba(X[te])
    loo = copy.deepcopy(clf).set_params(calibration="loo")
    K = clf.kernel_input_.pool.train_kernels()
    _, codes = validate_labels(y[tr], len(tr))
    t0 = time.perf_counter()
    loo.calibrator_, _ = loo._loo_calibration(K, codes, None)
    loo_map_s = time.perf_counter() - t0
    p_loo = loo.predict_proba(X[te])
    return {
        "dataset": dataset,
        "split": split,
        "n_train": len(tr),
        "converged": bool(clf.run_report_.converged),
        "rhat_max": clf.run_report_.rhat_max,
        "logloss_cv": log_loss(y[te], p_cv, labels=clf.classes_),
        "logloss_loo": log_loss(y[te], p_loo, labels=clf.classes_),
        "acc": float(np.mean(clf.classes_[p_cv.argmax(1)] == y[te])),
        "temperature_cv": clf.calibrator_.temperature,
        "temperature_loo": loo.calibrator_.temperature,
        "khat_bad_frac": loo.calibrator_.khat_bad_frac,
        "cv_s": cv_s,
        "loo_s": main_s + loo_map_s,
    }


def markdown(results: dict) -> str:
    units = list(results["units"].values())
    out = [
        "# Calibration without refits: PSIS-LOO map against the 3-fold map",
        "",
        f"Estimator parameters: `{results['config']['params'] or 'defaults'}`. Same posterior, "
        "same test draws; only the map differs. Δ = LOO − CV test log-loss (target |Δ| ≤ 0.02).",
        "",
        "| data | split | N | log-loss CV | log-loss LOO | Δ | T CV | T LOO | k̂ > 0.7 | CV s "
        "| LOO s | converged |",
        "|" + "---|" * 12,
    ]
    for u in units:
        d = u["logloss_loo"] - u["logloss_cv"]
        out.append(
            f"| {u['dataset']} | {u['split']} | {u['n_train']} | {u['logloss_cv']:.3f} | "
            f"{u['logloss_loo']:.3f} | {d:+.3f} | {u['temperature_cv']:.2f} | "
            f"{u['temperature_loo']:.2f} | {u['khat_bad_frac']:.0%} | {u['cv_s']:.0f} | "
            f"{u['loo_s']:.0f} | {u['converged']} |"
        )
    if units:
        d = np.array([u["logloss_loo"] - u["logloss_cv"] for u in units])
        out += ["", f"{np.sum(np.abs(d) <= 0.02)} of {len(d)} units within 0.02; "
                f"mean Δ {d.mean():+.3f}, max |Δ| {np.abs(d).max():.3f}."]  # fmt: skip
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=DATASETS)
    p.add_argument("--splits", type=int, default=1)
    p.add_argument("--params", default="", help="estimator parameters, e.g. 'eta=2,gamma0=1'")
    p.add_argument("--out", default=str(HERE / "results" / "calibration_loo"))
    args = p.parse_args(argv)
    params = {}
    for item in filter(None, args.params.split(",")):
        k, v = item.split("=")
        params[k] = float(v) if k != "sampler" else v
    store = ResumableResults(Path(args.out + ".json"), {"params": params}, markdown)
    for split in range(args.splits):
        for ds in args.datasets.split(","):
            key = f"{ds} split={split}"
            if store.done(key):
                continue
            row = run_unit(ds, split, params)
            store.add(key, row)
            print(f"{key}: CV {row['logloss_cv']:.3f} LOO {row['logloss_loo']:.3f}", flush=True)


if __name__ == "__main__":
    main()
