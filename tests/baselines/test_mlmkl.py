"""ML-MKL-Sum and ML-MKL-SA (bayesmkl/baselines/mlmkl.py): worst-class vs summed objective.

The 4-class problem: feature block a (Gaussian kernel a) separates class a from the others, and
four noise blocks give four noise kernels. Each class wants its own kernel, so the summed and the
worst-class objectives pick different weights.
"""

import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning

from bayesmkl.baselines import MLMKLSA, MLMKLSum
from bayesmkl.baselines._base import signed_targets
from bayesmkl.baselines._svm import combine, fit_svc, kernel_quadratics
from bayesmkl.baselines.mlmkl import class_objectives, minimax_lower_bound

C_SVM = 10.0


def gram(A, B, gamma=0.5):
    d2 = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2.0 * A @ B.T
    return np.exp(-gamma * np.maximum(d2, 0.0))


def four_class(seed=1, n_per=20):
    """Kernels ``(8, 40, 40)`` / ``(8, 40, 40)``, labels 0..3 (train = even rows, test = odd)."""
    rng = np.random.default_rng(seed)
    n = 4 * n_per
    y = np.repeat(np.arange(4), n_per)
    blocks = []
    for a in range(4):
        B = rng.normal(size=(n, 2))
        B[y == a] += 2.5 * (1 + 0.3 * a)
        blocks.append(B)
    blocks += [rng.normal(size=(n, 2)) for _ in range(4)]
    tr, te = np.arange(n)[::2], np.arange(n)[1::2]
    K = np.stack([gram(B[tr], B[tr]) for B in blocks])
    Kt = np.stack([gram(B[te], B[tr]) for B in blocks])
    return K, y[tr], Kt, y[te]


def minimax_oracle(K, Y, C, max_cuts=80, rtol=1e-5):
    """``min_p max_k H_k(p)`` by Kelley's cutting planes (H_k is convex in p; LP per step)."""
    P = K.shape[0]
    A_ub, b_ub = [], []
    p, best = np.full(P, 1.0 / P), np.inf
    for _ in range(max_cuts):
        Kp = combine(K, p)
        Hs = []
        for y in Y:
            r = fit_svc(Kp, y, C)
            g = -kernel_quadratics(K, r.v)  # gradient of H_k at p
            A_ub.append(np.r_[g, -1.0])  # H_k(p) + gᵀ(q − p) ≤ t
            b_ub.append(g @ p - r.objective)
            Hs.append(r.objective)
        best = min(best, max(Hs))
        res = linprog(
            np.r_[np.zeros(P), 1.0],
            A_ub=np.array(A_ub),
            b_ub=np.array(b_ub),
            A_eq=np.r_[np.ones(P), 0.0][None],
            b_eq=[1.0],
            bounds=[(0, None)] * P + [(None, None)],
        )
        p, lower = res.x[:P], res.x[P]
        if best - lower <= rtol * best:
            break
    return best, lower


@pytest.fixture(scope="module")
def problem():
    return four_class()


@pytest.fixture(scope="module")
def fitted(problem):
    K, y, _, _ = problem
    s = MLMKLSum(kernels="precomputed", C=C_SVM).fit(K, y)
    a = MLMKLSA(kernels="precomputed", C=C_SVM, max_iter=300, random_state=0).fit(K, y)
    return s, a


@pytest.fixture(scope="module")
def optimum(problem):
    K, y, _, _ = problem
    return minimax_oracle(K, signed_targets(y, 4), C_SVM)


