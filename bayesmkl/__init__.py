"""bayesmkl: Bayesian multiple kernel learning.

The heart of the package is BM3KL (Du et al., "Efficient Bayesian Maximum Margin Multiple Kernel
Learning", ECML PKDD 2016), sampled with NumPyro/JAX. Deterministic and variational MKL methods
live in :mod:`bayesmkl.baselines`.

Importing the package switches JAX to 64-bit floats (``jax_enable_x64``): the Gibbs sampler's
linear algebra needs it (the augmentation variables span more than ten orders of magnitude).
Kernels may still be *stored* in float32.
"""

import numpyro as _numpyro

_numpyro.enable_x64()

__version__ = "0.1.0.dev0"

_LAZY = {
    "KernelPool": ("bayesmkl.kernels", "KernelPool"),
    "BM3KLClassifier": ("bayesmkl.estimator", "BM3KLClassifier"),
}

__all__ = ["KernelPool", "BM3KLClassifier", "__version__"]


def __getattr__(name):
    # Lazy attribute access keeps `import bayesmkl` cheap and free of import cycles.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'bayesmkl' has no attribute {name!r}")
