"""Benchmark: which calibration map for the default BM3KL fit (issue 22's accuracy and ECE lines).

Question. ``calibration.md`` found the default BM3KL's accuracy more than 2 points below the
best method on sonar, liver and glass, and its ECE above the tuned SVC's on four sets; on the
binary sets the raw rule (sign of f) was *more* accurate than the calibrated one, which points at
the Platt intercept β of the default map. This benchmark fits the default ``BM3KLClassifier``
once per data set × split (the splits and seeds of ``calibration.py``) and scores maps fitted
on the same PSIS-LOO-weighted training draws (no refit; only the map differs):

* ``Tβ``: the default until issue 22 — binary: logits ``(0, T·f + β)``; multiclass: ``T·f_c``;
* ``T``: temperature only — binary ``(0, T·f)``: predictions are the raw rule's sign(f);
* ``Tβc``: temperature and one intercept per class (``T·f_c + β_c``, β_0 = 0) for multiclass;
  binary as ``Tβ``;
* ``Tcβc``: a temperature and an intercept per class (``T_c·f_c + β_c``), the estimator's
  multiclass map since issue 22, fitted by the package's own
  ``fit_calibrator(..., per_class=True)``; binary as ``T`` (the estimator's binary map);
* ``Tψ``: a temperature on the raw rule's score, logits ``T·ψ(f)`` with
  ψ(f) = 2f + 2s·clip(f, −1, 1), s = √(1 + 2γ0), and T ≤ 1 (never sharper than the raw rule):
  the score's kink at the margin kept, its scale fitted;
* ``raw``: the paper's softmax(ψ(f)) rule, no map (``Tψ`` at T = 1);
* ``Tmean``: a plug-in rule, softmax of ``T·f̄`` with f̄ the posterior-mean decision value
  (no average over draws); T fitted on the PSIS-LOO-weighted mean of each training point's
  draws.

Two bounds, fitted on the *test* labels (so not maps anyone could use; they say how far a
map alone could go on this posterior):

* ``T*``: the estimator's rule (mean over draws of ``softmax(T·f)``) at the temperature that
  minimises the test log-loss;
* ``T*ε``: the same with a label-noise floor, ``ε/K + (1 − ε)·p``, T and ε fitted on the test
  labels (ε caps the confidence of points whose every draw is on the wrong side).

If even ``T*`` and ``T*ε`` leave the ECE above the tuned SVC's (recorded per unit as ``SVC``,
``calibration.py``'s grid), the gap sits in the posterior, not in the map.

Every map minimises the same objective as the estimator's ``calibration="loo"`` (the weighted
mean leave-one-out log-loss of the training points, PSIS weights of the pseudo-likelihood
factor), with T ≤ 2 + 2√(1 + 2γ0) as the estimator bounds it. Test metrics as in
``calibration.py`` (log-loss clipped at 1e-15, top-label ECE with 15 bins, accuracy, Brier).
``T`` refitted here must equal the estimator's own binary map (recorded as ``check_T``/
``check_beta``), ``Tcβc`` its multiclass map (``check_per_class``: the largest difference).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/calibration_map.py [--datasets sonar,glass]
        [--splits 5]

Writes ``benchmarks/results/calibration_map.{json,md}``. Resumable (``_resume.py``): each data
set × split is one unit, written when it ends; a restart skips finished units.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp

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
    svc_line,
    write_atomic,
)
from calibration import (  # noqa: E402
    DATASETS,
    METRICS,
    baseline,
    metrics,
    psis_training_draws,
)

from bayesmkl.calibration import fit_calibrator  # noqa: E402

VARIANTS = ("Tβ", "T", "Tβc", "Tcβc", "Tψ", "raw", "Tmean")
BOUNDS = ("T*", "T*ε")
REFERENCE = "T"  # the estimator's binary map (shared T); Δ columns are paired against it
COLUMNS = VARIANTS + BOUNDS + ("SVC",)


def _psi(F, gamma0):
    s = np.sqrt(1.0 + 2.0 * gamma0)
    return 2.0 * F + 2.0 * s * np.clip(F, -1.0, 1.0)


def _logits(F, theta, variant):
    """Logits ``(S, M, K)`` of decision draws ``F (S, M, C)`` under a map's parameters
    (``Tψ``: ``F`` holds ψ(f), not f)."""
    T = theta[0]
    if F.shape[-1] == 1:
        beta = theta[1] if variant in ("Tβ", "Tβc") else 0.0
        u = T * F + beta
        return np.concatenate([np.zeros_like(u), u], axis=-1)
    z = T * F
    if variant == "Tβc":
        z = z + np.concatenate([[0.0], theta[1:]])[None, None, :]
    return z


def _n_params(variant, C):
    if C == 1:
        return 2 if variant in ("Tβ", "Tβc") else 1
    return C if variant == "Tβc" else 1


def _log_pred(F, codes, log_w, theta, variant):
    """Each point's log predictive ``(n,)`` of its label: the ``log_w``-weighted mean over draws
    of the map's per-draw probability."""
    lp = log_softmax(_logits(F, theta, variant), axis=-1)[:, np.arange(F.shape[1]), codes]
    return logsumexp(log_w + lp, axis=0)


