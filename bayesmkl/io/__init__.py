"""Save and load fitted :class:`~bayesmkl.BM3KLClassifier` and :class:`~bayesmkl.BM3KLRegressor`
objects as one netCDF file.

Layout (written with the ``h5netcdf`` engine; readable by ``arviz``/``xarray.open_datatree``):

* the groups of the estimator's ``to_datatree``: ``posterior``, ``sample_stats``,
  ``observed_data`` (and ``log_likelihood``);
* ``kernel_pool`` (absent for ``kernels="precomputed"``): the fitted pool's arrays
  ``X_fit (train_obs, feature)`` (standardised training points, needed for cross kernels),
  ``mean``/``scale`` ``(feature,)`` and, for centred pools, ``row_means (kernel, train_obs)``
  and ``grand_means (kernel,)``; a landmark fit's (docs/math.md §16) ``landmarks
  (landmark,)``, the landmarks' training rows (its ``row_means`` are ``(kernel, landmark)``);
* root attributes ``bayesmkl_params`` (the constructor parameters, JSON),
  ``bayesmkl_state`` (the estimator's class name, kernel names, pool recipe and options, seed,
  the run report (``run_report_``: converged or not, what stopped the run, R-hat, ESS);
  the classifier's classes and calibration map, or the regressor's standardisation of y and κ;
  JSON) and
  ``bayesmkl_format``.

Draws and pool arrays are float64 and round-trip bitwise, so predictions after loading
(:meth:`BM3KLClassifier.load`, which calls :func:`read` and sets the fitted state) equal those
before :func:`save`. This module reads and writes parameters and state; it never imports the
estimator. No pickle is used: a file cannot run code when loaded.

Integrity (format 2): after writing, the SHA-256 of the stored bytes of every HDF5 dataset
(every array and coordinate of every group) and of the two JSON attributes is recorded in the
root attribute ``bayesmkl_sha256``; :func:`read` recomputes them before decoding anything and
raises a ``ValueError`` naming the file and the arrays when one differs, so a flipped byte in
the draws or the pool can never change predictions silently. :func:`save` refuses draws that
are not finite, and :func:`read` refuses them too (files written before the checks existed).
The file is built in memory, written to a new temporary file (``tempfile.mkstemp``: never a
planted file or symlink) and renamed, so a failed save (a full disk) raises an ``OSError`` naming
the file and leaves no partial file and the previous one intact. :func:`read` refuses formats
newer than :data:`FORMAT_VERSION`, parameters this version does not know, files without
checksums (unless ``verify=False``) and attributes that would make xarray rescale an array.
"""

from __future__ import annotations

import contextlib
import io as _bytes_io
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

from bayesmkl.io._integrity import (
    check_file_format as _check_file_format,
)
from bayesmkl.io._integrity import (
    one_line as _one_line,
)
from bayesmkl.io._integrity import (
    refuse_nonfinite as _refuse_nonfinite,
)
from bayesmkl.io._integrity import (
    verify_checksums as _verify_checksums,
)
from bayesmkl.io._integrity import (
    write_checksums as _write_checksums,
)
from bayesmkl.kernels.input import KernelInput
from bayesmkl.kernels.pool import KernelPool, KernelSpec
from bayesmkl.posterior import diagnostics
from bayesmkl.sampler.runlength import RunReport

__all__ = ["FORMAT_VERSION", "pool_from_state", "pool_to_state", "read", "save", "saved_estimator"]

FORMAT_VERSION = 2
CLASSIFIER, REGRESSOR = "BM3KLClassifier", "BM3KLRegressor"
_POOL_ARRAYS = {
    "X_fit_": ("X_fit", ("train_obs", "feature")),
    "mean_": ("mean", ("feature",)),
    "scale_": ("scale", ("feature",)),
    "row_means_": ("row_means", ("kernel", "train_obs")),
    "grand_means_": ("grand_means", ("kernel",)),
    "landmarks_": ("landmarks", ("landmark",)),
}


def _pool_dims(attr: str, arrays: dict) -> tuple:
    """The netCDF dimensions of the pool array ``attr``: a landmark pool's centring statistics
    run over its landmarks, not the training points."""
    if attr == "row_means_" and "landmarks_" in arrays:
        return ("kernel", "landmark")
    return _POOL_ARRAYS[attr][1]


# ----------------------------------------------------------------------------------------
# kernel pools
# ----------------------------------------------------------------------------------------


