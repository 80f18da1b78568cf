"""The ``../shared/repro/nan_divergence.py`` check at full length: default ``BM3KLClassifier``,
seeds 0-4 (issue 11: "the repro script prints 0 NaN rows for seeds 0-4").

The data are :func:`bayesmkl.datasets.make_duplicated_rows` (the repro's, 350 rows, 12 distinct);
each seed is one default fit (collapsed sampler, 4 chains, 300 warm-up sweeps, run length until
R-hat <= 1.01 and ESS >= 400 or 2,000 sweeps, then 3 calibration refits), exactly the repro's
call. Counted per seed: rows of ``predict_proba`` on the training data with a NaN, the smallest
probability, and the run report. Writes ``benchmarks/results/repro_seeds.{json,md}``.

Cost: about 20 minutes per seed on one core (2,000 sweeps x 4 chains, four times).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/repro_seeds.py [--seeds 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_floor import md_table, write_results  # noqa: E402

from bayesmkl import BM3KLClassifier  # noqa: E402
from bayesmkl.datasets import make_duplicated_rows  # noqa: E402


def run(seed: int, X, y) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = BM3KLClassifier(kernels="bsvm16", random_state=seed, progress_bar=False).fit(X, y)
        P = clf.predict_proba(X)
    rep = clf.run_report_
    return {
        "seed": seed,
        "nan_rows": int(np.isnan(P).any(axis=1).sum()),
        "min_proba": round(float(P.min()), 4),
        "train_accuracy": round(float(np.mean(clf.classes_[P.argmax(1)] == y)), 4),
        "converged": bool(rep.converged),
        "stopped_by": rep.stopped_by,
        "num_samples": int(rep.num_samples),
        "rhat_max": round(float(rep.rhat_max), 3),
        "ess_bulk_min": round(float(rep.ess_bulk_min), 1),
        "worst": rep.worst,
        "warnings": sorted({w.category.__name__ for w in caught}),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    args = ap.parse_args(argv)
    X, y = make_duplicated_rows()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        rows.append(run(seed, X, y))
        print(rows[-1], flush=True)
    summary = {"seeds": len(rows), "nan_rows": sum(r["nan_rows"] for r in rows), "rows": rows}
    md = [
        "# The nan_divergence repro at full length (issue 11)\n",
        f"{len(rows)} default fits, {summary['nan_rows']} NaN rows of `predict_proba` in total. "
        "Data: `make_duplicated_rows()` (the repro's 350 rows, 12 distinct).\n",
        md_table(rows, list(rows[0]) if rows else []),
    ]
    write_results("repro_seeds", summary, "\n".join(md))
    return summary


if __name__ == "__main__":
    main()
