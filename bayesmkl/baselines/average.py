"""Fixed-weight MKL: the uniform average kernel and the best single kernel.

This module also holds what every SVM-based MKL solver of the package shares: the one-vs-rest
SVM solution at given weights (:func:`solve_at_weights`, with the summed objective and per-kernel
quadratic terms), the solver result (:class:`MKLFit`), how it is stored on an estimator, and the
hyper-parameter checks.

Conventions: ``K: (P, N, N)`` training kernels, ``Y: (C, N)`` ±1 targets (one row per
one-vs-rest problem, ``C = 1`` for binary problems), ``μ: (P,)`` kernel weights shared by all rows.
The MKL objective at ``μ`` is the sum of the ``C`` binary C-SVC duals,
``J(μ) = Σ_c [1ᵀα_c − Σ_m μ_m h_{c,m}]`` with ``h_{c,m} = ½ v_cᵀ K_m v_c``, ``v_c = α_c ∘ y_c``;
its gradient is ``∂J/∂μ_m = −H_m``, ``H_m = Σ_c h_{c,m}`` (Danskin).
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
from sklearn.model_selection import StratifiedKFold

from bayesmkl.baselines._base import MKLClassifierBase
from bayesmkl.baselines._svm import combine, fit_svc, kernel_quadratics

# ---------------------------------------------------------------------------------------------
# shared solver plumbing
# ---------------------------------------------------------------------------------------------


class WeightedSVMs(NamedTuple):
    """The ``C`` one-vs-rest C-SVC solutions on the combined kernel ``Σ_m μ_m K_m``.

    Attributes
    ----------
    mu : ndarray (P,)
        Kernel weights.
    V : ndarray (C, N)
        Signed dual coefficients ``α_c ∘ y_c``.
    b : ndarray (C,)
        Intercepts.
    J : float
        Summed dual objective ``Σ_c [Σ|v_c| − ½ v_cᵀ K(μ) v_c]`` (= ``Σ_c 1ᵀα_c − μᵀH``).
    H : ndarray (P,)
        ``H_m = Σ_c ½ v_cᵀ K_m v_c``; ``−H`` is the gradient of ``J`` at ``μ``.
    """

    mu: np.ndarray
    V: np.ndarray
    b: np.ndarray
    J: float
    H: np.ndarray


def solve_at_weights(
    K: np.ndarray,
    Y: np.ndarray,
    mu: np.ndarray,
    C: float,
    svc_tol: float,
    *,
    gradient: bool = True,
    sample_weight: np.ndarray | None = None,
) -> WeightedSVMs:
    """Solve every one-vs-rest C-SVC on ``K(μ)`` and collect objective and gradient terms.

    Parameters
    ----------
    K : ndarray (P, N, N)
        Training kernels.
    Y : ndarray (C, N)
        ±1 targets.
    mu : ndarray (P,)
        Kernel weights (any non-negative vector; no normalisation is applied).
    C : float
        SVM box constraint.
    svc_tol : float
        libsvm stopping tolerance.
    gradient : bool, default True
        Compute ``H`` (one pass over all P kernels); ``False`` leaves ``H = None`` for searches
        that only compare objectives (see :func:`with_gradient`).
    sample_weight : ndarray (N,), optional
        Per-point weights scaling the box, ``0 ≤ α_ci ≤ C·s_i`` (see :func:`._svm.fit_svc`).

    Returns
    -------
    WeightedSVMs
    """
    mu = np.asarray(mu, dtype=np.float64)
    nz = np.flatnonzero(mu)
    # sparse weights (L1-type solvers): combine only the active kernels
    Kmu = combine(K[nz], mu[nz]) if 2 * nz.size < mu.size else combine(K, mu)
    fits = [fit_svc(Kmu, y, C, svc_tol, sample_weight) for y in Y]
    V = np.stack([f.v for f in fits])
    return WeightedSVMs(
        mu=mu,
        V=V,
        b=np.array([f.b for f in fits]),
        J=float(sum(f.objective for f in fits)),
        H=quadratic_terms(K, V) if gradient else None,
    )


def quadratic_terms(K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``H_m = Σ_c ½ v_cᵀ K_m v_c`` for ``K: (P, N, N)`` and ``V: (C, N)`` → ``(P,)``."""
    return np.sum([kernel_quadratics(K, v) for v in V], axis=0)


def with_gradient(K: np.ndarray, s: WeightedSVMs) -> WeightedSVMs:
    """``s`` with ``H`` filled in if it was solved with ``gradient=False``."""
    return s if s.H is not None else s._replace(H=quadratic_terms(K, s.V))


