"""What a fit says about its own run: warnings in words, Monte Carlo errors, the LOO map."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from bayesmkl import BM3KLClassifier
from bayesmkl.datasets import load_demo
from bayesmkl.estimators._fitting import describe_quantity
from bayesmkl.posterior.calibration import fit_calibrator
from bayesmkl.posterior.classification import probability_mcse
from bayesmkl.posterior.loo import psis_log_weights


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = load_demo()
    idx = np.random.default_rng(1).permutation(len(y))[:40]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = BM3KLClassifier(
            kernels="simplemkl", num_warmup=20, num_samples=30, calibration="loo",
            random_state=0, progress_bar=False,
        ).fit(X[idx, :3], y[idx])  # fmt: skip
    return clf, X[:, :3], caught


def test_a_fixed_length_run_warns_when_unconverged_and_names_the_quantity(fitted):
    clf, _, caught = fitted
    assert not clf.run_report_.converged and clf.run_report_.stopped_by == "num_samples"
    msgs = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(msgs) == 1
    assert "fixed num_samples after 30 sweeps" in msgs[0]
    assert ("the weight of kernel" in msgs[0]) or ("decision value of training point" in msgs[0])


def test_describe_quantity_in_words():
    names, classes, points = ["gauss(s=1)", "poly(d=2)"], np.array(["a", "b", "c"]), [4, 9]
    assert describe_quantity("w[1]", names, classes, points, 3) == "the weight of kernel poly(d=2)"
    # f is (points × classifiers) flattened: index 5 = point 9 (second), classifier 2
    assert describe_quantity("f[5]", names, classes, points, 3) == (
        "the decision value of training point 9 for class 'c'"
    )
    assert describe_quantity("f[1]", names, classes, points, 1) == (
        "the decision value of training point 9"
    )


def test_predict_proba_mcse(fitted):
    clf, X, _ = fitted
    p, se = clf.predict_proba(X[:7], return_mcse=True)
    np.testing.assert_array_equal(p, clf.predict_proba(X[:7]))
    assert se.shape == p.shape and np.all(se >= 0) and np.all(np.isfinite(se))


def test_probability_mcse_matches_sd_over_sqrt_n_for_independent_draws():
    rng = np.random.default_rng(0)
    P = rng.uniform(size=(4000, 3, 2))  # 4 chains × 1000 independent draws
    se = probability_mcse(P, 4)
    # ArviZ estimates the ESS (about ±10% at 4,000 draws); a missing √ESS or per-chain count
    # would be off by a factor of 2 or more
    np.testing.assert_allclose(se, P.std(axis=0) / np.sqrt(4000), rtol=0.25)
    # a chain that repeats each draw 10 times has a tenth of the information
    sticky = np.repeat(P[::10], 10, axis=0)
    assert np.all(probability_mcse(sticky, 4) > 2.0 * se)
    assert np.all(probability_mcse(np.ones((40, 2, 2)), 4) == 0.0)
    # one draw per chain: undefined, not 0 (a single draw does not vary; it read as exact)
    assert np.all(np.isnan(probability_mcse(np.ones((1, 2, 2)), 1)))
    assert np.all(np.isnan(probability_mcse(np.ones((4, 2, 2)), 4)))


def test_loo_calibration_is_the_psis_weighted_map(fitted):
    clf, _, _ = fitted
    cal = clf.calibrator_
    assert cal.n_folds == 0 and 0.0 <= cal.khat_bad_frac <= 1.0
    assert np.all(np.isfinite(clf.oof_log_predictive_))
    # the same map from the public pieces: PSIS weights of the pseudo-likelihood factors
    from bayesmkl.config import x64_scope
    from bayesmkl.model.classification import signed_targets
    from bayesmkl.model.likelihood import log_pseudo_likelihood_terms
    from bayesmkl.posterior.predictive import draw_decision_values

    K = clf.kernel_input_.pool.train_kernels()
    w, a, b = clf._flat_draws()
    codes = np.searchsorted(clf.classes_, clf.y_train_)
    with x64_scope():
        F = np.asarray(draw_decision_values(w, a, b, K))
        delta = signed_targets(codes, 2)
        ll = np.asarray(log_pseudo_likelihood_terms(np.swapaxes(F, 1, 2), delta[None], clf.gamma0_))
    lw, _ = psis_log_weights(ll.sum(axis=1))
    ref = fit_calibrator([F], [codes], gamma0=clf.gamma0_, log_weights=[lw])
    assert cal.temperature == pytest.approx(ref.temperature, rel=1e-6)
    assert cal.intercept == pytest.approx(ref.intercept, rel=1e-6, abs=1e-9)
    # and it differs from the map on unweighted training draws (the weights matter)
    plain = fit_calibrator([F], [codes], gamma0=clf.gamma0_)
    assert abs(plain.temperature - cal.temperature) > 1e-3 * cal.temperature


def test_loo_kfold_refuses_a_loo_calibrated_fit(fitted):
    clf, _, _ = fitted
    with pytest.raises(ValueError, match="cross-fitting"):
        clf.loo_kfold()


def test_max_time_counts_from_the_start_of_fit_and_covers_the_calibration_refits(monkeypatch):
    """``max_time`` is the budget of the whole ``fit``: the chains' deadline counts from the
    start of ``fit`` (validation, kernels and compilation spend it), leaves room for three
    cross-fitted refits of about (K − 1)²/K the main run's cost, and each refit's deadline falls
    inside the fit's. (Before, every run got the whole ``max_time`` from its own start.)"""
    import time

    from bayesmkl.estimators import _base

    deadlines = []
    real = _base.sample_until_converged

    def spy(*args, **kwargs):
        deadlines.append(kwargs["deadline"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_base, "sample_until_converged", spy)
    X, y, _ = load_demo()
    kw = dict(num_warmup=10, num_samples=10, num_chains=2, progress_bar=False, random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        BM3KLClassifier(calibration=3, max_time=100.0, **kw).fit(X[:90], y[:90])
    t1 = time.perf_counter()
    main, *folds = deadlines
    share = 0.95 / (1 + 4 / 3)  # K = 3
    assert t0 <= main - 100.0 * share <= t1
    assert len(folds) == 3
    assert all(t0 < d <= t1 + 95.0 for d in folds)  # inside the fit's 95%
    deadlines.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        BM3KLClassifier(calibration=None, **kw).fit(X[:90], y[:90])  # no budget, no deadline
    assert deadlines == [None]


def test_predictions_of_a_fit_stopped_in_warm_up_warn_at_the_caller():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from bayesmkl.datasets import load_demo

    X, y, _ = load_demo()
    clf = BM3KLClassifier(num_warmup=1000, num_chains=2, max_time=1e-3, calibration=None,
                          progress_bar=False, random_state=0)  # fmt: skip
    with pytest.warns(ConvergenceWarning, match="during warm-up, after"):
        clf.fit(X[:80], y[:80])
    assert clf.run_report_.stopped_in == "warmup"
    for method in (clf.predict_proba, clf.predict, clf.decision_function):
        with pytest.warns(ConvergenceWarning, match="predictions come from warm-up draws") as r:
            method(X[80:85])
        assert r[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ok = BM3KLClassifier(num_warmup=10, num_samples=10, num_chains=2, calibration=None,
                             progress_bar=False, random_state=0)  # fmt: skip
        with pytest.warns(ConvergenceWarning):  # unconverged, but not a warm-up-only fit
            ok.fit(X[:80], y[:80])
        ok.predict_proba(X[80:85])  # no warning


def test_each_fixed_length_fit_warns_once_and_a_filter_silences_cross_validation():
    """Issue 46: a fixed-``num_samples`` fit that does not converge warns once (with
    cross-fitted calibration its refits, which run as many sweeps, are not warned about again:
    they were, a second ``ConvergenceWarning`` per fit), so a ``cross_val_score`` over it gives
    one ``ConvergenceWarning`` per fold, and scikit-learn's usual filter for that class silences
    them all."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from bayesmkl import BM3KLRegressor

    X, y, _ = load_demo()
    idx = np.random.default_rng(2).permutation(len(y))[:32]
    X, y = X[idx, :3], y[idx]
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    run = dict(num_warmup=10, num_samples=10, random_state=0, progress_bar=False)
    clf = BM3KLClassifier(kernels="simplemkl", calibration=2, **run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_val_score(clf, X, y, cv=cv)
    conv = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(conv) == 2, [str(w.message)[:80] for w in conv]  # one per fold's fit
    assert all("fixed num_samples after 10 sweeps" in str(w.message) for w in conv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ConvergenceWarning)
        cross_val_score(clf.set_params(calibration=None), X, y, cv=cv)
    assert not caught, [f"{w.category.__name__}: {str(w.message)[:80]}" for w in caught]

    reg = BM3KLRegressor(kernels="simplemkl", **run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg.fit(X, y.astype(float) + X[:, 0])
    assert sum(issubclass(w.category, ConvergenceWarning) for w in caught) == 1


def _three_class_fit():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))[:45]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BM3KLClassifier(num_warmup=10, num_samples=30, num_chains=2, random_state=0,
                               progress_bar=False).fit(X[idx], y[idx])  # fmt: skip


@pytest.mark.parametrize("which", ["binary", "three classes"])
def test_a_large_fit_maps_a_subset_and_keeps_every_point_in_blocks(fitted, which, monkeypatch):
    """Above ``AFTER_FIT_ENTRIES`` decision values the LOO map is fitted on the subset of
    ``map_points`` and the log-likelihood and LOO predictive of every training point are
    computed in blocks: the same values as the whole-array functions give with that map."""
    import copy

    from bayesmkl.config import x64_scope
    from bayesmkl.model.classification import signed_targets
    from bayesmkl.posterior import classification as post
    from bayesmkl.posterior.predictive import posterior_decision_values

    clf = copy.deepcopy(fitted[0] if which == "binary" else _three_class_fit())
    K = np.asarray(clf.kernel_input_.pool.train_kernels())
    S = int(np.prod(clf.posterior_["w"].shape[:2]))
    C, N = clf.posterior_["b"].shape[-1], len(clf.y_train_)
    monkeypatch.setattr(post, "AFTER_FIT_ENTRIES", S * C * 10)  # blocks of 10 points
    monkeypatch.setattr(post, "MIN_MAP_POINTS", 12)  # the map on 12 of the points
    idx = post.map_points(N, S * C, seed=clf.random_seed_)
    assert len(idx) == 12 and len(post.training_blocks(N, S * C)) == -(-N // 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf._fit_calibration(K, clf.y_train_)
    codes = np.searchsorted(clf.classes_, clf.y_train_)
    with x64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F = np.asarray(posterior_decision_values(clf.posterior_, K))
        delta = signed_targets(codes, len(clf.classes_), clf.binary_mode)
        cal, _ = post.loo_map(F[:, idx], codes[idx], delta[:, idx], gamma0=clf.gamma0_)
        log_w = post.loo_weights(F, delta, gamma0=clf.gamma0_)[0]
        oof = post.loo_predictive(F, codes, log_w, cal)
        ll = post.label_log_likelihood(F, codes, clf.posterior_["w"].shape[:2],
                                       gamma0=clf.gamma0_, calibrator=cal)  # fmt: skip
    # the subset's decision values come from its own kernel rows: equal to rounding
    for field in ("temperature", "intercept", "class_temperatures", "class_intercepts"):
        np.testing.assert_allclose(getattr(clf.calibrator_, field), getattr(cal, field),
                                   rtol=1e-9, atol=1e-12, err_msg=field)  # fmt: skip
    np.testing.assert_allclose(clf.oof_log_predictive_, oof, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(clf.log_likelihood_, ll, rtol=1e-12, atol=1e-12)
    # a map on all the points is another map: the subset is what was fitted on
    whole, _ = post.loo_map(F, codes, delta, gamma0=clf.gamma0_)
    assert abs(whole.temperature - cal.temperature) > 1e-6 * cal.temperature
