"""Reading the numeric CSV files of the ``bayesmkl`` command (:func:`read_csv`)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

__all__ = ["CSVError", "read_csv"]


class CSVError(ValueError):
    """A CSV file that cannot be read as features (and labels); the message says where."""


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


_MISSING = {"nan", "na", "n/a", "none", "null", "inf", "+inf", "-inf", "infinity", "-infinity"}


def _label_array(labels: list[str], path) -> np.ndarray:
    """The labels as the estimator compares them: numbers when every label is one (integers when
    each is integral, so ``1`` and ``1.0`` are one class), else strings. A missing or non-finite
    label (``nan``, ``inf``, ``NA``, empty) is refused with its line."""
    for i, lab in enumerate(labels):
        if lab == "" or lab.lower() in _MISSING:
            raise CSVError(f"{path}, data row {i + 1}: the label {lab!r} is missing or not finite")
    nums = [_float(s) for s in labels]
    if all(v is not None for v in nums):
        arr = np.asarray(nums, dtype=np.float64)
        if np.all(arr == np.round(arr)) and np.all(np.abs(arr) < 2**53):
            return arr.astype(np.int64)
        return arr
    return np.asarray(labels, dtype=str)


def _label_index(label_col, header, width: int, path) -> int:
    """The column position of the label: ``label_col`` an int (negative counts from the end)
    or a header name; default the last column."""
    if label_col is None:
        return width - 1
    if isinstance(label_col, str) and not label_col.lstrip("-").isdigit():
        if header is None:
            raise CSVError(f"--label-col {label_col!r} names a column, but {path} has no header")
        if label_col not in header:
            raise CSVError(f"{path} has no column {label_col!r} (its columns: {header})")
        return header.index(label_col)
    j = int(label_col)
    if not -width <= j < width:
        raise CSVError(f"--label-col {j} is outside the {width} columns of {path}")
    return j % width


_OTHER_DELIMITERS = (("\t", "tab", r"tr '\t' ','"), (";", "semicolon", "tr ';' ','"))


def _delimiter_hint(rows: list[list[str]]) -> str:
    """A hint when the rows look separated by tabs or semicolons instead of commas."""
    sample = [c for r in rows[:20] for c in r]
    for sep, name, fix in _OTHER_DELIMITERS:
        if sum(sep in c for c in sample) >= max(1, len(rows[:20]) // 2):
            return (
                f" (the file looks {name}-separated, but bayesmkl reads comma-separated "
                f"values: convert it first, e.g. with {fix})"
            )
    return ""


def read_csv(path, has_label: bool = True, label_col=None):
    """Read a numeric CSV, optionally with a header row and a label column.

    A UTF-8 byte-order mark is read as one (not as part of the first field).

    Parameters
    ----------
    path : str or Path
    has_label : bool
        Whether one column holds the label.
    label_col : int or str, optional
        That column: its position (0-based; negative counts from the end) or its header name;
        default the last column.

    Returns
    -------
    X : ndarray (N, d), float64
    y : ndarray (N,) or None
        Numeric labels when all labels are numbers (integers when all are integral: ``1`` and
        ``1.0`` are one class), else strings; missing or non-finite labels are refused.
    header : list of str or None

    Raises
    ------
    CSVError
        Missing file, empty file, ragged rows, non-numeric or non-finite features.
    """
    path = Path(path)
    if not path.is_file():
        raise CSVError(f"no such file: {path}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CSVError(f"cannot read {path} as CSV: {exc}") from None
    if not rows:
        raise CSVError(f"{path} is empty")
    rows = [[c.strip() for c in r] for r in rows]
    hint = _delimiter_hint(rows)
    width0 = len(rows[0])
    header = None
    # a header row: a field that is no number where the data rows have numbers (the label
    # column may hold words in every row, so it does not decide)
    lab0 = _label_index(label_col, None, width0, path) if has_label and not (
        isinstance(label_col, str) and not label_col.lstrip("-").isdigit()
    ) else None  # fmt: skip
    first_features = [c for j, c in enumerate(rows[0]) if j != lab0] or rows[0]
    if any(_float(c) is None for c in first_features) or (
        has_label and lab0 is None  # a label named by its header: the first row is the header
    ):
        header, rows = rows[0], rows[1:]
        if not rows:
            raise CSVError(f"{path} has a header but no data rows")
    width = len(header) if header is not None else len(rows[0])
    if has_label and width < 2:
        raise CSVError(f"{path} has {width} column(s); expected features and a label column{hint}")
    lab = _label_index(label_col, header, width, path) if has_label else None
    values = []
    for i, r in enumerate(rows):
        line = i + 1 + (header is not None)
        if len(r) != width:
            raise CSVError(f"{path}, line {line}: {len(r)} fields, expected {width}{hint}")
        nums = []
        for j, c in enumerate(r):
            if j == lab:
                continue
            v = _float(c)
            if v is None or not np.isfinite(v):
                words = lab is not None and j == 0 and _float(r[lab]) is not None
                more = " (if the first column is the label, pass --label-col 0)" if words else ""
                raise CSVError(
                    f"{path}, line {line}, column {j + 1}: {c!r} is not a finite number{more}{hint}"
                )
            nums.append(v)
        values.append(nums)
    X = np.asarray(values, dtype=np.float64)
    y = _label_array([r[lab] for r in rows], path) if has_label else None
    return X, y, header
