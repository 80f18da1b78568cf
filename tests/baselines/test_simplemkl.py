"""SimpleMKL (bayesmkl/baselines/simplemkl.py): optimality against a cvxpy QCQP oracle."""

import numpy as np
import pytest
from oracles import TIGHT, l1_oracle, l1_reference, problem, rel
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines import SimpleMKL
from bayesmkl.baselines._svm import combine
from bayesmkl.baselines.simplemkl import _descent_direction


@pytest.mark.parametrize("n_classes", [2, 3])
def test_objective_matches_qcqp_oracle(n_classes):
    m = l1_reference(n_classes)
    assert rel(m.objective_[-1], l1_oracle(n_classes)) <= 1e-4
    assert m.duality_gap_ <= TIGHT["tol"]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_duality_gap_recomputed_from_fitted_attributes(n_classes):
    """The stored classifier itself certifies optimality: gap = max_m H_m − μᵀH ≤ tol·J."""
    K, _, _, _ = problem(n_classes)
    m = l1_reference(n_classes)
    mu, V = m.kernel_weights_, m.dual_coef_
    H = np.array([sum(0.5 * v @ Km @ v for v in V) for Km in K])
    J = sum(np.abs(v).sum() - 0.5 * v @ combine(K, mu) @ v for v in V)
    assert J == pytest.approx(m.objective_[-1], rel=1e-10)
    assert (H.max() - mu @ H) / J <= TIGHT["tol"]
    assert (H.max() - mu @ H) / J == pytest.approx(m.duality_gap_, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_weights_on_simplex_sparse_and_objective_decreasing(n_classes):
    m = l1_reference(n_classes)
    mu = m.kernel_weights_
    assert np.all(mu >= 0) and mu.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.any(mu == 0.0)  # the maximal step zeroes components exactly
    assert np.all(np.diff(m.objective_) <= 1e-9 * m.objective_[0])
    assert m.n_iter_ == len(m.objective_) - 1


def test_descent_direction_is_feasible_and_descending():
    mu = np.array([0.5, 0.0, 0.3, 0.0, 0.2])
    H = np.array([1.0, 0.5, 2.0, 3.0, 1.5])
    D = _descent_direction(mu, H, u=0)
    assert D.sum() == pytest.approx(0.0, abs=1e-15)
    assert D[1] == 0.0  # zero weight whose gradient points outwards stays put
    assert D[3] > 0  # zero weight with a better kernel may enter
    assert -D @ H < 0  # directional derivative of J (gradient −H) is negative


def test_multiclass_string_labels_predict():
    K, y, Kt, yt = problem(3)
    labels = np.array(["red", "green", "blue"])
    m = SimpleMKL(kernels="precomputed", tol=1e-3).fit(K, labels[y])
    pred = m.predict(Kt)
    assert set(pred) <= set(labels)
    assert np.mean(pred == labels[yt]) > 0.5  # chance is 1/3


def test_simplemkl_pool_end_to_end_equals_precomputed():
    """kernels="simplemkl" (the default pool) on raw features equals the precomputed route."""
    from bayesmkl.kernels.pool import KernelPool

    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 2))
    y = np.where(X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=50) > 0, 1, -1)
    Xtr, Xte, ytr, yte = X[:35], X[35:], y[:35], y[35:]
    m = SimpleMKL(C=10.0, tol=1e-4).fit(Xtr, ytr)
    assert len(m.kernel_names_) == 13 * 3 == m.kernel_weights_.size
    assert m.n_features_in_ == 2
    pool = KernelPool.simplemkl().fit(Xtr)
    ref = SimpleMKL(kernels="precomputed", C=10.0, tol=1e-4).fit(pool.train_kernels(), ytr)
    np.testing.assert_allclose(m.kernel_weights_, ref.kernel_weights_, atol=1e-12)
    np.testing.assert_allclose(
        m.decision_function(Xte), ref.decision_function(pool.cross_kernels(Xte)), atol=1e-10
    )
    assert np.mean(m.predict(Xte) == yte) >= 0.6


def test_max_iter_warns():
    K, y, _, _ = problem(2)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        m = SimpleMKL(kernels="precomputed", tol=1e-12, max_iter=1).fit(K, y)
    assert m.n_iter_ == 1


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(C=0.0), "C must be"),
        (dict(tol=-1e-3), "tol must be"),
        (dict(max_iter=0), "max_iter must be an integer >= 1"),
        (dict(max_iter=2.5), "max_iter must be an integer"),
        (dict(svc_tol=np.inf), "svc_tol must be"),
    ],
)
def test_invalid_parameters_raise(kw, match):
    K, y, _, _ = problem(2)
    with pytest.raises(ValueError, match=match):
        SimpleMKL(kernels="precomputed", **kw).fit(K, y)
