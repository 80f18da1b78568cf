"""Figures (:mod:`bayesmkl.plots`): each returns a matplotlib Figure with the right content."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from bayesmkl.plots import (
    plot_kernel_weights,
    plot_reliability,
    plot_sample_weights,
    plot_trace,
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
    from test_estimator import SMALL, small_data

    from bayesmkl import BM3KLClassifier

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
