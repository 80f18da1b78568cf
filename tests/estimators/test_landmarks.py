"""Landmark fits (``n_landmarks``, docs/math.md §16) of the estimators: end to end, agreement
with the exact model at M = N, the landmark rules, precomputed blocks, save/load and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size

from bayesmkl import BM3KLClassifier, BM3KLRegressor
from bayesmkl.kernels import KernelPool, KernelSpec
from bayesmkl.kernels.landmarks import choose_landmarks, landmark_rng
from tests.estimators.test_estimator import TINY, tiny_data, tiny_pool

# the tiny fits run 30 sweeps: unconverged by design (what they test is shapes and wiring)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _pool():
    return KernelPool([KernelSpec("gauss", 0.7), KernelSpec("gauss", 2.0), KernelSpec("poly", 1)])


@pytest.fixture(scope="module")
def landmark_fit():
    X, y = tiny_data(60)
    clf = BM3KLClassifier(tiny_pool(), n_landmarks=12, **TINY).fit(X[:45], y[:45])
    return clf, X, y


def test_landmark_fit_end_to_end(landmark_fit, tmp_path):
    clf, X, y = landmark_fit
    Xtr = X[:45]
    assert clf.kernel_input_.n_landmarks == 12 and clf.kernel_input_.n_train == 45
    assert clf.posterior_["a"].shape[-1] == 12 and clf.posterior_["nu"].shape[-1] == 12
    assert "lam" not in clf.posterior_  # N values a draw: a landmark fit does not keep them
    idx = clf.landmark_indices_
    assert idx.shape == (12,) and np.unique(idx).size == 12
    np.testing.assert_allclose(clf.landmarks_, Xtr[idx], rtol=0, atol=1e-12)
    proba = clf.predict_proba(X[45:])
    assert proba.shape == (15, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert 0.0 <= clf.score(X[45:], y[45:]) <= 1.0
    tree = clf.to_datatree(posterior_predictive=True)
    assert tree["posterior"]["a"].dims[-1] == "landmark"
    np.testing.assert_array_equal(tree["posterior"]["landmark"].values, idx)
    assert "lam" not in tree["posterior"] and tree["observed_data"]["y"].dims == ("obs",)
    assert tree["log_likelihood"]["y"].shape[-1] == 45
    assert tree["posterior_predictive"]["y"].shape[-1] == 45
    path = tmp_path / "landmark.nc"
    clf.save(path)
    back = BM3KLClassifier.load(path)
    np.testing.assert_array_equal(back.predict_proba(X[45:]), proba)
    np.testing.assert_array_equal(back.landmark_indices_, idx)


def test_prediction_reads_only_the_landmark_kernels(landmark_fit, monkeypatch):
    """New rows are compared with the M landmarks only: the cross kernels are (P, M_new, M)."""
    clf, X, _ = landmark_fit
    pool = clf.kernel_input_.pool
    shapes = []
    real = type(pool).cross_kernels

    def spy(self, Xnew):
        K = real(self, Xnew)
        shapes.append(K.shape)
        return K

    monkeypatch.setattr(type(pool), "cross_kernels", spy)
    clf.predict_proba(X[45:50])
    assert shapes == [(len(pool), 5, 12)]


def _w_mean_mcse(est):
    w = est.posterior_["w"]
    ess = np.asarray(effective_sample_size(w))
    return w.mean(axis=(0, 1)), w.reshape(-1, w.shape[-1]).std(axis=0) / np.sqrt(ess)


def test_all_points_as_landmarks_agree_with_the_exact_fit():
    """M = N with Z = X is the exact model drawn with the weight-space (a, b) step: the
    posterior means of w and the predictive probabilities agree within a few MCSE."""
    X, y = tiny_data(40, seed=5)
    common = dict(num_warmup=150, num_samples=1000, num_chains=4, calibration=None,
                  progress_bar=False)  # fmt: skip
    exact = BM3KLClassifier(_pool(), random_state=1, **common).fit(X[:30], y[:30])
    land = BM3KLClassifier(_pool(), n_landmarks=30, random_state=2, **common).fit(X[:30], y[:30])
    np.testing.assert_array_equal(land.landmark_indices_, np.arange(30))
    assert land.posterior_["a"].shape == exact.posterior_["a"].shape
    (m1, s1), (m2, s2) = _w_mean_mcse(exact), _w_mean_mcse(land)
    z = np.abs(m1 - m2) / np.sqrt(s1**2 + s2**2)
    assert z.max() < 4.5, (m1, m2, z)
    p1, e1 = exact.predict_proba(X[30:], return_mcse=True)
    p2, e2 = land.predict_proba(X[30:], return_mcse=True)
    zp = np.abs(p1 - p2)[:, 1] / np.sqrt(e1[:, 1] ** 2 + e2[:, 1] ** 2 + 1e-12)
    assert zp.max() < 4.5, (p1[:, 1], p2[:, 1], zp)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "Auto", "exact", "10"])
def test_bad_n_landmarks_is_refused(bad):
    X, y = tiny_data(20)
    with pytest.raises(ValueError, match="n_landmarks"):
        BM3KLClassifier(tiny_pool(), n_landmarks=bad, **TINY).fit(X, y)


@pytest.fixture
def small_auto(monkeypatch):
    """``n_landmarks="auto"`` with its switch moved down to tiny problems: exact up to 40
    training rows, 12 landmarks above."""
    from bayesmkl.estimators import _params

    monkeypatch.setattr(_params, "AUTO_EXACT_MAX_N", 40)
    monkeypatch.setattr(_params, "AUTO_N_LANDMARKS", 12)


def test_auto_landmarks_switch_on_above_the_threshold(small_auto):
    """``n_landmarks="auto"`` (the default) fits the exact model up to the threshold and the
    landmark model above it: the same draws as the explicit setting, and ``n_landmarks_`` says
    which; ``nu_update="collapsed"`` keeps the exact model."""
    X, y = tiny_data(45)
    for n, expect in ((40, None), (45, 12)):
        auto = BM3KLClassifier(tiny_pool(), **TINY).fit(X[:n], y[:n])
        explicit = BM3KLClassifier(tiny_pool(), n_landmarks=expect, **TINY).fit(X[:n], y[:n])
        assert auto.n_landmarks == "auto" and auto.n_landmarks_ == expect
        assert auto.posterior_["a"].shape[-1] == (n if expect is None else expect)
        np.testing.assert_array_equal(auto.posterior_["w"], explicit.posterior_["w"])
        np.testing.assert_array_equal(auto.posterior_["a"], explicit.posterior_["a"])
    assert hasattr(auto, "landmarks_")
    collapsed = BM3KLClassifier(tiny_pool(), nu_update="collapsed", **TINY).fit(X, y)
    assert collapsed.n_landmarks_ is None and collapsed.posterior_["a"].shape[-1] == 45
    reg = BM3KLRegressor(tiny_pool(), **TINY_REG).fit(X, X[:, 0])
    assert reg.n_landmarks_ == 12 and reg.posterior_["a"].shape[-1] == 12


def test_auto_landmarks_of_precomputed_kernels_are_the_exact_model(small_auto):
    """With ``kernels="precomputed"`` the estimator cannot choose landmarks: ``"auto"`` fits a
    square stack exactly whatever N, and a (P, N, M) block is refused as a mis-shaped stack
    (it is a landmark block only with ``n_landmarks=M``), never silently read as one."""
    X, y = tiny_data(45)
    K = tiny_pool().fit(X).train_kernels()
    square = BM3KLClassifier("precomputed", **TINY).fit(K, y)
    assert square.n_landmarks_ is None and square.posterior_["a"].shape[-1] == 45
    with pytest.raises(ValueError, match=r"\(P, N, N\)"):
        BM3KLClassifier("precomputed", **TINY).fit(K[:, :, :9], y)
    block = BM3KLClassifier("precomputed", n_landmarks=9, **TINY).fit(K[:, :, :9], y)
    assert block.n_landmarks_ == 9 and block.posterior_["a"].shape[-1] == 9


def test_more_landmarks_than_rows_is_refused():
    X, y = tiny_data(20)
    with pytest.raises(ValueError, match="exceeds the 20 training rows"):
        BM3KLClassifier(tiny_pool(), n_landmarks=21, **TINY).fit(X, y)
    with pytest.raises(ValueError, match="exceeds the 20 training rows"):
        BM3KLRegressor(tiny_pool(), n_landmarks=21, **TINY_REG).fit(X, X[:, 0])


def test_landmark_method_and_nu_update_are_checked():
    X, y = tiny_data(20)
    with pytest.raises(ValueError, match="landmark_method"):
        BM3KLClassifier(tiny_pool(), n_landmarks=5, landmark_method="random", **TINY).fit(X, y)
    with pytest.raises(ValueError, match="nu_update='collapsed'"):
        BM3KLClassifier(tiny_pool(), n_landmarks=5, nu_update="collapsed", **TINY).fit(X, y)


def test_precomputed_landmarks_need_a_rectangular_block():
    """Precomputed kernels: the estimator cannot choose landmarks; a (P, N, M) block of the
    user's landmarks fits and predicts from (P, M_new, M) rows, as a pool with the same
    landmarks does."""
    X, y = tiny_data(40)
    pool = tiny_pool().fit(X[:30])
    K = pool.train_kernels()
    with pytest.raises(ValueError, match=r"shape \(P, N, 6\)"):
        BM3KLClassifier("precomputed", n_landmarks=6, **TINY).fit(K, y[:30])
    idx = np.arange(0, 30, 5)
    block, test = K[:, :, idx], pool.cross_kernels(X[30:])[:, :, idx]
    pre = BM3KLClassifier("precomputed", n_landmarks=6, **TINY).fit(block, y[:30])
    assert pre.posterior_["a"].shape[-1] == 6 and pre.landmarks_ is None
    with pytest.raises(ValueError, match=r"\(P, M, n_landmarks\)"):
        pre.predict_proba(pool.cross_kernels(X[30:]))
    lp = tiny_pool().fit(X[:30], landmarks=idx)
    np.testing.assert_array_equal(lp.train_kernels(), block)
    np.testing.assert_array_equal(lp.cross_kernels(X[30:]), test)
    assert pre.predict_proba(test).shape == (10, 2)


@pytest.mark.parametrize("n_landmarks", [8, "auto"])
def test_cross_fitted_calibration_refits_the_fits_own_model(monkeypatch, n_landmarks):
    """``calibration="cv"`` refits each fold on the fit's own model: a landmark fit on the
    landmark block's rows, columns kept; an ``"auto"`` fit that chose the exact model (40 rows)
    on square blocks as exact models (not as a landmark model on all N training columns)."""
    from bayesmkl.posterior import calibration

    X, y = tiny_data(40)
    seen = []
    real = BM3KLClassifier.fit

    def spy(self, X, y, sample_weight=None):
        seen.append((self.kernels, self.n_landmarks, np.shape(X)))
        return real(self, X, y, sample_weight)

    monkeypatch.setattr(BM3KLClassifier, "fit", spy)
    params = {**TINY, "calibration": "cv"}
    clf = BM3KLClassifier(tiny_pool(), n_landmarks=n_landmarks, **params).fit(X, y)
    folds = [s for s in seen if s[0] == "precomputed"]
    assert len(folds) == calibration.DEFAULT_FOLDS
    if n_landmarks == 8:
        assert all(n == 8 and shape[2] == 8 and shape[1] < 40 for _, n, shape in folds)
    else:  # the refits keep "auto", which with precomputed kernels is the exact model
        assert clf.n_landmarks_ is None
        assert all(n == "auto" and shape[1] == shape[2] < 40 for _, n, shape in folds)
    assert clf.calibrator_ is not None and clf.oof_log_predictive_.shape == (40,)


TINY_REG = {k: v for k, v in TINY.items() if k != "calibration"}


def test_landmark_regressor_end_to_end(tmp_path):
    X, _ = tiny_data(50)
    t = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    reg = BM3KLRegressor(tiny_pool(), n_landmarks=10, landmark_method="stratified", **TINY_REG)
    reg.fit(X[:40], t[:40])
    assert reg.posterior_["a"].shape[-1] == 10 and reg.landmarks_.shape == (10, 2)
    assert not {"lam_plus", "lam_minus"} & set(reg.posterior_)
    assert reg.predict(X[40:]).shape == (10,)
    assert reg.to_datatree()["posterior"]["a"].dims[-1] == "landmark"
    path = tmp_path / "reg.nc"
    reg.save(path)
    np.testing.assert_array_equal(BM3KLRegressor.load(path).predict(X[40:]), reg.predict(X[40:]))


# ---------------------------------------------------------------------------------------------
# the landmark rules
# ---------------------------------------------------------------------------------------------


def test_stratified_landmarks_keep_the_class_shares():
    codes = np.repeat([0, 1, 2], [70, 20, 10])
    X = np.random.default_rng(0).normal(size=(100, 2))
    idx = choose_landmarks(X, 20, "stratified", codes=codes, rng=landmark_rng(0))
    assert np.unique(idx).size == 20
    np.testing.assert_array_equal(np.bincount(codes[idx]), [14, 4, 2])
    few = choose_landmarks(X, 3, "stratified", codes=codes, rng=landmark_rng(0))
    np.testing.assert_array_equal(np.bincount(codes[few], minlength=3), [1, 1, 1])


def test_kmeanspp_landmarks_spread_over_the_data():
    """Two far clusters of 95 and 5 points: k-means++ puts landmarks in both (a uniform subset of
    4 misses the small one with probability ≈ 0.81)."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(95, 2)), rng.normal(size=(5, 2)) + 50.0])
    for seed in range(5):
        idx = choose_landmarks(X, 4, "kmeans++", rng=landmark_rng(seed))
        assert np.unique(idx).size == 4 and np.any(idx >= 95)
    # the same int seed gives the same landmarks
    a = choose_landmarks(X, 7, "kmeans++", rng=landmark_rng(3))
    np.testing.assert_array_equal(a, choose_landmarks(X, 7, "kmeans++", rng=landmark_rng(3)))


