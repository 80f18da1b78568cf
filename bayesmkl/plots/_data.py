"""The numbers behind the figures of :mod:`bayesmkl.plots` (NumPy, SciPy and ArviZ; no
matplotlib): which kernels to show, how far their draws can be trusted (R-hat, bulk ESS, the
mark of an unconverged run) and the bins of a reliability diagram with their Wilson intervals.
They are re-exported by :mod:`bayesmkl.plots`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "ReliabilityBins",
    "WeightConvergence",
    "reliability_bins",
    "top_kernels",
    "weight_convergence",
]

#: Below this standard deviation a weight is constant (R-hat undefined, shown as "–").
_CONSTANT_SD = 1e-12


def weights_and_names(source, kernel_names=None):
    """``w (chains, draws, P)`` and names from a classifier or an array."""
    if hasattr(source, "posterior_"):
        return np.asarray(source.posterior_["w"]), list(source.kernel_names_)
    w = np.asarray(source, dtype=float)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"w must have shape (chains, draws, P) or (draws, P); got {w.shape}")
    names = [f"K{m}" for m in range(w.shape[-1])] if kernel_names is None else list(kernel_names)
    if len(names) != w.shape[-1]:
        raise ValueError(f"got {len(names)} kernel names for {w.shape[-1]} kernels")
    return w, names


def top_kernels(w, top_k: int) -> np.ndarray:
    """Indices of the ``top_k`` kernels by posterior mean weight, largest first.

    ``w: (chains, draws, P)`` → ``(min(top_k, P),)``.
    """
    mean = np.asarray(w).reshape(-1, np.shape(w)[-1]).mean(axis=0)
    return np.argsort(-mean, kind="stable")[: max(1, min(int(top_k), mean.size))]


class WeightConvergence(NamedTuple):
    """What :func:`weight_convergence` found.

    Attributes
    ----------
    rhat, ess : ndarray (P,)
        Rank-normalised split R-hat and bulk ESS (all chains) of each weight (``nan`` for a
        constant weight).
    mark : str
        ``""`` for a converged run, else e.g. ``"NOT CONVERGED (max R-hat 1.87)"``.
    rhat_target, ess_target : float
        The targets the run was judged by.
    """

    rhat: np.ndarray
    ess: np.ndarray
    mark: str
    rhat_target: float
    ess_target: float

    def label(self, m: int) -> str:
        """``"R-hat 1.004, ESS 512"`` for kernel ``m``."""
        r, e = self.rhat[m], self.ess[m]
        return "R-hat –, ESS –" if not np.isfinite(r) else f"R-hat {r:.3f}, ESS {e:.0f}"

    def bad(self, m: int) -> bool:
        """Whether kernel ``m`` misses a target."""
        r, e = self.rhat[m], self.ess[m]
        return bool(np.isfinite(r) and (r > self.rhat_target or e < self.ess_target))


def weight_convergence(source, *, rhat_target=None, ess_target=None) -> WeightConvergence:
    """Per-kernel R-hat and bulk ESS of w, and the mark of an unconverged run.

    Parameters
    ----------
    source : BM3KLClassifier or array (chains, draws, P)
    rhat_target, ess_target : float, optional
        Largest R-hat and smallest bulk ESS of a converged run; default: the classifier's
        ``rhat_target`` and ``ess_target``, or 1.01 and 100 per chain for an array.

    Returns
    -------
    WeightConvergence
        ``mark`` is ``"NOT CONVERGED (max R-hat 1.87)"`` when a weight's R-hat exceeds the
        target (or is undefined: too few draws), else ``"LOW ESS (min bulk ESS 35 < 400)"``
        when a bulk ESS is below its target, else ``""``. A classifier's ``run_report_``
        counts too, which also covers the decision values (``"... on f[20]"``).
    """
    from bayesmkl.sampler.convergence import rhat_and_ess_bulk

    w, _ = weights_and_names(source)
    report = getattr(source, "run_report_", None)
    if rhat_target is None:
        rhat_target = getattr(source, "rhat_target", 1.01)
    if ess_target is None:
        ess_target = getattr(source, "ess_target", 100.0 * w.shape[0])
    rhat, ess = np.full(w.shape[-1], np.nan), np.full(w.shape[-1], np.nan)
    varying = np.std(w, axis=(0, 1)) > _CONSTANT_SD
    if varying.any():
        x = np.moveaxis(w[..., varying], -1, 0)  # (k, chains, draws)
        rhat[varying], ess[varying] = rhat_and_ess_bulk(x)
    r_max = float(np.nanmax(rhat, initial=1.0))
    e_min = float(np.nanmin(ess, initial=np.inf))
    where = ""
    if report is not None and report.rhat_max > r_max:  # a decision value is worse
        r_max, where = float(report.rhat_max), f" on {report.worst}"
    if report is not None:
        e_min = min(e_min, float(report.ess_bulk_min))
    if np.any(varying & ~np.isfinite(rhat)):
        mark = "NOT CONVERGED (R-hat undefined: too few draws)"
    elif r_max > rhat_target:
        mark = f"NOT CONVERGED (max R-hat {r_max:.2f}{where})"
    elif e_min < ess_target:
        mark = f"LOW ESS (min bulk ESS {e_min:.0f} < {ess_target:.0f})"
    else:
        mark = ""
    return WeightConvergence(rhat, ess, mark, float(rhat_target), float(ess_target))


class ReliabilityBins(NamedTuple):
    """Bins of a reliability diagram (:func:`reliability_bins`), one entry per bin.

    Attributes
    ----------
    edges : ndarray (B + 1,)
        Bin edges on the predicted probability (0 and 1 at the ends).
    count : ndarray (B,)
        Points per bin.
    confidence : ndarray (B,)
        Mean predicted probability in the bin.
    frequency : ndarray (B,)
        Observed frequency (of the positive class, or of a correct top class).
    lower, upper : ndarray (B,)
        Wilson score interval of the frequency at ``prob``.
    ece : float
        Expected calibration error ``Σ_b n_b |frequency_b − confidence_b| / M``.
    """

    edges: np.ndarray
    count: np.ndarray
    confidence: np.ndarray
    frequency: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    ece: float


def confidence_and_hits(y_true, proba, classes):
    y_true = np.asarray(y_true)
    proba = np.asarray(proba, dtype=float)
    if proba.ndim != 2 or proba.shape[0] != y_true.shape[0]:
        raise ValueError(
            f"proba must be (M, K) with M = len(y_true) = {y_true.shape[0]}; got {proba.shape}"
        )
    if not np.all(np.isfinite(proba)):
        raise ValueError("proba contains NaN or inf")
    if (
        np.any(proba < -1e-9)
        or np.any(proba > 1 + 1e-9)
        or np.any(np.abs(proba.sum(axis=1) - 1.0) > 1e-6)
    ):
        raise ValueError(
            "proba must hold probabilities: entries in [0, 1], each row summing to 1 "
            "(e.g. predict_proba's output, not decision values)"
        )
    hint = ""
    if classes is None:
        classes = np.unique(y_true)
        hint = " (y_true does not hold every class: pass classes=, e.g. clf.classes_)"
    classes = np.asarray(classes)
    if len(classes) != proba.shape[1]:
        raise ValueError(
            f"{len(classes)} classes for {proba.shape[1]} probability columns"
            + (hint if len(classes) < proba.shape[1] else "")
        )
    unknown = np.setdiff1d(y_true, classes)
    if unknown.size:
        raise ValueError(f"y_true has labels that are not among classes: {unknown.tolist()[:5]}")
    if proba.shape[1] == 2:
        conf, hit = proba[:, 1], (y_true == classes[1]).astype(float)
        labels = f"predicted P(y = {classes[1]})", "observed frequency"
    else:
        top = np.argmax(proba, axis=1)
        conf, hit = proba[np.arange(len(top)), top], (classes[top] == y_true).astype(float)
        labels = "confidence (top-class probability)", "accuracy"
    return conf, hit, labels


def _wilson(k, n, prob):
    """Wilson score interval of a binomial proportion ``k / n`` (contains ``k / n``)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + prob / 2))
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return np.clip(centre - half, 0, p), np.clip(centre + half, p, 1)


