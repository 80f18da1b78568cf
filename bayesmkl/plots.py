"""Figures for BM3KL fits (matplotlib; every function returns a ``Figure``, nothing is shown).

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot state), so they
can be saved with ``fig.savefig(...)`` from scripts and tests without a display; in Jupyter,
``display(fig)`` or returning the figure renders it.

Every function accepts either a fitted :class:`~bayesmkl.BM3KLClassifier` or the raw arrays:

* :func:`plot_kernel_weights`: forest plot of the top-k kernel weights (posterior mean and an
  equal-tailed interval, 89 % by default);
* :func:`plot_trace`: traces and per-chain histograms of w for the top-k kernels;
* :func:`plot_reliability`: reliability diagram of predictive probabilities;
* :func:`plot_sample_weights`: posterior mean |a| per training point (the "support vectors").
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

__all__ = [
    "plot_kernel_weights",
    "plot_reliability",
    "plot_sample_weights",
    "plot_trace",
    "top_kernels",
]


def _weights_and_names(source, kernel_names=None):
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


def plot_kernel_weights(
    source, kernel_names=None, *, top_k: int = 10, prob: float = 0.89, figsize=None
) -> Figure:
    """Forest plot of the kernel weights w.

    Parameters
    ----------
    source : BM3KLClassifier or array (chains, draws, P)
        A fitted classifier or draws of w.
    kernel_names : sequence of str, optional
        Names when ``source`` is an array.
    top_k : int, default 10
        Kernels shown (largest posterior mean first).
    prob : float, default 0.89
        Mass of the equal-tailed interval (thick line); the thin line spans all draws.

    Returns
    -------
    matplotlib.figure.Figure
    """
    w, names = _weights_and_names(source, kernel_names)
    flat = w.reshape(-1, w.shape[-1])
    idx = top_kernels(w, top_k)
    lo, hi = np.quantile(flat[:, idx], [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    mean = flat[:, idx].mean(axis=0)
    k = len(idx)
    fig = Figure(figsize=figsize or (7.0, 0.45 * k + 1.4), layout="constrained")
    ax = fig.add_subplot()
    ypos = np.arange(k)[::-1]
    ax.hlines(
        ypos,
        flat[:, idx].min(axis=0),
        flat[:, idx].max(axis=0),
        color="0.7",
        lw=1,
        label="all draws",
    )
    ax.hlines(ypos, lo, hi, color="C0", lw=3.5, label=f"{prob:.0%} interval")
    ax.plot(mean, ypos, "o", color="C3", ms=6, label="posterior mean")
    ax.set_yticks(ypos, [names[i] for i in idx])
    ax.set_xlabel("kernel weight w")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"Top {k} of {w.shape[-1]} kernels ({w.shape[0]} chain(s) × {w.shape[1]} draws)")
    ax.legend(loc="lower right", fontsize="small", frameon=False)
    return fig


def plot_trace(source, kernel_names=None, *, top_k: int = 4, figsize=None) -> Figure:
    """Trace plot of w for the top-k kernels: draws per chain (left) and histograms (right).

    Parameters
    ----------
    source : BM3KLClassifier or array (chains, draws, P)
    kernel_names : sequence of str, optional
    top_k : int, default 4

    Returns
    -------
    matplotlib.figure.Figure
    """
    w, names = _weights_and_names(source, kernel_names)
    idx = top_kernels(w, top_k)
    k = len(idx)
    fig = Figure(figsize=figsize or (9.0, 1.9 * k + 0.6), layout="constrained")
    axes = fig.subplots(k, 2, squeeze=False, width_ratios=[3, 1])
    draws = np.arange(w.shape[1])
    bins = max(5, min(20, w.shape[1] // 2))
    for row, m in enumerate(idx):
        ax_t, ax_h = axes[row]
        for c in range(w.shape[0]):
            ax_t.plot(draws, w[c, :, m], lw=1.2, color=f"C{c}", label=f"chain {c}")
            ax_h.hist(w[c, :, m], bins=bins, color=f"C{c}", alpha=0.5, orientation="horizontal")
        ax_t.set_ylabel("w", rotation=0, labelpad=8)
        ax_t.set_title(names[m], fontsize="medium", loc="left")
        ax_h.set_yticks([])
        ax_h.sharey(ax_t)
    axes[-1, 0].set_xlabel("draw (after warm-up)")
    axes[-1, 1].set_xlabel("count")
    if w.shape[0] > 1:
        axes[0, 0].legend(fontsize="small", ncols=min(4, w.shape[0]), frameon=False)
    return fig


def plot_reliability(y_true, proba, classes=None, *, n_bins: int = 10, figsize=None) -> Figure:
    """Reliability diagram of predictive probabilities.

    Binary problems show the frequency of the positive class (``classes[1]``) against the
    predicted probability; multiclass problems show the accuracy of the top class against its
    predicted probability (confidence). Bins are equal-width; a histogram of the predicted
    values is drawn underneath. The title gives the expected calibration error (ECE).

    Parameters
    ----------
    y_true : array (M,)
        True labels.
    proba : array (M, K)
        Predicted probabilities, columns in the order of ``classes``.
    classes : array (K,), optional
        Column labels (default: the sorted unique labels of ``y_true``), e.g. ``clf.classes_``.
    n_bins : int, default 10

    Returns
    -------
    matplotlib.figure.Figure
    """
    y_true = np.asarray(y_true)
    proba = np.asarray(proba, dtype=float)
    if proba.ndim != 2 or proba.shape[0] != y_true.shape[0]:
        raise ValueError(
            f"proba must be (M, K) with M = len(y_true) = {y_true.shape[0]}; got {proba.shape}"
        )
    classes = np.unique(y_true) if classes is None else np.asarray(classes)
    if len(classes) != proba.shape[1]:
        raise ValueError(f"{len(classes)} classes for {proba.shape[1]} probability columns")
    if proba.shape[1] == 2:
        conf = proba[:, 1]
        hit = (y_true == classes[1]).astype(float)
        xlabel, ylabel = f"predicted P(y = {classes[1]})", "observed frequency"
    else:
        top = np.argmax(proba, axis=1)
        conf = proba[np.arange(len(top)), top]
        hit = (classes[top] == y_true).astype(float)
        xlabel, ylabel = "confidence (top-class probability)", "accuracy"
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1]), 0, n_bins - 1)
    counts = np.bincount(which, minlength=n_bins)
    sum_conf = np.bincount(which, weights=conf, minlength=n_bins)
    sum_hit = np.bincount(which, weights=hit, minlength=n_bins)
    ok = counts > 0
    mean_conf = sum_conf[ok] / counts[ok]
    freq = sum_hit[ok] / counts[ok]
    ece = float(np.sum(counts[ok] * np.abs(freq - mean_conf)) / max(1, counts.sum()))

    fig = Figure(figsize=figsize or (5.2, 5.6), layout="constrained")
    ax, ax_h = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    ax.plot([0, 1], [0, 1], "--", color="0.5", lw=1, label="perfect calibration")
    ax.plot(mean_conf, freq, "o-", color="C0", label="model")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel(ylabel)
    ax.set_title(f"Reliability ({len(y_true)} points, ECE = {ece:.3f})")
    ax.legend(loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    ax_h.bar(
        edges[:-1],
        counts,
        width=1.0 / n_bins,
        align="edge",
        color="C0",
        alpha=0.6,
        edgecolor="white",
    )
    ax_h.set_xlabel(xlabel)
    ax_h.set_ylabel("count")
    return fig


def plot_sample_weights(source, y=None, classes=None, *, figsize=None) -> Figure:
    """Posterior mean |a| per training point, one panel per one-vs-all classifier.

    Large |a_ci| marks the training points that carry the decision function (BM3KL's
    counterpart of support vectors; the TPBN prior shrinks the others towards zero).

    Parameters
    ----------
    source : BM3KLClassifier or array (chains, draws, C, N)
        A fitted classifier or draws of a.
    y : array (N,), optional
        Training labels, to colour the points (taken from the classifier when given one).
    classes : array (K,), optional
        Class labels (taken from the classifier when given one).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if hasattr(source, "posterior_"):
        a = np.asarray(source.posterior_["a"])
        y = source.y_train_ if y is None else y
        classes = source.classes_ if classes is None else classes
    else:
        a = np.asarray(source, dtype=float)
        if a.ndim == 3:
            a = a[None]
    if a.ndim != 4:
        raise ValueError(f"a must have shape (chains, draws, C, N); got {a.shape}")
    absa = np.abs(a).mean(axis=(0, 1))  # (C, N)
    C, N = absa.shape
    if classes is not None:
        labels = [str(c) for c in np.asarray(classes).tolist()]
        panel = [f"{labels[1]} vs {labels[0]}"] if C == 1 else [f"{c} vs rest" for c in labels[:C]]
    else:
        labels, panel = None, [f"classifier {c}" for c in range(C)]
    fig = Figure(figsize=figsize or (9.0, 2.2 * C + 0.8), layout="constrained")
    axes = fig.subplots(C, 1, squeeze=False, sharex=True)[:, 0]
    idx = np.arange(N)
    for c, ax in enumerate(axes):
        thr = 0.1 * absa[c].max() if absa[c].max() > 0 else 0.0
        n_sv = int(np.sum(absa[c] > thr))
        if y is not None and classes is not None:
            ya = np.asarray(y)
            for k, lab in enumerate(np.asarray(classes)):
                sel = ya == lab
                ax.vlines(idx[sel], 0, absa[c, sel], color=f"C{k}", lw=1, label=f"y = {labels[k]}")
        else:
            ax.vlines(idx, 0, absa[c], color="C0", lw=1)
        ax.axhline(thr, color="0.4", ls=":", lw=1, label="10% of max")
        ax.set_ylabel("mean |a|")
        ax.set_title(
            f"{panel[c]}: {n_sv} of {N} points above 10% of the largest |a|",
            fontsize="medium",
            loc="left",
        )
        ax.set_ylim(0, 1.3 * absa[c].max() if absa[c].max() > 0 else 1.0)
    axes[0].legend(fontsize="small", frameon=False, ncols=4, loc="upper right")
    axes[-1].set_xlabel("training point index")
    return fig
