"""Benchmark: a label-noise floor fitted out of fold (issue 22's ECE line).

Question. ``calibration_map.md``'s bounds, fitted on the *test* labels, found that a label-noise
floor ``ε/K + (1 − ε)·p`` on top of the temperature would bring the default fit's ECE to or
below the tuned SVC's on ionosphere and heart (and liver's far below), where the temperature
alone does not. The default map (``calibration="loo"``) cannot learn ε: its PSIS-LOO draws of a
training point almost never put the point on the wrong side, so the fitted floor is ~0. Out of
fold (``calibration="cv"``: K refits, each held-out point predicted by a fit that never saw it)
a point can be confidently wrong, so ε can be fitted there. Does it carry to the test set?

Per data set × split (``calibration.py``'s splits and seeds) one default ``BM3KLClassifier`` fit,
the 3-fold refits of ``calibration="cv"`` (the package's ``crossfit_decision_draws`` with the
fit's own run length and seed), and these maps on the *same* test draws:

* ``LOO T``: the estimator's default map (its ``predict_proba``);
* ``LOO Tε``: temperature and floor fitted on the same PSIS-LOO-weighted training draws;
* ``CV T``: the package's ``fit_calibrator`` on the out-of-fold draws (``calibration="cv"``);
* ``CV Tε``: temperature and floor fitted on the out-of-fold draws;
* ``SVC``: ``calibration.py``'s tuned ``GridSearchCV(SVC(probability=True))``.

Every map minimises the held-out log-loss with T ≤ 2 + 2√(1 + 2γ0) (the estimator's bound) and
0 ≤ ε ≤ 0.5. Binary data sets only (one temperature; the estimator's multiclass map has a
temperature and an intercept per class). Test metrics as in ``calibration.py``.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/calibration_floor.py \
        [--datasets heart,sonar,ionosphere,breast,liver] [--splits 5]

Writes ``benchmarks/results/calibration_floor.{json,md}``. Resumable (``_resume.py``): each data
set × split is one unit, written when it ends; a restart skips finished units.
"""

from __future__ import annotations

import argparse
import functools
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
    run_split_benchmark,
    split_arguments,
    write_atomic,
)
from calibration import baseline, metrics  # noqa: E402
from calibration_map import (  # noqa: E402
    column_summary,
    criterion_lines,
    default_fit,
    fit_temperature_floor,
    floor_proba,
)

DATASETS = ("heart", "sonar", "ionosphere", "breast", "liver")
COLUMNS = ("LOO T", "LOO Tε", "CV T", "CV Tε", "SVC")
REFERENCE = "LOO T"
EPS_MAX = 0.5
N_FOLDS = 3


def fit_floor_map(F, codes, log_w, t_max):
    """``(T, ε, held-out log-loss)`` of the floor map on held-out draws ``F (S, n, 1)`` with
    normalised log weights ``log_w (S, n)``: T ≤ ``t_max``, ε ≤ :data:`EPS_MAX`."""
    (T, eps), loss = fit_temperature_floor(
        F, codes, log_w, t_bounds=(1e-6, t_max), t_starts=(min(1.0, t_max), 0.1 * t_max),
        eps_max=EPS_MAX, eps_starts=(0.0, 0.05),
    )  # fmt: skip
    return float(T), float(eps), loss


def unit(X, y, tr, te, seed, run=None):
    from bayesmkl.calibration import crossfit_decision_draws, fit_calibrator

    fit = default_fit(X, y, tr, te, seed, run)  # the refits below keep its run length
    clf, fit_s, F, codes, log_w, t_max, Xte, F_te, codes_te = fit
    Xtr, ytr = X[tr], y[tr]
    if len(clf.classes_) != 2:
        raise ValueError("calibration_floor.py takes binary data sets only")

    t0 = time.perf_counter()
    K = clf.kernel_input_.pool.train_kernels()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draws, index = crossfit_decision_draws(clf, K, ytr, n_folds=N_FOLDS,
                                               seed=clf.random_seed_)  # fmt: skip
    cv_s = time.perf_counter() - t0
    fold_codes = [codes[i] for i in index]
    F_oof = np.concatenate(draws, axis=1)  # every fold keeps the fit's run length: same S
    codes_oof = np.concatenate(fold_codes)
    uniform = np.full(F_oof.shape[:2], -np.log(F_oof.shape[0]))
    cal_cv = fit_calibrator(draws, fold_codes, gamma0=clf.gamma0_, per_class=True)

    rows, params = {}, {}
    rows["LOO T"] = metrics(clf.predict_proba(Xte), codes_te)
    params["LOO T"] = {"T": clf.calibrator_.temperature, "eps": 0.0}
    rows["CV T"] = metrics(np.exp(cal_cv.log_proba_draws(F_te)).mean(axis=0), codes_te)
    params["CV T"] = {"T": cal_cv.temperature, "eps": 0.0}
    for name, (Fh, ch, lw) in {"LOO Tε": (F, codes, log_w),
                               "CV Tε": (F_oof, codes_oof, uniform)}.items():  # fmt: skip
        T, eps, loss = fit_floor_map(Fh, ch, lw, t_max)
        rows[name] = metrics(floor_proba(F_te, (T, eps)), codes_te)
        params[name] = {"T": T, "eps": eps, "heldout_logloss": loss}
    rows["SVC"] = metrics(baseline("SVC", Xtr, ytr, Xte, seed)[0], codes_te)
    oof_wrong = float(np.mean((F_oof[..., 0].mean(axis=0) > 0) != (codes_oof == 1)))
    return {
        "rows": rows,
        "params": params,
        "converged": bool(clf.run_report_.converged),
        "fit_s": fit_s,
        "cv_s": cv_s,
        "oof_error_rate": oof_wrong,
    }


