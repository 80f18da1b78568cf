"""scikit-learn API compliance of ``BM3KLClassifier``.

``parametrize_with_checks`` runs scikit-learn's estimator checks with fast settings (5 warm-up
sweeps, 3 draws, the 16-kernel pool, the literal "paper" move, which compiles faster than
"stable" since it has no Gamma scale refresh). JAX compiles the sampler once per training-set
shape and configuration (~10-30 s each on 2 cores), and the checks use about a dozen shapes,
so this file is dominated by compilation; the persistent compilation cache makes reruns fast.

Expected failures (``EXPECTED_FAILED``):

``check_classifiers_train``
    It requires ``argmax decision_function == predict``. ``predict`` is, by design
    (docs/math.md A4a), the argmax of ``predict_proba``, the posterior mean of the per-draw
    normalised pseudo-likelihood, whereas ``decision_function`` is the posterior mean of the
    decision values (A4c). Both rules agree draw by draw (ψ is increasing) but their averages can
    disagree for points near a boundary (one point in 300 on the check's blobs). The check
    also compares ``predict_log_proba`` with ``np.log(predict_proba)``, which is −inf where the
    raw rule's probability underflows to 0; ``predict_log_proba`` is a log-sum-exp and stays
    finite there. It is marked non-strict because it passes when neither happens.
``check_decision_proba_consistency``
    Same reason: the ranking of ``decision_function`` need not equal the ranking of
    ``predict_proba[:, 1]`` (a mean of sigmoids is not a function of the mean argument).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayesmkl import BM3KLClassifier

# calibration=None: the calibrated default refits 3 folds, each of a new training-set shape, so
# it would triple this compile-bound suite; test_calibrated_default_checks runs a few checks on
# the default instead.
FAST = dict(
    num_warmup=5,
    num_samples=3,
    progress_bar=False,
    kernels="bsvm16",
    sampler="gibbs",  # exact, no step size (the literal "paper" move blows up in some chains)
    num_chains=1,
    calibration=None,
    random_state=0,
)

_MEAN_RULES = (
    "predict (argmax of the mean per-draw probability, docs/math.md A4a) and decision_function "
    "(mean decision value, A4c) agree per draw but not always on average"
)
EXPECTED_FAILED = {
    "check_classifiers_train": _MEAN_RULES,
    "check_decision_proba_consistency": _MEAN_RULES,
    "check_sample_weight_equivalence_on_dense_data": (
        "by design a weight is a power on the point's likelihood factor and the point keeps its "
        "own sample weight a_i, so an integer weight is not a repeated row and a zero weight "
        "keeps the point as a basis function (as in BM3KLMAP); see BM3KLClassifier.fit"
    ),
}


def _expected_failed(estimator):
    return EXPECTED_FAILED


@parametrize_with_checks(
    [BM3KLClassifier(**FAST)], expected_failed_checks=_expected_failed, xfail_strict=False
)
@pytest.mark.slow
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.slow
def test_calibrated_default_checks():
    """Selected checks on the calibrated default (cross-fitting inside ``fit``). Repeatability
    of calibrated fits is covered by test_estimator's precomputed-vs-features test."""
    from sklearn.utils.estimator_checks import (
        check_estimators_pickle,
        check_methods_subset_invariance,
    )

    est = BM3KLClassifier(**{**FAST, "calibration": "cv"})
    for check in (check_methods_subset_invariance, check_estimators_pickle):
        check("BM3KLClassifier", est)


@pytest.fixture(scope="module")
def xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.5).astype(int)
    return X, y


def test_grid_search_pipeline_cross_val(xy):
    X, y = xy
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), BM3KLClassifier(**FAST))
    scores = cross_val_score(pipe, X, y, cv=cv)
    assert scores.shape == (2,) and np.all((scores >= 0) & (scores <= 1))
    grid = GridSearchCV(BM3KLClassifier(**FAST), {"beta_a": [0.1, 1.0]}, cv=cv, refit=False)
    grid.fit(X, y)
    assert grid.best_params_["beta_a"] in (0.1, 1.0)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
