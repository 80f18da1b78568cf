"""What a classifier's posterior gives, as pure functions of decision draws and labels.

Decision draws ``F: (S, M, C)`` (:func:`bayesmkl.posterior.predictive.posterior_decision_values`)
become per-draw class probabilities under the raw rule of docs/math.md §6 or a fitted
:class:`~bayesmkl.posterior.calibration.Calibrator` (:func:`log_proba_draws`,
:func:`proba_draws`); the calibration map is fitted on PSIS-LOO-weighted training draws
(:func:`loo_calibration`) or on the out-of-fold draws of refits (:func:`crossfit_calibration`);
:func:`label_log_likelihood` is the per-draw log probability of the training labels (the
DataTree's ``log_likelihood`` group) and :func:`probability_mcse` the Monte Carlo error of
predicted probabilities. Nothing here holds or reads estimator state.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp

from bayesmkl.config import x64_scope
from bayesmkl.model.likelihood import log_pseudo_likelihood_terms
from bayesmkl.posterior import calibration as _calibration
from bayesmkl.posterior import loo as _loo
from bayesmkl.posterior.checks import check_predictions
from bayesmkl.posterior.predictive import draw_log_probabilities, draw_probabilities

__all__ = [
    "AFTER_FIT_ENTRIES",
    "LOO_KHAT_WARN",
    "MIN_MAP_POINTS",
    "crossfit_calibration",
    "label_log_likelihood",
    "log_proba_draws",
    "loo_calibration",
    "loo_map",
    "loo_predictive",
    "loo_weights",
    "map_points",
    "map_size",
    "probability_mcse",
    "proba_draws",
    "training_blocks",
]

#: ``calibration="loo"`` warns above this share of training points with Pareto k̂ > 0.7, and always
#: under the paper's prior, where the LOO map is far worse than the k-fold one.
LOO_KHAT_WARN = 0.3
#: Most decision values (draws × points × classifiers, float64) that ``fit`` holds at once after
#: sampling: the calibration map is fitted on a subset of the training points above it
#: (:func:`map_points`) and the values kept at every training point are computed in blocks of
#: points (:func:`training_blocks`).
AFTER_FIT_ENTRIES = 2**26
#: Fewest training points a calibration map is fitted on (all of them when there are fewer).
MIN_MAP_POINTS = 1_000


def probability_mcse(P, n_chains: int) -> np.ndarray:
    """Monte Carlo standard error of the mean over draws of ``P: (S, M, K)``, whose S draws are
    ``n_chains`` chains stored one after the other; ``(M, K)``, 0 where P does not vary, and
    nan everywhere with a single draw per chain (no variation to measure, not a zero error)."""
    from arviz_stats.base import array_stats

    S = P.shape[0]
    if S // n_chains < 2:
        return np.full(P.shape[1:], np.nan)
    x = np.moveaxis(P.reshape(n_chains, S // n_chains, *P.shape[1:]), (0, 1), (-2, -1))
    varying = np.ptp(P, axis=0) > 1e-12
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.asarray(array_stats.mcse(x, chain_axis=-2, draw_axis=-1, method="mean"))
    return np.where(varying, se, 0.0)


def log_proba_draws(F, *, gamma0: float, calibrator=None) -> np.ndarray:
    """Per-draw log class probabilities ``(S, M, K)`` of decision draws ``F: (S, M, C)``: the
    ``calibrator``'s map, or without one the raw rule log softmax(ψ(f)) at ``gamma0``."""
    if calibrator is None:
        return np.asarray(draw_log_probabilities(F, gamma0))
    return calibrator.log_proba_draws(F)


def proba_draws(F, *, gamma0: float, calibrator=None) -> np.ndarray:
    """Per-draw class probabilities ``(S, M, K)`` of ``F: (S, M, C)`` (as
    :func:`log_proba_draws`), refused (``NonFinitePredictionError``) where not finite."""
    if calibrator is None:
        P = draw_probabilities(F, gamma0)
    else:
        P = np.exp(calibrator.log_proba_draws(F))
    return check_predictions(P, "probabilities")


#: Most decision values ``S·n·C`` whose per-draw log probabilities (and their temporaries, each
#: as large) :func:`label_log_proba` computes at once; more go in blocks of points. At S = 2,000
#: draws of N = 13,314 points every such array is 213 MB, and the label log-likelihood held
#: about ten of them at once (2.2 GB).
POINT_BLOCK_ENTRIES = _calibration.BLOCK_ENTRIES


