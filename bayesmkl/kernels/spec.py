"""Kernel specifications: one base kernel as ``(kind, param, features)`` and its readable name.

:class:`KernelSpec` is a frozen dataclass; :func:`coerce_spec` reads the tuple/dict/callable forms
a :class:`~bayesmkl.kernels.pool.KernelPool` accepts, and :func:`view_columns` the column blocks
of :meth:`KernelPool.views <bayesmkl.kernels.pool.KernelPool.views>`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bayesmkl.kernels import custom

__all__ = [
    "BSVM_WIDTHS",
    "DEFAULT_DEGREES",
    "KINDS",
    "KernelSpec",
    "SIMPLEMKL_WIDTHS",
    "coerce_spec",
    "view_columns",
    "view_specs",
]

KINDS = ("gauss", "poly", "linear")
#: Gaussian widths of the SimpleMKL / BEMKL recipe (BM3KL Table 3): 2^-3, ..., 2^6.
SIMPLEMKL_WIDTHS = tuple(2.0**k for k in range(-3, 7))
#: Gaussian widths of the BM3KL Table 2 pool: 2^-6, ..., 2^6.
BSVM_WIDTHS = tuple(2.0**k for k in range(-6, 7))
#: Polynomial degrees of both recipes.
DEFAULT_DEGREES = (1, 2, 3)


def _fmt_number(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _coerce_features(features):
    if isinstance(features, str):
        if features in ("all", "each"):
            return features
        features = (features,)  # one column, by name
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
            f"features must be 'all', 'each', column indices or column names; got {features!r}"
        ) from None
    if cols and all(isinstance(c, str) for c in cols):
        if len(set(cols)) != len(cols):
            raise ValueError(f"feature names must be distinct; got {list(cols)}")
        return cols
    out = []
    for c in cols:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
            raise ValueError(
                "features must be all column indices or all column names; got "
                f"{c!r} in {features!r}"
            )
        if c < 0:
            raise ValueError(f"feature indices must be >= 0; got {int(c)}")
        out.append(int(c))
    if not out:
        raise ValueError("a kernel needs at least one feature; got an empty feature list")
    if len(set(out)) != len(out):
        raise ValueError(f"feature indices must be distinct; got {out}")
    return tuple(out)


def _features_label(features, feature_names=None) -> str:
    """``x3``, ``x0:76``, ``x0,x5`` ...; with ``feature_names`` (one per column of X) the
    columns' names instead: ``age``, ``age,income``, ``f0,f1,...,f75 (76 cols)``."""
    if isinstance(features, str):
        return features
    if isinstance(features[0], str):  # selected by name
        feature_names, features = np.asarray(features, dtype=object), range(len(features))
    if feature_names is not None:
        names = [str(feature_names[c]) for c in features]
        if len(names) <= 6:
            return ",".join(names)
        return f"{names[0]},{names[1]},...,{names[-1]} ({len(names)} cols)"
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
    features : "all", "each", int, str, slice, sequence of int or sequence of str
        ``"all"`` uses every column; a tuple of column indices uses those columns; column names
        (one string other than ``"all"``/``"each"``, or a sequence of strings) select the
        columns of a DataFrame (or of ``feature_names``) by name when the pool is fitted;
        ``"each"`` is a *template* that a pool expands at fit into one kernel per single
        feature. Stored as ``"all"``, ``"each"``, a tuple of int or a tuple of str.
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
    >>> KernelSpec("gauss", 1, ["mean radius", "mean area"]).name
    'gauss(s=1)[mean radius,mean area]'
    """

    kind: object
    param: object = None
    features: str | tuple[int, ...] | tuple[str, ...] = "all"
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
        return self.name_with()

    def name_with(self, feature_names=None) -> str:
        """:attr:`name`, with the columns named by ``feature_names`` (one string per column of
        X, e.g. a DataFrame's columns) rather than ``x<j>``: ``gauss(s=0.25)[age]``."""
        if self.display_name is not None:
            return self.display_name
        feats = (
            self.label if self.label is not None else _features_label(self.features, feature_names)
        )
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
    def by_name(self) -> bool:
        """True when the columns are given by name (resolved to indices at fit)."""
        return isinstance(self.features, tuple) and isinstance(self.features[0], str)

    def resolved(self, feature_names) -> KernelSpec:
        """This spec with its column names replaced by their indices in ``feature_names``."""
        if not self.by_name:
            return self
        if feature_names is None:
            raise ValueError(
                f"kernel '{self.name}' selects columns by name, but X has no column names: "
                "fit on a DataFrame with distinct string column names (or pass feature_names), "
                "or give column indices"
            )
        index = {str(n): j for j, n in enumerate(feature_names)}
        missing = [c for c in self.features if c not in index]
        if missing:
            shown = ", ".join(repr(str(n)) for n in list(feature_names)[:12])
            more = ", ..." if len(feature_names) > 12 else ""
            raise ValueError(
                f"kernel '{self.name}' selects column(s) {missing} that X does not have "
                f"(its columns: {shown}{more})"
            )
        return replace(self, features=tuple(index[c] for c in self.features))

    @property
    def is_template(self) -> bool:
        """True for ``features="each"`` (expanded to one kernel per feature at fit)."""
        return self.features == "each"

    def expand(self, n_features: int, feature_names=None) -> list[KernelSpec]:
        """Concrete specs for data with ``n_features`` columns (templates give one per column;
        a ``display_name`` gets ``[x<j>]`` appended, or the column's name from
        ``feature_names``); a spec that names its columns gets their indices."""
        if self.by_name:
            return [self.resolved(feature_names)]
        if self.is_template:
            dn = self.display_name
            col = (lambda j: f"x{j}") if feature_names is None else (lambda j: feature_names[j])
            return [
                KernelSpec(self.kind, self.param, (j,),
                           display_name=None if dn is None else f"{dn}[{col(j)}]")
                for j in range(n_features)
            ]  # fmt: skip
        return [self]

    def custom_parts(self) -> tuple[str, object, tuple]:
        """``(family, kernel, params)`` of a custom spec, as :mod:`.custom` evaluates them."""
        return self._family, self.kind, self.param or ()


def coerce_spec(s) -> KernelSpec:
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


def view_columns(blocks: Sequence) -> tuple[list[tuple[int, ...]], int | None]:
    """Column tuples of view ``blocks`` and the feature count they imply.

    ``blocks`` are all block lengths (consecutive blocks; the count is their sum) or all
    column selections (slices with a stop, or index lists; the count is then ``None``).
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
        return cols, int(stops[-1])
    if any(is_len):
        raise ValueError(
            "blocks must be all lengths (ints) or all column selections (slices/index lists)"
        )
    cols = [_coerce_features(b) for b in blocks]
    if any(isinstance(c, str) for c in cols):
        raise ValueError("view blocks must select columns, not 'all'/'each'")
    return cols, None


def view_specs(blocks: Sequence, gauss_widths, poly_degrees, names=None):
    """Specs of :meth:`KernelPool.views <bayesmkl.kernels.pool.KernelPool.views>` and the
    feature count its blocks imply (see :func:`view_columns`): every Gaussian width and
    polynomial degree on each block in turn, labelled with the block's name when given."""
    cols, n_features = view_columns(blocks)
    if names is not None:
        names = [str(n) for n in names]
        if len(names) != len(cols):
            raise ValueError(f"got {len(names)} view names for {len(cols)} blocks")
        if len(set(names)) != len(names):
            raise ValueError(f"view names must be distinct; got {names}")
    fam = [("gauss", w) for w in gauss_widths] + [("poly", d) for d in poly_degrees]
    specs = [
        KernelSpec(k, p, c, label=None if names is None else names[v])
        for v, c in enumerate(cols)
        for k, p in fam
    ]
    return specs, n_features
