"""Base kernel functions in JAX, vectorised over kernel parameters and over single features.

Conventions (docs/math.md §7.2)
-------------------------------
* Gaussian: ``k(x, z) = exp(-||x - z||^2 / (2 sigma^2))`` with ``sigma`` the *width*
  (SVM-KM / SimpleMKL convention; scikit-learn's ``rbf_kernel`` with ``gamma = 1 / (2 sigma^2)``).
* Polynomial: ``k(x, z) = (x^T z + offset)^degree`` with ``offset = 1`` by default
  (``offset = 0`` reproduces SVM-KM's degree-1 kernel; scikit-learn's ``polynomial_kernel`` with
  ``gamma = 1, coef0 = offset``).
* Linear: ``k(x, z) = x^T z``.

Every function here is pure: it takes arrays and returns JAX arrays; the public ones compute in
float64 whatever the caller's ``jax_enable_x64`` (see :mod:`bayesmkl.config`). Nothing is
normalised or centred here except by :func:`center_cross_kernels` and
:func:`normalize_cross_kernels`, which implement the pool's preprocessing on precomputed blocks.

Squared distances and inner products are computed by an XLA-fused broadcast-and-reduce rather
than by the expansion ``||x||^2 + ||z||^2 - 2 x^T z``: no ``(N, M, d)`` tensor is materialised,
the result has no cancellation error, ``k(x, x)`` is exact and ``K(X, X)`` is exactly symmetric.

Shapes: ``X: (N, d)``, ``Z: (M, d)``; single kernels are ``(N, M)``, batches over parameters are
``(P, N, M)``, per-feature batches are ``(P, d, N, M)``.
"""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl._docs import fill_doc
from bayesmkl.config import with_x64

__all__ = [
    "center_cross_kernels",
    "feature_products",
    "feature_squared_distances",
    "gaussian_kernel",
    "inner_products",
    "linear_kernel",
    "normalize_cross_kernels",
    "per_feature_gaussian_kernels",
    "per_feature_polynomial_kernels",
    "polynomial_kernel",
    "squared_distances",
]


# --------------------------------------------------------------------------------------------
# argument handling (host side, outside jit)
# --------------------------------------------------------------------------------------------


def _as_2d(X, name: str) -> jax.Array:
    X = jnp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features); got shape {X.shape}")
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.float64)
    return X


def _pair(X, Z):
    X = _as_2d(X, "X")
    Z = X if Z is None else _as_2d(Z, "Z")
    if X.shape[1] != Z.shape[1]:
        raise ValueError(
            f"X and Z must have the same number of features; got {X.shape[1]} and {Z.shape[1]}"
        )
    return X, Z


