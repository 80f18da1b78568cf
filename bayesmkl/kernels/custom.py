"""User-supplied base kernels for :class:`~bayesmkl.kernels.KernelPool`.

Besides its own ``"gauss"``, ``"poly"`` and ``"linear"`` kernels (computed by grouped JAX
programs), a pool accepts three kinds of *custom* kernels, each on all features or a column
subset:

=================  =========================================================================
kind               evaluated as (``A: (M, f)`` rows, ``B: (N, f)`` training points)
=================  =========================================================================
callable           ``k(A, B, **params) -> (M, N)`` array, e.g. ``my_func`` or a lambda
scikit-learn GP    ``kernel(A, B)`` for a :class:`sklearn.gaussian_process.kernels.Kernel`
kernel object      (e.g. ``RBF(length_scale=2.0)``, ``1.0 * Matern(nu=1.5)``)
pairwise name      :func:`sklearn.metrics.pairwise.pairwise_kernels` with ``metric=name`` and the
                   given parameters, e.g. ``("rbf", {"gamma": 0.5})``, ``("laplacian", {...})``
=================  =========================================================================

They are evaluated in float64 NumPy on the pool's (standardised) features, one kernel at a time,
then go through the same preprocessing as the built-in kernels: centring with training statistics
(``center=True``), unit-diagonal normalisation with each point's own self-similarity
``k(x, x)`` (``normalize=True``; from ``Kernel.diag`` for GP kernels, otherwise from the diagonal of
``k`` on blocks of 256 points), and the cast to the pool's storage dtype.

Validation: every evaluation must return a finite real array of shape ``(M, N)``; on the
training points the kernel must also be symmetric (within ``1e-6 · max|K|``) and positive
semi-definite (smallest eigenvalue above ``−PSD_RTOL · max|K|``, the check of precomputed
kernels: an indefinite kernel, as ``"sigmoid"`` often is, makes the SVM and the sampler's
problems non-convex and is refused). Errors name the kernel.

Names: given by the user (``KernelSpec(..., display_name=...)``), or derived:
``rbf(gamma=0.5)[all]``, ``RBF(length_scale=2)[x0:4]``, ``callable:my_func[all]``.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Mapping

import numpy as np

from bayesmkl.kernels._checks import check_gram

__all__ = ["CUSTOM_FAMILIES", "classify", "evaluate", "head_name", "self_similarity"]

#: Families of custom kernels (the built-in ones are "gauss", "poly", "linear").
CUSTOM_FAMILIES = ("callable", "sklearn", "pairwise")
_DIAG_BLOCK = 256


def _pairwise_functions() -> dict:
    from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS

    return PAIRWISE_KERNEL_FUNCTIONS


def _is_gp_kernel(obj) -> bool:
    from sklearn.gaussian_process.kernels import Kernel

    return isinstance(obj, Kernel)


def _plain(value):
    """NumPy scalars as Python scalars (readable names, JSON-able parameters)."""
    return value.item() if isinstance(value, np.generic) else value


def _freeze_params(params, what: str) -> tuple:
    if params is None:
        return ()
    if isinstance(params, tuple):  # already frozen (a spec rebuilt from another)
        params = dict(params)
    if not isinstance(params, Mapping):
        raise ValueError(f"the parameters of {what} must be a dict; got {params!r}")
    bad = [k for k in params if not isinstance(k, str)]
    if bad:
        raise ValueError(f"parameter names of {what} must be strings; got {bad}")
    return tuple(sorted((k, _plain(v)) for k, v in params.items()))


def classify(kind, param) -> tuple[str, object, tuple]:
    """Family, kernel object and frozen parameters of a custom spec ``(kind, param)``.

    Returns
    -------
    family : {"callable", "sklearn", "pairwise"}
    kernel : callable, Kernel or str
    params : tuple of (name, value), sorted
        Keyword arguments of a callable or a pairwise kernel; ``()`` for a GP kernel.

    Raises
    ------
    ValueError
        For an unknown kernel name, parameters a pairwise kernel does not take, or parameters
        given to a GP kernel object (set them on the object instead).
    """
    if isinstance(kind, str):
        funcs = _pairwise_functions()
        if kind not in funcs:
            raise ValueError(
                f"unknown kernel kind {kind!r}: use 'gauss', 'poly' or 'linear', a scikit-learn "
                f"pairwise kernel name {sorted(funcs)}, a callable k(X, Y) -> (n, m) array, or a "
                "sklearn.gaussian_process.kernels.Kernel instance"
            )
        accepted = set(inspect.signature(funcs[kind]).parameters) - {"X", "Y", "dense_output"}
        if param is not None and not isinstance(param, Mapping | tuple):
            raise ValueError(
                f"kernel kind {kind!r} is scikit-learn's pairwise kernel: its param must be a dict "
                f"of its parameters {sorted(accepted)} (or None); got {param!r}"
            )
        params = _freeze_params(param, f"the pairwise kernel {kind!r}")
        unknown = sorted(k for k, _ in params if k not in accepted)
        if unknown:
            raise ValueError(
                f"the pairwise kernel {kind!r} takes the parameters {sorted(accepted)}; got "
                f"unknown {unknown}"
            )
        return "pairwise", kind, params
    if _is_gp_kernel(kind):
        if param is not None:
            raise ValueError(
                f"a scikit-learn kernel object takes no separate parameters (set them on the "
                f"object, e.g. RBF(length_scale=2.0)); got {param!r} for {kind!r}"
            )
        return "sklearn", kind, ()
    if callable(kind):
        return "callable", kind, _freeze_params(param, f"the callable {_callable_name(kind)}")
    raise ValueError(
        f"cannot use {kind!r} as a kernel: use 'gauss', 'poly' or 'linear', a scikit-learn "
        "pairwise kernel name, a callable k(X, Y) -> (n, m) array, or a "
        "sklearn.gaussian_process.kernels.Kernel instance"
    )


def _callable_name(func) -> str:
    name = getattr(func, "__name__", None)
    if name is None and hasattr(func, "func"):  # functools.partial
        name = getattr(func.func, "__name__", None)
    return name or type(func).__name__


def _fmt(value) -> str:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = float(value)
        if math.isfinite(v) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.6g}"
    return repr(value)


def head_name(family: str, kernel, params: tuple) -> str:
    """Derived name without the feature part: ``rbf(gamma=0.5)``, ``RBF(length_scale=2)``,
    ``callable:my_func``, ``callable:my_func(c=1)``."""
    args = ", ".join(f"{k}={_fmt(v)}" for k, v in params)
    if family == "pairwise":
        return f"{kernel}({args})" if args else str(kernel)
    if family == "sklearn":
        return str(kernel)
    head = f"callable:{_callable_name(kernel)}"
    return f"{head}({args})" if args else head


def _raw(family: str, kernel, params: tuple, A: np.ndarray, B: np.ndarray):
    kw = dict(params)
    if family == "pairwise":
        from sklearn.metrics.pairwise import pairwise_kernels

        return pairwise_kernels(A, B, metric=kernel, **kw)
    if family == "sklearn":
        return kernel(A, B)
    return kernel(A, B, **kw)


def evaluate(family, kernel, params, A, B, *, name: str, symmetric: bool = False) -> np.ndarray:
    """Raw kernel ``(M, N)`` in float64, validated.

    Parameters
    ----------
    family, kernel, params
        From :func:`classify`.
    A : ndarray (M, f), B : ndarray (N, f)
        Row points and training points (already column-subset and standardised).
    name : str
        The kernel's name, used in error messages.
    symmetric : bool
        ``A`` is the training set itself: also require symmetry.

    Raises
    ------
    ValueError
        If the kernel raises, returns something that is not a real array of shape ``(M, N)``,
        returns NaN or inf, or (``symmetric``) is not symmetric within ``1e-6 · max|K|``.
    """
    M, N = A.shape[0], B.shape[0]
    try:
        K = _raw(family, kernel, params, A, B)
    except Exception as exc:
        raise ValueError(
            f"kernel '{name}' failed on inputs of shapes {A.shape} and {B.shape}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    try:
        K = np.asarray(K)
    except Exception as exc:  # pragma: no cover - exotic return types
        raise ValueError(f"kernel '{name}' returned a value that is not an array: {exc}") from None
    if K.dtype == object or not np.issubdtype(K.dtype, np.number) or np.iscomplexobj(K):
        raise ValueError(f"kernel '{name}' must return a real numeric array; got dtype {K.dtype}")
    if K.shape != (M, N):
        raise ValueError(
            f"kernel '{name}' returned shape {K.shape} for inputs of {M} and {N} points; a kernel "
            f"k(X, Y) must return an array of shape (len(X), len(Y)) = ({M}, {N})"
        )
    K = K.astype(np.float64, copy=False)
    symmetry = " on the training data" if symmetric else None
    check_gram(K, f"kernel '{name}'", nan_verb="returned", symmetry=symmetry)
    return K


def self_similarity(family, kernel, params, A, *, name: str) -> np.ndarray:
    """``k(x, x)`` for every row of ``A: (M, f)`` → ``(M,)``, float64.

    GP kernels use their ``diag``; otherwise the diagonal of ``k`` on blocks of 256 points.
    """
    if family == "sklearn":
        d = np.asarray(kernel.diag(A), dtype=np.float64)
        if d.shape != (A.shape[0],) or not np.all(np.isfinite(d)):
            raise ValueError(f"kernel '{name}': diag() returned an invalid array")
        return d
    out = np.empty(A.shape[0])
    for start in range(0, A.shape[0], _DIAG_BLOCK):
        blk = A[start : start + _DIAG_BLOCK]
        out[start : start + blk.shape[0]] = np.diag(
            evaluate(family, kernel, params, blk, blk, name=name)
        )
    return out
