"""ArviZ ``DataTree`` building (:mod:`bayesmkl.posterior.diagnostics`) and the estimator's
wrappers."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from bayesmkl import BM3KLClassifier
from bayesmkl.posterior.diagnostics import (
    CLASS_DIM,
    add_predictions,
    build_datatree,
    classifier_labels,
)
from tests.estimators.test_estimator import SMALL, small_data


def synthetic(chains=2, draws=30, P=4, C=3, N=7, seed=0):
    rng = np.random.default_rng(seed)
    e = rng.gamma(1.0, size=(chains, draws, P))
    post = {
        "e": e,
        "w": e / e.sum(-1, keepdims=True),
        "a": rng.normal(size=(chains, draws, C, N)),
        "b": rng.normal(size=(chains, draws, C)),
        "lam": rng.gamma(1.0, size=(chains, draws, C, N)),
    }
    stats = {
        "accept_prob": rng.uniform(size=(chains, draws)),
        "diverging": np.zeros((chains, draws), bool),
        "potential_energy": rng.normal(size=(chains, draws)),
        "step_size": np.full((chains, draws), 0.01),
    }
    return post, stats


def test_groups_dims_coords():
    post, stats = synthetic()
    names = ["k0", "k1", "k2", "k3"]
    tree = build_datatree(
        post,
        stats,
        kernel_names=names,
        classes=np.array(["x", "y", "z"]),
        y=np.array(list("xyzxyzx")),
    )
    assert {"posterior", "sample_stats", "observed_data"} <= set(tree.children)
    p = tree["posterior"]
    assert p["w"].dims == ("chain", "draw", "kernel")
    assert p["a"].dims == ("chain", "draw", "class", "obs")
    assert p["b"].dims == ("chain", "draw", "class")
    assert p["lam"].dims == ("chain", "draw", "class", "obs")
    assert p["w"].coords["kernel"].values.tolist() == names
    assert p["a"].coords["class"].values.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(p["a"].values, post["a"])
    s = tree["sample_stats"]
    assert set(s.data_vars) == {"acceptance_rate", "diverging", "lp", "step_size"}
    np.testing.assert_array_equal(s["lp"].values, -stats["potential_energy"])
    assert tree["observed_data"]["y"].dims == ("obs",)


def test_summary_has_ess_and_rhat():
    post, stats = synthetic()
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2])
    summ = az.summary(tree, var_names=["w"])
    assert len(summ) == 4
    for col in ("ess_bulk", "ess_tail", "r_hat"):
        assert np.isfinite(summ[col].astype(float)).all()
    assert summ.index[0] == "w[a]"


def test_single_binary_classifier_label():
    assert classifier_labels(np.array([3, 7]), 1) == [7]
    assert classifier_labels(np.array(["u", "v"]), 2) == ["u", "v"]


def test_add_predictions():
    post, stats = synthetic()
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2])
    proba = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 30, 5))
    out = add_predictions(tree, proba, [0, 1, 2])
    assert "predictions" not in tree.children  # the input is not modified
    pred = out["predictions"]["proba"]
    assert pred.dims == ("chain", "draw", "obs", "class")
    assert pred.shape == (2, 30, 5, 3)


def test_one_class_dimension_in_every_group():
    """Posterior and predictions index classes by the same dimension, ``class``, so one
    selection works on both; ArviZ's summary labels it (no clash with its own dimensions)."""
    post, stats = synthetic()
    classes = np.array(["x", "y", "z"])
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=classes,
                          y=np.array(list("xyzxyzx")))  # fmt: skip
    proba = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 30, 5))
    tree = add_predictions(tree, proba, classes)
    dims = {d for node in tree.subtree for d in node.to_dataset().dims}
    assert CLASS_DIM == "class" and "classifier" not in dims
    for var in (tree["posterior"]["a"], tree["posterior"]["b"], tree["predictions"]["proba"]):
        assert CLASS_DIM in var.dims
        assert var.coords[CLASS_DIM].values.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(tree["posterior"]["b"].sel({"class": "y"}), post["b"][..., 1])
    np.testing.assert_array_equal(tree["predictions"]["proba"].sel({"class": "y"}), proba[..., 1])
    assert az.summary(tree, var_names=["b"]).index.tolist() == ["b[x]", "b[y]", "b[z]"]