def test_sa_worst_class_no_worse_than_sum(fitted, optimum):
    """Tolerance: none. Measured on this problem: Sum's worst class 13.72; SA (T = 300) over
    random_state 0..9 lies in [12.61, 12.92] (seed 0: 12.67); the minimax optimum (cutting-plane
    oracle) is 12.39. The margin (≥ 0.8) is far above SA's seed-to-seed spread (≈ 0.3), and the
    5 % band around the optimum (13.01) separates the two methods."""
    s, a = fitted
    opt, lower = optimum
    assert a.worst_class_objective_ <= s.worst_class_objective_
    # both are upper bounds of the optimum; SA is close to it (within 5 %), Sum is not (> 5 %)
    assert s.worst_class_objective_ >= lower and a.worst_class_objective_ >= lower
    assert a.worst_class_objective_ <= 1.05 * opt
    assert s.worst_class_objective_ > 1.05 * opt
    # the certificate stored on each estimator is a valid lower bound on the optimum
    for est in (s, a):
        assert est.minimax_lower_bound_ <= opt * (1 + 1e-6)


def test_each_method_wins_its_own_objective(fitted, problem):
    """Sum minimises Σ_k H_k: SA's weights cannot beat it there (gap tolerance 1e-3 relative)."""
    K, y, _, _ = problem
    s, a = fitted
    assert s.class_objectives_.sum() <= a.class_objectives_.sum() * (1 + 1e-3)
    assert s.objective_[-1] == pytest.approx(s.class_objectives_.sum(), rel=1e-6)
    assert np.all(np.diff(s.objective_) <= 1e-9 * s.objective_[0])
    # class_objectives_ are the SVM duals at the stored weights
    Y = signed_targets(y, 4)
    np.testing.assert_allclose(
        class_objectives(K, Y, a.kernel_weights_, C_SVM), a.class_objectives_, rtol=1e-8
    )


def test_weights_on_simplex_and_task_weights(fitted):
    s, a = fitted
    for est in (s, a):
        p = est.kernel_weights_
        assert p.shape == (8,) and np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-12)
        assert est.dual_coef_.shape == (4, 40) and est.intercept_.shape == (4,)
    assert a.task_weights_.sum() == pytest.approx(1.0) and np.all(a.task_weights_ >= 0)
    assert a.weight_path_.shape == (a.n_iter_, 8)
    assert a.task_counts_.sum() == a.n_iter_ - 1
    # γ̄ leans towards the class that is worst under the summed solution
    assert a.task_weights_[np.argmax(s.class_objectives_)] > 0.25
    # the informative kernels 0..3 carry most of the weight
    assert a.kernel_weights_[:4].sum() > 0.8 and s.kernel_weights_[:4].sum() > 0.8


def test_predictions_above_chance(fitted, problem):
    _, _, Kt, yt = problem
    for est in fitted:
        assert est.decision_function(Kt).shape == (40, 4)
        assert est.score(Kt, yt) > 0.8  # chance 0.25


def test_sa_is_reproducible_with_a_seed(problem):
    K, y, _, _ = problem
    a1 = MLMKLSA(kernels="precomputed", max_iter=30, random_state=3).fit(K, y)
    a2 = MLMKLSA(kernels="precomputed", max_iter=30, random_state=3).fit(K, y)
    np.testing.assert_array_equal(a1.kernel_weights_, a2.kernel_weights_)
    np.testing.assert_array_equal(a1.task_counts_, a2.task_counts_)


def test_identical_kernels_leave_the_weights_uniform(problem):
    """Every p-gradient then has zero spread: no automatic step is set and p stays at 1/P."""
    K, y, _, _ = problem
    K3 = np.stack([K[0]] * 3)
    a = MLMKLSA(kernels="precomputed", max_iter=20, random_state=0).fit(K3, y)
    np.testing.assert_allclose(a.kernel_weights_, 1 / 3, rtol=1e-12)
    assert np.isnan(a.eta_p_) and np.isfinite(a.eta_gamma_)


def test_minimax_lower_bound_single_task_is_the_mkl_dual_bound(problem):
    K, y, _, _ = problem
    yy = np.where(y == 0, 1.0, -1.0)
    v = fit_svc(combine(K, np.full(8, 1 / 8)), yy, 1.0).v
    lb, gamma = minimax_lower_bound(K, v[None])
    assert gamma == pytest.approx([1.0])
    assert lb == pytest.approx(np.abs(v).sum() - kernel_quadratics(K, v).max(), rel=1e-12)