def _spec_to_json(s: KernelSpec) -> dict:
    feats = s.features if isinstance(s.features, str) else list(s.features)
    if s.family in ("callable", "sklearn"):
        raise ValueError(
            f"kernel '{s.name}' is a user callable or a scikit-learn kernel object, which a "
            "netCDF file cannot hold (and loading must not run code); save the estimator with "
            "pickle/joblib instead, or use a pairwise kernel name such as ('rbf', {'gamma': g})"
        )
    param = dict(s.param) if s.family == "pairwise" else s.param
    return {
        "kind": s.kind,
        "param": param,
        "features": feats,
        "label": s.label,
        "display_name": s.display_name,
    }


def pool_to_state(pool: KernelPool) -> tuple[dict, dict]:
    """Split a (fitted or unfitted) pool into JSON-able options and its arrays.

    Returns
    -------
    meta : dict
        ``recipe`` (list of spec dicts) and the options ``standardize, normalize, center,
        dtype, poly_offset, n_features``, plus ``n_features_in`` and ``feature_names_in``
        (column names that name the kernels, or ``None``) when fitted.
    arrays : dict of str → ndarray
        The fitted statistics (empty for an unfitted pool).
    """
    meta = {
        "recipe": [_spec_to_json(s) for s in pool.recipe],
        "standardize": bool(pool.standardize),
        "normalize": bool(pool.normalize),
        "center": bool(pool.center),
        "dtype": np.dtype(pool.dtype).name,
        "poly_offset": float(pool.poly_offset),
        "n_features": None if pool.n_features is None else int(pool.n_features),
    }
    arrays = {}
    if pool.is_fitted:
        meta["n_features_in"] = int(pool.n_features_in_)
        names = getattr(pool, "feature_names_in_", None)
        meta["feature_names_in"] = None if names is None else [str(n) for n in names]
        for attr in _POOL_ARRAYS:
            value = getattr(pool, attr, None)
            if value is not None:
                arrays[attr] = np.asarray(value)
    return meta, arrays


def pool_from_state(meta: dict, arrays: dict | None = None) -> KernelPool:
    """Rebuild a pool from :func:`pool_to_state` output (fitted when ``arrays`` are given).

    Notes
    -----
    The fitted state is restored by :meth:`KernelPool.restore_fitted`, without refitting.
    """
    specs = [
        KernelSpec(d["kind"], d["param"],
                   d["features"] if isinstance(d["features"], str) else tuple(d["features"]),
                   d.get("label"), d.get("display_name"))
        for d in meta["recipe"]
    ]  # fmt: skip
    pool = KernelPool(
        specs,
        standardize=meta["standardize"],
        normalize=meta["normalize"],
        center=meta["center"],
        dtype=np.dtype(meta["dtype"]),
        poly_offset=meta["poly_offset"],
        n_features=meta["n_features"],
    )
    if arrays:
        pool.restore_fitted(
            int(meta["n_features_in"]), meta.get("feature_names_in"),  # absent in older files
            **{attr: arrays.get(attr) for attr in _POOL_ARRAYS},
        )  # fmt: skip
    return pool


# ----------------------------------------------------------------------------------------
# JSON helpers
# ----------------------------------------------------------------------------------------


def _params_to_json(params: dict) -> dict:
    out = {}
    for name, value in params.items():
        if name == "kernels" and isinstance(value, KernelPool):
            value = {"KernelPool": pool_to_state(value)[0]}
        elif name == "random_state" and not (value is None or isinstance(value, int | np.integer)):
            value = None  # generators are not stored; the seed used is in the state
        elif name == "kernel_names" and value is not None:
            value = [str(v) for v in value]
        elif name == "class_weight" and isinstance(value, dict):
            # JSON keys are strings: keep the label type by storing (label, weight) pairs
            value = {"items": [[_plain(k), float(v)] for k, v in value.items()]}
        elif isinstance(value, np.ndarray | list | tuple):
            value = np.asarray(value, dtype=float).tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        out[name] = value
    return out


def _params_from_json(params: dict) -> dict:
    params = dict(params)
    k = params.get("kernels")
    if isinstance(k, dict) and "KernelPool" in k:
        params["kernels"] = pool_from_state(k["KernelPool"])
    cw = params.get("class_weight")
    if isinstance(cw, dict) and "items" in cw:
        params["class_weight"] = {k: v for k, v in cw["items"]}
    return params


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _labels_to_json(labels: np.ndarray) -> dict:
    labels = np.asarray(labels)
    return {
        "values": labels.tolist(),
        "dtype": labels.dtype.str if labels.dtype != object else "object",
    }


