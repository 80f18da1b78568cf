"""The BM3KL Gibbs sweep: a pure functional core and a thin NumPyro ``MCMCKernel`` around it.

One sweep, in the paper's order (docs/math.md §5):

1. Φ = A·K_m for all m (one GEMM over the stored kernels);
2. the kernel-weight move on e, as its :class:`~bayesmkl.sampler.moves.MoveSpec` says: exact
   pairwise Gibbs updates of w | a, b, λ, then a step-size move (on the conditional of e, or on
   the collapsed target w | λ, ν), then, except for the literal ``"paper"`` move, the exact
   scale refresh e ← w·Gamma(Ση, 1);
3. K_w = Σ w_m K_m (one GEMV), then λ | rest and (a, b) | rest (Matheron's rule, batched over
   classes) — in the order (a, b) → λ after a collapsed move, since that move integrated (a, b)
   out and they must be drawn given the new w before anything else conditions on them;
4. ν | a, ς and ς | ν — or, with ``nu_update="collapsed"``, the collapsed TPBN block of
   :mod:`bayesmkl.sampler.tpbn` (each ν_ci | w, λ, ν_{-ci} with a, b, ς integrated out, then
   ς | ν and (a, b) | w, λ, ν).

The whole sweep is one jitted function of ``(state, K, delta)``; it is compiled once per data
shape and configuration. The kernels ``K: (P, N, N)`` and targets ``delta: (C, N)`` are the
*model arguments* (``MCMC.run(key, K, delta)``), never closure constants, so they are not baked
into the compiled program; run :class:`numpyro.infer.MCMC` with ``jit_model_args=True``.

The configuration, the state and its initial value are in :mod:`bayesmkl.sampler.state`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from bayesmkl.config import x64_enabled
from bayesmkl.model.classification import (
    Hyper,
    bm3kl_model,
    combine_kernels,
    decision_values,
    log_joint,
)
from bayesmkl.model.likelihood import pseudo_observations
from bayesmkl.sampler import collapsed as coll
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler import simplex, state, tpbn
from bayesmkl.sampler.moves import (
    POSITIONS,
    dual_averaging_init,
    dual_averaging_update,
    exact_hmc_move,
    mass_sqrt_from,
    welford_update,
)

# The state module's names are re-exported: this is where users import them from.
from bayesmkl.sampler.state import *  # noqa: F403
from bayesmkl.sampler.state import (
    MASS_RESTART_STEP,
    BM3KLConfig,
    BM3KLState,
    init_state,
    mass_window,
)

__all__ = ["BM3KL", "WeightStep", "kernel_weight_step", "sweep", "sweep_with_decisions",
           *state.__all__]  # fmt: skip


def sweep(
    state: BM3KLState, K, delta, config: BM3KLConfig, num_warmup: int, weight=None, margin=None
) -> BM3KLState:
    """One Gibbs sweep (pure); returns the next state.

    ``K: (P, N, N)``, ``delta: (C, N)``, ``weight``: sample weights ``(N,)`` or ``None``
    (unweighted), ``margin``: margins ``(C, N)`` in the slack ζ = m − δf or ``None`` (m ≡ 1;
    :mod:`bayesmkl.model.likelihood`). Both enter every step through the slack and the
    pseudo-observations (T, V) only.
    """
    return sweep_with_decisions(state, K, delta, config, num_warmup, weight, margin)[0]


def sweep_with_decisions(
    state: BM3KLState, K, delta, config: BM3KLConfig, num_warmup: int, weight=None, margin=None
) -> tuple[BM3KLState, jax.Array]:
    """:func:`sweep`, also returning the held-in decision values ``f = A K_w + b: (C, N)`` of the
    new state, which the sweep computes anyway (for the potential energy); the run-length
    monitor reads them from here instead of recomputing ``K_w`` for every draw."""
    h = state.hyper  # traced values; config.hyper only decides the static routes below
    eta = h.eta
    z = state.z
    key, k_r, k_g, k_e, k_s, k_lam, k_ab, k_nu, k_vs = jax.random.split(state.rng_key, 9)

    # (1) kernel weights
    Phi = cond.per_kernel_decisions(K, z["a"])
    T, V = pseudo_observations(delta, z["lam"], weight, margin)

    def pg(e):  # the conditional of e given a, b, λ (for the moves that are not collapsed)
        return cond.e_potential_and_grad(e, Phi, z["b"], delta, z["lam"], eta, weight, margin)

    ws = kernel_weight_step((k_r, k_g, k_e, k_s), state, K, Phi, T, V, config, num_warmup, pg)
    e, collapsed, capped = ws.e, ws.collapsed, ws.capped

    w = e / jnp.sum(e)
    Kw = combine_kernels(K, w)
    tau = h.bias_prior_var
    if collapsed:  # (a, b) were integrated out: draw them given the new w first
        a, b = cond.sample_ab(k_ab, Kw, delta, z["lam"], z["nu"], tau, weight, margin)
        f = decision_values(Kw, a, b)
        lam = cond.sample_lam(k_lam, f, delta, h.gamma0, weight, margin)
    else:  # the paper's order: λ | w, a, b, then (a, b) | w, λ, ν
        f = decision_values(Kw, z["a"], z["b"])
        lam = cond.sample_lam(k_lam, f, delta, h.gamma0, weight, margin)
        a, b = cond.sample_ab(k_ab, Kw, delta, lam, z["nu"], tau, weight, margin)
    # (4) TPBN
    if config.nu_update == "collapsed":  # conditions on (w, λ) only; ends with (a, b) | w, λ, ν
        nu, varsigma, a, b, hit = tpbn.collapsed_nu_step(
            k_nu, Kw, delta, lam, z["nu"], h, config.nu_max, weight, margin, return_capped=True
        )
        capped = capped | hit
    else:
        nu = cond.sample_nu(k_nu, a, z["varsigma"], h.alpha_a, config.hyper.alpha_a == 1.0)
        varsigma = cond.sample_varsigma(k_vs, nu, h.alpha_a, h.beta_a, h.kappa)

    z_new = {"e": e, "a": a, "b": b, "lam": lam, "nu": nu, "varsigma": varsigma}
    f = decision_values(Kw, a, b)
    pe = -log_joint(z_new, f, delta, h, weight, margin)
    new_state = BM3KLState(
        i=state.i + 1,
        z=z_new,
        r=ws.r,
        step_size=ws.step_size,
        accept_prob=ws.accept_prob,
        diverging=ws.diverging | ~jnp.isfinite(pe),
        potential_energy=pe,
        adapt_state=ws.adapt_state,
        mass_sqrt=ws.mass_sqrt,
        welford=ws.welford,
        capped=capped,
        hyper=h,
        rng_key=key,
    )
    return new_state, f


class WeightStep(NamedTuple):
    """What :func:`kernel_weight_step` returns: the new ``e`` and the move's bookkeeping (the
    :class:`BM3KLState` fields of the same names), and whether the move was collapsed (a
    Python bool: then (a, b) must be drawn given the new w before anything conditions on
    them)."""

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


def kernel_weight_step(keys, state, K, Phi, T, V, config, num_warmup: int, pg_conditional):
    """Step (1) of a sweep: the kernel-weight move on e, as ``config.spec`` says.

    Shared by every model whose likelihood is, given its augmentation variables, a Gaussian
    regression of f = A K_w + b 1ᵀ on pseudo-targets ``T (C, N)`` with noise variances
    ``V (C, N)`` (the classifier's :func:`sweep`, the regressor's
    :func:`bayesmkl.sampler.regression.sweep_with_decisions`): exact pairwise Gibbs updates of
    w | a, b, T, V, then the step-size move (on the collapsed target w | T, V, ν with the
    active sample weights and b integrated out, or on the conditional ``pg_conditional(e) ->
    (U, ∇U)``), the exact scale refresh, and the warm-up adaptation of the step size and mass
    matrix. ``keys`` are ``(k_r, k_g, k_e, k_s)`` (momentum, pairwise Gibbs, move, scale);
    ``state`` supplies e, a, b, ν, the hyper-parameters η and τ (``state.hyper``) and the
    adaptation state; ``config`` is a :class:`BM3KLConfig`.
    """
    k_r, k_g, k_e, k_s = keys
    h = state.hyper
    spec = config.spec
    eta = h.eta
    z = state.z
    P, (C, N) = K.shape[0], T.shape
    e = z["e"]
    capped = state.capped
    if spec.pairwise:
        n_pairs = max(1, int(np.ceil(config.pairs_per_kernel * P)))
        e, hit = simplex.sample_w_exact(
            k_g, e, Phi, z["b"], T, V, eta, n_pairs, eta_is_one=config.eta_is_one,
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
    s_act = coll.n_active_for(P, C, N, config.n_active) if spec.collapsed else 0
    collapsed = s_act > 0
    if spec.step is not None:
        if collapsed:
            data = coll.collapsed_setup(K, z["a"], z["nu"], Phi, s_act)
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


class BM3KL(MCMCKernel):
    """BM3KL Gibbs sampler as a NumPyro MCMC kernel.

    Parameters
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var, gamma0 : float
        Model hyper-parameters (see :class:`bayesmkl.model.classification.Hyper`); ``eta`` may be a
        vector (P,).
    move : {"collapsed", "gibbs", "exact", "rmala", "paper", "stable"}
        Kernel-weight move (:mod:`bayesmkl.sampler.moves`); "collapsed" is the default.
    step_size, n_leapfrog, step_schedule, adapt_step_size, refresh_momentum, flip_momentum,
    scale_refresh, pairs_per_kernel, n_active, dense_mass, nu_update, nu_max
        See :class:`BM3KLConfig`.
    adapt_sweeps : int, optional
        Sweeps (counted from the chain's start) during which the step size and mass matrix
        adapt; default: ``MCMC``'s ``num_warmup``. Set it with ``MCMC(num_warmup=0)`` to run
        the warm-up in chunks of your own
        (:func:`~bayesmkl.sampler.runlength.sample_until_converged`'s ``num_warmup``).

    Examples
    --------
    >>> from numpyro.infer import MCMC
    >>> mcmc = MCMC(BM3KL(gamma0=100.0), num_warmup=180, num_samples=20, jit_model_args=True)
    >>> mcmc.run(jax.random.key(0), K, delta)          # doctest: +SKIP
    >>> mcmc.get_samples()["w"].shape                    # doctest: +SKIP
    (20, P)

    ``MCMC.run(key, K, delta, weight, margin)`` also takes sample weights ``(N,)`` and margins
    ``(C, N)`` (either may be ``None``; :func:`sweep`).
    """

    sample_field = "z"
    #: The pure sweep ``(state, K, targets, config, num_warmup, weight) -> (state, f)`` that
    #: :class:`~bayesmkl.sampler.runner.ChainRunner` compiles for this kernel.
    sweep_with_decisions = staticmethod(sweep_with_decisions)
    #: Scalar sites of ``z`` whose R-hat and ESS the run-length rule checks besides w and f.
    monitored_sites: tuple = ()

    def __init__(
        self,
        eta=1.0,
        alpha_a=1.0,
        beta_a=0.1,
        kappa=1e-10,
        bias_prior_var=1e-4,
        gamma0=100.0,
        *,
        move="collapsed",
        step_size=0.01,
        n_leapfrog=10,
        step_schedule="constant",
        adapt_step_size=True,
        refresh_momentum=True,
        flip_momentum=False,
        scale_refresh=None,
        pairs_per_kernel=4.0,
        n_active=32,
        dense_mass=False,
        nu_update="gibbs",
        nu_max=tpbn.NU_MAX,
        adapt_sweeps=None,
    ):
        eta = tuple(np.asarray(eta, dtype=float).ravel()) if np.ndim(eta) else float(eta)
        hyper = Hyper(eta, float(alpha_a), float(beta_a), float(kappa), float(bias_prior_var),
                      float(gamma0))  # fmt: skip
        self.config = BM3KLConfig(
            hyper, move, float(step_size), int(n_leapfrog), step_schedule,
            bool(adapt_step_size), bool(refresh_momentum), bool(flip_momentum), scale_refresh,
            float(pairs_per_kernel), int(n_active), bool(dense_mass), str(nu_update),
            float(nu_max),
        ).validate()  # fmt: skip
        self.adapt_sweeps = None if adapt_sweeps is None else int(adapt_sweeps)
        self._num_warmup = 0
        self._sample_fn = None

    @property
    def model(self):
        """The augmented NumPyro model this kernel samples, ``model(K, delta, weight, margin)``
        (the last two optional)."""
        hyper = self.config.hyper

        def model(K, delta, weight=None, margin=None):
            return bm3kl_model(K, delta, weight, hyper=hyper, augmented=True, margin=margin)

        return model

    @property
    def default_fields(self):
        return ("z",)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        K, delta, weight, margin = _unpack_args(model_args, model_kwargs)
        _check_weight(weight, delta.shape[1])
        _check_margin(margin, delta.shape)
        self._num_warmup = check_init(self.config, K, num_warmup, self.adapt_sweeps)
        config, nw = self.config, self._num_warmup

        def one_sweep(state, K, delta, weight, margin):
            return sweep(state, K, delta, config, nw, weight, margin)

        if is_prng_key(rng_key):
            self._sample_fn = jax.jit(one_sweep)
            return init_state(rng_key, K, delta, self.config, init_params)
        # chain_method="vectorized": one key per chain (and init_params with a chain axis)
        self._sample_fn = jax.jit(jax.vmap(one_sweep, in_axes=(0, None, None, None, None)))
        return jax.vmap(lambda k, p: init_state(k, K, delta, self.config, p))(rng_key, init_params)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, *_unpack_args(model_args, model_kwargs))

    def postprocess_fn(self, model_args, model_kwargs):
        def add_w(z):
            return {**z, "w": z["e"] / jnp.sum(z["e"], axis=-1, keepdims=True)}

        return add_w

    def get_diagnostics_str(self, state):
        if self.config.adapts:
            return f"step {float(state.step_size):.2e}, acc {float(state.accept_prob):.2f}"
        return f"S={float(jnp.sum(state.z['e'])):.3g}, -lp {float(state.potential_energy):.4g}"


def check_init(config, K, num_warmup: int, adapt_sweeps) -> int:
    """What every BM³KL kernel checks at ``init``: 64-bit JAX is on and a vector η has one
    entry per kernel of ``K (P, N, N)``; returns the adaptation length (``adapt_sweeps``, or
    ``MCMC``'s ``num_warmup`` when it is None)."""
    if not x64_enabled():
        raise RuntimeError(
            "the BM3KL sweep needs 64-bit JAX: run it inside bayesmkl.config.x64_scope() or "
            'after jax.config.update("jax_enable_x64", True)'
        )
    if np.ndim(config.hyper.eta) and len(config.hyper.eta) != K.shape[0]:
        raise ValueError(
            f"eta has {len(config.hyper.eta)} entries but there are {K.shape[0]} kernels"
        )
    return int(num_warmup if adapt_sweeps is None else adapt_sweeps)


def _unpack_args(model_args, model_kwargs):
    """``(K, delta, weight, margin)`` from ``MCMC.run(key, K, delta[, weight[, margin]])`` (or
    keywords)."""
    if model_kwargs and "K" in model_kwargs:
        kw = model_kwargs
        return kw["K"], kw["delta"], kw.get("weight"), kw.get("margin")
    if len(model_args) not in (2, 3, 4):
        raise ValueError(
            "BM3KL expects MCMC.run(rng_key, K, delta), (rng_key, K, delta, weight) or "
            "(rng_key, K, delta, weight, margin)"
        )
    K, delta, *rest = model_args
    rest = rest + [None] * (2 - len(rest))
    return K, delta, rest[0], rest[1]


def _check_weight(weight, n: int) -> None:
    """Sample weights must be ``None`` or ``n`` finite non-negative numbers, not all zero."""
    if weight is None:
        return
    w = np.asarray(weight)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(
            f"sample weights must be {n} finite non-negative numbers, not all zero; got an "
            f"array of shape {w.shape}"
        )


def _check_margin(margin, shape) -> None:
    """Margins must be ``None`` or finite numbers of the targets' shape ``(C, N)``."""
    if margin is None:
        return
    m = np.asarray(margin)
    if m.shape != tuple(shape) or not np.all(np.isfinite(m)):
        raise ValueError(
            f"margins must be finite numbers of shape {tuple(shape)} (the targets'); got an "
            f"array of shape {m.shape}"
        )
