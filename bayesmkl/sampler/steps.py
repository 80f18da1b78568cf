"""The steps of a sweep, as pure functions of arrays (and PRNG keys) shared by both models.

Every model of the package is, given its augmentation variables, a Gaussian regression of the
decision values f = A K_w + b 1ᵀ on pseudo-targets ``T (C, N)`` with noise variances
``V (C, N)``; the steps that do not depend on the likelihood are written in (T, V):

* :func:`kernel_weight_step`: the kernel-weight move on e (pairwise Gibbs, the step-size move on
  the collapsed target or the conditional of e, the scale refresh, warm-up adaptation);
* :func:`gaussian_ab_step`: (a, b) | w, T, V, ν;
* :func:`tpbn_gibbs_step` and :func:`tpbn_collapsed_step`: the TPBN scales ν and rates ς.

The augmentation steps depend on the likelihood: :func:`lam_step` (the classifier's λ) and
:func:`noise_lam_step` (the regressor's c, ε and λ^±). :func:`bayesmkl.sampler.sweep.
build_sweep` composes them into one sweep.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.sampler import collapsed as coll
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler import simplex, tpbn
from bayesmkl.sampler.moves import (
    POSITIONS,
    dual_averaging_init,
    dual_averaging_update,
    exact_hmc_move,
    mass_sqrt_from,
    welford_update,
)
from bayesmkl.sampler.regression_conditionals import sample_lam_pm, sample_noise
from bayesmkl.sampler.state import MASS_RESTART_STEP, State, SweepConfig, mass_window

__all__ = [
    "WeightStep",
    "MAX_INNER_CYCLES",
    "gaussian_ab_step",
    "inner_cycles_for",
    "kernel_weight_step",
    "lam_step",
    "noise_lam_step",
    "tpbn_collapsed_step",
    "tpbn_gibbs_step",
]


class WeightStep(NamedTuple):
    """What :func:`kernel_weight_step` returns.

    Attributes
    ----------
    e : array (P,)
        The new expanded-mean weights.
    r, adapt_state, mass_sqrt, welford, capped
        The move's carried state after the step (the :class:`~bayesmkl.sampler.state.State`
        fields of the same names).
    step_size, accept_prob, diverging
        What the move reports (the :class:`~bayesmkl.sampler.state.Info` fields).
    collapsed : bool
        Whether the move acted on the collapsed target (a Python bool): then (a, b) were
        integrated out and must be drawn given the new w before anything conditions on them.
    """

    e: jax.Array
    r: jax.Array
    step_size: jax.Array
    accept_prob: jax.Array
    diverging: jax.Array
    adapt_state: object
    mass_sqrt: jax.Array
    welford: object
    capped: jax.Array
    collapsed: bool


def kernel_weight_step(
    keys, state: State, K, Phi, T, V, config: SweepConfig, num_warmup: int, pg_conditional
) -> WeightStep:
    """The kernel-weight move on e, as ``config.spec`` says.

    Exact pairwise Gibbs updates of w | a, b, T, V, then the step-size move (on the collapsed
    target w | T, V, ν with the active sample weights and b integrated out, or on the
    conditional ``pg_conditional(e) -> (U, ∇U)``), the exact scale refresh, and the warm-up
    adaptation of the step size and mass matrix. ``keys`` are ``(k_r, k_g, k_e, k_s)``
    (momentum, pairwise Gibbs, move, scale); ``state`` supplies e, a, b, ν, the
    hyper-parameters η and τ and the adaptation state; ``Phi: (P, C, N)`` holds A K_m.
    """
    k_r, k_g, k_e, k_s = keys
    h = state.hyper
    spec = config.spec
    eta = h.eta
    z = state.z
    P, (C, N) = K.shape[0], T.shape
    e = z.e
    capped = state.capped
    if spec.pairwise:
        n_pairs = max(1, int(np.ceil(config.pairs_per_kernel * P)))
        e, hit = simplex.sample_w_exact(
            k_g, e, Phi, z.b, T, V, eta, n_pairs, eta_is_one=config.eta_is_one,
            return_capped=True,
        )  # fmt: skip
        capped = capped | hit

    t = (state.i + 1).astype(jnp.float64)
    warm = state.i < num_warmup
    if config.adapts:
        step_size = jnp.exp(
            jnp.where(warm, state.adapt_state.log_step, state.adapt_state.log_step_avg)
        )
    elif config.step_schedule == "inverse":
        step_size = config.step_size / t
    else:
        step_size = jnp.asarray(config.step_size, dtype=jnp.float64)
    r = jax.random.normal(k_r, state.r.shape) if config.refresh_momentum else state.r
    accept_prob, diverging, r_new = jnp.ones(()), jnp.zeros((), bool), r
    s_act = coll.n_active_for(P, C, N, config.n_active, K.shape[2]) if spec.collapsed else 0
    collapsed = s_act > 0
    if spec.step is not None:
        if collapsed:
            data = coll.collapsed_setup(K, z.a, z.nu, Phi, s_act)
            pg = coll.collapsed_potential_and_grad(data, T, V, h.bias_prior_var, eta)
        else:
            pg = pg_conditional
        extra = {"mass_sqrt": state.mass_sqrt} if config.adapts_mass else {}
        if spec.step is exact_hmc_move:
            extra["position"] = spec.position
        res = spec.step(
            k_e, e, r, step_size, pg,
            n_leapfrog=config.n_leapfrog, flip_momentum=config.flip_momentum, **extra,
        )  # fmt: skip
        e, accept_prob, diverging, r_new = res.e, res.accept_prob, res.diverging, res.r
    if config.uses_scale_refresh:
        e = cond.sample_scale(k_s, e, eta)
    adapt_state = state.adapt_state
    if config.adapts:
        new_adapt = dual_averaging_update(adapt_state, accept_prob, spec.target_accept)
        adapt_state = _select(warm, new_adapt, adapt_state)
    mass_sqrt, welford = state.mass_sqrt, state.welford
    window = mass_window(num_warmup) if config.adapts_mass else None
    if window is not None:
        lo, hi = window
        collect = (state.i >= lo) & (state.i < hi)
        u = POSITIONS[spec.position][0](e)  # the coordinates the HMC step runs in
        welford = _select(collect, welford_update(welford, u), welford)
        done = state.i == hi - 1  # new metric; restart dual averaging from a step of order 1
        mass_sqrt = jnp.where(done, mass_sqrt_from(welford), mass_sqrt)
        adapt_state = _select(done, dual_averaging_init(MASS_RESTART_STEP), adapt_state)
    return WeightStep(e, r_new, step_size, accept_prob, diverging, adapt_state, mass_sqrt,
                      welford, capped, collapsed)  # fmt: skip


def _select(pred, new, old):
    return jax.tree.map(lambda n, o: jnp.where(pred, n, o), new, old)


def gaussian_ab_step(key, Kw, T, V, nu, tau, weight_space: bool = False):
    """(a, b) | w, T, V, ν: by Matheron's rule in function space (:func:`bayesmkl.sampler.
    conditionals.sample_ab_tv`; ``Kw (N, N)``, ``a (C, N)``), or with ``weight_space`` (the
    landmark model, ``Kw (N, M)``) in weight space (:func:`bayesmkl.sampler.conditionals.
    sample_ab_weight_space`; ``a (C, M)``); ``b (C,)``."""
    if weight_space:
        return cond.sample_ab_weight_space(key, Kw, T, V, nu, tau)
    a, b, _ = cond.sample_ab_tv(key, Kw, T, V, nu, tau)
    return a, b


#: The most extra cycles ``inner_cycles="auto"`` gives a sweep.
MAX_INNER_CYCLES = 8


def inner_cycles_for(config: SweepConfig, P: int, C: int, N: int, M: int, landmark: bool) -> int:
    """The extra cycles of the blocks given w per sweep (:attr:`SweepConfig.inner_cycles`).

    ``"auto"``: 0 for the exact model; for the landmark model (P kernels, C problems, N
    points, M landmarks) the cycles whose (a, b) draws cost, by their leading flop counts,
    about what the collapsed kernel-weight move costs: round(3·(L + 1)·(P·s + s²) / M²) (the
    move's L + 1 evaluations of value and gradient, O(N·(P·s + s²)) each, against a cycle's
    O(N·M²); s the active set, 0 when the move is not collapsed), at least 1 and at most
    :data:`MAX_INNER_CYCLES`. At P = 16, s = 32, L = 10 that is 5 cycles at M = 100 and 1 at
    M = 300.
    """
    if config.inner_cycles != "auto":
        return int(config.inner_cycles)
    if not landmark:
        return 0
    s = coll.n_active_for(P, C, N, config.n_active, M) if config.spec.collapsed else 0
    ratio = 3.0 * (config.n_leapfrog + 1) * (P * s + s * s) / float(M * M)
    return int(np.clip(np.rint(ratio), 1, MAX_INNER_CYCLES))


def lam_step(key, f, delta, gamma0, weight=None, margin=None):
    """The classifier's augmentation: λ | f ``(C, N)`` (:func:`bayesmkl.sampler.conditionals.
    sample_lam`)."""
    return cond.sample_lam(key, f, delta, gamma0, weight, margin)


def noise_lam_step(k_noise, k_lam, y, f, c, eps, hyper, learn_eps: bool):
    """The regressor's augmentation: (c, ε) | f with λ integrated out, then λ⁺, λ⁻ | f, c, ε
    (together an exact draw of (c, ε, λ) | f). Returns ``(c, eps, lam_plus, lam_minus,
    capped)``, ``capped`` the noise updates' cap bit (int32)."""
    c, eps, hit = sample_noise(k_noise, y, f, c, eps, hyper, learn_eps)
    lam_plus, lam_minus = sample_lam_pm(k_lam, y, f, c, eps)
    return c, eps, lam_plus, lam_minus, hit


def tpbn_gibbs_step(k_nu, k_vs, a, varsigma, hyper, ig_shortcut: bool):
    """ν | a, ς then ς | ν (docs/math.md §3.3); ``ig_shortcut`` is the static route α_a = 1.
    Returns ``(nu, varsigma)``."""
    nu = cond.sample_nu(k_nu, a, varsigma, hyper.alpha_a, ig_shortcut)
    varsigma = cond.sample_varsigma(k_vs, nu, hyper.alpha_a, hyper.beta_a, hyper.kappa)
    return nu, varsigma


def tpbn_collapsed_step(key, Kw, T, V, nu, hyper, nu_max):
    """The collapsed TPBN block (:func:`bayesmkl.sampler.tpbn.collapsed_nu_step_tv`): ν | w, T
    point by point, ς | ν, then (a, b) | w, T, V, ν. Returns ``(nu, varsigma, a, b, capped)``."""
    return tpbn.collapsed_nu_step_tv(key, Kw, T, V, nu, hyper, nu_max)