def _widths(widths) -> tuple[jax.Array, bool]:
    w = np.asarray(widths, dtype=np.float64)
    scalar = w.ndim == 0
    w = np.atleast_1d(w)
    if w.ndim != 1:
        raise ValueError(f"widths must be a scalar or a 1-D array; got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"Gaussian widths must be finite and > 0; got {w.tolist()}")
    return jnp.asarray(w), scalar


def _degrees(degrees) -> tuple[tuple[int, ...], bool]:
    d = np.asarray(degrees)
    scalar = d.ndim == 0
    d = np.atleast_1d(d)
    if d.ndim != 1:
        raise ValueError(f"degrees must be a scalar or a 1-D array; got shape {d.shape}")
    if d.dtype == bool or not np.issubdtype(d.dtype, np.number):
        raise ValueError(f"polynomial degrees must be integers >= 1; got {d.tolist()}")
    di = np.round(d).astype(np.int64) if d.size else d.astype(np.int64)
    if not np.all(np.isfinite(d)) or np.any(di != d) or np.any(di < 1):
        raise ValueError(f"polynomial degrees must be integers >= 1; got {d.tolist()}")
    return tuple(int(v) for v in di), scalar


def _offsets(offset, n: int) -> jax.Array:
    o = np.broadcast_to(np.asarray(offset, dtype=np.float64), (n,))
    if not np.all(np.isfinite(o)):
        raise ValueError(f"polynomial offset must be finite; got {offset!r}")
    return jnp.asarray(o)


_DOCS = {
    "X_Z": """X : array, shape (N, d)
Z : array, shape (M, d), optional
    Defaults to ``X``.""",
}


def _pairwise(fn):
    """Public pairwise function ``fn(X, Z=None, ...)``: float64 scope, ``X`` and ``Z`` checked and
    converted by :func:`_pair` (``Z`` defaults to ``X``), ``{{X_Z}}`` filled in the docstring."""

    @functools.wraps(fn)
    def wrapper(X, Z=None, *args, **kwargs):
        return fn(*_pair(X, Z), *args, **kwargs)

    return with_x64(fill_doc(_DOCS)(wrapper))


# --------------------------------------------------------------------------------------------
# jitted cores (compiled once per input shape)
# --------------------------------------------------------------------------------------------


@jax.jit
def _sqdist(X, Z):
    return jnp.sum(jnp.square(X[:, None, :] - Z[None, :, :]), axis=-1)


@jax.jit
def _inner(X, Z):
    return jnp.sum(X[:, None, :] * Z[None, :, :], axis=-1)


@jax.jit
def _feature_sqdist(X, Z):
    return jnp.square(X.T[:, :, None] - Z.T[:, None, :])


@jax.jit
def _feature_prod(X, Z):
    return X.T[:, :, None] * Z.T[:, None, :]


def _gauss_from_sqdist(D, widths):
    """``D: (...,)`` squared distances, ``widths: (G,)`` -> ``(G, ...)``."""
    scale = 1.0 / (2.0 * jnp.square(widths))
    return jnp.exp(-scale.reshape((-1,) + (1,) * D.ndim) * D[None])


def _poly_from_inner(G, degrees, offsets):
    """``G: (...,)`` inner products, ``degrees``: static tuple of Q ints, ``offsets: (Q,)``.

    Returns ``(Q, ...)``. Integer powers are unrolled multiplications (exact for negative bases
    and about ten times faster than ``lax.pow`` with a traced exponent).
    """
    return jnp.stack([jax.lax.integer_pow(G + offsets[q], d) for q, d in enumerate(degrees)])


@jax.jit
def _gauss_batch(X, Z, widths):
    return _gauss_from_sqdist(_sqdist(X, Z), widths)


@partial(jax.jit, static_argnames=("degrees",))
def _poly_batch(X, Z, offsets, degrees):
    return _poly_from_inner(_inner(X, Z), degrees, offsets)


@jax.jit
def _pf_gauss(X, Z, widths):
    return _gauss_from_sqdist(_feature_sqdist(X, Z), widths)


@partial(jax.jit, static_argnames=("degrees",))
def _pf_poly(X, Z, offsets, degrees):
    return _poly_from_inner(_feature_prod(X, Z), degrees, offsets)


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


@_pairwise
def squared_distances(X, Z=None) -> jax.Array:
    """Squared Euclidean distances ``||x_i - z_j||^2`` over all features.

    Parameters
    ----------
    {{X_Z}}

    Returns
    -------
    D : jax.Array, shape (N, M)
        Exactly zero on the diagonal and exactly symmetric when ``Z`` is ``X``.
    """
    return _sqdist(X, Z)


@_pairwise
def inner_products(X, Z=None) -> jax.Array:
    """Inner products ``x_i^T z_j``.

    Parameters
    ----------
    {{X_Z}}

    Returns
    -------
    G : jax.Array, shape (N, M)
    """
    return _inner(X, Z)


@_pairwise
def feature_squared_distances(X, Z=None) -> jax.Array:
    """Per-feature squared differences ``(x_ij - z_kj)^2``.

    Parameters
    ----------
    {{X_Z}}

    Returns
    -------
    D : jax.Array, shape (d, N, M)
        ``D[j]`` is the squared-distance matrix of feature ``j`` alone; ``D.sum(0)`` equals
        :func:`squared_distances`.
    """
    return _feature_sqdist(X, Z)


@_pairwise
def feature_products(X, Z=None) -> jax.Array:
    """Per-feature products ``x_ij * z_kj``.

    Parameters
    ----------
    {{X_Z}}

    Returns
    -------
    G : jax.Array, shape (d, N, M)
    """
    return _feature_prod(X, Z)


@_pairwise
def gaussian_kernel(X, Z=None, widths=1.0) -> jax.Array:
    """Gaussian kernel(s) ``exp(-||x - z||^2 / (2 sigma^2))`` on all features.

    Parameters
    ----------
    {{X_Z}}
    widths : float or array, shape (G,)
        Width(s) ``sigma > 0``. All widths share one squared-distance matrix.

    Returns
    -------
    K : jax.Array, shape (N, M) for a scalar width, else (G, N, M)

    Notes
    -----
    Equal to ``sklearn.metrics.pairwise.rbf_kernel(X, Z, gamma=1 / (2 * sigma**2))``.
    """
    w, scalar = _widths(widths)
    K = _gauss_batch(X, Z, w)
    return K[0] if scalar else K


@_pairwise
def polynomial_kernel(X, Z=None, degrees=2, offset=1.0) -> jax.Array:
    """Polynomial kernel(s) ``(x^T z + offset)^degree`` on all features.

    Parameters
    ----------
    {{X_Z}}
    degrees : int or array of int, shape (Q,)
        Degree(s) ``>= 1``; all degrees share one inner-product matrix.
    offset : float or array, shape (Q,)
        Additive constant (1 by default; 0 gives the homogeneous kernel of SVM-KM).

    Returns
    -------
    K : jax.Array, shape (N, M) for a scalar degree, else (Q, N, M)

    Notes
    -----
    Equal to ``sklearn.metrics.pairwise.polynomial_kernel(X, Z, degree=d, gamma=1,
    coef0=offset)``. Integer powers are exact for negative bases.
    """
    deg, scalar = _degrees(degrees)
    K = _poly_batch(X, Z, _offsets(offset, len(deg)), degrees=deg)
    return K[0] if scalar else K


@_pairwise
def linear_kernel(X, Z=None) -> jax.Array:
    """Linear kernel ``x^T z``.

    Parameters
    ----------
    {{X_Z}}

    Returns
    -------
    K : jax.Array, shape (N, M)
    """
    return _inner(X, Z)


@_pairwise
def per_feature_gaussian_kernels(X, Z=None, widths=1.0) -> jax.Array:
    """Gaussian kernels on every single feature and every width, in one computation.

    Parameters
    ----------
    {{X_Z}}
    widths : float or array, shape (G,)
        Widths ``sigma > 0``.

    Returns
    -------
    K : jax.Array, shape (G, d, N, M)
        ``K[g, j] = exp(-(x_j - z_j)^2 / (2 widths[g]^2))``. A scalar width gives ``G = 1``.
    """
    w, _ = _widths(widths)
    return _pf_gauss(X, Z, w)


@_pairwise
def per_feature_polynomial_kernels(X, Z=None, degrees=2, offset=1.0) -> jax.Array:
    """Polynomial kernels on every single feature and every degree, in one computation.

    Parameters
    ----------
    {{X_Z}}
    degrees : int or array of int, shape (Q,)
        Degrees ``>= 1``.
    offset : float or array, shape (Q,)
        Additive constant per degree.

    Returns
    -------
    K : jax.Array, shape (Q, d, N, M)
        ``K[q, j] = (x_j z_j + offset[q])^degrees[q]``. A scalar degree gives ``Q = 1``.
    """
    deg, _ = _degrees(degrees)
    return _pf_poly(X, Z, _offsets(offset, len(deg)), degrees=deg)


@with_x64
def center_cross_kernels(K, train_row_means, train_grand_mean) -> jax.Array:
    """Centre kernel rows with training statistics (docs/math.md §7.2).

    ``k_c(x*) = k(x*) - K 1 / N - (1^T k(x*) / N) 1 + (1^T K 1 / N^2) 1``.

    Parameters
    ----------
    K : array, shape (P, M, N)
        Un-centred kernels between M points (rows) and the N training points (columns).
    train_row_means : array, shape (P, N)
        ``K_train 1 / N`` of each un-centred training kernel.
    train_grand_mean : array, shape (P,)
        ``1^T K_train 1 / N^2``.

    Returns
    -------
    K_c : jax.Array, shape (P, M, N)
        With ``K`` the training kernels themselves this is ``H K H``, ``H = I - 1 1^T / N``.
    """
    K = jnp.asarray(K)
    return _center(K, jnp.asarray(train_row_means), jnp.asarray(train_grand_mean))


@with_x64
def normalize_cross_kernels(K, row_self, col_self, floor=None) -> jax.Array:
    """Unit-diagonal ("spherical") normalisation ``K(x, z) / sqrt(K(x, x) K(z, z))``.

    Parameters
    ----------
    K : array, shape (P, M, N)
    row_self : array, shape (P, M)
        Self-similarities ``K(x, x)`` of the row points (for test rows: the test points' own).
    col_self : array, shape (P, N)
        Self-similarities of the column (training) points.
    floor : array, shape (P,), optional
        Self-similarities below ``floor`` are raised to it (points with a zero feature-space
        norm would otherwise divide by zero; their rows are zero anyway). Defaults to
        ``1e-12 * max(col_self)`` per kernel.

    Returns
    -------
    K_n : jax.Array, shape (P, M, N)
    """
    K, row_self, col_self = jnp.asarray(K), jnp.asarray(row_self), jnp.asarray(col_self)
    if floor is None:
        floor = _default_floor(col_self)
    return _normalize(K, row_self, col_self, jnp.asarray(floor))


def _default_floor(col_self):
    return 1e-12 * jnp.maximum(jnp.max(jnp.abs(col_self), axis=-1), jnp.finfo(col_self.dtype).tiny)


def _center(K, row_means, grand_mean):
    return (
        K - row_means[:, None, :] - jnp.mean(K, axis=-1, keepdims=True) + grand_mean[:, None, None]
    )


def _normalize(K, row_self, col_self, floor):
    r = jnp.maximum(row_self, floor[:, None])
    c = jnp.maximum(col_self, floor[:, None])
    return K / jnp.sqrt(r[:, :, None] * c[:, None, :])
