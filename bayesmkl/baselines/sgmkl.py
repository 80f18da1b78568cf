"""SGMKL: MKL with an elastic-net constraint on the weights (Yang, Xu, Ye, King & Lyu, TNN 2011).

Problem: ``min J(μ)`` over ``E_v = {μ ≥ 0, v‖μ‖₁ + (1 − v)‖μ‖₂² ≤ 1}``, ``0 ≤ v ≤ 1``, with
``J(μ) = Σ_c max_{α_c} [1ᵀα_c − μᵀh_c(α_c)]`` (one-vs-rest C-SVC duals, weights shared).
``v = 1`` is L1-MKL, ``v = 0`` is L2-MKL.

μ-step without a commercial solver (the original code used Mosek): the alternating scheme of
:func:`._solvers.alternating_mkl` needs ``argmin_{μ ∈ E_v} Σ a_m/μ_m`` (``a_m = μ_m² H_m``). Its KKT
conditions give, for each kernel, ``a_m/μ_m² = λ(v + 2(1 − v)μ_m)`` — a cubic with one positive
root, increasing in ``1/λ`` — and ``λ`` is fixed by the active constraint, a monotone 1-D equation
(Brent's method); see :func:`._simplex.elastic_net_min_ratio`. Stop on the relative duality gap
``(max_{μ' ∈ E_v} μ'ᵀH − μᵀH)/J``, whose support term is another monotone 1-D root.
"""

from __future__ import annotations

import numpy as np

from bayesmkl.baselines._base import KERNELS
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex import elastic_net_min_ratio, elastic_net_support
from bayesmkl.baselines._solvers import ITERATIVE_PARAMS, IterativeMKLClassifier, alternating_mkl
from bayesmkl.estimators._validation import Interval


def elastic_net_start(P: int, v: float) -> np.ndarray:
    """The uniform point ``c·1`` on the boundary of ``E_v``: ``vPc + (1 − v)Pc² = 1``, ``(P,)``."""
    if v >= 1.0:
        return np.full(P, 1.0 / P)
    c = (-v * P + np.sqrt((v * P) ** 2 + 4.0 * (1.0 - v) * P)) / (2.0 * (1.0 - v) * P)
    return np.full(P, c)


@shared_doc
class SGMKL(IterativeMKLClassifier):
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
    {{kernels}}
    v : float, default=0.5
        Elastic-net mixing in ``[0, 1]`` (1: L1-MKL, 0: L2-MKL).
    {{C}}
    tol : float, default=1e-3
        Relative duality gap at which to stop.
    {{iterative_tail}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Weights with ``v Σμ + (1 − v) Σμ² = 1``.
    {{normalized_weights_}}
    {{svm_attributes}}
    objective_ : ndarray ``(n_iter_ + 1,)``
        ``J(μ)`` after each update (non-increasing up to the SVM tolerance).
    {{gap_attributes}}
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "v": [Interval("real", 0, 1)],
        **ITERATIVE_PARAMS,
    }

    def __init__(
        self, kernels="simplemkl", *, v=0.5, C=1.0, tol=1e-3, max_iter=500, svc_tol=1e-6,
        max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
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
        v = float(self.v)
        fit = alternating_mkl(
            K,
            Y,
            self._solver_options(sample_weight),
            mu0=elastic_net_start(K.shape[0], v),
            mu_step=lambda a: elastic_net_min_ratio(a, v),
            support=lambda H: elastic_net_support(H, v),
            criterion="gap",
            name="SGMKL",
        )
        self._store(fit, normalized=True)