def label_log_proba(F, codes, log_proba) -> np.ndarray:
    """``log_proba(F)[:, i, codes[i]]`` ``(S, N)`` for decision draws ``F: (S, N, C)``, with
    ``log_proba`` a map ``(S, n, C) → (S, n, K)`` that acts point by point; computed in blocks
    of points of at most :data:`POINT_BLOCK_ENTRIES` values (the same values: one block unless
    F is larger)."""
    S, N, C = F.shape
    codes = np.asarray(codes)
    cuts = _calibration.point_slices(N, S * C, POINT_BLOCK_ENTRIES)
    if len(cuts) == 1:
        return np.asarray(log_proba(F))[:, np.arange(N), codes]
    out = np.empty((S, N))
    for c in cuts:
        out[:, c] = np.asarray(log_proba(F[:, c]))[:, np.arange(c.stop - c.start), codes[c]]
    return out


def _point_log_lik(F, delta, gamma0, sample_weight=None) -> np.ndarray:
    """Each training point's factor of the posterior per draw, ``(S, N)``: the pseudo-likelihood
    terms of ``F: (S, N, C)`` summed over the classifiers, in blocks of points of at most
    :data:`POINT_BLOCK_ENTRIES` values (one block unless F is larger)."""
    S, N, C = F.shape
    delta = np.asarray(delta)
    weights = None if sample_weight is None else np.asarray(sample_weight)
    out = np.empty((S, N))
    with x64_scope():
        for c in _calibration.point_slices(N, S * C, POINT_BLOCK_ENTRIES):
            F_cn = np.swapaxes(F[:, c], 1, 2)
            weight = None if weights is None else weights[c]
            terms = log_pseudo_likelihood_terms(F_cn, delta[None, :, c], gamma0, weight)
            out[:, c] = np.asarray(terms).sum(axis=1)
    return out


def label_log_likelihood(F, codes, draws_shape, *, gamma0: float, calibrator=None) -> np.ndarray:
    """Per draw, the log probability of each label ``codes: (N,)`` given decision draws
    ``F: (S, N, C)`` (as :func:`log_proba_draws`), shaped ``draws_shape + (N,)`` (``(chains,
    draws, N)``)."""
    lp = label_log_proba(
        F, codes, lambda Fb: log_proba_draws(Fb, gamma0=gamma0, calibrator=calibrator)
    )
    return lp.reshape(*draws_shape, len(codes))


def loo_calibration(F, codes, delta, *, gamma0: float, sample_weight=None, always_warn=False):
    """``calibration="loo"``: the map fitted on PSIS-LOO-weighted training draws, and each
    training point's calibrated leave-one-out log predictive ``(N,)`` (no refit).

    ``F: (S, N, C)`` are the decision draws of the training points, ``codes`` their labels,
    ``delta: (C, N)`` the ±1 targets and ``sample_weight`` the fit's weights (or ``None``).
    Warns as :func:`loo_map` does. The same as :func:`loo_map` then :func:`loo_predictive`.
    """
    cal, log_w = loo_map(F, codes, delta, gamma0=gamma0, sample_weight=sample_weight,
                         always_warn=always_warn)  # fmt: skip
    return cal, loo_predictive(F, codes, log_w, cal)


def loo_weights(F, delta, *, gamma0: float, sample_weight=None) -> tuple:
    """``(log_w (S, N), khat (N,))``: the PSIS-LOO log weights of each training point's draws
    (:func:`~bayesmkl.posterior.loo.psis_log_weights` of its pseudo-likelihood factor), from
    its decision draws ``F: (S, N, C)``; each point's weights depend on its own draws only."""
    return _loo.psis_log_weights(_point_log_lik(F, delta, gamma0, sample_weight))


def loo_map(F, codes, delta, *, gamma0: float, sample_weight=None, always_warn=False):
    """``(Calibrator, log_w (S, N))``: the ``calibration="loo"`` map fitted on the
    PSIS-LOO-weighted draws ``F: (S, N, C)`` of the training points it is given, and their
    log weights (:func:`loo_weights`).

    Warns (``UserWarning``) when the draws are too few for Pareto smoothing, when more than
    :data:`LOO_KHAT_WARN` of the points have k̂ above the reliable range, or whenever
    ``always_warn`` (the paper's prior).
    """
    log_w, khat = loo_weights(F, delta, gamma0=gamma0, sample_weight=sample_weight)
    cal = _loo._calibrator_from_weights(
        F, codes, log_w, khat, gamma0=gamma0, point_weights=sample_weight, per_class=True,
    )  # fmt: skip
    if F.shape[0] < _loo.MIN_PSIS_DRAWS:
        warnings.warn(
            f"calibration='loo': {F.shape[0]} posterior draws are too few for Pareto "
            f"smoothing (it needs {_loo.MIN_PSIS_DRAWS}); the probability map was fitted on "
            "unsmoothed leave-one-out weights and may be overconfident. Raise num_samples, "
            "or use calibration='cv'.",
            UserWarning,
            stacklevel=4,
        )
    elif cal.khat_bad_frac > LOO_KHAT_WARN or always_warn:
        warnings.warn(
            f"calibration='loo': {cal.khat_bad_frac:.0%} of the training points have Pareto "
            f"k > {_calibration.KHAT_BAD}, so their leave-one-out weights are unreliable and "
            "the probability map may be overconfident; calibration='cv' refits instead "
            "(3 more fits). Under prior='paper' the LOO map is known to be poor.",
            UserWarning,
            stacklevel=4,
        )
    return cal, log_w


