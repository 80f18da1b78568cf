"""Figures (:mod:`bayesmkl.plots`): each returns a matplotlib Figure with the right content."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from bayesmkl.plots import (
    plot_kernel_weights,
    plot_reliability,
    plot_sample_weights,
    plot_trace,
    reliability_bins,
    top_kernels,
)


@pytest.fixture()
def w():
    rng = np.random.default_rng(0)
    e = rng.gamma(np.array([5.0, 1.0, 20.0, 0.5, 2.0]), size=(2, 25, 5))
    return e / e.sum(-1, keepdims=True)


NAMES = ["k0", "k1", "k2", "k3", "k4"]


def _labels_bottom_up(ax):
    pairs = zip(ax.get_yticks(), [t.get_text() for t in ax.get_yticklabels()], strict=True)
    return [lab for _, lab in sorted(pairs)]


def test_top_kernels(w):
    np.testing.assert_array_equal(top_kernels(w, 3), [2, 0, 4])
    assert len(top_kernels(w, 99)) == 5


def test_forest_plot(w, tmp_path):
    fig = plot_kernel_weights(w, NAMES, top_k=3)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert _labels_bottom_up(ax) == ["k4", "k0", "k2"]  # largest on top
    fig.savefig(tmp_path / "forest.png")
    assert (tmp_path / "forest.png").stat().st_size > 1000


def test_trace_plot(w):
    fig = plot_trace(w, NAMES, top_k=2)
    assert len(fig.axes) == 4
    assert fig.axes[0].get_title(loc="left") == "k2"
    assert len(fig.axes[0].get_lines()) == 2  # one line per chain


def test_reliability_binary_and_multiclass(tmp_path):
    rng = np.random.default_rng(0)
    p1 = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p1).astype(int)  # perfectly calibrated
    fig = plot_reliability(y, np.c_[1 - p1, p1], [0, 1])
    assert "ECE = 0.0" in fig.axes[0].get_title()
    P = rng.dirichlet(np.ones(3), size=200)
    fig = plot_reliability(np.array(list("abc"))[rng.integers(0, 3, 200)], P, list("abc"))
    assert fig.axes[0].get_ylabel() == "accuracy"
    with pytest.raises(ValueError, match="proba must be"):
        plot_reliability(y, P, [0, 1, 2])


def test_sample_weights_plot():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 10, 3, 30)) * (rng.uniform(size=30) < 0.3)
    fig = plot_sample_weights(a, y=rng.integers(0, 3, 30), classes=[0, 1, 2])
    assert len(fig.axes) == 3
    assert "vs rest" in fig.axes[0].get_title(loc="left")


def test_plots_accept_a_fitted_classifier():
    from bayesmkl import BM3KLClassifier
    from tests.estimators.test_estimator import SMALL, small_data

    Xtr, ytr, Xte, yte = small_data()
    clf = BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr)
    figs = [
        plot_kernel_weights(clf),
        plot_trace(clf),
        plot_sample_weights(clf),
        plot_reliability(yte, clf.predict_proba(Xte), clf.classes_),
    ]
    assert all(isinstance(f, Figure) for f in figs)
    top = clf.kernel_names_[int(np.argmax(clf.kernel_weights_))]
    assert _labels_bottom_up(figs[0].axes[0])[-1] == top
    assert "1 vs 0" in figs[2].axes[0].get_title(loc="left")


# --------------------------------------------------------------------------------------------
# figures that show their own trustworthiness (issue 23)
# --------------------------------------------------------------------------------------------


def _draws(shift=0.0, chains=4, draws=400, seed=1):
    """w (chains, draws, 5) of iid draws; ``shift`` moves chain 1 (an unmixed chain)."""
    rng = np.random.default_rng(seed)
    e = rng.gamma(np.array([5.0, 1.0, 20.0, 0.5, 2.0]), size=(chains, draws, 5))
    e[1, :, 2] *= 1.0 + shift
    return e / e.sum(-1, keepdims=True)


def _right_labels(ax):
    """The R-hat/ESS labels of a forest plot, bottom to top."""
    stats = [a for a in ax.figure.axes if a is not ax and a.bbox.bounds == ax.bbox.bounds][0]
    return _labels_bottom_up(stats)


def test_unconverged_weights_are_marked_on_both_figures():
    from bayesmkl.plots import WARN_COLOR, weight_convergence

    bad = _draws(shift=1.0)
    conv = weight_convergence(bad)
    assert conv.rhat[2] > 1.01 and conv.mark == f"NOT CONVERGED (max R-hat {conv.rhat.max():.2f})"
    forest = plot_kernel_weights(bad, NAMES, top_k=5)
    title = forest.axes[0].get_title()
    assert title.endswith(conv.mark) and forest.axes[0].title.get_color() == WARN_COLOR
    labels = _right_labels(forest.axes[0])
    assert labels[-1] == f"R-hat {conv.rhat[2]:.3f}, ESS {conv.ess[2]:.0f}"  # top row: w[2]
    trace = plot_trace(bad, NAMES, top_k=2)
    assert trace.get_suptitle().endswith(conv.mark)
    assert trace.axes[0].get_title(loc="right") == labels[-1]


def test_converged_weights_carry_no_mark():
    good = _draws()
    forest = plot_kernel_weights(good, NAMES, top_k=5)
    assert "CONVERGED" not in forest.axes[0].get_title()
    assert "ESS" not in forest.axes[0].get_title()
    for label in _right_labels(forest.axes[0]):
        rhat, ess = re.fullmatch(r"R-hat (\d\.\d{3}), ESS (\d+)", label).groups()
        assert float(rhat) <= 1.01 and int(ess) >= 400
    trace = plot_trace(good, NAMES, top_k=2)
    assert "CONVERGED" not in trace.get_suptitle()


def test_other_marks_low_ess_too_few_draws_and_the_run_report():
    from types import SimpleNamespace

    from bayesmkl.plots import weight_convergence
    from bayesmkl.sampler.runlength import RunReport

    good = _draws()
    assert weight_convergence(good, ess_target=1e6).mark.startswith("LOW ESS (min bulk ESS")
    assert "R-hat undefined" in weight_convergence(good[:, :3]).mark
    assert weight_convergence(good[:, :, :1]).mark == ""  # one kernel: w = 1, nothing to mix
    # a classifier: its targets, and its run report, which also monitors decision values
    report = RunReport(converged=False, stopped_by="max_samples", num_samples=400, thinning=1,
                       rhat_max=1.87, ess_bulk_min=35.0, worst="f[20]", seconds=1.0)  # fmt: skip
    clf = SimpleNamespace(posterior_={"w": good}, kernel_names_=NAMES, run_report_=report,
                          rhat_target=1.01, ess_target=400)  # fmt: skip
    assert weight_convergence(clf).mark == "NOT CONVERGED (max R-hat 1.87 on f[20])"
    assert plot_kernel_weights(clf).axes[0].get_title().endswith("(max R-hat 1.87 on f[20])")


def test_reliability_bins_have_enough_points_and_intervals_around_the_frequency():
    from bayesmkl.plots import reliability_bins

    rng = np.random.default_rng(0)
    p1 = rng.uniform(size=300) ** 3  # most predictions near 0
    y = (rng.uniform(size=300) < p1).astype(int)
    bins = reliability_bins(y, np.c_[1 - p1, p1], [0, 1])
    assert bins.count.sum() == 300 and bins.count.min() >= 10
    assert bins.count.max() - bins.count.min() <= 1  # equal-count bins
    assert np.all(bins.lower <= bins.frequency) and np.all(bins.frequency <= bins.upper)
    assert np.all(bins.lower < bins.upper)
    assert np.sum(bins.count * bins.frequency) == y.sum()
    # Wilson's interval of 0 successes in n: [0, z²/(n + z²)]
    zero = reliability_bins(np.zeros(20, int), np.c_[np.ones(20), np.zeros(20)], [0, 1])
    assert zero.upper[0] == pytest.approx(1.959964**2 / (20 + 1.959964**2), rel=1e-6)
    # the raw rule's ties at 0 and 1 and sparse equal-width bins are merged to >= min_count
    q = np.r_[np.zeros(100), np.ones(100), rng.uniform(size=15)]
    yq = (rng.uniform(size=215) < q).astype(int)
    for strategy in ("quantile", "uniform"):
        b = reliability_bins(yq, np.c_[1 - q, q], [0, 1], strategy=strategy, min_count=10)
        assert b.count.min() >= 10 and b.count.sum() == 215
    fig = plot_reliability(y, np.c_[1 - p1, p1], [0, 1])
    (container,) = fig.axes[0].containers  # the error bars, drawn
    data_line, _, (bars,) = container.lines
    freq = data_line.get_ydata()
    np.testing.assert_allclose(freq, bins.frequency)
    for (x0, lo), (x1, hi), f in zip(*np.transpose(bars.get_segments(), (1, 0, 2)), freq,
                                     strict=True):  # fmt: skip
        assert x0 == x1 and lo <= f <= hi and lo < hi
    assert f"{bins.count.size} bins of ≥ 30" in fig.axes[0].get_title()


@pytest.mark.parametrize(
    "case, match",
    [
        ("nan", "proba contains NaN or inf"),  # drew a plot titled "ECE = nan"
        ("decision values", "proba must hold probabilities"),  # drew an ECE of 0.65
        ("negative", "proba must hold probabilities"),
        ("unknown label", r"labels that are not among classes: \[7\]"),  # counted as misses
        ("one class in y", r"pass classes=, e.g. clf.classes_"),
    ],
)
def test_reliability_refuses_what_is_not_a_probability_table(case, match):
    rng = np.random.default_rng(3)
    p = rng.uniform(size=40)
    P, y, classes = np.c_[1 - p, p], (rng.uniform(size=40) < p).astype(int), None
    if case == "nan":
        P[0, 0] = np.nan
    elif case == "decision values":
        P = 2.0 * P
    elif case == "negative":
        P = P - 0.5
    elif case == "unknown label":
        y[0], classes = 7, [0, 1]
    else:
        y = np.zeros(40, int)
    with pytest.raises(ValueError, match=match):
        reliability_bins(y, P, classes)
    with pytest.raises(ValueError, match=match):
        plot_reliability(y, P, classes)
    if case == "one class in y":
        assert reliability_bins(y, P, [0, 1]).count.sum() == 40  # fine with the classes given


def test_every_plot_draws_into_the_axes_it_is_given(w):
    """``ax=``: the figure returned is the caller's, and the artists are on the caller's axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    assert plot_kernel_weights(w, NAMES, top_k=3, ax=ax) is fig
    assert _labels_bottom_up(ax) == ["k4", "k0", "k2"]

    fig, axes = plt.subplots(2, 2)
    assert plot_trace(w, NAMES, top_k=2, ax=axes) is fig
    assert axes[0, 0].get_title(loc="left") == "k2" and len(axes[1, 0].get_lines()) == 2

    rng = np.random.default_rng(0)
    p1 = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p1).astype(int)
    fig, ax = plt.subplots()  # one Axes: the diagram without its histogram
    assert plot_reliability(y, np.c_[1 - p1, p1], [0, 1], ax=ax) is fig
    assert "ECE" in ax.get_title() and len(fig.axes) == 1

    a = rng.normal(size=(2, 10, 3, 30))
    fig, axes = plt.subplots(3, 1)
    assert plot_sample_weights(a, ax=axes) is fig
    assert all("classifier" in ax_.get_title(loc="left") for ax_ in axes)
    plt.close("all")


