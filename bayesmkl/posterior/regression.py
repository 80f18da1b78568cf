"""What a regression posterior gives (docs/math.md §15.6), as pure functions of its draws.

The posterior predictive of y is a mixture over draws s of y = ȳ + s_y (f_s(x) + r),
r ~ p(r | c_s, ε_s): :func:`function_values` gives the standardised f_s at kernel rows,
:func:`noise_draws` the (c, ε) of every draw, and from them :func:`predictive_mean_sd`,
:func:`predictive_quantiles` (:func:`mixture_quantiles`), :func:`log_predictive_density`,
:func:`sample_predictive` and the training :func:`target_log_likelihood`. The draws are those of
``BM3KLRegressor.posterior_`` (standardised scale, chain axis first); ``y_mean`` and
``y_scale`` the standardisation of y. Nothing here holds or reads estimator state.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from bayesmkl.model.regression_likelihood import (
    noise_cdf,
    noise_logpdf,
    noise_quantile,
    noise_sample,
    noise_variance,
)
from bayesmkl.posterior.checks import check_predictions
from bayesmkl.posterior.diagnostics import SQUEEZED, unsqueeze_posterior
from bayesmkl.posterior.predictive import posterior_decision_values

__all__ = [
    "SQUEEZED",
    "function_values",
    "log_predictive_density",
    "mixture_quantiles",
    "noise_draws",
    "noise_var_draws",
    "predictive_mean_sd",
    "predictive_quantiles",
    "sample_predictive",
    "target_log_likelihood",
    "unsqueeze_posterior",
]

#: Bisection steps of :func:`mixture_quantiles` (the bracket shrinks by 2^-64: to rounding).
QUANTILE_STEPS = 64
#: Most (draws × points) entries a prediction helper holds at once.
_CHUNK_ENTRIES = 2_000_000


#: Scales of y whose square float64 holds without underflow or overflow (the predictive
#: variance is computed in units of y² inside this range, on the standardised scale outside it).
_SQUARABLE = (1e-150, 1e150)


def mixture_quantiles(mu, scale, c, eps, q) -> np.ndarray:
    """Quantiles of the equal-weight mixture over draws s of mu_s + scale·r, r ~ p(r | c_s, ε_s).

    Parameters
    ----------
    mu : array (S, M)
        Per-draw predictive centres (the function draws, in the units of y).
    scale : float
        The units of the noise law (the standardisation scale of y).
    c, eps : arrays (S,)
        Per-draw noise parameters on the standardised scale.
    q : array (Q,)
        Probabilities in (0, 1).

    Returns
    -------
    ndarray (M, Q)
        Each found by bisection on the mixture's CDF between the smallest and the largest
        component quantile (the mixture's quantile lies between them), to rounding.
    """
    mu = np.asarray(mu, dtype=float)
    S, M = mu.shape
    c, eps = np.asarray(c, dtype=float)[:, None], np.asarray(eps, dtype=float)[:, None]
    out = np.empty((M, len(q)))
    for j, qj in enumerate(np.asarray(q, dtype=float)):
        comp = mu + scale * noise_quantile(qj, c, eps)  # (S, M)
        lo, hi = comp.min(axis=0), comp.max(axis=0)
        for _ in range(QUANTILE_STEPS):
            mid = 0.5 * (lo + hi)
            below = noise_cdf((mid - mu) / scale, c, eps).mean(axis=0) < qj
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        out[:, j] = 0.5 * (lo + hi)
    return out


def noise_draws(posterior: dict) -> tuple:
    """``c, eps`` of every draw, ``(S,)`` each, chains merged (standardised scale)."""
    return tuple(posterior[k].reshape(-1) for k in ("c", "eps"))


def noise_var_draws(posterior: dict) -> np.ndarray:
    """Variance of the noise law per draw ``(S,)``, standardised scale."""
    return np.asarray(noise_variance(*noise_draws(posterior)))


def function_values(posterior: dict, K, block=None) -> np.ndarray:
    """Standardised function draws ``(S, M)`` at kernel rows ``K: (P, M, N)`` (refused,
    ``NonFinitePredictionError``, where not finite; ``block``: the slice of test rows that
    ``K`` holds, for the message of :func:`~bayesmkl.posterior.checks.check_predictions`)."""
    F = np.asarray(posterior_decision_values(posterior, K))[..., 0]
    return check_predictions(F, "function values", posterior=posterior, block=block)


def target_log_likelihood(F, posterior: dict, y, y_mean: float, y_scale: float) -> np.ndarray:
    """log p(y_i | f_i, c, ε) per draw and training target, ``(chains, draws, N)``, in the units
    of y, from the standardised function draws ``F: (S, N)`` at the training points."""
    c, eps = noise_draws(posterior)
    ys = (y - y_mean) / y_scale
    ll = noise_logpdf(ys[None, :] - F, c[:, None], eps[:, None]) - np.log(y_scale)
    return ll.reshape(posterior["c"].shape + (-1,))


def predictive_mean_sd(mu, posterior: dict, y_scale: float, return_std: bool = False):
    """Posterior predictive mean ``(M,)`` of y from function draws ``mu: (S, M)`` in the units of
    y (the noise law is symmetric, so it is the mean of f) and, with ``return_std``, the
    predictive standard deviation √(Var_s f_s + mean_s s_y² Var(r | c_s, ε_s))."""
    with np.errstate(over="ignore", invalid="ignore"):  # the checks below say it
        mean = check_predictions(mu.mean(axis=0), "predictive means")
        if not return_std:
            return mean
        noise = noise_var_draws(posterior).mean()
        lo, hi = _SQUARABLE
        if lo <= y_scale <= hi:
            sd = np.sqrt(mu.var(axis=0) + y_scale**2 * noise)
        else:  # s_y² under/overflows (y scaled by 1e-200 gave sd 0): standardised units
            sd = y_scale * np.sqrt((mu / y_scale).var(axis=0) + noise)
        return mean, check_predictions(sd, "predictive standard deviations")


def predictive_quantiles(mu, posterior: dict, y_scale: float, q) -> np.ndarray:
    """Quantiles ``q: (Q,)`` of the posterior predictive of y, ``(M, Q)``, from function draws
    ``mu: (S, M)`` in the units of y (:func:`mixture_quantiles`, a block of points at a time)."""
    c, eps = noise_draws(posterior)
    step = max(1, _CHUNK_ENTRIES // mu.shape[0])
    return np.concatenate(
        [mixture_quantiles(mu[:, i : i + step], y_scale, c, eps, q)
         for i in range(0, mu.shape[1], step)] or [np.empty((0, q.size))]
    )  # fmt: skip


def log_predictive_density(mu, posterior: dict, y_scale: float, y) -> np.ndarray:
    """Pointwise log posterior predictive density ``(M,)`` of targets ``y: (M,)`` given function
    draws ``mu: (S, M)`` in the units of y: log (1/S) Σ_s p(y | f_s(x), c_s, ε_s)."""
    c, eps = noise_draws(posterior)
    r = (y[None, :] - mu) / y_scale
    lp = noise_logpdf(r, c[:, None], eps[:, None]) - np.log(y_scale)
    return logsumexp(lp, axis=0) - np.log(lp.shape[0])


def sample_predictive(mu, posterior: dict, y_scale: float, rng) -> np.ndarray:
    """One draw of y per posterior draw, ``(S, M)``, given function draws ``mu: (S, M)`` in the
    units of y and a NumPy generator ``rng``."""
    c, eps = noise_draws(posterior)
    c, eps = np.broadcast_to(c[:, None], mu.shape), np.broadcast_to(eps[:, None], mu.shape)
    return mu + y_scale * noise_sample(rng, c, eps)
