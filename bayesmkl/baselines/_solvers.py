"""What every SVM-based MKL baseline shares: the solver machinery and the estimator shell.

Solvers: the one-vs-rest SVM solution at given weights (:func:`solve_at_weights`, with the
summed objective and per-kernel quadratic terms), the solver result (:class:`MKLFit`) and how it
is stored on an estimator (:func:`store_fit`), and :func:`alternating_mkl`, the block-coordinate
scheme of every analytic-update MKL (Lp-MKL, SM1MKL, SGMKL): alternately solve the SVMs at ``μ``
and replace ``μ`` by ``argmin_{μ ∈ set} Σ_m a_m/μ_m`` with ``a_m = ½‖w_m‖² = μ_m² H_m``. It is
exact block minimisation of the jointly convex primal ``½Σ_m ‖w_m‖²/μ_m + C·loss``, so ``J``
never increases.

Estimators: :class:`IterativeMKLClassifier` holds the parameters every iterative solver takes
(``C, tol, max_iter, svc_tol, max_time, class_weight, kernel_names``); their constraints are the
groups :data:`ITERATIVE_PARAMS` and :data:`SVM_OPTIONS`, which the estimators splice into their
tables ``_parameter_constraints`` (checked by ``fit``, :class:`~._base.MKLClassifierBase`), and
:meth:`~IterativeMKLClassifier._solver_options` hands the checked values to the solvers;
:func:`~bayesmkl.baselines._docstrings.shared_doc` fills the parameter and attribute
descriptions they share into the estimators' docstrings.

Conventions: ``K: (P, N, N)`` training kernels, ``Y: (C, N)`` ±1 targets (one row per
one-vs-rest problem, ``C = 1`` for binary problems), ``μ: (P,)`` kernel weights shared by all rows.
The MKL objective at ``μ`` is the sum of the ``C`` binary C-SVC duals,
``J(μ) = Σ_c [1ᵀα_c − Σ_m μ_m h_{c,m}]`` with ``h_{c,m} = ½ v_cᵀ K_m v_c``, ``v_c = α_c ∘ y_c``;
its gradient is ``∂J/∂μ_m = −H_m``, ``H_m = Σ_c h_{c,m}`` (Danskin).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bayesmkl.baselines._base import (
    CLASS_WEIGHT,
    KERNEL_NAMES,
    KERNELS,
    POSITIVE,
    MKLClassifierBase,
)
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._svm import combine, fit_svc, kernel_quadratics
from bayesmkl.estimators._validation import MAX_TIME, Interval

__all__ = [
    "ITERATIVE_PARAMS",
    "SVM_OPTIONS",
    "IterativeMKLClassifier",
    "MKLFit",
    "SolverOptions",
    "WeightedSVMs",
    "alternating_mkl",
    "quadratic_terms",
    "relative_gap",
    "solve_at_weights",
    "store_fit",
    "with_gradient",
]

# ---------------------------------------------------------------------------------------------
# solvers
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


class SolverOptions(NamedTuple):
    """What every MKL solver of the package takes besides the kernels, targets and its own
    weight set.

    Attributes
    ----------
    C : float
        SVM box constraint.
    tol : float
        Stopping tolerance (on the relative duality gap or objective change, per solver).
    max_iter : int
        Most weight updates.
    svc_tol : float
        libsvm stopping tolerance.
    max_time : float or None
        Wall-clock budget in seconds (checked between weight updates); hitting it or
        ``max_iter`` warns with :class:`~sklearn.exceptions.ConvergenceWarning`.
    sample_weight : ndarray (N,) or None
        Per-point box scaling ``0 ≤ α_ci ≤ C·s_i`` (see :func:`solve_at_weights`).
    """

    C: float
    tol: float
    max_iter: int
    svc_tol: float
    max_time: float | None = None
    sample_weight: np.ndarray | None = None


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


def alternating_mkl(
    K: np.ndarray,
    Y: np.ndarray,
    opts: SolverOptions,
    *,
    mu0: np.ndarray,
    mu_step: Callable[[np.ndarray], np.ndarray],
    support: Callable[[np.ndarray], float],
    criterion: str = "gap",
    name: str = "MKL",
) -> MKLFit:
    """Alternate SVM solves and the analytic weight step until the stopping rule holds.

    Parameters
    ----------
    K, Y
        Training kernels ``(P, N, N)`` and ±1 targets ``(C, N)``.
    opts : SolverOptions
        ``C``, ``tol``, ``max_iter``, ``svc_tol``, ``max_time`` and ``sample_weight``.
    mu0 : ndarray (P,)
        Initial weights (a point of the weight set).
    mu_step : callable
        ``a: (P,) → μ: (P,)``, the minimiser of ``Σ a_m/μ_m`` over the weight set.
    support : callable
        ``H: (P,) → max_{μ ∈ set} μᵀH``; the duality gap is ``support(H) − μᵀH``.
    criterion : {"gap", "objective"}
        ``"gap"``: stop when the relative duality gap is ``≤ tol``; ``"objective"``: stop when
        the relative change of ``J`` over one update is ``≤ tol``.
    name : str
        Used in the convergence warning.

    Returns
    -------
    MKLFit
    """
    C, tol, max_iter, svc_tol, max_time, sample_weight = opts
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


# ---------------------------------------------------------------------------------------------
# estimator shell
# ---------------------------------------------------------------------------------------------


#: Constraints of the parameters that end every SVM-based iterative estimator's signature: the
#: SVC tolerance, the wall-clock budget, class weights and kernel names.
SVM_OPTIONS = {
    "svc_tol": POSITIVE,
    "max_time": MAX_TIME,
    "class_weight": CLASS_WEIGHT,
    "kernel_names": KERNEL_NAMES,
}

#: Constraints of :class:`IterativeMKLClassifier`'s parameters after ``kernels``; a subclass
#: puts its own first.
ITERATIVE_PARAMS = {
    "C": POSITIVE,
    "tol": POSITIVE,
    "max_iter": [Interval("int", 1, None, closed="left")],
    **SVM_OPTIONS,
}


class IterativeMKLClassifier(MKLClassifierBase):
    """Base of the MKL estimators that alternate SVM solves and weight updates.

    Subclasses with more parameters write their own ``__init__`` and table
    ``_parameter_constraints`` (their own parameters, then :data:`ITERATIVE_PARAMS` or
    :data:`SVM_OPTIONS`).
    """

    _parameter_constraints = {"kernels": KERNELS, **ITERATIVE_PARAMS}

    def __init__(
        self, kernels="simplemkl", *, C=1.0, tol=1e-3, max_iter=500, svc_tol=1e-6, max_time=None,
        class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.svc_tol = svc_tol
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _solver_options(self, sample_weight=None) -> SolverOptions:
        """``C, tol, max_iter, svc_tol, max_time`` (checked by ``fit``) as the solvers' floats
        and int, with ``sample_weight``."""
        return SolverOptions(
            C=float(self.C),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            svc_tol=float(self.svc_tol),
            max_time=None if self.max_time is None else float(self.max_time),
            sample_weight=sample_weight,
        )

    def _store(self, fit: MKLFit, *, normalized: bool = False) -> None:
        """:func:`store_fit`, and ``normalized_weights_`` (``μ/Σμ``) when asked."""
        store_fit(self, fit)
        if normalized:
            self.normalized_weights_ = self.kernel_weights_ / self.kernel_weights_.sum()
