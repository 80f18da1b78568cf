"""Benchmark: does the default fit converge in a user's time? (issue 21)

Per data set (scikit-learn's breast cancer, then the shared UCI sets), on a stratified 70/30
split (seed 0), in the same run:

* the default ``BM3KLClassifier(random_state=0)`` (its default prior, calibration and run-length
  rule): ``stopped_by``, ``rhat_max``, ``ess_bulk_min`` over every kernel weight and held-in
  decision value, ``fit_s`` (calibration included), ``compile_s`` (JAX compile time inside the
  fit), test accuracy and log-loss;
* ``svc_grid_s``: ``GridSearchCV(SVC(probability=True))`` over C ∈ 2^{-3,-1,…,9} ×
  γ ∈ 2^{-11,-9,…,1} (5 folds) on standardised features, its accuracy and log-loss — the tool a
  user would otherwise pick, timed on the same machine at the same load;

and two units on breast cancer:

* ``max_time=10``: the wall time of a fit with that budget (the target: returns within 15 s);
* ``second process``: a fit of the same shape and configuration in a fresh Python process, whose
  programs come from the persistent compilation cache: its ``compile_s`` before the first sweep.

Resumable (``_common.UnitStore``): every finished unit is written at once; a restart skips
finished units.
Usage::

    OPENBLAS_NUM_THREADS=1 nohup .venv/bin/python benchmarks/convergence.py &

Writes ``benchmarks/results/convergence.json``: a list of rows, one per data set, with key
``dataset``; the breast-cancer row also holds the two special units as ``max_time_10`` and
``second_process``. The finished units themselves (what a restart reads) are kept in
``convergence_units.json``; ``convergence.md`` renders the rows.

The main fits are cold (first compilation of each shape): the run uses its own compilation
cache directory, new unless ``$BAYESMKL_CACHE_DIR`` is set; the second-process unit inherits
it, so its programs come from that cache.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import UnitStore, load_dataset, write_atomic  # noqa: E402

DATASETS = "breast-sklearn,sonar,liver,ionosphere,pima,heart,wine,glass"


def split(dataset: str):
    from sklearn.model_selection import train_test_split

    from bayesmkl.datasets import load_demo

    X, y = load_demo()[:2] if dataset == "breast-sklearn" else load_dataset(dataset)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def fit_default(dataset: str, **params) -> dict:
    from sklearn.metrics import accuracy_score, log_loss

    from bayesmkl import BM3KLClassifier

    Xtr, Xte, ytr, yte = split(dataset)
    clf = BM3KLClassifier(random_state=0, progress_bar=False, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        clf.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
    r = clf.run_report_
    p = clf.predict_proba(Xte)
    return {
        "dataset": dataset,
        "n_train": len(ytr),
        "n_kernels": len(clf.kernel_names_),
        "stopped_by": r.stopped_by,
        "rhat_max": r.rhat_max,
        "ess_bulk_min": r.ess_bulk_min,
        "worst": r.worst,
        "num_samples": r.num_samples,
        "fit_s": fit_s,
        "sample_s": r.seconds,
        "compile_s": r.compile_seconds,
        "acc": accuracy_score(yte, clf.classes_[p.argmax(1)]),
        "logloss": log_loss(yte, p, labels=clf.classes_),
    }


def svc_grid(dataset: str) -> dict:
    from sklearn.metrics import accuracy_score, log_loss
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    Xtr, Xte, ytr, yte = split(dataset)
    grid = {"svc__C": 2.0 ** np.arange(-3, 10, 2), "svc__gamma": 2.0 ** np.arange(-11, 2, 2)}
    pipe = make_pipeline(StandardScaler(), SVC(probability=True, random_state=0))
    with warnings.catch_warnings():  # scikit-learn 1.9 deprecates probability=True (FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        t0 = time.perf_counter()
        gs = GridSearchCV(pipe, grid, cv=5, n_jobs=1).fit(Xtr, ytr)
        s = time.perf_counter() - t0
    p = gs.predict_proba(Xte)
    return {"svc_grid_s": s, "svc_acc": accuracy_score(yte, gs.predict(Xte)),
            "svc_logloss": log_loss(yte, p, labels=gs.classes_)}  # fmt: skip


def second_process() -> dict:
    """The breast-cancer default fit again, in a new process (the compilation cache is warm)."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(HERE.parent)!r}); "
        f"sys.path.insert(0, {str(HERE)!r}); import convergence as c; "
        "print(json.dumps(c.fit_default('breast-sklearn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return {"dataset": "breast-sklearn (second process)", **{k: row[k] for k in (
        "compile_s", "fit_s", "sample_s", "stopped_by", "rhat_max", "ess_bulk_min")}}  # fmt: skip