def _labels_from_json(d: dict) -> np.ndarray:
    return np.asarray(d["values"], dtype=np.dtype(d["dtype"]))


# ----------------------------------------------------------------------------------------
# save / load
# ----------------------------------------------------------------------------------------


def save(clf, path) -> Path:
    """Write a fitted classifier or regressor to ``path`` (netCDF4/HDF5 via h5netcdf).

    Parameters
    ----------
    clf : BM3KLClassifier or BM3KLRegressor
        A fitted estimator.
    path : str or Path
        Output file (conventionally ``*.nc``); parent directories must exist.

    Returns
    -------
    Path
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(clf, "posterior_")
    path = Path(path)
    _refuse_nonfinite(clf.posterior_, f"refusing to save {path}")
    tree = clf.to_datatree()
    kin = clf.kernel_input_
    state = {
        "estimator": type(clf).__name__,
        "y_train": _labels_to_json(clf.y_train_),
        "kernel_names": list(clf.kernel_names_),
        "n_train": int(kin.n_train),
        "n_landmarks": None if kin.n_landmarks is None else int(kin.n_landmarks),
        "train_scale": None if kin.train_scale is None else [float(v) for v in kin.train_scale],
        "n_features_in": getattr(clf, "n_features_in_", None),
        "feature_names_in": (
            None
            if not hasattr(clf, "feature_names_in_")
            else [str(v) for v in clf.feature_names_in_]
        ),
        "n_iter": int(clf.n_iter_),
        "random_seed": int(clf.random_seed_),
        "pool": None,
        "run_report": _report_to_json(getattr(clf, "run_report_", None)),
    }
    if state["estimator"] == REGRESSOR:  # floats through JSON round-trip exactly
        state.update(y_mean=float(clf.y_mean_), y_scale=float(clf.y_scale_),
                     kappa=float(clf.kappa_))  # fmt: skip
    else:
        state.update(classes=_labels_to_json(clf.classes_), calibrator=_calibrator_to_json(clf))
    if kin.pool is not None:
        meta, arrays = pool_to_state(kin.pool)
        state["pool"] = meta
        ds = xr.Dataset({_POOL_ARRAYS[a][0]: (_pool_dims(a, arrays), v) for a, v in arrays.items()})
        tree["kernel_pool"] = xr.DataTree(ds)
    tree.attrs.update({
        "bayesmkl_format": FORMAT_VERSION,
        "bayesmkl_version": _version(),
        "bayesmkl_params": json.dumps(_params_to_json(clf.get_params(deep=False))),
        "bayesmkl_state": json.dumps(state),
    })  # fmt: skip
    _write_atomically(path, _netcdf_bytes(tree))
    return path


def _netcdf_bytes(tree) -> bytes:
    """The netCDF file of ``tree``, checksums included, built in memory.

    HDF5 never touches the disk here: when HDF5 itself meets a full disk it leaves handles that
    h5py's clean-up then frees twice (the audit saw "Can't decrement id ref count" and a
    segmentation fault), so the only write that can fail on a full disk is the plain
    :func:`os.write` of :func:`_write_atomically`, which raises an ordinary ``OSError``.
    """
    buf = _bytes_io.BytesIO()
    tree.to_netcdf(buf, engine="h5netcdf")
    _write_checksums(buf)
    return buf.getvalue()


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a new temporary file in the same directory.

    The temporary file is created by :func:`tempfile.mkstemp` (``O_CREAT | O_EXCL``, an
    unpredictable name, mode 0600), so a file or symlink planted in a shared directory is never
    opened or followed; it is renamed over ``path`` only once every byte is on disk. On any
    failure it is removed, the previous ``path`` is left as it was, and the ``OSError`` names
    ``path``.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot save {path}: {exc.strerror or exc}") from exc
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # the mode a plain open() would have given
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OSError(
                exc.errno,
                f"could not save {path}: {exc.strerror or exc} (the previous file, if any, is "
                "unchanged)",
            ) from exc
        raise


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would, for a moment, in every thread)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read(
    path, *, verify: bool = True, estimator: str = CLASSIFIER, known_params=None
) -> tuple[dict, dict]:
    """Read an estimator written by :func:`save` as ``(params, fitted)``.

    ``BM3KLClassifier(**params)._set_fitted(**fitted)`` rebuilds it (that is
    :meth:`BM3KLClassifier.load <bayesmkl.BM3KLClassifier.load>`, and likewise
    :meth:`BM3KLRegressor.load <bayesmkl.BM3KLRegressor.load>`); this module does not import
    the estimators.

    Parameters
    ----------
    path : str or Path
    verify : bool, default True
        Verify the SHA-256 checksums before decoding anything, and refuse a file of format 2 or
        later whose checksum record is missing. ``False`` skips the checksums (only for a file
        you trust; the draws are still refused when they are not finite).
    estimator : {"BM3KLClassifier", "BM3KLRegressor"}, default "BM3KLClassifier"
        The class the caller rebuilds; a file of the other class is refused (files written
        before regressors could be saved hold a classifier).
    known_params : iterable of str, optional
        The constructor parameters of that class; a file storing others (written by a newer
        bayesmkl) is refused with a ``ValueError`` naming them.

    Returns
    -------
    params : dict
        The constructor parameters.
    fitted : dict
        Keyword arguments of ``_set_fitted``: the fitted state.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a saved bayesmkl model of class ``estimator``, is damaged (a
        checksum differs or is missing, a group or attribute is malformed), was written in a
        format or with parameters this version does not know, carries an attribute that would
        make xarray rescale or re-type an array, or holds non-finite draws; the message names
        the file.

    Notes
    -----
    Arrays are read as stored: xarray's CF decoding (``scale_factor``/``add_offset``,
    ``_FillValue`` masking, ``units`` as times) is off, and a file carrying such an attribute
    (which :func:`save` never writes, and which the checksums do not cover) is refused. A file
    without a checksum record loads only with ``verify=False``: a file written before format 2
    and one whose checksums were deleted cannot be told apart.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    _check_file_format(path, FORMAT_VERSION)
    _verify_checksums(path, verify=verify)
    try:
        with _open_tree(path) as opened:
            tree = opened.load()
    except Exception as exc:  # a damaged file can fail in h5py, xarray or the decoders
        raise ValueError(f"{path} is not a readable netCDF file: {_one_line(exc)}") from exc
    if "bayesmkl_state" not in tree.attrs:
        raise ValueError(f"{path} is a netCDF file but not a saved bayesmkl model")
    saved = _saved_estimator(tree.attrs, path)
    if saved != estimator:
        raise ValueError(f"{path} holds a fitted {saved}; load it with {saved}.load")
    try:
        params, fitted = _from_tree(tree)
    except Exception as exc:  # missing groups, malformed JSON, wrong shapes
        raise ValueError(f"{path} is a damaged bayesmkl model file: {_one_line(exc)}") from exc
    unknown = [] if known_params is None else sorted(set(params) - set(known_params))
    if unknown:
        raise ValueError(
            f"{path} was written by a newer bayesmkl "
            f"({tree.attrs.get('bayesmkl_version', 'unknown version')}): it stores the "
            f"parameters {unknown}, which {estimator} of bayesmkl {_version()} does not have; "
            "upgrade bayesmkl to load it"
        )
    _refuse_nonfinite(fitted["posterior"], f"{path} cannot be used")
    return params, fitted


