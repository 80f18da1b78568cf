"""The NumPyro ``MCMCKernel`` adapter of the BM³KL sweep, one class for both models.

:class:`BM3KLKernel` holds a likelihood (:class:`~bayesmkl.sampler.sampler.Classification`,
:class:`~bayesmkl.sampler.regression.Regression`) and a
:class:`~bayesmkl.sampler.state.SweepConfig`; its state is a
:class:`~bayesmkl.sampler.state.ChainState` and each ``sample`` is one sweep of
:func:`~bayesmkl.sampler.sweep.build_sweep`. :class:`~bayesmkl.sampler.sampler.BM3KL` and
:class:`~bayesmkl.sampler.regression.BM3KLReg` are its constructors from the models'
hyper-parameters. Run :class:`numpyro.infer.MCMC` with ``jit_model_args=True``: the kernels and
targets are then arguments of the compiled sweep, not constants baked into it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from bayesmkl.config import x64_enabled
from bayesmkl.sampler.state import ChainState, SweepConfig, init_state
from bayesmkl.sampler.sweep import build_sweep

__all__ = ["BM3KLKernel", "check_init", "unpack_args"]


class BM3KLKernel(MCMCKernel):
    """A BM³KL Gibbs sampler as a NumPyro MCMC kernel (``MCMC.run(key, K, targets[, weight[,
    margin]])``).

    Parameters
    ----------
    likelihood : Classification or Regression
        The model's likelihood (:mod:`bayesmkl.sampler.sweep` says what it supplies).
    config : SweepConfig
        The hyper-parameters and the kernel-weight move's settings; checked here.
    adapt_sweeps : int, optional
        Sweeps (counted from the chain's start) during which the step size and mass matrix
        adapt; default: ``MCMC``'s ``num_warmup``. Set it with ``MCMC(num_warmup=0)`` to run
        the warm-up in chunks of your own
        (:func:`~bayesmkl.sampler.runlength.sample_until_converged`'s ``num_warmup``).
    """

    sample_field = "z"

    def __init__(self, likelihood, config: SweepConfig, adapt_sweeps=None):
        likelihood.validate(config.validate())
        self.likelihood = likelihood
        self.config = config
        self.adapt_sweeps = None if adapt_sweeps is None else int(adapt_sweeps)
        self._num_warmup = 0
        self._sample_fn = None

    @property
    def monitored_sites(self) -> tuple:
        """Scalar sites of ``z`` whose R-hat and ESS the run-length rule checks besides w and f."""
        return self.likelihood.monitored_sites

    @property
    def point_sites(self) -> tuple:
        """Sites of ``z`` with one value per training point (the augmentation variables);
        ``extra_fields=("~z.<site>", ...)`` leaves them out of the stored draws."""
        return self.likelihood.point_sites

    @property
    def model(self):
        """The augmented NumPyro model this kernel samples, ``model(K, targets, ...)``."""
        if self.config.landmarks:
            return self.likelihood.model(self.config.hyper, landmarks=True)
        return self.likelihood.model(self.config.hyper)

    @property
    def default_fields(self):
        return ("z",)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        K, targets, weight, margin = unpack_args(model_args, model_kwargs)
        self.likelihood.check_args(targets, weight, margin)
        self._num_warmup = check_init(self.config, K, num_warmup, self.adapt_sweeps)
        sweep = build_sweep(self.likelihood, self.config, self._num_warmup)

        def one_sweep(chain_state, K, targets, weight, margin):
            return ChainState.join(*sweep(chain_state.state, K, targets, weight, margin))

        def init(key, params):
            return init_state(self.likelihood, key, K, targets, self.config, params)

        if is_prng_key(rng_key):
            self._sample_fn = jax.jit(one_sweep)
            return init(rng_key, init_params)
        # chain_method="vectorized": one key per chain (and init_params with a chain axis)
        self._sample_fn = jax.jit(jax.vmap(one_sweep, in_axes=(0, None, None, None, None)))
        return jax.vmap(init)(rng_key, init_params)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, *unpack_args(model_args, model_kwargs))

    def postprocess_fn(self, model_args, model_kwargs):
        def add_w(z):
            return {**z._asdict(), "w": z.e / jnp.sum(z.e, axis=-1, keepdims=True)}

        return add_w

    def get_diagnostics_str(self, state):
        if self.config.adapts:
            text = f"step {float(state.step_size):.2e}, acc {float(state.accept_prob):.2f}"
        else:
            text = f"S={float(jnp.sum(state.z.e)):.3g}, -lp {float(state.potential_energy):.4g}"
        sites = [f"{s} {float(getattr(state.z, s)):.3g}" for s in self.monitored_sites]
        return ", ".join([text, *sites])


def check_init(config: SweepConfig, K, num_warmup: int, adapt_sweeps) -> int:
    """What the kernel checks at ``init``: 64-bit JAX is on and a vector η has one entry per
    kernel of ``K (P, N, N)``; returns the adaptation length (``adapt_sweeps``, or ``MCMC``'s
    ``num_warmup`` when it is None)."""
    if not x64_enabled():
        raise RuntimeError(
            "the BM3KL sweep needs 64-bit JAX: run it inside bayesmkl.config.x64_scope() or "
            'after jax.config.update("jax_enable_x64", True)'
        )
    if np.ndim(config.hyper.eta) and len(config.hyper.eta) != K.shape[0]:
        raise ValueError(
            f"eta has {len(config.hyper.eta)} entries but there are {K.shape[0]} kernels"
        )
    if K.ndim != 3:
        raise ValueError(f"K must be a kernel stack (P, N, M); got shape {tuple(K.shape)}")
    if K.shape[1] != K.shape[2] and config.nu_update == "collapsed":
        raise ValueError(
            "nu_update='collapsed' is for the exact model only (square kernels (P, N, N)); the "
            f"landmark model's kernels {tuple(K.shape)} update nu by Gibbs (nu_update='gibbs')"
        )
    return int(num_warmup if adapt_sweeps is None else adapt_sweeps)


def unpack_args(model_args, model_kwargs):
    """``(K, targets, weight, margin)`` from ``MCMC.run(key, K, targets[, weight[, margin]])``
    (or keywords ``K``, ``delta`` or ``y``, ``weight``, ``margin``)."""
    if model_kwargs and "K" in model_kwargs:
        kw = model_kwargs
        targets = kw["delta"] if "delta" in kw else kw["y"]
        return kw["K"], targets, kw.get("weight"), kw.get("margin")
    if len(model_args) not in (2, 3, 4):
        raise ValueError(
            "BM3KL expects MCMC.run(rng_key, K, targets), (rng_key, K, targets, weight) or "
            "(rng_key, K, targets, weight, margin)"
        )
    K, targets, *rest = model_args
    rest = rest + [None] * (2 - len(rest))
    return K, targets, rest[0], rest[1]
