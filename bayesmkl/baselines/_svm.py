"""The SVM sub-solver shared by every SVM-based baseline (scikit-learn's ``SVC``, precomputed).

Conventions (docs/baselines_math.md §(b)): labels are ±1; ``v = α ∘ y`` is the signed dual vector of
length N (zero off the support); the decision function is ``f(x) = Σ_i v_i k(x, x_i) + b``; the
C-SVC dual objective is ``Σ_i |v_i| − ½ vᵀ K v``; per-kernel quadratic terms are
``h_m = ½ vᵀ K_m v``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.svm import SVC


class SVCResult(NamedTuple):
    """One binary C-SVC solution on a combined kernel.

    Attributes
    ----------
    v : ndarray (N,)
        Signed dual coefficients α ∘ y.
    b : float
        Intercept.
    objective : float
        Dual objective ``Σ|v| − ½ vᵀ K v`` at the solution.
    """

    v: np.ndarray
    b: float
    objective: float


def combine(K: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``Σ_m μ_m K_m`` for ``K: (P, N, N)`` (or ``(P, M, N)``) and ``mu: (P,)``, one GEMV."""
    P = K.shape[0]
    return (np.asarray(mu, dtype=np.float64) @ K.reshape(P, -1)).reshape(K.shape[1:])


def fit_svc(
    Kmu: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    tol: float = 1e-6,
    sample_weight: np.ndarray | None = None,
) -> SVCResult:
    """Solve the C-SVC dual on the combined kernel ``Kmu: (N, N)`` for labels ``y_pm`` in {−1, +1}.

    ``tol`` is libsvm's stopping tolerance; MKL outer loops need a tight one (their gradients are
    computed from α).

    ``sample_weight: (N,)`` (non-negative) scales the box per point, ``0 ≤ α_i ≤ C·s_i`` (libsvm's
    instance weights); the objective ``Σ|v| − ½ vᵀKv`` and hence every MKL gradient formula are
    unchanged. Points with zero weight are removed before the solve (``v_i = 0``): scikit-learn's
    ``SVC`` drops them internally but then reports ``support_`` in the reduced numbering.
    """
    y_pm = np.asarray(y_pm)
    N = Kmu.shape[0]
    svc = SVC(kernel="precomputed", C=C, tol=tol, shrinking=True, cache_size=500)
    v = np.zeros(N)
    if sample_weight is None:
        svc.fit(Kmu, y_pm)
        # sklearn's dual_coef_ is y_i α_i with +1 meaning classes_[1]; classes_ = [-1, +1] here.
        v[svc.support_] = svc.dual_coef_[0]
    else:
        keep = np.flatnonzero(np.asarray(sample_weight) > 0)
        svc.fit(Kmu[np.ix_(keep, keep)], y_pm[keep], sample_weight=sample_weight[keep])
        v[keep[svc.support_]] = svc.dual_coef_[0]
    b = float(svc.intercept_[0])
    objective = float(np.abs(v).sum() - 0.5 * v @ Kmu @ v)
    return SVCResult(v=v, b=b, objective=objective)


def kernel_quadratics(K: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``h_m = ½ vᵀ K_m v`` for every kernel: ``K: (P, N, N)``, ``v: (N,)`` → ``(P,)``."""
    P, N, _ = K.shape
    Kv = (K.reshape(P * N, N) @ v).reshape(P, N)
    return 0.5 * Kv @ v
