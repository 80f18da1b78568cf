"""Soft-margin MKL, Table I protocol (Xu, Tsang & Xu, IEEE TNNLS 2013) on heart, pima, ionosphere.

Protocol (spec ``baselines.md``, paper A, "Protocol A"):

* data: UCI CSVs from ``$BAYESMKL_DATA`` (``../shared/data/uci`` when unset: ``_common.py``);
  ``pima`` is the paper's "Diabetes";
* per split: random 70 % / 30 % train/test (not stratified); the SimpleMKL pool
  :meth:`KernelPool.simplemkl` (Gaussian widths 2^-3..2^6 and polynomial degrees 1-3, on all
  features and on each single feature: P = 13(d + 1)) fitted on the training part, which
  z-scores every feature with training statistics and normalises kernels to unit diagonal;
* hyper-parameters by stratified k-fold CV on the training part (accuracy; ties go to the first
  grid point), on sub-blocks of the training kernels; the selected model is refitted on the
  whole training part (this refit is what "training time" measures: precomputed kernels, one
  process) and scored on the test part;
* methods: AveKernel, SimpleMKL, L2MKL, LpMKL, SM1MKL, SM2MKL (and SGMKL with ``--methods``),
  plus the Bayesian rows BM3KL (``BM3KLClassifier`` with its defaults: default sampler, 4
  chains run until R-hat ≤ 1.01 and ESS ≥ 400 or the ``--bm3kl-max-time`` budget; accuracy only,
  so ``calibration=None``), "BM3KL paper" (the same with ``prior="paper"``, the paper's
  hyper-parameters, under a 300 s budget per fit since that prior does not converge in a
  user's time) and BEMKL (variational Bayes, defaults); these two have no grid, so
  no CV: the same model is fitted on the training part of every split; η-study rows such as
  ``--methods "BM3KL eta=0.1 max_time=1200"`` fit BM3KL with that η under that budget
  (``benchmarks/results/xu_eta.md``);
* grids (full): C ∈ {0.01, 0.1, 1, 10, 100}; Lp p ∈ {1, 32/31, 16/15, 8/7, 4/3, 2, 3, ∞};
  SGMKL v ∈ {0, 0.1, …, 1}; SM1MKL θ = 1/(νM), ν ∈ {1/M, 0.1, …, 1}; SM2MKL θ ∈ {1e-5, …, 1e5}.

``--quick`` shrinks splits, folds and grids (see ``QUICK``) so that the three data sets run in
minutes on two cores. Results go to ``benchmarks/results/xu_table1.{json,md}`` with the published
Table I (accuracy) and Table II (training time) numbers beside ours. The data set ``tiny`` (60
synthetic rows, no shared data needed) is for smoke runs.

Resumable (``benchmarks/_common.py``): every finished unit — data set × split × method: its CV
and its refit — is written to the JSON at once (atomically), with the package commit and the
load average; a restart with the same settings skips the units already there (``--fresh``
starts over). Two processes may share the work by data set, or by split of one data set
(``--only-splits``), each with its own ``--out``; a later run with ``--merge OTHER.json`` takes
the other's units into its own file.

Usage::

    python benchmarks/xu_table1.py --quick
    python benchmarks/xu_table1.py --splits 10 --datasets heart,pima --n-jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, train_test_split

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from _common import (  # noqa: E402
    UnitStore,
    add_merge_argument,
    eta_row,
    tiny_data,
    write_atomic,
)

from bayesmkl import BM3KLClassifier  # noqa: E402
from bayesmkl.baselines import BEMKL, SGMKL, AverageMKL, LpMKL, SimpleMKL, SoftMarginMKL  # noqa: E402
from bayesmkl.kernels.pool import KernelPool  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"

# Table I (test accuracy %, mean ± std over 10 random 70/30 splits) and Table II (training CPU
# time in s) of paper A, for the data sets available here (spec baselines.md).
PUBLISHED = {
    "heart": {
        "AveKernel": (81.60, 2.76),
        "SimpleMKL": (81.98, 3.20),
        "L2MKL": (82.47, 3.23),
        "LpMKL": (81.85, 3.08),
        "SGMKL": (82.10, 3.15),
        "SM1MKL": (81.60, 4.21),
        "SM2MKL": (82.47, 3.28),
    },
    "pima": {
        "AveKernel": (75.22, 4.02),
        "SimpleMKL": (75.30, 3.35),
        "L2MKL": (75.91, 2.83),
        "LpMKL": (75.61, 2.71),
        "SGMKL": (76.00, 2.92),
        "SM1MKL": (76.35, 2.79),
        "SM2MKL": (76.26, 2.94),
    },
    "ionosphere": {
        "AveKernel": (90.29, 4.01),
        "SimpleMKL": (91.81, 1.92),
        "L2MKL": (91.71, 2.70),
        "LpMKL": (91.33, 2.64),
        "SGMKL": (91.90, 2.39),
        "SM1MKL": (91.33, 2.82),
        "SM2MKL": (92.10, 2.38),
    },
}
PUBLISHED_TIME = {
    "heart": {
        "AveKernel": 0.1938,
        "SimpleMKL": 19.32,
        "L2MKL": 9.023,
        "LpMKL": 4.273,
        "SGMKL": 129.9,
        "SM1MKL": 1.928,
        "SM2MKL": 8.245,
    },
    "pima": {
        "AveKernel": 1.075,
        "SimpleMKL": 410.8,
        "L2MKL": 154.5,
        "LpMKL": 83.62,
        "SGMKL": 1206.0,
        "SM1MKL": 39.41,
        "SM2MKL": 240.6,
    },
    "ionosphere": {
        "AveKernel": 0.5656,
        "SimpleMKL": 146.2,
        "L2MKL": 40.92,
        "LpMKL": 26.16,
        "SGMKL": 618.8,
        "SM1MKL": 14.58,
        "SM2MKL": 31.90,
    },
}
PAPER_NAMES = {"heart": "Heart", "pima": "Diabetes", "ionosphere": "Ionosphere"}

DEFAULT_METHODS = (
    "AveKernel", "SimpleMKL", "L2MKL", "LpMKL", "SM1MKL", "SM2MKL", "BM3KL", "BEMKL",
    "BM3KL paper",
)  # fmt: skip
ALL_METHODS = DEFAULT_METHODS + ("SGMKL",)
#: Methods without a hyper-parameter grid (fitted with their defaults; no CV).
NO_GRID = ("BM3KL", "BEMKL", "BM3KL paper")
#: Time budget of a "BM3KL paper" fit (s): the paper's prior does not converge in a user's time
#: (benchmarks/results/prior_study.md), so its row is a budgeted run, reported as such.
PAPER_MAX_TIME = 300.0


def no_grid(method: str) -> bool:
    """Whether ``method`` is fitted with fixed settings (no grid, no CV)."""
    return method in NO_GRID or eta_row(method) is not None


FULL = dict(
    splits=10,
    folds=5,
    C=[0.01, 0.1, 1.0, 10.0, 100.0],
    p=[1.0, 32 / 31, 16 / 15, 8 / 7, 4 / 3, 2.0, 3.0, float("inf")],
    v=[round(0.1 * i, 1) for i in range(11)],
    nu=["1/M"] + [round(0.1 * i, 1) for i in range(1, 11)],
    theta=[10.0**k for k in range(-5, 6)],
    tol=1e-2,  # relative duality gap (SimpleMKL's default 0.01), SimpleMKL/SM1/SM2/SGMKL
    lp_tol=1e-4,  # relative objective change, Lp/L2-MKL
    svc_tol=1e-5,
    max_iter=500,
)
QUICK = dict(
    FULL,
    splits=2,
    folds=3,
    C=[1.0, 10.0, 100.0],
    p=[8 / 7, 4 / 3, 2.0],
    v=[0.5],
    nu=[0.1, 0.3, 1.0],
    theta=[1e-2, 1.0, 1e2],
    max_iter=200,
)


def method_grid(method: str, cfg: dict, P: int) -> list[dict]:
    """Hyper-parameter grid of one method (C outermost), ``ν = "1/M"`` resolved with ``P``."""
    if no_grid(method):
        return [{}]
    extra = {
        "AveKernel": [{}],
        "SimpleMKL": [{}],
        "L2MKL": [{}],
        "LpMKL": [{"p": p} for p in cfg["p"]],
        "SGMKL": [{"v": v} for v in cfg["v"]],
        "SM1MKL": [{"nu": 1.0 / P if nu == "1/M" else float(nu)} for nu in cfg["nu"]],
        "SM2MKL": [{"theta": t} for t in cfg["theta"]],
    }[method]
    return [{"C": C, **e} for C in cfg["C"] for e in extra]


def make_estimator(method: str, params: dict, P: int, cfg: dict):
    """The estimator of ``method`` with ``params`` on precomputed kernels."""
    study = eta_row(method)
    if study is not None or method in ("BM3KL", "BM3KL paper"):
        paper = method == "BM3KL paper"
        settings = (
            dict(eta=study[0], max_time=study[1]) if study is not None
            else dict(prior="paper" if paper else "default",
                      max_time=cfg.get("paper_max_time" if paper else "bm3kl_max_time"))
        )  # fmt: skip
        return BM3KLClassifier(kernels="precomputed", calibration=None, progress_bar=False,
                               random_state=cfg.get("split_seed", 0), **settings)  # fmt: skip
    if method == "BEMKL":
        return BEMKL(kernels="precomputed")
    common = dict(kernels="precomputed", C=params["C"], svc_tol=cfg["svc_tol"])
    gap = dict(tol=cfg["tol"], max_iter=cfg["max_iter"])
    if method == "AveKernel":
        return AverageMKL(**common)
    if method == "SimpleMKL":
        return SimpleMKL(**common, **gap)
    if method == "L2MKL":
        return LpMKL(p=2.0, tol=cfg["lp_tol"], max_iter=cfg["max_iter"], **common)
    if method == "LpMKL":
        return LpMKL(p=params["p"], tol=cfg["lp_tol"], max_iter=cfg["max_iter"], **common)
    if method == "SGMKL":
        return SGMKL(v=params["v"], **common, **gap)
    if method == "SM1MKL":
        theta = 1.0 / (params["nu"] * P)
        return SoftMarginMKL(loss="hinge", theta=theta, **common, **gap)
    if method == "SM2MKL":
        return SoftMarginMKL(loss="square_hinge", theta=params["theta"], **common, **gap)
    raise ValueError(f"unknown method {method!r}")


def fit_quietly(est, K, y):
    """Fit; return ``(estimator, hit_max_iter)`` with convergence warnings counted, not shown."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(K, y)
    return est, any(issubclass(w.category, ConvergenceWarning) for w in caught)