def _proba(F, theta, variant):
    """The map's predictive probabilities ``(n, K)``: the mean over draws of ``softmax``."""
    return np.exp(log_softmax(_logits(F, theta, variant), axis=-1)).mean(axis=0)


def fit_map(F, codes, log_w, variant, t_max):
    """Minimise the PSIS-weighted leave-one-out log-loss over the map's parameters."""

    def nll(theta):
        return -float(np.mean(_log_pred(F, codes, log_w, theta, variant)))

    k = _n_params(variant, F.shape[-1])
    bounds = [(1e-6, t_max)] + [(-20.0, 20.0)] * (k - 1)
    best = None
    for t0 in (1.0, 0.1 * t_max):  # the estimator's two starts
        res = minimize(nll, np.r_[min(t0, t_max), np.zeros(k - 1)], method="L-BFGS-B",
                       bounds=bounds)  # fmt: skip
        if best is None or res.fun < best.fun:
            best = res
    return best.x, float(best.fun)


def floor_nll(F, codes, log_w, theta) -> float:
    """Mean negative log predictive of ``ε/K + (1 − ε)·Σ_s w_s softmax(T·f_s)``, the
    temperature map with a label-noise floor, ``theta = (T, ε)`` (``log_w (S, n)``: normalised
    log weights of each point's draws)."""
    lp = _log_pred(F, codes, log_w, theta, "T")
    eps = theta[1]
    return -float(np.mean(np.logaddexp(np.log(eps / _n_classes(F) + 1e-300), np.log1p(-eps) + lp)))


def fit_temperature_floor(F, codes, log_w, *, t_bounds, t_starts, eps_max, eps_starts):
    """``((T, ε), loss)`` minimising :func:`floor_nll` by L-BFGS-B from every pair of starts
    (``eps_max = 0``: the temperature alone)."""
    bounds = [t_bounds, (0.0, eps_max)]
    starts = [(t, e) for t in t_starts for e in eps_starts if e <= eps_max]
    best = min((minimize(lambda th: floor_nll(F, codes, log_w, th), np.array(x0),
                         method="L-BFGS-B", bounds=bounds) for x0 in starts),
               key=lambda r: r.fun)  # fmt: skip
    return best.x, float(best.fun)


def fit_test_bound(F_te, codes_te, with_floor: bool):
    """``(T, ε)`` minimising the *test* log-loss of ``ε/K + (1 − ε)·mean_s softmax(T·f_s)``
    (``ε = 0`` unless ``with_floor``): a bound on what a map could reach, not a usable map."""
    uniform = np.full(F_te.shape[:2], -np.log(F_te.shape[0]))
    return fit_temperature_floor(F_te, codes_te, uniform, t_bounds=(1e-3, 100.0),
                                 t_starts=(1.0, 5.0), eps_max=0.5 if with_floor else 0.0,
                                 eps_starts=(0.0, 0.02))  # fmt: skip


def _map_params(cal):
    """A fitted ``Calibrator``'s temperature, per-class temperatures and intercepts, flat."""
    return np.r_[cal.temperature, cal.class_temperatures, cal.class_intercepts]


def _n_classes(F):
    return 2 if F.shape[-1] == 1 else F.shape[-1]


def floor_proba(F_te, theta):
    """Predictive probabilities ``(M, K)`` of the floor map ``theta = (T, ε)``."""
    return theta[1] / _n_classes(F_te) + (1.0 - theta[1]) * _proba(F_te, theta, "T")


class DefaultFit(NamedTuple):
    """One default fit on a split, and what every map is fitted on and scored with."""

    clf: object  #: the fitted default ``BM3KLClassifier``
    fit_s: float  #: its fit seconds
    F: np.ndarray  #: training decision draws (S, N, C)
    codes: np.ndarray  #: training label codes (N,)
    log_w: np.ndarray  #: normalised PSIS-LOO log weights of the training draws (S, N)
    t_max: float  #: the estimator's bound on T, 2 + 2√(1 + 2γ0)
    Xte: np.ndarray  #: test features
    F_te: np.ndarray  #: test decision draws (S, M, C)
    codes_te: np.ndarray  #: test label codes (M,)


