"""Input checks of kernel pools: features, standardisation, finite kernels and memory."""

from __future__ import annotations

import math

import numpy as np

from bayesmkl.exceptions import FitMemoryError

__all__ = [
    "MEMORY_LIMIT_ENV",
    "PSD_RTOL",
    "FitMemoryError",
    "KernelMemoryError",
    "NotFittedError",
    "check_X",
    "feature_names_of",
    "check_finite_kernels",
    "spec_columns",
    "check_gram",
    "check_kernel_memory",
    "check_memory",
    "check_precomputed_memory",
    "check_poly_offset",
    "check_psd",
    "check_spec_features",
    "check_storage_dtype",
    "check_standardisation",
    "kernel_memory_limit",
]

#: Environment variable with the most memory (GiB) one kernel tensor may take; default: the
#: memory available now (``MemAvailable`` of ``/proc/meminfo``), or less when the address-space
#: limit of the process (``ulimit -v``, ``RLIMIT_AS``) leaves less room.
MEMORY_LIMIT_ENV = "BAYESMKL_MEMORY_LIMIT_GB"


class KernelMemoryError(ValueError, MemoryError):
    """A kernel tensor would not fit in memory (raised before allocating it)."""


def kernel_memory_limit() -> float | None:
    """Bytes one kernel tensor may take: ``$BAYESMKL_MEMORY_LIMIT_GB``, else the smaller of the
    available physical memory and the room left under the process's address-space limit
    (``resource.RLIMIT_AS``, set by ``ulimit -v``: its soft limit minus the address space in
    use, ``VmSize``), since an allocation beyond either fails.

    ``None`` when none is known (no check is then made).
    """
    import os

    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env:
        try:
            return float(env) * 2**30
        except ValueError:
            raise ValueError(f"{MEMORY_LIMIT_ENV}={env!r} is not a number of GiB") from None
    limits = [v for v in (_available_memory(), _address_space_room()) if v is not None]
    return min(limits) if limits else None


def _available_memory() -> float | None:
    """Available physical memory in bytes (``MemAvailable``), or ``None``."""
    import os

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