def cv_task(method, params, K, y, tr, va, P, cfg):
    """Validation accuracy of one grid point on one fold."""
    est = make_estimator(method, params, P, cfg)
    est, warned = fit_quietly(est, K[np.ix_(np.arange(P), tr, tr)], y[tr])
    acc = float(np.mean(est.predict(K[np.ix_(np.arange(P), va, tr)]) == y[va]))
    return acc, warned


class SplitData:
    """The kernels and CV folds of one random 70/30 split, computed on first use."""

    def __init__(self, X, y, split, cfg, seed):
        self.X, self.y, self.cfg, self.rs = X, y, cfg, seed + split
        self._data = None

    def get(self):
        if self._data is None:
            rs = self.rs
            Xtr, Xte, ytr, yte = train_test_split(self.X, self.y, test_size=0.3, random_state=rs)
            t0 = time.perf_counter()
            pool = KernelPool.simplemkl().fit(Xtr)
            Ktr, Kte = pool.train_kernels(), pool.cross_kernels(Xte)
            kernel_time = time.perf_counter() - t0
            folds = list(
                StratifiedKFold(self.cfg["folds"], shuffle=True, random_state=rs).split(
                    np.zeros(len(ytr)), ytr
                )
            )
            self._data = (Ktr, Kte, ytr, yte, folds, kernel_time)
        return self._data