def default_fit(X, y, tr, te, seed, run=None) -> DefaultFit:
    """Fit the default ``BM3KLClassifier`` (``random_state=seed``; ``run``: the options of
    ``--sweeps``, :func:`_resume.fixed_run`) on ``X[tr]``, warnings silenced, and draw its
    PSIS-LOO-weighted training and its test decision values."""
    from bayesmkl import BM3KLClassifier

    Xtr, Xte, ytr, yte = X[tr], X[te], y[tr], y[te]
    clf = BM3KLClassifier(random_state=seed, progress_bar=False, **(run or {}))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    F, codes, log_w, _ = psis_training_draws(clf, ytr)
    log_w = log_w - logsumexp(log_w, axis=0, keepdims=True)
    t_max = 2.0 + 2.0 * float(np.sqrt(1.0 + 2.0 * clf.gamma0_))
    codes_te = np.searchsorted(np.unique(ytr), yte)
    return DefaultFit(clf, fit_s, F, codes, log_w, t_max, Xte, clf.decision_draws(Xte), codes_te)


def criterion_lines(summary: dict, columns) -> list[str]:
    """Issue 22's line (≤ the SVC on at least 6 sets, within 10 % on the rest) for each of
    ``columns`` over the data sets of ``summary`` (``summary[ds][column][metric]`` means)."""
    return [
        f"* `{v}`: "
        + "; ".join(
            svc_line(m, (s[v][m] / s["SVC"][m] for s in summary.values()))
            for m in ("logloss", "ece")
        )  # fmt: skip
        for v in columns
    ]


def unit(X, y, tr, te, seed, run=None):
    fit = default_fit(X, y, tr, te, seed, run)
    clf, fit_s, F, codes, log_w, t_max, Xte, F_te, codes_te = fit
    Xtr, ytr = X[tr], y[tr]
    rows, params, check = {}, {}, float("nan")
    for v in VARIANTS:
        if v == "raw":
            import copy

            P = copy.deepcopy(clf).set_params(calibration=None).predict_proba(Xte)
            theta, loo = np.array([]), float("nan")
        elif v == "Tcβc":  # the package's own fit, the estimator's map
            cal = fit_calibrator([F], [codes], gamma0=clf.gamma0_, log_weights=[log_w],
                                 per_class=True)  # fmt: skip
            theta = np.r_[cal.class_temperatures, cal.class_intercepts[1:]]
            theta = theta if theta.size else np.array([cal.temperature])  # binary: T
            loo = cal.oof_log_loss
            P = np.exp(cal.log_proba_draws(F_te)).mean(axis=0)
            check = float(np.max(np.abs(_map_params(cal) - _map_params(clf.calibrator_))))
        elif v == "Tmean":  # plug-in: one "draw", the LOO-weighted mean of each point's draws
            f_bar = np.einsum("sn,snc->nc", np.exp(log_w), F)[None]
            theta, loo = fit_map(f_bar, codes, np.zeros(f_bar.shape[:2]), "T", t_max)
            P = _proba(F_te.mean(axis=0)[None], theta, "T")
        else:
            psi = v == "Tψ"
            Ftr, Fte = (_psi(F, clf.gamma0_), _psi(F_te, clf.gamma0_)) if psi else (F, F_te)
            theta, loo = fit_map(Ftr, codes, log_w, v, 1.0 if psi else t_max)
            P = _proba(Fte, theta, v)
        rows[v] = metrics(P, codes_te)
        params[v] = {"theta": [float(t) for t in theta], "loo_logloss": loo}
    for v in BOUNDS:
        theta, test_ll = fit_test_bound(F_te, codes_te, with_floor=v == "T*ε")
        rows[v] = metrics(floor_proba(F_te, theta), codes_te)
        params[v] = {"theta": [float(t) for t in theta], "test_logloss": test_ll}
    rows["SVC"] = metrics(baseline("SVC", Xtr, ytr, Xte, seed)[0], codes_te)
    return {
        "rows": rows,
        "params": params,
        "check_T": clf.calibrator_.temperature,
        "check_per_class": check,
        "check_beta": clf.calibrator_.intercept,
        "estimator_metrics": metrics(clf.predict_proba(Xte), codes_te),
        "converged": bool(clf.run_report_.converged),
        "fit_s": fit_s,
        "n_classes": len(clf.classes_),
    }


