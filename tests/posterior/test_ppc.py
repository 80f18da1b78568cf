"""Posterior predictive checks: label-typed class coordinates and the ``posterior_predictive`` /
``observed_data`` groups of the DataTree
(:func:`bayesmkl.posterior.diagnostics.add_posterior_predictive`).

Statistical checks: each replicated label is one categorical draw, so the count of class k over
all draws and points has mean ``Σ p`` and variance ``Σ p(1 − p)``; the tests require the observed
count within 4 standard deviations (a false alarm about once in 16 000 runs; the seeds are
fixed, so the outcome is deterministic).
"""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pytest

from bayesmkl import BM3KLClassifier, KernelPool
from bayesmkl.posterior.diagnostics import add_posterior_predictive, add_predictions, build_datatree
from tests.estimators.test_estimator import SMALL, small_data
from tests.posterior.test_diagnostics import synthetic

matplotlib.use("Agg")


def _count_z(y_rep, proba, labels):
    """z-scores of the class counts of ``y_rep`` against their expectation under ``proba``."""
    p = proba.reshape(-1, proba.shape[-1])
    counts = np.array([np.sum(y_rep == lab) for lab in labels])
    return (counts - p.sum(0)) / np.sqrt(np.sum(p * (1 - p), axis=0))


def test_class_coordinates_keep_the_label_type():
    post, stats = synthetic(C=1)
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=np.array([3, 7]))
    a = tree["posterior"]["a"]
    assert a.coords["class"].values.tolist() == [7]  # the positive class, an int
    np.testing.assert_array_equal(a.sel({"class": 7}).values, post["a"][:, :, 0])
    proba = np.random.default_rng(0).dirichlet(np.ones(2), size=(2, 30, 5))
    pred = add_predictions(tree, proba, np.array([3, 7]))["predictions"]["proba"]
    np.testing.assert_array_equal(pred.sel({"class": 7}).values, proba[..., 1])
    strings = add_predictions(tree, proba, np.array(["u", "v"]))["predictions"]["proba"]
    assert strings.coords["class"].values.tolist() == ["u", "v"]
    objects = add_predictions(tree, proba, np.array([1, "v"], dtype=object))
    assert objects["predictions"]["proba"].coords["class"].values.tolist() == ["1", "v"]


@pytest.mark.parametrize("classes", [np.array([0, 1, 2]), np.array(["ant", "bee", "cat"])])
def test_replicated_labels_follow_the_per_draw_probabilities(classes):
    post, stats = synthetic(N=50)
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.full(3, 0.5), size=(2, 30, 50))
    proba[:, :, 0] = [0.0, 0.0, 1.0]  # point 0 is certainly of class 2 in every draw
    y = classes[rng.integers(0, 3, size=50)]
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=classes, y=y)
    out = add_posterior_predictive(tree, proba, classes, random_state=5)
    y_rep = out["posterior_predictive"]["y"]
    assert y_rep.dims == ("chain", "draw", "obs") and y_rep.shape == (2, 30, 50)
    assert y_rep.dtype == out["observed_data"]["y"].dtype == classes.dtype
    np.testing.assert_array_equal(out["observed_data"]["y"].values, y)
    assert np.all(y_rep.values[:, :, 0] == classes[2])
    assert np.all(np.abs(_count_z(y_rep.values, proba, classes)) < 4)
    again = add_posterior_predictive(tree, proba, classes, random_state=5)
    np.testing.assert_array_equal(again["posterior_predictive"]["y"].values, y_rep.values)
    other = add_posterior_predictive(tree, proba, classes, random_state=6)
    assert not np.array_equal(other["posterior_predictive"]["y"].values, y_rep.values)
    assert "posterior_predictive" not in tree.children  # the input is not modified


def test_bad_shapes():
    post, stats = synthetic(N=5)
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2])
    proba = np.full((2, 30, 5, 3), 1 / 3)
    with pytest.raises(ValueError, match="got 2 classes for probabilities over 3"):
        add_posterior_predictive(tree, proba, [0, 1])
    with pytest.raises(ValueError, match=r"y has shape \(4,\); expected \(5,\)"):
        add_posterior_predictive(tree, proba, [0, 1, 2], y=np.zeros(4, int))


@pytest.fixture(scope="module")
def fit_and_data():
    Xtr, ytr, _, _ = small_data()
    return BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr), Xtr, ytr


def test_estimator_posterior_predictive_and_arviz_ppc_plots(fit_and_data):
    import arviz_plots as azp

    clf, Xtr, ytr = fit_and_data
    assert "posterior_predictive" not in clf.to_datatree().children  # opt-in
    tree = clf.to_datatree(posterior_predictive=True, random_state=3)
    y_rep = tree["posterior_predictive"]["y"]
    assert y_rep.shape == (2, 10, 100) and y_rep.dtype == ytr.dtype
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, ytr)
    # the training-set probabilities behind y_rep are the model's own (pool path = predict path)
    proba = clf._train_proba_draws()
    np.testing.assert_allclose(proba, clf.proba_draws(Xtr).reshape(proba.shape), rtol=0, atol=1e-12)
    assert np.all(np.abs(_count_z(y_rep.values, proba, clf.classes_)) < 4)
    # a manual PPC statistic: the share of class 1 per draw brackets the observed share
    share = (y_rep == 1).mean("obs").values.ravel()
    assert share.min() <= np.mean(ytr == 1) <= share.max()
    # the PPC plots arviz-plots offers for discrete labels accept the tree
    with warnings.catch_warnings():  # arviz-plots' advice on which PPC plot suits the data
        warnings.simplefilter("ignore", UserWarning)
        pava = azp.plot_ppc_pava(tree, backend="matplotlib")
        rooto = azp.plot_ppc_rootogram(tree, backend="matplotlib")
    for pc in (pava, rooto):
        assert len(pc.viz.children) > 0


def test_precomputed_fit_needs_its_training_kernels(fit_and_data):
    _, Xtr, ytr = fit_and_data
    K = KernelPool.bsvm16().fit(Xtr).train_kernels()
    clf = BM3KLClassifier(kernels="precomputed", random_state=0, **SMALL).fit(K, ytr)
    with pytest.raises(ValueError, match=r"pass them, to_datatree\(posterior_predictive=True"):
        clf.to_datatree(posterior_predictive=True)
    with pytest.raises(ValueError, match="trained on 100"):
        clf.to_datatree(posterior_predictive=True, X=K[:, :50])
    tree = clf.to_datatree(posterior_predictive=True, X=K)
    assert tree["posterior_predictive"]["y"].shape == (2, 10, 100)