def loo_predictive(F, codes, log_w, cal) -> np.ndarray:
    """Each training point's calibrated leave-one-out log predictive ``(N,)`` under the map
    ``cal``, from its decision draws ``F: (S, N, C)``, label ``codes`` and PSIS log weights
    ``log_w: (S, N)`` (:func:`loo_weights`); a block of points at a time, so no (S, N)
    temporaries."""
    S, N, C = F.shape
    codes = np.asarray(codes)
    loo = np.empty(N)
    for c in _calibration.point_slices(N, S * C, POINT_BLOCK_ENTRIES):
        lp = label_log_proba(F[:, c], codes[c], cal.log_proba_draws)
        loo[c] = logsumexp(lp + log_w[:, c], axis=0)
    return loo


def map_points(n_points: int, per_point: int, seed: int):
    """The training points the calibration map is fitted on: ``None`` (all of them) when their
    decision draws, ``per_point`` values a point (draws × classifiers), number at most
    :data:`AFTER_FIT_ENTRIES`; else a random subset (fixed by ``seed``, sorted) of as many
    points as fit in that number, and at least :data:`MIN_MAP_POINTS`.

    The subset bounds the memory and the time of the map's fit: all the points of a large
    multi-class fit would hold draws × points × classes values (12 GB in float64 at 4,200
    draws, 14,000 rows and 26 classes), and each evaluation of the map's objective reads them
    all. The map's per-class parameters then rest on fewer points (docs/benchmarks.md, "Large
    data sets", gives the cost in log-loss).

    Examples
    --------
    >>> map_points(398, 4_400, seed=0) is None
    True
    >>> len(map_points(7_694, 42_000, seed=0))  # 4,200 draws of 10 classes
    1597
    """
    n = map_size(n_points, per_point)
    if n >= n_points:
        return None
    return np.sort(np.random.default_rng(seed).choice(n_points, n, replace=False))


def map_size(n_points: int, per_point: int) -> int:
    """How many of ``n_points`` training points the calibration map is fitted on
    (:func:`map_points`): all of them, or as many as :data:`AFTER_FIT_ENTRIES` holds at
    ``per_point`` values a point and at least :data:`MIN_MAP_POINTS`."""
    return min(int(n_points), max(MIN_MAP_POINTS, AFTER_FIT_ENTRIES // max(int(per_point), 1)))


def training_blocks(n_points: int, per_point: int) -> list[slice]:
    """Consecutive slices of the training points whose decision draws, ``per_point`` values a
    point, number at most :data:`AFTER_FIT_ENTRIES` (one slice when they all do): the blocks in
    which ``fit`` computes what it keeps at every training point."""
    return _calibration.point_slices(n_points, per_point, AFTER_FIT_ENTRIES)


def crossfit_calibration(fold_draws, fold_index, codes, *, gamma0: float, sample_weight=None):
    """The map fitted on out-of-fold decision draws, and each training point's calibrated log
    predictive under the fold fit that held it out ``(N,)``.

    ``fold_draws``, ``fold_index``: what
    :func:`~bayesmkl.posterior.calibration.crossfit_decision_draws` returns; ``codes: (N,)``
    the labels, ``sample_weight`` the fit's weights (or ``None``), which weight the log-loss.
    """
    fold_codes = [codes[i] for i in fold_index]
    pw = None if sample_weight is None else [sample_weight[i] for i in fold_index]
    cal = _calibration.fit_calibrator(
        fold_draws, fold_codes, gamma0=gamma0, n_folds=len(fold_draws),
        point_weights=pw, per_class=True,  # per class for C ≥ 2 classifiers
    )  # fmt: skip
    oof = np.empty(len(codes))
    for F, i, c in zip(fold_draws, fold_index, fold_codes, strict=True):
        lp = cal.log_proba_draws(F)[:, np.arange(len(c)), c]
        oof[i] = _calibration.log_predictive(lp)
    return cal, oof