def run_method(name, data: SplitData, split, m, cfg, n_jobs):
    """One unit: CV of ``m``'s grid on one split, the refit and its test accuracy."""
    Ktr, Kte, ytr, yte, folds, kernel_time = data.get()
    P = Ktr.shape[0]
    grid = method_grid(m, cfg, P)
    # a single grid point needs no CV
    tasks = [(g, f) for g in range(len(grid)) for f in range(len(folds))] if len(grid) > 1 else []
    t0 = time.perf_counter()
    out = Parallel(n_jobs=n_jobs)(
        delayed(cv_task)(m, grid[g], Ktr, ytr, *folds[f], P, cfg) for g, f in tasks
    )
    cv_time = time.perf_counter() - t0
    scores = np.zeros((len(grid), len(folds)))
    cv_warn = 0
    for (g, f), (acc, warned) in zip(tasks, out, strict=True):
        scores[g, f] = acc
        cv_warn += int(warned)
    best = int(np.argmax(scores.mean(axis=1)))
    params = grid[best]
    est = make_estimator(m, params, P, {**cfg, "split_seed": data.rs})
    t0 = time.perf_counter()
    est, warned = fit_quietly(est, Ktr, ytr)
    fit_time = time.perf_counter() - t0
    acc = float(np.mean(est.predict(Kte) == yte))
    res = dict(
        acc=100.0 * acc,
        time=fit_time,
        params=params,
        cv_acc=100.0 * float(scores[best].mean()) if len(grid) > 1 else float("nan"),
        n_kernels=selected_kernels(est),
        n_iter=int(getattr(est, "n_iter_", 1)),
        refit_hit_max_iter=bool(warned),
        cv_fits_hit_max_iter=cv_warn,
    )
    report = getattr(est, "run_report_", None)
    if report is not None:  # BM3KL: did the chains converge within the budget?
        res["run"] = dict(
            converged=bool(report.converged), stopped_by=report.stopped_by,
            num_samples=int(report.num_samples), rhat_max=float(report.rhat_max),
            ess_bulk_min=float(report.ess_bulk_min), worst=str(report.worst),
        )  # fmt: skip
    print(
        f"  {name:10s} split {split}  {m:9s} acc {100 * acc:6.2f}  fit {fit_time:7.2f}s  "
        f"MNK {res['n_kernels']:4d}  {params}",
        flush=True,
    )
    info = dict(P=P, n_train=len(ytr), n_test=len(yte), kernel_time=kernel_time,
                cv_time=cv_time)  # fmt: skip
    return res, info