def summarise(units: dict, datasets, splits) -> dict:
    out = {}
    for ds, us in finished_splits(units, datasets, splits):
        s = {"n_splits": len(us), "converged": sum(u["converged"] for u in us),
             "fit_s": float(np.mean([u["fit_s"] for u in us])),
             "cv_s": float(np.mean([u["cv_s"] for u in us])),
             "oof_error_rate": float(np.mean([u["oof_error_rate"] for u in us])),
             **column_summary(us, COLUMNS, REFERENCE)}  # fmt: skip
        for v in COLUMNS[:-1]:  # the maps' mean fitted parameters
            s[v]["T"] = float(np.mean([u["params"][v]["T"] for u in us]))
            s[v]["eps"] = float(np.mean([u["params"][v]["eps"] for u in us]))
        out[ds] = s
    return out


def _cell(s: dict, v: str, metric: str) -> str:
    d, se = s[v][metric + "_vs_svc"]
    return f"{s[v][metric]:.3f}" if v == "SVC" else f"{s[v][metric]:.3f} ({d:+.3f}, {se:.3f})"


def write_markdown(summary: dict, path: Path, splits: int) -> None:
    lines = [
        "# A label-noise floor fitted out of fold (issue 22)",
        "",
        f"One default `BM3KLClassifier` fit and its {N_FOLDS}-fold refits "
        '(`calibration="cv"`) per data set × split (the splits and seeds of '
        "`calibration.py`); every map scored on the same test draws. `LOO T`: the estimator's "
        "default map; `LOO Tε`: temperature and label-noise floor ε/2 + (1 − ε)·p fitted on "
        'the PSIS-LOO-weighted training draws; `CV T`: the map of `calibration="cv"`; '
        "`CV Tε`: temperature and floor fitted on the out-of-fold draws; `SVC`: the tuned "
        "`GridSearchCV(SVC(probability=True))`. Cells: mean over splits (paired difference "
        "against the SVC, SE).",
        "",
    ]
    for metric in ("logloss", "ece", "acc"):
        lines += [f"## {metric}", "", "| data set | splits | " + " | ".join(COLUMNS) + " |",
                  "|---" * (len(COLUMNS) + 2) + "|"]  # fmt: skip
        for ds, s in summary.items():
            cells = [_cell(s, v, metric) for v in COLUMNS]
            lines.append(f"| {ds} | {s['n_splits']}/{splits} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "## Fitted maps and cost",
        "",
        "| data set | T (LOO T) | T, ε (LOO Tε) | T (CV T) | T, ε (CV Tε) | out-of-fold error "
        "rate | converged | fit s | refits s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds, s in summary.items():
        lines.append(
            f"| {ds} | {s['LOO T']['T']:.2f} | {s['LOO Tε']['T']:.2f}, {s['LOO Tε']['eps']:.3f} "
            f"| {s['CV T']['T']:.2f} | {s['CV Tε']['T']:.2f}, {s['CV Tε']['eps']:.3f} | "
            f"{s['oof_error_rate']:.3f} | {s['converged']}/{s['n_splits']} | {s['fit_s']:.0f} "
            f"| {s['cv_s']:.0f} |"
        )
    lines += ["", "Issue 22's line per column (≤ the SVC; within 10 %):", ""]
    lines += criterion_lines(summary, COLUMNS[:-1])
    lines.append("")
    write_atomic(path, "\n".join(lines))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    split_arguments(p, DATASETS, RESULTS / "calibration_floor")
    args = p.parse_args(argv)
    config = {"folds": N_FOLDS, "eps_max": EPS_MAX}

    def render(summary, path):
        write_markdown(summary, path, args.splits)

    compute = functools.partial(unit, run=fixed_run(args))
    return run_split_benchmark(args, config, compute, summarise, render)


if __name__ == "__main__":
    sys.exit(main())
