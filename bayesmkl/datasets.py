"""Data loaders: UCI benchmark CSVs (read from a directory, never bundled) and an offline demo set.

The UCI files are plain CSV without header, one sample per row, the class label (integers from
0) in the last column. They are read from one directory: the ``data_dir`` argument when one is
given (a misspelt directory is an error, not a silent fall-back to another copy), otherwise the
directory in the environment variable ``BAYESMKL_DATA``. No other place is searched.

Caveats of two data sets (see :func:`load_uci`):

* **liver** (BUPA liver disorders): the label is the 7th "selector" attribute, which UCI documents
  as a train/test *selector*, not as a diagnosis. The MKL literature (SimpleMKL's "Liver" demo,
  BM3KL Table 3 "Bupaliver") uses it as the binary label, and so do these files; results on it
  say nothing about liver disease.
* **pima** (Pima Indians diabetes): withdrawn from the UCI repository at its owner's request; it
  is kept only to compare with published MKL numbers. Several of its features use 0 for
  "missing" (e.g. blood pressure, BMI).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = [
    "MFEAT_VIEWS",
    "find_uci_dir",
    "load_demo",
    "load_mfeat",
    "load_uci",
    "uci_search_path",
]

ENV_VAR = "BAYESMKL_DATA"
#: The four views of UCI "Multiple Features" available as ``mfeat-<view>.csv``.
MFEAT_VIEWS = ("fou", "fac", "kar", "pix")
_ALIASES = {
    "bupa": "liver",
    "bupaliver": "liver",
    "liver-disorders": "liver",
    "diabetes": "pima",
    "wdbc": "breast",
    "breast-cancer": "breast",
    "statlog-heart": "heart",
}


def uci_search_path(data_dir=None) -> list[tuple[str, Path]]:
    """The directory to read, with a description of its origin: ``data_dir`` when given,
    otherwise ``$BAYESMKL_DATA`` when set, otherwise none.

    Parameters
    ----------
    data_dir : str or Path, optional
        A directory given by the caller.

    Returns
    -------
    list of (str, Path)
        At most one entry.
    """
    if data_dir is not None:
        return [("data_dir argument", Path(data_dir).expanduser())]
    env = os.environ.get(ENV_VAR)
    return [(f"${ENV_VAR}", Path(env).expanduser())] if env else []


def find_uci_dir(data_dir=None) -> Path | None:
    """The UCI data directory (:func:`uci_search_path`) if it exists, or ``None``.

    A directory counts when it exists and holds at least one ``.csv`` file.

    Parameters
    ----------
    data_dir : str or Path, optional
        The directory to check; default ``$BAYESMKL_DATA``.

    Returns
    -------
    Path or None
        Resolved absolute path.
    """
    for _, path in uci_search_path(data_dir):
        if path.is_dir() and any(path.glob("*.csv")):
            return path.resolve()
    return None


def _canonical(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"dataset name must be a non-empty string; got {name!r}")
    key = name.strip().lower()
    if key.endswith(".csv"):
        key = key[:-4]
    if "/" in key or "\\" in key or key.startswith("."):
        raise ValueError(f"dataset name must be a plain name like 'sonar', not a path: {name!r}")
    return _ALIASES.get(key, key)


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    if data.shape[1] < 2:
        raise ValueError(f"{path} has {data.shape[1]} column(s); expected features and a label")
    X, y_raw = data[:, :-1], data[:, -1]
    if not np.all(np.isfinite(y_raw)) or np.any(y_raw != np.round(y_raw)) or np.any(y_raw < 0):
        raise ValueError(f"{path}: the last column must hold integer labels from 0")
    return np.ascontiguousarray(X), y_raw.astype(np.int64)


def load_uci(name: str, data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """Load a UCI benchmark CSV (label in the last column).

    Parameters
    ----------
    name : str
        File stem, e.g. ``"sonar"``, ``"liver"``, ``"ionosphere"``, ``"pima"``, ``"heart"``,
        ``"breast"``, ``"wine"``, ``"glass"``, ``"mfeat-fou"``. Case-insensitive; a ``.csv``
        suffix and the aliases ``bupa``/``bupaliver`` (liver), ``diabetes`` (pima) and ``wdbc``
        (breast) are accepted.
    data_dir : str or Path, optional
        The directory to read from. Default: the directory in ``$BAYESMKL_DATA``.

    Returns
    -------
    X : ndarray, shape (N, d), float64
    y : ndarray, shape (N,), int64
        Class labels, integers from 0.

    Raises
    ------
    FileNotFoundError
        If ``data_dir`` is given and is not a directory, if neither ``data_dir`` nor
        ``$BAYESMKL_DATA`` is given, or if the directory holds no ``<name>.csv``. The message
        names the place searched and, when the data directory exists, the data sets found there.

    Notes
    -----
    * ``liver`` (BUPA): the label is BUPA's 7th "selector" attribute, documented by UCI as a
      train/test selector rather than a class. The MKL literature (SimpleMKL's Liver demo,
      BM3KL's "Bupaliver") uses it as the binary label; these files follow that convention.
      Treat results on it as a benchmark convention, not as a medical task.
    * ``pima`` (Pima Indians diabetes) was withdrawn from UCI by its owner; keep it only to
      compare with published numbers. Zeros in several columns encode missing values.
    * No data file ships with the package.

    Examples
    --------
    >>> X, y = load_uci("sonar")  # doctest: +SKIP
    >>> X.shape, np.bincount(y)  # doctest: +SKIP
    ((208, 60), array([ 97, 111]))
    """
    key = _canonical(name)
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise FileNotFoundError(
            f"data_dir {str(data_dir)!r} is not a directory (a given data_dir is the only place "
            "searched)"
        )
    places = uci_search_path(data_dir)
    for _, d in places:
        path = d / f"{key}.csv"
        if path.is_file():
            return _read_csv(path)
    if not places:
        raise FileNotFoundError(
            f"UCI data set {name!r}: no data directory given. Pass data_dir=..., or set "
            f"${ENV_VAR} to the directory that holds {key}.csv."
        )
    looked = "\n".join(f"  - {d / (key + '.csv')}  ({origin})" for origin, d in places)
    found = find_uci_dir(data_dir)
    if found is not None:
        available = sorted(p.stem for p in found.glob("*.csv"))
        raise FileNotFoundError(
            f"unknown UCI data set {name!r}: no {key}.csv found. Data sets available in "
            f"{found}: {', '.join(available)}.\nPlace searched:\n{looked}"
        )
    raise FileNotFoundError(
        f"UCI data set {name!r} not found: the data directory is missing or holds no CSV. Pass "
        f"data_dir=..., or set ${ENV_VAR}. Place searched:\n{looked}"
    )


def load_mfeat(views=MFEAT_VIEWS, data_dir=None) -> tuple[list[np.ndarray], np.ndarray]:
    """Load views of UCI "Multiple Features" (handwritten digits, 2000 samples, 10 classes).

    Parameters
    ----------
    views : sequence of str, default ("fou", "fac", "kar", "pix")
        View names; file ``mfeat-<view>.csv`` each. Sizes: fou 76, fac 216, kar 64, pix 240.
    data_dir : str or Path, optional
        See :func:`load_uci`.

    Returns
    -------
    Xs : list of ndarray, each shape (2000, d_v)
        Row-aligned views (row i of every view is the same digit).
    y : ndarray, shape (2000,)
        Labels 0..9 (200 each).

    Raises
    ------
    ValueError
        If the views disagree on the number of rows or on the labels.
    FileNotFoundError
        See :func:`load_uci`.

    Examples
    --------
    >>> Xs, y = load_mfeat()  # doctest: +SKIP
    >>> X = np.hstack(Xs); pool = KernelPool.views([x.shape[1] for x in Xs],
    ...                                            names=list(MFEAT_VIEWS))  # doctest: +SKIP
    """
    if isinstance(views, str):
        views = (views,)
    views = tuple(views)
    if not views:
        raise ValueError("load_mfeat needs at least one view")
    Xs, y0 = [], None
    for v in views:
        v = str(v).lower().removeprefix("mfeat-")
        X, y = load_uci(f"mfeat-{v}", data_dir)
        if y0 is not None:
            if y.shape != y0.shape:
                raise ValueError(
                    f"mfeat view {v!r} has {y.shape[0]} rows, but view {views[0]!r} has "
                    f"{y0.shape[0]}"
                )
            if not np.array_equal(y, y0):
                n_bad = int(np.sum(y != y0))
                raise ValueError(
                    f"mfeat view {v!r} disagrees with view {views[0]!r} on {n_bad} labels: the "
                    "views are not row-aligned"
                )
        else:
            y0 = y
        Xs.append(X)
    return Xs, y0


def load_demo() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The offline demo set: Wisconsin diagnostic breast cancer, bundled with scikit-learn.

    Returns
    -------
    X : ndarray, shape (569, 30), float64
    y : ndarray, shape (569,), int64
        scikit-learn's coding: 0 = malignant, 1 = benign.
    feature_names : list of str, length 30
    """
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X = np.asarray(data.data, dtype=np.float64)
    y = np.asarray(data.target, dtype=np.int64)
    return X, y, [str(n) for n in data.feature_names]
