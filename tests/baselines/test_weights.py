"""sample_weight / class_weight of the baselines and the shared helper
(bayesmkl/estimators/_weights.py).

For a C-SVC a sample weight scales the point's box, ``0 ≤ α_i ≤ C·s_i``; the combined dual of a
row repeated k times is that of one row with ``C_i = kC``, and a zero weight forces ``α_i = 0``.
So an SVM-based MKL fit with integer weights must equal the unweighted fit on the repeated rows,
and zero weights must equal dropping the rows — both solve the *same* convex problem.

Tolerances: each pair of fits runs the same outer iterations on SVM solutions that agree to
libsvm's tolerance (``svc_tol = 1e-10``). The objective is pinned by the duality-gap stop
(both within ``tol·|J|`` of one optimum, so ``|J_a − J_b| ≤ 2·tol·|J|``); weights and decision
values (|f| ≈ 2–3) agree to ``WEIGHT_ATOL``, an order below the ``√tol`` distance that quadratic
growth of ``J`` alone would allow (measured: ≤ 1e-5 on these problems).
"""

import warnings

import numpy as np
import pytest
from oracles import problem
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score

from bayesmkl import KernelPool
from bayesmkl.baselines import (
    BEMKL,
    BM3KLMAP,
    MKMMC,
    MLMKLSA,
    SGMKL,
    AverageMKL,
    BestSingleKernelSVM,
    LpMKL,
    MLMKLSum,
    SimpleMKL,
    SoftMarginMKL,
)
from bayesmkl.estimators._weights import check_class_weight, effective_sample_weight
from bayesmkl.model.classification import Hyper

TOL = 1e-7
WEIGHT_ATOL = 3e-5
COMMON = dict(kernels="precomputed", svc_tol=1e-10)
ESTIMATORS = {
    "average": lambda: AverageMKL(**COMMON),
    "simplemkl": lambda: SimpleMKL(**COMMON, tol=TOL, max_iter=2000),
    "lpmkl": lambda: LpMKL(**COMMON, tol=TOL),
    "sm1": lambda: SoftMarginMKL(**COMMON, tol=TOL, theta=0.4, max_iter=2000),
    "sm2": lambda: SoftMarginMKL(**COMMON, tol=TOL, loss="square_hinge", theta=2.0),
    "sgmkl": lambda: SGMKL(**COMMON, tol=TOL, max_iter=2000),
    "mlmklsum": lambda: MLMKLSum(**COMMON, tol=TOL, max_iter=2000),
}
CASES = [(name, 2) for name in ESTIMATORS] + [(n, 3) for n in ("average", "simplemkl", "sm2")]


def _fit(make, K, y, **kw):
    with warnings.catch_warnings():
        # SimpleMKL may stop on "no descent" a little above tol=1e-7 (SVM noise); the pair of
        # fits is compared against each other, not against tol
        warnings.simplefilter("ignore", ConvergenceWarning)
        return make().fit(K, y, **kw)


def _assert_same_fit(a, b, Kt_a, Kt_b):
    J_a, J_b = a.objective_[-1], b.objective_[-1]
    assert abs(J_a - J_b) <= 2 * TOL * abs(J_a) + 1e-9
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=WEIGHT_ATOL)
    fa, fb = a.decision_function(Kt_a), b.decision_function(Kt_b)
    np.testing.assert_allclose(fa, fb, atol=WEIGHT_ATOL)
    np.testing.assert_array_equal(a.predict(Kt_a), b.predict(Kt_b))


@pytest.mark.parametrize("name, n_classes", CASES)
def test_integer_weights_equal_repeated_rows(name, n_classes):
    K, y, Kt, _ = problem(n_classes)
    sw = np.random.default_rng(1).integers(1, 4, size=y.size).astype(float)
    rep = np.repeat(np.arange(y.size), sw.astype(int))
    weighted = _fit(ESTIMATORS[name], K, y, sample_weight=sw)
    repeated = _fit(ESTIMATORS[name], K[:, rep][:, :, rep], y[rep])
    _assert_same_fit(weighted, repeated, Kt, Kt[:, :, rep])
    # and the weights matter: the unweighted fit is a different solution
    plain = _fit(ESTIMATORS[name], K, y)
    assert np.max(np.abs(plain.decision_function(Kt) - weighted.decision_function(Kt))) > 1e-2


