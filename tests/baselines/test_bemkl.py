"""BEMKL / sBEMKL (bayesmkl/baselines/bemkl.py): monotone ELBO, probabilities, sparsity."""

import numpy as np
import pytest
from scipy.stats import norm, rankdata, truncnorm
from sklearn.base import clone

from bayesmkl.baselines import BEMKL
from bayesmkl.baselines._base import signed_targets
from bayesmkl.baselines.bemkl import _VB, elbo, truncated_normal_moments


def gram(A, B, gamma=0.5):
    d2 = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2.0 * A @ B.T
    return np.exp(-gamma * np.maximum(d2, 0.0))


def make(seed=0, n=120, n_classes=2, n_inf=2, n_noise=10, sep=2.0):
    """``n_inf`` kernels on shifted 2-D features, ``n_noise`` on pure noise; half train/test."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    shift = sep * (y - (n_classes - 1) / 2.0)
    blocks = []
    for _ in range(n_inf):
        B = rng.normal(size=(n, 2))
        B[:, 0] += shift
        blocks.append(B)
    blocks += [rng.normal(size=(n, 2)) for _ in range(n_noise)]
    tr, te = np.arange(n) < n // 2, np.arange(n) >= n // 2
    K = np.stack([gram(B[tr], B[tr]) for B in blocks])
    Kt = np.stack([gram(B[te], B[tr]) for B in blocks])
    return K, y[tr], Kt, y[te]


@pytest.fixture(scope="module")
def noisy():
    return make()


@pytest.fixture(scope="module")
def pair(noisy):
    K, y, _, _ = noisy
    dense = BEMKL(kernels="precomputed", random_state=0).fit(K, y)
    sparse = BEMKL(kernels="precomputed", sparse=True, random_state=0).fit(K, y)
    return dense, sparse


def test_elbo_never_decreases(pair):
    for est in pair:
        L = est.elbo_
        assert L.shape == (200,) and np.all(np.isfinite(L))
        assert np.all(np.diff(L) >= -1e-8 * np.abs(L[1:]))
        assert L[-1] > L[0]


def test_elbo_increases_after_every_coordinate_update():
    """Each factor update is an exact coordinate-ascent step, so the bound must rise after every
    one of the 7 updates (from the second sweep on: the initial q(f) is not a truncated normal).
    A wrong ELBO term or update breaks this quickly; tested on a 3-class problem."""
    K, y, _, _ = make(seed=3, n=60, n_classes=3, n_inf=1, n_noise=3)
    est = BEMKL(kernels="precomputed", n_iter=1, random_state=0).fit(K, y)
    vb = _VB(K, signed_targets(y, 3), est.vb_prior_)
    s = vb.init(np.random.default_rng(0))
    vb.sweep(s)
    values = [vb.elbo(s)]
    for _ in range(25):
        vb.sweep(s, callback=lambda name, st: values.append(vb.elbo(st)))
    values = np.array(values)
    assert np.all(np.diff(values) >= -1e-8 * np.abs(values[1:]))


def test_stored_elbo_matches_the_public_function(pair, noisy):
    K, y, _, _ = noisy
    est = pair[1]
    Y = signed_targets(np.searchsorted(est.classes_, y), 2)
    assert elbo(K, Y, est.vb_state_, est.vb_prior_) == pytest.approx(est.elbo_[-1], rel=1e-12)


def test_probabilities_binary(pair, noisy):
    _, _, Kt, _ = noisy
    for est in pair:
        P = est.predict_proba(Kt)
        assert P.shape == (60, 2)
        assert np.all((P >= 0) & (P <= 1))
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        # decision_function = predictive log-odds: same sign as predict, same ranks as P[:, 1]
        d = est.decision_function(Kt)
        assert d.shape == (60,)
        np.testing.assert_array_equal(est.predict(Kt), est.classes_[(d > 0).astype(int)])
        np.testing.assert_array_equal(rankdata(d), rankdata(P[:, 1]))
        np.testing.assert_allclose(d, np.log(P[:, 1] / P[:, 0]), rtol=1e-9, atol=1e-9)
        # p > ½ ⇔ E f > 0; E f is the fitted attributes' kernel expansion
        mean, var = est.predictive_moments(Kt)
        Ef = np.tensordot(est.kernel_weights_, Kt, axes=1) @ est.dual_coef_[0] + est.intercept_[0]
        np.testing.assert_allclose(mean[:, 0], Ef, rtol=1e-10, atol=1e-10)
        assert np.all(var >= 1.0)
        np.testing.assert_array_equal(d > 0, Ef > 0)


def test_probabilities_multiclass_string_labels():
    K, y, Kt, yt = make(seed=1, n=90, n_classes=3, n_inf=1, n_noise=3, sep=3.0)
    names = np.array(["ant", "bee", "cat"])
    est = BEMKL(kernels="precomputed", n_iter=60, random_state=0).fit(K, names[y])
    P = est.predict_proba(Kt)
    assert P.shape == (45, 3)
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(est.predict(Kt), names[np.argmax(P, axis=1)])
    assert est.decision_function(Kt).shape == (45, 3)
    assert est.kernel_weights_.shape == (4,)  # shared by the three one-vs-rest outputs
    assert est.dual_coef_.shape == (3, 45) and est.intercept_.shape == (3,)
    assert est.score(Kt, names[yt]) > 0.8  # chance 1/3


def _n_selected(w, rel=0.05):
    a = np.abs(w)
    return int(np.sum(a > rel * a.max()))


def test_sparse_variant_is_sparser(pair):
    """2 informative + 10 noise kernels. Measured: BEMKL keeps all 12 |e_m| above 5 % of the
    largest, sBEMKL 4; the share of Σ|e| on noise kernels drops from 0.72 to 0.48."""
    dense, sparse = pair
    nd, ns = _n_selected(dense.kernel_weights_), _n_selected(sparse.kernel_weights_)
    assert ns < nd and ns <= 6 and nd >= 10
    assert sparse.selected_kernels(0.05) == ns  # |e| counts: weights may be negative

    def noise_share(w):
        return np.abs(w[2:]).sum() / np.abs(w).sum()

    assert noise_share(sparse.kernel_weights_) < noise_share(dense.kernel_weights_)


def test_accuracy_on_a_separable_problem():
    K, y, Kt, yt = make(seed=2, n=100, n_inf=2, n_noise=2, sep=5.0)
    est = BEMKL(kernels="precomputed", random_state=0).fit(K, y)
    assert est.score(Kt, yt) >= 0.95  # chance 0.5; the clusters are 5 sd apart
    assert est.kernel_weights_[:2].min() > np.abs(est.kernel_weights_[2:]).max()


def _entropy_by_quadrature(o, s, margin):
    """``−∫ q log q`` for ``q ∝ N(f; o, 1)`` on ``s f > margin``, in the variable ``u = s f``."""
    mu = s * o
    lo = margin
    hi = max(margin, mu) + 40.0 / max(1.0, margin - mu)  # the tail decays at rate ≥ margin − mu
    u = np.linspace(lo, hi, 400001)
    logq = -0.5 * (u - mu) ** 2
    logq -= logq.max()
    q = np.exp(logq)
    Z = np.trapezoid(q, u)
    q /= Z
    return -np.trapezoid(np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0), u)


def test_truncated_normal_moments_against_scipy_and_quadrature():
    o = np.array([-40.0, -3.0, -0.5, 0.0, 0.7, 2.0, 8.0])
    for s in (1.0, -1.0):
        mean, var, log_z, ent = truncated_normal_moments(o, s, 1.0)
        for k, ok in enumerate(o):
            a, b = ((1.0 - ok), np.inf) if s > 0 else (-np.inf, (-1.0 - ok))
            ref = truncnorm(a, b, loc=ok, scale=1.0)
            assert mean[k] == pytest.approx(ref.mean(), rel=1e-7, abs=1e-9)
            assert var[k] == pytest.approx(ref.var(), rel=1e-5, abs=1e-9)
            # scipy's truncnorm.entropy is NaN for a one-sided truncation: use quadrature
            assert ent[k] == pytest.approx(_entropy_by_quadrature(ok, s, 1.0), abs=1e-6)
            assert log_z[k] == pytest.approx(norm.logcdf(s * ok - 1.0), rel=1e-9)


def test_prior_settings_and_validation(noisy):
    K, y, _, _ = noisy
    assert BEMKL(sparse=True)._prior().alpha_omega == 1e-10
    assert BEMKL(sparse=True)._prior().beta_omega == 1e10
    assert BEMKL(sparse=True, alpha_omega=2.0)._prior().alpha_omega == 2.0
    assert BEMKL()._prior().alpha_omega == 1.0
    for params, match in [
        ({"sigma_g": 0.0}, "sigma_g"),
        ({"n_iter": 0}, "n_iter"),
        ({"beta_lambda": -1.0}, "beta_lambda"),
        ({"margin": -1.0}, "margin"),
    ]:
        with pytest.raises(ValueError, match=match):
            BEMKL(kernels="precomputed", **params).fit(K, y)
    est = BEMKL()
    assert est.kernels == "simplemkl" and est.alpha_omega is None
    assert clone(BEMKL(sparse=True)).get_params()["sparse"] is True


def test_reproducible_with_seed(noisy):
    K, y, _, _ = noisy
    a = BEMKL(kernels="precomputed", n_iter=5, random_state=4).fit(K, y)
    b = BEMKL(kernels="precomputed", n_iter=5, random_state=4).fit(K, y)
    np.testing.assert_array_equal(a.elbo_, b.elbo_)


def test_feature_input_with_bsvm16_pool():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    est = BEMKL(kernels="bsvm16", n_iter=50, random_state=0).fit(X[:50], y[:50])
    assert est.kernel_weights_.shape == (16,) and est.n_features_in_ == 3
    assert np.all(np.diff(est.elbo_) >= -1e-8 * np.abs(est.elbo_[1:]))
    P = est.predict_proba(X[50:])
    assert P.shape == (30, 2) and np.allclose(P.sum(1), 1.0)
    assert est.score(X[50:], y[50:]) > 0.75
