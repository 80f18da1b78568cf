"""Benchmark: calibrated predictive probabilities of BM3KL against tuned baselines (issues 10, 22).

Data: the shared UCI sets sonar, liver, ionosphere, pima, breast, heart, wine, glass
(``../shared/data/uci`` or ``$BAYESMKL_DATA``; a missing set is skipped with a message). Every
method sees the same ``--splits`` stratified 70/30 splits (``StratifiedShuffleSplit``, seed 0).

Methods (all MKL methods on the BSVM-16 pool):

* ``BM3KL``: the default ``BM3KLClassifier`` (issue 22: the default prior, sampler,
  ``calibration="loo"``, 4 chains, 300 warm-up sweeps and the data-driven run length); the
  options ``--sampler``, ``--chains``, ``--num-warmup``, ``--num-samples``, ``--calibration``
  (``cv`` uses ``--folds`` refits) change it, ``--quick`` shortens it. Whether the fit reached
  the run-length targets is kept with each split (``converged``, ``stopped_by``);
* ``BM3KL paper``: the same with ``prior="paper"`` (η = 1, β_a = 0.1, κ = 1e-10, τ = 1e-4,
  γ0 = 100) and a time budget ``--paper-max-time`` (default 300 s): that posterior does not mix
  in a user's time, and the row says how many of its fits converged;
* ``BM3KL raw``: the same fit with ``calibration=None`` (the paper's softmax(ψ(f)) rule; no
  refit: the posterior is the same, only the probability map differs);
* ``BM3KL psis``: the same fit, temperature/Platt pair fitted on PSIS-LOO-weighted training draws
  (importance ratios 1/L'_i of the pseudo-likelihood) instead of out-of-fold draws, with the
  fraction of training points whose Pareto k̂ > 0.7. Under ``calibration="loo"``, the default
  since issue 21, this is the estimator's own map (the rows agree); it differs from ``BM3KL``
  in a ``--calibration cv`` run;
* η-study rows such as ``--methods "BM3KL eta=0.2 max_time=600"``: the default fit with that
  Dirichlet concentration η under that wall-time budget (both in the name, as in
  ``xu_table1.py``; a sparser η predicts better on a large pool but mixes worse there,
  ``results/xu_eta.md``), with its convergence kept like the paper row's;
* ``BEMKL`` (Gönen 2012, VB), ``BM3KLMAP`` (MAP of the BM3KL posterior with the paper's
  hyper-parameters, raw ψ rule);
* ``SVC``: ``GridSearchCV(StandardScaler + SVC(probability=True))`` over C ∈ 2^{-3,-1,…,9} and
  γ ∈ 2^{-11,-9,…,1} (5-fold, accuracy), Platt scaling inside libsvm;
* ``GPC``: ``StandardScaler + GaussianProcessClassifier(1.0·RBF(1.0))`` (Laplace, one-vs-rest for
  more than two classes).

Metrics on the test split: accuracy, log-loss (probabilities clipped at 1e-15 for every method,
scikit-learn's convention), Brier score Σ_k (p_k − 1[y = k])² averaged over points (for two
classes twice ``sklearn.metrics.brier_score_loss``), and top-label ECE with 15 equal-width bins.

Usage::

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/calibration.py [--quick]
        [--datasets sonar,heart] [--splits 5] [--sampler exact] [--chains 2]
        [--num-warmup 150] [--num-samples 100] [--folds 3]

Writes ``benchmarks/results/calibration.json`` (dataset → method → means and SDs over splits, the
per-split values, timings, the configuration and the machine) and ``calibration.md``; ``--quick``
(2 sets, 2 splits, short chains, no GPC) writes ``calibration_quick.*``; ``--out STEM`` writes
elsewhere. The data set ``tiny`` (60 synthetic rows, no shared data needed) is for smoke runs.

Resumable (``benchmarks/_common.py``): every finished unit — data set × split × method, where
one BM3KL fit gives the three BM3KL rows — is written to the JSON at once (atomically), with the
package commit and the load average; a restart with the same settings skips the units already
there, so an interrupted run loses at most the unit it was in (``--fresh`` starts over;
``--resume`` is accepted for compatibility: resuming is the default). A second process may run
other data sets with its own ``--out``; ``--merge OTHER.json`` then takes its units in.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import (  # noqa: E402
    UnitStore,
    add_merge_argument,
    classification_metrics,
    eta_row,
    load_dataset,
    write_atomic,
)

DATASETS = ("sonar", "liver", "ionosphere", "pima", "breast", "heart", "wine", "glass")
METHODS = ("BM3KL", "BM3KL raw", "BM3KL psis", "BM3KL paper", "BEMKL", "BM3KLMAP", "SVC", "GPC")
METRICS = ("logloss", "ece", "acc", "brier")

# ------------------------------------------------------------------------------------------
# methods
# ------------------------------------------------------------------------------------------


def bm3kl_params(args, seed, paper: bool = False, eta=None) -> dict:
    """The estimator's parameters: its defaults except what the options set (``eta``: an
    η-study row's ``(eta, max_time)``)."""
    params = {"random_state": seed, "progress_bar": False}
    if args.sampler is not None:
        params["sampler"] = args.sampler
    for name in ("chains", "num_warmup", "num_samples"):
        value = getattr(args, name)
        if value is not None:
            params["num_chains" if name == "chains" else name] = value
    if args.calibration is not None:
        params["calibration"] = args.folds if args.calibration == "cv" else args.calibration
    if paper:
        params.update(prior="paper", max_time=args.paper_max_time)
    if eta is not None:
        params.update(eta=eta[0], max_time=eta[1])
    return params


