"""Interpretation of an estimator's ``kernels=`` argument, shared by every classifier.

Accepted values
---------------
``"bsvm16"``, ``"simplemkl"``
    Named pool recipes (:meth:`KernelPool.bsvm16`, :meth:`KernelPool.simplemkl`).
:class:`~bayesmkl.kernels.KernelPool`
    A user pool; it is copied before fitting, so the estimator never mutates its parameter.
``"precomputed"``
    ``fit(K, y)`` takes a stack ``(P, N, N)`` (or a list of ``N x N`` Gram matrices) and
    ``predict(K_test)`` takes ``(P, M, N)``. The estimators' ``kernel_names`` parameter names the
    kernels (default ``K0, K1, ...``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from bayesmkl.kernels.pool import KernelPool, validate_precomputed
from bayesmkl.kernels.precomputed import validate_landmark_block

NAMED_POOLS = ("bsvm16", "simplemkl")


def resolve_kernels(kernels, *, center: bool = False) -> KernelPool | None:
    """Return a fresh, unfitted pool for ``kernels``, or ``None`` for ``"precomputed"``.

    ``center=True`` builds a named pool centred in feature space (``KernelPool(center=True)``);
    a user's :class:`KernelPool` keeps its own setting, and precomputed kernels are left alone.

    Raises
    ------
    ValueError
        If ``kernels`` is neither a known name, ``"precomputed"`` nor a :class:`KernelPool`.
    """
    if isinstance(kernels, KernelPool):
        return copy.deepcopy(kernels)
    if isinstance(kernels, str):
        if kernels == "precomputed":
            return None
        if kernels in NAMED_POOLS:
            return getattr(KernelPool, kernels)(center=bool(center))
    raise ValueError(
        f"kernels={kernels!r} is not understood: use one of {NAMED_POOLS + ('precomputed',)} "
        "or a bayesmkl.KernelPool"
    )


#: :meth:`KernelInput.far_rows` flags a new row this many training ranges outside the training
#: data. Features: standardised training columns span several standard deviations, so a test
#: value flagged is hundreds of standard deviations beyond every training point (1e20 in a
#: breast-cancer feature moved p from 0.97 to 0.63 silently: a normalised kernel keeps f small).
#: Precomputed kernels: by Cauchy-Schwarz |k(x, x_j)| <= sqrt(k(x, x) K_jj), so a row above 100
#: times the largest training diagonal needs k(x, x) above 1e4 times it (for a linear kernel, a
#: point 100 times farther out than every training point). Ordinary test data never come close.
FAR_RANGE_FACTOR = 100.0


@dataclass
class KernelInput:
    """The fitted kernel side of an estimator: its pool (or ``None``) and the training shape.

    Training kernels are returned by :meth:`fit` but not kept here, so a fitted estimator does
    not hold a ``(P, N, N)`` tensor it no longer needs (new rows come from the pool).

    Attributes
    ----------
    pool : KernelPool or None
        The fitted pool, or ``None`` when kernels are precomputed.
    names : list of str
        One name per kernel, length P.
    n_train : int
        N, the number of training points.
    train_scale : tuple of float or None
        Precomputed kernels: the largest abs(diagonal) of each training kernel (for
        :meth:`far_rows`); ``None`` with a pool, and for landmark blocks (no diagonal).
    n_landmarks : int or None
        M, the landmarks of a landmark fit (docs/math.md §16): the kernels' columns are the
        landmarks, so training kernels are ``(P, N, M)`` and new rows ``(P, M_new, M)``;
        ``None`` for the exact model.
    """

    pool: KernelPool | None
    names: list
    n_train: int
    train_scale: tuple | None = None
    n_landmarks: int | None = None

    @classmethod
    def fit(
        cls,
        kernels,
        X,
        *,
        dtype=None,
        kernel_names=None,
        feature_names=None,
        center=False,
        landmarks=None,
        n_landmarks=None,
    ) -> tuple[KernelInput, np.ndarray]:
        """Resolve ``kernels``, build the training kernels from ``X``; return ``(input, K)``.

        ``X`` is a feature matrix ``(N, d)``, or for ``kernels="precomputed"`` a stack
        ``(P, N, N)`` or a list of Gram matrices. ``K`` has shape ``(P, N, N)``.
        ``kernel_names`` (one string per kernel) names precomputed kernels; a pool names its
        kernels itself, so giving names with a pool is an error. ``feature_names`` (an
        estimator's ``feature_names_in_``, when ``X`` has become an array) or a DataFrame's
        string columns name a pool's single-column kernels, e.g. ``gauss(s=1)[age]``.
        ``center=True`` centres a named pool (:func:`resolve_kernels`).

        Landmark fits (docs/math.md §16): ``landmarks`` (row indices of ``X``) makes a pool's
        kernels ``K(X, Z)`` ``(P, N, M)`` (:meth:`KernelPool.fit`); with
        ``kernels="precomputed"``, ``n_landmarks=M`` says that ``X`` is such a block
        ``(P, N, M)`` already (:func:`validate_landmark_block`).
        """
        pool = resolve_kernels(kernels, center=center)
        if pool is None and landmarks is not None:
            raise ValueError(
                "with kernels='precomputed' the estimator cannot choose landmarks: pass the "
                "kernels between the training points and your landmarks, (P, N, M)"
            )
        if pool is None and n_landmarks is not None:
            K, names = validate_landmark_block(X, int(n_landmarks), kernel_names)
        elif pool is None:
            K, names = validate_precomputed(X, kernel_names)
        elif kernel_names is not None:
            raise ValueError(
                "kernel_names is for kernels='precomputed' only: a KernelPool names its own "
                "kernels (set KernelSpec(..., display_name=...) to rename one)"
            )
        else:
            if dtype is not None:
                pool.dtype = dtype
            pool.fit(X, feature_names=feature_names, landmarks=landmarks)
            K, names = pool.train_kernels(), list(pool.names)
        if dtype is not None:
            K = K.astype(dtype, copy=False)
        scale = None
        landmark = landmarks is not None or n_landmarks is not None
        if pool is None and not landmark:  # the largest |diagonal| per kernel; no copy of K
            scale = tuple(float(v) for v in np.abs(np.einsum("pii->pi", K)).max(axis=1))
        return cls(
            pool=pool, names=list(names), n_train=int(K.shape[1]), train_scale=scale,
            n_landmarks=int(K.shape[2]) if landmark else None,
        ), K  # fmt: skip

    @property
    def n_kernels(self) -> int:
        return len(self.names)

    def far_rows(self, X) -> np.ndarray:
        """Indices of the rows of new data ``X`` (raw features, or for precomputed kernels a
        validated cross-kernel stack ``(P, M, N)``) that lie far outside the training data, where
        a prediction extrapolates without meaning (the caller warns).

        Features: a standardised value beyond the training column's range by more than
        :data:`FAR_RANGE_FACTOR` times that range (constant training columns are not judged).
        Precomputed kernels: a row whose largest abs(k(x, x_j)) exceeds :data:`FAR_RANGE_FACTOR`
        times the kernel's largest training diagonal (``train_scale``; not judged for a model
        saved before it was kept).
        """
        if self.pool is not None:
            return self.pool.far_rows(X, FAR_RANGE_FACTOR)
        if self.train_scale is None:
            return np.zeros(0, dtype=int)
        scale = np.asarray(self.train_scale, dtype=np.float64)[:, None]
        X = np.asarray(X)  # finite (cross checked it): max abs(x) without an abs copy of X
        peak = np.maximum(X.max(axis=2), -X.min(axis=2))  # (P, M)
        far = (scale > 0) & (peak > FAR_RANGE_FACTOR * scale)
        return np.flatnonzero(far.any(axis=0))

    @property
    def n_columns(self) -> int:
        """The kernels' columns: the N training points, or the landmarks."""
        return self.n_train if self.n_landmarks is None else self.n_landmarks

    def cross(self, X) -> np.ndarray:
        """Kernel rows between new points and the training points (or the landmarks),
        ``(P, M, N)``."""
        if self.pool is None:
            Kt = np.asarray(X)
            P, N = self.n_kernels, self.n_columns
            if Kt.ndim != 3 or Kt.shape[0] != P or Kt.shape[2] != N:
                cols = "N" if self.n_landmarks is None else "n_landmarks"
                raise ValueError(
                    "with kernels='precomputed', new data must be a kernel stack of shape "
                    f"(P, M, {cols}) = ({P}, M, {N}); got shape {Kt.shape}"
                )
            if not np.all(np.isfinite(Kt)):
                raise ValueError("the precomputed test kernels contain NaN or inf")
            return Kt
        return self.pool.cross_kernels(X)
