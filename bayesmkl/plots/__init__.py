"""Figures for BM3KL fits (matplotlib; every function returns a ``Figure``, nothing is shown).

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot state), so they
can be saved with ``fig.savefig(...)`` from scripts and tests without a display; in Jupyter,
``display(fig)`` or returning the figure renders it. Every function also draws into axes of
yours (``ax=``: one ``Axes``, or an array of them for the figures with several panels, e.g. from
``plt.subplots``) and then returns the figure those axes belong to.

Every function accepts either a fitted :class:`~bayesmkl.BM3KLClassifier` or the raw arrays:

* :func:`plot_kernel_weights`: forest plot of the top-k kernel weights (posterior mean and an
  equal-tailed interval, 89 % by default);
* :func:`plot_trace`: traces and per-chain histograms of w for the top-k kernels;
* :func:`plot_reliability`: reliability diagram of predictive probabilities (equal-count bins
  with Wilson intervals; the numbers are :func:`reliability_bins`);
* :func:`plot_sample_weights`: posterior mean ``|a|`` per training point (the "support vectors").

The two figures of w show how far they can be trusted: the rank-normalised R-hat and bulk ESS of
every weight shown (:func:`weight_convergence`), and, when the run is not converged, a red title
that ends in ``NOT CONVERGED (max R-hat 1.87)`` (or ``LOW ESS (min bulk ESS 35 < 400)``). For a
classifier the targets are its ``rhat_target`` and ``ess_target`` and its ``run_report_``
counts too (it also monitors the decision values); for bare draws R-hat ≤ 1.01 and bulk ESS ≥
100 per chain (Vehtari et al. 2021).

Why these figures are not drawn by ``arviz_plots``: ``arviz_plots`` 1.3 (the pinned
``arviz`` 1.x) has a forest plot (``plot_forest``) and a trace plot (``plot_trace_dist``) of
the kernel weights, and both run on the estimators' DataTree::

    import arviz_plots as azp
    azp.plot_forest(clf.to_datatree(), var_names=["w"])
    azp.plot_trace_dist(clf.to_datatree(), var_names=["w"])

but none of its functions takes axes to draw into: each builds a ``PlotCollection`` whose figure
it makes itself (``PlotCollection.grid``/``wrap`` call the backend's ``create_plotting_grid``),
and handing it existing axes means writing the collection's internal ``viz`` tree by hand, which
is not a documented interface. Every figure here must draw into the axes it is given (``ax=``,
for figures of several panels and for the command line's ``demo`` report), so drawing them with
``arviz_plots`` would lose ``ax=``. They also show what the ``arviz_plots`` figures do not: the
top-k kernels only (P is 16 to hundreds), each weight's R-hat and ESS beside it, and the mark of
an unconverged run judged by the fit's own targets. The reliability diagram and the sample
weights have no ``arviz_plots`` counterpart (its ``plot_ppc_pava`` draws a calibration curve
from ``to_datatree(posterior_predictive=True)``, without the Wilson intervals and binning here).
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure

from bayesmkl.plots._data import (
    ReliabilityBins,
    WeightConvergence,
    confidence_and_hits,
    reliability_bins,
    top_kernels,
    weight_convergence,
    weights_and_names,
)

__all__ = [
    "plot_kernel_weights",
    "plot_reliability",
    "plot_sample_weights",
    "plot_trace",
    "reliability_bins",
    "ReliabilityBins",
    "top_kernels",
    "weight_convergence",
    "WeightConvergence",
]

#: Colour of the marks of an unconverged run.
WARN_COLOR = "#c00000"


#: Kernel names longer than this are wrapped onto several lines in titles and tick labels.
NAME_WIDTH = 40


def _wrap(name: str) -> str:
    return textwrap.fill(str(name), NAME_WIDTH, break_on_hyphens=False)


def _axes_grid(ax, shape: tuple[int, int], figsize, what: str):
    """``(figure, axes (rows, cols))``: ``ax`` reshaped and checked, or a new figure's grid."""
    if ax is None:
        fig = Figure(figsize=figsize, layout="constrained")
        return fig, None
    axes = np.asarray(ax, dtype=object).reshape(-1)
    if axes.size != shape[0] * shape[1] or not all(hasattr(a, "plot") for a in axes):
        raise ValueError(
            f"ax must be {shape[0] * shape[1]} matplotlib Axes for {what} (shape {shape}); got "
            f"{axes.size} object(s)"
        )
    return axes[0].figure, axes.reshape(shape)


