"""Multi-label MKL with kernel weights shared by every class (Bucak, Jin & Jain, NIPS 2010).

Both estimators learn one kernel combination ``K(p) = Σ_a p_a K_a``, ``p`` on the simplex, shared
by ``m`` binary tasks: one-vs-rest C-SVMs for a multiclass ``y`` (one task for a binary ``y``), or
one C-SVM per column of a multi-label indicator ``y``. With
``H_k(p) = max_{α ∈ [0, C]^n, αᵀy^k = 0} αᵀ1 − ½ (α∘y^k)ᵀ K(p) (α∘y^k)`` the SVM dual objective of
task k (= its primal ½‖f_k‖² + C Σ hinge at the optimum):

* :class:`MLMKLSum` solves ``min_p Σ_k H_k(p)`` (paper B eq. 1–2). This is exactly the shared-weight
  SimpleMKL objective, so it runs the package's SimpleMKL reduced-gradient solver
  (:func:`bayesmkl.baselines.simplemkl.solve_simplemkl`; ``m`` SVMs per objective evaluation);
* :class:`MLMKLSA` solves the worst-class problem ``min_p max_k H_k(p)`` (eq. 3), written as the
  saddle point ``min_p max_{γ ∈ Δ_m} Σ_k γ_k H_k(p)`` (eq. 5), by stochastic entropic mirror
  descent: one SVM per iteration (Algorithm 1).

Notation: ``v_k = α_k ∘ y^k`` (signed duals, zero off the support) and
``h_{a,k} = ½ v_kᵀ K_a v_k``, so that ``∂H_k/∂p_a = −h_{a,k}`` (Danskin).

Certificate of the worst-class value. For any dual-feasible ``α_k`` (e.g. the SVM solutions at any
weights) and any ``γ`` on the simplex, weak duality gives
``min_p max_k H_k(p) ≥ min_p Σ_k γ_k (1ᵀα_k − pᵀh_k) = Σ_k γ_k 1ᵀα_k − max_a Σ_k γ_k h_{a,k}``.
:func:`minimax_lower_bound` maximises this over ``γ`` (a small LP); it is tight at the saddle
point, so ``max_k H_k − bound`` measures how far a fitted ``p`` is from the worst-class optimum.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, column_or_1d

from bayesmkl.baselines._base import (
    CLASS_WEIGHT,
    KERNEL_NAMES,
    KERNELS,
    POSITIVE,
    MKLClassifierBase,
    fit_kernel_input,
)
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._solvers import IterativeMKLClassifier
from bayesmkl.baselines._svm import combine, fit_svc, kernel_quadratics
from bayesmkl.baselines.simplemkl import solve_simplemkl
from bayesmkl.estimators._validation import MAX_TIME, NO_VALIDATION, Interval
from bayesmkl.estimators._weights import check_sample_weight

__all__ = ["MLMKLSum", "MLMKLSA", "class_objectives", "minimax_lower_bound"]


def class_objectives(
    K: np.ndarray,
    Y: np.ndarray,
    p: np.ndarray,
    C: float = 1.0,
    svc_tol: float = 1e-6,
    sample_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Per-task SVM dual objectives ``H_k(p)`` at the kernel weights ``p``.

    Parameters
    ----------
    K : ndarray (P, N, N)
        Training kernels.
    Y : ndarray (m, N)
        ±1 targets, one row per task.
    p : ndarray (P,)
        Kernel weights.
    C : float
        SVM box constraint.
    svc_tol : float
        libsvm stopping tolerance.
    sample_weight : ndarray (N,), optional
        Per-point box scaling ``0 ≤ α_i ≤ C·s_i``.

    Returns
    -------
    ndarray (m,)
        ``H_k``; its maximum is the worst-class objective of paper B eq. (3).
    """
    Kp = combine(K, p)
    return np.array([fit_svc(Kp, y, C, svc_tol, sample_weight).objective for y in np.atleast_2d(Y)])


