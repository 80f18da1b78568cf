"""Custom kernels in KernelPool: user callables, scikit-learn GP kernels, pairwise names.

Each custom kernel must reproduce the built-in kernel it is mathematically equal to, through the
whole preprocessing (standardisation, centring, unit-diagonal normalisation, float32 storage), on
training and cross kernels. Differences come only from floating-point evaluation order (NumPy vs
XLA), so the tolerance is a few float64 ulps of the O(1) kernel values: ``1e-12``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern

from bayesmkl.baselines import AverageMKL
from bayesmkl.io import pool_from_state, pool_to_state
from bayesmkl.kernels import KernelPool, KernelSpec
from bayesmkl.kernels.input import KernelInput

ATOL = 1e-12
SIGMA = 0.7


def my_gauss(X, Y, sigma=SIGMA):
    return np.exp(-cdist(X, Y, "sqeuclidean") / (2.0 * sigma**2))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 4)) * [1.0, 3.0, 0.5, 2.0] + [0.0, 1.0, -1.0, 4.0]
    return X[:30], X[30:]


def _kernels(pool, Xtr, Xte):
    pool.fit(Xtr)
    return pool.train_kernels(), pool.cross_kernels(Xte)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize(
    "custom",
    [
        my_gauss,  # a bare callable
        RBF(length_scale=SIGMA),  # scikit-learn's RBF(ℓ) is gauss(σ = ℓ)
        ConstantKernel(3.0) * RBF(length_scale=SIGMA),  # normalisation removes the scale
        ("rbf", {"gamma": 1.0 / (2.0 * SIGMA**2)}),  # pairwise: gamma = 1/(2σ²)
        KernelSpec(functools.partial(my_gauss, sigma=SIGMA), display_name="partial"),
    ],
    ids=["callable", "sklearn-RBF", "sklearn-scaled-RBF", "pairwise-rbf", "partial"],
)
def test_custom_gaussian_equals_builtin(data, custom, center):
    Xtr, Xte = data
    K, Kt = _kernels(KernelPool([("gauss", SIGMA), custom], center=center), Xtr, Xte)
    np.testing.assert_allclose(K[1], K[0], rtol=0, atol=ATOL)
    np.testing.assert_allclose(Kt[1], Kt[0], rtol=0, atol=ATOL)
    if not center:  # a raw Gaussian has unit diagonal with or without normalisation
        np.testing.assert_allclose(np.diag(K[1]), 1.0, rtol=0, atol=ATOL)


@pytest.mark.parametrize("center", [False, True])
def test_pairwise_poly_on_a_column_subset_equals_builtin(data, center):
    """sklearn's ``poly`` with gamma = 1, coef0 = offset is our (xᵀz + offset)^d."""
    Xtr, Xte = data
    cols = [0, 2]
    pool = KernelPool(
        [("poly", 2, cols), ("poly", {"degree": 2, "gamma": 1.0, "coef0": 1.0}, cols)],
        center=center,
    )
    K, Kt = _kernels(pool, Xtr, Xte)
    assert pool.names == ["poly(d=2)[x0,x2]", "poly(coef0=1, degree=2, gamma=1)[x0,x2]"]
    np.testing.assert_allclose(K[1], K[0], rtol=0, atol=ATOL)
    np.testing.assert_allclose(Kt[1], Kt[0], rtol=0, atol=ATOL)
    np.testing.assert_allclose(np.diag(K[1]), 1.0, rtol=0, atol=ATOL)  # normalised


