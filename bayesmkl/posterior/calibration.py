"""Calibrated predictive probabilities for BM3KL (no estimator state).

Why. The raw rule of docs/math.md §6, softmax over classes of ψ(f) with
ψ(f) = 2f + 2s·clip(f, −1, 1) and s = √(1 + 2γ0), has slope 2 + 2s ≈ 30 on [−1, 1] at γ0 = 100,
and the pseudo-likelihood pins the training decision values at δ·f ≈ 1; per-draw probabilities
are then 0 or 1 and test log-loss is poor.

The map. Per posterior draw the decision values ``f: (C,)`` become class logits

* single binary classifier (C = 1): ``z = (0, T·f)`` — a temperature (``fit_intercept=True``
  of :func:`fit_calibrator` adds Platt's intercept: ``(0, T·f + β)``);
* C ≥ 2 one-vs-all classifiers: ``z_c = T_c·f_c + β_c`` — a temperature and an intercept per
  class (``β_1 = 0``; ``per_class=False`` of :func:`fit_calibrator` gives one temperature shared
  by the classes, ``z_c = T·f_c``),

and the predictive is the mean over draws of ``softmax(z)``. The binary map only rescales f, so
each draw still votes for the class its classifier chose (Platt's intercept,
``fit_intercept=True``, moves that boundary). The multiclass map is per class because the C
one-vs-all problems are fitted separately and their decision values need not share a scale. The
map's
parameters minimise the log-loss of held-out predictions: leave-one-out by Pareto-smoothed
importance weights of one posterior (``calibration="loo"``,
:func:`bayesmkl.posterior.loo.loo_calibrator`),
or out of fold (K-fold refits, :func:`crossfit_decision_draws`, as ``SVC(probability=True)`` does
for Platt scaling). The map acts on f rather than on ψ(f). Under the paper's prior (γ0 = 100) the
importance weights cannot reach the leave-one-out posterior (no draw puts a training point on
the wrong side, and many points have Pareto k̂ > 0.7), and ``"cv"`` is the map to use there.

Shapes: ``F: (S, M, C)`` decision draws (S draws, M points, C classifiers), ``K`` classes
(``K = 2`` when ``C = 1``), ``codes: (M,)`` integer labels in ``0 … K−1``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp

from bayesmkl.config import with_x64

__all__ = [
    "Calibrator",
    "crossfit_decision_draws",
    "fit_calibrator",
    "log_predictive",
    "log_proba_draws",
]

#: Default number of cross-fitting folds for ``calibration="cv"``.
DEFAULT_FOLDS = 3
#: Above this Pareto k̂ the importance-sampling estimate of a point is unreliable
#: (Vehtari et al. 2024 use min(1 − 1/log10 S, 0.7)).
KHAT_BAD = 0.7


@dataclass(frozen=True)
class Calibrator:
    """Fitted calibration map (plain floats, so it can be stored as JSON attributes).

    Attributes
    ----------
    temperature : float
        T, the slope applied to the decision values.
    intercept : float
        β (single binary classifier fitted with ``fit_intercept=True`` only; 0 otherwise, which
        includes the default map).
    n_classifiers : int
        C of the fit it belongs to (1 = single binary classifier).
    n_folds : int
        Cross-fitting folds used to fit it.
    oof_log_loss : float
        Mean out-of-fold log-loss at the fitted ``(T, β)`` (what the fit minimised).
    oof_log_loss_identity : float
        The same at ``T = 1, β = 0`` (uncalibrated logits f), for reference.
    khat_bad_frac : float
        ``calibration="loo"`` only: the fraction of training points whose Pareto k̂ exceeds
        :data:`KHAT_BAD` (their leave-one-out weights are unreliable); nan for k-fold maps.
    class_temperatures, class_intercepts : tuple of float
        The per-class map of C ≥ 2 classifiers (``per_class=True``): ``T_c`` and ``β_c``
        (``β_1 = 0``), C each; empty for a shared-temperature map, whose ``temperature`` is
        then the slope (a per-class map keeps there the shared temperature it started from).
    """

    temperature: float
    intercept: float
    n_classifiers: int
    n_folds: int
    oof_log_loss: float = float("nan")
    oof_log_loss_identity: float = float("nan")
    khat_bad_frac: float = field(default=float("nan"), compare=False)  # nan: not a LOO map
    class_temperatures: tuple = ()
    class_intercepts: tuple = ()

    def to_dict(self) -> dict:
        """JSON-able dict of the fields (floats, ints and lists of floats)."""
        return {k: _to_json(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> Calibrator:
        """Inverse of :meth:`to_dict` (a dict without the per-class fields: a shared map)."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def log_proba_draws(self, F) -> np.ndarray:
        """Per-draw log class probabilities ``(S, M, K)`` of decision draws ``F: (S, M, C)``."""
        if self.class_temperatures:
            return log_proba_draws(F, np.array(self.class_temperatures),
                                   np.array(self.class_intercepts))  # fmt: skip
        return log_proba_draws(F, self.temperature, self.intercept)


