"""Benchmark: does an accuracy gap of ``calibration.py`` replicate on fresh splits? (issue 22)

``calibration.json`` finds the default BM3KL 3.1 points (paired SE 1.5) below BEMKL on glass, the
one set where issue 22's accuracy line (≤ 2 points below the best of seven methods) fails, and
the pooled splits of ``calibration_pooled.md`` 2.9 points below the tuned SVC on sonar. This
script asks three questions of such a gap with new splits, not new settings:

* does it replicate? The same methods on ``StratifiedShuffleSplit(5, test_size=0.3,
  random_state=seed)`` for several ``--seeds`` (``calibration.py`` used seed 0);
* would a joint multiclass margin close it? BM3KL is one-vs-all with shared kernel weights.
  ``M3K`` (Crammer–Singer margin) and ``SimpleMKL`` (one-vs-rest) are the same deterministic
  MKL problem with the two multiclass devices, on the same kernels and the same C grid: their
  paired difference estimates what a joint margin is worth on the data;
* is it BM3KL's or its kernels'? BEMKL and SimpleMKL learn weights over the same pool; a gap
  they share with BM3KL against the SVC (one Gaussian, width tuned finely) is the pool's.

Methods (BSVM-16 pool for every MKL method): ``BM3KL`` (the default estimator, seed
``seed + k``), ``BEMKL`` (Gönen 2012, VB), ``M3K`` and ``SimpleMKL`` (C ∈ {0.1, 1, 10, 100} by
3-fold stratified CV on the training part) and ``SVC`` (``calibration.py``'s tuned SVC).

BM3KL fits already made on the same splits with the same seeds are read, not refitted: seed 0
from ``calibration.json`` (its units), seeds 100 and 200 from the ``calibration_map*`` runs of
that seed (their ``estimator_metrics``: the estimator's own probabilities, which that benchmark
checks against its maps). Such a unit says where it came from (``source``).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/accuracy_replication.py \\
        [--datasets glass,wine] [--seeds 0,100,200]

Writes ``benchmarks/results/accuracy_replication.{json,md}``; resumable (one unit per seed ×
method × data set × split; ``--merge`` adds a second process's file).
"""

from __future__ import annotations

import argparse
import functools
import json
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
    UnitStore,
    add_merge_argument,
    mean_se,
    run_split_units,
    write_atomic,
)
from calibration import baseline, metrics, run_info  # noqa: E402
from calibration_pooled import RUNS_BY_SEED  # noqa: E402

METHODS = ("BM3KL", "BEMKL", "M3K", "SimpleMKL", "SVC")
C_GRID = (0.1, 1.0, 10.0, 100.0)


def _bm3kl_fit(d, ds, k):
    """BM3KL's metrics on split k of ``ds`` in a results file ``d`` (KeyError if absent)."""
    units = d["units"]
    if f"{ds} | split {k} | BM3KL" in units:  # calibration.py
        return units[f"{ds} | split {k} | BM3KL"]["result"]["rows"]["BM3KL"]
    # calibration_map.py checks that ``estimator_metrics`` are the estimator's own probabilities
    # (its ``Tcβc`` row on multiclass sets, ``T`` on binary ones)
    return units[f"{ds} | split {k}"]["result"]["estimator_metrics"]


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> dict:
    """A results file, parsed once per run (the BM3KL units of a seed all read the same one)."""
    return json.loads(path.read_text())


def earlier_fit(results: Path, seed: int, ds: str, k: int):
    """BM3KL's metrics on split k of ``seed`` from an earlier benchmark, or None."""
    for name in RUNS_BY_SEED.get(seed, ()):  # the first file that holds the split
        try:
            row = _bm3kl_fit(_load(results / name), ds, k)
        except (OSError, ValueError, KeyError, IndexError):
            continue
        return {"acc": row["acc"], "logloss": row["logloss"], "source": name}
    return None


def cv_mkl(cls, seed):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    return GridSearchCV(cls(kernels="bsvm16"), {"C": list(C_GRID)},
                        cv=StratifiedKFold(3, shuffle=True, random_state=seed))  # fmt: skip


def unit(X, y, tr, te, seed, *, method, ds, seed0, results):
    """Accuracy (and log-loss where the method has probabilities) of one method on one split
    (split ``seed − seed0`` of data set ``ds``)."""
    from bayesmkl import BM3KLClassifier
    from bayesmkl.baselines import M3K, SimpleMKL

    if method == "BM3KL":
        got = earlier_fit(results, seed0, ds, seed - seed0)
        if got is not None:
            return got
    codes = np.searchsorted(np.unique(y[tr]), y[te])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "BM3KL":
            clf = BM3KLClassifier(random_state=seed, progress_bar=False).fit(X[tr], y[tr])
            m = metrics(clf.predict_proba(X[te]), codes)
            return {"acc": m["acc"], "logloss": m["logloss"],
                    "fit_s": time.perf_counter() - t0, **run_info(clf)}  # fmt: skip
        if method in ("BEMKL", "SVC"):
            proba, fit_s = baseline(method, X[tr], y[tr], X[te], seed)
            m = metrics(proba, codes)
            return {"acc": m["acc"], "logloss": m["logloss"], "fit_s": fit_s}
        model = cv_mkl(M3K if method == "M3K" else SimpleMKL, seed).fit(X[tr], y[tr])
    return {"acc": float(np.mean(model.predict(X[te]) == y[te])),
            "C": model.best_params_["C"], "fit_s": time.perf_counter() - t0}  # fmt: skip


