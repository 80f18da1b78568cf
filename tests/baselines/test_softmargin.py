"""SoftMarginMKL (bayesmkl/baselines/softmargin.py) and the weight-set helpers it uses."""

import functools

import cvxpy as cp
import numpy as np
import pytest
from oracles import TIGHT, l1_reference, problem, rel, sm1_value, sm2_value
from scipy.optimize import linprog

from bayesmkl.baselines import AverageMKL, LpMKL, SoftMarginMKL
from bayesmkl.baselines._simplex import (
    box_simplex_min_ratio,
    box_simplex_support,
    project_simplex,
    simplex_ridge_support,
)


@functools.cache
def sm(loss, theta, n_classes=2):
    K, y, _, _ = problem(n_classes)
    return SoftMarginMKL(loss=loss, theta=theta, **TIGHT).fit(K, y)


# ---------------------------------------------------------------- SM1MKL (hinge)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_sm1_theta_one_over_P_is_exactly_average_kernel(n_classes):
    K, y, Kt, _ = problem(n_classes)
    P = K.shape[0]
    nu = 1.0
    m = SoftMarginMKL(kernels="precomputed", loss="hinge", theta=1.0 / (nu * P)).fit(K, y)
    avg = AverageMKL(kernels="precomputed").fit(K, y)
    np.testing.assert_array_equal(m.kernel_weights_, avg.kernel_weights_)
    np.testing.assert_array_equal(m.dual_coef_, avg.dual_coef_)
    np.testing.assert_array_equal(m.decision_function(Kt), avg.decision_function(Kt))
    np.testing.assert_array_equal(m.predict(Kt), avg.predict(Kt))


@pytest.mark.parametrize("n_classes, theta", [(2, 1.0), (3, 3.0)])
def test_sm1_theta_at_least_one_reaches_simplemkl_objective(n_classes, theta):
    m = sm("hinge", theta, n_classes)
    assert rel(m.objective_[-1], l1_reference(n_classes).objective_[-1]) <= 1e-3


@pytest.mark.parametrize("n_classes", [2, 3])
def test_sm1_matches_qcqp_oracle_and_respects_the_box(n_classes):
    K, y, _, _ = problem(n_classes)
    theta = 1.0 / (0.5 * K.shape[0])  # ν = 0.5
    m = sm("hinge", theta, n_classes)
    assert rel(m.objective_[-1], sm1_value(K, y, 1.0, theta)) <= 1e-4
    assert m.duality_gap_ <= TIGHT["tol"]
    mu = m.kernel_weights_
    assert mu.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(mu >= 0) and np.all(mu <= theta + 1e-12)
    assert np.all(np.diff(m.objective_) <= 1e-9 * m.objective_[0])


def test_sm1_objective_interpolates_between_average_and_l1():
    """M1(θ) grows with θ, so J* decreases from the average kernel (θ = 1/P) to L1-MKL (θ = 1)."""
    P = problem(2)[0].shape[0]
    Js = [sm("hinge", 1.0 / (nu * P), 2).objective_[-1] for nu in (1.0, 0.5, 1.0 / P)]
    assert Js[0] > Js[1] > Js[2] - 1e-6 * Js[2]


def test_sm1_theta_below_one_over_P_is_refused():
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match=r"theta >= 1/P = 0.2 for P = 5"):
        SoftMarginMKL(kernels="precomputed", loss="hinge", theta=0.19).fit(K, y)


# ---------------------------------------------------------------- SM2MKL (square hinge)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_sm2_matches_qcqp_oracle(n_classes):
    K, y, _, _ = problem(n_classes)
    m = sm("square_hinge", 1.0, n_classes)
    assert rel(m.objective_[-1], sm2_value(K, y, 1.0, 1.0)) <= 1e-4
    assert m.duality_gap_ <= TIGHT["tol"]
    assert m.kernel_weights_.sum() == pytest.approx(1.0, abs=1e-12)
    # Armijo line search: the objective (13) decreases at every accepted step
    assert np.all(np.diff(m.objective_) < 0)