def test_kmeanspp_with_repeated_rows_still_gives_distinct_landmarks():
    X = np.repeat(np.arange(3.0)[:, None], 10, axis=0)  # 3 distinct rows, 30 in all
    idx = choose_landmarks(X, 8, "kmeans++", rng=landmark_rng(0))
    assert np.unique(idx).size == 8
    assert np.unique(X[idx]).size == 3


def test_plot_and_kfold_of_landmark_fits(landmark_fit):
    """The sample-weight plot shows the M landmarks (coloured by their labels), and
    ``kfold_elpd_of`` keeps a precomputed landmark block's columns in every fold."""
    import matplotlib

    matplotlib.use("Agg")
    from bayesmkl.estimators import compare
    from bayesmkl.plots import plot_sample_weights

    clf, _, _ = landmark_fit
    fig = plot_sample_weights(clf)
    assert "of 12 landmarks" in fig.axes[0].get_title(loc="left")
    K = np.arange(2 * 10 * 4, dtype=float).reshape(2, 10, 4)
    rows = compare._rows(K, np.array([1, 3]), np.arange(5), precomputed=True, landmarks=True)
    np.testing.assert_array_equal(rows, K[:, [1, 3]])


def test_warm_start_keeps_the_landmarks():
    """A continuation keeps its chains' landmarks even without a fixed seed (new landmarks
    would be another model: the fingerprint of the kernels would refuse it)."""
    X, y = tiny_data(45)
    params = {**TINY, "random_state": None, "num_samples": 10}
    clf = BM3KLClassifier(tiny_pool(), n_landmarks=12, warm_start=True, **params).fit(X, y)
    first = clf.landmark_indices_.copy()
    clf.fit(X, y)
    np.testing.assert_array_equal(clf.landmark_indices_, first)
    assert clf.posterior_["a"].shape[:2] == (2, 20) and "lam" not in clf.posterior_


def test_a_landmark_fit_keeps_no_augmentation_draws_on_every_chain_method():
    """The N augmentation variables are left out of the stored draws whether the chains run
    vectorised (ChainRunner) or through NumPyro's MCMC (``chain_method="sequential"``)."""
    X, y = tiny_data(45)
    params = {**TINY, "num_samples": 8}
    for method in ("vectorized", "sequential"):
        clf = BM3KLClassifier(tiny_pool(), n_landmarks=12, chain_method=method, **params)
        clf.fit(X, y)
        assert "lam" not in clf.posterior_, method
        assert clf.posterior_["a"].shape[:2] == (TINY["num_chains"], 8)
