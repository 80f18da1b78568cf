"""What the ``bayesmkl`` command prints and writes after a fit: test metrics, kernel weights
with intervals, convergence diagnostics, figures and the saved model."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

__all__ = [
    "fit_and_report",
    "kernels_phrase",
    "metrics",
    "print_diagnostics",
    "print_metrics",
    "print_weights",
    "regression_metrics",
    "write_figures",
]


def metrics(y_true, proba, classes) -> dict:
    from sklearn.metrics import accuracy_score, log_loss

    pred = classes[np.argmax(proba, axis=1)]
    onehot = (np.asarray(y_true)[:, None] == classes[None, :]).astype(float)
    return {
        "accuracy": float(accuracy_score(y_true, pred)),
        "log_loss": float(log_loss(y_true, np.clip(proba, 1e-15, 1.0), labels=classes)),
        # Brier score: mean over points of Σ_k (p_k − 1[y = k])²; for two classes this is
        # twice scikit-learn's brier_score_loss of the positive class, so report that instead.
        "brier": float(
            np.mean(np.sum((proba - onehot) ** 2, axis=1)) / (2.0 if len(classes) == 2 else 1.0)
        ),
    }


def regression_metrics(reg, X, y, coverage: float = 0.9) -> dict:
    """Test metrics of a fitted :class:`~bayesmkl.BM3KLRegressor`: RMSE and MAE of the
    predictive mean, coverage of the central ``coverage`` interval and the mean log predictive
    density (in the units of ``y``)."""
    y = np.asarray(y, dtype=float)
    mean = reg.predict(X)
    lo, hi = reg.predict_interval(X, coverage).T
    return {
        "rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
        "mae": float(np.mean(np.abs(mean - y))),
        "coverage": float(np.mean((lo <= y) & (y <= hi))),
        "nominal": coverage,
        "lpd": float(np.mean(reg.log_predictive_density(X, y))),
    }


def print_metrics(m: dict, n_test: int) -> None:
    print(f"test points : {n_test}")
    if "rmse" in m:
        print(f"RMSE        : {m['rmse']:.6g}")
        print(f"MAE         : {m['mae']:.6g}")
        print(f"{m['nominal']:.0%} interval coverage: {m['coverage']:.3f}")
        print(f"mean log predictive density: {m['lpd']:.4f}")
        return
    print(f"accuracy    : {m['accuracy']:.4f}")
    print(f"log-loss    : {m['log_loss']:.4f}")
    print(f"Brier score : {m['brier']:.4f}")


def print_weights(clf, top_k: int = 8, prob: float = 0.89) -> None:
    w = clf.posterior_["w"].reshape(-1, len(clf.kernel_names_))
    order = np.argsort(-w.mean(axis=0), kind="stable")[:top_k]
    lo, hi = np.quantile(w, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    width = max(len(clf.kernel_names_[m]) for m in order)
    print(f"\ntop {len(order)} kernel weights (posterior mean, {prob:.0%} interval):")
    for m in order:
        print(
            f"  {clf.kernel_names_[m]:<{width}}  {w[:, m].mean():.3f}  [{lo[m]:.3f}, {hi[m]:.3f}]"
        )


def print_diagnostics(clf, top_k: int = 8) -> None:
    import arviz as az

    tree = clf.to_datatree()
    order = np.argsort(-clf.kernel_weights_, kind="stable")[:top_k]
    names = [clf.kernel_names_[m] for m in order]
    chains = clf.posterior_["w"].shape[0]
    print(f"\nconvergence of w ({chains} chain(s); ArviZ summary of the top kernels):")
    if chains < 2:
        print("  (one chain: R-hat needs at least 2 chains; use --chains 2)")
    summ = az.summary(tree, var_names=["w"], coords={"kernel": names})
    cols = [c for c in ("mean", "sd", "ess_bulk", "ess_tail", "r_hat") if c in summ.columns]
    print(summ[cols].to_string())
    rep = clf.run_report_
    if rep.stopped_in == "warmup":
        print(
            f"run: stopped during warm-up, after {rep.warmup_sweeps} of {clf.num_warmup} warm-up "
            f"sweeps per chain ({rep.stopped_by}): the draws are warm-up sweeps, not a posterior "
            "sample; raise --max-time"
        )
        return
    print(
        f"run: {rep.num_samples} sweeps per chain after {clf.n_iter_ - rep.num_samples} warm-up"
        f" ({rep.stopped_by}); max R-hat {rep.rhat_max:.3f}, min bulk ESS "
        f"{rep.ess_bulk_min:.0f} over all kernel weights and "
        + ("held-in decision values" if hasattr(clf, "classes_")
           else "training function values, c and epsilon")
    )  # fmt: skip
    if not rep.converged:
        print(
            f"warning: not converged (worst: {rep.worst}): do not read the intervals above as "
            "posterior intervals.\n  Run longer (--max-time, --max-samples) and check again"
            + (
                "; under the paper's prior (--prior paper) the chains mix slowly."
                if getattr(clf, "prior", None) == "paper"
                else "."
            )
        )
    st = clf.sample_stats_
    print(
        f"divergences: {int(np.sum(st['diverging']))}, mean acceptance: "
        f"{float(np.mean(st['acceptance_rate'])):.3f}"
    )


def write_figures(clf, out: Path, y_test=None, proba=None) -> list[Path]:
    from bayesmkl import plots

    figs = {
        "kernel_weights.png": plots.plot_kernel_weights(clf),
        "trace.png": plots.plot_trace(clf),
        "sample_weights.png": plots.plot_sample_weights(clf),
    }
    if y_test is not None and proba is not None:
        figs["reliability.png"] = plots.plot_reliability(y_test, proba, clf.classes_)
    paths = []
    for name, fig in figs.items():
        p = out / name
        try:
            fig.savefig(p, dpi=110)
        except OSError as exc:  # e.g. a full disk: say which file
            raise OSError(
                exc.errno, f"could not write the figure {p}: {exc.strerror or exc}"
            ) from exc
        paths.append(p)
    return paths


def kernels_phrase(clf) -> str:
    """``"16 kernels"``, or ``"16 centred kernels"`` when the fit centred its pool (the default
    does for three or more classes, which a user comparing with a binary fit should be told)."""
    pool = getattr(getattr(clf, "kernel_input_", None), "pool", None)
    centred = "centred " if getattr(pool, "center", False) else ""
    return f"{len(clf.kernel_names_)} {centred}kernels"


def fit_and_report(clf, X_tr, y_tr, X_te, y_te, out: Path, stem: str) -> None:
    """Fit ``clf``, print metrics on the test split (when given), weights and diagnostics,
    and write the figures and ``out/stem.nc``."""
    t0 = time.perf_counter()
    clf.fit(X_tr, y_tr)
    dt = time.perf_counter() - t0
    regression = not hasattr(clf, "classes_")
    what = "a regression" if regression else f"{len(clf.classes_)} classes"
    print(f"fitted BM3KL on {X_tr.shape[0]} points, {kernels_phrase(clf)}, {what} in {dt:.1f} s")
    proba = None
    if X_te is not None and regression:
        print()
        print_metrics(regression_metrics(clf, X_te, y_te), len(y_te))
    elif X_te is not None:
        proba = clf.predict_proba(X_te)
        print()
        print_metrics(metrics(y_te, proba, clf.classes_), len(y_te))
    print_weights(clf)
    print_diagnostics(clf)
    figs = write_figures(clf, out, y_te, proba)
    model = out / f"{stem}.nc"
    clf.save(model)
    print(f"\nwrote {', '.join(p.name for p in figs)} and {model.name} to {out}")