def run_split(name, X, y, split, methods, cfg, seed, n_jobs, store=None):
    """One random 70/30 split: kernels, CV for every method, refit, test accuracy.

    With a :class:`UnitStore`, each method is one unit: skipped when stored, stored when done
    (the kernels are computed only when a method is still to do).
    """
    data = SplitData(X, y, split, cfg, seed)
    res, infos = {}, []
    # costly methods first
    for m in sorted(methods, key=lambda m: ["SimpleMKL", "SGMKL", "SM1MKL"].count(m),
                    reverse=True):  # fmt: skip
        key = None if store is None else store.key(name, f"split {split}", m)
        if key is not None and store.done(key):
            unit = _unjson(store.result(key))
        else:
            unit = dict(zip(("res", "info"), run_method(name, data, split, m, cfg, n_jobs),
                            strict=True))  # fmt: skip
            if key is not None:
                store.add(key, _jsonable(unit))
        res[m] = unit["res"]
        infos.append(unit["info"])
    info = dict(infos[0], cv_time=sum(i["cv_time"] for i in infos))
    return {m: res[m] for m in methods}, info


def selected_kernels(est, rel_threshold: float = 1e-3) -> int:
    """Paper A's MNK: kernels with weight above ``rel_threshold · max`` (BM3KL: posterior
    mean weights; the others define their own ``selected_kernels``)."""
    if hasattr(est, "selected_kernels"):
        return est.selected_kernels(rel_threshold)
    mu = np.abs(np.asarray(est.kernel_weights_))
    return int(np.sum(mu > rel_threshold * mu.max()))


def load(name):
    """``(X, y)`` of a UCI data set from the shared data directory (``tiny``: synthetic)."""
    if name == "tiny":
        return tiny_data()
    try:
        from bayesmkl.datasets import find_uci_dir, load_uci

        return load_uci(name, find_uci_dir())
    except ImportError:  # loader not available: read the CSV from the relative path
        data = np.loadtxt(REPO / ".." / "shared" / "data" / "uci" / f"{name}.csv", delimiter=",")
        return data[:, :-1], data[:, -1].astype(int)


