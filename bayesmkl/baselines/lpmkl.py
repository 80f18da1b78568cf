"""Lp-norm MKL (Kloft, Brefeld, Sonnenburg & Zien, JMLR 2011) with the analytic weight update.

Problem: ``min_{μ ≥ 0, ‖μ‖_p ≤ 1} J(μ)``, ``J(μ) = Σ_c max_{α_c} [1ᵀα_c − Σ_m μ_m h_{c,m}(α_c)]``
(C-SVC duals, one per one-vs-rest problem, weights shared). Its dual is
``max_α Σ_c 1ᵀα_c − ‖H(α)‖_q`` with ``1/p + 1/q = 1``. Solved by
:func:`._solvers.alternating_mkl` with Kloft's closed-form weight step.
"""

from __future__ import annotations

import numpy as np

from bayesmkl.baselines._base import KERNELS, POSITIVE
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex import lp_min_ratio, lp_support
from bayesmkl.baselines._solvers import (
    SVM_OPTIONS,
    IterativeMKLClassifier,
    MKLFit,
    SolverOptions,
    alternating_mkl,
    relative_gap,
    solve_at_weights,
)
from bayesmkl.estimators._validation import Interval


def solve_lp_mkl(
    K: np.ndarray, Y: np.ndarray, opts: SolverOptions, *, p: float, name: str = "LpMKL"
) -> MKLFit:
    """Lp-MKL by Kloft's analytic update, from the uniform point ``P^{-1/p}`` of the Lp sphere.

    ``p = inf`` is solved in one step (``μ = 1``). Stops on the relative objective change.

    Parameters
    ----------
    K, Y, opts
        As in :func:`._solvers.alternating_mkl` (``tol`` on the relative objective change).
    p : float
        ``p ≥ 1`` or ``np.inf``.
    name : str
        Used in the convergence warning.

    Returns
    -------
    MKLFit
        ``duality_gap`` is the relative gap ``(‖H‖_q − μᵀH)/J`` at the final weights.
    """
    P = K.shape[0]
    if np.isinf(p):
        s = solve_at_weights(
            K, Y, np.ones(P), opts.C, opts.svc_tol, sample_weight=opts.sample_weight
        )
        return MKLFit(s, np.array([s.J]), 0, relative_gap(lp_support(s.H, p) - s.mu @ s.H, s.J))
    return alternating_mkl(
        K,
        Y,
        opts,
        mu0=np.full(P, P ** (-1.0 / p)),
        mu_step=lambda a: lp_min_ratio(a, p),
        support=lambda H: lp_support(H, p),
        criterion="objective",
        name=name,
    )


@shared_doc
class LpMKL(IterativeMKLClassifier):
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
    {{kernels}}
    p : float, default=2.0
        Norm, ``p ≥ 1`` or ``np.inf``.
    {{C}}
    tol : float, default=1e-5
        Relative objective change at which to stop.
    max_iter : int, default=1000
        Maximal number of weight updates.
    {{solver_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Weights on the unit Lp sphere.
    {{normalized_weights_}}
    dual_coef_ : ndarray (C, N)
        Signed dual coefficients ``α_c ∘ y_c`` (``C = 1`` for binary problems).
    intercept_ : ndarray (C,)
    objective_ : ndarray ``(n_iter_ + 1,)``
        ``J(μ)`` after each update (non-increasing up to the SVM tolerance).
    n_iter_ : int
    duality_gap_ : float
        Relative duality gap ``(‖H‖_q − μᵀH) / J`` at the final weights.
    kernel_names_ : list of str
    classes_ : ndarray
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "p": [Interval("real", 1, None, closed="left", allow_inf=True)],
        "C": POSITIVE,
        "tol": POSITIVE,
        "max_iter": [Interval("int", 1, None, closed="left")],
        **SVM_OPTIONS,
    }

    def __init__(
        self, kernels="simplemkl", *, p=2.0, C=1.0, tol=1e-5, max_iter=1000, svc_tol=1e-6,
        max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
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
        opts = self._solver_options(sample_weight)
        self._store(solve_lp_mkl(K, Y, opts, p=float(self.p)), normalized=True)


__all__ = ["LpMKL", "solve_lp_mkl"]
