"""One validation vocabulary for every estimator: parameter constraints, labels, signed targets.

Parameters are checked against constraints in the style of scikit-learn's
``_parameter_constraints``: a list per parameter, of which the value must meet at least one —
:class:`Interval` (real or integer, bounds, inf allowed or not), :class:`Options` (a fixed set of
values) or ``None`` (the value ``None``). :func:`check_param` raises one ``ValueError`` that names
the parameter, what it must be and what it got, e.g. ``"C must be a finite positive number; got
-1"``; :func:`validate_params` checks a dict of constraints against an estimator's attributes.
The helpers :func:`check_positive`, :func:`check_int` and :func:`check_choice` are the common
single-constraint cases.

Labels: :func:`validate_labels` encodes class labels (refusing one class, a length mismatch and
labels that mix numbers and strings) and :func:`signed_targets` turns class codes into the ±1
targets ``(C, N)`` of the one-vs-rest problems
(:func:`bayesmkl.model.classification.signed_targets`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable

import numpy as np
from sklearn.preprocessing import LabelEncoder

from bayesmkl.model.bounds import HYPER_BOUNDS
from bayesmkl.model.classification import signed_targets
from bayesmkl.posterior.checks import check_label_types

__all__ = [
    "HYPER_BOUNDS",
    "HYPER_CONSTRAINTS",
    "MAX_TIME",
    "Interval",
    "Options",
    "check_choice",
    "check_hyper",
    "check_int",
    "check_label_types",
    "check_max_time",
    "check_param",
    "check_positive",
    "is_int",
    "label_codes",
    "signed_targets",
    "validate_labels",
    "validate_params",
]

_CLOSED = ("both", "left", "right", "neither")


class Interval:
    """Real or integer values between ``left`` and ``right`` (``None``: unbounded).

    Parameters
    ----------
    kind : {"real", "int"}
        ``"real"``: any real number (``bool`` excluded); ``"int"``: integers only.
    left, right : float or None
        Bounds.
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds belong to the interval.
    allow_inf : bool, default False
        Accept ``±inf`` (when inside the bounds); otherwise real values must be finite.
    description : str, optional
        Replaces the generated description in error messages.
    """

    def __init__(
        self, kind, left=None, right=None, *, closed="both", allow_inf=False, description=None
    ):
        if kind not in ("real", "int") or closed not in _CLOSED:
            raise ValueError(f"bad Interval({kind!r}, closed={closed!r})")
        self.kind, self.left, self.right = kind, left, right
        self.closed, self.allow_inf, self.description = closed, allow_inf, description

    def is_satisfied_by(self, value) -> bool:
        kind = numbers.Integral if self.kind == "int" else numbers.Real
        if not isinstance(value, kind) or isinstance(value, bool):
            return False
        if math.isnan(value) or (math.isinf(value) and not self.allow_inf):
            return False
        if self.left is not None:
            if value < self.left or (value == self.left and self.closed in ("right", "neither")):
                return False
        if self.right is not None:
            if value > self.right or (value == self.right and self.closed in ("left", "neither")):
                return False
        return True

    def __str__(self) -> str:
        if self.description is not None:
            return self.description
        noun = "an integer" if self.kind == "int" else "a number"
        lo, hi = self.left, self.right
        if hi is None and lo == 0 and self.kind == "real":
            sign = "positive" if self.closed in ("right", "neither") else "non-negative"
            text = f"a {sign} number" if self.allow_inf else f"a finite {sign} number"
        elif hi is None and lo is not None:
            text = f"{noun} {'>=' if self.closed in ('both', 'left') else '>'} {lo}"
        elif lo is None and hi is not None:
            text = f"{noun} {'<=' if self.closed in ('both', 'right') else '<'} {hi}"
        elif lo is None:
            text = noun
        else:
            br = ("[" if self.closed in ("both", "left") else "(") + f"{lo}, {hi}"
            text = f"{noun} in {br}{']' if self.closed in ('both', 'right') else ')'}"
        return text + (" (inf allowed)" if self.allow_inf else "")


class Options:
    """One of a fixed set of (hashable, non-boolean) values."""

    def __init__(self, *values):
        self.values = values

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, Hashable) and not isinstance(value, bool) and value in self.values

    def __str__(self) -> str:
        return f"one of {self.values}"


def _satisfies(value, constraint) -> bool:
    if constraint is None:
        return value is None
    return constraint.is_satisfied_by(value)


def check_param(name: str, value, constraints):
    """Return ``value`` if it meets one of ``constraints`` (``None`` means the value ``None``),
    else raise ``ValueError`` saying what ``name`` must be."""
    if any(_satisfies(value, c) for c in constraints):
        return value
    must = " or ".join("None" if c is None else str(c) for c in constraints)
    raise ValueError(f"{name} must be {must}; got {value!r}")


def validate_params(obj, constraints: dict) -> None:
    """Check ``getattr(obj, name)`` against ``constraints[name]`` for every name, in order."""
    for name, allowed in constraints.items():
        check_param(name, getattr(obj, name), allowed)


# ---------------------------------------------------------------------------------------------
# the common single-constraint cases
# ---------------------------------------------------------------------------------------------


def check_positive(name: str, value, *, allow_zero: bool = False, allow_inf: bool = False):
    """``float(value)`` for a real ``value > 0`` (``≥ 0`` with ``allow_zero``), finite unless
    ``allow_inf``."""
    closed = "left" if allow_zero else "neither"
    check_param(name, value, [Interval("real", 0, None, closed=closed, allow_inf=allow_inf)])
    return float(value)


def is_int(value, minimum: int) -> bool:
    """Whether ``value`` is an integer (not a bool) ``≥ minimum``."""
    return Interval("int", minimum, None, closed="left").is_satisfied_by(value)


def check_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """``int(value)`` for an integer ``minimum ≤ value`` (``≤ maximum`` when given)."""
    closed = "left" if maximum is None else "both"
    check_param(name, value, [Interval("int", minimum, maximum, closed=closed)])
    return int(value)


def check_choice(name: str, value, options):
    """``value`` if it is one of ``options``."""
    return check_param(name, value, [Options(*options)])


#: A wall-clock budget: ``None`` or a positive finite number of seconds.
MAX_TIME = [
    None,
    Interval("real", 0, None, closed="neither", description="a positive number of seconds"),
]


#: The model hyper-parameters' constraints: the closed ranges of
#: :data:`bayesmkl.model.bounds.HYPER_BOUNDS`, where the sampler's float64 arithmetic stays finite.
HYPER_CONSTRAINTS = {
    name: [
        Interval(
            "real", lo, hi,
            description=f"a number in [{lo:g}, {hi:g}] (the range where the sampler's "
            "arithmetic stays finite)",
        )
    ]
    for name, (lo, hi) in HYPER_BOUNDS.items()
}  # fmt: skip


def check_hyper(name: str, value, label: str | None = None):
    """Refuse a hyper-parameter outside :data:`HYPER_CONSTRAINTS` (``ValueError``); ``eta`` may
    be a vector, each entry checked. ``label`` names it in the message (default ``name``)."""
    label = name if label is None else label
    if name == "eta" and not isinstance(value, numbers.Real):
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.ndim == 0:
            return check_param(label, float(arr), HYPER_CONSTRAINTS[name])
        if arr is None or arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{label} must be a number or a vector of numbers; got {value!r}")
        for v in arr.tolist():
            if not HYPER_CONSTRAINTS[name][0].is_satisfied_by(v):
                check_param(f"every entry of {label}", v, HYPER_CONSTRAINTS[name])
        return value
    return check_param(label, value, HYPER_CONSTRAINTS[name])


def check_max_time(max_time) -> float | None:
    """``None`` or ``float(max_time)`` for a positive finite number of seconds."""
    check_param("max_time", max_time, MAX_TIME)
    return None if max_time is None else float(max_time)


# ---------------------------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------------------------


def validate_labels(y, n_samples: int):
    """Encode labels; return ``(classes, codes)``; refuse one class, a length mismatch or labels
    that mix numbers and strings."""
    check_label_types(y)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional; got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(
            f"X and y have different lengths: {n_samples} samples in X, {y.shape[0]} labels in y"
        )
    enc = LabelEncoder().fit(y)
    if len(enc.classes_) < 2:
        raise ValueError(
            f"y has a single class ({enc.classes_[0]!r}); a classifier needs at least two"
        )
    return enc.classes_, enc.transform(y)


def _as_numbers(values) -> np.ndarray | None:
    """``values`` as float64 when every one is a real number or a text that reads as one."""
    out = []
    for v in np.asarray(values, dtype=object).ravel():
        if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real | str | np.str_):
            return None
        try:
            out.append(float(v))
        except ValueError:
            return None
    return np.asarray(out, dtype=np.float64)


def label_codes(y, classes, what: str = "y") -> np.ndarray:
    """Positions of the labels ``y`` in ``classes`` (a fitted ``classes_``), as the estimator
    compares labels: numbers as numbers, also when one side was read as text (``"1.0"``, ``1``
    and ``1.0`` are one label), anything else as text.

    Raises
    ------
    ValueError
        When a label of ``y`` is not among ``classes``; the message names it and counts its rows.
    """
    y = np.asarray(y).ravel()
    classes = np.asarray(classes).ravel()
    ny, nc = _as_numbers(y), _as_numbers(classes)
    if ny is not None and nc is not None:
        keys_y, keys_c = ny.tolist(), nc.tolist()
    else:
        keys_y, keys_c = [str(v) for v in y], [str(v) for v in classes]
    index = {k: i for i, k in enumerate(keys_c)}
    codes = np.asarray([index.get(k, -1) for k in keys_y], dtype=np.int64)
    if np.any(codes < 0):
        unknown, counts = np.unique(y[codes < 0].astype(str), return_counts=True)
        pairs = zip(unknown[:10].tolist(), counts[:10].tolist(), strict=True)
        listed = ", ".join(f"{u!r} ({c} row{'s' if c > 1 else ''})" for u, c in pairs)
        more = f" and {unknown.size - 10} more" if unknown.size > 10 else ""
        raise ValueError(
            f"{what} has label(s) that are not among the fitted classes "
            f"{classes.tolist()}: {listed}{more}"
        )
    return codes