def column_summary(us, columns, reference) -> dict:
    """``{column: {metric: mean over the splits' units us, metric + "_diff" / "_vs_svc":
    [mean, SE] of the paired differences against column ``reference`` / the SVC}}`` (the
    differences for accuracy, ECE and log-loss)."""
    out = {}
    for v in columns:
        out[v] = {m: float(np.mean([u["rows"][v][m] for u in us])) for m in METRICS}
        for m in ("acc", "ece", "logloss"):
            for ref, tag in ((reference, "_diff"), ("SVC", "_vs_svc")):
                out[v][m + tag] = mean_se([u["rows"][v][m] - u["rows"][ref][m] for u in us])
    return out


def summarise(units: dict, datasets, splits) -> dict:
    out = {}
    for ds, us in finished_splits(units, datasets, splits):
        out[ds] = {"n_splits": len(us), **column_summary(us, COLUMNS, REFERENCE)}
        out[ds]["theta"] = {
            v: [float(x) for x in np.mean([u["params"][v]["theta"] for u in us], axis=0)]
            for v in VARIANTS + BOUNDS
            if v != "raw"
        }
    return out


def _cell(s: dict, v: str, metric: str, tag: str | None) -> str:
    """The mean, and with a ``tag`` its paired difference (SE) against that reference."""
    c = f"{s[v][metric]:.3f}"
    if tag is not None and metric + tag in s[v]:
        d, se = s[v][metric + tag]
        c += f" (Δ {d:+.3f}, SE {se:.3f})"
    return c


def write_markdown(summary: dict, path: Path, splits: int) -> None:
    lines = [
        "# Calibration map of the default BM3KL fit (issue 22)",
        "",
        "One default `BM3KLClassifier` fit per data set × split (the splits and seeds of "
        "`calibration.py`); every map fitted on the same PSIS-LOO-weighted training draws. "
        "`T` is the estimator's binary map (a temperature: logits `T·f`), `Tβ` adds Platt's "
        "intercept (the default until issue 22), `Tβc` per-class intercepts, `Tcβc` a "
        "temperature and an intercept per class (the estimator's multiclass map since issue "
        "22), `Tψ` a temperature T ≤ 1 on the raw rule's score ψ(f), `raw` the paper's "
        "softmax(ψ(f)), `Tmean` a plug-in rule "
        "softmax(T·f̄) on the posterior-mean decision value. Means over splits; Δ = variant − "
        f"`{REFERENCE}`, paired over splits (SE).",
        "",
    ]
    for metric in ("acc", "logloss", "ece", "brier"):
        lines += [f"## {metric}", "", "| data set | splits | " + " | ".join(VARIANTS) + " |",
                  "|---" * (len(VARIANTS) + 2) + "|"]  # fmt: skip
        for ds, s in summary.items():
            cells = [_cell(s, v, metric, "_diff" if v != REFERENCE else None) for v in VARIANTS]
            lines.append(f"| {ds} | {s['n_splits']}/{splits} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## How far can a map go? Bounds fitted on the test labels",
        "",
        "`T*`: the estimator's rule at the temperature that minimises the *test* log-loss; "
        "`T*ε`: the same with a label-noise floor ε/K + (1 − ε)·p, both fitted on the test "
        "labels. They are not maps anyone could use: they bound what re-fitting the map "
        "could gain on this posterior. Δ = method − tuned SVC + Platt, paired over splits (SE). "
        "Mean fitted (T, ε) in the last column.",
        "",
        "| data set | metric | T | T* | T*ε | SVC | T*ε (T, ε) |",
        "|---|---|---|---|---|---|---|",
    ]
    for ds, s in summary.items():
        th = ", ".join(f"{x:.3g}" for x in s["theta"]["T*ε"])
        for metric in ("logloss", "ece"):
            cells = [_cell(s, v, metric, "_vs_svc") for v in (REFERENCE,) + BOUNDS]
            lines.append(f"| {ds} | {metric} | " + " | ".join(cells)
                         + f" | {s['SVC'][metric]:.3f} | {th} |")  # fmt: skip
    lines += [
        "",
        "Issue 22's line (≤ the SVC on at least 6 sets, within 10 % on the rest), per column:",
        "",
    ]
    lines += criterion_lines(summary, (REFERENCE,) + BOUNDS)
    lines.append("")
    write_atomic(path, "\n".join(lines))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    split_arguments(p, DATASETS, RESULTS / "calibration_map")
    args = p.parse_args(argv)

    def render(summary, path):
        write_markdown(summary, path, args.splits)

    compute = functools.partial(unit, run=fixed_run(args))
    return run_split_benchmark(args, {"columns": list(COLUMNS)}, compute, summarise, render)


if __name__ == "__main__":
    sys.exit(main())
