"""Integrity of saved model files: SHA-256 checksums of every stored array and JSON attribute.

:func:`write_checksums` records, after a file is written, the SHA-256 of the stored bytes of every
HDF5 dataset (every array and coordinate of every group) and of the JSON attributes in the root
attribute :data:`CHECKSUM_ATTR`; :func:`verify_checksums` recomputes them before anything is
decoded and raises a ``ValueError`` naming the file and the items that differ
(:mod:`bayesmkl.io`, format 2). :func:`refuse_nonfinite` refuses non-finite draws.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np

__all__ = [
    "CHECKSUM_ATTR",
    "CHECKSUM_FORMAT",
    "one_line",
    "refuse_nonfinite",
    "verify_checksums",
    "write_checksums",
]

CHECKSUM_ATTR = "bayesmkl_sha256"
_JSON_ATTRS = ("bayesmkl_params", "bayesmkl_state")


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def refuse_nonfinite(posterior: dict, what: str) -> None:
    from bayesmkl.posterior.checks import nonfinite_draws

    report = nonfinite_draws(posterior)
    if not report.ok:
        raise ValueError(f"{what}: the model has {report.describe()}")


def _digest_dataset(ds) -> str:
    """SHA-256 of an HDF5 dataset's dtype, shape and stored values (no decoding)."""
    h = hashlib.sha256(f"{ds.dtype.str}{ds.shape}".encode())
    data = ds[()]
    if isinstance(data, np.ndarray) and data.dtype != object:
        h.update(np.ascontiguousarray(data).tobytes())
    else:  # variable-length strings: length-prefixed bytes
        for v in np.ravel(np.asarray(data, dtype=object)):
            b = v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def _digests(f) -> dict:
    import h5py

    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = _digest_dataset(obj)

    f.visititems(visit)
    for a in _JSON_ATTRS:
        if a in f.attrs:
            v = f.attrs[a]
            b = v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass")
            out["@" + a] = hashlib.sha256(b).hexdigest()
    return out


def write_checksums(path: Path) -> None:
    import h5py

    with h5py.File(path, "r+") as f:
        f.attrs[CHECKSUM_ATTR] = json.dumps(_digests(f), sort_keys=True)


#: The first file format whose files always carry the checksum record.
CHECKSUM_FORMAT = 2


def _file_format(f):
    """The ``bayesmkl_format`` root attribute as an int, or ``None`` (absent or unreadable)."""
    try:
        return int(np.asarray(f.attrs["bayesmkl_format"]).ravel()[0])
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def verify_checksums(path: Path, *, verify: bool = True) -> None:
    """Raise ``ValueError`` naming ``path`` when a stored checksum differs (see module doc).

    A file of format 2 or later (``bayesmkl_format``) without its checksum record is refused:
    every such file is written with one, so a missing record means the file was changed. Files
    of earlier formats, which had none, load with a ``UserWarning``. ``verify=False`` skips every
    check of this function (the caller's explicit choice to trust the file).
    """
    import h5py

    if not verify:
        return
    try:
        with h5py.File(path, "r") as f:
            if CHECKSUM_ATTR not in f.attrs:
                fmt = _file_format(f)
                if fmt is not None and fmt >= CHECKSUM_FORMAT:
                    raise _Corrupt(
                        f"it is a format-{fmt} model file but its checksum record "
                        f"({CHECKSUM_ATTR}) is missing, so its contents cannot be verified and "
                        "it is not loaded (every format-2 file is written with one: the file "
                        "was changed after it was written); pass verify=False to load it anyway"
                    )
                if "bayesmkl_state" in f.attrs:
                    warnings.warn(
                        f"{path} has no checksums (written by bayesmkl before format 2); its "
                        "integrity cannot be verified",
                        UserWarning,
                        stacklevel=3,
                    )
                return
            try:
                stored = json.loads(f.attrs[CHECKSUM_ATTR])
                if not isinstance(stored, dict):
                    raise TypeError("not a JSON object")
            except (TypeError, ValueError) as exc:
                raise _Corrupt(f"its checksum record is damaged ({one_line(exc)})") from None
            actual = _digests(f)
    except _Corrupt as exc:
        raise ValueError(f"{path} is corrupt: {exc}") from None
    except Exception as exc:  # not HDF5, or damaged beyond h5py's reading
        raise ValueError(f"{path} is not a readable netCDF file: {one_line(exc)}") from exc
    bad = sorted(k for k in set(stored) | set(actual) if stored.get(k) != actual.get(k))
    if bad:
        names = ", ".join(k.lstrip("@") for k in bad[:6]) + (" ..." if len(bad) > 6 else "")
        raise ValueError(
            f"{path} is corrupt: the SHA-256 checksum of {len(bad)} stored item(s) ({names}) "
            "differs from the one recorded when it was saved; the file changed after it was "
            "written and is not loaded"
        )


class _Corrupt(Exception):
    pass