def test_callable_without_normalisation_and_float32_storage(data):
    Xtr, Xte = data

    def scaled(X, Y):  # 5·gauss: normalize=False keeps the scale, normalize=True removes it
        return 5.0 * my_gauss(X, Y)

    raw = KernelPool([("gauss", SIGMA), scaled], normalize=False)
    K, Kt = _kernels(raw, Xtr, Xte)
    np.testing.assert_allclose(K[1], 5.0 * K[0], rtol=0, atol=5 * ATOL)
    np.testing.assert_allclose(Kt[1], 5.0 * Kt[0], rtol=0, atol=5 * ATOL)
    f32 = KernelPool([("gauss", SIGMA), scaled], dtype=np.float32)
    K32, Kt32 = _kernels(f32, Xtr, Xte)
    assert K32.dtype == Kt32.dtype == np.float32
    np.testing.assert_array_equal(K32[1], K32[0])  # equal float64 values round alike


def test_per_feature_template_with_a_callable(data):
    Xtr, Xte = data
    pool = KernelPool(
        [
            ("gauss", SIGMA, "each"),
            KernelSpec(my_gauss, None, "each"),
            KernelSpec(my_gauss, None, "each", display_name="g"),
        ]
    )
    K, Kt = _kernels(pool, Xtr, Xte)
    d = Xtr.shape[1]
    assert pool.names[d : 2 * d] == [f"callable:my_gauss[x{j}]" for j in range(d)]
    assert pool.names[2 * d :] == [f"g[x{j}]" for j in range(d)]
    np.testing.assert_allclose(K[d : 2 * d], K[:d], rtol=0, atol=ATOL)
    np.testing.assert_allclose(Kt[2 * d :], Kt[:d], rtol=0, atol=ATOL)


def test_names():
    def k(X, Y, c=1.0):
        return X @ Y.T + c

    assert KernelSpec(k).name == "callable:k[all]"
    assert KernelSpec(k, {"c": 2.5}, [1, 2, 3]).name == "callable:k(c=2.5)[x1:4]"
    assert KernelSpec("laplacian", {"gamma": 0.5}, 3).name == "laplacian(gamma=0.5)[x3]"
    assert KernelSpec("cosine").name == "cosine[all]"
    assert KernelSpec(Matern(length_scale=2.0, nu=1.5)).name == (
        "Matern(length_scale=2, nu=1.5)[all]"
    )
    assert KernelSpec(k, display_name="my kernel").name == "my kernel"
    assert KernelSpec(RBF(1.0), features=[0], label="view").name == "RBF(length_scale=1)[view]"


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _fit_one(kernel, X, **kw):
    return KernelPool([KernelSpec(kernel, **kw)]).fit(X)


@pytest.mark.parametrize(
    "kernel, match",
    [
        (lambda X, Y: np.ones((len(X), len(Y) + 1)), r"returned shape \(30, 31\).*\(30, 30\)"),
        (lambda X, Y: np.ones(len(X)), r"returned shape \(30,\)"),
        (lambda X, Y: np.full((len(X), len(Y)), np.nan), r"returned NaN or inf \(first at"),
        (lambda X, Y: X[:, :1] - Y[:, :1].T, r"not symmetric on the training data"),
        (lambda X, Y: np.full((len(X), len(Y)), "a"), "real numeric array"),
        (lambda X: X @ X.T, r"failed on inputs of shapes \(30, 4\) and \(30, 4\): TypeError"),
        # indefinite: fitted silently until issue 22's second audit (precomputed ones were refused)
        (lambda X, Y: -X @ Y.T, r"on the training data is not positive semi-definite: its small"),
        ("sigmoid", r"on the training data is not positive semi-definite"),
        # the zero kernel's error blamed polynomial overflow (0/0 of the normalisation)
        (lambda X, Y: np.zeros((len(X), len(Y))), r"k\(x, x\) = 0 for every training point"),
    ],
    ids=[
        *("wrong-shape", "1-D", "nan", "asymmetric", "strings", "one-argument"),
        *("negated", "sigmoid", "zero"),
    ],
)
def test_bad_callable_is_refused_at_fit_with_its_name(data, kernel, match):
    Xtr, _ = data
    with pytest.raises(ValueError, match=match) as info:
        _fit_one(kernel, Xtr, display_name="bad[all]")
    assert str(info.value).startswith("kernel 'bad[all]'")