def _to_json(v):
    if isinstance(v, tuple):  # the per-class fields
        return [float(x) for x in v]
    return float(v) if isinstance(v, float) else int(v)


def _logits(F, temperature, intercept):
    F = np.asarray(F, dtype=float)
    u = np.asarray(temperature, dtype=float) * F  # a (C,) temperature scales each class
    if F.shape[-1] == 1:
        u = u + intercept
        return np.concatenate([np.zeros_like(u), u], axis=-1)
    if np.ndim(intercept):  # per-class intercepts (C,)
        u = u + np.asarray(intercept, dtype=float)
    return u


def log_proba_draws(F, temperature: float, intercept: float = 0.0) -> np.ndarray:
    """Per-draw calibrated log probabilities.

    Parameters
    ----------
    F : array (S, M, C)
        Decision draws.
    temperature, intercept : float or array (C,)
        T and β. Scalars: β is used only when C = 1. Arrays of length C (C ≥ 2): the per-class
        map ``z_c = T_c·f_c + β_c``.

    Returns
    -------
    ndarray (S, M, K)
        ``log_softmax`` of the logits (finite; no log of 0).
    """
    return log_softmax(_logits(F, temperature, intercept), axis=-1)


def log_predictive(log_p_draws, axis: int = 0) -> np.ndarray:
    """``log mean_s p_s`` along ``axis``, by log-sum-exp (finite when the inputs are)."""
    log_p_draws = np.asarray(log_p_draws, dtype=float)
    return logsumexp(log_p_draws, axis=axis) - np.log(log_p_draws.shape[axis])


# ----------------------------------------------------------------------------------------
# the objective's terms, compiled
# ----------------------------------------------------------------------------------------
# The objective reads every (draw, point) value about 20 times per fit (L-BFGS-B's evaluations,
# two starts): each evaluation is one compiled pass per block, the exponentials, logarithms and
# sums fused.


def _log_sigmoid(x):
    """``(log σ(x), σ(−x))`` from one exponential t = exp(−|x|): log σ(x) = min(x, 0) −
    log1p(t); σ(−x) = t / (1 + t) for x ≥ 0, 1 / (1 + t) below (both finite for finite x)."""
    t = jnp.exp(-jnp.abs(x))
    return jnp.minimum(x, 0.0) - jnp.log1p(t), jnp.where(x >= 0, t, 1.0) / (1.0 + t)


def _log_normalise(a):
    """``(log Σ_s exp(a_s), exp(a_s) / Σ_s exp(a_s))`` over axis 0 (the draws) from one set
    of exponentials: each point's log predictive and its responsibilities over the draws."""
    m = jnp.max(a, axis=0)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.exp(a - m)
    s = jnp.sum(e, axis=0)
    return m + jnp.log(s), e / s


@jax.jit
def _binary_block(theta, F, codes, log_w, pw):
    """One block's share of the single binary classifier's objective: ``(Σ_i pw_i lp_i,
    its gradient in θ = (T, β))`` for the logit u = T·f + β, with lp_i the point's log
    predictive (its draws weighted by ``log_w``); ``F (1, S, n)`` as :func:`_on_device` lays
    it out. With r the draws' responsibilities and σ = ±1 the label's sign,
    ∂/∂u log p(y | u) = σ·(1 − p(y | u))."""
    f = F[0]  # (S, n)
    sign = jnp.where(codes == 1, 1.0, -1.0)[None, :]
    ll, q = _log_sigmoid(sign * (theta[0] * f + theta[1]))  # log p(y_i | draw s), 1 − p
    lp, r = _log_normalise(log_w + ll)
    dl_du = r * pw[None, :] * sign * q
    return jnp.dot(pw, lp), jnp.stack([jnp.sum(dl_du * f), jnp.sum(dl_du)])


