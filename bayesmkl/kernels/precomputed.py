"""Checks of a user's precomputed kernel stack: shape, dtype, finiteness, symmetry and PSD."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bayesmkl.kernels._checks import PSD_RTOL, check_gram, check_precomputed_memory, check_psd

__all__ = ["PSD_RTOL", "validate_landmark_block", "validate_precomputed"]


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
    KernelMemoryError
        Before anything is converted, when the stack and the checks' temporaries would not fit
        in memory (:func:`~bayesmkl.kernels._checks.check_precomputed_memory`; a broadcast view
        counts as the array it stands for).
    ValueError
        If a matrix is not square, the matrices differ in size, an entry is NaN/inf, a
        kernel is not symmetric within ``1e-6 * max|K_m|`` (the message gives the kernel index
        and the largest asymmetry), or a kernel is indefinite beyond ``psd_rtol`` (the message
        gives its smallest and largest eigenvalues).
    """
    check_precomputed_memory(K)
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
        check_gram(K[m], f"precomputed kernel {m}")
    rtol = PSD_RTOL[np.dtype(K.dtype).name] if psd_rtol is None else float(psd_rtol)
    for m in range(K.shape[0]):
        check_psd(K[m], f"precomputed kernel {m}", rtol)
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


def validate_landmark_block(K, n_landmarks: int, names: Sequence[str] | None = None):
    """Check a user's precomputed landmark kernels ``K(X, Z)`` and return them as one stack.

    Parameters
    ----------
    K : array (P, N, M), array (N, M), or list of (N, M) arrays
        Kernels between the N training points (rows) and the M landmarks (columns) of a
        landmark fit (docs/math.md §16); no symmetry or PSD check applies to such a block.
    n_landmarks : int
        M, which the block's last axis must have.
    names : sequence of str, optional
        One name per kernel; defaults to ``K0, K1, ...``.

    Returns
    -------
    K : ndarray, shape (P, N, M)
    names : list of str, length P
    """
    mats = K if isinstance(K, (list, tuple)) else None
    if mats is not None:
        if len(mats) == 0:
            raise ValueError("the list of precomputed kernels is empty")
        K = np.stack([np.asarray(k) for k in mats])
    K = np.asarray(K)
    if K.ndim == 2:
        K = K[None]
    if K.ndim != 3 or K.shape[2] != n_landmarks or 0 in K.shape:
        raise ValueError(
            f"with kernels='precomputed' and n_landmarks={n_landmarks}, fit expects the kernels "
            f"between the training points and the landmarks, shape (P, N, {n_landmarks}); got "
            f"shape {K.shape}"
        )
    if (
        K.dtype == object
        or not np.issubdtype(K.dtype, np.number)
        or np.issubdtype(K.dtype, np.complexfloating)
    ):
        raise ValueError(f"precomputed kernels must be real numbers; got dtype {K.dtype}")
    if not np.issubdtype(K.dtype, np.floating) or K.dtype == np.float16:
        K = K.astype(np.float64)
    for m in range(K.shape[0]):
        check_gram(K[m], f"precomputed kernel {m}", symmetry=None)
    P = K.shape[0]
    names = [f"K{m}" for m in range(P)] if names is None else [str(n) for n in names]
    if len(names) != P:
        raise ValueError(f"names has {len(names)} entries for {P} kernels")
    return K, names