def run_info(clf) -> dict:
    r = clf.run_report_
    return {"converged": bool(r.converged), "stopped_by": r.stopped_by,
            "rhat_max": float(r.rhat_max), "ess_bulk_min": float(r.ess_bulk_min),
            "num_samples": int(r.num_samples)}  # fmt: skip


def timed_fit(params, Xtr, ytr):
    """A ``BM3KLClassifier(**params)`` fitted quietly (warnings are kept in ``run_info``) and
    its fit's wall seconds."""
    from bayesmkl import BM3KLClassifier

    clf = BM3KLClassifier(**params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(Xtr, ytr)
    return clf, time.perf_counter() - t0


def bm3kl_budgeted(method, Xtr, ytr, Xte, args, seed):
    """A budgeted row ("BM3KL paper" or an η-study row) → its probabilities and whether it
    converged."""
    params = bm3kl_params(args, seed, paper=method == "BM3KL paper", eta=eta_row(method))
    clf, fit_s = timed_fit(params, Xtr, ytr)
    return {method: (clf.predict_proba(Xte), fit_s)}, run_info(clf)


def psis_training_draws(clf, ytr):
    """Training decision draws of a fitted classifier and their PSIS-LOO weights.

    Returns ``F (S, N, C)``, the label codes ``(N,)``, the log importance weights ``(S, N)`` of
    each point's leave-one-out posterior (ratios ``1/L_i`` of its pseudo-likelihood factor,
    Pareto-smoothed) and the Pareto k̂ of each point.
    """
    from bayesmkl.baselines._base import validate_labels
    from bayesmkl.config import x64_scope
    from bayesmkl.model.classification import signed_targets
    from bayesmkl.model.likelihood import log_pseudo_likelihood_terms
    from bayesmkl.posterior.loo import psis_log_weights
    from bayesmkl.posterior.predictive import draw_decision_values

    K = clf.kernel_input_.pool.train_kernels()
    w, a, b = clf._flat_draws()
    F = np.asarray(draw_decision_values(w, a, b, K))  # (S, N, C)
    _, codes = validate_labels(ytr, len(ytr))
    delta = np.asarray(signed_targets(codes, len(clf.classes_), clf.binary_mode))
    with x64_scope():  # a low-level function: bayesmkl's entry points alone scope 64-bit JAX
        terms = log_pseudo_likelihood_terms(np.swapaxes(F, 1, 2), delta[None], clf.gamma0_)
        log_lik = np.asarray(terms).sum(axis=1)  # (S, N)
    log_w, khat = psis_log_weights(log_lik)
    return F, codes, log_w, khat


def bm3kl_family(Xtr, ytr, Xte, args, seed):
    """One BM3KL fit → probabilities of the calibrated, raw and PSIS-LOO-calibrated rules."""
    import copy

    from bayesmkl.posterior.calibration import fit_calibrator

    clf, fit_s = timed_fit(bm3kl_params(args, seed), Xtr, ytr)
    out = {"BM3KL": (clf.predict_proba(Xte), fit_s)}
    raw = copy.deepcopy(clf).set_params(calibration=None)
    out["BM3KL raw"] = (raw.predict_proba(Xte), fit_s)

    # PSIS-LOO weights from the pseudo-likelihood factor (the estimator's "loo" map, refitted)
    F, codes, log_w, khat = psis_training_draws(clf, ytr)
    cal = fit_calibrator([F], [codes], gamma0=clf.gamma0_, log_weights=[log_w], n_folds=1)
    P = np.exp(cal.log_proba_draws(clf.decision_draws(Xte))).mean(axis=0)
    out["BM3KL psis"] = (P, fit_s)
    info = {
        "temperature": clf.calibrator_.temperature,
        "intercept": clf.calibrator_.intercept,
        "psis_temperature": cal.temperature,
        "khat_gt_0.7": float(np.mean(khat > 0.7)),
        "khat_median": float(np.nanmedian(khat)),
        "oof_logloss": getattr(clf.calibrator_, "oof_log_loss", None),
        **run_info(clf),
    }
    return out, info


def baseline(name, Xtr, ytr, Xte, seed):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from bayesmkl.baselines import BEMKL, BM3KLMAP
    from bayesmkl.model.classification import Hyper

    if name == "BEMKL":
        model = BEMKL(kernels="bsvm16", random_state=seed)
    elif name == "BM3KLMAP":
        model = BM3KLMAP(kernels="bsvm16", **Hyper.paper()._asdict())
    elif name == "SVC":
        model = GridSearchCV(
            make_pipeline(StandardScaler(), SVC(probability=True, random_state=seed)),
            {"svc__C": 2.0 ** np.arange(-3, 10, 2), "svc__gamma": 2.0 ** np.arange(-11, 2, 2)},
            cv=StratifiedKFold(5, shuffle=True, random_state=seed),
            n_jobs=1,
        )
    elif name == "GPC":
        model = make_pipeline(
            StandardScaler(),
            GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=seed),
        )
    else:  # pragma: no cover
        raise ValueError(name)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    return model.predict_proba(Xte), fit_s


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------


