"""Lp-norm MKL (Kloft, Brefeld, Sonnenburg & Zien, JMLR 2011) with the analytic weight update.

Problem: ``min_{μ ≥ 0, ‖μ‖_p ≤ 1} J(μ)``, ``J(μ) = Σ_c max_{α_c} [1ᵀα_c − Σ_m μ_m h_{c,m}(α_c)]``
(C-SVC duals, one per one-vs-rest problem, weights shared). Its dual is
``max_α Σ_c 1ᵀα_c − ‖H(α)‖_q`` with ``1/p + 1/q = 1``.

This module also holds :func:`alternating_mkl`, the block-coordinate scheme shared by every
analytic-update MKL of the package (Lp-MKL here, SM1MKL in :mod:`.softmargin`, SGMKL in
:mod:`.sgmkl`): alternately solve the SVMs at ``μ`` and replace ``μ`` by
``argmin_{μ ∈ set} Σ_m a_m/μ_m`` with ``a_m = ½‖w_m‖² = μ_m² H_m``. It is exact block
minimisation of the jointly convex primal ``½Σ_m ‖w_m‖²/μ_m + C·loss``, so ``J`` never increases.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bayesmkl.baselines._base import MKLClassifierBase
from bayesmkl.baselines._budget import Budget, check_max_time
from bayesmkl.baselines._simplex import lp_min_ratio, lp_support
from bayesmkl.baselines.average import (
    MKLFit,
    check_int,
    check_positive,
    relative_gap,
    solve_at_weights,
    store_fit,
)


def alternating_mkl(
    K: np.ndarray,
    Y: np.ndarray,
    *,
    C: float,
    mu0: np.ndarray,
    mu_step: Callable[[np.ndarray], np.ndarray],
    support: Callable[[np.ndarray], float],
    tol: float,
    max_iter: int,
    svc_tol: float,
    criterion: str = "gap",
    name: str = "MKL",
    max_time: float | None = None,
    sample_weight: np.ndarray | None = None,
) -> MKLFit:
    """Alternate SVM solves and the analytic weight step until the stopping rule holds.

    Parameters
    ----------
    K : ndarray (P, N, N)
        Training kernels.
    Y : ndarray (C, N)
        ±1 targets.
    C : float
        SVM box constraint.
    mu0 : ndarray (P,)
        Initial weights (a point of the weight set).
    mu_step : callable
        ``a: (P,) → μ: (P,)``, the minimiser of ``Σ a_m/μ_m`` over the weight set.
    support : callable
        ``H: (P,) → max_{μ ∈ set} μᵀH``; the duality gap is ``support(H) − μᵀH``.
    tol : float
        Stopping tolerance.
    max_iter : int
        Maximal number of weight updates.
    svc_tol : float
        libsvm tolerance.
    criterion : {"gap", "objective"}
        ``"gap"``: stop when the relative duality gap is ``≤ tol``; ``"objective"``: stop when
        the relative change of ``J`` over one update is ``≤ tol``.
    name : str
        Used in the convergence warning.
    max_time : float, optional
        Wall-clock budget in seconds (checked between weight updates); hitting it or
        ``max_iter`` warns with :class:`~sklearn.exceptions.ConvergenceWarning`.
    sample_weight : ndarray (N,), optional
        Per-point box scaling ``0 ≤ α_i ≤ C·s_i`` (see :func:`.average.solve_at_weights`).

    Returns
    -------
    MKLFit
    """
    budget = Budget(name, max_iter, max_time, unit="weight updates")
    s = solve_at_weights(K, Y, mu0, C, svc_tol, sample_weight=sample_weight)
    history = [s.J]

    def gap_of(state):
        return relative_gap(support(state.H) - state.mu @ state.H, state.J)

    n_iter = 0
    converged = criterion == "gap" and gap_of(s) <= tol
    while not converged and not budget.exhausted(n_iter):
        new = solve_at_weights(
            K, Y, mu_step(s.mu**2 * s.H), C, svc_tol, sample_weight=sample_weight
        )
        n_iter += 1
        history.append(new.J)
        if criterion == "gap":
            s = new
            converged = gap_of(s) <= tol
        else:
            converged = abs(new.J - s.J) <= tol * abs(new.J)
            s = new
    if not converged:
        budget.warn(n_iter, "duality gap" if criterion == "gap" else "objective")
    return MKLFit(s, np.array(history), n_iter, gap_of(s))


def check_p(p) -> float:
    """Return ``float(p)`` if ``p ≥ 1`` (``np.inf`` allowed), else raise ``ValueError``."""
    try:
        ok = not isinstance(p, bool) and float(p) >= 1.0  # NaN compares False
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"p must be a number >= 1 (np.inf allowed); got {p!r}")
    return float(p)


def solve_lp_mkl(
    K: np.ndarray,
    Y: np.ndarray,
    *,
    p: float,
    C: float,
    tol: float,
    max_iter: int,
    svc_tol: float,
    name: str = "LpMKL",
    max_time: float | None = None,
    sample_weight: np.ndarray | None = None,
) -> MKLFit:
    """Lp-MKL by Kloft's analytic update, from the uniform point ``P^{-1/p}`` of the Lp sphere.

    ``p = inf`` is solved in one step (``μ = 1``). Stops on the relative objective change.

    Parameters
    ----------
    K : ndarray (P, N, N)
    Y : ndarray (C, N)
    p : float
        ``p ≥ 1`` or ``np.inf``.
    C, tol, max_iter, svc_tol, max_time
        As in :func:`alternating_mkl`.
    name : str
        Used in the convergence warning.
    sample_weight : ndarray (N,), optional
        Per-point box scaling ``0 ≤ α_i ≤ C·s_i`` (see :func:`.average.solve_at_weights`).

    Returns
    -------
    MKLFit
        ``duality_gap`` is the relative gap ``(‖H‖_q − μᵀH)/J`` at the final weights.
    """
    P = K.shape[0]
    if np.isinf(p):
        s = solve_at_weights(K, Y, np.ones(P), C, svc_tol, sample_weight=sample_weight)
        return MKLFit(s, np.array([s.J]), 0, relative_gap(lp_support(s.H, p) - s.mu @ s.H, s.J))
    return alternating_mkl(
        K,
        Y,
        C=C,
        mu0=np.full(P, P ** (-1.0 / p)),
        mu_step=lambda a: lp_min_ratio(a, p),
        support=lambda H: lp_support(H, p),
        tol=tol,
        max_iter=max_iter,
        svc_tol=svc_tol,
        criterion="objective",
        name=name,
        max_time=max_time,
        sample_weight=sample_weight,
    )


class LpMKL(MKLClassifierBase):
    """Lp-norm MKL, ``‖μ‖_p ≤ 1``, by Kloft's analytic update (p = 1 … ∞).

    Alternates the one-vs-rest C-SVC solutions at ``μ`` and
    ``μ_m = ‖w_m‖^{2/(p+1)} / (Σ_k ‖w_k‖^{2p/(p+1)})^{1/p}``, ``‖w_m‖² = μ_m² Σ_c v_cᵀK_m v_c``,
    starting from ``μ = P^{-1/p}``; stops when the relative change of the objective is ``≤ tol``.
    ``p = 1`` is the group-lasso / SimpleMKL analytic update (same optimum as :class:`SimpleMKL`),
    ``p = 2`` is L2-MKL (Cortes et al. 2009), ``p = np.inf`` is ``μ = 1`` (uniform; one SVM).

    Weights are reported as trained: ``kernel_weights_`` lies on the unit Lp sphere (not on the
    simplex; ``p = inf`` gives all ones, i.e. the kernel SUM, which with box constraint ``C`` has
    the decision function of :class:`AverageMKL` with ``C·P``). ``normalized_weights_`` is
    ``μ/Σμ`` for comparison with simplex methods.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`).
    p : float, default=2.0
        Norm, ``p ≥ 1`` or ``np.inf``.
    C : float, default=1.0
        SVM box constraint.
    tol : float, default=1e-5
        Relative objective change at which to stop.
    max_iter : int, default=1000
        Maximal number of weight updates.
    svc_tol : float, default=1e-6
        libsvm stopping tolerance.
    max_time : float or None, default=None
        Wall-clock budget in seconds; stopping on it (or on ``max_iter``) keeps the last
        weights and issues a ``ConvergenceWarning`` that names the limit.
    class_weight : None, "balanced" or dict, default=None
        Class weights, multiplied into ``fit``'s ``sample_weight`` (scikit-learn semantics;
        ``"balanced"``: ``N / (n_classes · count(class))``); each scales the points' ``C``.
    kernel_names : sequence of str, optional
        Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
        with a pool, which names its kernels itself.

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Weights on the unit Lp sphere.
    normalized_weights_ : ndarray (P,)
        ``kernel_weights_ / kernel_weights_.sum()``.
    dual_coef_ : ndarray (C, N)
    intercept_ : ndarray (C,)
    objective_ : ndarray (n_iter_ + 1,)
        ``J(μ)`` after each update (non-increasing up to the SVM tolerance).
    n_iter_ : int
    duality_gap_ : float
        Relative duality gap ``(‖H‖_q − μᵀH) / J`` at the final weights.
    kernel_names_ : list of str
    classes_ : ndarray
    """

    def __init__(
        self,
        kernels="simplemkl",
        p=2.0,
        C=1.0,
        tol=1e-5,
        max_iter=1000,
        svc_tol=1e-6,
        max_time=None,
        class_weight=None,
        kernel_names=None,
    ):
        self.kernels = kernels
        self.p = p
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.svc_tol = svc_tol
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        fit = solve_lp_mkl(
            K,
            Y,
            p=check_p(self.p),
            C=check_positive("C", self.C),
            tol=check_positive("tol", self.tol),
            max_iter=check_int("max_iter", self.max_iter),
            svc_tol=check_positive("svc_tol", self.svc_tol),
            max_time=check_max_time(self.max_time),
            sample_weight=sample_weight,
        )
        store_fit(self, fit)
        self.normalized_weights_ = self.kernel_weights_ / self.kernel_weights_.sum()


__all__ = ["LpMKL", "alternating_mkl", "check_p", "solve_lp_mkl"]