#: the special units of breast cancer → the key under which its row holds them
SPECIAL = {"max_time=10": "max_time_10", "second process": "second_process"}


def unit_row(record: dict) -> dict:
    """A unit's result with the commit, the 1-minute load average and the time it ended."""
    load = record["loadavg"]
    return {**record["result"], "commit": record["commit"],
            "loadavg": load[0] if isinstance(load, list) else load,
            "finished": record["finished"]}  # fmt: skip


def rows_of(units: dict) -> list[dict]:
    """One row per data set; breast cancer's also holds the special units."""
    units = {k: unit_row(u) for k, u in units.items()}
    rows = [dict(u) for k, u in units.items() if k not in SPECIAL]
    for row in rows:
        if row["dataset"] == "breast-sklearn":
            row.update({name: units[k] for k, name in SPECIAL.items() if k in units})
    return rows


def ordered(units: dict) -> dict:
    """``units`` in the order of :data:`DATASETS` (then the special units, then any other),
    whatever order they finished in (a rerun unit finishes last)."""
    order = DATASETS.split(",") + list(SPECIAL)
    return dict(sorted(units.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order
                       else len(order)))  # fmt: skip


def write_rows(units: dict, out: str) -> None:
    units = ordered(units)
    write_atomic(Path(out + ".json"), json.dumps(rows_of(units), indent=1, default=float))
    write_atomic(Path(out + ".md"), markdown(units))


def markdown(units: dict) -> str:
    rows = [unit_row(u) for u in units.values()]
    out = ["# Convergence of the default fit (issue 21)", "",
           "Default `BM3KLClassifier(random_state=0)`, stratified 70/30 split (seed 0); "
           "`svc_grid_s`: GridSearchCV(SVC(probability=True)), 7 × 7 grid, 5 folds, same run. "
           "`ratio` = fit_s / svc_grid_s. `load`: the machine's 1-minute load average when the "
           "unit ended (2 cores; above 1, another job shared the machine).", "",
           "| data | N | stopped by | max R-hat | min ESS | fit s | compile s | SVC grid s | ratio "
           "| acc | log-loss | SVC acc | SVC log-loss | load |", "|" + "---|" * 14]  # fmt: skip
    for u in rows:
        if "svc_grid_s" not in u:
            continue
        out.append(
            f"| {u['dataset']} | {u['n_train']} | {u['stopped_by']} | {u['rhat_max']:.3f} | "
            f"{u['ess_bulk_min']:.0f} | {u['fit_s']:.0f} | {u['compile_s']:.1f} | "
            f"{u['svc_grid_s']:.1f} | {u['fit_s'] / u['svc_grid_s']:.1f} | {u['acc']:.3f} | "
            f"{u['logloss']:.3f} | {u['svc_acc']:.3f} | {u['svc_logloss']:.3f} | "
            f"{u.get('loadavg', float('nan')):.1f} |"
        )
    out.append("")
    for u in rows:
        if "svc_grid_s" not in u:
            out.append(f"* {u['dataset']}: " + ", ".join(
                f"{k} = {v:.2f}" if isinstance(v, float) else f"{k} = {v}"
                for k, v in u.items() if k not in ("dataset", "commit", "finished")))  # fmt: skip
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=DATASETS)
    p.add_argument("--out", default=str(HERE / "results" / "convergence"))
    p.add_argument("--fresh", action="store_true", help="ignore the units already in the file")
    args = p.parse_args(argv)
    os.environ.setdefault("BAYESMKL_CACHE_DIR", tempfile.mkdtemp(prefix="bayesmkl-jax-cache-"))
    store = UnitStore(Path(args.out + "_units.json"), {"split": "70/30 seed 0"}, fresh=args.fresh)
    for ds in args.datasets.split(","):
        if not store.done(ds):
            result = fit_default(ds)
            result.update(svc_grid(ds))
            store.add(ds, result)
            write_rows(store.units, args.out)
            print(ds, result["stopped_by"], f"{result['fit_s']:.0f} s", flush=True)
        if ds == "breast-sklearn":
            if not store.done("max_time=10"):
                t0 = time.perf_counter()
                result = fit_default(ds, max_time=10)
                result.update(dataset="breast-sklearn (max_time=10)",
                              wall_s=time.perf_counter() - t0)  # fmt: skip
                store.add("max_time=10", result)
                write_rows(store.units, args.out)
            if not store.done("second process"):
                store.add("second process", second_process())
                write_rows(store.units, args.out)


if __name__ == "__main__":
    main()
