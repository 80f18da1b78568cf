"""Benchmark: how much of a test ECE is binning noise (issue 22's ECE line).

Top-label ECE with 15 bins on 60–230 test points is positive even for perfectly calibrated
probabilities, and by how much depends on how the confidences spread over the bins: a method
whose confidences sit in one bin shows less noise than one that spreads them. This script fits
the default ``BM3KLClassifier`` and the tuned SVC of ``calibration.py`` on the same splits and
seeds, and for each method's test probabilities computes

* ``ece``: the test ECE (as in ``calibration.py``);
* ``floor``: the mean ECE over ``--draws`` label sets drawn from the method's own probabilities,
  i.e. what a perfectly calibrated predictor with exactly these confidences would show on this
  many points (with its Monte Carlo standard error);
* ``excess``: ``ece − floor``, the part the binning noise does not explain.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/ece_floor.py [--datasets heart,sonar]

Writes ``benchmarks/results/ece_floor.{json,md}``; resumable (one unit per data set × split).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _resume import (  # noqa: E402
    finished_splits,
    fixed_run,
    mean_se,
    run_split_benchmark,
    split_arguments,
    write_atomic,
)
from calibration import baseline, ece_top_label  # noqa: E402

METHODS = ("BM3KL", "SVC")


def ece_floor(proba, n_draws: int, seed: int) -> tuple[float, float]:
    """Mean and Monte Carlo SE of the ECE when the labels are drawn from ``proba`` itself."""
    rng = np.random.default_rng(seed)
    cum = np.cumsum(proba, axis=1)
    eces = []
    for _ in range(n_draws):
        u = rng.uniform(size=(len(proba), 1))
        codes = np.minimum((u > cum).sum(axis=1), proba.shape[1] - 1)
        eces.append(ece_top_label(proba, codes))
    eces = np.asarray(eces)
    return float(eces.mean()), float(eces.std(ddof=1) / np.sqrt(n_draws))


def unit(X, y, tr, te, seed, n_draws, run=None):
    from bayesmkl import BM3KLClassifier

    Xtr, Xte, ytr, yte = X[tr], X[te], y[tr], y[te]
    codes = np.searchsorted(np.unique(ytr), yte)
    t0 = time.perf_counter()
    clf = BM3KLClassifier(random_state=seed, progress_bar=False, **(run or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(Xtr, ytr)
    probas = {"BM3KL": clf.predict_proba(Xte), "SVC": baseline("SVC", Xtr, ytr, Xte, seed)[0]}
    out = {}
    for m, P in probas.items():
        floor, se = ece_floor(P, n_draws, seed)
        ece = ece_top_label(P, codes)
        out[m] = {"ece": ece, "floor": floor, "floor_se": se, "excess": ece - floor}
    out["wall_s"] = time.perf_counter() - t0
    return out


def summarise(units: dict, datasets, splits) -> dict:
    out = {}
    for ds, us in finished_splits(units, datasets, splits):
        out[ds] = {"n_splits": len(us)}
        for m in METHODS:
            out[ds][m] = {k: float(np.mean([u[m][k] for u in us]))
                          for k in ("ece", "floor", "excess")}  # fmt: skip
        for k in ("ece", "floor", "excess"):
            out[ds][k + "_diff"] = mean_se([u["BM3KL"][k] - u["SVC"][k] for u in us])
    return out


def write_markdown(summary: dict, path: Path, splits: int, n_draws: int) -> None:
    lines = [
        "# ECE against its binning-noise floor (issue 22)",
        "",
        "Default `BM3KLClassifier` and the tuned SVC (`calibration.py`'s grid), the splits and "
        "seeds of `calibration.py`. ECE: top-label, 15 bins, on the test split. Floor: the "
        f"mean ECE over {n_draws} label sets drawn from the method's own test probabilities "
        "(a perfectly calibrated predictor with these confidences). Excess = ECE − floor. "
        "Means over splits; Δ = BM3KL − SVC, paired over splits (SE).",
        "",
        "| data set | splits | ECE BM3KL | ECE SVC | Δ ECE (SE) | floor BM3KL | floor SVC | "
        "Δ floor (SE) | excess BM3KL | excess SVC | Δ excess (SE) |",
        "|---" * 11 + "|",
    ]
    for ds, s in summary.items():
        cells = [f"{s['n_splits']}/{splits}"]
        for k in ("ece", "floor", "excess"):
            d, se = s[k + "_diff"]
            cells += [f"{s['BM3KL'][k]:.3f}", f"{s['SVC'][k]:.3f}", f"{d:+.3f} ({se:.3f})"]
        lines.append(f"| {ds} | " + " | ".join(cells) + " |")
    write_atomic(path, "\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    split_arguments(p, ("heart", "ionosphere", "sonar", "breast"), RESULTS / "ece_floor")
    p.add_argument("--draws", type=int, default=200, help="label sets per floor")
    args = p.parse_args(argv)
    run = fixed_run(args)

    def compute(X, y, tr, te, seed):
        return unit(X, y, tr, te, seed, args.draws, run)

    def render(summary, path):
        write_markdown(summary, path, args.splits, args.draws)

    return run_split_benchmark(args, {"draws": args.draws}, compute, summarise, render)


if __name__ == "__main__":
    sys.exit(main())