@pytest.mark.parametrize("name, n_classes", CASES)
def test_zero_weights_equal_dropped_rows(name, n_classes):
    K, y, Kt, _ = problem(n_classes)
    rng = np.random.default_rng(2)
    sw = np.where(rng.random(y.size) < 0.3, 0.0, 1.0)
    keep = np.flatnonzero(sw)
    weighted = _fit(ESTIMATORS[name], K, y, sample_weight=sw)
    dropped = _fit(ESTIMATORS[name], K[:, keep][:, :, keep], y[keep])
    _assert_same_fit(weighted, dropped, Kt, Kt[:, :, keep])
    dual = np.atleast_2d(weighted.dual_coef_)
    assert np.all(dual[:, sw == 0] == 0)  # dropped points are never support vectors


def test_uniform_weights_scale_C():
    """Weights all equal to c ⇔ box C·c: exact for every SVM-based solver (checked on two)."""
    K, y, Kt, _ = problem(2)
    for make in (ESTIMATORS["simplemkl"], lambda: BestSingleKernelSVM(**COMMON, cv=3)):
        a = _fit(make, K, y, sample_weight=np.full(y.size, 2.5))
        b = make().set_params(C=2.5)
        b = _fit(lambda b=b: b, K, y)
        np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=WEIGHT_ATOL)
        np.testing.assert_allclose(a.decision_function(Kt), b.decision_function(Kt), atol=1e-4)
    assert np.array_equal(a.cv_scores_, b.cv_scores_)


def test_class_weight_equals_the_same_sample_weight():
    K, y, Kt, _ = problem(3)
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    a = LpMKL(**COMMON, tol=TOL, class_weight=cw).fit(K, y, sample_weight=np.full(y.size, 3.0))
    b = LpMKL(**COMMON, tol=TOL).fit(K, y, sample_weight=3.0 * np.array([cw[c] for c in y]))
    np.testing.assert_array_equal(a.kernel_weights_, b.kernel_weights_)
    np.testing.assert_array_equal(a.decision_function(Kt), b.decision_function(Kt))


def _imbalanced(rng, n0, n1):
    X0 = rng.normal(size=(n0, 2))
    X1 = rng.normal(size=(n1, 2)) + 2.5  # minority shifted along the diagonal
    return np.vstack([X0, X1]), np.r_[np.zeros(n0, int), np.ones(n1, int)]


def test_balanced_class_weight_rescues_a_4_vs_196_imbalance():
    """Unweighted, the SVM predicts the majority everywhere (balanced accuracy 0.5); with
    class_weight="balanced" the 4 minority points get weight 25 and the minority is found.

    Test set 2000 + 2000 points: the standard error of a balanced accuracy is at most
    √(¼/2000 + ¼/2000)/2 ≈ 0.008, so the 10-SE bar 0.58 is far above chance.
    """
    rng = np.random.default_rng(0)
    X, y = _imbalanced(rng, 196, 4)
    Xt, yt = _imbalanced(rng, 2000, 2000)
    se = np.sqrt(0.25 / 2000 + 0.25 / 2000) / 2
    plain = AverageMKL(kernels=KernelPool.bsvm16()).fit(X, y)
    balanced = AverageMKL(kernels=KernelPool.bsvm16(), class_weight="balanced").fit(X, y)
    ba_plain = balanced_accuracy_score(yt, plain.predict(Xt))
    ba_balanced = balanced_accuracy_score(yt, balanced.predict(Xt))
    assert ba_plain <= 0.5 + 3 * se
    assert ba_balanced >= 0.5 + 10 * se
    assert ba_balanced - ba_plain >= 10 * se


# ---------------------------------------------------------------------------------------------
# BM3KLMAP: weighted likelihood terms
# ---------------------------------------------------------------------------------------------


#: The paper's hyper-parameters, which these tests were written against (the old defaults).
MAP_PAPER = Hyper.paper()._asdict()


def _map_problem(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.stack([np.exp(-d2 / (2 * s * s)) for s in (0.5, 1.0, 3.0)]), y


def test_map_unit_weights_equal_the_unweighted_fit():
    K, y = _map_problem()
    a = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=50).fit(K, y)
    b = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=50)
    b.fit(K, y, sample_weight=np.ones(y.size))
    np.testing.assert_allclose(b.kernel_weights_, a.kernel_weights_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.a_, a.a_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(b.objective_, a.objective_, rtol=1e-10)


def test_map_zero_weight_makes_the_label_irrelevant():
    """With s_j = 0 point j has no likelihood term: flipping its label cannot change the fit
    (it would if the weights were ignored)."""
    K, y = _map_problem()
    sw = np.ones(y.size)
    sw[:5] = 0.0
    flipped = y.copy()
    flipped[:5] = 1 - flipped[:5]
    a = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=60).fit(K, y, sample_weight=sw)
    b = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=60).fit(K, flipped, sample_weight=sw)
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, rtol=1e-10)
    np.testing.assert_allclose(a.decision_function(K), b.decision_function(K), atol=1e-9)
    c = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=60).fit(K, flipped)
    assert np.max(np.abs(c.decision_function(K) - a.decision_function(K))) > 1e-2


