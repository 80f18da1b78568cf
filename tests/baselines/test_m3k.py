"""M3K (bayesmkl/baselines/m3k.py) and its Crammer–Singer solver against cvxpy oracles.

Problem: N = 30, three Gaussian kernels (two informative features, one noise feature), three
classes (:func:`cs_oracles.cs_problem`). Tolerances: the tight fits stop at a relative duality gap
of 1e-7 with the Crammer–Singer solver's KKT violations ≤ 1e-9, so ``0 ≤ J − J* ≤ 1e-7·J``; the
oracle (Clarabel) is accurate to ~1e-8, and ``OBJ_RTOL = 1e-6`` leaves room for both. Weights and
decision values are unique here (q = 2 and one kernel: the primal is strictly convex in f; q = 1:
the optimum has all three weights inside the simplex) but are pinned only to ``√gap``-order by the
objective: the measured differences are ≤ 3e-4 (|f| ≈ 1), checked at ``ATOL = 2e-3``, while the
weights lie more than 0.1 from the uniform starting point.
"""

import functools
import warnings

import cvxpy as cp
import numpy as np
import pytest
from cs_oracles import cs_decision, cs_mkl_oracle, cs_problem
from oracles import rel
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines import M3K
from bayesmkl.baselines._crammer_singer import box_upper, project_capped_zero_sum, solve_cs_dual
from bayesmkl.baselines._solvers import WeightedSVMs
from bayesmkl.baselines._svm import combine
from bayesmkl.baselines.m3k import PlaneBound

OBJ_RTOL = 1e-6
ATOL = 2e-3
TIGHT = dict(kernels="precomputed", tol=1e-7, cs_tol=1e-9, max_iter=5000)


def q_star(q):
    return np.inf if q == 1 else (1.0 if np.isinf(q) else q / (q - 1))


@functools.cache
def fitted(q, n_kernels=3):
    K, y, _, _ = cs_problem(n_kernels=n_kernels)
    return M3K(q=q, **TIGHT).fit(K, y)


@functools.cache
def oracle(q, n_kernels=3):
    K, y, _, _ = cs_problem(n_kernels=n_kernels)
    return cs_mkl_oracle(K, y, 1.0, q_star(q))


def test_projection_matches_a_generic_qp():
    """The row projection onto {Σb = 0, b ≤ u} equals cvxpy's, ties and caps included."""
    rng = np.random.default_rng(0)
    cases = [(rng.normal(size=4) * 3, np.array([0.0, 0.7, 0.0, 0.0])) for _ in range(20)]
    cases += [(np.array([1.0, 1.0, 1.0]), np.array([0.5, 0.0, 0.0]))]  # ties
    cases += [(np.array([-2.0, 5.0, 5.0]), np.array([2.0, 0.0, 0.0]))]  # the capped class is y
    for z, u in cases:
        b = cp.Variable(z.size)
        cp.Problem(cp.Minimize(cp.sum_squares(b - z)), [cp.sum(b) == 0, b <= u]).solve()
        mine = project_capped_zero_sum(z, u)
        assert abs(mine.sum()) < 1e-12 and np.all(mine <= u + 1e-12)
        np.testing.assert_allclose(mine, b.value, atol=1e-6)


@pytest.mark.parametrize("q", [1.0, 2.0])
def test_one_kernel_is_the_crammer_singer_svm(q):
    """With one kernel every weight set gives μ = 1: M3K is the Crammer–Singer SVM."""
    K, _, Kt, _ = cs_problem(n_kernels=1)
    m = fitted(q, n_kernels=1)
    value, beta, _ = oracle(q, n_kernels=1)
    np.testing.assert_allclose(m.kernel_weights_, [1.0], atol=1e-12)
    assert rel(m.objective_[-1], value) <= OBJ_RTOL
    np.testing.assert_allclose(m.decision_function(Kt), cs_decision(Kt, [1.0], beta), atol=ATOL)
    np.testing.assert_allclose(m.intercept_, 0.0)


