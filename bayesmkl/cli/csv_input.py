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


def _label_array(labels: list[str]) -> np.ndarray:
    """Integer labels when every label is an integer, else strings."""
    try:
        ints = [int(s) for s in labels]
        return np.asarray(ints, dtype=np.int64)
    except ValueError:
        return np.asarray(labels, dtype=str)


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


def read_csv(path, has_label: bool = True):
    """Read a numeric CSV, optionally with a header row and a label in the last column.

    Parameters
    ----------
    path : str or Path
    has_label : bool
        Whether the last column holds the label.

    Returns
    -------
    X : ndarray (N, d), float64
    y : ndarray (N,) or None
        Integer labels when all labels are integers, else strings.
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
        with path.open(newline="") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CSVError(f"cannot read {path} as CSV: {exc}") from None
    if not rows:
        raise CSVError(f"{path} is empty")
    rows = [[c.strip() for c in r] for r in rows]
    hint = _delimiter_hint(rows)
    n_feat = len(rows[0]) - (1 if has_label else 0)
    header = None
    first_features = rows[0][:n_feat] if n_feat > 0 else rows[0]
    if any(_float(c) is None for c in first_features):
        header, rows = rows[0], rows[1:]
        if not rows:
            raise CSVError(f"{path} has a header but no data rows")
    width = len(header) if header is not None else len(rows[0])
    if has_label and width < 2:
        raise CSVError(f"{path} has {width} column(s); expected features and a label column{hint}")
    values = []
    for i, r in enumerate(rows):
        line = i + 1 + (header is not None)
        if len(r) != width:
            raise CSVError(f"{path}, line {line}: {len(r)} fields, expected {width}{hint}")
        feats = r[: width - 1] if has_label else r
        nums = []
        for j, c in enumerate(feats):
            v = _float(c)
            if v is None or not np.isfinite(v):
                raise CSVError(
                    f"{path}, line {line}, column {j + 1}: {c!r} is not a finite number{hint}"
                )
            nums.append(v)
        values.append(nums)
    X = np.asarray(values, dtype=np.float64)
    y = _label_array([r[-1] for r in rows]) if has_label else None
    if has_label and any(lab == "" for lab in (r[-1] for r in rows)):
        raise CSVError(f"{path}: some rows have an empty label")
    return X, y, header