def test_map_weighted_objective_is_monotone():
    K, y = _map_problem(seed=3)
    sw = np.random.default_rng(0).uniform(0.0, 3.0, size=y.size)
    m = BM3KLMAP(kernels="precomputed", **MAP_PAPER, max_iter=80, tol=1e-12)
    m.fit(K, y, sample_weight=sw)
    obj = np.asarray(m.objective_)
    assert len(obj) > 3
    assert np.diff(obj).min() >= -1e-9 * np.abs(obj).max()


# ---------------------------------------------------------------------------------------------
# refusals and validation
# ---------------------------------------------------------------------------------------------


def test_bemkl_and_mkmmc_refuse_weights():
    K, y, _, _ = problem(2)
    with pytest.raises(NotImplementedError, match="BEMKL does not support sample_weight"):
        BEMKL(kernels="precomputed", n_iter=2).fit(K, y, sample_weight=np.ones(y.size))
    with pytest.raises(NotImplementedError, match="MKMMC does not support sample_weight"):
        MKMMC(kernels="precomputed").fit(K, y, sample_weight=np.ones(y.size))
    BEMKL(kernels="precomputed", n_iter=2).fit(K, y)  # no weights: unchanged


def test_multilabel_sample_weight_and_class_weight():
    K, y, Kt, _ = problem(3)
    Y = np.stack([y == 0, y == 2], axis=1).astype(int)
    sw = np.random.default_rng(3).integers(1, 3, size=y.size).astype(float)
    rep = np.repeat(np.arange(y.size), sw.astype(int))
    a = _fit(ESTIMATORS["mlmklsum"], K, Y, sample_weight=sw)
    b = _fit(ESTIMATORS["mlmklsum"], K[:, rep][:, :, rep], Y[rep])
    _assert_same_fit(a, b, Kt, Kt[:, :, rep])
    with pytest.raises(NotImplementedError, match="multi-label"):
        MLMKLSA(kernels="precomputed", class_weight="balanced").fit(K, Y)


@pytest.mark.parametrize(
    "sample_weight, class_weight, match",
    [
        (-np.ones(6), None, "Negative values"),
        (np.r_[1.0, np.nan, 1, 1, 1, 1], None, "NaN"),
        (np.r_[1.0, np.inf, 1, 1, 1, 1], None, "infinity"),
        (np.ones(5), None, r"shape"),
        (None, "balance", "class_weight must be None, 'balanced' or a dict"),
        (None, ["a"], "class_weight must be"),
        (None, {"a": 1.0}, r"no weight for the classes \['b'\]; give"),
        (None, {"a": 1.0, 1: 2.0}, r"\['b'\] \(its keys \[1\] are not classes of y\)"),
        (None, {"a": 1.0, "b": -2.0}, "finite and >= 0"),
        (np.r_[0.0, 0, 1, 1, 1, 1], None, r"classes \['a'\] have zero total sample weight"),
        (None, {"a": 0.0, "b": 1.0}, "zero total sample weight"),
        (np.zeros(6), None, "zero"),
    ],
)
def test_effective_sample_weight_rejects(sample_weight, class_weight, match):
    y = np.array(["a", "a", "b", "b", "b", "b"])
    with pytest.raises(ValueError, match=match):
        effective_sample_weight(y, sample_weight, class_weight)


def test_effective_sample_weight_values():
    y = np.array([3, 3, 7, 7, 7, 7])
    assert effective_sample_weight(y) is None
    np.testing.assert_array_equal(effective_sample_weight(y, 2.0), np.full(6, 2.0))
    sw = np.arange(1.0, 7.0)
    # "balanced": N / (n_classes · count) from unweighted counts, times sample_weight
    np.testing.assert_allclose(
        effective_sample_weight(y, sw, "balanced"), sw * np.r_[1.5, 1.5, 0.75, 0.75, 0.75, 0.75]
    )
    np.testing.assert_array_equal(
        effective_sample_weight(y, sw, {3: 2.0, 7: 0.5}), sw * np.r_[2, 2, 0.5, 0.5, 0.5, 0.5]
    )
    check_class_weight(None)
    check_class_weight("balanced")
    check_class_weight({1: 2.0})
