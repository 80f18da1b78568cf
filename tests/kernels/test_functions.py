"""Kernel functions against scikit-learn and explicit NumPy formulas (float64)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics.pairwise import euclidean_distances, rbf_kernel
from sklearn.metrics.pairwise import linear_kernel as sk_linear
from sklearn.metrics.pairwise import polynomial_kernel as sk_poly

import bayesmkl  # noqa: F401  (enables float64 in JAX)
from bayesmkl.kernels import functions as F

WIDTHS = 2.0 ** np.arange(-3, 7)


@pytest.fixture(scope="module")
def XZ():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(17, 5))
    Z = rng.normal(size=(11, 5)) * 1.5 + 0.3
    return X, Z


def test_float64():
    X = np.ones((3, 2))
    assert F.gaussian_kernel(X, widths=1.0).dtype == jnp.float64
    assert F.polynomial_kernel(X, degrees=2).dtype == jnp.float64


def test_squared_distances_exact(XZ):
    X, Z = XZ
    D = np.asarray(F.squared_distances(X, Z))
    np.testing.assert_allclose(D, euclidean_distances(X, Z, squared=True), rtol=1e-12, atol=1e-12)
    DXX = np.asarray(F.squared_distances(X))
    assert np.all(np.diag(DXX) == 0.0)
    assert np.array_equal(DXX, DXX.T)
    Dj = np.asarray(F.feature_squared_distances(X, Z))
    assert Dj.shape == (5, 17, 11)
    np.testing.assert_allclose(Dj[2], (X[:, 2:3] - Z[:, 2][None]) ** 2, rtol=1e-14)
    np.testing.assert_allclose(Dj.sum(0), D, rtol=1e-12)
    Gj = np.asarray(F.feature_products(X, Z))
    np.testing.assert_allclose(Gj.sum(0), X @ Z.T, rtol=1e-12, atol=1e-12)


def test_gaussian_matches_sklearn(XZ):
    X, Z = XZ
    K = np.asarray(F.gaussian_kernel(X, Z, widths=WIDTHS))
    assert K.shape == (len(WIDTHS), 17, 11)
    for g, s in enumerate(WIDTHS):
        np.testing.assert_allclose(K[g], rbf_kernel(X, Z, gamma=1 / (2 * s**2)), rtol=0, atol=1e-10)
    # scalar width -> (N, M); Z defaults to X
    K1 = np.asarray(F.gaussian_kernel(X, widths=0.7))
    assert K1.shape == (17, 17)
    np.testing.assert_allclose(K1, rbf_kernel(X, gamma=1 / (2 * 0.49)), rtol=0, atol=1e-10)


@pytest.mark.parametrize("offset", [1.0, 0.0, 0.5])
def test_polynomial_matches_sklearn(XZ, offset):
    X, Z = XZ
    K = np.asarray(F.polynomial_kernel(X, Z, degrees=[1, 2, 3], offset=offset))
    assert K.shape == (3, 17, 11)
    for q, d in enumerate([1, 2, 3]):
        ref = sk_poly(X, Z, degree=d, gamma=1, coef0=offset)
        np.testing.assert_allclose(K[q], ref, rtol=1e-10, atol=1e-10)
    # negative bases survive the integer power (odd degree keeps the sign)
    assert np.any(K[2] < 0)


def test_linear_matches_sklearn(XZ):
    X, Z = XZ
    np.testing.assert_allclose(np.asarray(F.linear_kernel(X, Z)), sk_linear(X, Z), atol=1e-12)


def test_per_feature_kernels(XZ):
    X, Z = XZ
    K = np.asarray(F.per_feature_gaussian_kernels(X, Z, widths=WIDTHS[:4]))
    assert K.shape == (4, 5, 17, 11)
    for g, s in enumerate(WIDTHS[:4]):
        for j in range(5):
            ref = rbf_kernel(X[:, [j]], Z[:, [j]], gamma=1 / (2 * s**2))
            np.testing.assert_allclose(K[g, j], ref, rtol=0, atol=1e-10)
    Kp = np.asarray(F.per_feature_polynomial_kernels(X, Z, degrees=[1, 3], offset=[0.0, 1.0]))
    assert Kp.shape == (2, 5, 17, 11)
    for j in range(5):
        np.testing.assert_allclose(Kp[0, j], np.outer(X[:, j], Z[:, j]), atol=1e-12)
        ref = sk_poly(X[:, [j]], Z[:, [j]], degree=3, gamma=1, coef0=1.0)
        np.testing.assert_allclose(Kp[1, j], ref, rtol=1e-10, atol=1e-10)


def test_centering_formula(XZ):
    X, Z = XZ
    N = X.shape[0]
    K = sk_poly(X, degree=2, coef0=1, gamma=1)[None]
    H = np.eye(N) - np.ones((N, N)) / N
    r = K.mean(axis=2)
    g = K.mean(axis=(1, 2))
    Kc = np.asarray(F.center_cross_kernels(K, r, g))
    np.testing.assert_allclose(Kc[0], H @ K[0] @ H, rtol=1e-12, atol=1e-9)
    # new rows: k(x*) - K1/N - (1'k(x*)/N) 1 + (1'K1/N^2) 1
    kz = sk_poly(Z, X, degree=2, coef0=1, gamma=1)[None]
    kzc = np.asarray(F.center_cross_kernels(kz, r, g))
    ref = kz[0] - r[0][None, :] - kz[0].mean(1, keepdims=True) + g[0]
    np.testing.assert_allclose(kzc[0], ref, rtol=1e-12, atol=1e-9)


def test_normalization_formula(XZ):
    X, Z = XZ
    K = sk_poly(Z, X, degree=3, coef0=1, gamma=1)[None]
    dz = ((Z**2).sum(1) + 1) ** 3
    dx = ((X**2).sum(1) + 1) ** 3
    Kn = np.asarray(F.normalize_cross_kernels(K, dz[None], dx[None]))
    np.testing.assert_allclose(Kn[0], K[0] / np.sqrt(np.outer(dz, dx)), rtol=1e-12)


def test_bad_parameters(XZ):
    X, Z = XZ
    with pytest.raises(ValueError, match="width"):
        F.gaussian_kernel(X, Z, widths=0.0)
    with pytest.raises(ValueError, match="width"):
        F.gaussian_kernel(X, Z, widths=[1.0, -2.0])
    with pytest.raises(ValueError, match="integer"):
        F.polynomial_kernel(X, Z, degrees=2.5)
    with pytest.raises(ValueError, match="integer"):
        F.polynomial_kernel(X, Z, degrees=0)
    with pytest.raises(ValueError, match="same number of features.*5 and 4"):
        F.gaussian_kernel(X, Z[:, :4])
    with pytest.raises(ValueError, match="2-D"):
        F.linear_kernel(X[0])
