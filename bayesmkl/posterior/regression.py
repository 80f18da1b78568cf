"""Everything a fitted :class:`~bayesmkl.BM3KLRegressor` does with its draws (docs/math.md
§15.6): the posterior predictive of y, a mixture over draws s of y = ȳ + s_y (f_s(x) + r),
r ~ p(r | c_s, ε_s), its mean, standard deviation, quantiles, intervals and log density,
replicated draws, and the ArviZ DataTree with a pointwise ``log_likelihood`` group.

It reads the fitted attributes ``posterior_`` (draws on the standardised scale),
``kernel_input_``, ``y_mean_``, ``y_scale_``, ``y_train_``, ``log_likelihood_``,
``sample_stats_`` and ``kernel_names_``; it never samples.
"""

from __future__ import annotations

import numbers

import numpy as np
from arviz_base import from_dict
from scipy.special import logsumexp
from sklearn.utils.validation import check_is_fitted

from bayesmkl.config import with_x64
from bayesmkl.model.regression_likelihood import (
    noise_cdf,
    noise_logpdf,
    noise_quantile,
    noise_sample,
    noise_variance,
)
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior.checks import check_predictions
from bayesmkl.posterior.classification import KernelDrawsMixin
from bayesmkl.posterior.predictive import draw_decision_values

__all__ = ["RegressionPosteriorMixin", "build_regression_datatree", "mixture_quantiles"]

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


#: Draws stored with a classifier axis of length 1 (the classifier's layout), which the DataTree
#: drops: ``(chain, draw, 1[, obs])`` in ``posterior_``, ``(chain, draw[, obs])`` in the tree.
SQUEEZED = ("a", "b", "lam_plus", "lam_minus", "nu", "varsigma")


def unsqueeze_posterior(posterior: dict) -> dict:
    """Inverse of the DataTree's layout: the posterior draws as ``posterior_`` holds them."""
    return {k: (np.asarray(v)[:, :, None] if k in SQUEEZED else np.asarray(v))
            for k, v in posterior.items()}  # fmt: skip


def build_regression_datatree(posterior, sample_stats, *, kernel_names, y, log_likelihood,
                              attrs=None):  # fmt: skip
    """The ArviZ ``DataTree`` of a regression fit.

    Groups: ``posterior`` (w, e: ``kernel``; a, lam_plus, lam_minus, nu, varsigma: ``obs``;
    b, c, eps: scalars per draw; all on the standardised scale), ``sample_stats``
    (acceptance_rate, diverging, lp, step_size; no energy, see
    :mod:`bayesmkl.posterior.diagnostics`),
    ``observed_data`` (y) and ``log_likelihood`` (y: ``(chain, draw, obs)``).
    """
    post = {}
    for k, v in posterior.items():
        v = np.asarray(v)
        post[k] = v[:, :, 0] if k in SQUEEZED else v
    dims = {k: ["kernel"] for k in ("w", "e")}
    dims.update({k: ["obs"] for k in ("a", "lam_plus", "lam_minus", "nu", "varsigma", "y")})
    data = {
        "posterior": post,
        "sample_stats": diagnostics.sample_stats_to_arviz(sample_stats),
        "observed_data": {"y": np.asarray(y, dtype=float)},
        "log_likelihood": {"y": np.asarray(log_likelihood, dtype=float)},
    }
    coords = {"kernel": [str(n) for n in kernel_names], "obs": np.arange(len(y))}
    group_attrs = {"sample_stats": {"energy": diagnostics.NO_ENERGY}, "/": dict(attrs or {})}
    problem = diagnostics.loo_problem(data["log_likelihood"]["y"])
    if problem is not None:
        group_attrs["log_likelihood"] = {"psis_loo": problem}
    return from_dict(data, coords=coords, dims=dims, attrs=group_attrs, check_conventions=False)