def _address_space_room() -> float | None:
    """Bytes left under the soft ``RLIMIT_AS`` (minus ``VmSize``), or ``None`` when unlimited."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, AttributeError):  # not POSIX
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = 0.0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = float(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return max(float(soft) - used, 0.0)


def check_memory(need: float, what: str, hints, error=KernelMemoryError) -> int:
    """Raise ``error`` (:class:`KernelMemoryError` by default) when ``need`` bytes exceed
    :func:`kernel_memory_limit`; the message says ``what`` needs how much, the limit, where it
    comes from, and ``hints`` (what to change). Returns ``need`` (an int) otherwise."""
    need = int(need)
    limit = kernel_memory_limit()
    if limit is not None and need > limit:
        raise error(
            f"{what} needs {need / 2**30:.3g} GiB but only {limit / 2**30:.3g} GiB are available "
            f"(free memory, or the room left under ulimit -v; set {MEMORY_LIMIT_ENV} to change "
            "the limit); use " + ", ".join(hints)
        )
    return need


def check_kernel_memory(P: int, M: int, N: int, dtype, what: str = "kernel tensor") -> int:
    """Raise :class:`KernelMemoryError` when ``P × M × N`` entries of ``dtype`` exceed the limit.

    Returns the number of bytes otherwise.
    """
    itemsize = np.dtype(dtype).itemsize
    need = int(P) * int(M) * int(N) * itemsize
    hints = []
    if itemsize > 4:
        gib = need / 2**30
        hints.append(f"kernel_dtype='float32' (CLI: --kernel-dtype float32; {gib / 2:.3g} GiB)")
    hints.append("fewer kernels (e.g. 'bsvm16' instead of 'simplemkl', 13·(d+1) kernels)")
    hints.append("fewer rows, or a feature view")
    hints.append("a landmark fit (the estimators' n_landmarks=M: P × N × M entries)")
    return check_memory(
        need, f"the {what} ({P} kernels × {M} × {N}, {np.dtype(dtype).name})", hints
    )


#: Gram matrices of float64 temporaries that the checks of one precomputed kernel hold at once
#: (:func:`check_gram`: abs(K), K − Kᵀ; :func:`check_psd`: the symmetrised copy and its
#: Cholesky factor, or the eigenvalue solver's workspace).
PRECOMPUTED_CHECK_COPIES = 3


def _stack_shape(K) -> tuple[tuple, np.dtype] | None:
    """``(shape, dtype)`` of a precomputed kernel input (an array, a broadcast view, or a list
    of matrices) read without converting it; ``None`` where it cannot be read so."""
    if isinstance(K, (list, tuple)):
        if len(K) == 0:
            return None
        first = K[0]
        shape = getattr(first, "shape", None)
        if shape is None:  # nested Python lists: one matrix converted to read its shape
            shape = np.shape(first)
        return (len(K),) + tuple(shape), np.dtype(getattr(first, "dtype", np.float64))
    shape = getattr(K, "shape", None)
    dtype = getattr(K, "dtype", None)
    if shape is None:
        return None
    try:
        dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float64)
    except TypeError:  # a DataFrame's dtypes, an extension dtype: converted to float64
        dtype = np.dtype(np.float64)
    return tuple(int(d) for d in shape), dtype


def check_precomputed_memory(K, what: str = "precomputed kernel stack", *, training=True):
    """Refuse (:class:`KernelMemoryError`), before anything converts or checks it, a precomputed
    kernel input whose handling would not fit in memory.

    Counted for training kernels ``(P, N, N)``: the stack the fit works on (float32 kept,
    anything else float64; a list is stacked, a broadcast view or an integer array copied, and
    the sampler takes its own copy) plus :data:`PRECOMPUTED_CHECK_COPIES` float64 ``N × N``
    temporaries of the finiteness, symmetry and PSD checks of one kernel. For test kernels
    ``(P, M, N)`` (``training=False``): a float64 copy unless the input already is a float32
    or float64 array, and the finiteness mask (one byte an entry). Shapes it cannot read (not
    2-D or 3-D) are left to the shape checks. Returns the bytes counted.
    """
    info = _stack_shape(K)
    if info is None:
        return 0
    shape, dtype = info
    if len(shape) == 2:
        shape = (1,) + shape
    if len(shape) != 3:
        return 0
    P, M, N = shape
    entries = P * M * N
    itemsize = 4 if dtype == np.float32 else 8
    if training:
        need = entries * itemsize + PRECOMPUTED_CHECK_COPIES * N * N * 8
        extra = " with the checks' temporaries"
    else:
        as_is = isinstance(K, np.ndarray) and dtype in (np.float32, np.float64)
        need = (0 if as_is else entries * itemsize) + entries  # a copy, the finiteness mask
        extra = ""
    gib = entries * itemsize / 2**30
    hints = []
    if itemsize > 4:
        hints.append(f"float32 kernels (the stack: {gib / 2:.3g} GiB instead of {gib:.3g})")
    hints += ["fewer kernels", "fewer rows"]
    name = "float32" if itemsize == 4 else "float64"
    return check_memory(need, f"the {what} ({P} kernels × {M} × {N}, {name}{extra})", hints)


class NotFittedError(ValueError):
    """Raised when a pool is used before :meth:`KernelPool.fit`, or before its expansion."""


def check_X(X, what: str = "X") -> np.ndarray:
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


def check_standardisation(X: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> None:
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


def spec_columns(X: np.ndarray, spec) -> np.ndarray:
    """The columns of ``X`` a (non-template) :class:`KernelSpec` reads."""
    return X if spec.features == "all" else X[:, list(spec.features)]


def check_finite_kernels(
    out: np.ndarray, Xrows: np.ndarray, specs, what: str, *, center: bool = False
) -> None:
    """Refuse kernel values that are NaN or infinite: features too large for a kernel, or (with
    ``center``) a kernel whose features are constant on the training rows, which centring
    makes zero and the unit-diagonal normalisation then 0/0."""
    for m in range(out.shape[0]):
        finite = np.isfinite(out[m])
        if finite.all():
            continue
        if center and what == "training" and not np.ptp(spec_columns(Xrows, specs[m]), 0).any():
            raise ValueError(
                f"kernel {m} '{specs[m].name}' reads features that are constant on the training "
                "rows, so centring it (center=True) leaves zero: it carries no information. "
                "Drop the constant feature(s), or pass an uncentred KernelPool (center=False)."
            )
        r = int(np.flatnonzero(~finite.all(axis=1))[0])
        c = int(np.argmax(np.abs(Xrows[r]))) if Xrows.shape[1] else 0
        n_bad = int((~finite.all(axis=1)).sum())
        raise ValueError(
            f"kernel {m} '{specs[m].name}' is not finite for {n_bad} {what} row(s) (first: row "
            f"{r}, whose standardised feature {c} is {Xrows[r, c]:.3g}): too large for this "
            "kernel (polynomial kernels overflow float64). Check the row for extreme values or "
            "rescale the features."
        )


def check_storage_dtype(dtype) -> np.dtype:
    """The pool's storage dtype as a NumPy dtype (float32 or float64)."""
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64; got {dt}")
    return dt