def test_sm2_large_theta_is_l1_within_the_ridge_bound():
    """F* = min J + ‖μ‖²/(2θ) ∈ [J_L1, J_L1 + 1/(2θ)] since ‖μ‖² ≤ 1 on the simplex.

    Both solvers stop at a relative gap ≤ 1e-6, hence the extra 2e-6·J slack.
    """
    theta = 1e5
    F = sm("square_hinge", theta, 2).objective_[-1]
    J1 = l1_reference(2).objective_[-1]
    assert -2e-6 * J1 <= F - J1 <= 1.0 / (2 * theta) + 2e-6 * J1


def test_sm2_small_theta_is_nearly_uniform():
    """At the optimum μ* = Π(θH(μ*)) (projected-gradient fixed point with step θ), and
    Π(c·1) = 1/P, so by non-expansiveness ‖μ* − 1/P‖₂ ≤ θ‖H − mean(H)‖₂."""
    K, y, _, _ = problem(2)
    P = K.shape[0]
    theta = 1e-5
    m = sm("square_hinge", theta, 2)
    V = m.dual_coef_
    H = np.array([sum(0.5 * v @ Km @ v for v in V) for Km in K])
    dev = np.linalg.norm(m.kernel_weights_ - 1.0 / P)
    assert dev <= theta * np.linalg.norm(H - H.mean()) + 1e-12
    # and the objective is the ridge-dominated value: J(1/P) + 1/(2θP) up to the gap
    avg = AverageMKL(kernels="precomputed", svc_tol=1e-9).fit(K, y)
    assert rel(m.objective_[-1], avg.objective_[-1] + 1.0 / (2 * theta * P)) <= 1e-6


def test_sm2_moderate_theta_fixed_point():
    """μ = Π(θH(μ)) holds at the solution up to the gap: ‖μ − μ*‖ ≤ √(2θ·gap) (strong convexity)."""
    K, _, _, _ = problem(2)
    theta = 1e-2
    m = sm("square_hinge", theta, 2)
    H = np.array([sum(0.5 * v @ Km @ v for v in m.dual_coef_) for Km in K])
    gap_abs = m.duality_gap_ * m.objective_[-1]
    bound = np.sqrt(2 * theta * gap_abs) + 1e-9
    assert np.linalg.norm(m.kernel_weights_ - project_simplex(theta * H)) <= 2 * bound


# ---------------------------------------------------------------- square loss (L2-MKL)


def test_square_loss_is_lp_two():
    K, y, Kt, _ = problem(3)
    lp = LpMKL(kernels="precomputed", p=2.0, tol=1e-8).fit(K, y)
    for theta in (0.3, 7.0):  # θ does not enter the C-SVC form of (16)
        m = SoftMarginMKL(kernels="precomputed", loss="square", theta=theta, tol=1e-8).fit(K, y)
        np.testing.assert_array_equal(m.kernel_weights_, lp.kernel_weights_)
        np.testing.assert_array_equal(m.objective_, lp.objective_)
        np.testing.assert_array_equal(m.decision_function(Kt), lp.decision_function(Kt))


def test_multiclass_string_labels_all_losses():
    K, y, Kt, yt = problem(3)
    labels = np.array(["u", "v", "w"])
    for loss in ("hinge", "square_hinge", "square"):
        m = SoftMarginMKL(kernels="precomputed", loss=loss, theta=0.5).fit(K, labels[y])
        pred = m.predict(Kt)
        assert set(pred) <= set(labels)
        assert np.mean(pred == labels[yt]) > 0.5
        assert m.normalized_weights_.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(loss="l1"), "loss must be one of"),
        (dict(loss="square_hinge", theta=0.0), "theta must be a positive number"),
        (dict(loss="square_hinge", theta=-1.0), "theta must be"),
        (dict(loss="hinge", theta=np.nan), "theta must be"),
        (dict(loss="hinge", theta=1.0, C=-3), "C must be"),
        (dict(loss="square_hinge", tol=0), "tol must be"),
    ],
)
def test_invalid_parameters_raise(kw, match):
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match=match):
        SoftMarginMKL(kernels="precomputed", **kw).fit(K, y)