def _title(ax_or_fig, text: str, mark: str, **kwargs) -> None:
    """``text``, or, for an unconverged run, ``text`` and ``MARK`` below it, in bold red."""
    setter = ax_or_fig.set_title if hasattr(ax_or_fig, "set_title") else ax_or_fig.suptitle
    if mark:
        setter(f"{text}\n{mark}", color=WARN_COLOR, fontweight="bold", **kwargs)
    else:
        setter(text, **kwargs)


def plot_kernel_weights(
    source, kernel_names=None, *, top_k: int = 10, prob: float = 0.89, rhat_target=None,
    ess_target=None, figsize=None, ax=None,
) -> Figure:  # fmt: skip
    """Forest plot of the kernel weights w, with R-hat and bulk ESS per weight.

    The right margin gives each weight's R-hat and bulk ESS (red where a target is missed); the
    title turns red and ends in the mark of :func:`weight_convergence` (``NOT CONVERGED (max
    R-hat 1.87)``) when the run is not converged.

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
    rhat_target, ess_target : float, optional
        Convergence targets (see :func:`weight_convergence`).
    figsize : (float, float), optional
        Size of a new figure (ignored with ``ax``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; by default a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure, or the one ``ax`` belongs to.
    """
    w, names = weights_and_names(source, kernel_names)
    conv = weight_convergence(source, rhat_target=rhat_target, ess_target=ess_target)
    flat = w.reshape(-1, w.shape[-1])
    idx = top_kernels(w, top_k)
    lo, hi = np.quantile(flat[:, idx], [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    mean = flat[:, idx].mean(axis=0)
    k = len(idx)
    fig, grid = _axes_grid(ax, (1, 1), figsize or (7.0, 0.45 * k + 1.4), "the forest plot")
    ax = fig.add_subplot() if grid is None else grid[0, 0]
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
    ax.set_yticks(ypos, [_wrap(names[i]) for i in idx])
    ax.set_xlabel("kernel weight w")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    title = f"Top {k} of {w.shape[-1]} kernels ({w.shape[0]} chain(s) × {w.shape[1]} draws)"
    _title(ax, title, conv.mark)
    ax.legend(loc="lower right", fontsize="small", frameon=False)
    stats = ax.twinx()  # R-hat and ESS of each row, on the right
    stats.set_ylim(ax.get_ylim())
    stats.set_yticks(ypos, [conv.label(m) for m in idx])
    stats.tick_params(axis="y", length=0, labelsize="small")
    for text, m in zip(stats.get_yticklabels(), idx, strict=True):
        text.set_color(WARN_COLOR if conv.bad(m) else "0.25")
    return fig


def plot_trace(
    source, kernel_names=None, *, top_k: int = 4, rhat_target=None, ess_target=None, figsize=None,
    ax=None,
) -> Figure:  # fmt: skip
    """Trace plot of w for the top-k kernels: draws per chain (left) and histograms (right).

    Each row's title gives the weight's R-hat and bulk ESS (red where a target is missed); the
    figure title turns red and ends in the mark of :func:`weight_convergence` (``NOT CONVERGED
    (max R-hat 1.87)``) when the run is not converged.

    Parameters
    ----------
    source : BM3KLClassifier or array (chains, draws, P)
    kernel_names : sequence of str, optional
    top_k : int, default 4
    rhat_target, ess_target : float, optional
        Convergence targets (see :func:`weight_convergence`).
    figsize : (float, float), optional
        Size of a new figure (ignored with ``ax``).
    ax : array of matplotlib.axes.Axes (k, 2), optional
        Axes to draw into, one row per kernel shown (k = ``min(top_k, P)``): the draws on the
        left, the histograms on the right; by default a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure, or the one ``ax`` belongs to.
    """
    w, names = weights_and_names(source, kernel_names)
    conv = weight_convergence(source, rhat_target=rhat_target, ess_target=ess_target)
    idx = top_kernels(w, top_k)
    k = len(idx)
    fig, axes = _axes_grid(ax, (k, 2), figsize or (9.0, 1.9 * k + 0.6), "the trace plot")
    if axes is None:
        axes = fig.subplots(k, 2, squeeze=False, width_ratios=[3, 1])
    draws = np.arange(w.shape[1])
    bins = max(5, min(20, w.shape[1] // 2))
    for row, m in enumerate(idx):
        ax_t, ax_h = axes[row]
        for c in range(w.shape[0]):
            ax_t.plot(draws, w[c, :, m], lw=1.2, color=f"C{c}", label=f"chain {c}")
            ax_h.hist(w[c, :, m], bins=bins, color=f"C{c}", alpha=0.5, orientation="horizontal")
        ax_t.set_ylabel("w", rotation=0, labelpad=8)
        ax_t.set_title(_wrap(names[m]), fontsize="medium", loc="left")
        color = WARN_COLOR if conv.bad(m) else "0.25"
        ax_t.set_title(conv.label(m), fontsize="small", loc="right", color=color)
        ax_h.set_yticks([])
        ax_h.sharey(ax_t)
    axes[-1, 0].set_xlabel("draw (after warm-up)")
    axes[-1, 1].set_xlabel("count")
    if w.shape[0] > 1:
        axes[0, 0].legend(fontsize="small", ncols=min(4, w.shape[0]), frameon=False)
    title = (
        f"w of the top {k} of {w.shape[-1]} kernels ({w.shape[0]} chain(s) × {w.shape[1]} draws)"
    )
    if ax is None:
        _title(fig, title, conv.mark, fontsize="medium")
    else:  # a figure of the caller's may hold other plots: title the top row only
        _title(axes[0, 1], "", conv.mark, fontsize="small")
    return fig


def plot_reliability(
    y_true, proba, classes=None, *, n_bins: int = 10, strategy: str = "quantile",
    min_count: int = 10, prob: float = 0.95, figsize=None, ax=None,
) -> Figure:  # fmt: skip
    """Reliability diagram of predictive probabilities, with an interval per bin.

    Binary problems show the frequency of the positive class (``classes[1]``) against the
    predicted probability; multiclass problems show the accuracy of the top class against its
    predicted probability (confidence). Bins hold equal numbers of points by default, none
    fewer than ``min_count`` (:func:`reliability_bins`), and each observed frequency has its
    Wilson interval (``prob``), so a bin's departure from the diagonal can be told from
    binomial noise. Underneath, a histogram of the predicted values with the bin edges
    (dotted). The title gives the number of bins and the expected calibration error (ECE).

    Quantile edges that coincide (many equal probabilities) and bins with fewer than
    ``min_count`` points are merged, so the figure may show fewer bins than ``n_bins``; the
    title then says so ("3 bins, 8 asked").

    Parameters
    ----------
    y_true : array (M,)
        True labels.
    proba : array (M, K)
        Predicted probabilities, columns in the order of ``classes``.
    classes : array (K,), optional
        Column labels (default: the sorted unique labels of ``y_true``), e.g. ``clf.classes_``.
    n_bins, strategy, min_count, prob
        Binning and interval coverage, see :func:`reliability_bins`.
    figsize : (float, float), optional
        Size of a new figure (ignored with ``ax``).
    ax : matplotlib.axes.Axes, or a pair of them, optional
        Axes to draw into: one for the diagram alone, or two (diagram, histogram); by default a
        new figure with both.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure, or the one ``ax`` belongs to.
    """
    bins = reliability_bins(y_true, proba, classes, n_bins=n_bins, strategy=strategy,
                            min_count=min_count, prob=prob)  # fmt: skip
    conf, _, (xlabel, ylabel) = confidence_and_hits(y_true, proba, classes)
    n_ax = 1 if ax is not None and np.asarray(ax, dtype=object).size == 1 else 2
    fig, grid = _axes_grid(ax, (n_ax, 1), figsize or (5.2, 5.6), "the reliability diagram")
    if grid is None:
        ax, ax_h = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    else:
        ax, ax_h = grid[0, 0], (grid[1, 0] if n_ax == 2 else None)
    ax.plot([0, 1], [0, 1], "--", color="0.5", lw=1, label="perfect calibration")
    ax.errorbar(
        bins.confidence, bins.frequency,
        yerr=[bins.frequency - bins.lower, bins.upper - bins.frequency],
        fmt="o-", color="C0", capsize=3, label=f"model ({prob:.0%} Wilson intervals)",
    )  # fmt: skip
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel(ylabel)
    shown = bins.count.size
    asked = "" if shown == n_bins else f", {n_bins} asked"
    ax.set_title(
        f"Reliability ({conf.size} points, {shown} bins of ≥ {bins.count.min()}{asked}, "
        f"ECE = {bins.ece:.3f})"
    )
    ax.legend(loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    if ax_h is None:
        ax.set_xlabel(xlabel)
        return fig
    ax_h.hist(conf, bins=20, range=(0, 1), color="C0", alpha=0.6, edgecolor="white")
    for edge in bins.edges[1:-1]:
        ax_h.axvline(edge, color="0.3", ls=":", lw=1)
    ax_h.set_xlabel(xlabel)
    ax_h.set_ylabel("count")
    return fig


def plot_sample_weights(source, y=None, classes=None, *, figsize=None, ax=None) -> Figure:
    """Posterior mean ``|a|`` per training point, one panel per one-vs-all classifier (one
    panel for a regressor's function).

    Large ``|a_ci|`` marks the training points that carry the decision function (BM3KL's
    counterpart of support vectors; the TPBN prior shrinks the others towards zero).

    Parameters
    ----------
    source : BM3KLClassifier, BM3KLRegressor or array (chains, draws, C, N)
        A fitted estimator or draws of a.
    y : array (N,), optional
        Training labels, to colour the points (taken from the classifier when given one).
    classes : array (K,), optional
        Class labels (taken from the classifier when given one).
    figsize : (float, float), optional
        Size of a new figure (ignored with ``ax``).
    ax : matplotlib.axes.Axes, or an array of C of them, optional
        Axes to draw into, one per classifier (C = 1 for a binary classifier or a regressor);
        by default a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure, or the one ``ax`` belongs to.
    """
    regression = hasattr(source, "posterior_") and not hasattr(source, "classes_")
    rows = None  # a landmark fit's (docs/math.md §16): the landmarks' training rows
    if hasattr(source, "posterior_"):
        a = np.asarray(source.posterior_["a"])
        landmark = getattr(source.kernel_input_, "n_landmarks", None) is not None
        if landmark:
            rows = getattr(source, "landmark_indices_", None)
            if rows is None:  # precomputed landmark blocks: the landmarks' rows are unknown
                rows = np.arange(a.shape[-1])
        if not regression:  # a regressor's real targets colour nothing
            y = source.y_train_ if y is None else y
            if landmark:
                y = None if getattr(source, "landmark_indices_", None) is None else y[rows]
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
        labels = None
        panel = ["regression function"] if regression else [f"classifier {c}" for c in range(C)]
    fig, grid = _axes_grid(ax, (C, 1), figsize or (9.0, 2.2 * C + 0.8), "the sample weights")
    if grid is None:
        axes = fig.subplots(C, 1, squeeze=False, sharex=True)[:, 0]
    else:
        axes = grid[:, 0]
    idx = np.arange(N) if rows is None else np.asarray(rows)
    what = "points" if rows is None else "landmarks"
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
            f"{panel[c]}: {n_sv} of {N} {what} above 10% of the largest |a|",
            fontsize="medium",
            loc="left",
        )
        ax.set_ylim(0, 1.3 * absa[c].max() if absa[c].max() > 0 else 1.0)
    axes[0].legend(fontsize="small", frameon=False, ncols=4, loc="upper right")
    axes[-1].set_xlabel("training point index")
    return fig