def summarise(per_split: list[dict], methods) -> dict:
    out = {}
    for m in methods:
        accs = np.array([r[m]["acc"] for r in per_split])
        times = np.array([r[m]["time"] for r in per_split])
        out[m] = dict(
            acc_mean=float(accs.mean()),
            acc_std=float(accs.std(ddof=1)) if len(accs) > 1 else float("nan"),
            time_mean=float(times.mean()),
            time_std=float(times.std(ddof=1)) if len(times) > 1 else float("nan"),
            mnk_mean=float(np.mean([r[m]["n_kernels"] for r in per_split])),
            accs=accs.tolist(),
            times=times.tolist(),
            params=[r[m]["params"] for r in per_split],
            refits_hit_max_iter=int(sum(r[m]["refit_hit_max_iter"] for r in per_split)),
            cv_fits_hit_max_iter=int(sum(r[m]["cv_fits_hit_max_iter"] for r in per_split)),
        )
        runs = [r[m]["run"] for r in per_split if "run" in r[m]]
        if runs:
            out[m]["runs"] = runs
    return out


def _jsonable(x):
    """Replace non-finite floats (p = inf, std of one split) by strings: strict JSON."""
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float | np.floating) and not np.isfinite(x):
        return str(float(x))
    return x


def _unjson(x):
    """Inverse of :func:`_jsonable` for a loaded report."""
    if isinstance(x, dict):
        return {k: _unjson(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unjson(v) for v in x]
    if isinstance(x, str) and x in ("nan", "inf", "-inf"):
        return float(x)
    return x


def _load_note(env: dict) -> str:
    if "loadavg_start" not in env:
        return "."
    a, b = env["loadavg_start"][0], env.get("loadavg_end", [float("nan")])[0]
    return f" (1-min load average {a:.1f} at start, {b:.1f} at end: other jobs shared the CPUs)."


def _run_note(runs) -> str:
    """BM3KL's convergence per split (R-hat, ESS, sweeps, what stopped the run)."""
    if not runs:
        return ""
    ok = sum(r["converged"] for r in runs)
    worst = max(r["rhat_max"] for r in runs)
    ess = min(r["ess_bulk_min"] for r in runs)
    sweeps = [r["num_samples"] for r in runs]
    named = [r for r in runs if "worst" in r and not r["converged"]]  # recorded since the η study
    where = f" (on {max(named, key=lambda r: r['rhat_max'])['worst']})" if named else ""
    return (
        f"; chains converged (R-hat ≤ 1.01, ESS ≥ 400) in {ok} of {len(runs)} split(s); worst "
        f"R-hat {worst:.3f}{where}, min bulk ESS {ess:.0f}, sweeps per chain "
        f"{min(sweeps)}–{max(sweeps)}"
    )


def _fmt(mean, std):
    return f"{mean:.2f} ± {std:.2f}" if np.isfinite(std) else f"{mean:.2f}"


def _summarise_into(report, name, X, y, per_split, infos, methods) -> None:
    """Put the summary of one data set's finished splits into ``report``."""
    report["data"][name] = dict(
        n=int(len(y)),
        d=int(X.shape[1]),
        P=infos[0]["P"],
        n_train=infos[0]["n_train"],
        n_test=infos[0]["n_test"],
        kernel_time=[i["kernel_time"] for i in infos],
        cv_time=[i["cv_time"] for i in infos],
    )
    report["results"][name] = summarise(per_split, methods)
    report["splits_done"][name] = len(per_split)


def published_check(results: dict, limit: float = 2.0) -> dict:
    """Each published method's gap to paper A's Table I in published standard deviations,
    ``(ours − paper) / paper SD``, per data set; ``within`` says whether every one is within
    ``limit`` of them (issue 22's criterion: 2)."""
    gaps = {
        name: {
            m: round((r[m]["acc_mean"] - PUBLISHED[name][m][0]) / PUBLISHED[name][m][1], 3)
            for m in r
            if m in PUBLISHED.get(name, {})
        }
        for name, r in results.items()
    }
    worst = max((abs(z) for g in gaps.values() for z in g.values()), default=None)
    within = None if worst is None else bool(worst <= limit)  # None: nothing published
    return dict(gap_sd=gaps, limit_sd=limit, max_abs_gap_sd=worst, within=within)


def _table_head(title: str, columns) -> list[str]:
    """A blank line, a Markdown section ``title`` and the head of its table, one row per data set
    and one column per entry of ``columns``."""
    return ["", f"## {title}", "", "| data | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns)]  # fmt: skip


def _paired_table(results: dict, methods, ref: str = "BM3KL") -> list[str]:
    """Markdown lines: each method's test accuracy minus ``ref``'s, paired over the splits
    (mean and standard error, in points); nothing without ``ref`` or with fewer than 2 splits."""
    others = [m for m in methods if m != ref]
    if ref not in methods or not others or min(len(r[ref]["accs"]) for r in results.values()) < 2:
        return []
    lines = _table_head(f"Paired over splits: method − {ref} (accuracy points, mean (SE))", others)
    for name, r in results.items():
        base = np.asarray(r[ref]["accs"])
        diffs = [np.asarray(r[m]["accs"]) - base for m in others]
        row = [f"{d.mean():+.2f} ({d.std(ddof=1) / np.sqrt(len(d)):.2f})" for d in diffs]
        lines.append(f"| {PAPER_NAMES.get(name, name)} | " + " | ".join(row) + " |")
    return lines


def write_markdown(path: Path, report: dict) -> None:
    cfg, methods = report["config"], report["config"]["methods"]
    lines = [
        "# Soft-margin MKL Table I protocol — our results beside the published numbers",
        "",
        f"Generated by `benchmarks/xu_table1.py {' '.join(report['argv'])}` on "
        f"{report['environment']['date']}.",
        "",
        "**Configuration**: "
        + ("QUICK (reduced) protocol" if cfg["quick"] else "full protocol")
        + f"; {cfg['splits']} random 70/30 split(s) (seeds {cfg['seed']}…"
        f"{cfg['seed'] + cfg['splits'] - 1}); {cfg['folds']}-fold stratified CV on the training"
        f" part; C ∈ {cfg['C']}; Lp p ∈ {[round(p, 4) for p in cfg['p']]}; SM1 ν ∈ {cfg['nu']}"
        f" (θ = 1/(νM)); SM2 θ ∈ {cfg['theta']}"
        + (f"; SGMKL v ∈ {cfg['v']}" if "SGMKL" in methods else "")
        + f". Stopping: relative duality gap ≤ {cfg['tol']} (SimpleMKL, SM1, SM2"
        + (", SGMKL" if "SGMKL" in methods else "")
        + f"), relative objective change ≤ {cfg['lp_tol']} (L2/Lp), max_iter {cfg['max_iter']},"
        f" libsvm tol {cfg['svc_tol']}. Pool: KernelPool.simplemkl() (P = 13(d+1)), features "
        "z-scored with training statistics, unit-diagonal kernels.",
        "",
        "Accuracy: test accuracy in %, mean ± sample std over splits; published = paper A "
        "Table I (10 splits). Times: mean wall-clock seconds of the final refit on the whole "
        "training part (precomputed kernels, one process; CV and kernel computation excluded) "
        f"on {report['environment']['machine']}; published = Table II (MATLAB + LibSVM, CPU s).",
        "",
        (
            "Written from units computed by earlier runs (`--summary-only`; their times are "
            "under 'Per data set')"
            if "--summary-only" in report["argv"]
            else "Wall time of the run that wrote this "
            f"{report.get('total_wall_time_s', float('nan')):.0f} s"
        )
        + _load_note(report["environment"])
        + "".join(f" {n}" for n in report.get("notes", [])),
    ]
    done = report.get("splits_done", {})
    partial = {n: k for n, k in done.items() if k < cfg["splits"]}
    if partial:
        lines += [
            "",
            "**Partial**: "
            + ", ".join(f"{n} {k} of {cfg['splits']} splits" for n, k in partial.items())
            + " finished (the means below are over those); the run resumes unit by unit.",
        ]
    lines += _table_head("Test accuracy (%)", methods)
    for name, r in report["results"].items():
        ours = [_fmt(r[m]["acc_mean"], r[m]["acc_std"]) for m in methods]
        pub = [_fmt(*PUBLISHED[name][m]) if m in PUBLISHED.get(name, {}) else "–" for m in methods]
        lines.append(f"| {PAPER_NAMES.get(name, name)} (ours) | " + " | ".join(ours) + " |")
        lines.append(f"| {PAPER_NAMES.get(name, name)} (paper) | " + " | ".join(pub) + " |")
    lines += _paired_table(report["results"], methods)
    check = published_check(report["results"])
    if check["within"] is not None:
        published = sorted({m for g in check["gap_sd"].values() for m in g}, key=methods.index)
        lines += _table_head("Against the published numbers: (ours − paper) / published SD",
                             published)  # fmt: skip
        for name, g in check["gap_sd"].items():
            row = [f"{g[m]:+.2f}" if m in g else "–" for m in published]
            lines.append(f"| {PAPER_NAMES.get(name, name)} | " + " | ".join(row) + " |")
        lines += [
            "",
            f"Largest gap {check['max_abs_gap_sd']:.2f} published SD: "
            + ("every" if check["within"] else "**not every**")
            + f" published method is within {check['limit_sd']:g} SD of the paper"
            + (" (on the finished splits)." if partial else "."),
        ]
    lines += _table_head(
        "Mean training time (s) and mean number of selected kernels (MNK, μ > 1e-3·max μ)", methods
    )
    for name, r in report["results"].items():
        ours = [f"{r[m]['time_mean']:.2f}" for m in methods]
        pt = PUBLISHED_TIME.get(name, {})
        pub = [f"{pt[m]:g}" if m in pt else "–" for m in methods]
        mnk = [f"{r[m]['mnk_mean']:.1f}" for m in methods]
        label = PAPER_NAMES.get(name, name)
        info = report["data"][name]
        lines.append(f"| {label} time (ours) | " + " | ".join(ours) + " |")
        lines.append(f"| {label} time (paper) | " + " | ".join(pub) + " |")
        lines.append(f"| {label} MNK of {info['P']} (ours) | " + " | ".join(mnk) + " |")
    lines += ["", "## Per data set", ""]
    for name, info in report["data"].items():
        r = report["results"][name]
        lines.append(
            f"- **{name}**: N = {info['n']}, d = {info['d']}, P = {info['P']}, train/test = "
            f"{info['n_train']}/{info['n_test']}; CV wall time per split "
            f"{np.mean(info['cv_time']):.0f} s with {cfg['n_jobs']} worker(s)."
        )
        for m in methods:
            hit = r[m]["refits_hit_max_iter"] + r[m]["cv_fits_hit_max_iter"]
            # BM3KL's ConvergenceWarning is its run-length budget, reported by _run_note
            note = f"; {hit} fit(s) stopped at max_iter" if hit and "BM3KL" not in m else ""
            if no_grid(m):
                how = "defaults" if m in NO_GRID else "the settings in its name"
                lines.append(f"  - {m}: {how}, no CV{note}{_run_note(r[m].get('runs'))}")
            else:
                lines.append(f"  - {m}: selected {r[m]['params']}{note}")
    write_atomic(path, "\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced splits, folds and grids")
    ap.add_argument("--splits", type=int, default=None, help="number of random 70/30 splits")
    ap.add_argument("--datasets", default="heart,pima,ionosphere", help="comma-separated names")
    ap.add_argument(
        "--methods", default=",".join(DEFAULT_METHODS), help=f"subset of {','.join(ALL_METHODS)}"
    )
    ap.add_argument("--folds", type=int, default=None, help="CV folds (default 5, quick 3)")
    ap.add_argument("--n-jobs", type=int, default=os.cpu_count() or 1, help="CV workers")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first split")
    ap.add_argument(
        "--bm3kl-max-time", type=float, default=None,
        help="wall-time budget in s of each BM3KL fit (default: none, up to max_samples sweeps)",
    )  # fmt: skip
    ap.add_argument("--out", default=str(RESULTS / "xu_table1"), help="output path stem")
    ap.add_argument("--fresh", action="store_true", help="ignore the units already in the JSON")
    ap.add_argument("--render", metavar="JSON", help="only re-write the .md of a saved .json")
    ap.add_argument(
        "--summary-only", action="store_true",
        help="write the summary and .md from the finished splits in the JSON; compute nothing",
    )  # fmt: skip
    ap.add_argument(
        "--only-splits", default=None, metavar="K,K,...",
        help="run only these split indices (e.g. a second process's share: 7,8,9); the table "
        "still covers every finished split",
    )  # fmt: skip
    add_merge_argument(ap)
    args = ap.parse_args(argv)
    if args.render:
        path = Path(args.render)
        write_markdown(path.with_suffix(".md"), _unjson(json.loads(path.read_text())))
        return

    cfg = dict(QUICK if args.quick else FULL)
    if args.splits is not None:
        cfg["splits"] = args.splits
    if args.folds is not None:
        cfg["folds"] = args.folds
    only = None
    if args.only_splits is not None:
        try:
            only = {int(k) for k in args.only_splits.split(",") if k.strip()}
        except ValueError:
            ap.error(f"--only-splits takes comma-separated integers, not {args.only_splits!r}")
        if not only or not only <= set(range(cfg["splits"])):
            ap.error(f"--only-splits {args.only_splits!r}: indices in 0..{cfg['splits'] - 1}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(m for m in methods if m not in ALL_METHODS and eta_row(m) is None)
    if unknown:
        ap.error(
            f"unknown method(s) {unknown}; choose from {ALL_METHODS} or an η-study row "
            "such as 'BM3KL eta=0.1 max_time=1200'"
        )
    datasets = [d.strip().lower() for d in args.datasets.split(",") if d.strip()]
    datasets = ["pima" if d == "diabetes" else d for d in datasets]
    cfg.update(quick=args.quick, methods=methods, seed=args.seed, n_jobs=args.n_jobs,
               bm3kl_max_time=args.bm3kl_max_time, paper_max_time=PAPER_MAX_TIME)  # fmt: skip

    report = dict(
        argv=sys.argv[1:] if argv is None else list(argv),
        config=cfg,
        environment=dict(
            date=time.strftime("%Y-%m-%d %H:%M"),
            machine=f"{platform.machine()} Linux, {os.cpu_count()} cores",
            python=platform.python_version(),
            numpy=np.__version__,
            sklearn=sklearn.__version__,
            OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS"),
            loadavg_start=list(os.getloadavg()),
        ),
        published_accuracy=PUBLISHED,
        published_time=PUBLISHED_TIME,
        data={},
        results={},
    )
    out = Path(args.out)
    skip = ("methods", "n_jobs", "splits")  # they do not change a unit's result
    unit_config = _jsonable({k: v for k, v in cfg.items() if k not in skip})
    store = UnitStore(out.with_suffix(".json"), unit_config, fresh=args.fresh)
    for other in args.merge:
        store.merge(other)
    t_all = time.perf_counter()
    report["splits_done"] = {}
    for name in datasets:
        X, y = load(name)
        per_split, infos = [], []
        for split in range(cfg["splits"]):
            keys = [store.key(name, f"split {split}", m) for m in methods]
            finished = all(store.done(k) for k in keys)
            if not finished and (args.summary_only or (only is not None and split not in only)):
                continue  # summarise what is finished; compute nothing (or not this split)
            res, info = run_split(name, X, y, split, methods, cfg, args.seed, args.n_jobs, store)
            per_split.append(res)
            infos.append(info)
            # publish after every split, so that a run stopped later leaves its table
            _summarise_into(report, name, X, y, per_split, infos, methods)
            report["published_check"] = published_check(report["results"])
            report["total_wall_time_s"] = time.perf_counter() - t_all
            report["environment"]["loadavg_end"] = list(os.getloadavg())
            store.save(**_jsonable(report))  # strict JSON: no NaN or inf
            write_markdown(out.with_suffix(".md"), report)
    print(f"wrote {out.with_suffix('.json')} and .md in {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