def test_a_wrong_number_of_axes_is_refused(w):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="ax must be 4 matplotlib Axes for the trace plot"):
        plot_trace(w, NAMES, top_k=2, ax=axes)
    plt.close("all")


def test_the_reliability_title_says_when_bins_were_merged():
    """Equal-count bins of at least ``min_count`` points: 40 points cannot fill 8 bins of 10."""
    rng = np.random.default_rng(1)
    p1 = rng.uniform(size=40)
    y = (rng.uniform(size=40) < p1).astype(int)
    title = plot_reliability(y, np.c_[1 - p1, p1], [0, 1], n_bins=8).axes[0].get_title()
    shown = int(re.search(r"(\d+) bins of", title).group(1))
    assert shown < 8 and "8 asked" in title
    title = plot_reliability(y, np.c_[1 - p1, p1], [0, 1], n_bins=4).axes[0].get_title()
    assert "4 bins" in title and "asked" not in title


def test_long_kernel_names_are_wrapped_in_titles_and_labels(w):
    names = [f"gaussian(sigma={s}) on mean radius, mean texture, mean perimeter" for s in range(5)]
    fig = plot_trace(w, names, top_k=2)
    for line in fig.axes[0].get_title(loc="left").splitlines():
        assert len(line) <= 40
    fig = plot_kernel_weights(w, names, top_k=2)
    assert all(
        max(len(s) for s in t.get_text().splitlines()) <= 40 for t in fig.axes[0].get_yticklabels()
    )


def test_arviz_plots_draws_the_kernel_weights_of_the_datatree(w):
    """The module docstring points to arviz_plots' forest and trace plots of the DataTree's w
    (which make their own figure: no ``ax=``, hence not used by bayesmkl.plots)."""
    import inspect

    import arviz_plots as azp
    import matplotlib

    matplotlib.use("Agg")
    from bayesmkl.posterior.diagnostics import build_datatree

    stats = {"diverging": np.zeros(w.shape[:2], dtype=bool)}
    tree = build_datatree({"w": w}, stats, kernel_names=NAMES)
    for plot in (azp.plot_forest, azp.plot_trace_dist):
        assert "ax" not in inspect.signature(plot).parameters
        pc = plot(tree, var_names=["w"], backend="matplotlib")
        assert pc.viz["figure"].item().axes  # drew into a figure of its own
    import matplotlib.pyplot as plt

    plt.close("all")
