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


#: Most values (points × (draws + candidates × tail draws): the rows and the Pareto fit's grid)
#: that :func:`psis_log_weights` smooths at once.
PSIS_BLOCK_ENTRIES = 2**22


def psis_log_weights(log_lik, r_eff=1.0):
    """Pareto-smoothed leave-one-out log weights from per-draw log-likelihood factors.

    The importance ratio of draw s for leaving point i out is ``1 / L_i(θ_s)``, with ``L_i`` the
    factor of point i in the posterior. Smoothing and k̂ are ArviZ's
    (``arviz_stats.base.array_stats.psislw``: Vehtari et al. 2024's tail length, Zhang and
    Stephens's generalised Pareto fit with its weakly informative prior on k), computed for
    many points at once (:func:`_psis_rows`; equal to ArviZ's to rounding). Points PSIS cannot
    smooth fall back to plain normalised ratios with ``k̂ = nan``: fewer than
    :data:`MIN_PSIS_DRAWS` draws, a tail shorter than 5 draws, or a tail of equal values;
    with enough draws a constant factor gives uniform weights with k̂ = 0. Where the Pareto
    fit overflows (the first quartile of the tail's exceedances below 1e-308; ArviZ then
    returns NaN weights and a small k̂), the point keeps its plain ratios with ``k̂ = inf``.

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
    log_lik = np.asarray(log_lik, dtype=float)
    S, N = log_lik.shape
    r_eff = np.broadcast_to(np.asarray(r_eff, dtype=float), (N,))
    lw = np.empty((S, N))
    khat = np.full(N, np.nan)
    plain = np.ones(N, dtype=bool)
    if S >= MIN_PSIS_DRAWS:  # fewer: a tail < 5 draws (< 1 below 5 draws: an IndexError)
        scale = np.maximum(1.0, np.max(np.abs(log_lik), axis=0))
        constant = np.ptp(log_lik, axis=0) <= 1e-12 * scale
        lw[:, constant], khat[constant] = -np.log(S), 0.0
        plain[constant] = False
        # ArviZ's tail length (tail="right"): 3√(S / r_eff) draws, S / 5 for short runs
        tails = np.floor(np.where(S * r_eff > 225, 3.0 * np.sqrt(S / r_eff), S / 5.0))
        for tail in np.unique(tails[~constant]):
            if tail < 5:  # too short to fit: plain ratios
                continue
            cols = np.flatnonzero(~constant & (tails == tail))
            grid = 30 + int(tail**0.5)  # the Pareto fit's candidates per point
            step = max(1, PSIS_BLOCK_ENTRIES // (S + grid * int(tail)))
            for lo in range(0, cols.size, step):
                c = cols[lo : lo + step]
                rows, k, ok = _psis_rows(-log_lik[:, c].T, int(tail))
                lw[:, c[ok]], khat[c[ok]] = rows[ok].T, k[ok]
                plain[c[ok]] = False
    if plain.any():  # khat stays nan
        neg = -log_lik[:, plain]
        lw[:, plain] = neg - logsumexp(neg, axis=0)
    return lw, khat


def _psis_rows(log_ratios, tail: int):
    """ArviZ's ``_psislw`` on each row of ``log_ratios (k, S)`` at once: ``(log_weights (k, S),
    khat (k,), ok (k,))``; ``ok`` is False where ArviZ raises (a tail of equal values).

    Per row: shift by the maximum, sort, fit a generalised Pareto distribution
    (:func:`_gpd_fit_rows`) to the exceedances of the ``tail`` largest ratios over the next
    one, replace them by the fitted quantiles at (j − ½) / tail (at most the largest raw
    ratio; unchanged where k̂ is not finite), normalise.
    """
    x = log_ratios - np.max(log_ratios, axis=1, keepdims=True)
    order = np.argsort(x, axis=1)
    xs = np.take_along_axis(x, order, axis=1)
    S = x.shape[1]
    draws_tail = xs[:, S - tail :]
    cutoff = xs[:, S - tail - 1]
    max_tail = np.max(draws_tail, axis=1)
    ok = ~(np.abs(max_tail - np.min(draws_tail, axis=1)) < np.finfo(float).tiny)
    mu = np.exp(cutoff)
    khat, sigma = _gpd_fit_rows(np.exp(draws_tail) - mu[:, None])
    p = np.arange(0.5, tail) / tail
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(
            (khat == 0)[:, None],
            mu[:, None] - sigma[:, None] * np.log1p(-p),
            mu[:, None] + sigma[:, None] * np.expm1(-khat[:, None] * np.log1p(-p)) / khat[:, None],
        )
        q[~(sigma > 0)] = np.nan  # ArviZ's quantile function gives nan for σ ≤ 0
        smoothed = np.log(q)
    smoothed = np.where(smoothed > max_tail[:, None], max_tail[:, None], smoothed)
    smooth = np.isfinite(khat)
    xs[smooth, S - tail :] = smoothed[smooth]
    np.put_along_axis(x, order, xs, axis=1)
    x -= logsumexp(x, axis=1, keepdims=True)
    return x, khat, ok


def _gpd_fit_rows(y):
    """ArviZ's ``_gpdfit`` (Zhang and Stephens 2009, with the prior of Vehtari et al. 2024) on
    each row of ``y (k, n)``, sorted ascending: ``(khat (k,), sigma (k,))``; (nan, nan) where
    the first quartile does not exceed the minimum, (inf, nan) where k̂ is nan."""
    k_rows, n = y.shape
    m_est = 30 + int(n**0.5)
    xstar = y[:, int((n / 4 + 0.5) - 1)]  # first quartile
    b = 1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5))  # (m,)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        b = b[None, :] / (3 * xstar[:, None]) + 1 / y[:, -1:]  # (k, m)
        k_grid = np.mean(np.log1p(-b[:, :, None] * y[:, None, :]), axis=2)  # (k, m)
        len_scale = n * (np.log(-b / k_grid) - k_grid - 1)
        w = np.exp(len_scale - logsumexp(len_scale, axis=1, keepdims=True))
        w = np.where(w >= 10 * np.finfo(float).eps, w, 0.0)  # negligible weights dropped
        w /= np.sum(w, axis=1, keepdims=True)
        b_post = np.sum(b * w, axis=1)
        kappa = np.mean(np.log1p(-b_post[:, None] * y), axis=1)
        sigma = -kappa / b_post
    kappa = (n * kappa + 10 * 0.5) / (n + 10)
    far = ~(xstar > y[:, 0])  # far from a generalised Pareto distribution
    khat = np.where(far, np.nan, np.where(np.isnan(kappa), np.inf, kappa))
    sigma = np.where(far | np.isnan(kappa), np.nan, sigma)
    return khat, sigma


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
