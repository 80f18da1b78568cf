"""Leave-one-out without refits: PSIS weights, the LOO calibration map, and the k-fold ELPD.

:func:`psis_log_weights` turns per-draw pseudo-likelihood factors into Pareto-smoothed
leave-one-out weights (Vehtari et al. 2024); :func:`loo_calibrator` fits the calibration map of
:mod:`bayesmkl.posterior.calibration` on those weights (``calibration="loo"``: no refit);
:func:`kfold_elpd`
packages out-of-fold log predictives for ArviZ's comparisons.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
from scipy.special import logsumexp

from bayesmkl.posterior.calibration import KHAT_BAD, Calibrator, fit_calibrator, log_predictive

__all__ = ["kfold_elpd", "loo_calibrator", "psis_log_weights"]


# ----------------------------------------------------------------------------------------
# PSIS
# ----------------------------------------------------------------------------------------

#: Share of training points with Pareto k̂ above 0.7 from which a PSIS-LOO estimate is flagged
#: (its warning names :func:`bayesmkl.compare_kfold`).
KHAT_SHARE_WARN = 0.3

#: Fewest draws (chains × draws) PSIS can use: ArviZ fits the Pareto tail to ``floor(S / 5)``
#: draws (for ``S·r_eff <= 225``) and needs at least 5 tail draws.
MIN_PSIS_DRAWS = 25


def psis_log_weights(log_lik, r_eff=1.0):
    """Pareto-smoothed leave-one-out log weights from per-draw log-likelihood factors.

    The importance ratio of draw s for leaving point i out is ``1 / L_i(θ_s)``, with ``L_i`` the
    factor of point i in the posterior. Smoothing and k̂ come from ArviZ
    (``arviz_stats.base.array_stats.psislw``, which takes the log-likelihood and negates it).
    Points ArviZ cannot smooth fall back to plain normalised ratios with ``k̂ = nan``: fewer
    than :data:`MIN_PSIS_DRAWS` draws (tail shorter than 5), or a tail ArviZ refuses; with enough
    draws a constant factor gives uniform weights with k̂ = 0.

    Parameters
    ----------
    log_lik : array (S, N)
        ``log L_i(θ_s)``.
    r_eff : float or array (N,), default 1.0
        Relative efficiency of the draws (sets the tail length).

    Returns
    -------
    log_weights : ndarray (S, N)
        Normalised over draws (``logsumexp`` over axis 0 is 0).
    khat : ndarray (N,)
    """
    from arviz_stats.base import array_stats

    log_lik = np.asarray(log_lik, dtype=float)
    S, N = log_lik.shape
    r_eff = np.broadcast_to(np.asarray(r_eff, dtype=float), (N,))
    lw = np.empty((S, N))
    khat = np.empty(N)
    for i in range(N):
        col = log_lik[:, i]
        if S >= MIN_PSIS_DRAWS:  # fewer: a tail < 5 draws (< 1 below 5 draws: an IndexError)
            if np.ptp(col) <= 1e-12 * max(1.0, np.max(np.abs(col))):
                lw[:, i], khat[i] = -np.log(S), 0.0
                continue
            try:
                lw[:, i], khat[i] = array_stats.psislw(col, r_eff=float(r_eff[i]), axis=-1)
                continue
            except ValueError:
                pass
        lw[:, i], khat[i] = -col - logsumexp(-col), np.nan
    return lw, khat


def loo_calibrator(
    F, codes, log_lik, *, gamma0: float, point_weights=None, per_class: bool = False
) -> Calibrator:
    """Fit the map (temperature T) on PSIS-LOO-weighted training draws of one posterior (no refit).

    Each training point's decision draws are reweighted towards its leave-one-out posterior
    with the Pareto-smoothed importance ratios ``1 / L_i`` of its pseudo-likelihood factor
    (:func:`psis_log_weights`), and the map minimises the log-loss of those leave-one-out
    predictions — the same objective as the k-fold map without the k refits. The fraction of
    points whose k̂ exceeds :data:`KHAT_BAD` is recorded in ``khat_bad_frac``; where it is large
    the importance weights cannot reach the leave-one-out posterior (the failure documented in
    the module docstring for the paper's γ0 = 100) and ``"cv"`` is the safer choice.

    Parameters
    ----------
    F : array (S, N, C)
        Decision draws of the training points.
    codes : int array (N,)
        Their labels in ``0 … K−1``.
    log_lik : array (S, N)
        ``log L_i`` per draw: the point's pseudo-likelihood factor summed over classifiers.
    gamma0 : float
        γ0 of the model (bounds T as in :func:`fit_calibrator`).
    point_weights : array (N,), optional
        Sample weights of the points.
    per_class : bool, default False
        A temperature and an intercept per class for C ≥ 2 classifiers
        (:func:`~bayesmkl.posterior.calibration.fit_calibrator`).

    Returns
    -------
    Calibrator
        With ``n_folds = 0`` (no folds) and ``khat_bad_frac`` set.
    """
    return _calibrator_from_weights(
        F, codes, *psis_log_weights(log_lik), gamma0=gamma0, point_weights=point_weights,
        per_class=per_class,
    )  # fmt: skip


def _calibrator_from_weights(
    F, codes, log_w, khat, *, gamma0: float, point_weights=None, per_class: bool = False
) -> Calibrator:
    """:func:`loo_calibrator` from PSIS weights already computed (``log_w: (S, N)`` and
    ``khat: (N,)`` of :func:`psis_log_weights`), for a caller that needs them again."""
    pw = None if point_weights is None else [np.asarray(point_weights, dtype=float)]
    cal = fit_calibrator(
        [F], [codes], gamma0=gamma0, log_weights=[log_w], n_folds=0, point_weights=pw,
        per_class=per_class,
    )  # fmt: skip
    bad = float(np.mean(~(khat <= KHAT_BAD)))  # nan k̂ (no smoothing possible) counts as bad
    return Calibrator(**{**asdict(cal), "khat_bad_frac": bad})


# ----------------------------------------------------------------------------------------
# k-fold ELPD (for arviz.compare)
# ----------------------------------------------------------------------------------------


def kfold_elpd(oof_log_predictive, log_likelihood, n_folds: int):
    """ArviZ k-fold ELPD from the cross-fitting that calibration already ran.

    Parameters
    ----------
    oof_log_predictive : array (N,)
        Log predictive probability of each training label under the fold fit that held it out.
    log_likelihood : array (chains, draws, N)
        Per-draw log probabilities of the training labels under the full fit; gives
        ``p_kfold_i = lpd_i − elpd_i`` (ArviZ's definition).
    n_folds : int

    Returns
    -------
    arviz_stats.ELPDDataLOOKFold
        ``elpd`` (sum), ``se = √(N·var(elpd_i))``, pointwise ``elpd_i`` and ``p_kfold_i`` with
        dimension ``obs``; usable in ``arviz.compare`` next to other ELPD results.
    """
    import xarray as xr
    from arviz_stats import ELPDDataLOOKFold

    elpd_i = np.asarray(oof_log_predictive, dtype=float)
    ll = np.asarray(log_likelihood, dtype=float)
    n = elpd_i.shape[0]
    lpd_i = log_predictive(ll.reshape(-1, n), axis=0)
    coords = {"obs": np.arange(n)}
    return ELPDDataLOOKFold(
        elpd=float(elpd_i.sum()),
        se=float(np.sqrt(n * np.var(elpd_i))),
        p=float(np.sum(lpd_i - elpd_i)),
        n_samples=int(ll.shape[0] * ll.shape[1]),
        n_data_points=int(n),
        scale="log",
        warning=False,
        good_k=None,
        elpd_i=xr.DataArray(elpd_i, dims=("obs",), coords=coords, name="y"),
        n_folds=int(n_folds),
        p_kfold_i=xr.DataArray(lpd_i - elpd_i, dims=("obs",), coords=coords, name="y"),
    )
