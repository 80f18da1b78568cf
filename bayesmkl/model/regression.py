"""The BM³KL regression model in NumPyro (docs/math.md §15).

Sites (P kernels, N training points; the sample weights keep the classifier's leading axis of
length C = 1, so that the kernel-weight moves and the prediction code serve both models):

==============  =========  ============================================================
site            shape      distribution
==============  =========  ============================================================
e               (P,)       Gamma(η, 1); w = e / Σe ~ Dirichlet(η)
varsigma        (1, N)     Gamma(β_a, κ)                         (TPBN rate ς)
nu              (1, N)     Gamma(α_a, ς)                         (TPBN local variance ν)
a               (1, N)     Normal(0, variance ν)                 (sample weights)
b               (1,)       Normal(0, variance τ)                 (bias)
c               ()         Gamma(c_shape, c_rate)                (scale of the loss)
eps             ()         Gamma(eps_shape, eps_rate), or fixed  (half-width ε of the tube)
lam_plus,       (1, N)     flat on (0, ∞)                        (augmentation, upper and
lam_minus                                                         lower hinge; augmented only)
==============  =========  ============================================================

Likelihood: p(y_i | f_i, c, ε) = exp{−2c L_ε(y_i − f_i)} / (2ε + 1/c) with f = A K_w + b, a
proper density in y (:mod:`bayesmkl.model.regression_likelihood`); ``augmented=True`` writes it as
the λ-mixture that the Gibbs sampler targets. All Gamma distributions are shape–rate. ``y`` is
the (standardised) target as an array ``(1, N)`` (the estimator standardises; the model does
not).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayesmkl.model.classification import (
    PRIORS,
    Hyper,
    kernel_decision_values,
    log_prior,
    prior_sites,
)
from bayesmkl.model.regression_likelihood import log_augmented_likelihood, log_likelihood_terms

__all__ = ["REG_PRIORS", "RegHyper", "reg_log_joint", "reg_model", "unit_variance_kappa"]


class RegHyper(NamedTuple):
    """Hyper-parameters of BM³KL regression.

    Attributes
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var : float
        As for the classifier (:class:`bayesmkl.model.classification.Hyper`): Dirichlet η (scalar or
        (P,)),
        TPBN α_a, β_a, κ and the prior variance τ of b.
    c_shape, c_rate : float
        Gamma prior of the loss scale c (in units of 1/y).
    eps_shape, eps_rate : float
        Gamma prior of the tube's half-width ε (in units of y), when ε is learnt.
    """

    eta: float = Hyper().eta  # w, a and b: the classifier's default prior
    alpha_a: float = Hyper().alpha_a
    beta_a: float = Hyper().beta_a
    kappa: float = Hyper().kappa
    bias_prior_var: float = Hyper().bias_prior_var
    c_shape: float = 2.0
    c_rate: float = 0.5
    eps_shape: float = 1.0
    eps_rate: float = 2.0


DEFAULT_REG_HYPER = RegHyper()

#: Named priors of :class:`~bayesmkl.BM3KLRegressor`: the classifier's named priors
#: (:data:`bayesmkl.model.classification.PRIORS`) of w, a and b, with the default prior of (c, ε).
#: Under
#: ``"default"`` the estimator replaces κ by :func:`unit_variance_kappa` of the training kernels.
REG_PRIORS = {
    name: RegHyper(*h[:5], *RegHyper()[5:]) for name, h in PRIORS.items()
}  # fmt: skip


def unit_variance_kappa(K) -> float:
    """κ = N / ‖K̄‖_F², K̄ the mean of the training kernels ``K: (P, N, N)``.

    With uniform kernel weights and every local variance at its prior median (ν_i = κ for
    α_a = β_a = 1), a prior draw of f_i = Σ_j K̄_ij a_j has variance κ Σ_j K̄_ij², whose mean
    over the training points is 1 at this κ: the prior's typical function then has the scale of
    the standardised targets, whatever N and the pool. The classifier's κ = 1 makes it about
    √(N/3) times wider for wide kernels (docs/math.md §15.2): on diabetes it overfitted (PSIS
    p_loo 110 of 309 points, 82% coverage of 90% intervals; docs/math.md §15.8).
    """
    Kb = np.asarray(K, dtype=np.float64).mean(axis=0)
    return float(Kb.shape[0] / np.sum(Kb**2))


def _gamma_logpdf(x, shape, rate):
    return dist.Gamma(shape, rate).log_prob(x)


def reg_model(
    K,
    y,
    hyper: RegHyper = DEFAULT_REG_HYPER,
    epsilon=None,
    augmented: bool = True,
    landmarks: bool = False,
):
    """NumPyro model of BM³KL regression.

    Parameters
    ----------
    K : array (P, N, N)
        Training kernels (symmetric).
    y : array (1, N)
        Targets (the estimator passes them standardised).
    hyper : RegHyper
    epsilon : float, optional
        A fixed ε ≥ 0; ``None`` (default) makes ε a site with the Gamma prior of ``hyper``.
    augmented : bool
        Include λ⁺, λ⁻ (the model the Gibbs sampler targets); ``False`` gives the marginal
        model, with the same posterior over the other sites, which NUTS can sample.
    landmarks : bool
        Read ``K (P, N, M)`` as the kernels between the training points and M landmarks
        (docs/math.md §16); a non-square ``K`` is read so anyway.
    """
    C, N = y.shape
    w, a, b = prior_sites(K.shape[0], C, K.shape[2], hyper)
    c = numpyro.sample("c", dist.Gamma(hyper.c_shape, hyper.c_rate))
    if epsilon is None:
        eps = numpyro.sample("eps", dist.Gamma(hyper.eps_shape, hyper.eps_rate))
    else:
        eps = jnp.asarray(epsilon, dtype=jnp.float64)
    f = kernel_decision_values(K, w, a, b, landmarks)
    if augmented:
        flat = dist.ImproperUniform(constraints.positive, (), (C, N))
        lam_plus = numpyro.sample("lam_plus", flat)
        lam_minus = numpyro.sample("lam_minus", flat)
        numpyro.factor("lik", log_augmented_likelihood(y, f, lam_plus, lam_minus, c, eps))
    else:
        numpyro.factor("lik", jnp.sum(log_likelihood_terms(y, f, c, eps)))


def reg_log_joint(z, f, y, hyper, learn_eps: bool):
    """log p(e, ς, ν, a, b, c[, ε], y) of the marginal model (λ integrated out), no Jacobians.

    ``z`` holds the constrained values (keys ``e, varsigma, nu, a, b, c, eps``), ``f: (1, N)``
    the decision values already formed. The sampler reports its negative as
    ``potential_energy``; ``learn_eps=False`` leaves out ε's prior (ε is then a constant).
    Hyper-parameters may be traced JAX values.
    """
    lp = log_prior(z, hyper)
    lp += _gamma_logpdf(z["c"], hyper.c_shape, hyper.c_rate)
    if learn_eps:
        lp += _gamma_logpdf(z["eps"], hyper.eps_shape, hyper.eps_rate)
    return lp + jnp.sum(log_likelihood_terms(y, f, z["c"], z["eps"]))