def minimax_lower_bound(K: np.ndarray, V: np.ndarray) -> tuple[float, np.ndarray]:
    """Lower bound on ``min_p max_k H_k(p)`` from dual-feasible signed duals ``V``.

    Parameters
    ----------
    K : ndarray (P, N, N)
    V : ndarray (m, N)
        ``v_k = α_k ∘ y^k`` with ``0 ≤ α_k ≤ C`` and ``α_kᵀy^k = 0`` (any SVM solutions are).

    Returns
    -------
    bound : float
        ``max_{γ ∈ Δ_m} min_a Σ_k γ_k (‖v_k‖₁ − ½ v_kᵀ K_a v_k)`` (LP, HiGHS).
    gamma : ndarray (m,)
        The maximising task weights.
    """
    V = np.atleast_2d(V)
    m = V.shape[0]
    h = np.stack([kernel_quadratics(K, v) for v in V])  # (m, P)
    S = np.abs(V).sum(axis=1)[:, None] - h  # S[k, a] = 1ᵀα_k − h_{a,k}
    # variables (γ_1..γ_m, t): maximise t  s.t.  t ≤ Σ_k γ_k S[k, a] ∀a,  γ ∈ simplex
    P = S.shape[1]
    res = linprog(
        c=np.r_[np.zeros(m), -1.0],
        A_ub=np.hstack([-S.T, np.ones((P, 1))]),
        b_ub=np.zeros(P),
        A_eq=np.r_[np.ones(m), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0.0, None)] * m + [(None, None)],
        method="highs",
    )
    if not res.success:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"minimax_lower_bound: LP failed ({res.message})")
    gamma = np.clip(res.x[:m], 0.0, None)
    gamma /= gamma.sum()
    return float(np.min(gamma @ S)), gamma