def _open_tree(path):
    """The file as stored: no CF rescaling, masking or time decoding (see :func:`read`)."""
    return xr.open_datatree(
        path, engine="h5netcdf", mask_and_scale=False, decode_times=False,
        decode_timedelta=False,
    )  # fmt: skip


def _from_tree(tree) -> tuple[dict, dict]:
    params = _params_from_json(json.loads(tree.attrs["bayesmkl_params"]))
    state = json.loads(tree.attrs["bayesmkl_state"])
    post = tree["posterior"].to_dataset()
    stats = tree["sample_stats"].to_dataset()
    pool = None
    if state["pool"] is not None:
        ds = tree["kernel_pool"].to_dataset()
        arrays = {a: np.asarray(ds[name].values) for a, (name, _) in _POOL_ARRAYS.items()
                  if name in ds}  # fmt: skip
        pool = pool_from_state(state["pool"], arrays)
    scale = state.get("train_scale")  # absent from files written before it was kept
    n_landmarks = state.get("n_landmarks")  # absent from files written before landmark fits
    kin = KernelInput(
        pool=pool, names=list(state["kernel_names"]), n_train=int(state["n_train"]),
        train_scale=None if scale is None else tuple(float(v) for v in scale),
        n_landmarks=None if n_landmarks is None else int(n_landmarks),
    )  # fmt: skip
    fitted = dict(
        kernel_input=kin,
        y_train=_labels_from_json(state["y_train"]),
        posterior={k: np.asarray(post[k].values) for k in post.data_vars},
        sample_stats=diagnostics.sample_stats_from_arviz(
            {k: stats[k].values for k in stats.data_vars}
        ),
        n_iter=int(state["n_iter"]),
        random_seed=int(state["random_seed"]),
    )
    if state.get("run_report") is not None:  # absent from files written before it was kept
        fitted["run_report_"] = RunReport(**state["run_report"])
    if state.get("estimator", CLASSIFIER) == REGRESSOR:
        # eps_standardised: the sampler's draws (the tree's eps is in units of y)
        fitted["posterior"] = diagnostics.regression_posterior_from_tree(fitted["posterior"])
        fitted.update(y_mean=float(state["y_mean"]), y_scale=float(state["y_scale"]),
                      kappa_=float(state["kappa"]),
                      log_likelihood_=np.asarray(tree["log_likelihood"]["y"].values))  # fmt: skip
    else:
        fitted.update(classes=_labels_from_json(state["classes"]),
                      **_calibrator_from_json(state.get("calibrator"), tree))  # fmt: skip
    # the training rows' labels (0 … N−1 in files saved before DataFrame indices were kept)
    fitted["train_index_"] = np.asarray(tree["observed_data"]["obs"].values)
    if state["n_features_in"] is not None:
        fitted["n_features_in_"] = int(state["n_features_in"])
    if state["feature_names_in"] is not None:
        fitted["feature_names_in_"] = np.asarray(state["feature_names_in"], dtype=object)
    return params, fitted