@pytest.mark.parametrize("q", [1.0, 2.0])
def test_objective_weights_and_decisions_match_the_oracle(q):
    K, _, Kt, _ = cs_problem()
    m = fitted(q)
    value, beta, mu = oracle(q)
    assert 0.0 <= m.duality_gap_ <= TIGHT["tol"]
    assert rel(m.objective_[-1], value) <= OBJ_RTOL
    np.testing.assert_allclose(m.kernel_weights_, mu, atol=ATOL)
    assert np.max(np.abs(mu - 3 ** (-1 / q))) > 0.1  # far (≫ ATOL) from the uniform start
    np.testing.assert_allclose(m.decision_function(Kt), cs_decision(Kt, mu, beta), atol=ATOL)
    # the weights lie on the unit Lq sphere, and J never increased
    assert np.sum(m.kernel_weights_**q) == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(m.objective_) <= 1e-9 * m.objective_[0])


@pytest.mark.parametrize("q", [1.0, 2.0])
def test_stored_classifier_certifies_its_gap(q):
    """From dual_coef_ and kernel_weights_ alone: β is feasible, D(β; K(μ)) = objective_[-1],
    and (‖H‖_{q*} − μᵀH)/J = duality_gap_ ≤ tol."""
    K, y, _, _ = cs_problem()
    m = fitted(q)
    beta, mu = m.dual_coef_.T, m.kernel_weights_
    np.testing.assert_allclose(beta.sum(axis=1), 0.0, atol=1e-12)
    assert np.all(beta <= box_upper(y, 3, 1.0) + 1e-12)
    H = np.array([sum(0.5 * b @ Km @ b for b in beta.T) for Km in K])
    J = beta[np.arange(y.size), y].sum() - 0.5 * np.sum(beta * (combine(K, mu) @ beta))
    assert J == pytest.approx(m.objective_[-1], rel=1e-10)
    support = H.max() if q == 1 else np.sum(H ** q_star(q)) ** (1 / q_star(q))
    own = (support - mu @ H) / J  # the stored solution's own gap; q = 1 may certify better
    assert m.duality_gap_ <= TIGHT["tol"] and m.duality_gap_ <= own * (1 + 1e-6) + 1e-15
    if q != 1:
        assert own == pytest.approx(m.duality_gap_, rel=1e-6, abs=1e-12)


def test_cutting_plane_bound_is_valid_and_beats_each_plane():
    """Planes from Crammer–Singer solutions at random weights: the LP bound lies below J*
    (the oracle), above every solution's own bound c − max_m H_m, and reaches J* once the
    oracle's optimal β's plane is added."""
    K, y, _, _ = cs_problem()
    value, beta_star, mu_star = oracle(1.0)
    upper = box_upper(y, 3, 1.0)
    bound = PlaneBound()
    own = []
    for mu in np.random.default_rng(0).dirichlet(np.ones(3), size=6):
        sol = solve_cs_dual(combine(K, mu), y, upper, 1e-9)
        H = np.array([sum(0.5 * b @ Km @ b for b in sol.beta.T) for Km in K])
        bound.add(WeightedSVMs(mu, sol.beta.T, np.zeros(3), sol.objective, H))
        own.append(sol.beta[np.arange(y.size), y].sum() - H.max())
    assert max(own) < bound.bound() <= value + 1e-9
    assert (value - bound.bound()) / value > 1e-3  # random weights alone do not pin J*
    H = np.array([sum(0.5 * b @ Km @ b for b in beta_star.T) for Km in K])
    J = beta_star[np.arange(y.size), y].sum() - mu_star @ H
    bound.add(WeightedSVMs(mu_star, beta_star.T, np.zeros(3), J, H))
    assert bound.bound() == pytest.approx(value, rel=1e-6)


def test_q_inf_is_the_crammer_singer_svm_on_the_kernel_sum():
    K, y, Kt, _ = cs_problem()
    m = M3K(q=np.inf, **TIGHT).fit(K, y)
    value, beta, _ = cs_mkl_oracle(K.sum(0)[None], y, 1.0, 1.0)
    np.testing.assert_array_equal(m.kernel_weights_, np.ones(3))
    assert m.n_iter_ == 0 and rel(m.objective_[-1], value) <= OBJ_RTOL
    np.testing.assert_allclose(
        m.decision_function(Kt), cs_decision(Kt, np.ones(3), beta), atol=ATOL
    )