class MKLFit(NamedTuple):
    """Outcome of an MKL solver.

    Attributes
    ----------
    state : WeightedSVMs
        The SVM solutions at the final weights (the classifier that is kept).
    objectives : ndarray (n_iter + 1,)
        Objective after each weight update, the initial one first.
    n_iter : int
        Number of weight updates.
    duality_gap : float
        Relative duality gap ``(primal − dual)/|primal|`` at the final weights (NaN where not
        defined).
    """

    state: WeightedSVMs
    objectives: np.ndarray
    n_iter: int
    duality_gap: float


def relative_gap(gap: float, objective: float) -> float:
    """``gap / |objective|`` (``gap`` itself when the objective is 0)."""
    return float(gap / abs(objective)) if objective != 0 else float(gap)


def store_fit(est: MKLClassifierBase, fit: MKLFit) -> None:
    """Copy a solver result onto the estimator's fitted attributes.

    Sets ``kernel_weights_`` (the weights the kept SVMs were trained with), ``dual_coef_``,
    ``intercept_``, ``objective_``, ``n_iter_`` and ``duality_gap_``.
    """
    s = fit.state
    est.kernel_weights_ = np.asarray(s.mu, dtype=np.float64).copy()
    est.dual_coef_ = s.V
    est.intercept_ = s.b
    est.objective_ = np.asarray(fit.objectives, dtype=np.float64)
    est.n_iter_ = int(fit.n_iter)
    est.duality_gap_ = float(fit.duality_gap)


def check_positive(name: str, value, *, allow_inf: bool = False) -> float:
    """Return ``float(value)`` if it is a real number ``> 0`` (finite unless ``allow_inf``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = value > 0 and (np.isfinite(value) or (allow_inf and value == np.inf))
    if not ok:
        kind = "a positive number" + (" (inf allowed)" if allow_inf else "")
        raise ValueError(f"{name} must be {kind}; got {value!r}")
    return value


def check_int(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` if it is an integer ``≥ minimum``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------------------------


class AverageMKL(MKLClassifierBase):
    """Uniform kernel average ("AveKernel"): ``μ = 1/P`` and one C-SVC per one-vs-rest problem.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`); ``"precomputed"`` means
        ``fit(K: (P, N, N), y)`` and ``predict(K_test: (P, M, N))``.
    C : float, default=1.0
        SVM box constraint.
    svc_tol : float, default=1e-6
        libsvm stopping tolerance.
    class_weight : None, "balanced" or dict, default=None
        Class weights, multiplied into ``fit``'s ``sample_weight`` (scikit-learn semantics;
        ``"balanced"``: ``N / (n_classes · count(class))``); each scales the points' ``C``.
    kernel_names : sequence of str, optional
        Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
        with a pool, which names its kernels itself.

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        ``1/P``.
    dual_coef_ : ndarray (C, N)
        Signed dual coefficients ``α_c ∘ y_c`` (``C = 1`` for binary problems).
    intercept_ : ndarray (C,)
    objective_ : ndarray (1,)
        Summed SVM dual objective.
    n_iter_ : int
        ``0`` (no weight updates; one SVM solve per problem).
    duality_gap_ : float
        ``0.0`` (nothing is optimised over the weights).
    kernel_names_ : list of str
    classes_ : ndarray
    """

    def __init__(
        self, kernels="simplemkl", C=1.0, svc_tol=1e-6, class_weight=None, kernel_names=None
    ):
        self.kernels = kernels
        self.C = C
        self.svc_tol = svc_tol
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        C = check_positive("C", self.C)
        svc_tol = check_positive("svc_tol", self.svc_tol)
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
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`).
    C : float, default=1.0
        SVM box constraint.
    cv : int, default=5
        Number of stratified folds (≥ 2).
    svc_tol : float, default=1e-6
        libsvm stopping tolerance.
    random_state : int or None, default=0
        Seed of the fold shuffling.
    class_weight : None, "balanced" or dict, default=None
        Class weights, multiplied into ``fit``'s ``sample_weight`` (scikit-learn semantics;
        ``"balanced"``: ``N / (n_classes · count(class))``); each scales the points' ``C``.
    kernel_names : sequence of str, optional
        Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
        with a pool, which names its kernels itself.

    Attributes
    ----------
    best_kernel_ : int
        Index of the chosen kernel.
    cv_scores_ : ndarray (P,)
        Mean CV accuracy per kernel.
    kernel_weights_ : ndarray (P,)
        One-hot vector of the chosen kernel.
    dual_coef_ : ndarray (C, N)
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

    def __init__(
        self,
        kernels="simplemkl",
        C=1.0,
        cv=5,
        svc_tol=1e-6,
        random_state=0,
        class_weight=None,
        kernel_names=None,
    ):
        self.kernels = kernels
        self.C = C
        self.cv = cv
        self.svc_tol = svc_tol
        self.random_state = random_state
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        C = check_positive("C", self.C)
        svc_tol = check_positive("svc_tol", self.svc_tol)
        n_splits = check_int("cv", self.cv, minimum=2)
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
