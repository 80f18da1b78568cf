"""Fixed-weight MKL: the uniform average kernel and the best single kernel.

The solver machinery they share with the other SVM-based baselines is in :mod:`._solvers`.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedKFold

from bayesmkl.baselines._base import (
    CLASS_WEIGHT,
    KERNEL_NAMES,
    KERNELS,
    POSITIVE,
    MKLClassifierBase,
)
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._solvers import MKLFit, solve_at_weights, store_fit
from bayesmkl.baselines._svm import fit_svc
from bayesmkl.estimators._validation import NO_VALIDATION, Interval


@shared_doc
class AverageMKL(MKLClassifierBase):
    """Uniform kernel average ("AveKernel"): ``μ = 1/P`` and one C-SVC per one-vs-rest problem.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`); ``"precomputed"`` means
        ``fit(K: (P, N, N), y)`` and ``predict(K_test: (P, M, N))``.
    {{C}}
    {{svc_tol}}
    {{fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        ``1/P``.
    {{svm_attributes}}
    objective_ : ndarray (1,)
        Summed SVM dual objective.
    n_iter_ : int
        ``0`` (no weight updates; one SVM solve per problem).
    duality_gap_ : float
        ``0.0`` (nothing is optimised over the weights).
    kernel_names_ : list of str
    classes_ : ndarray
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "C": POSITIVE,
        "svc_tol": POSITIVE,
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, C=1.0, svc_tol=1e-6, class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.C = C
        self.svc_tol = svc_tol
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        C, svc_tol = float(self.C), float(self.svc_tol)
        P = K.shape[0]
        s = solve_at_weights(K, Y, np.full(P, 1.0 / P), C, svc_tol, sample_weight=sample_weight)
        store_fit(self, MKLFit(s, np.array([s.J]), 0, 0.0))


def _class_codes(Y: np.ndarray) -> np.ndarray:
    """Integer class codes ``(N,)`` from the ±1 one-vs-rest targets ``(C, N)``."""
    return (Y[0] > 0).astype(int) if Y.shape[0] == 1 else np.argmax(Y, axis=0)


def _ovr_predict_codes(
    Ktr: np.ndarray, Y: np.ndarray, Kte: np.ndarray, C: float, svc_tol: float, sw=None
) -> np.ndarray:
    """Fit one-vs-rest SVMs on ``Ktr: (n, n)``, return class codes for ``Kte: (m, n)``."""
    fits = (fit_svc(Ktr, y, C, svc_tol, sw) for y in Y)
    F = np.stack([Kte @ f.v + f.b for f in fits], axis=1)
    return (F[:, 0] > 0).astype(int) if F.shape[1] == 1 else np.argmax(F, axis=1)


@shared_doc
class BestSingleKernelSVM(MKLClassifierBase):
    """The single kernel with the best k-fold cross-validated accuracy on the training set.

    Each kernel is scored by stratified k-fold CV of the (one-vs-rest) C-SVC on the training
    kernel's sub-blocks; ties go to the lowest index. The chosen kernel is refitted on all training
    points. With sample weights, each fold's SVMs are trained with the weights of its training
    points and scored by the weighted accuracy of its held-out points; the score is the mean
    over folds (the folds themselves do not depend on the weights, so an integer weight is not
    the same as a repeated row here).

    Parameters
    ----------
    {{kernels}}
    {{C}}
    cv : int, default=5
        Number of stratified folds (≥ 2).
    {{svc_tol}}
    random_state : int or None, default=0
        Seed of the fold shuffling.
    {{fit_params}}

    Attributes
    ----------
    best_kernel_ : int
        Index of the chosen kernel.
    cv_scores_ : ndarray (P,)
        Mean CV accuracy per kernel.
    kernel_weights_ : ndarray (P,)
        One-hot vector of the chosen kernel.
    dual_coef_ : ndarray (C, N)
        Signed dual coefficients ``α_c ∘ y_c`` (``C = 1`` for binary problems).
    intercept_ : ndarray (C,)
    objective_ : ndarray (1,)
        Summed SVM dual objective of the refit.
    n_iter_ : int
        ``0`` (no weight updates).
    duality_gap_ : float
        ``nan`` (no weight optimisation problem is solved).
    kernel_names_ : list of str
    classes_ : ndarray
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "C": POSITIVE,
        "cv": [Interval("int", 2, None, closed="left")],
        "svc_tol": POSITIVE,
        "random_state": NO_VALIDATION,  # StratifiedKFold
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, C=1.0, cv=5, svc_tol=1e-6, random_state=0, class_weight=None,
        kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.C = C
        self.cv = cv
        self.svc_tol = svc_tol
        self.random_state = random_state
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        C, svc_tol, n_splits = float(self.C), float(self.svc_tol), int(self.cv)
        P = K.shape[0]
        codes = _class_codes(Y)
        folds = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=self.random_state)
        sw = np.ones(codes.size) if sample_weight is None else sample_weight
        scores = np.zeros(P)
        n_scored = 0
        for tr, te in folds.split(np.zeros(codes.size), codes):
            if not sw[te].sum() > 0:  # a fold whose held-out points all weigh 0 says nothing
                continue
            n_scored += 1
            sw_tr = None if sample_weight is None else sw[tr]
            for m in range(P):
                pred = _ovr_predict_codes(
                    K[m][np.ix_(tr, tr)], Y[:, tr], K[m][np.ix_(te, tr)], C, svc_tol, sw_tr
                )
                scores[m] += np.average(pred == codes[te], weights=sw[te])
        scores /= n_scored
        self.cv_scores_ = scores
        self.best_kernel_ = int(np.argmax(scores))
        mu = np.zeros(P)
        mu[self.best_kernel_] = 1.0
        s = solve_at_weights(K, Y, mu, C, svc_tol, sample_weight=sample_weight)
        store_fit(self, MKLFit(s, np.array([s.J]), 0, np.nan))