# ---------------------------------------------------------------- weight-set helpers


def _random_vectors(n=8, P=6):
    rng = np.random.default_rng(7)
    return [rng.exponential(size=P) * (rng.uniform(size=P) > 0.2) for _ in range(n)]


def test_project_simplex_against_cvxpy():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(scale=2.0, size=7)
        z = cp.Variable(7)
        cp.Problem(cp.Minimize(cp.sum_squares(z - x)), [z >= 0, cp.sum(z) == 1]).solve(
            solver=cp.CLARABEL
        )
        np.testing.assert_allclose(project_simplex(x), z.value, atol=1e-6)
    np.testing.assert_allclose(project_simplex(np.full(4, 3.0)), 0.25)


@pytest.mark.parametrize("theta", [0.2, 0.25, 0.4, 0.7, 1.0, 2.0])
def test_box_simplex_min_ratio_against_cvxpy(theta):
    P = 5
    for a in _random_vectors(P=P):
        mu = box_simplex_min_ratio(a, theta)
        assert mu.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(mu >= 0) and np.all(mu <= theta + 1e-12)
        z = cp.Variable(P)
        pos = a > 0
        prob = cp.Problem(
            cp.Minimize(cp.sum(cp.multiply(a[pos], cp.inv_pos(z[pos])))),
            [z >= 0, z <= theta, cp.sum(z) == 1],
        )
        prob.solve(solver=cp.CLARABEL)
        assert np.sum(a[pos] / mu[pos]) == pytest.approx(prob.value, rel=1e-6)


def test_box_simplex_min_ratio_limits():
    a = np.array([4.0, 1.0, 0.25, 0.0])
    np.testing.assert_array_equal(box_simplex_min_ratio(a, 0.25), np.full(4, 0.25))
    np.testing.assert_allclose(box_simplex_min_ratio(a, 1.0), [2 / 3.5, 1 / 3.5, 0.5 / 3.5, 0.0])
    # θ = 0.5: the largest weight is capped, the other 0.5 is shared ∝ √a = (1, 0.5, 0)
    np.testing.assert_allclose(box_simplex_min_ratio(a, 0.5), [0.5, 1 / 3, 1 / 6, 0.0])
    np.testing.assert_allclose(box_simplex_min_ratio(np.zeros(4), 0.6), 0.25)
    with pytest.raises(ValueError, match="empty"):
        box_simplex_min_ratio(a, 0.2)


@pytest.mark.parametrize("theta", [0.2, 0.3, 0.5, 1.0])
def test_box_simplex_support_against_linprog(theta):
    for h in _random_vectors(P=5):
        res = linprog(-h, A_eq=np.ones((1, 5)), b_eq=[1.0], bounds=[(0, theta)] * 5)
        assert box_simplex_support(h, theta) == pytest.approx(-res.fun, rel=1e-9, abs=1e-12)


def test_simplex_ridge_support_against_cvxpy():
    for theta in (1e-2, 1.0, 50.0):
        for h in _random_vectors(n=3, P=5):
            z = cp.Variable(5)
            prob = cp.Problem(
                cp.Maximize(z @ h - cp.sum_squares(z) / (2 * theta)), [z >= 0, cp.sum(z) == 1]
            )
            prob.solve(solver=cp.CLARABEL)
            assert simplex_ridge_support(h, theta) == pytest.approx(prob.value, rel=1e-6, abs=1e-8)
    assert simplex_ridge_support(np.array([1.0, 3.0]), np.inf) == 3.0
