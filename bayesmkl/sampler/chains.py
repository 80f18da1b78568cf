"""Chains on several devices, with the same draws as running them one after the other.

NumPyro's ``chain_method="parallel"`` runs the chains under :func:`jax.pmap`. On the BM3KL
sampler its draws are not those of ``"sequential"`` for the same keys: XLA compiles a
program replicated over several devices differently from the single-device one, the two
differ in the last bits of some sweeps' arithmetic, and the Gibbs chain (slice sampling,
Metropolis accept/reject) turns a last-bit difference into different draws within a few
sweeps. ``"vectorized"`` (:func:`jax.vmap`) differs from both for the same
reason (batched linear algebra rounds differently).

:class:`DeviceChains` is a NumPyro ``chain_method`` callable that instead compiles the
single-chain program of ``"sequential"`` once per device and runs chain ``i`` on device
``i mod D``, one host thread per device. Each chain then executes the program it runs under
``"sequential"``, so the draws agree with those of ``"sequential"`` to rounding (host devices
may round the last bits differently, which a long Gibbs chain may amplify into different,
equally valid draws), and D devices run D chains at a time (more chains than devices run in
rounds). Host CPU devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=D``,
set before JAX is imported; on a GPU machine each GPU is a device.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp

from bayesmkl.config import x64_enabled, x64_scope

__all__ = ["DeviceChains", "XLA_DEVICE_FLAG", "resolve_chain_method"]

#: The XLA flag that splits the host CPU into several JAX devices.
XLA_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def resolve_chain_method(chain_method: str, num_chains: int, devices=None):
    """What to hand NumPyro's ``MCMC(chain_method=...)`` for the estimator's ``chain_method``.

    ``"sequential"`` and ``"vectorized"`` pass through. ``"parallel"`` becomes a
    :class:`DeviceChains` over the local devices; with one chain it is ``"sequential"``, and
    with a single device it is ``"sequential"`` with a ``UserWarning`` that names the XLA flag
    (the draws are the same either way).
    """
    if chain_method != "parallel" or num_chains == 1:
        return chain_method if num_chains > 1 else "sequential"
    devices = list(jax.local_devices() if devices is None else devices)
    if len(devices) < 2:
        warnings.warn(
            f"chain_method='parallel' found a single JAX device ({devices[0].platform}), so the "
            f"{num_chains} chains run one after the other (same draws as 'sequential'). For "
            f"several CPU devices set XLA_FLAGS={XLA_DEVICE_FLAG}={num_chains} in the "
            "environment before JAX is imported; with one accelerator, 'vectorized' is usually "
            "the fastest.",
            UserWarning,
            stacklevel=3,
        )
        return "sequential"
    return DeviceChains(devices)


class DeviceChains:
    """NumPyro ``chain_method`` callable: chain ``i`` on device ``i mod D``, D at a time.

    Parameters
    ----------
    devices : sequence of jax.Device
        At least one device.

    Notes
    -----
    NumPyro calls ``DeviceChains(devices)(partial_map_fn)(map_args)`` where ``map_args`` is
    ``(rng_keys, init_state, init_params)`` with a leading chain axis and ``partial_map_fn``
    runs one chain. The model arguments bound in ``partial_map_fn`` are passed to the compiled
    program as arguments, as ``"sequential"`` does (``jit_model_args=True``), not baked in as
    constants. NumPyro shows no progress bar for a callable ``chain_method``.
    """

    def __init__(self, devices):
        self.devices = list(devices)
        if not self.devices:
            raise ValueError("DeviceChains needs at least one device")
        self._compiled = {}

    def __call__(self, partial_map_fn):
        run_chain, args = self._jitted(partial_map_fn)
        x64 = x64_enabled()

        def run(map_args):
            n = jax.tree.leaves(map_args)[0].shape[0]
            chain = lambda i: jax.tree.map(lambda x: x[i], map_args)  # noqa: E731
            # trace in this thread first (the trace sets the kernel's sweep function)
            run_chain.lower(chain(0), *args)

            def on_device(i):
                dev = self.devices[i % len(self.devices)]
                with x64_scope() if x64 else contextlib.nullcontext():
                    out = run_chain(*jax.device_put((chain(i), *args), dev))
                    return jax.block_until_ready(out)

            with ThreadPoolExecutor(min(n, len(self.devices))) as pool:
                outs = list(pool.map(on_device, range(n)))
            outs = jax.device_put(outs, self.devices[0])
            return jax.tree.map(lambda *xs: jnp.stack(xs), *outs)

        return run

    def _jitted(self, partial_map_fn):
        """``(jitted one-chain function of (map_args, *model_args), model_args)``, cached."""
        fn = partial_map_fn
        kw = dict(getattr(fn, "keywords", None) or {})
        if not isinstance(fn, functools.partial) or not {"args", "kwargs"} <= set(kw):
            return jax.jit(fn), ()  # unknown NumPyro layout: model args stay bound
        args, kwargs = kw.pop("args"), kw.pop("kwargs")
        mcmc = getattr(fn.func, "__self__", None)
        phase = tuple(sorted(getattr(mcmc, "_collection_params", {}).items()))
        key = (fn.func, tuple(sorted(kw.items())), phase)
        if key not in self._compiled:

            def one_chain(map_args, args, kwargs):
                return fn.func(map_args, args=args, kwargs=kwargs, **kw)

            self._compiled[key] = jax.jit(one_chain)
        return self._compiled[key], (args, kwargs)
