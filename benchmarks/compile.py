"""How often a cross-validation of the default estimator compiles, and what it costs.

In a fresh process with an empty persistent compilation cache (``BAYESMKL_CACHE_DIR`` set to a
new temporary directory), a ``cross_val_score`` of ``BM3KLClassifier()`` on scikit-learn's
breast-cancer data (569 rows, 5 stratified folds) runs with JAX's compile log on; every XLA
compilation is recorded with its program name and seconds. ``compiles`` counts the programs
that took at least ``--big`` seconds to compile (the sampler's; the rest are small array
programs), ``compiles_all`` all of them. The same folds are scored by a tuned SVC
(``GridSearchCV(SVC(probability=True))``) for the time beside it.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/compile.py [--folds 5] [--quick]

Writes ``benchmarks/results/compile.json`` and ``compile.md`` (``--out`` another stem).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, json_default, machine_info, md_table, write_atomic  # noqa: E402

_FINISHED = re.compile(r"Finished XLA compilation of (?:jit\()?([\w<>.-]+)\)? in ([0-9.e+-]+) sec")


def child(folds: int, quick: bool) -> dict:
    """The measured run (in the fresh process): compile log, fold scores, seconds."""
    import logging
    import warnings

    import jax

    records: list[tuple[str, float]] = []

    class Grab(logging.Handler):
        def emit(self, record):
            m = _FINISHED.search(record.getMessage())
            if m:
                records.append((m.group(1), float(m.group(2))))

    handler = Grab(level=logging.DEBUG)
    logger = logging.getLogger("jax")  # JAX's loggers all propagate to this one
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    jax.config.update("jax_log_compiles", True)

    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from bayesmkl import BM3KLClassifier

    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    est = BM3KLClassifier(random_state=0, progress_bar=False)
    if quick:
        est.set_params(num_warmup=20, num_samples=20, num_chains=2)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = cross_val_score(est, X, y, cv=cv, scoring="neg_log_loss")
    return {"cv_s": time.perf_counter() - t0, "scores": (-scores).tolist(), "programs": records}


def svc_time(folds: int) -> tuple[float, list]:
    """The tuned SVC of ``convergence.py`` (7 × 7 grid, 5 inner folds) over the same folds."""
    import warnings

    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    grid = {"svc__C": 2.0 ** np.arange(-3, 10, 2), "svc__gamma": 2.0 ** np.arange(-11, 2, 2)}
    svc = GridSearchCV(make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)),
                       grid, cv=5)  # fmt: skip
    with warnings.catch_warnings():  # scikit-learn 1.9 deprecates probability=True
        warnings.simplefilter("ignore", FutureWarning)
        t0 = time.perf_counter()
        scores = cross_val_score(svc, X, y, cv=cv, scoring="neg_log_loss")
    return time.perf_counter() - t0, (-scores).tolist()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--big", type=float, default=1.0, help="seconds that make a compile count")
    ap.add_argument("--quick", action="store_true", help="short fits, to check the script")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.folds, args.quick)))
        return
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, BAYESMKL_CACHE_DIR=cache)
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--folds", str(args.folds)]
            + (["--quick"] if args.quick else []),
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - t0
    run = json.loads(out.stdout.strip().splitlines()[-1])
    programs = run.pop("programs")
    big = [(n, s) for n, s in programs if s >= args.big]
    svc_s, svc_scores = svc_time(args.folds)
    result = {
        "folds": args.folds,
        "quick": args.quick,
        "compiles": len(big),
        "compiles_all": len(programs),
        "compile_s": round(sum(s for _, s in programs), 2),
        "big_programs": [{"name": n, "seconds": round(s, 2)} for n, s in big],
        "cv_s": round(run["cv_s"], 2),
        "process_s": round(wall, 2),
        "logloss": run["scores"],
        "svc_cv_s": round(svc_s, 2),
        "svc_logloss": svc_scores,
        "machine": machine_info(),
    }
    stem = args.out or ("compile_quick" if args.quick else "compile")
    path = Path(stem) if os.sep in stem else RESULTS / stem
    write_atomic(path.with_suffix(".json"), json.dumps(result, indent=1, default=json_default))
    md = (
        "# Compilations of a cross-validation of the default estimator\n\n"
        f"{args.folds}-fold `cross_val_score(BM3KLClassifier())` on breast cancer, fresh process, "
        "empty compilation cache (`benchmarks/compile.py`). `compiles`: programs that took at "
        f"least {args.big} s to compile.\n\n"
        + md_table([result], ["compiles", "compiles_all", "compile_s", "cv_s", "svc_cv_s"])
        + "\nLoad average at the end: "
        + str(result["machine"]["loadavg_1_5_15"])
        + "\n\n"
        + md_table(result["big_programs"], ["name", "seconds"])
    )
    write_atomic(path.with_suffix(".md"), md)
    print(md)


if __name__ == "__main__":
    main()
