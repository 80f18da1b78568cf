"""The Crammer–Singer multiclass SVM shared by M³K and OBSCURE (docs/baselines_math.md §(d)).

Conventions: ``n`` classes with codes ``0..n−1``, one weight vector per class and no intercept,
decision values ``f_c(x) = Σ_i β_ic k(x, x_i)``, the multiclass hinge
``ℓ_i = max(0, max_{c ≠ y_i} 1 + f_c(x_i) − f_{y_i}(x_i))``. The primal
``min ½ Σ_c ‖f_c‖²_K + C Σ_i s_i ℓ_i`` (``s_i``: sample weights) has the dual

    max_β  D(β) = Σ_i β_{i,y_i} − ½ Σ_c β_cᵀ K β_c
    s.t.   Σ_c β_ic = 0,   β_ic ≤ u_ic = C s_i [c = y_i]     (so −C s_i ≤ β_ic ≤ 0 for c ≠ y_i),

whose feasible set does not depend on ``K`` (MKL solvers warm-start every solve from the last β).
Per-kernel quadratic terms ``H_m = ½ Σ_c β_cᵀ K_m β_c`` are the negative gradient of the optimal
value ``J(μ) = max_β D(β; Σ_m μ_m K_m)`` (Danskin).

:func:`solve_cs_dual` is a greedy block-coordinate method: it picks the point with the largest
KKT violation and minimises ``−D`` exactly over that point's row ``β_i·`` (a Euclidean projection
onto ``{Σ_c b_c = 0, b ≤ u_i}``, :func:`project_capped_zero_sum`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines._base import MKLClassifierBase

__all__ = [
    "CSSolution",
    "CrammerSingerMKLBase",
    "box_upper",
    "class_codes",
    "cs_dual_objective",
    "cs_quadratics",
    "multiclass_hinge",
    "project_capped_zero_sum",
    "solve_cs_dual",
]


def class_codes(Y: np.ndarray) -> np.ndarray:
    """Class codes ``(N,)`` from the ±1 targets ``(C, N)`` built by the estimators' ``fit``.

    A binary problem arrives as one row (+1 = class 1); ``n ≥ 3`` classes as one row per class.
    """
    Y = np.asarray(Y)
    if Y.shape[0] == 1:
        return (Y[0] > 0).astype(np.intp)
    return np.argmax(Y, axis=0).astype(np.intp)


def box_upper(codes: np.ndarray, n_classes: int, C: float, sample_weight=None) -> np.ndarray:
    """Upper bounds ``u: (N, n)``, ``u_ic = C·s_i`` for ``c = y_i`` and 0 otherwise."""
    N = codes.shape[0]
    u = np.zeros((N, n_classes))
    s = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    u[np.arange(N), codes] = C * s
    return u


def project_capped_zero_sum(z: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``z: (n,)`` onto ``{b : Σ_c b_c = 0, b ≤ u}`` (``Σ_c u_c ≥ 0``).

    The solution is ``b_c = min(z_c − θ, u_c)`` with ``θ`` the root of the decreasing piecewise
    linear ``φ(θ) = Σ_c min(z_c − θ, u_c)``. Sort the classes by ``z_c − u_c``, decreasingly; if the
    first ``k`` are the capped ones, ``θ_k = (Σ_{j<k} u_j + Σ_{j≥k} z_j)/(n − k)``, and the capped
    set is the smallest ``k`` whose next class is free at ``θ_k`` (``z − u ≤ θ_k``): for smaller
    ``k`` the next class satisfies ``φ(z − u) < 0``, hence ``θ_k < z − u``. ``n`` is the number of
    classes, so this runs in plain Python.
    """
    zl, ul = z.tolist(), u.tolist()
    n = len(zl)
    free, capped, theta = sum(zl), 0.0, 0.0
    for k, c in enumerate(sorted(range(n), key=lambda j: ul[j] - zl[j])):
        theta = (capped + free) / (n - k)
        if zl[c] - ul[c] <= theta:
            break
        capped += ul[c]
        free -= zl[c]
    return np.minimum(z - theta, u)


def cs_dual_objective(Kmu: np.ndarray, beta: np.ndarray, codes: np.ndarray) -> float:
    """``D(β) = Σ_i β_{i,y_i} − ½ Σ_c β_cᵀ K β_c`` for ``β: (N, n)``."""
    N = codes.shape[0]
    return float(beta[np.arange(N), codes].sum() - 0.5 * np.sum(beta * (Kmu @ beta)))