class _MLMKLBase(MKLClassifierBase):
    """Shared plumbing: multiclass (one-vs-rest) or multi-label targets, final per-task SVMs."""

    @shared_doc
    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` and labels ``y``.

        Parameters
        ----------
        {{fit_X}}
        y : array (N,) of class labels, or (N, L) multi-label indicator matrix of 0/1
            A 1-D ``y`` gives a binary (one task) or one-vs-rest multiclass problem; a 2-D ``y``
            with L ≥ 2 columns gives one task per column (every column must contain both 0 and
            1); a column vector ``(N, 1)`` is raveled with a ``DataConversionWarning``.
        sample_weight : array (N,), optional
            Non-negative per-sample weights scaling each point's ``C`` in every task (times
            ``class_weight`` for a 1-D ``y``).

        Returns
        -------
        self
        """
        return super().fit(X, y, sample_weight)

    def _fit_data(self, X, y, sample_weight=None):
        """The base class's ``_fit_data`` for a 1-D ``y``; one task per column for a 2-D one."""
        y_arr = np.asarray(y)
        if y_arr.ndim == 2 and y_arr.shape[1] == 1:
            y_arr = y = column_or_1d(y_arr, warn=True)  # DataConversionWarning, as sklearn does
        if y_arr.ndim == 1:
            self.multilabel_ = False
            return super()._fit_data(X, y, sample_weight)
        if y_arr.ndim != 2:
            raise ValueError(f"y must be 1-D labels or a 2-D indicator matrix; got {y_arr.shape}")
        K = fit_kernel_input(self, X)
        if y_arr.shape[0] != K.shape[1]:
            raise ValueError(
                f"X and y have different lengths: {K.shape[1]} samples in X, "
                f"{y_arr.shape[0]} rows in y"
            )
        if self.class_weight is not None:
            raise NotImplementedError(
                f"{type(self).__name__}: class_weight is not defined for a multi-label y (one "
                "weight per label column and value would be needed); pass sample_weight instead"
            )
        sw = None
        if sample_weight is not None:
            sw = check_sample_weight(sample_weight, y_arr.shape[0])
        if not np.all(np.isin(y_arr, (0, 1))):
            raise ValueError("a 2-D y must be a multi-label indicator matrix of 0/1")
        counts = y_arr.sum(axis=0)
        bad = np.flatnonzero((counts == 0) | (counts == y_arr.shape[0]))
        if bad.size:
            raise ValueError(
                f"label columns {bad.tolist()} are constant (all 0 or all 1); every label needs "
                "positive and negative examples"
            )
        self.multilabel_ = True
        self.classes_ = np.arange(y_arr.shape[1])
        Y = np.where(y_arr.T == 1, 1.0, -1.0)
        self._fit_kernels(K, Y, sw)
        return self

    def _final_svms(self, K: np.ndarray, Y: np.ndarray, p: np.ndarray, sw=None) -> None:
        """Per-task SVMs on ``K(p)`` and the worst-class diagnostics."""
        Kp = combine(K, p)
        res = [fit_svc(Kp, y, self.C, self.svc_tol, sw) for y in Y]
        self.kernel_weights_ = np.asarray(p, dtype=np.float64).copy()
        self.dual_coef_ = np.stack([r.v for r in res])
        self.intercept_ = np.array([r.b for r in res])
        self.class_objectives_ = np.array([r.objective for r in res])
        self.worst_class_objective_ = float(self.class_objectives_.max())
        self.minimax_lower_bound_, _ = minimax_lower_bound(K, self.dual_coef_)

    def decision_function(self, X):
        """Decision values ``(M,)`` (binary), ``(M, n_classes)`` or ``(M, L)`` (multi-label)."""
        check_is_fitted(self, "kernel_weights_")
        if not self.multilabel_:
            return super().decision_function(X)
        Kt = self._test_kernels(X)
        return combine(Kt, self.kernel_weights_) @ self.dual_coef_.T + self.intercept_[None, :]

    def predict(self, X):
        """Labels ``(M,)``, or for a multi-label ``y`` an indicator matrix ``(M, L)`` of 0/1."""
        check_is_fitted(self, "kernel_weights_")
        if not self.multilabel_:
            return super().predict(X)
        return (self.decision_function(X) > 0).astype(int)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


@shared_doc
class MLMKLSum(_MLMKLBase, IterativeMKLClassifier):
    """ML-MKL-Sum: shared kernel weights minimising the summed SVM objectives (paper B eq. 1–2).

    ``min_{p ∈ simplex} Σ_k H_k(p)``, ``H_k`` the C-SVM dual objective of task k on ``K(p)``. This
    is SimpleMKL with weights shared across tasks, solved by the package's SimpleMKL solver. Step
    rule (Rakotomamonjy et al. 2008): reduced gradient ``D_a = Σ_k (h_{a,k} − h_{u,k})`` w.r.t. the
    largest weight ``u`` (zero for vanished weights pointing outwards), maximal steps that zero a
    weight while ``Σ_k H_k`` decreases, then a safeguarded false-position line search on the last
    segment. Every objective evaluation solves the ``m`` task SVMs. Stops when the relative MKL
    duality gap ``(max_a Σ_k h_{a,k} − pᵀΣ_k h_k) / Σ_k H_k`` is ``≤ tol``.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`); ``"precomputed"`` takes
        ``fit(K (P, N, N), y)`` and ``predict(K_test (P, M, N))``.
    {{C}}
    tol : float, default=1e-3
        Relative duality gap at which to stop.
    max_iter : int, default=500
        Maximum reduced-gradient iterations.
    {{svc_tol}}
    {{max_time}}
    {{mlmkl_fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        ``p`` on the simplex.
    objective_ : ndarray ``(n_iter_ + 1,)``
        ``Σ_k H_k`` after every iteration (non-increasing).
    duality_gap_ : float
        Relative duality gap at stop.
    n_iter_ : int
    {{mlmkl_attributes}}
    """

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        fit = solve_simplemkl(K, Y, self._solver_options(sample_weight), name="MLMKLSum")
        self.objective_ = np.asarray(fit.objectives, dtype=np.float64)
        self.n_iter_ = int(fit.n_iter)
        self.duality_gap_ = float(fit.duality_gap)
        self._final_svms(K, Y, fit.state.mu, sample_weight)


@shared_doc
class MLMKLSA(_MLMKLBase):
    """ML-MKL-SA: worst-class MKL by stochastic approximation (paper B, Algorithm 1).

    Solves ``min_{p ∈ Δ_s} max_{γ ∈ Δ_m} Σ_k γ_k H_k(p)`` (eq. 5). Iteration t:

    1. sample a task ``j ~ γ'_t`` with ``γ'_t = (1 − δ) γ_t + δ/m`` (eq. 10);
    2. solve the one SVM of task j on ``K(p_t)``: ``v_j``, ``H_j``;
    3. stochastic gradients ``ĝ^p_a = −½ v_jᵀ K_a v_j`` (eq. 8) and ``ĝ^γ_j = H_j / γ'_{t,j}``
       (zero for the other tasks). Eq. (9) prints ``1/γ_j``; dividing by the probability ``γ'_j``
       with which j is sampled is what makes ``ĝ^γ`` unbiased (Prop. 1);
    4. entropic mirror steps ``p ∝ p exp(−η_p ĝ^p)`` (descent) and ``γ ∝ γ exp(+η_γ ĝ^γ)``
       (ascent).

    The output is the ergodic average ``p̄ = (1/T) Σ_t p_t`` (and ``γ̄``); the final per-task SVMs
    are trained on ``K(p̄)``. Stops when ``‖p̄_t − p̄_{t−1}‖₂ / ‖p̄_t‖₂ < tol`` (the paper's rule,
    checked after ``min_iter`` iterations) or after ``max_iter`` iterations.

    Parameters
    ----------
    {{kernels}}
    {{C}}
    max_iter : int, default=1000
        ``T``, the maximum number of iterations (= SVMs solved in the weight search).
    min_iter : int, default=50
    tol : float, default=1e-4
        Relative change of ``p̄`` for stopping.
    delta : float, default=0.2
        Smoothing δ ∈ (0, 1] of the sampling distribution (the paper's default).
    eta_p, eta_gamma : float or None, default=None
        Step sizes. ``None`` uses the scale-free rule ``η = eta_scale · √(ln n / T) / G``, the
        ``√(ln n / T)/G`` step of entropic mirror descent with ``n = s`` kernels (resp. ``m``
        tasks) and ``G`` the spread ``max_a ĝ^p_a − min_a ĝ^p_a`` of the first p-gradient with a
        non-zero spread (resp. the first sampled ``H_j``). A float is used as given (the paper
        uses 1e−4 … 1e−3 with its kernels).
    eta_scale : float, default=2.0
        Multiplier of the automatic rule.
    {{svc_tol}}
    random_state : int, RandomState or None
        Seeds the task sampling.
    max_time : float or None, default=None
        Wall-clock budget in seconds; stopping on it keeps the last weights and issues a
        ``ConvergenceWarning`` that names the limit.
    {{mlmkl_fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        ``p̄``.
    task_weights_ : ndarray (m,)
        ``γ̄``, the averaged task weights (large on the hard tasks).
    eta_p_, eta_gamma_ : float
        Step sizes used.
    weight_path_ : ndarray ``(n_iter_, P)``
        The averaged weights ``p̄_t`` along the run.
    task_counts_ : ndarray (m,)
        How often each task was sampled.
    n_iter_ : int
    {{mlmkl_attributes}}
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "C": POSITIVE,
        "max_iter": [Interval("int", 1, None, closed="left")],
        "min_iter": [Interval("int", 0, None, closed="left")],
        "tol": [Interval("real", 0, None, closed="left")],
        "delta": [Interval("real", 0, 1, closed="right")],
        "eta_p": [None, *POSITIVE],
        "eta_gamma": [None, *POSITIVE],
        "eta_scale": POSITIVE,
        "svc_tol": POSITIVE,
        "random_state": NO_VALIDATION,  # check_random_state
        "max_time": MAX_TIME,
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, C=1.0, max_iter=1000, min_iter=50, tol=1e-4, delta=0.2,
        eta_p=None, eta_gamma=None, eta_scale=2.0, svc_tol=1e-6, random_state=None, max_time=None,
        class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.C = C
        self.max_iter = max_iter
        self.min_iter = min_iter
        self.tol = tol
        self.delta = delta
        self.eta_p = eta_p
        self.eta_gamma = eta_gamma
        self.eta_scale = eta_scale
        self.svc_tol = svc_tol
        self.random_state = random_state
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        rng = check_random_state(self.random_state)
        P, m = K.shape[0], Y.shape[0]
        T = int(self.max_iter)
        budget = Budget("MLMKLSA", None, self.max_time)
        delta = float(self.delta)
        p = np.full(P, 1.0 / P)
        gam = np.full(m, 1.0 / m)
        p_sum = np.zeros(P)
        g_sum = np.zeros(m)
        eta_p, eta_g = self.eta_p, self.eta_gamma
        counts = np.zeros(m, dtype=int)
        path = []
        t = 0
        for t in range(1, T + 1):  # noqa: B007
            p_sum += p
            g_sum += gam
            path.append(p_sum / t)
            if t > max(int(self.min_iter), 1):
                change = np.linalg.norm(path[-1] - path[-2]) / np.linalg.norm(path[-1])
                if change < self.tol:
                    break
            if t == T:
                break  # p_T is averaged; no further step is needed
            if budget.out_of_time():
                budget.warn(t, "averaged weights' change")
                break
            gam_s = (1.0 - delta) * gam + delta / m
            j = int(rng.choice(m, p=gam_s / gam_s.sum()))
            counts[j] += 1
            res = fit_svc(combine(K, p), Y[j], self.C, self.svc_tol, sample_weight)
            gp = -kernel_quadratics(K, res.v)
            spread = float(gp.max() - gp.min())
            if eta_p is None and spread > 1e-12 * float(np.abs(gp).max()):
                eta_p = self.eta_scale * math.sqrt(math.log(max(P, 2)) / T) / spread
            if eta_g is None:
                scale = max(abs(res.objective), 1e-12)
                eta_g = self.eta_scale * math.sqrt(math.log(max(m, 2)) / T) / scale
            # multiplicative (softmax) updates, exponents shifted to be ≤ 0; a p-gradient
            # without spread leaves p unchanged (and does not set the automatic step)
            if eta_p is not None:
                z = -eta_p * gp
                p = p * np.exp(z - z.max())
                p /= p.sum()
            zg = np.zeros(m)
            zg[j] = eta_g * res.objective / gam_s[j]
            gam = gam * np.exp(zg - zg.max())
            gam /= gam.sum()
        self.n_iter_ = t
        self.eta_p_ = float("nan") if eta_p is None else float(eta_p)
        self.eta_gamma_ = float("nan") if eta_g is None else float(eta_g)
        self.task_weights_ = g_sum / t
        self.task_counts_ = counts
        self.weight_path_ = np.asarray(path)
        self._final_svms(K, Y, p_sum / t, sample_weight)
