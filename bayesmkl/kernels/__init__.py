"""Kernel functions and kernel pools.

* :mod:`bayesmkl.kernels.functions`: Gaussian, polynomial and linear kernels in JAX, vectorised over
  widths/degrees and over single features.
* :class:`KernelPool`: an ordered list of (kind, parameter, feature subset) with readable names,
  training-only statistics, train kernels ``(P, N, N)`` and cross kernels ``(P, M, N)``.
* :func:`validate_precomputed`: checks a user's precomputed kernel stack.
* :func:`resolve_kernels` and friends: the one place where an estimator's ``kernels=`` argument
  is interpreted (shared by BM3KL and every baseline).
"""

from bayesmkl.kernels.functions import gaussian_kernel, linear_kernel, polynomial_kernel
from bayesmkl.kernels.input import KernelInput, resolve_kernels
from bayesmkl.kernels.pool import KernelPool, KernelSpec, validate_precomputed

__all__ = [
    "KernelInput",
    "KernelPool",
    "KernelSpec",
    "gaussian_kernel",
    "linear_kernel",
    "polynomial_kernel",
    "resolve_kernels",
    "validate_precomputed",
]
