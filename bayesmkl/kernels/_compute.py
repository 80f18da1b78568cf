"""Computation of a pool's kernels: grouped, chunked, jitted, written into one NumPy array.

The specs are grouped (:func:`plan`) so that each group is one broadcasted computation: all
Gaussians on one feature subset share one squared-distance matrix, all polynomials one
inner-product matrix, and per-feature kernels of every single feature and every parameter come
from one ``(d, M, N)`` per-feature tensor. Large groups are cut into chunks of at most about
``_CHUNK_ENTRIES`` kernel entries (padded to one shape, so each group compiles once per data
shape); each chunk runs through one jitted block (raw kernels -> centre -> normalise) and is
copied into the preallocated output while the next one computes. Custom kernels are evaluated
one by one in NumPy (:mod:`bayesmkl.kernels.custom`) with the same preprocessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.kernels import custom
from bayesmkl.kernels import functions as F
from bayesmkl.kernels._checks import (
    PSD_RTOL,
    check_finite_kernels,
    check_kernel_memory,
    check_psd,
    check_standardisation,
    spec_columns,
)
from bayesmkl.kernels.spec import KernelSpec
from bayesmkl.posterior.checks import scaled_sd

__all__ = ["compute_kernels", "custom_kernel", "plan", "standardise", "training_row_means"]

# Largest number of kernel entries (kernels x rows x columns) computed in one jitted call
# (16 MB of float64: small enough for the allocator to recycle warm memory between chunks,
# which measured faster than bigger chunks that page-fault fresh memory on every call).
_CHUNK_ENTRIES = 2**21


# --------------------------------------------------------------------------------------------
# computation plan: group the specs so that each group is one broadcasted computation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    """One vectorised computation.

    ``family`` is "gauss"/"poly" (one feature subset ``cols``, parameters along axis 0 of
    ``index``) or "pf_gauss"/"pf_poly" (every single feature in ``cols`` x every parameter;
    ``index[g, j]`` is the pool position of parameter g on feature ``cols[j]``).
    """

    family: str
    cols: np.ndarray | None  # None means all columns
    params: np.ndarray  # (G,) widths (float) or degrees (int)
    offsets: np.ndarray | None  # (G,) polynomial offsets
    index: np.ndarray  # (G,) or (G, f)


def plan(specs: Sequence[KernelSpec], poly_offset: float) -> list[_Group]:
    subset: dict = {}
    single: dict = {}
    for i, s in enumerate(specs):
        if s.is_custom:  # evaluated one by one (custom_kernel)
            continue
        if s.kind == "gauss":
            fam, par = "gauss", (s.param, None)
        elif s.kind == "poly":
            fam, par = "poly", (s.param, poly_offset)
        else:
            fam, par = "poly", (1, 0.0)
        if s.features != "all" and len(s.features) == 1:
            single.setdefault((fam, par), []).append((s.features[0], i))
        else:
            subset.setdefault((fam, s.features), []).append((par, i))
    groups = []
    for (fam, feats), items in subset.items():
        params = np.array([p for (p, _), _ in items])
        offsets = None if fam == "gauss" else np.array([o for (_, o), _ in items], dtype=float)
        cols = None if feats == "all" else np.array(feats, dtype=np.intp)
        groups.append(_Group(fam, cols, params, offsets, np.array([i for _, i in items])))
    # single-feature kernels: parameters that cover the same feature list form one grid
    grids: dict = {}
    for (fam, par), items in single.items():
        feats = tuple(j for j, _ in items)
        grids.setdefault((fam, feats), []).append((par, [i for _, i in items]))
    for (fam, feats), rows in grids.items():
        params = np.array([p for (p, _), _ in rows])
        offsets = None if fam == "gauss" else np.array([o for (_, o), _ in rows], dtype=float)
        index = np.array([idx for _, idx in rows], dtype=np.intp)
        groups.append(_Group("pf_" + fam, np.array(feats, dtype=np.intp), params, offsets, index))
    return groups


def _chunks(n: int, size: int) -> list[np.ndarray]:
    """Index chunks of ``range(n)`` of exactly ``size`` (the last one padded by repetition)."""
    out = []
    for start in range(0, n, size):
        idx = np.arange(start, start + size)
        out.append(np.minimum(idx, n - 1))
    return out


def _balanced(n: int, max_size: int) -> int:
    """Chunk size <= max_size that splits ``n`` into equal-ish chunks (little padding)."""
    max_size = max(1, min(n, max_size))
    return -(-n // -(-n // max_size))


def _split(group: _Group, M: int, N: int):
    """Yield ``(params_idx, cols_idx)`` sub-blocks of at most about ``_CHUNK_ENTRIES`` entries.

    ``cols_idx`` is None for subset groups. Indices repeat at the end of a padded chunk.
    """
    G = group.params.shape[0]
    slab = max(M * N, 1)
    g_size = _balanced(G, _CHUNK_ENTRIES // slab)
    if group.family.startswith("pf_"):
        f = group.cols.shape[0]
        f_size = _balanced(f, _CHUNK_ENTRIES // (slab * g_size))
        for gi in _chunks(G, g_size):
            for fi in _chunks(f, f_size):
                yield gi, fi
    else:
        for gi in _chunks(G, g_size):
            yield gi, None


# --------------------------------------------------------------------------------------------
# jitted block: raw kernels -> centre -> normalise -> cast (compiled once per shape and mode)
# --------------------------------------------------------------------------------------------


def _raw_block(family, A, B, params, offsets, degrees):
    """Raw kernels ``(k, M, N)`` and self-similarities ``(k, M)``, ``(k, N)``.

    Gaussian families read the widths ``params``; polynomial families the static ``degrees``
    and the ``offsets``.
    """
    M, N = A.shape[0], B.shape[0]
    if family == "gauss":
        K = F._gauss_from_sqdist(F._sqdist(A, B), params)
        k = K.shape[0]
        return K, jnp.ones((k, M), K.dtype), jnp.ones((k, N), K.dtype)
    if family == "poly":
        K = F._poly_from_inner(F._inner(A, B), degrees, offsets)
        dA = F._poly_from_inner(jnp.sum(A * A, axis=1), degrees, offsets)
        dB = F._poly_from_inner(jnp.sum(B * B, axis=1), degrees, offsets)
        return K, dA, dB
    if family == "pf_gauss":
        K = F._gauss_from_sqdist(F._feature_sqdist(A, B), params)  # (G, f, M, N)
        k = K.shape[0] * K.shape[1]
        return K.reshape(k, M, N), jnp.ones((k, M), K.dtype), jnp.ones((k, N), K.dtype)
    # pf_poly
    K = F._poly_from_inner(F._feature_prod(A, B), degrees, offsets)  # (Q, f, M, N)
    k = K.shape[0] * K.shape[1]
    dA = F._poly_from_inner(jnp.square(A.T), degrees, offsets).reshape(k, M)
    dB = F._poly_from_inner(jnp.square(B.T), degrees, offsets).reshape(k, N)
    return K.reshape(k, M, N), dA, dB


@partial(jax.jit, static_argnames=("family", "degrees", "center", "normalize"))
def _kernel_block(
    A, B, params, offsets, row_means, grand_means, *, family, degrees, center, normalize
):
    """Kernels ``(k, M, N)`` in float64 for one chunk (the cast to storage dtype is on copy)."""
    K, dA, dB = _raw_block(family, A, B, params, offsets, degrees)
    # normalisation is a no-op for raw Gaussians (unit self-similarity)
    normalize = normalize and (center or family in ("poly", "pf_poly"))
    return _preprocess(K, dA, dB, row_means, grand_means, center=center, normalize=normalize)


def _preprocess(K, dA, dB, row_means, grand_means, *, center, normalize):
    """Centre and/or normalise raw kernels ``K: (k, M, N)`` given self-similarities ``dA: (k, M)``
    of the rows and ``dB: (k, N)`` of the training points (and, for ``center``, the training
    statistics ``row_means: (k, N)``, ``grand_means: (k,)``)."""
    if center:
        m_new = jnp.mean(K, axis=-1)  # (k, M): 1^T k(x*) / N
        K = F._center(K, row_means, grand_means)
        dA = dA - 2.0 * m_new + grand_means[:, None]
        dB = dB - 2.0 * row_means + grand_means[:, None]
    if normalize:
        K = F._normalize(K, dA, dB, F._default_floor(dB))
    return K


def _bucket(n: int) -> int:
    """Next power of two >= n (column counts are padded to it to share compiled shapes)."""
    return 1 << max(0, (n - 1).bit_length())


def _run_group(g: _Group, Xrows, Xcols, *, center, normalize, row_means=None, grand_means=None):
    """Dispatch one group chunk by chunk; yield ``(K, valid, pool_indices)``.

    ``K`` is a (not yet materialised) float64 JAX array ``(k', M, N)``; its rows with ``valid``
    true are the kernels of the pool positions ``pool_indices[valid]`` (the others are padding).
    Subset groups pad their columns with zeros up to a power of two (zero columns add exact
    zeros to distances and inner products), so that feature subsets of similar size share one
    compiled function.
    """
    A_all = Xrows if g.cols is None else Xrows[:, g.cols]
    B_all = Xcols if g.cols is None else Xcols[:, g.cols]
    if not g.family.startswith("pf_"):
        width = _bucket(A_all.shape[1])
        if width != A_all.shape[1]:
            pad = ((0, 0), (0, width - A_all.shape[1]))
            A_all, B_all = np.pad(A_all, pad), np.pad(B_all, pad)
    for gi, fi in _split(g, Xrows.shape[0], Xcols.shape[0]):
        if g.offsets is None:  # Gaussian: traced widths
            params, offsets, degrees = jnp.asarray(g.params[gi]), None, None
        else:  # polynomial: static degrees (unrolled integer powers), traced offsets
            params, offsets = None, jnp.asarray(g.offsets[gi])
            degrees = tuple(int(v) for v in g.params[gi])
        if fi is None:
            A, B, idx = A_all, B_all, g.index[gi]
            valid = np.r_[True, np.diff(gi) > 0]
        else:
            A, B = A_all[:, fi], B_all[:, fi]
            idx = g.index[np.ix_(gi, fi)].ravel()
            valid = np.logical_and.outer(
                np.r_[True, np.diff(gi) > 0], np.r_[True, np.diff(fi) > 0]
            ).ravel()
        stats = (None, None)
        if center:
            stats = (jnp.asarray(row_means[idx]), jnp.asarray(grand_means[idx]))
        res = _kernel_block(
            A,
            B,
            params,
            offsets,
            *stats,
            family=g.family,
            degrees=degrees,
            center=center,
            normalize=normalize,
        )
        yield res, valid, idx


def _pipelined(jobs):
    """Materialise ``(K, valid, idx)`` jobs as ``(ndarray, idx)`` with one chunk in flight.

    JAX dispatches asynchronously: the next chunk is launched before the previous one is
    converted and copied out, so XLA's computation overlaps NumPy's copy. At most two chunks
    are alive at a time.
    """
    pending = None
    for job in jobs:  # fetching a job dispatches its computation
        if pending is not None:
            yield _materialise(*pending)
        pending = job
    if pending is not None:
        yield _materialise(*pending)


def _materialise(res, valid, idx):
    res = np.asarray(res)
    if valid.all():
        return res, idx
    return res[valid], idx[valid]


def _put(out: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    """``out[idx] = values`` (a slice copy when ``idx`` is a contiguous run)."""
    if idx.size and idx[-1] - idx[0] == idx.size - 1 and np.all(np.diff(idx) == 1):
        out[idx[0] : idx[-1] + 1] = values
    else:
        out[idx] = values


def compute_kernels(
    specs: Sequence[KernelSpec],
    Xrows: np.ndarray,
    Xfit: np.ndarray,
    *,
    out_dtype,
    poly_offset: float,
    center: bool,
    normalize: bool,
    row_means=None,
    grand_means=None,
    what: str = "training",
) -> np.ndarray:
    """Kernels ``(P, M, N)`` of ``specs`` between standardised rows ``Xrows: (M, d)`` and the
    standardised training points ``Xfit: (N, d)``, in ``out_dtype`` (computed in float64).

    ``row_means: (P, N)`` and ``grand_means: (P,)`` are the training centring statistics
    (needed when ``center``). Raises before allocating when the tensor would not fit in
    memory, and after computing when a kernel value is not finite.
    """
    M, N = Xrows.shape[0], Xfit.shape[0]
    check_kernel_memory(len(specs), M, N, out_dtype, f"{what} kernel tensor")
    out = np.empty((len(specs), M, N), dtype=out_dtype)
    opts = dict(center=center, normalize=normalize, row_means=row_means, grand_means=grand_means)
    jobs = (job for g in plan(specs, poly_offset) for job in _run_group(g, Xrows, Xfit, **opts))
    for res, idx in _pipelined(jobs):
        _put(out, idx, res)  # casts to the storage dtype while copying
    for i, s in enumerate(specs):
        if s.is_custom:
            stats = (None, None)
            if center:
                stats = (row_means[i][None], grand_means[i][None])
            out[i] = custom_kernel(s, Xrows, Xfit, *stats, center=center, normalize=normalize)
    check_finite_kernels(out, Xrows, specs, what, center=center)
    return out


def custom_kernel(
    s: KernelSpec, Xrows, Xfit, row_means, grand_means, *, center: bool, normalize: bool
) -> np.ndarray:
    """Kernel ``(M, N)`` of custom spec ``s``, preprocessed in float64 (``row_means: (1, N)``
    and ``grand_means: (1,)`` are its training centring statistics, or ``None``)."""
    A, B = spec_columns(Xrows, s), spec_columns(Xfit, s)
    parts = s.custom_parts()
    K = custom.evaluate(*parts, A, B, name=s.name)[None]
    if normalize:
        dA = custom.self_similarity(*parts, A, name=s.name)[None]
        dB = custom.self_similarity(*parts, B, name=s.name)[None]
    else:
        dA, dB = np.ones((1, A.shape[0])), np.ones((1, B.shape[0]))
    K = _preprocess(K, dA, dB, row_means, grand_means, center=center, normalize=normalize)
    return np.asarray(K[0])


def training_row_means(
    specs: Sequence[KernelSpec], Xs: np.ndarray, *, poly_offset: float, center: bool
) -> np.ndarray | None:
    """Row means ``K 1/N: (P, N)`` of the uncentred training kernels when ``center``, else
    ``None``. Every custom kernel is evaluated on the training data either way, which checks it
    (a finite array of the right shape, symmetric, positive semi-definite) before any kernel is
    requested."""
    row_means = None
    if center:
        row_means = np.empty((len(specs), Xs.shape[0]))
        jobs = (
            job
            for g in plan(specs, poly_offset)
            for job in _run_group(g, Xs, Xs, center=False, normalize=False)
        )
        for res, idx in _pipelined(jobs):
            row_means[idx] = res.mean(axis=2)
    for i, s in enumerate(specs):
        if s.is_custom:
            cols = spec_columns(Xs, s)
            Ktr = custom.evaluate(*s.custom_parts(), cols, cols, name=s.name, symmetric=True)
            check_psd(Ktr, f"kernel '{s.name}' on the training data", PSD_RTOL["float64"])
            if not np.any(np.diag(Ktr)):  # PSD with a zero diagonal: zero everywhere
                raise ValueError(
                    f"kernel '{s.name}' has k(x, x) = 0 for every training point, so (being "
                    "PSD) it is zero on the training data and carries no information; drop it"
                )
            if center:
                row_means[i] = Ktr.mean(axis=1)
    return row_means


def standardise(X: np.ndarray):
    """``(mean, sd, (X − mean) / sd)`` with training statistics (``ddof=0``); constant columns
    (spread at most 1e-12 of the mean's magnitude: rounding) get ``sd = 1``, and a column whose
    statistics overflow float64 is refused.

    Scale-invariant down to the smallest floats: a column at 1e-13 or 1e-200 is standardised
    like the same column at 1: no absolute floor, and the spread is computed without the underflow
    of ``X.std``, so such a column is never mistaken for a constant one."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = X.mean(axis=0)
    sd = scaled_sd(X)
    check_standardisation(X, mean, sd)
    sd = np.where((sd == 0) | (sd <= 1e-12 * np.abs(mean)), 1.0, sd)
    return mean, sd, (X - mean) / sd