def _int_or_auto(text: str):
    return text if text == "auto" else int(text)


def summarise(per_split: dict) -> dict:
    out = {}
    for method, runs in per_split.items():
        d = {}
        for m in METRICS + ("fit_s",):
            v = np.array([r[m] for r in runs], dtype=float)
            d[m] = float(v.mean())
            d[m + "_sd"] = float(v.std(ddof=1)) if len(v) > 1 else 0.0
        d["n_splits"] = len(runs)
        out[method] = d
    return out


def paired_difference(per: dict, metric: str, a: str = "BM3KL", b: str = "SVC"):
    """Mean of ``a − b`` over the splits both ran, and its standard error (None for one split)."""
    d = np.array([ra[metric] - rb[metric] for ra, rb in zip(per[a], per[b], strict=True)])
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else None
    return float(d.mean()), se


def criterion(summary: dict, per: dict | None = None) -> dict:
    """Issue 10's test for one data set: BM3KL vs SVC+Platt and vs the most accurate method,
    with the paired split-by-split differences of log-loss and ECE (``per``: rows per split)."""
    bm, svc = summary.get("BM3KL"), summary.get("SVC")
    if bm is None or svc is None:
        return {}
    # the methods: not the PSIS variant of BM3KL's map, not the η-study rows
    compared = [m for m in summary if m != "BM3KL psis" and not eta_row(m)]
    best_acc = max(summary[m]["acc"] for m in compared)
    paired = {}
    for metric in ("logloss", "ece") if per else ():
        paired[metric + "_diff"], paired[metric + "_diff_se"] = paired_difference(per, metric)
    best = max(compared, key=lambda m: summary[m]["acc"])
    if per and best != "BM3KL" and len(per[best]) == len(per["BM3KL"]):  # same splits
        paired["acc_diff_best"], paired["acc_diff_best_se"] = paired_difference(
            per, "acc", "BM3KL", best
        )
    return {
        **paired,
        "logloss_le_svc": bm["logloss"] <= svc["logloss"],
        "ece_le_svc": bm["ece"] <= svc["ece"],
        "logloss_within_10pct": bm["logloss"] <= 1.1 * svc["logloss"],
        "ece_within_10pct": bm["ece"] <= 1.1 * svc["ece"],
        "acc_within_2pts_of_best": bm["acc"] >= best_acc - 0.02,
        "best_acc_method": best,
    }


