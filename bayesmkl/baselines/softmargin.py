"""Soft-margin MKL (Xu, Tsang & Xu, IEEE TNNLS 2013): SM1MKL, SM2MKL and the square-loss case.

Kernel slacks ``ζ_m = τ − S_m(α)`` on the per-kernel SVM objectives turn L1-MKL (hard margin) into
a family of problems over the weights ``μ: (P,)``; in the C-SVC form used here, with
``J(μ) = Σ_c max_{α_c} [1ᵀα_c − μᵀh_c(α_c)]`` (one-vs-rest, weights shared):

=============  ==========================================  =========================================
loss           problem                                     solver
=============  ==========================================  =========================================
"hinge"        ``min J(μ)``, ``Σμ = 1, 0 ≤ μ ≤ θ`` (11)    Algorithm 1: SVMs ↔ closed-form box step
(SM1MKL)       needs ``θ ≥ 1/P``; ``θ = 1/P`` is the        (Lemma 8 / eq. 25); stop on the relative
               average kernel, ``θ ≥ 1`` is L1-MKL          duality gap
"square_hinge" ``min J(μ) + ‖μ‖²/(2θ)``, μ ∈ simplex (13)   Algorithm 2: projected gradient (26–27),
(SM2MKL)       ``θ → ∞``: L1-MKL; ``θ → 0``: uniform        sort-based simplex projection, Armijo
                                                           line search on (13); stop on the gap
"square"       ``min J(μ)``, ``‖μ‖₂ ≤ 1`` (16) = L2-MKL     delegated to :func:`.lpmkl.solve_lp_mkl`
=============  ==========================================  =========================================

Duality gaps: with ``H = Σ_c h_c`` at the SVM solutions, the dual bound is
``Σ_c 1ᵀα_c − max_{μ' ∈ M1} μ'ᵀH`` for SM1MKL and
``Σ_c 1ᵀα_c − max_{μ' ∈ simplex} [μ'ᵀH − ‖μ'‖²/(2θ)]`` for SM2MKL (the maximiser is ``Π(θH)``).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines._base import KERNELS
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex import (
    box_simplex_min_ratio,
    box_simplex_support,
    project_simplex,
    simplex_ridge_support,
)
from bayesmkl.baselines._solvers import (
    ITERATIVE_PARAMS,
    IterativeMKLClassifier,
    MKLFit,
    SolverOptions,
    alternating_mkl,
    relative_gap,
    solve_at_weights,
)
from bayesmkl.baselines.lpmkl import solve_lp_mkl
from bayesmkl.estimators._validation import Interval, Options

LOSSES = ("hinge", "square_hinge", "square")


def solve_sm1(
    K: np.ndarray, Y: np.ndarray, opts: SolverOptions, *, theta: float, name: str = "SM1MKL"
) -> MKLFit:
    """SM1MKL (Algorithm 1): SVMs at ``μ`` ↔ ``μ = argmin_{M1} Σ a_m/μ_m``, ``a_m = μ_m² H_m``.

    Starts from ``μ = 1/P``. For ``θP ≤ 1`` (up to rounding) ``M1`` is the single point ``1/P``
    and one SVM solve per problem is made: exactly :class:`~.average.AverageMKL`.

    Parameters
    ----------
    K, Y, opts
        As in :func:`._solvers.alternating_mkl` (``tol`` on the relative duality gap).
    theta : float
        Cap ``θ ≥ 1/P`` (``inf`` allowed).
    name : str

    Returns
    -------
    MKLFit
    """
    P = K.shape[0]
    uniform = np.full(P, 1.0 / P)
    if theta * P <= 1.0 + 1e-12:
        s = solve_at_weights(K, Y, uniform, opts.C, opts.svc_tol, sample_weight=opts.sample_weight)
        return MKLFit(s, np.array([s.J]), 0, 0.0)
    return alternating_mkl(
        K,
        Y,
        opts,
        mu0=uniform,
        mu_step=lambda a: box_simplex_min_ratio(a, theta),
        support=lambda H: box_simplex_support(H, theta),
        criterion="gap",
        name=name,
    )


def solve_sm2(
    K: np.ndarray,
    Y: np.ndarray,
    opts: SolverOptions,
    *,
    theta: float,
    armijo: float = 1e-4,
    name: str = "SM2MKL",
) -> MKLFit:
    """SM2MKL (Algorithm 2): projected gradient on ``F(μ) = J(μ) + ‖μ‖²/(2θ)`` over the simplex.

    Gradient ``g = −H + μ/θ`` (eq. 26); step ``μ⁺ = Π(μ − ηg)`` (eq. 27) with the sort-based
    projection. ``η`` starts at ``1/(1/θ + max H − min H)`` and afterwards at the Barzilai–Borwein
    value ``sᵀs/sᵀ(g⁺ − g)``; it is halved until the Armijo condition
    ``F(μ⁺) ≤ F(μ) + armijo·gᵀ(μ⁺ − μ)`` holds, so ``F`` decreases at every iteration.
    Stops when the relative duality gap is ``≤ tol``.

    Parameters
    ----------
    K, Y, opts
        As in :func:`solve_sm1`.
    theta : float
        ``θ > 0`` (``inf`` allowed: L1-MKL by projected gradient).
    armijo : float
        Sufficient-decrease constant.
    name : str

    Returns
    -------
    MKLFit
        ``objectives`` holds ``F``.
    """
    C, tol, max_iter, svc_tol, max_time, sample_weight = opts
    budget = Budget(name, max_iter, max_time, unit="weight updates")
    P = K.shape[0]
    inv = 0.0 if np.isinf(theta) else 1.0 / theta

    def F(s):
        return s.J + 0.5 * inv * (s.mu @ s.mu)

    def grad(s):
        return -s.H + inv * s.mu

    def gap_of(s):
        primal_term = s.mu @ s.H - 0.5 * inv * (s.mu @ s.mu)
        return relative_gap(simplex_ridge_support(s.H, theta) - primal_term, F(s))

    s = solve_at_weights(K, Y, np.full(P, 1.0 / P), C, svc_tol, sample_weight=sample_weight)
    f, g = F(s), grad(s)
    eta = 1.0 / max(inv + np.ptp(s.H), 1e-12 * max(s.H.max(), 1e-300))
    history = [f]
    n_iter = 0
    stalled = False
    while gap_of(s) > tol and not budget.exhausted(n_iter):
        for _ in range(60):
            step = project_simplex(s.mu - eta * g) - s.mu
            if np.max(np.abs(step)) <= 1e-15:
                stalled = True
                break
            new = solve_at_weights(K, Y, s.mu + step, C, svc_tol, sample_weight=sample_weight)
            f_new = F(new)
            if f_new <= f + armijo * (g @ step):
                break
            eta *= 0.5
        else:
            stalled = True
        if stalled:
            warnings.warn(
                f"{name}: the line search found no decrease (relative duality gap "
                f"{gap_of(s):.3g} > tol={tol}); the SVM tolerance svc_tol may be too loose",
                ConvergenceWarning,
                stacklevel=2,
            )
            break
        g_new = grad(new)
        sy = step @ (g_new - g)
        eta = (step @ step) / sy if sy > 0 else 2.0 * eta
        s, f, g = new, f_new, g_new
        n_iter += 1
        history.append(f)
    if not stalled and gap_of(s) > tol:
        budget.warn(n_iter, "duality gap")
    return MKLFit(s, np.array(history), n_iter, gap_of(s))


@shared_doc
class SoftMarginMKL(IterativeMKLClassifier):
    """Soft-margin MKL (Xu et al. 2013): SM1MKL (hinge), SM2MKL (square hinge), square loss.

    ``loss="hinge"`` (SM1MKL): ``min J(μ)`` over ``{Σμ = 1, 0 ≤ μ ≤ θ}``, by Algorithm 1 with the
    closed-form box step (Lemma 8 / eq. 25). Needs ``θ ≥ 1/P``; the paper's grid is
    ``θ = 1/(νP)``, ``ν ∈ (0, 1]``. ``θ = 1/P`` is exactly :class:`AverageMKL`; ``θ ≥ 1`` is L1-MKL
    (the optimum of :class:`SimpleMKL`).

    ``loss="square_hinge"`` (SM2MKL, elastic-net MKL): ``min J(μ) + ‖μ‖²/(2θ)`` over the simplex, by
    projected gradient with an Armijo line search (Algorithm 2). ``θ → ∞`` tends to L1-MKL,
    ``θ → 0`` to uniform weights.

    ``loss="square"``: L2-MKL (Prop. 5) — solved by :class:`LpMKL`'s solver with ``p = 2``
    (``theta`` is then unused: in the C-SVC form the ball radius is fixed to 1 and the scale is
    carried by ``C``); ``tol`` is then the relative objective change, and the weights lie on the
    unit L2 sphere.

    ``objective_`` is ``J(μ)`` (hinge, square) or ``J(μ) + ‖μ‖²/(2θ)`` (square hinge), with
    ``J(μ) = Σ_c`` (C-SVC dual of one-vs-rest problem ``c``).

    Parameters
    ----------
    {{kernels}}
    loss : {"hinge", "square_hinge", "square"}, default="hinge"
        Loss on the kernel slacks.
    theta : float, default=1.0
        Soft-margin parameter ``θ > 0`` (``np.inf`` allowed; hinge needs ``θ ≥ 1/P``).
    {{C}}
    tol : float, default=1e-3
        Relative duality gap at which to stop (relative objective change for ``loss="square"``).
    {{iterative_tail}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Weights the SVMs were trained with (simplex; unit L2 sphere for ``loss="square"``).
    {{normalized_weights_}}
    {{svm_attributes}}
    objective_ : ndarray ``(n_iter_ + 1,)``
        Objective after each update (non-increasing up to the SVM tolerance).
    {{gap_attributes}}
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "loss": [Options(*LOSSES)],
        "theta": [Interval("real", 0, None, closed="neither", allow_inf=True)],
        **ITERATIVE_PARAMS,
    }

    def __init__(
        self, kernels="simplemkl", *, loss="hinge", theta=1.0, C=1.0, tol=1e-3, max_iter=500,
        svc_tol=1e-6, max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.loss = loss
        self.theta = theta
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.svc_tol = svc_tol
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        theta = float(self.theta)
        opts = self._solver_options(sample_weight)
        P = K.shape[0]
        if self.loss == "hinge":
            if theta * P < 1.0 - 1e-12:
                raise ValueError(
                    f"loss='hinge' needs theta >= 1/P = {1.0 / P:.6g} for P = {P} kernels "
                    f"(the capped simplex {{sum(mu) = 1, 0 <= mu <= theta}} is empty); got "
                    f"theta={self.theta!r}. Use theta = 1/(nu*P) with 0 < nu <= 1"
                )
            fit = solve_sm1(K, Y, opts, theta=theta)
        elif self.loss == "square_hinge":
            fit = solve_sm2(K, Y, opts, theta=theta)
        else:
            fit = solve_lp_mkl(K, Y, opts, p=2.0, name="SoftMarginMKL(loss='square')")
        self._store(fit, normalized=True)
