"""AverageMKL and BestSingleKernelSVM (bayesmkl/baselines/average.py)."""

import numpy as np
import pytest
from oracles import gaussian_gram, problem
from sklearn.base import clone

from bayesmkl.baselines import AverageMKL, BestSingleKernelSVM
from bayesmkl.baselines._solvers import solve_at_weights
from bayesmkl.baselines._svm import combine, fit_svc


def test_average_is_one_svc_on_the_mean_kernel():
    K, y, Kt, yt = problem(2)
    P = K.shape[0]
    m = AverageMKL(kernels="precomputed", C=2.0, svc_tol=1e-9).fit(K, y)
    np.testing.assert_array_equal(m.kernel_weights_, np.full(P, 1.0 / P))
    ref = fit_svc(combine(K, np.full(P, 1.0 / P)), np.where(y == 1, 1.0, -1.0), 2.0, 1e-9)
    np.testing.assert_allclose(m.dual_coef_[0], ref.v, atol=1e-12)
    assert m.intercept_[0] == pytest.approx(ref.b, abs=1e-12)
    assert m.objective_[-1] == pytest.approx(ref.objective, rel=1e-12)
    np.testing.assert_allclose(
        m.decision_function(Kt), combine(Kt, m.kernel_weights_) @ ref.v + ref.b, atol=1e-10
    )
    assert np.mean(m.predict(Kt) == yt) > 0.6  # informative kernels: well above chance (0.5)


def test_solve_at_weights_sums_objective_and_gradient_over_classes():
    K, y, _, _ = problem(3)
    mu = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
    s = solve_at_weights(K, np.where(y[None, :] == np.arange(3)[:, None], 1.0, -1.0), mu, 1.0, 1e-9)
    J = sum(np.abs(v).sum() - 0.5 * v @ combine(K, mu) @ v for v in s.V)
    H = np.array([sum(0.5 * v @ Km @ v for v in s.V) for Km in K])
    assert s.J == pytest.approx(J, rel=1e-12)
    np.testing.assert_allclose(s.H, H, rtol=1e-12)
    # J is linear in μ along the fixed α: J = Σ_c 1ᵀα_c − μᵀH
    assert s.J == pytest.approx(np.abs(s.V).sum() - mu @ s.H, rel=1e-12)


def test_average_multiclass_with_string_labels():
    K, y, Kt, yt = problem(3)
    names = np.array(["ant", "bee", "cat"])
    m = AverageMKL(kernels="precomputed").fit(K, names[y])
    pred = m.predict(Kt)
    assert pred.dtype.kind == "U" and set(pred) <= set(names)
    assert m.decision_function(Kt).shape == (Kt.shape[1], 3)
    assert m.dual_coef_.shape == (3, K.shape[1])
    assert np.mean(pred == names[yt]) > 0.5  # chance is 1/3


def _one_informative_kernel(seed=0, n=60):
    """Kernel 2 sees the label-carrying feature; kernels 0, 1, 3 see pure noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 2] + 0.2 * rng.normal(size=n) > 0, "pos", "neg")
    K = np.stack([gaussian_gram(X[:, [j]], X[:, [j]], 1.0) for j in range(4)])
    return K, y


def test_best_single_kernel_picks_the_informative_kernel_and_refits_it():
    K, y = _one_informative_kernel()
    m = BestSingleKernelSVM(kernels="precomputed", cv=5, svc_tol=1e-9).fit(K, y)
    assert m.best_kernel_ == 2
    assert m.cv_scores_.shape == (4,)
    assert m.cv_scores_[2] > np.max(np.delete(m.cv_scores_, 2)) + 0.15
    np.testing.assert_array_equal(m.kernel_weights_, [0.0, 0.0, 1.0, 0.0])
    ref = fit_svc(K[2], np.where(y == "pos", 1.0, -1.0), 1.0, 1e-9)
    np.testing.assert_allclose(m.decision_function(K), K[2] @ ref.v + ref.b, atol=1e-10)


def test_best_single_kernel_multiclass():
    K, y, Kt, yt = problem(3)
    m = BestSingleKernelSVM(kernels="precomputed", cv=3).fit(K, y)
    assert m.kernel_weights_.sum() == 1.0 and np.count_nonzero(m.kernel_weights_) == 1
    assert set(m.predict(Kt)) <= {0, 1, 2}


def test_params_are_stored_verbatim_and_clone():
    m = BestSingleKernelSVM(C=3, cv=4, svc_tol=1e-7, random_state=None)
    assert m.get_params() == dict(
        kernels="simplemkl",
        C=3,
        cv=4,
        svc_tol=1e-7,
        random_state=None,
        class_weight=None,
        kernel_names=None,
    )
    assert clone(AverageMKL(C=0.5)).get_params()["C"] == 0.5


@pytest.mark.parametrize(
    "est, match",
    [
        (AverageMKL(kernels="precomputed", C=0), "C must be a finite positive number"),
        (AverageMKL(kernels="precomputed", C=-1.0), "C must be"),
        (AverageMKL(kernels="precomputed", C=np.nan), "C must be"),
        (AverageMKL(kernels="precomputed", C="1"), "C must be"),
        (AverageMKL(kernels="precomputed", svc_tol=0.0), "svc_tol must be"),
        (BestSingleKernelSVM(kernels="precomputed", cv=1), "cv must be an integer >= 2"),
    ],
)
def test_invalid_parameters_raise(est, match):
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match=match):
        est.fit(K, y)