def _converged(infos: list) -> str:
    return f"{sum(bool(i.get('converged')) for i in infos)}/{len(infos)}" if infos else "–"


def write_markdown(result: dict, path: Path) -> None:
    cfg = result["config"]
    given = {k: cfg.get(k) for k in ("sampler", "chains", "num_warmup", "num_samples",
                                     "calibration") if cfg.get(k) is not None}  # fmt: skip
    lines = [
        "# Calibration benchmark (issues 10, 22)",
        "",
        f"{cfg['splits']} stratified 70/30 splits per set; BM3KL: the default "
        f"`BM3KLClassifier` (options changed: {given or 'none'}); BM3KL paper: the same with "
        f'`prior="paper"` and `max_time={cfg.get("paper_max_time")}`. Means over splits '
        "(± SD). Log-loss clips probabilities at 1e-15; ECE: top-label, 15 bins; Brier: Σ_k "
        "over classes.",
        "",
        f"Machine: {result['machine']['cpu_count']} CPUs, load average at the end "
        f"{result['machine'].get('loadavg_1_5_15')}; wall time {result['wall_s']:.0f} s "
        "(summed over resumed runs).",
        "",
    ]
    present = dict.fromkeys(m for r in result["datasets"].values() for m in r)
    studies = [m for m in present if eta_row(m)]
    for metric, fmt in (("logloss", ".3f"), ("ece", ".3f"), ("acc", ".3f"), ("brier", ".3f")):
        methods = [m for m in (*METHODS, *studies) if m in present]
        lines += [f"## {metric}", "", "| data set | " + " | ".join(methods) + " |"]
        lines += ["|---" * (len(methods) + 1) + "|"]
        for ds, summ in result["datasets"].items():
            cells = []
            for m in methods:
                if m in summ:
                    n = summ[m]["n_splits"]
                    part = "" if n >= cfg["splits"] else f" ({n} of {cfg['splits']} splits)"
                    cells.append(f"{summ[m][metric]:{fmt}} ± {summ[m][metric + '_sd']:{fmt}}{part}")
                else:
                    cells.append("–")
            lines.append(f"| {ds} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## Issue 10 criterion (BM3KL calibrated vs SVC + Platt)",
        "",
        "| data set | log-loss ≤ SVC | ECE ≤ SVC | log-loss ≤ 1.1·SVC | ECE ≤ 1.1·SVC | "
        "acc ≥ best − 2 pts (best) | log-loss − SVC (SE) | ECE − SVC (SE) | acc − best (SE) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def diff(c, metric):
        mean, se = c.get(metric + "_diff"), c.get(metric + "_diff_se")
        if metric == "acc":
            mean, se = c.get("acc_diff_best"), c.get("acc_diff_best_se")
        return "–" if mean is None else f"{mean:+.4f}" + ("" if se is None else f" ({se:.4f})")

    for ds, c in result["criterion"].items():
        if c:
            lines.append(
                f"| {ds} | {c['logloss_le_svc']} | {c['ece_le_svc']} | "
                f"{c['logloss_within_10pct']} | {c['ece_within_10pct']} | "
                f"{c['acc_within_2pts_of_best']} ({c['best_acc_method']}) | "
                f"{diff(c, 'logloss')} | {diff(c, 'ece')} | {diff(c, 'acc')} |"
            )
    lines += [
        "",
        "The last three columns: BM3KL minus the tuned SVC (log-loss, ECE; negative: BM3KL "
        "better) and minus the most accurate method (accuracy; negative: BM3KL worse), split by "
        "split on the same splits, mean and standard error over the splits.",
    ]
    lines += ["", "## BM3KL calibration maps, the PSIS diagnostic and convergence", ""]
    lines += [
        "| data set | T (mean) | β (mean) | PSIS T | share of k̂ > 0.7 | BM3KL converged "
        "| BM3KL paper converged |",
        "|---|---|---|---|---|---|---|",
    ]
    for ds, info in result["bm3kl_info"].items():
        if not info:  # no BM3KL fit on this set
            continue
        mean = {
            k: np.mean([i[k] for i in info])
            for k in ("temperature", "intercept", "psis_temperature", "khat_gt_0.7")
        }
        paper = result.get("paper_info", {}).get(ds, [])
        lines.append(
            f"| {ds} | {mean['temperature']:.2f} | {mean['intercept']:.2f} | "
            f"{mean['psis_temperature']:.2f} | {mean['khat_gt_0.7']:.2f} | {_converged(info)} "
            f"| {_converged(paper)} |"
        )
    lines += _eta_section(result, studies)
    write_atomic(path, "\n".join(lines) + "\n")


def _eta_section(result: dict, studies: list) -> list[str]:
    """Each η-study row minus the default BM3KL row, paired over the splits both finished, and
    how many of its fits converged."""
    if not studies:
        return []
    lines = ["", "## η-study rows minus BM3KL (paired over splits: mean (SE))", ""]
    lines += ["| data set | row | log-loss | ECE | accuracy | converged |", "|---" * 6 + "|"]
    for ds, per in result["per_split"].items():
        for m in studies:
            if m not in per or "BM3KL" not in per:
                continue
            # the splits both rows finished, matched by index (a row may lack some splits)
            default = {r["split"]: r for r in per["BM3KL"]}
            rows = [r for r in per[m] if r["split"] in default]
            both = {m: rows, "BM3KL": [default[r["split"]] for r in rows]}
            cells = []
            for metric in ("logloss", "ece", "acc"):
                mean, se = paired_difference(both, metric, m, "BM3KL")
                cells.append(f"{mean:+.4f}" + ("" if se is None else f" ({se:.4f})"))
            infos = result.get("eta_info", {}).get(ds, {}).get(m, [])
            lines.append(f"| {ds} | {m} | " + " | ".join(cells) + f" | {_converged(infos)} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 sets, 2 splits, short chains, no GPC")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--methods", default=",".join(m for m in METHODS if m not in ("BM3KL raw",
                                                                               "BM3KL psis")),
                   help="BM3KL also gives 'BM3KL raw' and 'BM3KL psis'")  # fmt: skip
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--sampler", default=None, help="default: the estimator's")
    p.add_argument("--chains", type=int, default=None, help="default: the estimator's (4)")
    p.add_argument("--num-warmup", type=int, default=None, help="default: the estimator's")
    p.add_argument("--num-samples", type=_int_or_auto, default=None,
                   help="an int or 'auto' (default: the estimator's, 'auto')")  # fmt: skip
    p.add_argument("--calibration", choices=("loo", "cv"), default=None,
                   help="default: the estimator's ('loo')")  # fmt: skip
    p.add_argument("--folds", type=int, default=3, help="cross-fitting folds of --calibration cv")
    p.add_argument("--paper-max-time", type=float, default=300.0,
                   help="time budget (s) of each 'BM3KL paper' fit")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--resume", action="store_true",
        help="keep the units already in the results file (the default; kept for compatibility)",
    )  # fmt: skip
    p.add_argument("--fresh", action="store_true", help="ignore the units already in the file")
    p.add_argument("--stem", default=None, help="results file name (default calibration[_quick])")
    p.add_argument("--out", default=None, help="results path stem (default results/STEM)")
    add_merge_argument(p)
    args = p.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(m for m in set(methods) - set(METHODS) if eta_row(m) is None)
    if unknown:
        p.error(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    stem = "calibration"
    if args.quick:
        datasets, args.splits = datasets[:1] + ["glass"], 2
        args.num_warmup, args.num_samples = 60, 40
        args.chains = args.chains or 2
        methods = [m for m in methods if m != "GPC"]
        stem = "calibration_quick"
    stem = args.stem or stem

    import jax
    from sklearn.model_selection import StratifiedShuffleSplit

    from bayesmkl.datasets import find_uci_dir
    from bayesmkl.estimators._fitting import enable_compilation_cache

    enable_compilation_cache()
    if find_uci_dir() is None and any(d != "tiny" for d in datasets):
        print("shared UCI data not found (../shared/data/uci or $BAYESMKL_DATA); nothing to do")
        return 1
    out = Path(args.out) if args.out else RESULTS / stem
    unit_keys = ("splits", "sampler", "chains", "num_warmup", "num_samples", "calibration",
                 "folds", "paper_max_time", "seed")  # fmt: skip
    store = UnitStore(out.with_suffix(".json"), {k: getattr(args, k) for k in unit_keys},
                      fresh=args.fresh)  # fmt: skip
    for other in args.merge:
        store.merge(other)
    result = {
        "config": {**vars(args), "methods": methods, "datasets": datasets, "split_seed": 0},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "datasets": {},
        "per_split": {},
        "criterion": {},
        "bm3kl_info": {},
        "paper_info": {},
        "eta_info": {},
    }
    wall_s = 0.0  # summed over the units, whichever run computed them
    # data sets of earlier runs that this one does not ask for keep their summaries
    earlier = [k.split(" | ")[0] for k in store.units]
    extra = [d for d in dict.fromkeys(earlier) if d not in datasets]
    # η-study rows asked for now or finished by an earlier run, after the fixed methods
    rows = [m for m in methods if eta_row(m)] + [k.split(" | ")[-1] for k in store.units]
    all_methods = (*METHODS, *dict.fromkeys(m for m in rows if eta_row(m)))
    for ds in datasets + extra:
        compute = ds in datasets
        # a computed set's summary keeps the methods an earlier run finished on it
        keys = [[store.key(ds, f"split {k}", m) for m in all_methods
                 if (compute and m in methods) or store.done(store.key(ds, f"split {k}", m))]
                for k in range(args.splits)]  # fmt: skip
        if compute and not all(store.done(key) for row in keys for key in row):
            try:  # the data only when a unit is still to do
                X, y = load_dataset(ds)
            except FileNotFoundError as exc:
                print(f"skipping {ds}: {exc}")
                continue
            splitter = StratifiedShuffleSplit(args.splits, test_size=0.3, random_state=args.seed)
            splits = list(splitter.split(X, y))
        per = {}
        infos, paper_infos, eta_infos = [], [], {}
        for k in range(args.splits):
            fitted = False
            for key in keys[k]:
                m = key.split(" | ")[-1]
                if not store.done(key):
                    if not compute:
                        continue
                    tr, te = splits[k]
                    Xtr, Xte, ytr, yte = X[tr], X[te], y[tr], y[te]
                    codes = np.searchsorted(np.unique(ytr), yte)
                    t0 = time.perf_counter()
                    if m == "BM3KL":
                        outs, info = bm3kl_family(Xtr, ytr, Xte, args, args.seed + k)
                    elif m == "BM3KL paper" or eta_row(m):
                        outs, info = bm3kl_budgeted(m, Xtr, ytr, Xte, args, args.seed + k)
                    else:
                        outs, info = {m: baseline(m, Xtr, ytr, Xte, args.seed + k)}, None
                    rows = {name: {**classification_metrics(P, codes), "fit_s": fit_s}
                            for name, (P, fit_s) in outs.items()}  # fmt: skip
                    wall = time.perf_counter() - t0
                    store.add(key, {"rows": rows, "info": info, "wall_s": wall})
                    fitted = True
                unit = store.result(key)
                wall_s += unit["wall_s"]
                if unit["info"] is not None:
                    if eta_row(m):
                        eta_infos.setdefault(m, []).append(unit["info"])
                    else:
                        (paper_infos if m == "BM3KL paper" else infos).append(unit["info"])
                for name, row in unit["rows"].items():
                    per.setdefault(name, []).append({**row, "split": k})
            if fitted:
                # Every BM3KL fit compiles new executables that JAX's caches keep mapped (about
                # 1,100 memory maps per fit); after ~60 fits LLVM cannot map more and the
                # process segfaults (vm.max_map_count = 65530). Clearing the caches releases them.
                jax.clear_caches()
                gc.collect()
                done = {n: round(r[-1]["logloss"], 3) for n, r in per.items()}
                print(f"{ds} split {k}: log-loss {done}", flush=True)
        if not per:
            continue
        summ = summarise(per)
        result["datasets"][ds] = summ
        result["per_split"][ds] = per
        result["criterion"][ds] = criterion(summ, per)
        result["bm3kl_info"][ds] = infos
        result["paper_info"][ds] = paper_infos
        result["eta_info"][ds] = eta_infos
        result["wall_s"] = wall_s
        result["machine"]["loadavg_1_5_15"] = list(os.getloadavg())
        store.save(**result)
        write_markdown(result, out.with_suffix(".md"))
    crit = [c for c in result["criterion"].values() if c]
    both = sum(c["logloss_le_svc"] and c["ece_le_svc"] for c in crit)
    print(f"\nBM3KL log-loss and ECE <= SVC on {both} of {len(crit)} sets")
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
