"""The parameter-constraint vocabulary of every estimator (imports only NumPy, so the command
line reads the parameter tables without importing JAX or scikit-learn).

In the style of scikit-learn's ``_parameter_constraints``: each estimator class declares one
table ``{parameter: [constraint, ...]}``; a value must meet at least one constraint —
:class:`Interval` (real or integer, bounds, inf allowed or not), :class:`Options` (a fixed set of
values), :class:`Boolean`, :class:`HyperRange` (a model hyper-parameter within
:data:`~bayesmkl.model.bounds.HYPER_BOUNDS`; ``eta`` may be a vector), :class:`KernelsParam`
(a named pool, ``"precomputed"`` or a :class:`~bayesmkl.KernelPool`), :class:`ClassWeight`,
:class:`DtypeOptions`, or ``None`` (the value ``None``); :data:`NO_VALIDATION` marks a
parameter checked where it is used (a seed, names). :func:`check_param` raises one
``ValueError`` that names the parameter, what it must be and what it got, e.g. ``"C must be a
finite positive number; got -1"`` (a constraint with a ``refusal`` method words its own);
:func:`validate_params` checks a table against an estimator's attributes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping

import numpy as np

from bayesmkl.model.bounds import HYPER_BOUNDS

__all__ = [
    "HYPER_BOUNDS",
    "HYPER_CONSTRAINTS",
    "MAX_TIME",
    "NO_VALIDATION",
    "Boolean",
    "ClassWeight",
    "DtypeOptions",
    "HyperRange",
    "Interval",
    "KernelsParam",
    "Options",
    "check_choice",
    "check_hyper",
    "check_int",
    "check_max_time",
    "check_param",
    "check_positive",
    "is_int",
    "validate_params",
]

#: The constraint list of a parameter that is checked where it is used (``validate_params``
#: skips it).
NO_VALIDATION = "no_validation"

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
    """One of a fixed set of (hashable, non-boolean) values; ``message`` (with ``{name}``,
    ``{value}`` and ``{values}``) replaces the shared wording of a refusal."""

    def __init__(self, *values, message=None):
        self.values = values
        self.message = message

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, Hashable) and not isinstance(value, bool) and value in self.values

    def __str__(self) -> str:
        return f"one of {self.values}"

    def refusal(self, name, value):
        if self.message is None:
            return None
        return self.message.format(name=name, value=value, values=self.values)


class Boolean:
    """``True`` or ``False`` (NumPy booleans included)."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, bool | np.bool_)

    def __str__(self) -> str:
        return "True or False"


class DtypeOptions:
    """A dtype (or its name) that NumPy reads as one of ``names``."""

    def __init__(self, *names):
        self.values = names

    def is_satisfied_by(self, value) -> bool:
        try:
            return str(np.dtype(value)) in self.values
        except TypeError:
            return False

    def __str__(self) -> str:
        return f"one of {self.values}"


class ClassWeight:
    """``"balanced"`` or a mapping ``{class label: weight}`` (the weights themselves are checked
    against the labels, :func:`bayesmkl.estimators._weights.effective_sample_weight`)."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, Mapping) or (isinstance(value, str) and value == "balanced")

    def __str__(self) -> str:
        return "'balanced' or a dict {class label: weight}"

    def refusal(self, name: str, value) -> str | None:
        if isinstance(value, Mapping):  # a dict's weights are checked where they are used
            return None
        return f"{name} must be None, {self}; got {value!r}"


class KernelsParam:
    """The ``kernels`` of a BM3KL estimator: one of the ``names`` (named pools and
    ``"precomputed"``) or a :class:`~bayesmkl.KernelPool`."""

    def __init__(self, *names):
        self.values = names

    def is_satisfied_by(self, value) -> bool:
        if isinstance(value, str):
            return value in self.values
        from bayesmkl.kernels.pool import KernelPool  # only for a non-string value

        return isinstance(value, KernelPool)

    def __str__(self) -> str:
        return f"one of {self.values} or a bayesmkl.KernelPool"

    def refusal(self, name, value):
        return f"{name}={value!r} is not understood: use {self}"


def _satisfies(value, constraint) -> bool:
    if constraint is None:
        return value is None
    return constraint.is_satisfied_by(value)


def check_param(name: str, value, constraints):
    """Return ``value`` if it meets one of ``constraints`` (``None`` means the value ``None``),
    else raise ``ValueError`` saying what ``name`` must be (in the words of the first
    constraint with a ``refusal`` for it, if any)."""
    if any(_satisfies(value, c) for c in constraints):
        return value
    for c in constraints:
        text = getattr(c, "refusal", lambda *_: None)(name, value)
        if text is not None:
            raise ValueError(text)
    must = " or ".join("None" if c is None else str(c) for c in constraints)
    raise ValueError(f"{name} must be {must}; got {value!r}")


def validate_params(obj, constraints: dict) -> None:
    """Check ``getattr(obj, name)`` against ``constraints[name]`` for every name, in order
    (entries :data:`NO_VALIDATION` are skipped)."""
    for name, allowed in constraints.items():
        if allowed is not NO_VALIDATION:
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


def check_int(name: str, value, minimum: int = 1) -> int:
    """``int(value)`` for an integer ``value ≥ minimum``."""
    check_param(name, value, [Interval("int", minimum, None, closed="left")])
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


class HyperRange:
    """A model hyper-parameter within :data:`HYPER_CONSTRAINTS` (``eta``: also a vector, each
    entry within)."""

    def __init__(self, name: str):
        self.name = name
        self.interval = HYPER_CONSTRAINTS[name][0]

    def is_satisfied_by(self, value) -> bool:
        try:
            check_hyper(self.name, value)
        except ValueError:
            return False
        return True

    def __str__(self) -> str:
        return str(self.interval)

    def refusal(self, name, value):
        try:
            check_hyper(self.name, value, name)
        except ValueError as exc:
            return str(exc)
        return None  # pragma: no cover - only asked about refused values


def check_max_time(max_time) -> float | None:
    """``None`` or ``float(max_time)`` for a positive finite number of seconds."""
    check_param("max_time", max_time, MAX_TIME)
    return None if max_time is None else float(max_time)
