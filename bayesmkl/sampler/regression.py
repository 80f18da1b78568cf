"""The Gibbs sweep of BM³KL regression and its NumPyro ``MCMCKernel`` (docs/math.md §15.5).

One sweep, with pseudo-observations (T, V) of f from the current λ⁺, λ⁻, c, ε
(:func:`bayesmkl.model.regression_likelihood.pseudo_observations`):

1. the kernel-weight move of the classifier (:func:`bayesmkl.sampler.sampler.
   kernel_weight_step`: pairwise Gibbs on w, HMC on the collapsed target or on the
   conditional of e, the exact scale refresh, warm-up adaptation), given (T, V);
2. (a, b) | w, T, V, ν (Matheron's rule, :func:`bayesmkl.sampler.conditionals.sample_ab_tv`);
3. (c, ε) | f with λ integrated out, then λ⁺, λ⁻ | f, c, ε (:mod:`bayesmkl.estimators.regressor.
   conditionals`): together an exact draw of (c, ε, λ) | w, a, b;
4. ν | a, ς and ς | ν (the classifier's TPBN Gibbs pair).

After a collapsed move (1) integrated (a_A, b) out, (2) draws them given the new w before
anything conditions on them, as in the classifier (a partially collapsed Gibbs step, van Dyk &
Park 2008); after the other moves (2) is an ordinary Gibbs step. The targets ``y: (1, N)`` take
the classifier's ``delta`` slot of ``MCMC.run(key, K, y)``, so
:class:`~bayesmkl.sampler.runner.ChainRunner` and the run-length rule serve both models.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from bayesmkl.model.classification import Hyper, combine_kernels, decision_values
from bayesmkl.model.regression import RegHyper, reg_log_joint, reg_model
from bayesmkl.model.regression_likelihood import pseudo_observations
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.moves import EXACT_MOVES, dual_averaging_init, welford_init
from bayesmkl.sampler.regression_conditionals import (
    CAP_SLICE_NOISE,
    sample_lam_pm,
    sample_noise,
    tv_potential_and_grad,
)
from bayesmkl.sampler.sampler import _unpack_args, check_init, kernel_weight_step
from bayesmkl.sampler.state import CAPPED_LOOPS, BM3KLConfig, BM3KLState

__all__ = [
    "REG_CAPPED_LOOPS",
    "REG_SITES",
    "BM3KLReg",
    "RegConfig",
    "init_reg_state",
    "sweep",
    "sweep_with_decisions",
]

REG_SITES = ("e", "a", "b", "lam_plus", "lam_minus", "nu", "varsigma", "c", "eps")
#: The bits of ``BM3KLState.capped`` a regression sweep may set (:data:`CAPPED_LOOPS` and the
#: slice updates of c and ε).
REG_CAPPED_LOOPS = {
    **CAPPED_LOOPS,
    CAP_SLICE_NOISE: "the slice sampler of the noise parameters c and epsilon",
}
#: Initial ε of a chain when ε is learnt (in the units of the sampler's targets).
EPS_INIT = 0.1


class RegConfig(NamedTuple):
    """Static configuration of the regression sweep (hashable; part of the compilation key).

    Attributes
    ----------
    base : BM3KLConfig
        The kernel-weight move and its settings (its ``hyper`` holds η and the TPBN values that
        choose static routes; γ0 is unused).
    hyper : RegHyper
        The hyper-parameters the chains start with (they travel in the state as arrays).
    epsilon : float or None
        A fixed ε (``None``: ε is learnt, with the Gamma prior of ``hyper``).
    """

    base: BM3KLConfig
    hyper: RegHyper
    epsilon: float | None = None

    @property
    def learn_eps(self) -> bool:
        return self.epsilon is None

    def validate(self) -> RegConfig:
        self.base.validate()
        if self.base.move not in EXACT_MOVES:
            raise ValueError(
                f"the regressor samples with an exact kernel-weight move, one of {EXACT_MOVES}; "
                f"got {self.base.move!r}"
            )
        if self.base.nu_update != "gibbs":
            raise ValueError("the regressor updates nu by Gibbs only (nu_update='gibbs')")
        h = self.hyper
        if min(h.c_shape, h.c_rate, h.eps_shape, h.eps_rate) <= 0:
            raise ValueError("c_shape, c_rate, eps_shape and eps_rate must be positive")
        if self.epsilon is not None and not self.epsilon >= 0:
            raise ValueError(f"a fixed epsilon must be >= 0; got {self.epsilon}")
        return self


def _hyper_arrays(hyper: RegHyper, P: int) -> RegHyper:
    f = lambda v: jnp.asarray(v, dtype=jnp.float64)  # noqa: E731
    return RegHyper(jnp.broadcast_to(f(hyper.eta), (P,)), *(f(v) for v in hyper[1:]))


def init_reg_state(rng_key, K, y, config: RegConfig, init_params=None) -> BM3KLState:
    """Initial state: e = 1, a = 0, b = 0, λ^± = ν = ς = 1, c = 1, ε = 0.1 (or the fixed ε);
    ``init_params`` (any of :data:`REG_SITES`) overrides them."""
    P = K.shape[0]
    C, N = y.shape
    eps0 = EPS_INIT if config.epsilon is None else config.epsilon
    z = {
        "e": jnp.ones(P),
        "a": jnp.zeros((C, N)),
        "b": jnp.zeros(C),
        "lam_plus": jnp.ones((C, N)),
        "lam_minus": jnp.ones((C, N)),
        "nu": jnp.ones((C, N)),
        "varsigma": jnp.ones((C, N)),
        "c": jnp.ones(()),
        "eps": jnp.asarray(eps0, dtype=jnp.float64),
    }
    if init_params:
        unknown = set(init_params) - set(REG_SITES)
        if unknown:
            raise ValueError(f"unknown init_params {sorted(unknown)}; known: {REG_SITES}")
        z.update({k: jnp.asarray(v, dtype=jnp.float64) for k, v in init_params.items()})
    zero = jnp.zeros(())
    return BM3KLState(
        i=jnp.zeros((), jnp.int32), z=z, r=jnp.zeros(P),
        step_size=jnp.asarray(config.base.step_size, dtype=jnp.float64), accept_prob=zero,
        diverging=jnp.zeros((), bool), potential_energy=zero,
        adapt_state=dual_averaging_init(config.base.step_size), mass_sqrt=jnp.eye(P),
        welford=welford_init(P), capped=jnp.zeros((), jnp.int32),
        hyper=_hyper_arrays(config.hyper, P), rng_key=rng_key,
    )  # fmt: skip


def sweep_with_decisions(state: BM3KLState, K, y, config: RegConfig, num_warmup: int, weight=None):
    """One regression sweep (pure): ``(new state, f (1, N))`` of the new state.

    ``K: (P, N, N)``, ``y: (1, N)``; ``weight`` must be ``None`` (no sample weights).
    """
    if weight is not None:
        raise ValueError("the regression sweep takes no sample weights")
    h = state.hyper
    z = state.z
    key, k_r, k_g, k_e, k_s, k_ab, k_noise, k_lam, k_nu, k_vs = jax.random.split(state.rng_key, 10)

    # (1) kernel weights given (T, V)
    Phi = cond.per_kernel_decisions(K, z["a"])
    T, V = pseudo_observations(y, z["lam_plus"], z["lam_minus"], z["c"], z["eps"])

    def pg(e):
        return tv_potential_and_grad(e, Phi, z["b"], T, V, h.eta)

    base = config.base
    ws = kernel_weight_step((k_r, k_g, k_e, k_s), state, K, Phi, T, V, base, num_warmup, pg)
    Kw = combine_kernels(K, ws.e / jnp.sum(ws.e))
    # (2) (a, b) | w, T, V, ν
    a, b, _ = cond.sample_ab_tv(k_ab, Kw, T, V, z["nu"], h.bias_prior_var)
    f = decision_values(Kw, a, b)
    # (3) (c, ε) | f, then λ | f, c, ε
    c, eps, hit = sample_noise(k_noise, y, f, z["c"], z["eps"], h, config.learn_eps)
    lam_plus, lam_minus = sample_lam_pm(k_lam, y, f, c, eps)
    # (4) TPBN
    nu = cond.sample_nu(k_nu, a, z["varsigma"], h.alpha_a, base.hyper.alpha_a == 1.0)
    varsigma = cond.sample_varsigma(k_vs, nu, h.alpha_a, h.beta_a, h.kappa)

    z_new = {"e": ws.e, "a": a, "b": b, "lam_plus": lam_plus, "lam_minus": lam_minus,
             "nu": nu, "varsigma": varsigma, "c": c, "eps": eps}  # fmt: skip
    pe = -reg_log_joint(z_new, f, y, h, config.learn_eps)
    new_state = BM3KLState(
        i=state.i + 1, z=z_new, r=ws.r, step_size=ws.step_size, accept_prob=ws.accept_prob,
        diverging=ws.diverging | ~jnp.isfinite(pe), potential_energy=pe,
        adapt_state=ws.adapt_state, mass_sqrt=ws.mass_sqrt, welford=ws.welford,
        capped=ws.capped | hit, hyper=h, rng_key=key,
    )  # fmt: skip
    return new_state, f


def sweep(state: BM3KLState, K, y, config: RegConfig, num_warmup: int) -> BM3KLState:
    """One regression sweep (pure); returns the next state."""
    return sweep_with_decisions(state, K, y, config, num_warmup)[0]


class BM3KLReg(MCMCKernel):
    """BM³KL regression Gibbs sampler as a NumPyro MCMC kernel (``MCMC.run(key, K, y)``).

    Parameters
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var, c_shape, c_rate, eps_shape, eps_rate : float
        Hyper-parameters (:class:`~bayesmkl.model.regression.RegHyper`; the defaults are the
        regressor's default prior). ``eta`` may be a vector (P,).
    epsilon : float or None
        A fixed ε ≥ 0, or ``None`` to learn it.
    move, step_size, n_leapfrog, adapt_step_size, pairs_per_kernel, n_active, dense_mass
        The kernel-weight move and its settings (:class:`~bayesmkl.sampler.state.
        BM3KLConfig`); exact moves only.
    adapt_sweeps : int, optional
        Sweeps during which step size and mass adapt (default: ``MCMC``'s ``num_warmup``).
    """

    sample_field = "z"
    sweep_with_decisions = staticmethod(sweep_with_decisions)
    monitored_sites = ("c", "eps")

    def __init__(
        self, eta=2.0, alpha_a=1.0, beta_a=1.0, kappa=1.0, bias_prior_var=1.0, c_shape=2.0,
        c_rate=0.5, eps_shape=1.0, eps_rate=2.0, *, epsilon=None, move="collapsed_log",
        step_size=0.01, n_leapfrog=10, adapt_step_size=True, pairs_per_kernel=4.0,
        n_active=32, dense_mass=False, adapt_sweeps=None,
    ):  # fmt: skip
        eta = tuple(np.asarray(eta, dtype=float).ravel()) if np.ndim(eta) else float(eta)
        nums = [float(v) for v in (alpha_a, beta_a, kappa, bias_prior_var)]
        base = BM3KLConfig(
            Hyper(eta, *nums, 0.0), move, float(step_size), int(n_leapfrog), "constant",
            bool(adapt_step_size), True, False, None, float(pairs_per_kernel), int(n_active),
            bool(dense_mass), "gibbs",
        )  # fmt: skip
        noise = [float(v) for v in (c_shape, c_rate, eps_shape, eps_rate)]
        self.config = RegConfig(
            base,
            RegHyper(eta, *nums, *noise),
            None if epsilon is None else float(epsilon),
        ).validate()
        self.adapt_sweeps = None if adapt_sweeps is None else int(adapt_sweeps)
        self._num_warmup = 0
        self._sample_fn = None

    @property
    def model(self):
        """The augmented NumPyro model this kernel samples (``model(K, y)``)."""
        return partial(reg_model, hyper=self.config.hyper, epsilon=self.config.epsilon)

    @property
    def default_fields(self):
        return ("z",)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        K, y, weight, margin = _unpack_args(model_args, model_kwargs)
        if weight is not None or margin is not None:
            raise ValueError("BM3KLReg takes no sample weights or margins: MCMC.run(key, K, y)")
        self._num_warmup = check_init(self.config, K, num_warmup, self.adapt_sweeps)
        config, nw = self.config, self._num_warmup

        def one_sweep(state, K, y, weight):
            return sweep_with_decisions(state, K, y, config, nw, weight)[0]

        if is_prng_key(rng_key):
            self._sample_fn = jax.jit(one_sweep)
            return init_reg_state(rng_key, K, y, config, init_params)
        self._sample_fn = jax.jit(jax.vmap(one_sweep, in_axes=(0, None, None, None)))
        return jax.vmap(lambda k, p: init_reg_state(k, K, y, config, p))(rng_key, init_params)

    def sample(self, state, model_args, model_kwargs):
        K, y, weight, _ = _unpack_args(model_args, model_kwargs)  # init refused margins
        return self._sample_fn(state, K, y, weight)

    def postprocess_fn(self, model_args, model_kwargs):
        def add_w(z):
            return {**z, "w": z["e"] / jnp.sum(z["e"], axis=-1, keepdims=True)}

        return add_w

    def get_diagnostics_str(self, state):
        return f"c {float(state.z['c']):.3g}, eps {float(state.z['eps']):.3g}"
