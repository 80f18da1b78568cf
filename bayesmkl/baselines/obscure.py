"""OBSCURE: p-norm multiclass MKL by online-batch stochastic mirror descent (Orabona, Jie & Caputo).

Problem (docs/baselines_math.md §(e)), with one block ``w_m = (w_{m,1}, …, w_{m,n})`` per kernel
holding every class's weight vector in that kernel's RKHS, ``f_c(x) = Σ_m ⟨w_{m,c}, φ_m(x)⟩``:

    min_w  F(w) = ½ ‖w‖²_{2,p} + C Σ_i s_i ℓ_i(w),     ‖w‖_{2,p} = (Σ_m ‖w_m‖^p)^{1/p},  1 < p ≤ 2,

with the Crammer–Singer hinge ``ℓ_i``; this is the paper's ``(λ/2)‖w‖²_{2,p} + (1/N) Σ_i ℓ_i``
scaled by ``1/λ``, ``λ = 1/(C·N)``. It equals M³K with ``‖μ‖_r ≤ 1``, ``r = p/(2 − p)``, and the
kernel weights the solution implies are ``μ_m ∝ ‖w_m‖^{2−p}`` on the unit Lr sphere.

Algorithm: stochastic mirror descent with the p-norm link. Let ``θ = Σ_s (−s_{i_s} z_s)``, the sum
of the negative sub-gradients so far, and ``q = p/(p − 1)``; after ``t`` steps

    w_{t+1} = (1/(λt)) ∇(½‖θ‖²_{2,q}),   i.e.   w_m = (1/(λt)) (‖θ_m‖/‖θ‖_{2,q})^{q−2} θ_m,

(mirror descent on ``F`` with steps ``1/(λt)``, equivalently dual averaging with the regulariser
``(λt/2)‖w‖²_{2,p}``). Every sub-gradient of ``ℓ_i`` is ``±φ(x_i)`` in the blocks of two classes,
so ``θ_m = Σ_i Σ_c A_ic φ_m(x_i) e_c`` with one coefficient matrix ``A: (N, n)`` for all kernels:
the state is ``A``, ``G_m = K_m A`` and ``‖θ_m‖² = tr(AᵀK_mA)``, each step costs ``O(P·N)``.

* Online phase: one pass over the training points (a random order), each point once.
* Batch phase: further epochs, each a fresh random order (sampling without replacement).

After ``e`` full epochs (``t = eN``), ``β = A·C/e`` is a feasible Crammer–Singer dual point
(``β_{i,y_i} ≤ C s_i`` because point i was visited ``e`` times) whose primal map is exactly the
iterate, ``w = ∇(½‖Σ_c Φᵀβ_c‖²_{2,q})``; ``F(w) − D(β)`` is therefore a duality gap that
certifies the iterate, checked after the online pass and on a geometric schedule of batch epochs
(:data:`CHECK_EVERY`); stop when the relative gap is ``≤ tol``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from bayesmkl.baselines._base import CLASS_WEIGHT, KERNEL_NAMES, KERNELS, POSITIVE
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._crammer_singer import CrammerSingerMKLBase, class_codes, multiclass_hinge
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex import lp_norm
from bayesmkl.estimators._validation import MAX_TIME, NO_VALIDATION, Interval

__all__ = ["OBSCURE", "ObscureFit", "link_weights", "obscure_certificate", "run_obscure"]

#: The gap is checked after the online pass, after each of the first CHECK_EVERY batch epochs and
#: then every ``e // CHECK_EVERY`` epochs: a check costs ``O(P·N²·n)``, about one epoch, so the
#: schedule keeps its share small and overshoots the epoch where the gap reaches ``tol`` by at most
#: ``1/CHECK_EVERY``.
CHECK_EVERY = 10


def link_weights(sq_norms: np.ndarray, q: float) -> np.ndarray:
    """``c_m = (‖θ_m‖/‖θ‖_{2,q})^{q−2}``, so ``∇_m(½‖θ‖²_{2,q}) = c_m θ_m``.

    ``c`` lies on the unit Lr sphere, ``r = p/(2 − p)``
    (``Σ_m c_m^r = Σ_m (‖θ_m‖/‖θ‖_{2,q})^q = 1``): these are the kernel weights of the iterate.
    ``q = 2`` (``p = 2``) gives ones.
    """
    if q == 2.0:
        return np.ones_like(sq_norms)
    norms = np.sqrt(np.maximum(sq_norms, 0.0))
    total = lp_norm(norms, q)
    return np.zeros_like(norms) if total == 0 else (norms / total) ** (q - 2.0)


class ObscureFit(NamedTuple):
    """Outcome of :func:`run_obscure`.

    Attributes
    ----------
    mu : ndarray (P,)
        Kernel weights of the final iterate (unit Lr sphere).
    beta : ndarray (N, n)
        Its dual point ``A·C/e``: ``f_c = Σ_m μ_m K_m β_c``.
    objectives : ndarray (n_checks,)
        ``F(w)`` at the checked epochs.
    gaps : ndarray (n_checks,)
        Relative duality gaps ``(F(w) − D(β))/F(w)`` at the same points.
    checked : ndarray (n_checks,) of int
        Batch epochs made at each check (0: after the online pass; the last is ``n_iter``).
    n_iter : int
        Batch epochs made.
    n_steps : int
        Stochastic steps made (``(n_iter + 1)·N``).
    """

    mu: np.ndarray
    beta: np.ndarray
    objectives: np.ndarray
    gaps: np.ndarray
    checked: np.ndarray
    n_iter: int
    n_steps: int


def obscure_certificate(K, A, epochs, codes, C, p, sample_weight=None):
    """``(μ, β, F(w), relative gap)`` of the iterate after ``epochs`` full epochs with counts ``A``.

    ``β = A·C/epochs``; ``θ_m = Φ_mᵀβ`` with ``‖θ_m‖² = 2H_m``, ``H_m = ½ Σ_c β_cᵀK_mβ_c``; the
    iterate is ``w_m = μ_m θ_m`` (``μ`` = :func:`link_weights`), with decision values
    ``F = Σ_m μ_m K_m β``, ``‖w_m‖ = μ_m ‖θ_m‖``; the dual value is
    ``D(β) = Σ_i β_{i,y_i} − ½‖θ‖²_{2,q}``.
    """
    P, N, _ = K.shape
    q = p / (p - 1.0) if p < 2 else 2.0
    beta = A * (C / epochs)
    KB = (K.reshape(P * N, N) @ beta).reshape(P, N, -1)
    sq = np.maximum(np.einsum("mic,ic->m", KB, beta), 0.0)
    mu = link_weights(sq, q)
    F = np.einsum("m,mic->ic", mu, KB)
    s = np.ones(N) if sample_weight is None else sample_weight
    loss = C * float(s @ multiclass_hinge(F, codes))
    primal = 0.5 * lp_norm(mu * np.sqrt(sq), p) ** 2 + loss
    dual = float(beta[np.arange(N), codes].sum()) - 0.5 * lp_norm(np.sqrt(sq), q) ** 2
    return mu, beta, primal, (primal - dual) / primal


def run_obscure(K, codes, n_classes, *, C, p, tol, max_iter, max_time, rng, sample_weight=None):
    """Online pass then batch epochs of the p-norm stochastic mirror descent (module docstring).

    Parameters
    ----------
    K : ndarray (P, N, N)
    codes : ndarray (N,)
    n_classes : int
    C, p : float
        Loss weight and the (2, p) norm, ``1 < p ≤ 2``.
    tol : float
        Relative duality gap at which to stop (checked on the :data:`CHECK_EVERY` schedule).
    max_iter : int
        Most batch epochs.
    max_time : float or None
        Wall-clock budget (checked between epochs).
    rng : numpy.random.RandomState
        Draws each epoch's order.
    sample_weight : ndarray (N,), optional
        Scales point i's sub-gradient (and its box ``C·s_i``).

    Returns
    -------
    ObscureFit
    """
    P, N, _ = K.shape
    q = p / (p - 1.0) if p < 2 else 2.0
    s = np.ones(N) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    budget = Budget("OBSCURE", max_iter, max_time, unit="batch epochs")
    A = np.zeros((N, n_classes))
    G = np.zeros((n_classes, P, N))  # G[c, m] = K_m A[:, c]
    sq = np.zeros(P)  # ‖θ_m‖² in units of A
    c = link_weights(sq, q)
    diag = np.einsum("mii->im", K)
    t = 0
    checked, objectives, gaps = [], [], []
    next_check = 0
    while True:
        for i in rng.permutation(N):
            y, w = codes[i], s[i]
            if w == 0.0 or t == 0:  # w_1 = 0: every class ties, the first update is e_y − e_0/1
                f = np.zeros(n_classes)
            else:
                f = (G[:, :, i] @ c) * (C * N / t)  # w_t = ∇(½‖θ‖²)/(λ(t−1)), λ = 1/(CN)
            t += 1
            margins = 1.0 + f - f[y]
            margins[y] = -np.inf
            other = int(np.argmax(margins))
            if w > 0.0 and margins[other] > 0.0:
                sq += 2.0 * w * (G[y, :, i] - G[other, :, i]) + 2.0 * w * w * diag[i]
                G[y] += w * K[:, i, :]
                G[other] -= w * K[:, i, :]
                A[i, y] += w
                A[i, other] -= w
                c = link_weights(sq, q)
        sq = np.einsum("cmi,ic->m", G, A)  # resynchronise the running ‖θ_m‖² (rounding)
        c = link_weights(sq, q)
        n_iter = t // N - 1  # batch epochs so far
        out_of_budget = budget.exhausted(n_iter)
        if n_iter < next_check and not out_of_budget:
            continue
        mu, beta, primal, gap = obscure_certificate(K, A, t // N, codes, C, p, sample_weight)
        checked.append(n_iter)
        objectives.append(primal)
        gaps.append(gap)
        if gap <= tol or out_of_budget:
            break
        next_check = n_iter + max(1, n_iter // CHECK_EVERY)
    if gaps[-1] > tol:
        budget.warn(n_iter, "duality gap")
    return ObscureFit(mu, beta, np.array(objectives), np.array(gaps), np.array(checked), n_iter, t)


@shared_doc
class OBSCURE(CrammerSingerMKLBase):
    """OBSCURE: multiclass p-norm MKL ``½‖w‖²_{2,p} + C Σ ℓ_i`` by online-batch stochastic descent.

    Orabona, Jie & Caputo's online-batch strongly convex MKL: stochastic sub-gradient descent on
    the Crammer–Singer hinge with the strongly convex regulariser ``(λ/2)‖w‖²_{2,p}``
    (``λ = 1/(C·N)``), through the p-norm link ``w = ∇(½‖θ‖²_{2,q})/(λt)``, ``1/p + 1/q = 1``
    (docs/baselines_math.md §(e)). An online phase (one pass over the points) is followed by
    batch epochs until the duality gap that the iterate certifies is ``≤ tol``. The solution is
    M³K's with ``q = p/(2 − p)``; the implied kernel weights are ``μ_m ∝ ‖w_m‖^{2−p}`` on the
    unit Lr sphere, ``r = p/(2 − p)`` (``p = 2``: all ones, the kernel sum; ``p → 1``: L1-MKL).

    Parameters
    ----------
    {{kernels}}
    p : float, default=1.5
        The mixed norm ``(2, p)``, ``1 < p ≤ 2``; smaller is sparser.
    C : float, default=1.0
        Weight of the multiclass hinge loss (the paper's ``λ = 1/(C·N)``).
    tol : float, default=0.02
        Relative duality gap ``(F(w) − D(β)) / F(w)`` at which to stop, checked after the online
        pass, after each of the first 10 batch epochs and then every ``epochs // 10``. The
        method is stochastic: the gap falls roughly as ``1/epochs``, more slowly for larger ``C``
        and more kernels.
    max_iter : int, default=2000
        Maximal number of batch epochs after the online pass.
    random_state : int, RandomState or None
        Order of the points in each epoch.
    {{max_time}}
    {{fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        ``μ_m ∝ ‖w_m‖^{2−p}``, on the unit Lr sphere, ``r = p/(2 − p)``.
    {{normalized_weights_}}
    dual_coef_ : ndarray (n_classes, N)
        The certified dual point ``β_cᵀ`` (``A·C/epochs``);
        ``f_c(x) = Σ_m μ_m Σ_i β_ic k_m(x, x_i)``.
    intercept_ : ndarray (n_classes,)
        Zeros (no intercept).
    objective_ : ndarray (n_checks,)
        Primal objective ``F(w)`` at the checked epochs (see ``tol``).
    gaps_ : ndarray (n_checks,)
        Relative duality gaps at the same points.
    checked_epochs_ : ndarray (n_checks,) of int
        Batch epochs made at each check (0: after the online pass; the last is ``n_iter_``).
    duality_gap_ : float
        ``gaps_[-1]``.
    n_iter_ : int
        Batch epochs made.
    n_steps_ : int
        Stochastic steps made.
    kernel_names_ : list of str
    classes_ : ndarray
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "p": [Interval("real", 1, 2, closed="right")],
        "C": POSITIVE,
        "tol": POSITIVE,
        "max_iter": [Interval("int", 0, None, closed="left")],
        "random_state": NO_VALIDATION,  # check_random_state
        "max_time": MAX_TIME,
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, p=1.5, C=1.0, tol=0.02, max_iter=2000, random_state=None,
        max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.p = p
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        fit = run_obscure(
            K,
            class_codes(Y),
            len(self.classes_),
            C=float(self.C),
            p=float(self.p),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            max_time=self.max_time,
            rng=check_random_state(self.random_state),
            sample_weight=sample_weight,
        )
        self.kernel_weights_ = fit.mu
        self.normalized_weights_ = fit.mu / fit.mu.sum()
        self.dual_coef_ = fit.beta.T.copy()
        self.intercept_ = np.zeros(fit.beta.shape[1])
        self.objective_ = fit.objectives
        self.gaps_ = fit.gaps
        self.checked_epochs_ = fit.checked
        self.duality_gap_ = float(fit.gaps[-1])
        self.n_iter_ = fit.n_iter
        self.n_steps_ = fit.n_steps