def test_integer_sample_weights_equal_repeated_rows():
    K, y, Kt, _ = cs_problem()
    sw = np.random.default_rng(1).integers(1, 4, size=y.size).astype(float)
    rep = np.repeat(np.arange(y.size), sw.astype(int))
    a = M3K(q=2.0, **TIGHT).fit(K, y, sample_weight=sw)
    b = M3K(q=2.0, **TIGHT).fit(K[:, rep][:, :, rep], y[rep])
    assert rel(a.objective_[-1], b.objective_[-1]) <= 1e-6
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=ATOL)
    np.testing.assert_allclose(
        a.decision_function(Kt), b.decision_function(Kt[:, :, rep]), atol=ATOL
    )
    assert rel(a.objective_[-1], fitted(2.0).objective_[-1]) > 0.1  # and the weights matter


def test_two_classes_give_one_decision_column():
    """Two classes: one column f_b − f_a, which is the oracle's, and predict is its sign."""
    K, y, Kt, _ = cs_problem()
    keep = y < 2
    labels = np.array(["a", "b"])[y[keep]]
    Kk = K[:, keep][:, :, keep]
    m = M3K(q=2.0, **TIGHT).fit(Kk, labels)
    F = m.decision_function(Kt[:, :, keep])
    _, beta, mu = cs_mkl_oracle(Kk, y[keep], 1.0, 2.0)
    oracle_F = cs_decision(Kt[:, :, keep], mu, beta)
    np.testing.assert_allclose(F, oracle_F[:, 1] - oracle_F[:, 0], atol=ATOL)
    full = combine(Kt[:, :, keep], m.kernel_weights_) @ m.dual_coef_.T
    assert F.shape == (Kt.shape[1],)
    np.testing.assert_allclose(F, full[:, 1] - full[:, 0])
    np.testing.assert_array_equal(m.predict(Kt[:, :, keep]), np.where(F > 0, "b", "a"))


def test_feature_input_with_string_labels():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    codes = (X[:, 1] > 0).astype(int) + (X[:, 0] > 0.5).astype(int)
    y = np.array(["red", "green", "blue"])[codes]
    m = M3K(q=2.0, C=10.0).fit(X[:40], y[:40])
    assert len(m.kernel_names_) == m.kernel_weights_.size == 13 * 3 and m.n_features_in_ == 2
    assert m.decision_function(X[40:]).shape == (20, 3)
    assert np.mean(m.predict(X[40:]) == y[40:]) > 0.6  # chance is about 1/3


def test_max_iter_warns():
    K, y, _, _ = cs_problem()
    with pytest.warns(ConvergenceWarning, match="M3K stopped after max_iter=1 weight updates"):
        m = M3K(kernels="precomputed", q=2.0, tol=1e-12, max_iter=1).fit(K, y)
    assert m.n_iter_ == 1


@pytest.mark.parametrize("q", [1.0, 2.0])
def test_max_time_keeps_the_last_iterate_and_warns(q):
    K, y, Kt, yt = cs_problem()
    with pytest.warns(ConvergenceWarning, match=r"M3K stopped after max_time=1e-09 s \(1 weight"):
        m = M3K(kernels="precomputed", q=q, tol=1e-12, max_time=1e-9).fit(K, y)
    assert m.n_iter_ == 1 and np.mean(m.predict(Kt) == yt) > 0.6


def test_crammer_singer_solver_warns_at_its_step_cap():
    K, y, _, _ = cs_problem()
    with pytest.warns(ConvergenceWarning, match=r"max_steps=5 block updates.*raise M3K's cs_tol"):
        sol = solve_cs_dual(K[0], y, box_upper(y, 3, 1.0), 1e-9, max_steps=5)
    assert sol.n_steps == 5 and sol.violation > 1e-9


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(q=0.5), r"^q must be a number >= 1 \(inf allowed\); got 0.5$"),
        (dict(C=0.0), "^C must be"),
        (dict(cs_tol=-1.0), "^cs_tol must be"),
        (dict(max_iter=0), "^max_iter must be an integer >= 1"),
        (dict(class_weight="uniform"), "class_weight must be"),
    ],
)
def test_invalid_parameters_raise(kw, match):
    K, y, _, _ = cs_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=match):
            M3K(kernels="precomputed", **kw).fit(K, y)