def multilabel_problem(seed=0, n=60):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n, 3))
    Yind = (X > 0.2).astype(int)  # label l ⇔ feature l large; labels overlap freely
    Ks = np.stack([gram(X[:, [j]], X[:n, [j]], 1.0) for j in range(3)] + [gram(X, X[:n], 0.2)])
    return Ks[:, :n], Yind[:n], Ks[:, n:], Yind[n:]


@pytest.mark.parametrize("cls", [MLMKLSum, MLMKLSA])
def test_multilabel_indicator_targets(cls):
    K, Y, Kt, Yt = multilabel_problem()
    est = cls(kernels="precomputed", C=1.0, max_iter=100)
    if cls is MLMKLSA:
        est.set_params(random_state=0)
    est.fit(K, Y)
    assert est.multilabel_
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    assert est.decision_function(Kt).shape == (60, 3)
    pred = est.predict(Kt)
    assert pred.shape == (60, 3) and set(np.unique(pred)) <= {0, 1}
    assert np.all(np.mean(pred == Yt, axis=0) > 0.75)  # per-label accuracy; majority ≈ 0.6
    assert est.class_objectives_.shape == (3,)
    assert 0.0 <= est.score(Kt, Yt) <= 1.0  # subset accuracy


def test_column_vector_y_is_raveled_with_a_warning(problem):
    K, y, Kt, _ = problem
    with pytest.warns(DataConversionWarning):
        est = MLMKLSA(kernels="precomputed", max_iter=5, random_state=0).fit(K, y[:, None])
    assert not est.multilabel_ and est.predict(Kt).shape == (40,)


def test_binary_labels_give_one_task(problem):
    K, y, Kt, yt = problem
    yb = np.where(y == 0, "pos", "neg")
    est = MLMKLSA(kernels="precomputed", max_iter=50, random_state=0).fit(K, yb)
    assert est.dual_coef_.shape == (1, 40) and est.class_objectives_.shape == (1,)
    assert est.decision_function(Kt).shape == (40,)
    assert set(est.predict(Kt)) <= {"pos", "neg"}


@pytest.mark.parametrize(
    "y_bad, match",
    [
        (np.c_[np.ones(40), np.arange(40) % 2], "constant"),
        (np.c_[np.arange(40) % 3, np.arange(40) % 2], "indicator"),
        (np.zeros((40, 2, 2)), "1-D labels or a 2-D"),
        (np.c_[np.arange(30) % 2, np.arange(30) % 2], "different lengths"),
    ],
)
def test_bad_multilabel_targets(problem, y_bad, match):
    K = problem[0]
    with pytest.raises(ValueError, match=match):
        MLMKLSum(kernels="precomputed").fit(K, y_bad)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"C": 0.0}, "C must be"),
        ({"delta": 0.0}, "delta"),
        ({"eta_p": -1.0}, "eta_p"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_parameters(problem, params, match):
    K, y, _, _ = problem
    with pytest.raises(ValueError, match=match):
        MLMKLSA(kernels="precomputed", **params).fit(K, y)


def test_params_stored_verbatim_and_clonable():
    est = MLMKLSA()
    assert est.kernels == "simplemkl" and est.eta_p is None
    assert clone(MLMKLSum(C=3.0)).get_params()["C"] == 3.0


@pytest.mark.parametrize("cls", [MLMKLSum, MLMKLSA])
def test_feature_input_with_bsvm16_pool(cls):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 2))
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])  # three classes
    est = cls(kernels="bsvm16", max_iter=100).fit(X[:60], y[:60])
    assert est.kernel_weights_.shape == (16,) and len(est.kernel_names_) == 16
    assert est.n_features_in_ == 2
    assert est.score(X[60:], y[60:]) > 0.6  # chance ≈ 1/3
