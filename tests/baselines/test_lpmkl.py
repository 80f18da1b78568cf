"""LpMKL (bayesmkl/baselines/lpmkl.py): Kloft's analytic update, L2 oracle, limits in p."""

import functools

import numpy as np
import pytest
from oracles import l1_reference, l2_mkl_value, problem, rel

from bayesmkl.baselines import AverageMKL, LpMKL
from bayesmkl.baselines._simplex import box_simplex_min_ratio, lp_min_ratio, lp_norm, lp_support

#: Lp-MKL stops on the relative objective change; 1e-10 keeps it within ~1e-6 of the optimum
#: even where the update converges slowly (p near 1).
LP_TIGHT = dict(kernels="precomputed", svc_tol=1e-9, tol=1e-10, max_iter=5000)


@functools.cache
def lp_fit(p, n_classes=2):
    K, y, _, _ = problem(n_classes)
    return LpMKL(p=p, **LP_TIGHT).fit(K, y)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_l2_objective_matches_qcqp_oracle(n_classes):
    K, y, _, _ = problem(n_classes)
    m = lp_fit(2.0, n_classes)
    assert rel(m.objective_[-1], l2_mkl_value(K, y, 1.0)) <= 1e-4
    assert m.duality_gap_ <= 1e-6


@pytest.mark.parametrize("p", [1.0, 4 / 3, 2.0, 3.0])
def test_weights_on_unit_lp_sphere_and_objective_non_increasing(p):
    m = lp_fit(p)
    assert lp_norm(m.kernel_weights_, p) == pytest.approx(1.0, abs=1e-12)
    assert m.normalized_weights_.sum() == pytest.approx(1.0, abs=1e-12)
    # block-coordinate descent on a jointly convex primal: J never increases (up to libsvm tol)
    assert np.all(np.diff(m.objective_) <= 1e-9 * m.objective_[0])


def test_objective_decreases_with_p_and_p_near_one_approaches_l1():
    """Lp balls grow with p, so J_p* decreases; and J_L1 ≥ J_p ≥ J_L1 · P^{-(p-1)/p}.

    The lower bound: the Lp ball lies in {μ ≥ 0, Σμ ≤ s}, s = P^{1−1/p}, and for the C-SVC dual
    J(sμ; C) = J(μ; sC)/s ≥ J(μ; C)/s. With P = 5 and p = 1.01 the band is 1.6 % wide.
    """
    P = problem(2)[0].shape[0]
    J1 = l1_reference(2).objective_[-1]
    Js = [lp_fit(p).objective_[-1] for p in (1.0, 1.01, 4 / 3, 2.0, 3.0, np.inf)]
    assert np.all(np.diff(Js) <= 1e-6 * J1)
    assert rel(Js[0], J1) <= 1e-4  # p = 1 (group-lasso update) reaches SimpleMKL's optimum
    p = 1.01
    assert -1e-6 <= (J1 - Js[1]) / J1 <= 1 - P ** (-(p - 1) / p) + 1e-6
    assert J1 - Js[1] < 0.1 * (J1 - Js[3])  # much closer to L1 than L2 is


def test_p_one_update_is_the_group_lasso_update():
    a = np.array([0.3, 0.0, 2.0, 0.7, 1e-3])
    np.testing.assert_allclose(lp_min_ratio(a, 1.0), box_simplex_min_ratio(a, 1.0), atol=1e-15)
    np.testing.assert_allclose(lp_min_ratio(a, 1.0), np.sqrt(a) / np.sqrt(a).sum(), atol=1e-15)


@pytest.mark.parametrize("p", [1.5, 2.0, 8.0, 101.0])
def test_kloft_update_satisfies_kkt(p):
    """argmin Σ a_m/μ_m on ‖μ‖_p = 1: a_m/μ_m² = λ p μ_m^{p−1}, so a_m/μ_m^{p+1} is constant."""
    a = np.random.default_rng(3).uniform(0.1, 5.0, size=6)
    mu = lp_min_ratio(a, p)
    assert lp_norm(mu, p) == pytest.approx(1.0, abs=1e-12)
    ratio = a / mu ** (p + 1)
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    # and it beats random points of the sphere
    for _ in range(50):
        z = np.random.default_rng(_).uniform(0.01, 1.0, size=6)
        z /= lp_norm(z, p)
        assert np.sum(a / mu) <= np.sum(a / z) + 1e-12


def test_lp_support_is_the_dual_norm():
    h = np.array([1.0, 3.0, 2.0])
    assert lp_support(h, 1.0) == 3.0
    assert lp_support(h, np.inf) == 6.0
    assert lp_support(h, 2.0) == pytest.approx(np.sqrt(14.0))
    mu = lp_min_ratio(h**3, 3.0)  # any sphere point gives a lower bound (Hölder)
    assert mu @ h <= lp_support(h, 3.0) + 1e-12


def test_p_inf_is_the_kernel_sum_and_equals_average_with_scaled_C():
    """μ = 1: SVM(ΣK_m, C) has the decision function of SVM(mean K, C·P) (α ↦ α/P rescaling)."""
    K, y, Kt, _ = problem(2)
    P = K.shape[0]
    m = LpMKL(kernels="precomputed", p=np.inf, C=0.5, svc_tol=1e-10).fit(K, y)
    np.testing.assert_array_equal(m.kernel_weights_, np.ones(P))
    assert m.n_iter_ == 0
    avg = AverageMKL(kernels="precomputed", C=0.5 * P, svc_tol=1e-10).fit(K, y)
    np.testing.assert_allclose(m.decision_function(Kt), avg.decision_function(Kt), atol=1e-6)
    np.testing.assert_allclose(m.normalized_weights_, avg.kernel_weights_, atol=1e-15)


def test_multiclass_string_labels():
    K, y, Kt, yt = problem(3)
    labels = np.array(["x", "y", "z"])
    m = LpMKL(kernels="precomputed", p=4 / 3).fit(K, labels[y])
    assert set(m.predict(Kt)) <= set(labels)
    assert lp_norm(m.kernel_weights_, 4 / 3) == pytest.approx(1.0, abs=1e-12)
    assert np.mean(m.predict(Kt) == labels[yt]) > 0.5


@pytest.mark.parametrize("p", [0.5, 0.0, -2, np.nan, "two", None, True])
def test_invalid_p_raises(p):
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match="p must be a number >= 1"):
        LpMKL(kernels="precomputed", p=p).fit(K, y)
