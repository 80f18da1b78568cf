"""Model comparison by K-fold cross-validated ELPD: kernel pools, priors or any two fits.

PSIS-LOO (``arviz.loo``, :meth:`BM3KLClassifier.loo <bayesmkl.BM3KLClassifier.loo>`) is
unreliable for BM3KL: the model has a sample weight per training point, so the posterior moves
a lot when one point is left out and most Pareto k̂ exceed 0.7. :func:`compare_kfold` refits
instead: each model once on all the data (for the effective number of parameters) and once per
fold, scores every training point by its log predictive density under the fit that held it out,
and hands the results to ``arviz.compare``. It works with any calibration setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, StratifiedKFold

from bayesmkl.posterior.loo import kfold_elpd

__all__ = ["compare_kfold", "kfold_elpd_of"]


def _rows(X, idx, cols=None, precomputed: bool = False, landmarks: bool = False):
    """Rows ``idx`` of ``X`` (a DataFrame, an array, or a precomputed ``(P, N, N)`` stack whose
    columns are restricted to ``cols``, the training points; a landmark block ``(P, N, M)``
    (``landmarks``, docs/math.md §16) keeps its columns, the landmarks)."""
    if precomputed:
        K = np.asarray(X)
        if landmarks:
            return K[:, idx]
        return K[:, idx][:, :, idx if cols is None else cols]
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    return np.asarray(X)[idx]


def kfold_elpd_of(model, X, y, *, n_folds: int = 5, random_state=0):
    """K-fold ELPD of one unfitted estimator on ``(X, y)``: ``n_folds + 1`` fits.

    Parameters
    ----------
    model : BM3KLClassifier or BM3KLRegressor
        The estimator to assess (cloned; it is not fitted in place).
    X : array (N, d) or DataFrame, or array (P, N, N) with ``kernels="precomputed"``
    y : array (N,)
    n_folds : int, default 5
        Folds (stratified by class for a classifier, shuffled for a regressor).
    random_state : int, default 0
        Seed of the fold assignment; the same seed gives every model the same folds.

    Returns
    -------
    arviz_stats.ELPDDataLOOKFold
        ``elpd_i`` is the log predictive density of point i under the fit without its fold;
        ``p_kfold_i`` uses the log-likelihood of the fit on all the data.
    """
    y = np.asarray(y)
    classifier = is_classifier(model)
    precomputed = getattr(model, "kernels", None) == "precomputed"
    m = getattr(model, "n_landmarks", None)  # "auto" with precomputed kernels: exact
    rows = partial(_rows, precomputed=precomputed, landmarks=m is not None and m != "auto")
    n = y.shape[0]
    if classifier:
        splitter = StratifiedKFold(n_folds, shuffle=True, random_state=random_state)
    else:
        splitter = KFold(n_folds, shuffle=True, random_state=random_state)
    full = clone(model).fit(X, y)
    oof = np.empty(n)
    for train, test in splitter.split(np.zeros((n, 1)), y):
        fold = clone(model).fit(rows(X, train), y[train])
        X_test = rows(X, test, train)
        if classifier:
            col = np.searchsorted(fold.classes_, y[test])
            col = np.minimum(col, len(fold.classes_) - 1)
            if not np.array_equal(fold.classes_[col], y[test]):
                raise ValueError(
                    "a fold's training rows lack a class of its held-out rows: use fewer folds "
                    f"(n_folds={n_folds}) or more rows of the rarest class"
                )
            oof[test] = fold.predict_log_proba(X_test)[np.arange(len(test)), col]
        else:
            oof[test] = fold.log_predictive_density(X_test, y[test])
    return kfold_elpd(oof, full.log_likelihood_, n_folds)


def compare_kfold(models: Mapping, X, y, *, n_folds: int = 5, random_state=0):
    """Compare unfitted estimators by K-fold cross-validated ELPD (``arviz.compare``).

    Use it to choose between kernel pools, priors or run settings when PSIS-LOO warns of large
    Pareto k̂. Every model gets the same folds.

    Parameters
    ----------
    models : mapping of str to estimator
        Named, unfitted ``BM3KLClassifier`` or ``BM3KLRegressor`` instances (all of one kind).
    X, y, n_folds, random_state
        As for :func:`kfold_elpd_of`.

    Returns
    -------
    pandas.DataFrame
        ``arviz.compare``'s table: ``elpd``, its standard error, the difference to the best
        model and that difference's standard error, ranked best first.

    Examples
    --------
    >>> from bayesmkl import BM3KLClassifier, KernelPool, compare_kfold
    >>> table = compare_kfold(  # doctest: +SKIP
    ...     {"bsvm16": BM3KLClassifier(), "gauss": BM3KLClassifier(KernelPool.gaussian())},
    ...     X, y, n_folds=5)
    """
    import arviz as az

    if len(models) < 2:
        raise ValueError(f"compare_kfold needs at least two models; got {len(models)}")
    kinds = {is_classifier(m) for m in models.values()}
    if len(kinds) > 1:
        raise ValueError("compare_kfold compares classifiers with classifiers, or regressors")
    elpd = {
        name: kfold_elpd_of(m, X, y, n_folds=n_folds, random_state=random_state)
        for name, m in models.items()
    }
    return az.compare(elpd)