class RegressionPosteriorMixin(KernelDrawsMixin):
    """Prediction and ArviZ output of :class:`~bayesmkl.BM3KLRegressor`."""

    def _noise_draws(self):
        """``c, eps`` of every draw, ``(S,)`` each, chains merged (standardised scale)."""
        return tuple(self.posterior_[k].reshape(-1) for k in ("c", "eps"))

    def _noise_var_draws(self) -> np.ndarray:
        """Variance of the noise law per draw ``(S,)``, standardised scale."""
        return np.asarray(noise_variance(*self._noise_draws()))

    def _standard_f(self, K) -> np.ndarray:
        """Standardised function draws ``(S, M)`` at kernel rows ``K: (P, M, N)`` (checked)."""
        w, a, b = self._flat_draws()
        F = np.asarray(draw_decision_values(w, a, b, K))[..., 0]
        return check_predictions(F, "function values", posterior=self.posterior_)

    def _train_log_likelihood(self, K) -> np.ndarray:
        """log p(y_i | f_i, c, ε) per draw and training point, ``(chains, draws, N)``, y units."""
        F = self._standard_f(K)
        c, eps = self._noise_draws()
        ys = (self.y_train_ - self.y_mean_) / self.y_scale_
        ll = noise_logpdf(ys[None, :] - F, c[:, None], eps[:, None]) - np.log(self.y_scale_)
        return ll.reshape(self.posterior_["c"].shape + (-1,))

    @with_x64
    def function_draws(self, X) -> np.ndarray:
        """Per-draw function values f_s(x) in the units of y, ``(S, M)`` (S = chains·draws).

        Their mean is :meth:`predict`; their spread is the uncertainty of the regression
        function alone, without the noise.
        """
        check_is_fitted(self, "posterior_")
        F = self._standard_f(self._test_kernels(X))
        with np.errstate(over="ignore", invalid="ignore"):  # the check below says it
            mu = self.y_mean_ + self.y_scale_ * F
        return check_predictions(mu, "function values (in units of y)")

    @with_x64
    def predict(self, X, return_std: bool = False):
        """Posterior predictive mean of y (the noise law is symmetric, so it is the mean of f).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        return_std : bool, default False
            Also return the posterior predictive standard deviation of y: the spread of f over
            draws and the noise together, √(Var_s f_s + mean_s s_y² Var(r | c_s, ε_s)).

        Returns
        -------
        mean : ndarray (M,)
        std : ndarray (M,)
            Only with ``return_std=True``.
        """
        mu = self.function_draws(X)
        with np.errstate(over="ignore", invalid="ignore"):  # the checks below say it
            mean = check_predictions(mu.mean(axis=0), "predictive means")
            if not return_std:
                return mean
            noise = self._noise_var_draws().mean()
            lo, hi = _SQUARABLE
            if lo <= self.y_scale_ <= hi:
                sd = np.sqrt(mu.var(axis=0) + self.y_scale_**2 * noise)
            else:  # s_y² under/overflows (y scaled by 1e-200 gave sd 0): standardised units
                sd = self.y_scale_ * np.sqrt((mu / self.y_scale_).var(axis=0) + noise)
            return mean, check_predictions(sd, "predictive standard deviations")

    @with_x64
    def predict_quantiles(self, X, quantiles=(0.05, 0.5, 0.95)) -> np.ndarray:
        """Quantiles of the posterior predictive of y: the mixture over draws of f_s(x) plus
        the ε-insensitive noise of that draw (:func:`mixture_quantiles`).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        quantiles : float or sequence of float in (0, 1), default (0.05, 0.5, 0.95)

        Returns
        -------
        ndarray (M, Q), or (M,) for a single float
        """
        q = np.atleast_1d(np.asarray(quantiles, dtype=float))
        if q.ndim != 1 or not np.all((q > 0) & (q < 1)):
            raise ValueError(f"quantiles must be numbers in (0, 1); got {quantiles!r}")
        mu = self.function_draws(X)
        c, eps = self._noise_draws()
        step = max(1, _CHUNK_ENTRIES // mu.shape[0])
        out = np.concatenate(
            [mixture_quantiles(mu[:, i : i + step], self.y_scale_, c, eps, q)
             for i in range(0, mu.shape[1], step)] or [np.empty((0, q.size))]
        )  # fmt: skip
        return out[:, 0] if np.ndim(quantiles) == 0 else out

    def predict_interval(self, X, coverage: float = 0.9) -> np.ndarray:
        """Central posterior predictive interval of y with probability ``coverage``,
        ``(M, 2)`` (lower, upper): the (1 ∓ coverage)/2 quantiles of :meth:`predict_quantiles`."""
        real = isinstance(coverage, numbers.Real) and not isinstance(coverage, bool)
        if not (real and 0 < coverage < 1):
            raise ValueError(f"coverage must be a number in (0, 1); got {coverage!r}")
        return self.predict_quantiles(X, [(1 - coverage) / 2, (1 + coverage) / 2])

    @with_x64
    def log_predictive_density(self, X, y) -> np.ndarray:
        """Pointwise log posterior predictive density of targets ``y`` at ``X``, ``(M,)``:
        log (1/S) Σ_s p(y | f_s(x), c_s, ε_s), in the units of y (mean it for a test set's
        mean log predictive density)."""
        mu = self.function_draws(X)
        y = np.asarray(y, dtype=float).reshape(-1)
        if y.shape[0] != mu.shape[1] or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be {mu.shape[1]} finite numbers; got shape {y.shape}")
        c, eps = self._noise_draws()
        r = (y[None, :] - mu) / self.y_scale_
        lp = noise_logpdf(r, c[:, None], eps[:, None]) - np.log(self.y_scale_)
        return logsumexp(lp, axis=0) - np.log(lp.shape[0])

    @with_x64
    def sample_predictive(self, X, random_state=0) -> np.ndarray:
        """One draw of y from the predictive per posterior draw, ``(S, M)`` (for CRPS,
        posterior predictive checks or custom summaries)."""
        mu = self.function_draws(X)
        c, eps = self._noise_draws()
        rng = np.random.default_rng(random_state)
        c, eps = np.broadcast_to(c[:, None], mu.shape), np.broadcast_to(eps[:, None], mu.shape)
        return mu + self.y_scale_ * noise_sample(rng, c, eps)

    def to_datatree(self):
        """The fit as an ArviZ ``xarray.DataTree`` (:func:`build_regression_datatree`), with the
        ``log_likelihood`` group that ``arviz.loo`` and ``arviz.compare`` read (e.g. to compare
        kernel pools). Root attributes ``y_mean`` and ``y_scale`` give the standardisation."""
        check_is_fitted(self, "posterior_")
        return build_regression_datatree(
            self.posterior_, self.sample_stats_, kernel_names=self.kernel_names_,
            y=self.y_train_, log_likelihood=self.log_likelihood_,
            attrs={"inference_library": "bayesmkl (BM3KL regression Gibbs sampler in NumPyro)",
                   "sampler": str(self.sampler), "y_mean": self.y_mean_,
                   "y_scale": self.y_scale_},
        )  # fmt: skip

    def loo(self, **kwargs):
        """PSIS-LOO of the training targets, ``arviz.loo(reg.to_datatree())`` (or a refusal
        with the reason, :func:`bayesmkl.posterior.diagnostics.loo`). ``kwargs`` go to
        ``arviz.loo``."""
        return diagnostics.loo(self.to_datatree(), **kwargs)
