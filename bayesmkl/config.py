"""64-bit JAX inside the package's calls only (``import bayesmkl`` leaves JAX's settings alone).

Why float64 is needed, and where float32 is allowed
----------------------------------------------------
=====================================  ==========  ===============================================
computation                            precision   why
=====================================  ==========  ===============================================
Gibbs sampler (λ, ν, ς, a, b, e, w)    float64     the augmentation variables span more than ten
                                                   orders of magnitude (λ ≈ abs(ζ) at the margin,
                                                   ν → κ = 1e-10 for pruned points); the Λ-form
                                                   solves and the GIG/inverse-Gaussian draws lose
                                                   all precision in float32
kernel computation (pool, functions)   float64     squared distances of standardised features and
                                                   integer powers; computed once, cheap
kernel *storage* (``dtype=``,          float32 OK  halves memory and the passes over ``K``; the
``kernel_dtype=``)                                 sampler's per-kernel products ``A K_m`` run in
                                                   the storage dtype and are accumulated in
                                                   float64 (:func:`bayesmkl.sampler.
                                                   conditionals.per_kernel_decisions`)
prediction (decision values,           float64     sums over draws and kernels; test kernels may
probabilities)                                     be stored in float32
baselines (SVM, VB, ECM)               float64     NumPy/libsvm (float64 throughout); BM3KLMAP's
                                                   JAX steps need float64 like the sampler
=====================================  ==========  ===============================================

How it is scoped
----------------
The public entry points (``BM3KLClassifier`` and baseline methods, ``KernelPool.fit``/
``train_kernels``/``cross_kernels``, the functions of :mod:`bayesmkl.kernels.functions` and
:mod:`bayesmkl.posterior.predictive`) are wrapped in :func:`with_x64`, which turns on
``jax_enable_x64`` for
the duration of the call in the calling thread (JAX's thread-local ``enable_x64`` context) and
restores the caller's setting afterwards. JAX keys its compilation caches on the setting, so a
program compiled inside a bayesmkl call is never reused for a float32 call of the user's, and
vice versa. Arrays handed back are NumPy arrays, except from :mod:`bayesmkl.kernels.functions`
which return float64 JAX arrays (operations on them outside the package follow the caller's
setting).

The low-level building blocks (:mod:`bayesmkl.sampler` — the NumPyro kernel ``BM3KL`` —,
:mod:`bayesmkl.sampler.random`, :mod:`bayesmkl.model.likelihood`,
:mod:`bayesmkl.model.classification`) are traced inside
those calls and are not wrapped: code that drives them directly (e.g. NumPyro's ``MCMC`` with the
``BM3KL`` kernel) must run with 64-bit JAX, by ``numpyro.enable_x64()`` /
``jax.config.update("jax_enable_x64", True)`` at start-up or inside ``with x64_scope():``.
"""

from __future__ import annotations

import functools

import jax

__all__ = ["x64_enabled", "x64_scope", "with_x64"]


def x64_scope():
    """Context manager: 64-bit JAX inside the ``with`` block (this thread), as before after."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:  # pragma: no cover - JAX < 0.6 kept it in jax.experimental
        from jax.experimental import enable_x64 as ctx
    return ctx(True)


def x64_enabled() -> bool:
    """Whether JAX is in 64-bit mode here and now (``jax_enable_x64``, context included)."""
    return bool(jax.config.jax_enable_x64)


def with_x64(func):
    """Decorator: run ``func`` with 64-bit JAX (see the module docstring).

    For eager functions only: a generator or lazy result consumed after the call would run
    outside the scope.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with x64_scope():
            return func(*args, **kwargs)

    return wrapper
