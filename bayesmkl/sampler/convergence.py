"""Rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021), vectorised over quantities.

The same statistics as ``arviz_stats.base.array_stats.rhat(method="rank")`` and
``array_stats.ess(method="bulk")``, computed for many quantities at once: where ArviZ ranks,
z-scales and transforms each quantity in a call of its own, here the ranking, the normal
quantiles and the autocovariances run as array operations over all quantities; only Geyer's
truncation of the autocorrelation sum, a short scalar loop, runs per quantity.

The input is ``x: (k, chains, draws)``; each statistic is a ``(k,)`` array. A quantity with a
nan among its draws, fewer than 4 draws, or (R-hat only) fewer than 2 chains or no spread gets
nan, as in ArviZ; a constant quantity's ESS is its number of draws.
"""

from __future__ import annotations

import numpy as np
from scipy.fft import next_fast_len
from scipy.special import ndtri

__all__ = ["rhat_and_ess_bulk"]

_BLOM = 3.0 / 8.0  # Blom's fractional offset of the rank back-transformation


def _split(x):
    """(k, m, n) → (k, 2m, n // 2): each chain's first and last halves (the middle draw of an
    odd n dropped)."""
    half = x.shape[-1] // 2
    return np.concatenate((x[..., :half], x[..., x.shape[-1] - half :]), axis=1)


def _average_ranks(flat):
    """Ranks 1…n within each row of (k, n), ties sharing their average rank (``scipy.stats.
    rankdata(method="average")`` row by row, without its per-call overhead)."""
    k, n = flat.shape
    order = np.argsort(flat, axis=1)  # the order among ties does not change their average
    v = np.take_along_axis(flat, order, axis=1)
    idx = np.arange(n)
    first = np.ones((k, n), dtype=bool)  # first entry of each run of equal sorted values
    first[:, 1:] = v[:, 1:] != v[:, :-1]
    last = np.ones((k, n), dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, idx, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, idx, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((k, n))
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=1)
    return ranks


def _z_scale(x):
    """Normal scores of the ranks of each quantity's entries (ties share their average rank)."""
    k = x.shape[0]
    flat = x.reshape(k, -1)
    size = flat.shape[1]
    return ndtri((_average_ranks(flat) - _BLOM) / (size - 2.0 * _BLOM + 1.0)).reshape(x.shape)


def _rhat_plain(x):
    """Gelman–Rubin R-hat of each row of (k, m, n); nan for a row without spread."""
    n = x.shape[-1]
    between = n * np.var(np.mean(x, axis=-1), axis=-1, ddof=1)
    within = np.mean(np.var(x, axis=-1, ddof=1), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _valid(x):
    """Rows of (k, m, n) that ArviZ computes: no nan and at least 4 draws."""
    return ~np.isnan(x).any(axis=(1, 2)) & (x.shape[-1] >= 4)


def _rhat_of_split(split, z):
    """The larger of the bulk R-hat (of ``z``, the split chains' normal scores) and the folded
    one (of the scores of |split − median|)."""
    median = np.median(split.reshape(split.shape[0], -1), axis=1)[:, None, None]
    return np.maximum(_rhat_plain(z), _rhat_plain(_z_scale(np.abs(split - median))))


def _geyer_tau(rho: list, n: int) -> float:
    """Geyer's initial positive and monotone sequence over autocorrelations ``rho`` (lags
    0…n−1): the integrated autocorrelation time τ̂ (before its lower bound); nan when a
    kept autocorrelation is nan."""
    out = [0.0] * n
    out[0] = 1.0
    even, odd = 1.0, rho[1]
    out[1] = odd
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0:
            out[t + 1], out[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        out[max_t + 1] = even
    t = 1
    while t <= max_t - 2:
        if out[t + 1] + out[t + 2] > out[t - 1] + out[t]:
            out[t + 1] = out[t + 2] = (out[t - 1] + out[t]) / 2.0
        t += 2
    if np.isnan(out).any():
        return np.nan
    return -1.0 + 2.0 * float(np.sum(out[: max_t + 1])) + float(np.sum(out[max_t + 1 : max_t + 2]))


def _ess_of(z):
    """ESS of each row of (k, m, n) (the sum of autocorrelations truncated by Geyer's rule)."""
    k, m, n = z.shape
    out = np.full(k, float(m * n))
    spread = (z.max(axis=(1, 2)) - z.min(axis=(1, 2))) >= np.finfo(float).resolution
    if not spread.any():
        return out
    z = z[spread]
    fft_n = next_fast_len(2 * n)
    centred = z - z.mean(axis=-1, keepdims=True)
    f = np.fft.rfft(centred, n=fft_n, axis=-1)
    f *= np.conjugate(f)
    acov = np.fft.irfft(f, n=fft_n, axis=-1)[..., :n] / n  # (k', m, n)
    mean_var = np.mean(acov[..., 0], axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(z.mean(axis=-1), axis=1, ddof=1)
    rho = 1.0 - (mean_var[:, None] - np.mean(acov, axis=1)) / var_plus[:, None]  # (k', n)
    floor = 1.0 / np.log10(m * n)
    taus = np.array([_geyer_tau(row, n) for row in rho.tolist()])
    out[spread] = m * n / np.maximum(taus, floor)  # a nan τ̂ stays nan
    return out


def rhat_and_ess_bulk(x) -> tuple[np.ndarray, np.ndarray]:
    """``(rhat, ess)`` of each quantity of ``x (k, chains, draws)``: the rank-normalised split
    R-hat (the larger of the bulk and the folded one) and the bulk ESS (of the rank-normalised
    split chains), both from one ranking of the split chains."""
    x = np.asarray(x, dtype=float)
    rhat = np.full(x.shape[0], np.nan)
    ess = np.full(x.shape[0], np.nan)
    ok = _valid(x)
    if not ok.any():
        return rhat, ess
    split = _split(x[ok])
    z = _z_scale(split)
    ess[ok] = _ess_of(z)
    if x.shape[1] >= 2:  # R-hat compares chains
        rhat[ok] = _rhat_of_split(split, z)
    return rhat, ess