def paired(a: dict, b: dict, seeds) -> dict:
    """``a − b`` over the splits both finished, pooled and per seed (``mean_se``; None if < 2)."""
    diffs = {s: [a[s][k] - b[s][k] for k in sorted(a[s].keys() & b[s].keys())] for s in seeds}
    pooled = [d for s in seeds for d in diffs[s]]
    return {"pooled": mean_se(pooled) if len(pooled) > 1 else None,
            "by_seed": {str(s): mean_se(d) for s, d in diffs.items() if len(d) > 1}}  # fmt: skip


def summarise(units: dict, datasets, seeds, splits: int) -> dict:
    """Per data set: each method's accuracy per seed and pooled, BM3KL − method paired split by
    split, and M3K − SimpleMKL (joint against one-vs-rest margin)."""
    out = {}
    for ds in datasets:
        accs = {m: {s: {} for s in seeds} for m in METHODS}  # method → seed → split → accuracy
        for m in METHODS:
            for s in seeds:
                for k in range(splits):
                    u = units.get(f"seed {s} | {m} | {ds} | split {k}")
                    if u is not None:
                        accs[m][s][k] = u["result"]["acc"]
        table = {}
        for method, by_seed in accs.items():
            pooled = [a for s in seeds for a in by_seed[s].values()]
            if not pooled:
                continue
            table[method] = {"n_splits": len(pooled), "acc": float(np.mean(pooled)),
                             "acc_by_seed": {str(s): float(np.mean(list(v.values())))
                                             for s, v in by_seed.items() if v}}  # fmt: skip
            if method != "BM3KL":
                table[method]["bm3kl_minus"] = paired(accs["BM3KL"], by_seed, seeds)
        if table:
            out[ds] = {"methods": table, "m3k_minus_simplemkl":
                       paired(accs["M3K"], accs["SimpleMKL"], seeds)}  # fmt: skip
    return out


def _pts(d) -> str:
    return f"{100 * d[0]:+.1f} ({100 * d[1]:.1f})" if d else "–"


def write_markdown(summary: dict, path: Path, seeds, splits: int, commits=()) -> None:
    lines = [
        "# Do BM3KL's accuracy gaps replicate on fresh splits? (issue 22)",
        "",
        f"{splits} stratified 70/30 splits per seed (seeds {', '.join(map(str, seeds))}; "
        "`calibration.py` used seed 0). Accuracy means over splits; Δ = BM3KL − method, paired "
        "split by split, mean (SE). `M3K` − `SimpleMKL` is the same MKL problem with a "
        "Crammer–Singer (joint) against a one-vs-rest multiclass margin. BM3KL units read from "
        "earlier fits say so (`source`): "
        + "; ".join(
            f"seed {s} from " + " or ".join(f"`{name}`" for name in files)
            for s, files in RUNS_BY_SEED.items()
        )
        + ". Package commit(s): "
        + (", ".join(sorted(c[:7] for c in commits)) or "–")
        + ".",
        "",
    ]
    for ds, entry in summary.items():
        lines += [f"## {ds}", "", "| method | splits | acc | "
                  + " | ".join(f"acc seed {s}" for s in seeds)
                  + " | Δ pooled (SE) | " + " | ".join(f"Δ seed {s} (SE)" for s in seeds) + " |",
                  "|---" * (4 + 2 * len(seeds)) + "|"]  # fmt: skip
        for method, e in entry["methods"].items():
            by = e["acc_by_seed"]
            d = e.get("bm3kl_minus", {"pooled": None, "by_seed": {}})
            cells = [method, str(e["n_splits"]), f"{e['acc']:.3f}"]
            cells += [f"{by[str(s)]:.3f}" if str(s) in by else "–" for s in seeds]
            cells += [_pts(d["pooled"])] + [_pts(d["by_seed"].get(str(s))) for s in seeds]
            lines.append("| " + " | ".join(cells) + " |")
        js = entry["m3k_minus_simplemkl"]
        if js["pooled"]:
            lines += ["", f"M3K − SimpleMKL (joint − one-vs-rest margin), points: pooled "
                      f"{_pts(js['pooled'])}; "
                      + "; ".join(f"seed {s} {_pts(v)}" for s, v in js["by_seed"].items())
                      + "."]  # fmt: skip
        lines.append("")
    write_atomic(path, "\n".join(lines))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="glass,wine")
    p.add_argument("--seeds", default="0,100,200")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--results", default=str(RESULTS), help="where the earlier BM3KL fits are")
    p.add_argument("--out", default=str(RESULTS / "accuracy_replication"))
    p.add_argument("--fresh", action="store_true")
    add_merge_argument(p)
    args = p.parse_args(argv)
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    from bayesmkl.estimator import enable_compilation_cache

    enable_compilation_cache()
    out = Path(args.out)
    store = UnitStore(out.with_suffix(".json"), {"splits": args.splits, "c_grid": list(C_GRID)},
                      fresh=args.fresh)  # fmt: skip
    for other in args.merge:
        store.merge(other)
    all_seeds = sorted({int(k.split(" | ")[0].split()[1]) for k in store.units} | set(seeds))
    all_sets = list(dict.fromkeys(datasets + [k.split(" | ")[2] for k in store.units]))

    def publish():
        summary = summarise(store.units, all_sets, all_seeds, args.splits)
        store.save(summary=summary)
        commits = {u["commit"] for u in store.units.values()}
        write_markdown(summary, out.with_suffix(".md"), all_seeds, args.splits, commits)

    for seed in seeds:
        for method in methods:
            for ds in datasets:
                compute = functools.partial(unit, method=method, ds=ds, seed0=seed,
                                            results=Path(args.results))  # fmt: skip
                run_split_units(store, [ds], args.splits, seed, compute, publish,
                                label=f"seed {seed} | {method}")  # fmt: skip
    publish()
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