@jax.jit
def _softmax_block(T, beta, F, codes, log_w, pw):
    """One block's share of the multiclass objectives: ``(Σ_i pw_i lp_i, g_T (C,), g_β (C,))``
    for the logits z_c = T_c f_c + β_c, g the gradient of the sum; ``F (C, S, n)`` as
    :func:`_on_device` lays it out (the class axis first, so that the softmax's maximum and
    sum over the classes run over planes, not over a short last axis). With r the draws'
    responsibilities and q_c the softmax, ∂/∂T_c = Σ r (1[c = y] − q_c) f_c and
    ∂/∂β_c = Σ r (1[c = y] − q_c)."""
    z = T[:, None, None] * F + beta[:, None, None]  # (C, S, n)
    m = jnp.max(z, axis=0)
    z = z - jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.exp(z)
    total = jnp.sum(e, axis=0)  # (S, n)
    own = jax.nn.one_hot(codes, F.shape[0], dtype=F.dtype).T[:, None, :]  # (C, 1, n)
    ll = jnp.sum(z * own, axis=0) - jnp.log(total)
    lp, r = _log_normalise(log_w + ll)
    r = r * pw[None, :]
    resid = own - e / total  # 1[c = y] − q_c
    rr = r * resid
    g_T = jnp.sum(rr * F, axis=(1, 2))
    g_beta = jnp.sum(rr, axis=(1, 2))
    return jnp.dot(pw, lp), g_T, g_beta


# ----------------------------------------------------------------------------------------
# fitting (T, β)
# ----------------------------------------------------------------------------------------


#: Most decision values ``S·n·C`` of one block that :func:`_nll_and_grad` reads at once: its
#: compiled pass holds temporaries as large (at S = 2,000 draws of N = 13,314 points, in one
#: block, 213 MB each). Larger blocks are cut into blocks of points, which :func:`_on_device`
#: copies once (together as large as the decision draws).
BLOCK_ENTRIES = 2**22