def check_poly_offset(off) -> None:
    """Refuse a polynomial offset that is not a finite number."""
    if (
        isinstance(off, bool)
        or not isinstance(off, (int, float, np.integer, np.floating))
        or not math.isfinite(float(off))
    ):
        raise ValueError(f"poly_offset must be a finite number; got {off!r}")


def feature_names_of(X, d: int, feature_names=None):
    """The names of the ``d`` columns of ``X`` as an object array, or ``None``.

    ``feature_names`` when given (e.g. an estimator's ``feature_names_in_``), else the columns
    of a DataFrame ``X``. Used only when they are ``d`` distinct strings (scikit-learn's rule
    for ``feature_names_in_``, plus distinctness, so that kernel names stay unique); otherwise
    kernels are named by column index.
    """
    names = getattr(X, "columns", None) if feature_names is None else feature_names
    if names is None:
        return None
    names = list(names)
    if len(names) != d or not all(isinstance(n, str) for n in names):
        return None
    if len(set(names)) != d:
        return None
    return np.asarray(names, dtype=object)


def check_spec_features(specs, d: int) -> None:
    """Refuse a (concrete) spec that reads a column beyond the ``d`` of the data."""
    for i, s in enumerate(specs):
        if s.features not in ("all",) and max(s.features) >= d:
            raise ValueError(
                f"kernel {i} '{s.name}' uses feature index {max(s.features)}, but X has "
                f"only {d} features (indices 0..{d - 1})"
            )


def check_gram(K: np.ndarray, what: str, *, nan_verb: str = "contains", symmetry: str = ""):
    """Refuse a matrix ``K`` with NaN/inf entries, or ``K`` not symmetric within
    ``1e-6 · max|K|`` when ``symmetry`` is not ``None``; messages start with ``what`` (e.g.
    ``"precomputed kernel 3"``), ``nan_verb`` and ``symmetry`` complete them."""
    if not np.all(np.isfinite(K)):
        i, j = np.argwhere(~np.isfinite(K))[0]
        raise ValueError(f"{what} {nan_verb} NaN or inf (first at [{i}, {j}])")
    if symmetry is None:
        return
    scale = float(np.max(np.abs(K)))
    asym = float(np.max(np.abs(K - K.T)))
    if asym > 1e-6 * scale:
        raise ValueError(
            f"{what} is not symmetric{symmetry}: max |K - K^T| = {asym:.3g} exceeds the "
            f"tolerance 1e-6 * max|K| = {1e-6 * scale:.3g}"
        )


#: Relative tolerance of the positive semi-definiteness check of precomputed and custom kernels,
#: by dtype: a Gram matrix is accepted when ``K + PSD_RTOL · max|K| · I`` has a Cholesky factor,
#: i.e. when its smallest eigenvalue is above ``−PSD_RTOL · max|K|`` (``max|K|`` bounds the
#: diagonal of a PSD matrix). The float64 value leaves a wide margin over rounding errors of
#: computed kernels (≈ N·ε·max|K|); float32 kernels carry ≈ 1e−7 relative errors per entry.
PSD_RTOL = {"float64": 1e-6, "float32": 1e-3}


def check_psd(Km: np.ndarray, what: str, rtol: float) -> None:
    """Refuse an indefinite Gram matrix: one whose smallest eigenvalue is below
    ``−rtol · max|K|`` (:data:`PSD_RTOL`); the message starts with ``what``."""
    from scipy.linalg import LinAlgError, cholesky, eigvalsh

    K64 = np.asarray(Km, dtype=np.float64)
    A = 0.5 * (K64 + K64.T)  # a new array: the shift is added in place
    scale = float(np.max(np.abs(A)))
    if scale == 0.0:
        return  # the zero kernel is PSD
    A[np.diag_indices_from(A)] += rtol * scale
    try:
        cholesky(A, lower=True, check_finite=False, overwrite_a=True)
        return
    except LinAlgError:
        pass
    ev = eigvalsh(0.5 * (K64 + K64.T))
    raise ValueError(
        f"{what} is not positive semi-definite: its smallest eigenvalue "
        f"{ev[0]:.3g} (largest {ev[-1]:.3g}) is below the tolerance -{rtol:g} * max|K| = "
        f"{-rtol * scale:.3g}. BM3KL and the MKL baselines need PSD kernels: use a PSD kernel "
        "function, or for a Gram matrix add c*I or clip the negative eigenvalues (the "
        "tolerance is bayesmkl.kernels.pool.PSD_RTOL)."
    )
