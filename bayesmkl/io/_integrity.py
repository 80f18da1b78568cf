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
import numbers
from pathlib import Path

import numpy as np

__all__ = [
    "CHECKSUM_ATTR",
    "CHECKSUM_FORMAT",
    "check_file_format",
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


def write_checksums(path) -> None:
    """Record the checksums in the file ``path`` (a path or a seekable binary file object)."""
    import h5py

    with h5py.File(path, "r+") as f:
        f.attrs[CHECKSUM_ATTR] = json.dumps(_digests(f), sort_keys=True)


#: The first file format whose files always carry the checksum record.
CHECKSUM_FORMAT = 2


#: Variable attributes that make xarray change an array when decoding it (CF conventions:
#: rescaling, masking, unsigned reinterpretation, times, booleans). :func:`bayesmkl.io.save` never
#: writes them (except ``dtype="bool"`` on an int8 flag) and the checksums do not cover them.
_DECODING_ATTRS = (
    "scale_factor", "add_offset", "missing_value", "_Unsigned", "units", "calendar", "dtype",
    "_Encoding", "coordinates", "valid_min", "valid_max", "valid_range", "flag_values",
)  # fmt: skip


def check_file_format(path: Path, newest: int) -> None:
    """Refuse (``ValueError`` naming ``path``) a file whose ``bayesmkl_format`` is not a format
    this version reads (1 to ``newest``), or one that carries a CF decoding attribute
    (:data:`_DECODING_ATTRS`) on an array. Runs whatever ``verify`` says: a newer format may lay
    its arrays out differently, and such an attribute could change predictions silently."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if "bayesmkl_format" in f.attrs:
                raw = f.attrs["bayesmkl_format"]
                fmt = _file_format(f)
                if fmt is None or np.size(raw) != 1:
                    raise _Corrupt(f"its format version {_show(raw)} is not one bayesmkl wrote")
                if fmt > newest:
                    raise _Corrupt(
                        f"it is in format {fmt}, newer than the formats 1 to {newest} this "
                        "version of bayesmkl reads; upgrade bayesmkl to load it"
                    )
                if fmt < 1:
                    raise _Corrupt(f"its format version {fmt} is not one bayesmkl wrote")
            found = []

            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    for a in _DECODING_ATTRS:
                        if a in obj.attrs and not _bool_flag(obj, a):
                            found.append(f"{a!r} on {name}")

            f.visititems(visit)
    except _Corrupt as exc:
        raise ValueError(f"{path} cannot be loaded: {exc}") from None
    except Exception as exc:  # not HDF5, or damaged beyond h5py's reading
        raise ValueError(f"{path} is not a readable netCDF file: {one_line(exc)}") from exc
    if found:
        raise ValueError(
            f"{path} is not loaded: it carries the attribute(s) {', '.join(found[:4])}"
            f"{' ...' if len(found) > 4 else ''}, which bayesmkl never writes and which would "
            "make xarray rescale or re-type the stored values; the file was changed after it "
            "was written"
        )


def _bool_flag(ds, attr) -> bool:
    """xarray's own encoding of a boolean array: int8 values with ``dtype="bool"``."""
    if attr != "dtype" or ds.dtype != np.int8:
        return False
    v = ds.attrs[attr]
    return (v.decode() if isinstance(v, bytes) else str(v)) == "bool"


def _show(raw) -> str:
    v = np.asarray(raw).ravel()
    v = v[0] if v.size == 1 else v
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return repr(v.item() if isinstance(v, np.generic) else v)[:40]


def _file_format(f):
    """The ``bayesmkl_format`` root attribute as an int, or ``None`` (absent or unreadable)."""
    try:
        v = np.asarray(f.attrs["bayesmkl_format"]).ravel()[0]
        return int(v) if isinstance(v, numbers.Integral) else None
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def verify_checksums(path: Path, *, verify: bool = True) -> None:
    """Raise ``ValueError`` naming ``path`` when a stored checksum differs (see module doc).

    A file without its checksum record is refused. Every format-2 file is written with one; a
    format-1 file (written before checksums existed) had none, but deleting the record and the
    ``bayesmkl_format`` attribute (or setting it to 1) makes a changed format-2 file look the
    same, and nothing unverified in the file can tell them apart, so both need the caller's
    explicit ``verify=False``, which skips every check of this function (the caller's choice to
    trust the file).
    """
    import h5py

    if not verify:
        return
    try:
        with h5py.File(path, "r") as f:
            if CHECKSUM_ATTR not in f.attrs:
                if "bayesmkl_state" not in f.attrs:
                    return  # not a saved model at all: the reader says so
                fmt = _file_format(f)
                which = (
                    f"it is a format-{fmt} model file but its checksum record ({CHECKSUM_ATTR}) "
                    "is missing (every format-2 file is written with one: the file was changed "
                    "after it was written)"
                    if fmt is not None and fmt >= CHECKSUM_FORMAT
                    else f"it has no checksum record ({CHECKSUM_ATTR}): it was written before "
                    "format 2, or its checksums (and format attribute) were removed, and the two "
                    "cannot be told apart"
                )
                raise _Corrupt(
                    f"{which}, so its contents cannot be verified and it is not loaded; if you "
                    "trust the file, pass verify=False (saving it again adds checksums)"
                )
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