def point_slices(n: int, per_point: int, entries: int) -> list[slice]:
    """Consecutive slices of ``n`` points, each of at most ``entries`` values at ``per_point``
    values a point (at least one point a slice); one slice of all when they fit."""
    step = max(1, entries // max(per_point, 1))
    return [slice(i, min(n, i + step)) for i in range(0, n, step)] or [slice(0, 0)]


def _point_blocks(blocks):
    """``blocks`` with each ``(F, codes, log_w, pw)`` of more than :data:`BLOCK_ENTRIES` values
    cut into consecutive blocks of points; smaller ones as they are (the same sums, in the same
    order)."""
    out = []
    for F, codes, lw, pw in blocks:
        S, n, C = F.shape
        cuts = point_slices(n, S * C, BLOCK_ENTRIES)
        if len(cuts) == 1:
            out.append((F, codes, lw, pw))
            continue
        out.extend((F[:, c], codes[c], lw[:, c], pw[c]) for c in cuts)
    return out


def _normalised_columns(lw):
    """``lw − logsumexp(lw, axis=0)``: each point's log weights over the draws normalised, a
    block of points of at most :data:`BLOCK_ENTRIES` values at a time (the same values; no
    temporaries of the whole ``(S, N)``)."""
    out = np.empty_like(lw)
    for c in point_slices(lw.shape[1], lw.shape[0], BLOCK_ENTRIES):
        out[:, c] = lw[:, c] - logsumexp(lw[:, c], axis=0, keepdims=True)
    return out


@with_x64
def _nll_and_grad(theta, blocks, single, n_total):
    """Mean out-of-fold negative log predictive and its gradient in ``theta = (T, β)``.

    ``blocks``: :func:`_on_device` of a list of ``(F (S_k, n_k, C), codes (n_k,),
    log_w (S_k, n_k), pw (n_k,))``; ``log_w`` are normalised log weights over the draws of each
    point (uniform for plain out-of-fold draws), ``pw`` the points' sample weights (ones
    without); ``n_total`` is the sum of all ``pw``. For C ≥ 2 classifiers one temperature
    scales every class (β unused).
    """
    nll = 0.0
    grad = np.zeros(2)
    for F, codes, log_w, pw in blocks:
        if single:
            loss, g = _binary_block(jnp.asarray(theta, dtype=jnp.float64), F, codes, log_w, pw)
            grad -= np.asarray(g)
        else:
            C = F.shape[0]
            T = jnp.full(C, theta[0], dtype=jnp.float64)
            loss, g_T, _ = _softmax_block(T, jnp.zeros(C), F, codes, log_w, pw)
            grad[0] -= float(jnp.sum(g_T))
        nll -= float(loss)
    return nll / n_total, grad / n_total


@with_x64
def _nll_and_grad_per_class(theta, blocks, n_total):
    """:func:`_nll_and_grad` of the per-class map, ``theta = (T_1 … T_C, β_2 … β_C)``."""
    C = blocks[0][0].shape[0]
    T = jnp.asarray(theta[:C], dtype=jnp.float64)
    beta = jnp.asarray(np.r_[0.0, theta[C:]], dtype=jnp.float64)
    nll = 0.0
    grad = np.zeros(2 * C)
    for F, codes, log_w, pw in blocks:
        loss, g_T, g_beta = _softmax_block(T, beta, F, codes, log_w, pw)
        nll -= float(loss)
        grad[:C] -= np.asarray(g_T)
        grad[C:] -= np.asarray(g_beta)
    return nll / n_total, np.r_[grad[:C], grad[C + 1 :]] / n_total


@with_x64
def _on_device(blocks):
    """``blocks`` of ``(F (S, n, C), codes, log_w, pw)`` as the objectives read them, put on
    the device once for all their evaluations: float64 JAX arrays (labels int32), F with the
    class axis first ``(C, S, n)``."""
    return [
        (jnp.asarray(np.moveaxis(F, -1, 0), jnp.float64), jnp.asarray(codes, jnp.int32),
         jnp.asarray(lw, jnp.float64), jnp.asarray(pw, jnp.float64))
        for F, codes, lw, pw in blocks
    ]  # fmt: skip


def fit_calibrator(
    fold_draws,
    fold_codes,
    *,
    gamma0: float,
    log_weights=None,
    n_folds: int | None = None,
    point_weights=None,
    fit_intercept: bool = False,
    per_class: bool = False,
) -> Calibrator:
    """Fit the map (``(T, β)``, or ``T_c, β_c`` per class) by minimising the log-loss of
    held-out predictions.

    Parameters
    ----------
    fold_draws : list of arrays (S_k, n_k, C)
        Decision draws of the held-out points of each fold (or one block for all points).
    fold_codes : list of int arrays (n_k,)
        Their labels in ``0 … K−1``.
    gamma0 : float
        γ0 of the model; bounds T by the raw rule's slope 2 + 2√(1 + 2γ0), so calibration never
        sharpens the raw rule (and T stays finite when the held-out points are separable). The
        bound binds for the PSIS-LOO map on well-separated sets.
    log_weights : list of arrays (S_k, n_k), optional
        Normalised log weights of the draws per point (e.g. PSIS-LOO weights); default uniform.
    n_folds : int, optional
        Recorded in the result (default ``len(fold_draws)``).
    point_weights : list of arrays (n_k,), optional
        Sample weights of the held-out points: the weighted mean log-loss is minimised (the
        same weights as the fit's likelihood). Default: every point weighs 1.
    fit_intercept : bool, default False
        Single binary classifier only: also fit a Platt intercept β (logits ``(0, T·f + β)``).
        Off by default, so the map only rescales f and the predicted class is the classifier's
        own (mean over draws of σ(T·f) above ½).
    per_class : bool, default False
        C ≥ 2 classifiers only (ignored for C = 1): after the shared temperature, fit a
        temperature and an intercept per class (2C − 1 parameters, ``β_1 = 0``; each ``T_c``
        bounded like T), starting from the shared map. The estimator's multiclass map.

    Returns
    -------
    Calibrator
    """
    blocks = []
    for k, (F, codes) in enumerate(zip(fold_draws, fold_codes, strict=True)):
        F = np.asarray(F, dtype=float)
        codes = np.asarray(codes, dtype=np.int64)
        if F.ndim != 3 or F.shape[1] != codes.shape[0]:
            raise ValueError(f"fold {k}: F must be (S, n, C) with n = len(codes); got {F.shape}")
        if log_weights is None:
            lw = np.full(F.shape[:2], -np.log(F.shape[0]))
        else:
            lw = _normalised_columns(np.asarray(log_weights[k], dtype=float))
        if point_weights is None:
            pw = np.ones(codes.shape[0])
        else:
            pw = np.asarray(point_weights[k], dtype=float)
            if pw.shape != codes.shape or not np.all(np.isfinite(pw)) or np.any(pw < 0):
                raise ValueError(f"fold {k}: point_weights must be {codes.shape[0]} weights >= 0")
        blocks.append((F, codes, lw, pw))
    C = blocks[0][0].shape[-1]
    single = C == 1
    n_total = sum(float(b[3].sum()) for b in blocks)
    blocks = _on_device(_point_blocks(blocks))
    if not n_total > 0:
        raise ValueError("fit_calibrator: the held-out points have zero total weight")
    t_max = 2.0 + 2.0 * float(np.sqrt(1.0 + 2.0 * gamma0))
    bounds = [(1e-6, t_max), (-20.0, 20.0) if single and fit_intercept else (0.0, 0.0)]
    identity = float(_nll_and_grad(np.array([1.0, 0.0]), blocks, single, n_total)[0])
    if not np.isfinite(identity):  # NaN or infinite draws or weights: no map can be fitted
        raise ValueError(
            "fit_calibrator: the held-out log-loss is not finite at T = 1; the decision draws "
            "or the log weights hold NaN or infinite values"
        )
    best = None
    for t0 in (1.0, 0.1 * t_max):  # two starts: the loss is not convex in T for averaged draws
        res = minimize(
            _nll_and_grad,
            np.array([min(t0, t_max), 0.0]),
            args=(blocks, single, n_total),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
        )
        if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    T, beta = (1.0, 0.0) if best is None else (float(best.x[0]), float(best.x[1]))
    loss = float(best.fun) if best is not None else float("nan")
    per = {}
    if per_class and not single:
        res = minimize(
            _nll_and_grad_per_class,
            np.r_[np.full(C, T), np.zeros(C - 1)],
            args=(blocks, n_total),
            jac=True,
            method="L-BFGS-B",
            bounds=[(1e-6, t_max)] * C + [(-20.0, 20.0)] * (C - 1),
        )
        if np.isfinite(res.fun) and not res.fun > loss:  # never worse than its start
            loss = float(res.fun)
            per = {"class_temperatures": tuple(float(t) for t in res.x[:C]),
                   "class_intercepts": (0.0, *(float(b) for b in res.x[C:]))}  # fmt: skip
        else:
            per = {"class_temperatures": (T,) * C, "class_intercepts": (0.0,) * C}
    return Calibrator(
        temperature=T,
        intercept=beta if single and fit_intercept else 0.0,
        n_classifiers=int(C),
        n_folds=int(n_folds if n_folds is not None else len(blocks)),
        oof_log_loss=loss,
        oof_log_loss_identity=identity,
        **per,
    )


# ----------------------------------------------------------------------------------------
# cross-fitting
# ----------------------------------------------------------------------------------------


def crossfit_decision_draws(
    estimator, K, y, *, n_folds: int, seed: int, sample_weight=None, deadline=None, already=(),
    n_landmarks=None,
):  # fmt: skip
    """Out-of-fold decision draws of every training point by K-fold refits.

    The folds are fitted on slices of the training kernels (``kernels="precomputed"``), so the
    kernels are not recomputed and a fit from features and one from the same precomputed
    kernels get the same map. (The pool's standardisation was estimated on all training
    points, held-out ones included: features only, no labels.)

    Parameters
    ----------
    estimator : BM3KLClassifier
        Its parameters are copied (``sklearn.base.clone``) with ``kernels="precomputed"``,
        ``calibration=None``, ``kernel_dtype=None``, no progress bar, ``n_landmarks=M`` for a
        landmark fit and, after a fit, the ``num_samples`` that fit used; fold ``k`` uses
        ``random_state = seed + 1 + k``.
        With a ``deadline``, each fold's ``max_time`` is its share of the time left (the folds
        not yet run share it equally).
    K : array (P, N, N)
        Training kernels (a landmark fit's ``(P, N, M)``).
    y : array (N,)
    n_folds : int
        Stratified folds (reduced to the smallest class count when needed, with a warning;
        at least 2).
    seed : int
        Seed of the fold split and of the fold fits.
    sample_weight : array (N,), optional
        Effective per-sample weights (class weights already multiplied in); each fold fit gets
        its slice, with ``class_weight=None`` so that class weights are not applied twice.
    deadline : float, optional
        :func:`time.perf_counter` reading by which the refits must end.
    already : tuple of warning classes, optional
        Classes the main fit has already warned with: the refits' warnings of these classes
        are not re-raised (a fixed-length fit that did not converge warns once, not once
        more for its refits, which run as many sweeps).
    n_landmarks : int, optional
        The fit's landmarks M (its resolved ``n_landmarks``; ``None``: the exact model): the
        refits then keep K's columns, the landmarks.

    Returns
    -------
    draws : list of arrays (S_k, n_k, C)
        Decision draws of the held-out points of fold k, from the fit without them.
    index : list of int arrays (n_k,)
        Positions of the held-out points of each fold.
    """
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold

    K = np.asarray(K)
    y = np.asarray(y)
    _, counts = np.unique(y, return_counts=True)
    k = int(min(n_folds, counts.min()))
    if k < 2:
        raise ValueError(
            "calibration needs at least 2 training points of every class for cross-fitting; "
            f"the smallest class has {counts.min()}; use calibration=None"
        )
    if k < n_folds:
        warnings.warn(
            f"calibration: cross-fitting uses {k} folds instead of the {n_folds} asked for, "
            f"because the smallest class has only {counts.min()} training points (stratified "
            "folds need one point of every class each); the calibration map is fitted on "
            f"{k} refits of {k - 1}/{k} of the data",
            UserWarning,
            stacklevel=4,
        )
    split = StratifiedKFold(k, shuffle=True, random_state=seed % (2**32 - 1))
    # a data-driven run is not repeated per fold: each refit runs the sweeps the main fit used
    report = getattr(estimator, "run_report_", None)
    # (at least one: a main fit whose max_time ran out in warm-up kept none)
    fixed_length = {"num_samples": max(1, int(report.num_samples))} if report is not None else {}
    draws, index, caught = [], [], {}
    # a landmark fit (docs/math.md §16): K (P, N, M); the refits keep its landmarks
    landmark = n_landmarks is not None
    landmark_params = {"n_landmarks": int(n_landmarks)} if landmark else {}
    for fold, (tr, va) in enumerate(split.split(np.zeros(len(y)), y)):
        if deadline is not None:  # the folds left share what is left of the fit's budget
            budget = {"max_time": max((deadline - time.perf_counter()) / (k - fold), 1e-3)}
        else:
            budget = {}
        sub = clone(estimator).set_params(
            kernels="precomputed",
            calibration=None,
            kernel_dtype=None,
            progress_bar=False,
            random_state=(seed + 1 + fold) % (2**31 - 1),
            class_weight=None,
            **landmark_params,
            **fixed_length,
            **budget,
        )
        sw = None if sample_weight is None else np.asarray(sample_weight)[tr]
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            if landmark:  # the columns are the landmarks, kept by every refit
                sub.fit(K[:, tr], y[tr], sample_weight=sw)
                F = sub.decision_draws(K[:, va])
            else:
                sub.fit(K[:, tr][:, :, tr], y[tr], sample_weight=sw)
                F = sub.decision_draws(K[:, va][:, :, tr])
        for w in rec:
            if not issubclass(w.category, tuple(already)):
                caught.setdefault(w.category, {}).setdefault(str(w.message), []).append(fold)
        draws.append(np.asarray(F, dtype=float))
        index.append(np.asarray(va))
    _rewarn(caught, k)
    return draws, index


def _rewarn(caught: dict, n_folds: int) -> None:
    """Re-raise the warnings of the fold fits, one per warning class and *in that class*.

    ``caught``: ``{category: {message: [folds]}}``. A refit's ``SamplerDivergenceWarning`` is
    re-raised as a ``SamplerDivergenceWarning``, a ``ConvergenceWarning`` as a
    ``ConvergenceWarning``, and so on, so a warnings filter on a class treats a refit's warning
    as it treats the main fit's; the message says it came from the calibration refits, from
    which folds, and gives (up to three) distinct messages.
    """
    for category, messages in caught.items():
        folds = sorted({f for fs in messages.values() for f in fs})
        distinct = list(messages)
        warnings.warn(
            f"{len(folds)} of the {n_folds} cross-fitting refits for calibration (fold"
            f"{'s' if len(folds) > 1 else ''} {', '.join(map(str, folds))}) warned: "
            + " | ".join(distinct[:3])
            + (f" (+{len(distinct) - 3} more)" if len(distinct) > 3 else ""),
            category,
            stacklevel=6,  # _rewarn, crossfit, _fit_calibration, fit, with_x64, the caller
        )