@pytest.fixture(scope="module")
def fitted():
    Xtr, ytr, Xte, _ = small_data()
    return BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr), Xte


def test_estimator_datatree_and_summary(fitted):
    clf, Xte = fitted
    tree = clf.to_datatree()
    assert tree["posterior"]["w"].coords["kernel"].values.tolist() == clf.kernel_names_
    assert tree["posterior"]["a"].shape == (2, 10, 1, 100)
    assert tree["posterior"]["a"].coords["class"].values.tolist() == [1]
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, clf.y_train_)
    summ = az.summary(tree, var_names=["w"])
    assert len(summ) == 16
    assert np.isfinite(summ["r_hat"].astype(float)).all()  # 2 chains: R-hat is defined
    assert np.isfinite(summ["ess_bulk"].astype(float)).all()

    pt = clf.predict_datatree(Xte)
    proba = pt["predictions"]["proba"]
    assert proba.dims == ("chain", "draw", "obs", "class") and proba.shape == (2, 10, 40, 2)
    np.testing.assert_allclose(
        proba.mean(("chain", "draw")).values, clf.predict_proba(Xte), atol=1e-14
    )


def test_log_likelihood_group_feeds_arviz_loo_and_compare():
    """``log_likelihood`` (chain, draw, obs) is what az.loo/az.compare read; finite elpd_i."""
    post, stats = synthetic(draws=40, N=7)
    rng = np.random.default_rng(1)
    ll = np.log(rng.uniform(0.2, 0.95, size=(2, 40, 7)))
    tree = build_datatree(
        post, stats, kernel_names=list("abcd"), classes=[0, 1, 2], y=np.arange(7) % 3,
        log_likelihood=ll,
    )  # fmt: skip
    g = tree["log_likelihood"]["y"]
    assert g.dims == ("chain", "draw", "obs")
    np.testing.assert_array_equal(g.values, ll)
    res = az.loo(tree, pointwise=True)
    assert res.elpd_i.shape == (7,) and np.all(np.isfinite(res.elpd_i.values))
    # each pointwise value lies between the worst draw and the mean-probability bound
    lppd = np.log(np.exp(ll).mean(axis=(0, 1)))
    assert np.all(res.elpd_i.values <= lppd + 1e-12)
    assert np.all(res.elpd_i.values >= ll.min(axis=(0, 1)) - 1e-12)
    other = build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2],
                           y=np.arange(7) % 3, log_likelihood=ll - 1.0)  # fmt: skip
    cmp = az.compare({"a": tree, "b": other})
    assert cmp.index[0] == "a"
    assert (
        "log_likelihood"
        not in build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2]).children
    )


# --------------------------------------------------------------------------------------------
# energy and PSIS-LOO (issue 23): refusals that say why
# --------------------------------------------------------------------------------------------


def test_no_energy_and_the_reason_is_recorded():
    """No move is an HMC transition of the posterior, so no ``energy`` is written (it would
    not be a Hamiltonian on one scale) and ArviZ's energy diagnostics refuse the tree."""
    from bayesmkl.posterior.diagnostics import NO_ENERGY

    post, stats = synthetic()
    tree = build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2])
    assert "energy" not in tree["sample_stats"].data_vars
    assert tree["sample_stats"].attrs["energy"] == NO_ENERGY
    assert "not recorded" in NO_ENERGY
    with pytest.raises(KeyError, match="energy"):
        az.bfmi(tree)


