"""Validation of estimator input: the parameter-constraint vocabulary (re-exported from
:mod:`bayesmkl.estimators._constraints`) and labels.

Labels: :func:`validate_labels` encodes class labels (refusing one class, a length mismatch and
labels that mix numbers and strings) and :func:`label_codes` finds labels among fitted classes.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.preprocessing import LabelEncoder

from bayesmkl.estimators._constraints import (
    HYPER_BOUNDS,
    HYPER_CONSTRAINTS,
    MAX_TIME,
    NO_VALIDATION,
    Boolean,
    ClassWeight,
    DtypeOptions,
    HyperRange,
    Interval,
    KernelsParam,
    Options,
    check_choice,
    check_hyper,
    check_int,
    check_max_time,
    check_param,
    check_positive,
    is_int,
    validate_params,
)
from bayesmkl.posterior.checks import check_label_types

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
    "check_label_types",
    "check_max_time",
    "check_param",
    "check_positive",
    "is_int",
    "label_codes",
    "validate_labels",
    "validate_params",
]


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