def _report_to_json(report) -> dict | None:
    """A :class:`~bayesmkl.sampler.runlength.RunReport` as plain JSON values."""
    if report is None:
        return None
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in report._asdict().items()}


def saved_estimator(path) -> str:
    """The class name of the estimator saved in ``path``: ``"BM3KLClassifier"`` or
    ``"BM3KLRegressor"`` (read from the file's attributes; :func:`read` verifies the rest).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` naming the file when it
    is not a readable netCDF file or not a saved bayesmkl model.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    _check_file_format(path, FORMAT_VERSION)
    try:
        with _open_tree(path) as opened:
            attrs = dict(opened.attrs)
    except Exception as exc:  # a damaged file can fail in h5py, xarray or the decoders
        raise ValueError(f"{path} is not a readable netCDF file: {_one_line(exc)}") from exc
    if "bayesmkl_state" not in attrs:
        raise ValueError(f"{path} is a netCDF file but not a saved bayesmkl model")
    return _saved_estimator(attrs, path)


def _saved_estimator(attrs, path) -> str:
    """The class name a file was saved from (files before regressors: a classifier)."""
    try:
        name = json.loads(attrs["bayesmkl_state"]).get("estimator", CLASSIFIER)
    except Exception as exc:
        raise ValueError(f"{path} is a damaged bayesmkl model file: {_one_line(exc)}") from exc
    if name not in (CLASSIFIER, REGRESSOR):
        raise ValueError(f"{path} holds an estimator bayesmkl cannot load: {name!r}")
    return name


def _calibrator_to_json(clf):
    """Calibration map and out-of-fold log predictive as JSON (floats round-trip exactly)."""
    cal = getattr(clf, "calibrator_", None)
    oof = getattr(clf, "oof_log_predictive_", None)
    return {"map": None if cal is None else cal.to_dict(),
            "oof_log_predictive": None if oof is None else np.asarray(oof).tolist()}  # fmt: skip


def _calibrator_from_json(d, tree) -> dict:
    """Inverse of :func:`_calibrator_to_json` as fitted attributes; the log-likelihood comes
    from its tree group."""
    from bayesmkl.posterior.calibration import Calibrator

    d = d or {}
    oof = d.get("oof_log_predictive")
    out = {
        "calibrator_": None if d.get("map") is None else Calibrator.from_dict(d["map"]),
        "oof_log_predictive_": None if oof is None else np.asarray(oof, dtype=float),
    }
    if "log_likelihood" in tree.children:
        out["log_likelihood_"] = np.asarray(tree["log_likelihood"]["y"].values)
    return out


def _version() -> str:
    from bayesmkl._version import __version__

    return __version__
