"""SGMKL: MKL with an elastic-net constraint on the weights (Yang, Xu, Ye, King & Lyu, TNN 2011).

Problem: ``min J(μ)`` over ``E_v = {μ ≥ 0, v‖μ‖₁ + (1 − v)‖μ‖₂² ≤ 1}``, ``0 ≤ v ≤ 1``, with
``J(μ) = Σ_c max_{α_c} [1ᵀα_c − μᵀh_c(α_c)]`` (one-vs-rest C-SVC duals, weights shared).
``v = 1`` is L1-MKL, ``v = 0`` is L2-MKL.

μ-step without a commercial solver (the original code used Mosek): the alternating scheme of
:func:`.lpmkl.alternating_mkl` needs ``argmin_{μ ∈ E_v} Σ a_m/μ_m`` (``a_m = μ_m² H_m``). Its KKT
conditions give, for each kernel, ``a_m/μ_m² = λ(v + 2(1 − v)μ_m)`` — a cubic with one positive
root, increasing in ``1/λ`` — and ``λ`` is fixed by the active constraint, a monotone 1-D equation
(Brent's method); see :func:`._simplex.elastic_net_min_ratio`. Stop on the relative duality gap
``(max_{μ' ∈ E_v} μ'ᵀH − μᵀH)/J``, whose support term is another monotone 1-D root.
"""

from __future__ import annotations

import numbers

import numpy as np

from bayesmkl.baselines._base import MKLClassifierBase
from bayesmkl.baselines._budget import check_max_time
from bayesmkl.baselines._simplex import elastic_net_min_ratio, elastic_net_support
from bayesmkl.baselines.average import check_int, check_positive, store_fit
from bayesmkl.baselines.lpmkl import alternating_mkl


def check_v(v) -> float:
    """Return ``float(v)`` if ``0 ≤ v ≤ 1``, else raise ``ValueError``."""
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 <= float(v) <= 1.0
    if not ok:
        raise ValueError(f"v must be a number in [0, 1]; got {v!r}")
    return float(v)


def elastic_net_start(P: int, v: float) -> np.ndarray:
    """The uniform point ``c·1`` on the boundary of ``E_v``: ``vPc + (1 − v)Pc² = 1``, ``(P,)``."""
    if v >= 1.0:
        return np.full(P, 1.0 / P)
    c = (-v * P + np.sqrt((v * P) ** 2 + 4.0 * (1.0 - v) * P)) / (2.0 * (1.0 - v) * P)
    return np.full(P, c)


class SGMKL(MKLClassifierBase):
    """Elastic-net constrained MKL, ``v‖μ‖₁ + (1 − v)‖μ‖₂² ≤ 1`` (Yang et al. 2011).

    Solved by alternating the one-vs-rest C-SVCs at ``μ`` with the exact μ-step
    ``argmin Σ_m a_m/μ_m`` over the elastic-net ball, ``a_m = ½‖w_m‖² = μ_m² H_m``, computed from
    its KKT conditions by a cubic root per kernel and a 1-D root (Brent) on the multiplier — no
    QP/conic solver. Starts from the uniform boundary point; stops on the relative duality gap.

    Weights are reported as trained (decision function and ``dual_coef_`` use them):
    ``kernel_weights_`` lies on the boundary of the elastic-net ball, which is the simplex only for
    ``v = 1``. ``normalized_weights_ = μ/Σμ`` is given for comparison with simplex methods.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`).
    v : float, default=0.5
        Elastic-net mixing in ``[0, 1]`` (1: L1-MKL, 0: L2-MKL).
    C : float, default=1.0
        SVM box constraint.
    tol : float, default=1e-3
        Relative duality gap at which to stop.
    max_iter : int, default=500
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
        Weights with ``v Σμ + (1 − v) Σμ² = 1``.
    normalized_weights_ : ndarray (P,)
        ``kernel_weights_ / kernel_weights_.sum()``.
    dual_coef_ : ndarray (C, N)
    intercept_ : ndarray (C,)
    objective_ : ndarray (n_iter_ + 1,)
        ``J(μ)`` after each update (non-increasing up to the SVM tolerance).
    n_iter_ : int
    duality_gap_ : float
        Relative duality gap at stop.
    kernel_names_ : list of str
    classes_ : ndarray
    """

    def __init__(
        self,
        kernels="simplemkl",
        v=0.5,
        C=1.0,
        tol=1e-3,
        max_iter=500,
        svc_tol=1e-6,
        max_time=None,
        class_weight=None,
        kernel_names=None,
    ):
        self.kernels = kernels
        self.v = v
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.svc_tol = svc_tol
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        v = check_v(self.v)
        fit = alternating_mkl(
            K,
            Y,
            C=check_positive("C", self.C),
            mu0=elastic_net_start(K.shape[0], v),
            mu_step=lambda a: elastic_net_min_ratio(a, v),
            support=lambda H: elastic_net_support(H, v),
            tol=check_positive("tol", self.tol),
            max_iter=check_int("max_iter", self.max_iter),
            svc_tol=check_positive("svc_tol", self.svc_tol),
            criterion="gap",
            name="SGMKL",
            max_time=check_max_time(self.max_time),
            sample_weight=sample_weight,
        )
        store_fit(self, fit)
        self.normalized_weights_ = self.kernel_weights_ / self.kernel_weights_.sum()
