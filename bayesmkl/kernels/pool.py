"""Kernel pools: ordered lists of base kernels with training-only preprocessing.

A :class:`KernelPool` is an ordered list of :class:`KernelSpec` ``(kind, param, features)``.
:meth:`KernelPool.fit` learns the training statistics (standardisation, and the centring
statistics when ``center=True``) and keeps the standardised training points;
:meth:`~KernelPool.train_kernels` returns the training kernels ``(P, N, N)`` and
:meth:`~KernelPool.cross_kernels` the kernels between new points and the training points
``(P, M, N)``. The pool never keeps a ``(P, N, N)`` tensor: both are recomputed on request.

Computation is grouped, not looped per kernel: all Gaussians on one feature subset share one
squared-distance matrix (one broadcast over widths), all polynomials share one inner-product
matrix, and per-feature kernels for every single feature and every width come from one
``(d, M, N)`` per-feature tensor. Large groups are cut into chunks of at most about
``2**21`` kernel entries (padded to one shape, so each group compiles once per data shape),
and each chunk is written into the preallocated NumPy output.

Preprocessing order (spec §7.2): standardise features with training mean/sd -> base kernel ->
centre with training statistics (``center=True``) -> unit-diagonal normalisation
(``normalize=True``) -> cast to ``dtype``. Everything is computed in float64.

Custom kernels (user callables, scikit-learn GP kernel objects, ``pairwise_kernels`` names) are
specs too; they are evaluated one by one in NumPy and share the same preprocessing (see
:mod:`bayesmkl.kernels.custom`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl._x64 import with_x64
from bayesmkl.kernels import custom
from bayesmkl.kernels import functions as F

__all__ = [
    "BSVM_WIDTHS",
    "DEFAULT_DEGREES",
    "KernelMemoryError",
    "KernelPool",
    "KernelSpec",
    "NotFittedError",
    "PSD_RTOL",
    "kernel_memory_limit",
    "SIMPLEMKL_WIDTHS",
    "validate_precomputed",
]

KINDS = ("gauss", "poly", "linear")
#: Gaussian widths of the SimpleMKL / BEMKL recipe (BM3KL Table 3): 2^-3, ..., 2^6.
SIMPLEMKL_WIDTHS = tuple(2.0**k for k in range(-3, 7))
#: Gaussian widths of the BM3KL Table 2 pool: 2^-6, ..., 2^6.
BSVM_WIDTHS = tuple(2.0**k for k in range(-6, 7))
#: Polynomial degrees of both recipes.
DEFAULT_DEGREES = (1, 2, 3)

# Largest number of kernel entries (kernels x rows x columns) computed in one jitted call
# (16 MB of float64: small enough for the allocator to recycle warm memory between chunks,
# which measured faster than bigger chunks that page-fault fresh memory on every call).
_CHUNK_ENTRIES = 2**21


#: Relative tolerance of the positive semi-definiteness check of precomputed kernels, by dtype:
#: a Gram matrix is accepted when ``K + PSD_RTOL · max|K| · I`` has a Cholesky factor, i.e. when
#: its smallest eigenvalue is above ``−PSD_RTOL · max|K|`` (``max|K|`` bounds the diagonal of a PSD
#: matrix). The float64 value leaves a wide margin over rounding errors of computed kernels
#: (≈ N·ε·max|K|); float32 kernels carry ≈ 1e−7 relative errors per entry.
PSD_RTOL = {"float64": 1e-6, "float32": 1e-3}

#: Environment variable with the most memory (GiB) one kernel tensor may take; default: the
#: memory available now (``MemAvailable`` of ``/proc/meminfo``).
MEMORY_LIMIT_ENV = "BAYESMKL_MEMORY_LIMIT_GB"


class KernelMemoryError(ValueError, MemoryError):
    """A kernel tensor would not fit in memory (raised before allocating it)."""


def kernel_memory_limit() -> float | None:
    """Bytes one kernel tensor may take: ``$BAYESMKL_MEMORY_LIMIT_GB`` or the available memory.

    ``None`` when neither is known (no check is then made).
    """
    import os

    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env:
        try:
            return float(env) * 2**30
        except ValueError:
            raise ValueError(f"{MEMORY_LIMIT_ENV}={env!r} is not a number of GiB") from None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_kernel_memory(P: int, M: int, N: int, dtype, what: str = "kernel tensor") -> int:
    """Raise :class:`KernelMemoryError` when ``P × M × N`` entries of ``dtype`` exceed the limit.

    Returns the number of bytes otherwise.
    """
    itemsize = np.dtype(dtype).itemsize
    need = int(P) * int(M) * int(N) * itemsize
    limit = kernel_memory_limit()
    if limit is not None and need > limit:
        gib = need / 2**30
        hints = []
        if itemsize > 4:
            hints.append(f"kernel_dtype='float32' (CLI: --kernel-dtype float32; {gib / 2:.3g} GiB)")
        hints.append("fewer kernels (e.g. 'bsvm16' instead of 'simplemkl', 13·(d+1) kernels)")
        hints.append("fewer rows, or a feature view")
        raise KernelMemoryError(
            f"the {what} ({P} kernels × {M} × {N}, {np.dtype(dtype).name}) needs "
            f"{gib:.3g} GiB but only {limit / 2**30:.3g} GiB are available "
            f"(set {MEMORY_LIMIT_ENV} to change the limit); use " + ", ".join(hints)
        )
    return need


class NotFittedError(ValueError):
    """Raised when a pool is used before :meth:`KernelPool.fit`, or before its expansion."""


# --------------------------------------------------------------------------------------------
# KernelSpec
# --------------------------------------------------------------------------------------------


def _fmt_number(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _coerce_features(features):
    if isinstance(features, str):
        if features in ("all", "each"):
            return features
        raise ValueError(f"features must be 'all', 'each' or column indices; got {features!r}")
    if isinstance(features, slice):
        if features.start is not None and features.start < 0 or features.stop is None:
            raise ValueError(
                f"a feature slice needs an explicit non-negative start/stop; got {features!r}"
            )
        if features.stop < 0:
            raise ValueError(f"a feature slice needs a non-negative stop; got {features!r}")
        features = range(features.start or 0, features.stop, features.step or 1)
    if isinstance(features, (int, np.integer)) and not isinstance(features, bool):
        features = (features,)
    try:
        cols = tuple(features)
    except TypeError:
        raise ValueError(
            f"features must be 'all', 'each' or column indices; got {features!r}"
        ) from None
    out = []
    for c in cols:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise ValueError(f"feature indices must be integers; got {c!r} in {features!r}")
        if c < 0:
            raise ValueError(f"feature indices must be >= 0; got {int(c)}")
        out.append(int(c))
    if not out:
        raise ValueError("a kernel needs at least one feature; got an empty feature list")
    if len(set(out)) != len(out):
        raise ValueError(f"feature indices must be distinct; got {out}")
    return tuple(out)


def _features_label(features) -> str:
    if isinstance(features, str):
        return features
    if len(features) == 1:
        return f"x{features[0]}"
    if features == tuple(range(features[0], features[-1] + 1)):
        return f"x{features[0]}:{features[-1] + 1}"
    if len(features) <= 6:
        return ",".join(f"x{c}" for c in features)
    return f"x{features[0]},x{features[1]},...,x{features[-1]} ({len(features)} cols)"


@dataclass(frozen=True)
class KernelSpec:
    """One base kernel: ``kind``, its parameter and the feature subset it reads.

    Parameters
    ----------
    kind : {"gauss", "poly", "linear"}, pairwise kernel name, callable or sklearn Kernel
        The package's own kernels, or a custom one (:mod:`bayesmkl.kernels.custom`): a
        :func:`sklearn.metrics.pairwise.pairwise_kernels` name (``"rbf"``, ``"laplacian"``,
        ``"sigmoid"``, ``"chi2"``, ``"cosine"``, ...; ``"poly"``/``"linear"`` with a dict
        ``param`` also mean scikit-learn's), a callable ``k(X, Y) -> (len(X), len(Y))`` array,
        or a :class:`sklearn.gaussian_process.kernels.Kernel` instance.
    param : float or int or dict or None
        Width ``sigma > 0`` for ``"gauss"``; integer degree ``>= 1`` for ``"poly"``; ``None``
        for ``"linear"``. For a pairwise name, its keyword parameters (e.g. ``{"gamma": 0.5}``);
        for a callable, extra keyword arguments (or ``None``); ``None`` for a GP kernel. Custom
        parameters are stored as a sorted tuple of ``(name, value)`` pairs.
    features : "all", "each", int, slice or sequence of int
        ``"all"`` uses every column; a tuple of column indices uses those columns; ``"each"``
        is a *template* that a pool expands at fit into one kernel per single feature.
        Stored as ``"all"``, ``"each"`` or a tuple of int.
    label : str, optional
        Shown instead of the feature list in :attr:`name` (e.g. a view name).
    display_name : str, optional
        The kernel's full name, replacing the derived one (per-feature templates append
        ``[x<j>]``).

    Examples
    --------
    >>> KernelSpec("gauss", 0.25, 7).name
    'gauss(s=0.25)[x7]'
    >>> KernelSpec("poly", 2).name
    'poly(d=2)[all]'
    >>> KernelSpec("gauss", 2, slice(0, 240)).name
    'gauss(s=2)[x0:240]'
    >>> KernelSpec("rbf", {"gamma": 0.5}, [0, 1]).name
    'rbf(gamma=0.5)[x0:2]'
    """

    kind: object
    param: object = None
    features: str | tuple[int, ...] = "all"
    label: str | None = None
    display_name: str | None = None
    _family: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self):
        builtin = isinstance(self.kind, str) and (
            self.kind == "gauss" or (self.kind in KINDS and not isinstance(self.param, Mapping))
        )
        if builtin:
            self._check_builtin()
            object.__setattr__(self, "_family", self.kind)
        else:
            family, _, params = custom.classify(self.kind, self.param)
            object.__setattr__(self, "_family", family)
            object.__setattr__(self, "param", None if family == "sklearn" else params)
        object.__setattr__(self, "features", _coerce_features(self.features))
        for attr in ("label", "display_name"):
            value = getattr(self, attr)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{attr} must be a string or None; got {value!r}")

    def _check_builtin(self):
        p = self.param
        if self.kind == "gauss":
            if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
                raise ValueError(f"a Gaussian kernel needs a numeric width sigma > 0; got {p!r}")
            if not math.isfinite(float(p)) or float(p) <= 0:
                raise ValueError(f"Gaussian width must be finite and > 0; got {p!r}")
            p = float(p)
        elif self.kind == "poly":
            ok = not isinstance(p, bool) and isinstance(p, (int, float, np.integer, np.floating))
            if not ok or not math.isfinite(float(p)) or float(p) != int(p) or int(p) < 1:
                raise ValueError(f"polynomial degree must be an integer >= 1; got {p!r}")
            p = int(p)
        elif p is not None:
            raise ValueError(f"a linear kernel takes no parameter; got {p!r}")
        object.__setattr__(self, "param", p)

    @property
    def family(self) -> str:
        """``"gauss"``, ``"poly"``, ``"linear"``, or a custom family: ``"pairwise"``,
        ``"sklearn"``, ``"callable"``."""
        return self._family

    @property
    def is_custom(self) -> bool:
        """True for a user callable, a scikit-learn kernel object or a pairwise kernel name."""
        return self._family in custom.CUSTOM_FAMILIES

    @property
    def name(self) -> str:
        """Readable name, e.g. ``gauss(s=0.25)[x7]``, ``poly(d=2)[all]``, ``linear[fou]``,
        ``rbf(gamma=0.5)[all]``, ``callable:my_func[x0:4]``, or the ``display_name``."""
        if self.display_name is not None:
            return self.display_name
        feats = self.label if self.label is not None else _features_label(self.features)
        if self.is_custom:
            return f"{custom.head_name(self._family, self.kind, self.param or ())}[{feats}]"
        if self.kind == "gauss":
            head = f"gauss(s={_fmt_number(self.param)})"
        elif self.kind == "poly":
            head = f"poly(d={self.param})"
        else:
            head = "linear"
        return f"{head}[{feats}]"

    @property
    def is_template(self) -> bool:
        """True for ``features="each"`` (expanded to one kernel per feature at fit)."""
        return self.features == "each"

    def expand(self, n_features: int) -> list[KernelSpec]:
        """Concrete specs for data with ``n_features`` columns (templates give one per column)."""
        if self.is_template:
            dn = self.display_name
            return [
                KernelSpec(self.kind, self.param, (j,),
                           display_name=None if dn is None else f"{dn}[x{j}]")
                for j in range(n_features)
            ]  # fmt: skip
        return [self]

    def custom_parts(self) -> tuple[str, object, tuple]:
        """``(family, kernel, params)`` of a custom spec, as :mod:`.custom` evaluates them."""
        return self._family, self.kind, self.param or ()


def _coerce_spec(s) -> KernelSpec:
    if isinstance(s, KernelSpec):
        return s
    if isinstance(s, dict):
        return KernelSpec(**s)
    if isinstance(s, (tuple, list)):
        return KernelSpec(*s)
    if callable(s):  # a bare callable or scikit-learn kernel object, on all features
        return KernelSpec(s)
    raise ValueError(
        f"cannot interpret {s!r} as a KernelSpec (kind, param, features), a callable or a "
        "scikit-learn kernel object"
    )


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


def _plan(specs: Sequence[KernelSpec], poly_offset: float) -> list[_Group]:
    subset: dict = {}
    single: dict = {}
    for i, s in enumerate(specs):
        if s.is_custom:  # evaluated one by one (KernelPool._custom_kernel)
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


# --------------------------------------------------------------------------------------------
# KernelPool
# --------------------------------------------------------------------------------------------


def _check_X(X, what: str = "X") -> np.ndarray:
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{what} could not be converted to an array: {exc}") from None
    if (
        arr.dtype == object
        or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool)
        or np.issubdtype(arr.dtype, np.complexfloating)
    ):
        raise ValueError(f"{what} must be a real numeric array; got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{what} must be 2-D (n_samples, n_features); got shape {arr.shape}"
            + (" (use X.reshape(-1, 1) for a single feature)" if arr.ndim == 1 else "")
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{what} must have at least one sample and one feature; got {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        bad_cols = np.flatnonzero(~finite.all(axis=0))
        c = int(bad_cols[0])
        r = int(np.flatnonzero(~finite[:, c])[0])
        kind = "NaN" if np.isnan(arr[r, c]) else "inf"
        more = f" (columns {bad_cols.tolist()[:20]} are affected)" if bad_cols.size > 1 else ""
        raise ValueError(
            f"{what} contains non-finite values: {kind} in column {c} (first at row {r}){more}"
        )
    return arr


class KernelPool:
    """An ordered list of base kernels with training-only preprocessing.

    Parameters
    ----------
    specs : sequence of KernelSpec (or ``(kind, param, features)`` tuples)
        The kernels in order. Specs with ``features="each"`` are templates: the pool is then a
        *recipe*, expanded at :meth:`fit` into one kernel per single feature (so its length
        depends on the number of features and is unknown before fit).
    standardize : bool, default True
        Z-score the features with the training mean and standard deviation (``ddof=0``);
        constant columns get standard deviation 1.
    normalize : bool, default True
        Unit-diagonal ("spherical") normalisation ``K(x, z) / sqrt(K(x, x) K(z, z))``. Cross
        kernels use each new point's own self-similarity. A no-op for (uncentred) Gaussians.
    center : bool, default False
        Centre in feature space with training statistics (spec §7.2), before normalisation:
        ``K_c = H K H`` for training kernels and
        ``k_c(x*) = k(x*) - K 1/N - (1^T k(x*)/N) 1 + (1^T K 1/N^2) 1`` for new rows.
    dtype : numpy dtype, default np.float64
        Storage dtype of the returned kernels (float32 or float64); the computation is float64.
    poly_offset : float, default 1.0
        ``offset`` of the polynomial kernels ``(x^T z + offset)^d``. 0 reproduces SVM-KM.
    n_features : int, optional
        Expected number of feature columns (set by :meth:`views` from block lengths);
        :meth:`fit` refuses data with another count.

    Attributes
    ----------
    recipe : tuple of KernelSpec
        The specs as given (templates unexpanded).
    n_features_in_ : int
        Number of features seen at fit.
    mean_, scale_ : ndarray, shape (d,), or None
        Standardisation statistics (None when ``standardize=False``).
    X_fit_ : ndarray, shape (N, d)
        The standardised training points (needed for cross kernels).
    row_means_, grand_means_ : ndarray, shapes (P, N) and (P,), or None
        Training centring statistics ``K 1/N`` and ``1^T K 1/N^2`` of the uncentred kernels
        (only when ``center=True``).

    Notes
    -----
    The pool is an ordinary Python object holding NumPy arrays and frozen dataclasses, so it
    can be deep-copied and pickled. Changing ``standardize``, ``center``, ``poly_offset`` or the
    specs after :meth:`fit` makes the pool refuse to produce kernels until it is refitted;
    ``normalize`` and ``dtype`` may be changed freely.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> pool = KernelPool.simplemkl().fit(X)
    >>> len(pool), pool.names[0], pool.names[13]
    (52, 'gauss(s=0.125)[all]', 'gauss(s=0.125)[x0]')
    >>> pool.train_kernels().shape
    (52, 20, 20)
    """

    def __init__(
        self,
        specs: Iterable,
        *,
        standardize: bool = True,
        normalize: bool = True,
        center: bool = False,
        dtype=np.float64,
        poly_offset: float = 1.0,
        n_features: int | None = None,
    ):
        if isinstance(specs, (KernelSpec, str)):
            raise ValueError("specs must be a sequence of KernelSpec, e.g. [KernelSpec(...)]")
        self.recipe = tuple(_coerce_spec(s) for s in specs)
        if not self.recipe:
            raise ValueError("a KernelPool needs at least one kernel spec")
        self.standardize = standardize
        self.normalize = normalize
        self.center = center
        self.dtype = dtype
        self.poly_offset = poly_offset
        self.n_features = n_features

    # ----------------------------------------------------------------------------------------
    # constructors
    # ----------------------------------------------------------------------------------------

    @classmethod
    def from_specs(cls, specs: Iterable, **options) -> KernelPool:
        """A pool from an explicit list of specs (same as ``KernelPool(specs, **options)``)."""
        return cls(specs, **options)

    @classmethod
    def simplemkl(
        cls, *, gauss_widths=SIMPLEMKL_WIDTHS, poly_degrees=DEFAULT_DEGREES, **options
    ) -> KernelPool:
        """SimpleMKL / BEMKL recipe (BM3KL Table 3): every kernel on all features and on each.

        Gaussian widths ``2^-3, ..., 2^6`` and polynomial degrees 1, 2, 3, first on all
        features (13 kernels), then on each single feature (13 per feature, grouped by kernel:
        ``gauss(s=0.125)[x0], ..., gauss(s=0.125)[x{d-1}], gauss(s=0.25)[x0], ...``). That is
        ``P = 13 (d + 1)``: 793 for Sonar (d = 60), 91 for BUPA liver (d = 6). The per-feature
        part depends on ``d``, so the pool is expanded at :meth:`fit`.

        Parameters
        ----------
        gauss_widths : sequence of float
        poly_degrees : sequence of int
        **options
            Keyword options of :class:`KernelPool`.
        """
        fam = [("gauss", w) for w in gauss_widths] + [("poly", d) for d in poly_degrees]
        specs = [KernelSpec(k, p, "all") for k, p in fam]
        specs += [KernelSpec(k, p, "each") for k, p in fam]
        return cls(specs, **options)

    @classmethod
    def bsvm16(cls, *, gauss_widths=BSVM_WIDTHS, poly_degrees=DEFAULT_DEGREES, **options):
        """BM3KL Table 2 pool: 13 Gaussians ``2^-6, ..., 2^6`` and poly 1, 2, 3 on all features.

        Parameters
        ----------
        gauss_widths : sequence of float
        poly_degrees : sequence of int
        **options
            Keyword options of :class:`KernelPool`.
        """
        specs = [KernelSpec("gauss", w) for w in gauss_widths]
        specs += [KernelSpec("poly", d) for d in poly_degrees]
        return cls(specs, **options)

    @classmethod
    def views(
        cls,
        blocks: Sequence,
        *,
        gauss_widths=SIMPLEMKL_WIDTHS,
        poly_degrees=DEFAULT_DEGREES,
        names: Sequence[str] | None = None,
        **options,
    ) -> KernelPool:
        """Multi-view pool: one kernel family per block of columns.

        For views concatenated column-wise (e.g. ``np.hstack(load_mfeat()[0])``), each block
        gets the Gaussians ``gauss_widths`` and polynomials ``poly_degrees``, view by view.
        Standardisation is per column; kernels are named after the view, e.g.
        ``gauss(s=2)[fou]``, or ``gauss(s=2)[x0:76]`` without names.

        Parameters
        ----------
        blocks : sequence of int, or of slices / index sequences
            Block lengths (consecutive blocks; the pool then expects exactly ``sum(blocks)``
            features), or explicit column slices (with a stop) or index lists.
        gauss_widths : sequence of float, default 2^-3, ..., 2^6
        poly_degrees : sequence of int, default (1, 2, 3)
        names : sequence of str, optional
            One name per block, used in the kernel names.
        **options
            Keyword options of :class:`KernelPool`.

        Returns
        -------
        KernelPool
            ``len(blocks) * (len(gauss_widths) + len(poly_degrees))`` kernels.
        """
        blocks = list(blocks)
        if not blocks:
            raise ValueError("views() needs at least one block")
        is_len = [isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in blocks]
        if all(is_len):
            if any(b < 1 for b in blocks):
                raise ValueError(f"block lengths must be >= 1; got {blocks}")
            stops = np.cumsum(blocks)
            cols = [tuple(range(s - b, s)) for b, s in zip(blocks, stops.tolist(), strict=True)]
            options.setdefault("n_features", int(stops[-1]))
        elif any(is_len):
            raise ValueError(
                "blocks must be all lengths (ints) or all column selections (slices/index lists)"
            )
        else:
            cols = [_coerce_features(b) for b in blocks]
            if any(isinstance(c, str) for c in cols):
                raise ValueError("view blocks must select columns, not 'all'/'each'")
        if names is not None:
            names = [str(n) for n in names]
            if len(names) != len(blocks):
                raise ValueError(f"got {len(names)} view names for {len(blocks)} blocks")
            if len(set(names)) != len(names):
                raise ValueError(f"view names must be distinct; got {names}")
        fam = [("gauss", w) for w in gauss_widths] + [("poly", d) for d in poly_degrees]
        specs = [
            KernelSpec(k, p, c, label=None if names is None else names[v])
            for v, c in enumerate(cols)
            for k, p in fam
        ]
        return cls(specs, **options)

    # ----------------------------------------------------------------------------------------
    # introspection
    # ----------------------------------------------------------------------------------------

    @property
    def is_recipe(self) -> bool:
        """True when some spec is a per-feature template (the length is known only after fit)."""
        return any(s.is_template for s in self.recipe)

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "X_fit_")

    def _recipe_summary(self) -> str:
        fixed = sum(not s.is_template for s in self.recipe)
        each = len(self.recipe) - fixed
        return f"{fixed} kernels + {each} per feature"

    @property
    def specs(self) -> list[KernelSpec]:
        """The concrete specs in pool order (recipes: available after :meth:`fit`)."""
        if not self.is_recipe:
            return list(self.recipe)
        if not self.is_fitted:
            raise NotFittedError(
                f"this pool is a recipe ({self._recipe_summary()}): it is expanded to one "
                "kernel per feature at fit(X), so its kernels, names and length are unknown "
                "until then; call fit(X) first"
            )
        return [e for s in self.recipe for e in s.expand(self.n_features_in_)]

    @property
    def names(self) -> list[str]:
        """Readable kernel names in pool order, e.g. ``['gauss(s=0.125)[all]', ...]``."""
        return [s.name for s in self.specs]

    def __len__(self) -> int:
        if self.is_recipe and self.is_fitted:
            d = self.n_features_in_
            return sum(d if s.is_template else 1 for s in self.recipe)
        return len(self.specs)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        size = (
            f"{len(self)} kernels"
            if (not self.is_recipe or self.is_fitted)
            else f"recipe: {self._recipe_summary()}, expanded at fit"
        )
        opts = (
            f"standardize={self.standardize}, normalize={self.normalize}, center={self.center}, "
            f"dtype={np.dtype(self.dtype).name}, poly_offset={self.poly_offset}"
        )
        state = "fitted" if self.is_fitted else "not fitted"
        return f"KernelPool({size}; {opts}; {state})"

    # ----------------------------------------------------------------------------------------
    # fit / kernels
    # ----------------------------------------------------------------------------------------

    def _signature(self):
        return (
            bool(self.standardize),
            bool(self.center),
            float(self.poly_offset),
            self.recipe,
            self.n_features,
        )

    def _out_dtype(self) -> np.dtype:
        dt = np.dtype(self.dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64; got {dt}")
        return dt

    def _check_options(self):
        self._out_dtype()
        off = self.poly_offset
        if (
            isinstance(off, bool)
            or not isinstance(off, (int, float, np.integer, np.floating))
            or not math.isfinite(float(off))
        ):
            raise ValueError(f"poly_offset must be a finite number; got {off!r}")

    @with_x64
    def fit(self, X) -> KernelPool:
        """Learn the training statistics from ``X``.

        Parameters
        ----------
        X : array, shape (N, d)
            Training features (finite).

        Returns
        -------
        self
        """
        self._check_options()
        X = _check_X(X, "X")
        N, d = X.shape
        if self.n_features is not None and d != self.n_features:
            raise ValueError(
                f"this pool expects {self.n_features} features (its view blocks cover "
                f"{self.n_features} columns), but X has {d}"
            )
        specs = [e for s in self.recipe for e in s.expand(d)]
        for i, s in enumerate(specs):
            if s.features not in ("all",) and max(s.features) >= d:
                raise ValueError(
                    f"kernel {i} '{s.name}' uses feature index {max(s.features)}, but X has "
                    f"only {d} features (indices 0..{d - 1})"
                )
        for attr in (
            "mean_",
            "scale_",
            "X_fit_",
            "row_means_",
            "grand_means_",
            "n_features_in_",
            "_fit_signature",
        ):
            self.__dict__.pop(attr, None)
        if self.standardize:
            with np.errstate(over="ignore", invalid="ignore"):
                mean = X.mean(axis=0)
                sd = X.std(axis=0)
            _check_standardisation(X, mean, sd)
            sd = np.where(sd <= 1e-12 * np.maximum(1.0, np.abs(mean)), 1.0, sd)
            Xs = (X - mean) / sd
        else:
            mean = sd = None
            Xs = X.copy()
        row_means = grand = None
        if self.center:
            row_means = np.empty((len(specs), N))
            jobs = (
                job
                for g in _plan(specs, float(self.poly_offset))
                for job in _run_group(g, Xs, Xs, center=False, normalize=False)
            )
            for res, idx in _pipelined(jobs):
                row_means[idx] = res.mean(axis=2)
        for i, s in enumerate(specs):  # custom kernels: validated on the training data
            if s.is_custom:
                Ktr = custom.evaluate(
                    *s.custom_parts(), _cols(Xs, s), _cols(Xs, s), name=s.name, symmetric=True
                )
                if self.center:
                    row_means[i] = Ktr.mean(axis=1)
        if self.center:
            grand = row_means.mean(axis=1)
        self.mean_, self.scale_ = mean, sd
        self.row_means_, self.grand_means_ = row_means, grand
        self.n_features_in_ = d
        self.X_fit_ = Xs
        self._fit_signature = self._signature()
        return self

    def _require_fitted(self):
        if not self.is_fitted:
            raise NotFittedError("this KernelPool is not fitted yet: call fit(X) first")
        if self._fit_signature != self._signature():
            raise NotFittedError(
                "standardize, center, poly_offset or the specs changed after fit(X); "
                "call fit(X) again"
            )
        self._check_options()

    def _transform(self, X) -> np.ndarray:
        if self.standardize:
            return (X - self.mean_) / self.scale_
        return X

    @with_x64
    def train_kernels(self) -> np.ndarray:
        """Training kernels.

        Returns
        -------
        K : ndarray, shape (P, N, N), dtype ``self.dtype``
            Symmetric, PSD, with unit diagonal when ``normalize=True``.
        """
        self._require_fitted()
        return self._kernels(self.X_fit_, "training")

    @with_x64
    def cross_kernels(self, Xnew) -> np.ndarray:
        """Kernels between new points (rows) and the training points (columns).

        Parameters
        ----------
        Xnew : array, shape (M, d)
            New points, raw (the training standardisation is applied here).

        Returns
        -------
        K : ndarray, shape (P, M, N), dtype ``self.dtype``
            ``cross_kernels(X_train)`` equals :meth:`train_kernels`.
        """
        self._require_fitted()
        Xnew = _check_X(Xnew, "Xnew")
        if Xnew.shape[1] != self.n_features_in_:
            raise ValueError(
                f"Xnew has {Xnew.shape[1]} features, but the pool was fitted with "
                f"{self.n_features_in_} features"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            Xs = self._transform(Xnew)
        return self._kernels(Xs, "Xnew")

    def _kernels(self, Xrows: np.ndarray, what: str = "training") -> np.ndarray:
        specs = self.specs
        out_dtype = self._out_dtype()
        M, N = Xrows.shape[0], self.X_fit_.shape[0]
        check_kernel_memory(len(specs), M, N, out_dtype, f"{what} kernel tensor")
        out = np.empty((len(specs), M, N), dtype=out_dtype)
        opts = dict(
            center=bool(self.center),
            normalize=bool(self.normalize),
            row_means=self.row_means_,
            grand_means=self.grand_means_,
        )
        jobs = (
            job
            for g in _plan(specs, float(self.poly_offset))
            for job in _run_group(g, Xrows, self.X_fit_, **opts)
        )
        for res, idx in _pipelined(jobs):
            _put(out, idx, res)  # casts to the storage dtype while copying
        for i, s in enumerate(specs):
            if s.is_custom:
                out[i] = self._custom_kernel(i, s, Xrows)
        _check_finite_kernels(out, Xrows, specs, what)
        return out

    def _custom_kernel(self, i: int, s: KernelSpec, Xrows: np.ndarray) -> np.ndarray:
        """Kernel ``(M, N)`` of custom spec ``s`` (pool position ``i``), preprocessed in float64."""
        A, B = _cols(Xrows, s), _cols(self.X_fit_, s)
        parts = s.custom_parts()
        K = custom.evaluate(*parts, A, B, name=s.name)[None]
        stats = (None, None)
        if self.center:
            stats = (self.row_means_[i][None], self.grand_means_[i][None])
        if self.normalize:
            dA = custom.self_similarity(*parts, A, name=s.name)[None]
            dB = custom.self_similarity(*parts, B, name=s.name)[None]
        else:
            dA, dB = np.ones((1, A.shape[0])), np.ones((1, B.shape[0]))
        K = _preprocess(K, dA, dB, *stats, center=bool(self.center), normalize=bool(self.normalize))
        return np.asarray(K[0])


def _cols(X: np.ndarray, s: KernelSpec) -> np.ndarray:
    """The columns of ``X`` a (non-template) spec reads."""
    return X if s.features == "all" else X[:, list(s.features)]


def _check_standardisation(X: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> None:
    """Refuse columns whose mean or standard deviation overflows float64.

    A value like 1e300 makes the variance infinite; the standardised column would then be
    zero (or NaN) everywhere, silently. The message names the column and the offending row.
    """
    bad = np.flatnonzero(~(np.isfinite(mean) & np.isfinite(sd)))
    if bad.size:
        c = int(bad[0])
        r = int(np.argmax(np.abs(X[:, c])))
        more = f" (also columns {bad[1:20].tolist()})" if bad.size > 1 else ""
        raise ValueError(
            f"X column {c} cannot be standardised: its value {X[r, c]:.3g} (row {r}) makes the "
            f"variance overflow float64{more}. Rescale the column (e.g. divide it by its "
            "largest absolute value, or take a logarithm) or remove the outlying rows."
        )


def _check_finite_kernels(out: np.ndarray, Xrows: np.ndarray, specs, what: str) -> None:
    """Refuse kernel values that are NaN or infinite (features too large for a kernel)."""
    for m in range(out.shape[0]):
        finite = np.isfinite(out[m])
        if finite.all():
            continue
        r = int(np.flatnonzero(~finite.all(axis=1))[0])
        c = int(np.argmax(np.abs(Xrows[r]))) if Xrows.shape[1] else 0
        n_bad = int((~finite.all(axis=1)).sum())
        raise ValueError(
            f"kernel {m} '{specs[m].name}' is not finite for {n_bad} {what} row(s) (first: row "
            f"{r}, whose standardised feature {c} is {Xrows[r, c]:.3g}): too large for this "
            "kernel (polynomial kernels overflow float64). Check the row for extreme values or "
            "rescale the features."
        )


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


# --------------------------------------------------------------------------------------------
# precomputed kernels
# --------------------------------------------------------------------------------------------


def validate_precomputed(
    K, names: Sequence[str] | None = None, *, psd_rtol: float | None = None
) -> tuple[np.ndarray, list[str]]:
    """Check a user's precomputed training kernels and return them as one stack.

    Parameters
    ----------
    K : array (P, N, N), array (N, N), or list of (N, N) arrays
        Gram matrices of the training points. A single matrix gives ``P = 1``. An array input
        is not copied when it already is a float array.
    names : sequence of str, optional
        One name per kernel; defaults to ``K0, K1, ...``.
    psd_rtol : float, optional
        Tolerance of the positive semi-definiteness check: kernel m is refused when
        ``K_m + psd_rtol · max|K_m| · I`` has no Cholesky factor, i.e. when its smallest
        eigenvalue is below ``−psd_rtol · max|K_m|``. Default :data:`PSD_RTOL` for the dtype
        (1e-6 for float64, 1e-3 for float32); ``0`` accepts only numerically PD matrices.

    Returns
    -------
    K : ndarray, shape (P, N, N)
        Floating dtype (float32 is kept; other dtypes become float64).
    names : list of str, length P

    Raises
    ------
    ValueError
        If a matrix is not square, the matrices differ in size, an entry is NaN/inf, a
        kernel is not symmetric within ``1e-6 * max|K_m|`` (the message gives the kernel index
        and the largest asymmetry), or a kernel is indefinite beyond ``psd_rtol`` (the message
        gives its smallest and largest eigenvalues).
    """
    if isinstance(K, (list, tuple)):
        if len(K) == 0:
            raise ValueError("the list of precomputed kernels is empty")
        mats = []
        for m, k in enumerate(K):
            k = np.asarray(k)
            if k.ndim != 2 or k.shape[0] != k.shape[1]:
                raise ValueError(
                    f"precomputed kernel {m} has shape {k.shape}: each Gram matrix must be "
                    "square (N, N)"
                )
            if k.shape != np.shape(K[0]):
                raise ValueError(
                    f"precomputed kernels differ in size: kernel 0 is {np.shape(K[0])}, "
                    f"kernel {m} is {k.shape}"
                )
            mats.append(k)
        K = np.stack(mats)
    else:
        K = np.asarray(K)
        if K.ndim == 2:
            K = K[None]
        if K.ndim != 3:
            raise ValueError(
                f"precomputed kernels must be (P, N, N), (N, N) or a list of (N, N); got shape "
                f"{K.shape}"
            )
        if K.shape[1] != K.shape[2]:
            raise ValueError(
                f"precomputed kernels have shape {K.shape}: Gram matrices must be square "
                "(P, N, N); for test kernels (P, M, N) use the estimator's predict"
            )
    if K.shape[0] == 0 or K.shape[1] == 0:
        raise ValueError(f"precomputed kernels are empty: shape {K.shape}")
    if (
        K.dtype == object
        or not (np.issubdtype(K.dtype, np.number) or K.dtype == bool)
        or np.issubdtype(K.dtype, np.complexfloating)
    ):
        raise ValueError(f"precomputed kernels must be real numbers; got dtype {K.dtype}")
    if not np.issubdtype(K.dtype, np.floating) or K.dtype == np.float16:
        K = K.astype(np.float64)
    for m in range(K.shape[0]):
        Km = K[m]
        if not np.all(np.isfinite(Km)):
            i, j = np.argwhere(~np.isfinite(Km))[0]
            raise ValueError(f"precomputed kernel {m} contains NaN or inf (first at [{i}, {j}])")
        scale = float(np.max(np.abs(Km)))
        asym = float(np.max(np.abs(Km - Km.T)))
        if asym > 1e-6 * scale:
            raise ValueError(
                f"precomputed kernel {m} is not symmetric: max |K - K^T| = {asym:.3g} exceeds "
                f"the tolerance 1e-6 * max|K| = {1e-6 * scale:.3g}"
            )
    rtol = PSD_RTOL[np.dtype(K.dtype).name] if psd_rtol is None else float(psd_rtol)
    for m in range(K.shape[0]):
        _check_psd(K[m], m, rtol)
    P = K.shape[0]
    if names is None:
        names = [f"K{m}" for m in range(P)]
    else:
        if isinstance(names, str):
            raise ValueError("names must be a sequence of strings, one per kernel")
        names = [str(n) for n in names]
        if len(names) != P:
            raise ValueError(f"got {len(names)} names for {P} precomputed kernels")
    return K, names


def _check_psd(Km: np.ndarray, m: int, rtol: float) -> None:
    """Refuse an indefinite Gram matrix (see :func:`validate_precomputed`, ``psd_rtol``)."""
    from scipy.linalg import LinAlgError, cholesky, eigvalsh

    A = np.array(Km, dtype=np.float64)  # a copy: the shift is added in place
    A = 0.5 * (A + A.T)
    scale = float(np.max(np.abs(A)))
    if scale == 0.0:
        return  # the zero kernel is PSD
    A[np.diag_indices_from(A)] += rtol * scale
    try:
        cholesky(A, lower=True, check_finite=False, overwrite_a=True)
        return
    except LinAlgError:
        pass
    ev = eigvalsh(0.5 * (Km + Km.T).astype(np.float64))
    raise ValueError(
        f"precomputed kernel {m} is not positive semi-definite: its smallest eigenvalue "
        f"{ev[0]:.3g} (largest {ev[-1]:.3g}) is below the tolerance -{rtol:g} * max|K| = "
        f"{-rtol * scale:.3g}. BM3KL and the MKL baselines need PSD kernels: add c*I, clip "
        "the negative eigenvalues (the tolerance is bayesmkl.kernels.pool.PSD_RTOL)."
    )
