"""SGMKL (bayesmkl/baselines/sgmkl.py): elastic-net constrained MKL and its μ-step."""

import functools

import cvxpy as cp
import numpy as np
import pytest
from oracles import TIGHT, elastic_net_value, l1_reference, problem, rel

from bayesmkl.baselines import SGMKL, LpMKL
from bayesmkl.baselines._simplex import elastic_net_min_ratio, elastic_net_support
from bayesmkl.baselines._svm import combine


@functools.cache
def sg(v, n_classes=2):
    K, y, _, _ = problem(n_classes)
    return SGMKL(v=v, **TIGHT).fit(K, y)


def _constraint(mu, v):
    return v * mu.sum() + (1 - v) * mu @ mu


def test_v_half_matches_primal_oracle():
    K, y, _, _ = problem(2)
    m = sg(0.5)
    assert rel(m.objective_[-1], elastic_net_value(K, y, 1.0, 0.5)) <= 1e-4
    assert m.duality_gap_ <= TIGHT["tol"]
    assert _constraint(m.kernel_weights_, 0.5) == pytest.approx(1.0, abs=1e-10)
    assert np.all(np.diff(m.objective_) <= 1e-9 * m.objective_[0])


def test_limits_v_one_is_l1_and_v_zero_is_l2():
    K, y, _, _ = problem(2)
    assert rel(sg(1.0).objective_[-1], l1_reference(2).objective_[-1]) <= 1e-4
    l2 = LpMKL(kernels="precomputed", p=2.0, svc_tol=1e-9, tol=1e-10).fit(K, y)
    assert rel(sg(0.0).objective_[-1], l2.objective_[-1]) <= 1e-4
    # the elastic-net balls are nested between the simplex and the L2 ball
    assert l2.objective_[-1] * (1 - 1e-6) <= sg(0.5).objective_[-1]
    assert sg(0.5).objective_[-1] <= sg(1.0).objective_[-1] * (1 + 1e-6)


def test_multiclass_decision_uses_the_trained_weights():
    K, y, Kt, yt = problem(3)
    labels = np.array(["p", "q", "r"])
    m = SGMKL(kernels="precomputed", v=0.5, tol=1e-4).fit(K, labels[y])
    assert _constraint(m.kernel_weights_, 0.5) == pytest.approx(1.0, abs=1e-10)
    assert m.normalized_weights_.sum() == pytest.approx(1.0)
    F = combine(Kt, m.kernel_weights_) @ m.dual_coef_.T + m.intercept_
    np.testing.assert_allclose(m.decision_function(Kt), F, atol=1e-12)
    assert set(m.predict(Kt)) <= set(labels)
    assert np.mean(m.predict(Kt) == labels[yt]) > 0.5


@pytest.mark.parametrize("v", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_elastic_net_min_ratio_against_cvxpy(v):
    rng = np.random.default_rng(11)
    for _ in range(4):
        a = rng.exponential(size=5) * (rng.uniform(size=5) > 0.2)
        a[0] += 0.1
        mu = elastic_net_min_ratio(a, v)
        assert _constraint(mu, v) == pytest.approx(1.0, abs=1e-10)
        z = cp.Variable(5)
        pos = a > 0
        prob = cp.Problem(
            cp.Minimize(cp.sum(cp.multiply(a[pos], cp.inv_pos(z[pos])))),
            [z >= 0, v * cp.sum(z) + (1 - v) * cp.sum_squares(z) <= 1],
        )
        prob.solve(solver=cp.CLARABEL)
        assert np.sum(a[pos] / mu[pos]) == pytest.approx(prob.value, rel=1e-6)


@pytest.mark.parametrize("v", [0.0, 0.3, 0.8, 1.0])
def test_elastic_net_support_against_cvxpy(v):
    rng = np.random.default_rng(5)
    for _ in range(4):
        h = rng.exponential(size=6)
        z = cp.Variable(6)
        prob = cp.Problem(
            cp.Maximize(z @ h), [z >= 0, v * cp.sum(z) + (1 - v) * cp.sum_squares(z) <= 1]
        )
        prob.solve(solver=cp.CLARABEL)
        assert elastic_net_support(h, v) == pytest.approx(prob.value, rel=1e-6)


@pytest.mark.parametrize("v", [-0.1, 1.5, np.nan, "half", None])
def test_invalid_v_raises(v):
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match=r"v must be a number in \[0, 1\]"):
        SGMKL(kernels="precomputed", v=v).fit(K, y)