def _tree_with(ll):
    chains, draws, n = ll.shape
    post, stats = synthetic(chains=chains, draws=draws, N=n)
    return build_datatree(post, stats, kernel_names=list("abcd"), classes=[0, 1, 2],
                          y=np.arange(n) % 3, log_likelihood=ll)  # fmt: skip


def test_loo_refuses_a_constant_log_likelihood_where_arviz_fails():
    """The raw rule's log-likelihood is exactly 0 in every draw for most training points:
    ``az.loo`` fails obscurely; ``diagnostics.loo`` says why and what to do first."""
    from bayesmkl.posterior.diagnostics import loo, loo_problem

    rng = np.random.default_rng(2)
    ll = np.zeros((2, 40, 7))
    ll[..., :2] = np.log(rng.uniform(0.2, 0.95, size=(2, 40, 2)))
    tree = _tree_with(ll)
    with pytest.raises(ValueError, match="All tail values are the same"):
        az.loo(tree)
    with pytest.raises(ValueError, match=r"5 of 7 training points is the same in every draw") as e:
        loo(tree)
    assert "calibration='cv'" in str(e.value) and "loo_kfold" in str(e.value)
    assert tree["log_likelihood"].attrs["psis_loo"] == str(e.value) == loo_problem(ll)
    assert "too few" not in str(e.value)
    with pytest.raises(ValueError, match="at least 25 posterior draws"):
        loo(_tree_with(np.log(rng.uniform(0.2, 0.95, size=(2, 10, 7)))))
    ll[0, 0, 3] = -np.inf
    assert "not finite" in loo_problem(ll)


def test_loo_runs_where_psis_can():
    from bayesmkl.posterior.diagnostics import loo, loo_problem

    ll = np.log(np.random.default_rng(1).uniform(0.2, 0.95, size=(2, 40, 7)))
    tree = _tree_with(ll)
    assert loo_problem(ll) is None and "psis_loo" not in tree["log_likelihood"].attrs
    assert loo(tree, pointwise=True).elpd == pytest.approx(az.loo(tree).elpd, rel=1e-12)


def test_classifier_loo_refuses_the_raw_rule():
    """A real ``calibration=None`` fit under the paper's prior (two one-vs-all classifiers, whose
    raw softmax at γ0 = 100 gives log p exactly 0): ``clf.loo()`` refuses with the reason,
    ``az.loo`` fails in ArviZ. (Under the default prior, γ0 = 1, the raw rule is soft enough
    for PSIS to run.)"""
    from tests.estimators.test_estimator import TINY, tiny_data, tiny_pool

    X, y = tiny_data()
    clf = BM3KLClassifier(kernels=tiny_pool(), binary_mode="ova", prior="paper", **TINY)
    clf.fit(X, y)
    tree = clf.to_datatree()
    with pytest.raises(ValueError, match="All tail values are the same"):
        az.loo(tree)
    with pytest.raises(ValueError, match="the same in every draw .*calibration='cv'"):
        clf.loo()
    assert "psis_loo" in tree["log_likelihood"].attrs


def test_loo_warns_with_the_share_of_bad_khat_and_names_compare_kfold():
    """Most points with heavy-tailed importance ratios: ``loo`` returns the estimate but says
    how many points have k̂ > 0.7 and which helper compares fits reliably; a well-behaved
    log-likelihood gets no warning."""
    import warnings

    from bayesmkl.posterior.diagnostics import loo

    rng = np.random.default_rng(3)
    heavy = -np.exp(rng.standard_normal(size=(2, 100, 10)))  # log L with a heavy tail
    with pytest.warns(UserWarning, match=r"PSIS-LOO is unreliable .* have Pareto k-hat > 0.7"):
        res = loo(_tree_with(heavy))
    assert np.mean(np.asarray(res.pareto_k) > 0.7) > 0.3
    with pytest.warns(UserWarning, match="compare_kfold"):
        loo(_tree_with(heavy))
    calm = np.log(rng.uniform(0.2, 0.95, size=(2, 100, 10)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loo(_tree_with(calm))
