"""M³K: multiclass MKL with the Crammer–Singer margin (Cortes, Mohri & Rostamizadeh, ICML 2013).

Problem (docs/baselines_math.md §(d)): ``min_{μ ∈ M_q} J(μ)`` over ``M_q = {μ ≥ 0, ‖μ‖_q ≤ 1}``,

    J(μ) = max_β Σ_i β_{i,y_i} − ½ Σ_c β_cᵀ K(μ) β_c      (the Crammer–Singer dual on K(μ)),

the soft-margin form of maximising the multiclass margin of ``K(μ) = Σ_m μ_m K_m`` (for separable
data and ``C → ∞``, ``J(μ) = 1/(2γ²)`` with ``γ`` the margin of the best unit-norm multiclass
predictor in the RKHS of ``K(μ)``). ``J`` is convex with gradient ``−H``,
``H_m = ½ Σ_c β_cᵀK_mβ_c``; the MKL dual is ``max_β Σ_i β_{i,y_i} − ‖H(β)‖_{q*}``,
``1/q + 1/q* = 1``, so the duality gap at ``μ`` and its solution ``β`` is ``‖H‖_{q*} − μᵀH``.

Algorithm (ours; the paper's solver was not available to check): the β-step is the exact
Crammer–Singer dual (:func:`._crammer_singer.solve_cs_dual`, warm-started: its feasible set does
not depend on ``μ``); the μ-step is

* ``q = 1``: SimpleMKL's reduced-gradient step on the simplex with its line search
  (:func:`.simplemkl.reduced_gradient_step`), which reaches sparse weights exactly;
* ``q > 1``: Kloft's analytic update ``μ' = argmin_{μ' ∈ M_q} Σ_m a_m/μ'_m``, ``a_m = μ_m² H_m``
  (:func:`._simplex.lp_min_ratio`), exact block minimisation of the jointly convex primal
  ``½ Σ_m ‖w_m‖²/μ_m + C Σ_i ℓ_i``;
* ``q = inf``: ``μ = 1`` (the kernel sum), one Crammer–Singer solve.

Both steps never increase ``J``; iterations stop when the relative gap ``(J − LB)/J`` is ``≤ tol``,
with ``LB`` the current solution's dual value ``J − (‖H‖_{q*} − μᵀH)`` or, for ``q = 1``, the
cutting-plane bound of all solutions so far (:class:`PlaneBound`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from bayesmkl.baselines._base import CLASS_WEIGHT, KERNEL_NAMES, KERNELS, POSITIVE
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._crammer_singer import (
    CrammerSingerMKLBase,
    box_upper,
    class_codes,
    cs_quadratics,
    solve_cs_dual,
)
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex import lp_min_ratio, lp_support
from bayesmkl.baselines._solvers import MKLFit, SolverOptions, WeightedSVMs, relative_gap, store_fit
from bayesmkl.baselines._svm import combine
from bayesmkl.baselines.simplemkl import descend, reduced_gradient_step
from bayesmkl.estimators._validation import MAX_TIME, Interval

__all__ = ["M3K", "PlaneBound", "solve_m3k"]


class PlaneBound:
    """Lower bound on ``min_{μ ∈ simplex} J(μ)`` from the Crammer–Singer solutions seen so far.

    Every solution ``β_k`` (found at any ``μ_k``) is feasible for every ``μ``, so
    ``J(μ) ≥ D(β_k; K(μ)) = c_k − H_kᵀμ`` with ``c_k = Σ_i β_{k,i,y_i}``: a cutting plane, and
    ``min_μ max_k (c_k − H_kᵀμ)`` (an LP over the simplex) bounds the optimum from below. It is
    never worse than the current solution's own bound ``c − max_m H_m`` (its plane is among them)
    and is much better when the iterates zig-zag; the last ``max_planes`` planes are kept.
    """

    def __init__(self, max_planes: int = 500):
        self.max_planes = max_planes
        self.c: list[float] = []
        self.H: list[np.ndarray] = []
        self.best = -np.inf
        self._solved = 0

    def add(self, state: WeightedSVMs) -> None:
        """Record the plane of a state with ``H``."""
        self.c.append(float(state.J + state.mu @ state.H))
        self.H.append(np.asarray(state.H, dtype=np.float64))
        del self.c[: -self.max_planes], self.H[: -self.max_planes]
        self._solved = min(self._solved, len(self.c) - 1)

    def bound(self) -> float:
        """The best LP bound so far (``-inf`` before any plane or if HiGHS fails)."""
        if self.c and self._solved != len(self.c):
            H = np.array(self.H)
            k, P = H.shape
            res = linprog(
                np.r_[np.zeros(P), 1.0],
                A_ub=np.hstack([-H, -np.ones((k, 1))]),
                b_ub=-np.array(self.c),
                A_eq=np.r_[np.ones(P), 0.0][None, :],
                b_eq=[1.0],
                bounds=[(0.0, None)] * P + [(None, None)],
                method="highs",
            )
            if res.status == 0:
                self.best = max(self.best, float(res.fun))
            self._solved = len(self.c)
        return self.best


def solve_m3k(
    K: np.ndarray,
    codes: np.ndarray,
    n_classes: int,
    opts: SolverOptions,
    *,
    q: float = 1.0,
    name: str = "M3K",
) -> MKLFit:
    """Minimise ``J(μ)`` over ``{μ ≥ 0, ‖μ‖_q ≤ 1}`` from the uniform point ``P^{-1/q}``.

    Parameters
    ----------
    K : ndarray (P, N, N)
        Training kernels.
    codes : ndarray (N,)
        Class codes ``0..n_classes−1``.
    n_classes : int
    opts : SolverOptions
        ``C``, ``tol`` (relative duality gap), ``max_iter`` (weight updates), ``svc_tol`` (here:
        the Crammer–Singer solver's KKT tolerance), ``max_time`` and ``sample_weight``.
    q : float
        ``q ≥ 1`` or ``np.inf``.
    name : str
        Used in warnings.

    Returns
    -------
    MKLFit
        ``state.V`` holds ``β_cᵀ`` ``(n_classes, N)``, ``state.b`` zeros.
    """
    C, tol, max_iter, cs_tol, max_time, sample_weight = opts
    budget = Budget(name, max_iter, max_time, unit="weight updates")
    P = K.shape[0]
    upper = box_upper(codes, n_classes, C, sample_weight)
    warm = [None]
    planes = PlaneBound()

    def evaluate(mu, gradient=True):
        mu = np.asarray(mu, dtype=np.float64)
        sol = solve_cs_dual(combine(K, mu), codes, upper, cs_tol, beta0=warm[0])
        warm[0] = sol.beta
        H = cs_quadratics(K, sol.beta) if gradient else None
        state = WeightedSVMs(mu, sol.beta.T.copy(), np.zeros(n_classes), sol.objective, H)
        if gradient:
            planes.add(state)
        return state

    def complete(state):
        if state.H is not None:
            return state
        state = state._replace(H=cs_quadratics(K, state.V.T))
        planes.add(state)
        return state

    def gap_of(state):
        gap = relative_gap(lp_support(state.H, q) - state.mu @ state.H, state.J)
        if q == 1.0 and gap > tol:  # the cutting planes of every solution so far bound J* better
            gap = min(gap, relative_gap(state.J - planes.bound(), state.J))
        return gap

    if np.isinf(q):
        s = evaluate(np.ones(P))
        return MKLFit(s, np.array([s.J]), 0, gap_of(s))
    s = evaluate(np.full(P, P ** (-1.0 / q)))
    if q == 1.0:
        step = lambda s: reduced_gradient_step(s, evaluate, complete)  # noqa: E731
    else:  # Kloft's analytic update always yields a new state (never `is s`)
        step = lambda s: evaluate(lp_min_ratio(s.mu**2 * s.H, q))  # noqa: E731
    return descend(s, step, gap_of, tol, budget, name, "the solver tolerance cs_tol")


@shared_doc
class M3K(CrammerSingerMKLBase):
    """M³K: Crammer–Singer multiclass SVM with kernel weights ``μ ≥ 0, ‖μ‖_q ≤ 1`` (Cortes et al.).

    Learns the kernel weights that maximise the (soft) multiclass margin of
    ``K(μ) = Σ_m μ_m K_m``: ``min_μ J(μ)``, ``J(μ)`` the optimal value of the Crammer–Singer SVM
    ``min ½ Σ_c ‖f_c‖² + C Σ_i ℓ_i`` (multiclass hinge ``ℓ_i``, no intercept) on ``K(μ)``; see
    docs/baselines_math.md §(d). The weights are shared by all classes, and there is one
    multiclass machine (not one-vs-rest). ``q = 1`` (L1, sparse weights) is solved by reduced
    gradient on the simplex, ``q > 1`` by the analytic update ``μ_m ∝ ‖w_m‖^{2/(q+1)}``, both
    around an exact Crammer–Singer dual solver; iterations stop on the relative duality gap.
    With one kernel it is the Crammer–Singer SVM.

    Parameters
    ----------
    {{kernels}}
    q : float, default=1.0
        Norm of the weight constraint ``‖μ‖_q ≤ 1``: ``q ≥ 1`` or ``np.inf`` (1: L1, 2: L2,
        ``np.inf``: the kernel sum).
    C : float, default=1.0
        Weight of the multiclass hinge loss.
    tol : float, default=1e-3
        Relative duality gap ``(J − LB) / J`` at which to stop; the lower bound ``LB`` is the
        current solution's dual value ``Σ_i β_{i,y_i} − ‖H‖_{q*}`` or, for ``q = 1``, the
        better bound of the cutting planes of all solutions so far (:class:`PlaneBound`).
    max_iter : int, default=500
        Maximal number of weight updates.
    cs_tol : float, default=1e-6
        Largest KKT violation (in decision-value units) accepted from the Crammer–Singer dual
        solver; the weight gradient comes from its solution, so keep it tight.
    {{max_time}}
    {{fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        μ, on the unit Lq sphere (on the simplex for ``q = 1``).
    {{normalized_weights_}}
    dual_coef_ : ndarray (n_classes, N)
        Crammer–Singer dual coefficients ``β_cᵀ``: ``f_c(x) = Σ_m μ_m Σ_i β_ic k_m(x, x_i)``.
    intercept_ : ndarray (n_classes,)
        Zeros (the Crammer–Singer machine has no intercept).
    objective_ : ndarray ``(n_iter_ + 1,)``
        ``J(μ)`` after each weight update (non-increasing up to the solver tolerance).
    {{gap_attributes}}
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "q": [Interval("real", 1, None, closed="left", allow_inf=True)],
        "C": POSITIVE,
        "tol": POSITIVE,
        "max_iter": [Interval("int", 1, None, closed="left")],
        "cs_tol": POSITIVE,
        "max_time": MAX_TIME,
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, q=1.0, C=1.0, tol=1e-3, max_iter=500, cs_tol=1e-6,
        max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.q = q
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.cs_tol = cs_tol
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        opts = SolverOptions(
            C=float(self.C),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            svc_tol=float(self.cs_tol),
            max_time=self.max_time,
            sample_weight=sample_weight,
        )
        codes = class_codes(Y)
        fit = solve_m3k(K, codes, len(self.classes_), opts, q=float(self.q))
        store_fit(self, fit)
        self.normalized_weights_ = self.kernel_weights_ / self.kernel_weights_.sum()
