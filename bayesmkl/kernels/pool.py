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

Preprocessing order (docs/math.md §7.2): standardise features with training mean/sd -> base kernel
-> centre with training statistics (``center=True``) -> unit-diagonal normalisation
(``normalize=True``) -> cast to ``dtype``. Everything is computed in float64.

Custom kernels (user callables, scikit-learn GP kernel objects, ``pairwise_kernels`` names) are
specs too; they are evaluated one by one in NumPy and share the same preprocessing (see
:mod:`bayesmkl.kernels.custom`).

Where things live: :mod:`.spec` (:class:`KernelSpec`, the named recipes' widths and degrees),
:mod:`._compute` (grouping, chunking, the jitted block), :mod:`._checks` (input, finiteness,
memory), :mod:`.precomputed` (:func:`validate_precomputed`); public names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from bayesmkl.config import with_x64
from bayesmkl.kernels._checks import (
    MEMORY_LIMIT_ENV,
    KernelMemoryError,
    NotFittedError,
    check_kernel_memory,
    check_poly_offset,
    check_spec_features,
    check_storage_dtype,
    check_X,
    feature_names_of,
    kernel_memory_limit,
)
from bayesmkl.kernels._compute import compute_kernels, standardise, training_row_means
from bayesmkl.kernels.precomputed import PSD_RTOL, validate_precomputed
from bayesmkl.kernels.spec import (
    BSVM_WIDTHS,
    DEFAULT_DEGREES,
    KINDS,
    SIMPLEMKL_WIDTHS,
    KernelSpec,
    coerce_spec,
    view_specs,
)

__all__ = [
    "BSVM_WIDTHS",
    "DEFAULT_DEGREES",
    "KINDS",
    "MEMORY_LIMIT_ENV",
    "KernelMemoryError",
    "KernelPool",
    "KernelSpec",
    "NotFittedError",
    "PSD_RTOL",
    "check_kernel_memory",
    "kernel_memory_limit",
    "SIMPLEMKL_WIDTHS",
    "validate_precomputed",
]

#: The fitted statistics of a pool (see :meth:`KernelPool.fit`); ``None`` where unused.
FITTED_ARRAYS = ("X_fit_", "mean_", "scale_", "row_means_", "grand_means_", "landmarks_")


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
        Centre in feature space with training statistics (docs/math.md §7.2), before normalisation:
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
    feature_names_in_ : ndarray of str or None
        Column names (see :meth:`fit`), which then name the kernels: ``gauss(s=1)[age]``.
    mean_, scale_ : ndarray, shape (d,), or None
        Standardisation statistics (None when ``standardize=False``).
    X_fit_ : ndarray, shape (N, d)
        The standardised training points (needed for cross kernels).
    row_means_, grand_means_ : ndarray, shapes (P, N) and (P,), or None
        Training centring statistics ``K 1/N`` and ``1^T K 1/N^2`` of the uncentred kernels
        (only when ``center=True``); with landmarks those of the landmarks, shapes (P, M) and
        (P,).
    landmarks_ : ndarray of int, shape (M,), or None
        The training rows that are the kernels' columns (the landmarks of the landmark model,
        docs/math.md §16), set by ``fit(X, landmarks=...)``; ``None``: every training point.

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
        self.recipe = tuple(coerce_spec(s) for s in specs)
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
        specs, n_features = view_specs(blocks, gauss_widths, poly_degrees, names)
        if n_features is not None:
            options.setdefault("n_features", n_features)
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
        """The concrete specs in pool order (recipes, and specs that select columns by name:
        available after :meth:`fit`)."""
        by_name = any(s.by_name for s in self.recipe)
        if not (self.is_recipe or by_name):
            return list(self.recipe)
        if not self.is_fitted:
            if not self.is_recipe:
                raise NotFittedError(
                    "this pool selects columns by name: they are found among X's columns at "
                    "fit(X); call fit(X) first"
                )
            raise NotFittedError(
                f"this pool is a recipe ({self._recipe_summary()}): it is expanded to one "
                "kernel per feature at fit(X), so its kernels, names and length are unknown "
                "until then; call fit(X) first"
            )
        d, names = self.n_features_in_, getattr(self, "feature_names_in_", None)
        return [e for s in self.recipe for e in s.expand(d, names)]

    @property
    def names(self) -> list[str]:
        """Readable kernel names in pool order, e.g. ``['gauss(s=0.125)[all]', ...]``."""
        return [s.name_with(getattr(self, "feature_names_in_", None)) for s in self.specs]

    def __len__(self) -> int:
        if not self.is_recipe:  # one kernel a spec, whether its columns are named or not
            return len(self.recipe)
        if self.is_fitted:
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
        return check_storage_dtype(self.dtype)

    def _check_options(self):
        check_storage_dtype(self.dtype)
        check_poly_offset(self.poly_offset)

    @with_x64
    def fit(self, X, feature_names=None, landmarks=None) -> KernelPool:
        """Learn the training statistics from ``X``.

        Parameters
        ----------
        X : array or DataFrame, shape (N, d)
            Training features (finite). String column names of a DataFrame name the kernels.
        feature_names : sequence of str, optional
            Column names for an array ``X`` (used when they are d distinct strings).
        landmarks : array of int, shape (M,), optional
            Distinct rows of ``X`` that become the kernels' columns (the landmark model,
            docs/math.md §16): :meth:`train_kernels` is then ``K(X, Z)`` ``(P, N, M)`` and
            :meth:`cross_kernels` ``K(X_new, Z)``. The standardisation statistics still come
            from all of ``X``; the centring statistics (``center=True``) from the landmarks
            (the kernels are centred at the landmarks' mean in feature space).

        Returns
        -------
        self
        """
        self._check_options()
        X, raw = check_X(X, "X"), X
        N, d = X.shape
        if self.n_features is not None and d != self.n_features:
            raise ValueError(
                f"this pool expects {self.n_features} features (its view blocks cover "
                f"{self.n_features} columns), but X has {d}"
            )
        names = feature_names_of(raw, d, feature_names)
        specs = [e for s in self.recipe for e in s.expand(d, names)]
        check_spec_features(specs, d)
        if landmarks is not None:
            landmarks = check_landmark_rows(landmarks, N)
        for attr in (*FITTED_ARRAYS, "n_features_in_", "_fit_signature"):
            self.__dict__.pop(attr, None)
        mean, sd, Xs = standardise(X) if self.standardize else (None, None, X.copy())
        cols = Xs if landmarks is None else Xs[landmarks]
        row_means = training_row_means(
            specs, cols, poly_offset=float(self.poly_offset), center=bool(self.center)
        )
        grand = None if row_means is None else row_means.mean(axis=1)
        self.mean_, self.scale_ = mean, sd
        self.row_means_, self.grand_means_ = row_means, grand
        self.n_features_in_, self.feature_names_in_ = d, names
        self.X_fit_ = Xs
        self.landmarks_ = landmarks
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

    def restore_fitted(self, n_features_in: int, feature_names_in=None, **arrays) -> KernelPool:
        """Set the fitted statistics of a saved pool instead of refitting it (used by
        :func:`bayesmkl.io.pool_from_state`): ``n_features_in``, ``feature_names_in`` and the
        arrays in :data:`FITTED_ARRAYS` (``X_fit_`` required, the others default to ``None``)."""
        unknown = set(arrays) - set(FITTED_ARRAYS)
        if unknown:
            raise ValueError(f"unknown fitted arrays {sorted(unknown)}; known: {FITTED_ARRAYS}")
        if arrays.get("X_fit_") is None:
            raise ValueError("restore_fitted needs the standardised training points X_fit_")
        if arrays.get("landmarks_") is not None:
            arrays = {**arrays, "landmarks_": check_landmark_rows(
                arrays["landmarks_"], np.shape(arrays["X_fit_"])[0])}  # fmt: skip
        for attr in FITTED_ARRAYS:
            setattr(self, attr, arrays.get(attr))
        self.n_features_in_ = int(n_features_in)
        self.feature_names_in_ = feature_names_of(None, self.n_features_in_, feature_names_in)
        self._fit_signature = self._signature()
        return self

    def _transform(self, X) -> np.ndarray:
        if self.standardize:
            return (X - self.mean_) / self.scale_
        return X

    @property
    def n_columns(self) -> int:
        """The kernels' columns: N training points, or the M landmarks."""
        self._require_fitted()
        return int(self._columns().shape[0])

    def landmark_points(self) -> np.ndarray | None:
        """The landmarks ``(M, d)`` in input space (their standardised rows mapped back with
        ``mean_`` and ``scale_``, so equal to the training rows up to rounding), or ``None``
        without landmarks."""
        self._require_fitted()
        lm = getattr(self, "landmarks_", None)
        if lm is None:
            return None
        Z = self.X_fit_[lm]
        return Z * self.scale_ + self.mean_ if self.standardize else Z.copy()

    def _columns(self) -> np.ndarray:
        """The standardised points of the kernels' columns: ``X_fit_`` or its landmark rows."""
        lm = getattr(self, "landmarks_", None)
        return self.X_fit_ if lm is None else self.X_fit_[lm]

    @with_x64
    def train_kernels(self) -> np.ndarray:
        """Training kernels.

        Returns
        -------
        K : ndarray, shape (P, N, N), dtype ``self.dtype``
            Symmetric, PSD, with unit diagonal when ``normalize=True``. With landmarks
            (``fit(X, landmarks=...)``): ``K(X, Z)`` of shape (P, N, M).
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
            ``cross_kernels(X_train)`` equals :meth:`train_kernels`. With landmarks the
            columns are the landmarks: shape (P, M, n_landmarks).
        """
        self._require_fitted()
        Xnew = check_X(Xnew, "Xnew")
        if Xnew.shape[1] != self.n_features_in_:
            raise ValueError(
                f"Xnew has {Xnew.shape[1]} features, but the pool was fitted with "
                f"{self.n_features_in_} features"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            Xs = self._transform(Xnew)
        return self._kernels(Xs, "Xnew")

    def far_rows(self, Xnew, factor: float) -> np.ndarray:
        """Indices of the rows of raw ``Xnew (M, d)`` with a standardised value beyond its
        training column's range by more than ``factor`` times that range (columns constant in
        training are not judged)."""
        self._require_fitted()
        with np.errstate(over="ignore", invalid="ignore"):
            Xs = self._transform(np.asarray(Xnew, dtype=np.float64))
            lo, hi = self.X_fit_.min(axis=0), self.X_fit_.max(axis=0)
            width = hi - lo
            beyond = np.maximum(lo - Xs, Xs - hi)
            far = (width > 0) & (beyond > factor * width)
        return np.flatnonzero(far.any(axis=1))

    def _kernels(self, Xrows: np.ndarray, what: str = "training") -> np.ndarray:
        return compute_kernels(
            self.specs,
            Xrows,
            self._columns(),
            out_dtype=self._out_dtype(),
            poly_offset=float(self.poly_offset),
            center=bool(self.center),
            normalize=bool(self.normalize),
            row_means=self.row_means_,
            grand_means=self.grand_means_,
            what=what,
        )


def check_landmark_rows(landmarks, n: int) -> np.ndarray:
    """``landmarks`` as distinct row indices ``(M,)`` into ``n`` training rows (``ValueError``
    otherwise)."""
    idx = np.asarray(landmarks)
    if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(
            f"landmarks must be a non-empty 1-d array of row indices; got {idx.dtype} array of "
            f"shape {idx.shape}"
        )
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"landmark rows must lie in [0, {n}); got {idx.min()}..{idx.max()}")
    if np.unique(idx).size != idx.size:
        raise ValueError("landmark rows must be distinct")
    return idx.astype(np.int64)