def test_bad_cross_kernel_is_refused(data):
    Xtr, Xte = data

    def k(X, Y):  # fine on the training set, wrong shape for new points
        return my_gauss(X, Y) if len(X) == len(Y) else np.ones((len(Y), len(X)))

    pool = _fit_one(k, Xtr)
    pool.train_kernels()
    with pytest.raises(ValueError, match=r"callable:k\[all\]' returned shape \(30, 10\)"):
        pool.cross_kernels(Xte)


@pytest.mark.parametrize(
    "kind, param, match",
    [
        ("rbf", {"sigma": 1.0}, r"'rbf' takes the parameters \['gamma'\]; got unknown \['sigma'\]"),
        ("gaussian", None, "unknown kernel kind 'gaussian'"),
        (RBF(1.0), {"length_scale": 2.0}, "takes no separate parameters"),
        ("rbf", 0.5, r"kind 'rbf' is scikit-learn's pairwise kernel: its param must be a dict"),
        (3.0, None, "cannot use 3.0 as a kernel"),
    ],
)
def test_bad_spec(kind, param, match):
    with pytest.raises(ValueError, match=match):
        KernelSpec(kind, param)


# ---------------------------------------------------------------------------------------------
# estimators, precomputed names, saving
# ---------------------------------------------------------------------------------------------


def test_estimator_with_custom_kernels_equals_builtin_pool(data):
    Xtr, Xte = data
    y = (Xtr[:, 0] + Xtr[:, 1] > 1.0).astype(int)
    builtin = KernelPool([("gauss", SIGMA), ("gauss", 2.0), ("linear", None)])
    mixed = KernelPool([my_gauss, RBF(2.0), ("linear", {})])
    a = AverageMKL(kernels=builtin, svc_tol=1e-10).fit(Xtr, y)
    b = AverageMKL(kernels=mixed, svc_tol=1e-10).fit(Xtr, y)
    assert b.kernel_names_ == ["callable:my_gauss[all]", "RBF(length_scale=2)[all]", "linear[all]"]
    np.testing.assert_allclose(b.decision_function(Xte), a.decision_function(Xte), atol=1e-8)


def test_precomputed_kernel_names(data):
    Xtr, Xte = data
    y = (Xtr[:, 0] > 0).astype(int)
    K = np.stack([my_gauss(Xtr, Xtr), my_gauss(Xtr, Xtr, 2.0)])
    m = AverageMKL(kernels="precomputed", kernel_names=["narrow", "wide"]).fit(K, y)
    assert m.kernel_names_ == ["narrow", "wide"]
    assert AverageMKL(kernels="precomputed").fit(K, y).kernel_names_ == ["K0", "K1"]
    with pytest.raises(ValueError, match="got 1 names for 2 precomputed kernels"):
        AverageMKL(kernels="precomputed", kernel_names=["narrow"]).fit(K, y)
    with pytest.raises(ValueError, match="kernel_names is for kernels='precomputed' only"):
        KernelInput.fit("bsvm16", Xtr, kernel_names=["a"])


def test_saving_pairwise_specs_round_trips_and_callables_are_refused(data):
    Xtr, Xte = data
    pool = KernelPool(
        [("laplacian", {"gamma": np.float64(0.3)}, [0, 1]), KernelSpec("cosine", display_name="c")]
    ).fit(Xtr)
    meta, arrays = pool_to_state(pool)
    again = pool_from_state(meta, arrays)
    assert again.names == pool.names == ["laplacian(gamma=0.3)[x0:2]", "c"]
    np.testing.assert_array_equal(again.cross_kernels(Xte), pool.cross_kernels(Xte))
    with pytest.raises(ValueError, match="callable:my_gauss.*pickle/joblib"):
        pool_to_state(KernelPool([my_gauss]))
