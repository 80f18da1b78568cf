"""bayesmkl: Bayesian multiple kernel learning.

The heart of the package is BM3KL (Du et al., "Efficient Bayesian Maximum Margin Multiple Kernel
Learning", ECML PKDD 2016), sampled with NumPyro/JAX. Deterministic and variational MKL methods
live in :mod:`bayesmkl.baselines`.

64-bit floats: the Gibbs sampler's linear algebra needs them (the augmentation variables span
more than ten orders of magnitude). Importing the package does **not** change JAX's global
``jax_enable_x64``: every public entry point (estimator and baseline methods, ``KernelPool``,
``bayesmkl.kernels.functions``, ``bayesmkl.posterior.predictive``) switches 64-bit mode on for the
duration of
its call only, so a float32 JAX program of yours is unaffected. Code that drives the low-level
NumPyro kernel :class:`bayesmkl.sampler.BM3KL` (or :mod:`bayesmkl.sampler.random`,
:mod:`bayesmkl.model.likelihood`) itself must enable x64 (``numpyro.enable_x64()``). Kernels may be
*stored* in float32 (``KernelPool(dtype=np.float32)``, ``kernel_dtype="float32"``); see
:mod:`bayesmkl.config` for where float32 is allowed and why float64 is required elsewhere.
"""

import importlib as _importlib
import warnings as _warnings
from typing import TYPE_CHECKING

from bayesmkl._version import __version__

with _warnings.catch_warnings():
    # NumPyro imports tqdm.auto, which in a Jupyter kernel without ipywidgets warns "IProgress
    # not found" from inside tqdm and falls back to text bars (the bars `progress_bar=True`
    # shows anyway). Importing it first, here and quietly, keeps that warning off every notebook
    # that uses bayesmkl; later imports of tqdm.auto find the module loaded and do not warn.
    _warnings.filterwarnings("ignore", message="IProgress not found")
    _importlib.import_module("tqdm.auto")

if TYPE_CHECKING:  # static analysers (jedi, pyright, mypy) cannot see through __getattr__
    from bayesmkl.estimators.classifier import BM3KLClassifier
    from bayesmkl.estimators.compare import compare_kfold
    from bayesmkl.estimators.regressor import BM3KLRegressor
    from bayesmkl.exceptions import (
        NonFinitePredictionError,
        SamplerDivergenceError,
        SamplerDivergenceWarning,
    )
    from bayesmkl.kernels import KernelPool

_LAZY = {
    "KernelPool": ("bayesmkl.kernels", "KernelPool"),
    "BM3KLClassifier": ("bayesmkl.estimators.classifier", "BM3KLClassifier"),
    "BM3KLRegressor": ("bayesmkl.estimators.regressor", "BM3KLRegressor"),
    "compare_kfold": ("bayesmkl.estimators.compare", "compare_kfold"),
    # what fit and predict raise or warn, for except clauses and warnings filters
    "SamplerDivergenceWarning": ("bayesmkl.exceptions", "SamplerDivergenceWarning"),
    "SamplerDivergenceError": ("bayesmkl.exceptions", "SamplerDivergenceError"),
    "NonFinitePredictionError": ("bayesmkl.exceptions", "NonFinitePredictionError"),
}

__all__ = [
    "KernelPool",
    "BM3KLClassifier",
    "BM3KLRegressor",
    "compare_kfold",
    "NonFinitePredictionError",
    "SamplerDivergenceError",
    "SamplerDivergenceWarning",
    "__version__",
]


def __getattr__(name):
    # Lazy attribute access keeps `import bayesmkl` cheap and free of import cycles.
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(_importlib.import_module(module), attr)
    raise AttributeError(f"module 'bayesmkl' has no attribute {name!r}")