def cs_quadratics(K: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``H_m = ½ Σ_c β_cᵀ K_m β_c`` for ``K: (P, N, N)`` and ``β: (N, n)`` → ``(P,)``."""
    P, N, _ = K.shape
    KB = (K.reshape(P * N, N) @ beta).reshape(P, N, -1)
    return 0.5 * np.einsum("pic,ic->p", KB, beta)


def multiclass_hinge(F: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``ℓ_i = max(0, max_{c ≠ y_i} 1 + F_ic − F_{i,y_i})`` for decision values ``F: (N, n)``."""
    N = codes.shape[0]
    margins = 1.0 + F - F[np.arange(N), codes][:, None]
    margins[np.arange(N), codes] = 0.0
    return margins.max(axis=1)


class CSSolution(NamedTuple):
    """A Crammer–Singer dual solution on one combined kernel.

    Attributes
    ----------
    beta : ndarray (N, n)
        Dual coefficients (``Σ_c β_ic = 0``, ``β ≤ u``).
    objective : float
        ``D(β)``.
    violation : float
        Largest KKT violation at stop (``≤ tol`` unless ``max_steps`` was hit).
    n_steps : int
        Block updates made.
    """

    beta: np.ndarray
    objective: float
    violation: float
    n_steps: int


def solve_cs_dual(
    Kmu: np.ndarray,
    codes: np.ndarray,
    upper: np.ndarray,
    tol: float = 1e-6,
    beta0: np.ndarray | None = None,
    max_steps: int | None = None,
) -> CSSolution:
    """Solve the Crammer–Singer dual on ``Kmu: (N, N)`` by greedy exact block-coordinate ascent.

    ``g = Kβ − onehot(y)`` is the gradient of ``−D``; at the optimum every class that can still
    rise (``β_ic < u_ic``) has the largest gradient of its row, so point i's KKT violation is
    ``max_c g_ic − min_{c: β_ic < u_ic} g_ic`` (−inf if none can rise). Each step takes the point
    ``i`` with the largest violation and sets its row to the exact maximiser of ``D`` with the
    other rows fixed, ``β_i· = Π(β_i· − g_i·/K_ii)`` (:func:`project_capped_zero_sum`); ``D`` never
    decreases. Stops when every violation is ``≤ tol`` (the decision values of the free classes of
    each point agree to ``tol``), or after ``max_steps`` block updates with a
    ``ConvergenceWarning``.

    Parameters
    ----------
    Kmu : ndarray (N, N)
        Combined training kernel (PSD).
    codes : ndarray (N,)
        Class codes.
    upper : ndarray (N, n)
        Box :func:`box_upper`.
    tol : float
        Largest KKT violation accepted.
    beta0 : ndarray (N, n), optional
        Feasible starting point (a previous solution); default 0.
    max_steps : int, optional
        Cap on block updates (default ``100·N + 10000``).

    Returns
    -------
    CSSolution
    """
    N, n = upper.shape
    # class-major copies (n, N): the per-step reductions run over the few classes
    B = np.zeros((n, N)) if beta0 is None else np.array(beta0, dtype=np.float64).T.copy()
    U = np.ascontiguousarray(upper.T)
    G = B @ Kmu
    G[codes, np.arange(N)] -= 1.0
    diag = np.diag(Kmu).copy()
    diag = np.maximum(diag, 1e-12 * max(diag.max(), 1e-300))  # a zero row: a linear block
    max_steps = 100 * N + 10000 if max_steps is None else int(max_steps)
    blocked = np.where(B < U, 0.0, np.inf)  # +inf where β_ic cannot rise
    steps = 0
    viol = G.max(axis=0) - (G + blocked).min(axis=0)
    i = int(np.argmax(viol))
    while viol[i] > tol and steps < max_steps:
        old = B[:, i]
        new = project_capped_zero_sum(old - G[:, i] / diag[i], U[:, i])
        G += (new - old)[:, None] * Kmu[i][None, :]
        B[:, i] = new
        blocked[:, i] = np.where(new < U[:, i], 0.0, np.inf)
        steps += 1
        viol = G.max(axis=0) - (G + blocked).min(axis=0)
        i = int(np.argmax(viol))
    beta = B.T.copy()
    worst = float(max(viol[i], 0.0))
    if worst > tol:
        warnings.warn(
            f"Crammer–Singer dual solver stopped after max_steps={max_steps} block updates "
            f"with a KKT violation of {worst:.3g} > tol={tol:g} (a point's free classes "
            "disagree by that much in decision value; near-duplicate training points make the "
            "block updates zigzag). The solution is that close to optimal: raise M3K's cs_tol "
            "above the violation to accept it without this warning",
            ConvergenceWarning,
            stacklevel=3,
        )
    return CSSolution(beta, cs_dual_objective(Kmu, beta, codes), worst, steps)


class CrammerSingerMKLBase(MKLClassifierBase):
    """Estimator shell of the Crammer–Singer MKL baselines (M³K, OBSCURE).

    ``_fit_kernels`` sets ``kernel_weights_ (P,)``, ``dual_coef_ (n_classes, N)`` (``β_cᵀ``) and
    ``intercept_`` (zeros: the Crammer–Singer machine has none). Decision values are
    ``f_c(x) = Σ_m μ_m Σ_i β_ic k_m(x, x_i)``, ``(M, n_classes)``; for two classes the single
    column ``f_1 − f_0`` (positive: ``classes_[1]``), as scikit-learn's binary convention asks.
    """

    def decision_function(self, X):
        """Decision values: ``(M,)`` (``f_1 − f_0``) for two classes, else ``(M, n_classes)``."""
        F = super().decision_function(X)
        return F[:, 1] - F[:, 0] if F.shape[1] == 2 else F