def reliability_bins(
    y_true, proba, classes=None, *, n_bins: int = 10, strategy: str = "quantile",
    min_count: int = 10, prob: float = 0.95,
) -> ReliabilityBins:  # fmt: skip
    """Bins, observed frequencies and their Wilson intervals for a reliability diagram.

    Binary problems bin the predicted probability of the positive class (``classes[1]``) and
    count how often it occurred; multiclass problems bin the top-class probability and count
    correct predictions.

    Parameters
    ----------
    y_true : array (M,)
    proba : array (M, K)
        Predicted probabilities, columns in the order of ``classes``.
    classes : array (K,), optional
        Column labels (default: the sorted unique labels of ``y_true``).
    n_bins : int, default 10
        Bins before merging.
    strategy : {"quantile", "uniform"}, default "quantile"
        Equal-count bins (edges at quantiles of the predicted probabilities; ties, such as the
        many probabilities of exactly 0 or 1 of the raw rule, share a bin) or equal-width bins.
    min_count : int, default 10
        A bin with fewer points is merged into its smaller neighbour (repeatedly), so that
        every frequency rests on at least ``min_count`` points (or on all M when M is smaller).
    prob : float, default 0.95
        Coverage of the Wilson intervals.

    Returns
    -------
    ReliabilityBins
    """
    conf, hit, _ = confidence_and_hits(y_true, proba, classes)
    if strategy == "quantile":
        inner = np.quantile(conf, np.linspace(0, 1, n_bins + 1)[1:-1])
    elif strategy == "uniform":
        inner = np.linspace(0, 1, n_bins + 1)[1:-1]
    else:
        raise ValueError(f"strategy must be 'quantile' or 'uniform'; got {strategy!r}")
    inner = np.unique(inner[(inner > 0) & (inner < 1)])
    while True:  # bin b is [inner[b-1], inner[b]); merge the sparsest bin until none is sparse
        count = np.bincount(np.searchsorted(inner, conf, side="right"), minlength=inner.size + 1)
        if inner.size == 0 or count.min() >= min_count:
            break
        b = int(np.argmin(count))
        if b == 0 or (b < inner.size and count[b + 1] <= count[b - 1]):
            inner = np.delete(inner, b)  # merge with the right neighbour
        else:
            inner = np.delete(inner, b - 1)  # with the left one
    which = np.searchsorted(inner, conf, side="right")
    keep = count > 0
    n = count[keep].astype(float)
    confidence = np.bincount(which, weights=conf, minlength=inner.size + 1)[keep] / n
    frequency = np.bincount(which, weights=hit, minlength=inner.size + 1)[keep] / n
    lower, upper = _wilson(frequency * n, n, prob)
    edges = np.concatenate([[0.0], inner, [1.0]])
    ece = float(np.sum(n * np.abs(frequency - confidence)) / max(1, conf.size))
    return ReliabilityBins(edges, count[keep], confidence, frequency, lower, upper, ece)
