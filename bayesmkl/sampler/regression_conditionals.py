"""Full conditionals of BM³KL regression that the classifier does not have (docs/math.md §15.4).

Pure functions of arrays (and a PRNG key where they sample), jit- and vmap-able. The blocks
shared with the classifier — the kernel-weight moves, (a, b) | rest and the TPBN pair — are
:mod:`bayesmkl.sampler` functions called with the pseudo-observations (T, V) of
:func:`bayesmkl.model.regression_likelihood.pseudo_observations`.

* λ^± | rest: for each point and each hinge, λ^± ~ GIG(1/2, 1, (ζ^±)²), i.e.
  1/λ^± ~ IG(1/|ζ^±|, 1) (:func:`sample_lam_pm`; :func:`lam_pm_params` for tests);
* (c, ε) | f with λ integrated out, then λ | f, c, ε: a blocked draw of (c, ε, λ) by
  composition. c and ε are each updated by slice sampling (Neal 2003, stepping out and
  shrinkage; :func:`bayesmkl.sampler.tpbn.slice_stepping_out`) in θ = log c and φ = log ε on
  their exact conditionals, normaliser (2ε + 1/c)^{−N} included (:func:`log_c_conditional`,
  :func:`log_eps_conditional`).
* U(e) and ∇U for the kernel-weight moves that act on the conditional of e given a, b, T, V
  (:func:`tv_potential_and_grad`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.model.regression_likelihood import eps_loss, slacks
from bayesmkl.sampler.conditionals import ZETA_FLOOR
from bayesmkl.sampler.random import inverse_gaussian
from bayesmkl.sampler.tpbn import slice_stepping_out

__all__ = [
    "CAP_SLICE_NOISE",
    "LOG_C_RANGE",
    "LOG_EPS_RANGE",
    "lam_pm_params",
    "log_c_conditional",
    "log_eps_conditional",
    "sample_lam_pm",
    "sample_noise",
    "tv_potential_and_grad",
]

#: Support of θ = log c and φ = log ε in the slice updates: truncations of negligible prior
#: mass under any Gamma prior the estimator accepts (P(c < e^{-30}) < e^{-30·c_shape}).
LOG_C_RANGE = (-30.0, 30.0)
LOG_EPS_RANGE = (-40.0, 10.0)
#: Initial width of the slice bracket (log units) and the most steps out on each side.
SLICE_WIDTH = 1.0
SLICE_STEPS = 32
#: Alternations of the c and ε updates per sweep. c and ε are strongly correlated given f (a
#: wider tube goes with steeper tails), so one alternation moves them little; each costs O(N)
#: per density evaluation, nothing beside the sweep's O(N³) (a, b) draw.
NOISE_ROUNDS = 5
#: Bit of the sweep's ``capped`` flag set when a slice update of c or ε hit its cap (the
#: classifier's loops use the bits 1, 2 and 4).
CAP_SLICE_NOISE = 8


# --------------------------------------------------------------------------------------------
# λ⁺, λ⁻ | rest
# --------------------------------------------------------------------------------------------
def lam_pm_params(y, f, c, eps):
    """GIG(p, ϱ, χ) parameters of λ⁺ and λ⁻ given the rest: ``((1/2, 1, ζ⁺²), (1/2, 1, ζ⁻²))``."""
    zp, zm = slacks(y, f, c, eps)
    return tuple((jnp.full_like(z, 0.5), jnp.ones_like(z), z**2) for z in (zp, zm))


def sample_lam_pm(key, y, f, c, eps):
    """Draw ``(λ⁺, λ⁻)``, each of the shape of ``f``: 1/λ^± ~ IG(1/max(|ζ^±|, 1e-10), 1).

    The flat prior of λ (the classifier's γ0 = 0) is what makes the λ-integral the hinge
    exp{−2max(ζ, 0)} exactly; the floor on |ζ| is the classifier's (docs/math.md A14).
    """
    zp, zm = slacks(y, f, c, eps)
    kp, km = jax.random.split(key)
    lam_plus = 1.0 / inverse_gaussian(kp, 1.0 / jnp.maximum(jnp.abs(zp), ZETA_FLOOR), 1.0)
    lam_minus = 1.0 / inverse_gaussian(km, 1.0 / jnp.maximum(jnp.abs(zm), ZETA_FLOOR), 1.0)
    return lam_plus, lam_minus


# --------------------------------------------------------------------------------------------
# (c, ε) | f  (λ integrated out)
# --------------------------------------------------------------------------------------------
def log_c_conditional(theta, loss_sum, n, eps, shape, rate):
    """log p(θ = log c | f, ε) up to a constant, the Jacobian e^θ included:

    c_shape·θ − c_rate·e^θ − n·log(2ε + e^{−θ}) − 2e^θ·Σ_i L_ε(y_i − f_i),
    with n log(2ε + 1/c) = −nθ + n log1p(2εe^θ). ``loss_sum`` is Σ L_ε.
    """
    c = jnp.exp(theta)
    return (shape + n) * theta - rate * c - n * jnp.log1p(2.0 * eps * c) - 2.0 * c * loss_sum


def log_eps_conditional(phi, abs_resid, c, shape, rate):
    """log p(φ = log ε | f, c) up to a constant, the Jacobian e^φ included:

    eps_shape·φ − eps_rate·e^φ − n·log1p(2e^φ c) − 2c Σ_i max(|r_i| − e^φ, 0),
    with ``abs_resid`` = |r| = |y − f| of all n points.
    """
    eps = jnp.exp(phi)
    n = abs_resid.size
    return (
        shape * phi
        - rate * eps
        - n * jnp.log1p(2.0 * eps * c)
        - 2.0 * c * jnp.sum(eps_loss(abs_resid, eps))
    )


def sample_noise(key, y, f, c, eps, hyper, learn_eps: bool, rounds: int = NOISE_ROUNDS):
    """The draw of (c, ε) | f with λ integrated out: ``rounds`` alternations of a slice update
    of log c and (if ``learn_eps``) one of log ε, each exact for its conditional. Returns
    ``(c, eps, capped)`` with ``capped`` the :data:`CAP_SLICE_NOISE` bit (int32) when a slice
    update hit its cap (its value is then NaN).
    """
    abs_resid = jnp.abs(y - f)
    n = abs_resid.size

    def one_round(i, carry):
        c, eps, hit = carry
        k_c, k_e = jax.random.split(jax.random.fold_in(key, i))
        loss_sum = jnp.sum(eps_loss(abs_resid, eps))

        def log_pc(theta):
            return log_c_conditional(theta, loss_sum, n, eps, hyper.c_shape, hyper.c_rate)

        theta, hit_c = slice_stepping_out(
            k_c, jnp.log(c), log_pc, *LOG_C_RANGE, SLICE_WIDTH, SLICE_STEPS, return_capped=True
        )
        c = jnp.exp(theta)
        hit = hit | hit_c
        if learn_eps:

            def log_pe(phi):
                return log_eps_conditional(phi, abs_resid, c, hyper.eps_shape, hyper.eps_rate)

            phi, hit_e = slice_stepping_out(
                k_e, jnp.log(eps), log_pe, *LOG_EPS_RANGE, SLICE_WIDTH, SLICE_STEPS,
                return_capped=True,
            )  # fmt: skip
            eps = jnp.exp(phi)
            hit = hit | hit_e
        return c, eps, hit

    c, eps, hit = jax.lax.fori_loop(0, rounds, one_round, (c, eps, jnp.zeros((), bool)))
    return c, eps, jnp.where(hit, jnp.int32(CAP_SLICE_NOISE), jnp.int32(0))


# --------------------------------------------------------------------------------------------
# e | a, b, T, V
# --------------------------------------------------------------------------------------------
def tv_potential_and_grad(e, Phi, b, T, V, eta):
    """U(e) = Σ_m [e_m − (η_m − 1) log e_m] + Σ (T − f)²/(2V), f = Σ_m w_m Φ_m + b, and ∇_e U.

    The (T, V) form of :func:`bayesmkl.sampler.conditionals.e_potential_and_grad`:
    g_m = ∂U_lik/∂w_m = −⟨(T − f)/V, Φ_m⟩ and ∇U = 1 − (η − 1)/e + (g − (wᵀg) 1)/S.
    """
    S = jnp.sum(e)
    w = e / S
    f = jnp.tensordot(w, Phi, axes=1) + b[:, None]
    R = (T - f) / V
    U = jnp.sum(e - (eta - 1.0) * jnp.log(e)) + 0.5 * jnp.sum(R * (T - f))
    g = -jnp.tensordot(Phi, R, axes=([1, 2], [0, 1]))
    return U, 1.0 - (eta - 1.0) / e + (g - jnp.dot(w, g)) / S
