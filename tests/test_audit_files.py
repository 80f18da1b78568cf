"""Saved files, temporary files and the compilation cache under hostile edits and faults
(issue 46, items 6-8; the reproducers in ../shared/repro/audit-turn4/)."""

import json
import os
import stat
import warnings

import h5py
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

from bayesmkl import BM3KLClassifier, BM3KLRegressor
from bayesmkl import io as bio
from bayesmkl.cli import main
from bayesmkl.io._integrity import write_checksums

FAST = dict(num_warmup=10, num_samples=10, num_chains=2, progress_bar=False, random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:40], y[:40]


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = BM3KLClassifier(**FAST, calibration=None).fit(X, y)
    path = tmp_path_factory.mktemp("files") / "clf.nc"
    clf.save(path)
    return path, clf


@pytest.fixture(scope="module")
def saved_reg(tmp_path_factory):
    X, y = load_diabetes(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = BM3KLRegressor(**FAST).fit(X[:40], y[:40])
    path = tmp_path_factory.mktemp("files") / "reg.nc"
    reg.save(path)
    return path, reg, X[:40]


def _copy(src, dst):
    dst.write_bytes(src.read_bytes())
    return dst


# --------------------------------------------------------------------------------------------
# CF decoding attributes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "group, attr, value",
    [
        ("posterior/b", "scale_factor", 3.0),
        ("kernel_pool/mean", "add_offset", 1.0),
        ("posterior/w", "units", "days since 2000-01-01"),
        ("posterior/w", "dtype", "bool"),
    ],
)
def test_cf_attribute_is_refused(saved, tmp_path, group, attr, value):
    """io_cf_attribute_changes_predictions.py, io_units_attribute_crash.sh: an added CF
    attribute changed predictions (scale_factor, add_offset) or crashed (units) on load."""
    path, _ = saved
    bad = _copy(path, tmp_path / "edited.nc")
    with h5py.File(bad, "r+") as f:
        f[group].attrs[attr] = value
    with pytest.raises(ValueError, match=rf"edited\.nc is not loaded: .*'{attr}' on {group}"):
        BM3KLClassifier.load(bad)
    with pytest.raises(ValueError, match=r"edited\.nc"):  # verify=False: still refused
        BM3KLClassifier.load(bad, verify=False)


def test_cf_attribute_regressor_and_cli(saved_reg, tmp_path, capsys):
    """io_cf_attribute_changes_predictions.py (regressor), io_units_attribute_crash.sh (CLI)."""
    path, _, X = saved_reg
    bad = _copy(path, tmp_path / "reg_scaled.nc")
    with h5py.File(bad, "r+") as f:
        f["posterior/b"].attrs["scale_factor"] = 10.0
    with pytest.raises(ValueError, match=r"reg_scaled\.nc is not loaded: .*scale_factor"):
        BM3KLRegressor.load(bad)
    np.savetxt(tmp_path / "x.csv", X[:3], delimiter=",")
    assert main(["predict", str(bad), str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "reg_scaled.nc is not loaded" in err and "internal error" not in err


def test_load_still_round_trips(saved, data):
    """Reading without CF decoding keeps every saved array and the predictions bit for bit."""
    path, clf = saved
    X, _ = data
    back = BM3KLClassifier.load(path)
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    assert back.sample_stats_["diverging"].dtype == clf.sample_stats_["diverging"].dtype
    for k in clf.posterior_:
        np.testing.assert_array_equal(back.posterior_[k], clf.posterior_[k])


# --------------------------------------------------------------------------------------------
# format versions, unknown parameters, missing checksums
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [
        (99, r"format 99, newer than the formats 1 to 2 .*upgrade bayesmkl"),
        (3, r"format 3, newer than"),
        ("garbage", r"format version 'garbage' is not one bayesmkl wrote"),
        (2.5, r"format version 2.5 is not one bayesmkl wrote"),
        (0, r"format version 0 is not one"),
    ],
)
def test_unknown_format_version_is_refused(saved, tmp_path, value, message):
    """io_newer_format_loads_silently.py: format 99 or "garbage" loaded without a word."""
    path, _ = saved
    bad = _copy(path, tmp_path / "fmt.nc")
    with h5py.File(bad, "r+") as f:
        f.attrs["bayesmkl_format"] = value
    with pytest.raises(ValueError, match=rf"fmt\.nc cannot be loaded: .*{message}"):
        BM3KLClassifier.load(bad)
    with pytest.raises(ValueError, match=message):
        BM3KLClassifier.load(bad, verify=False)
    with pytest.raises(ValueError, match=message):
        bio.saved_estimator(bad)


def test_unknown_parameter_from_newer_version(saved, data, tmp_path, capsys):
    """io_newer_file_new_param_typeerror.sh: a checksummed file storing a parameter this version
    does not have ended in a TypeError (CLI: "internal error")."""
    path, _ = saved
    bad = _copy(path, tmp_path / "newer.nc")
    with h5py.File(bad, "r+") as f:
        d = json.loads(f.attrs["bayesmkl_params"])
        d["new_option"] = True
        f.attrs["bayesmkl_params"] = json.dumps(d)
        f.attrs["bayesmkl_version"] = "9.0"
    write_checksums(bad)
    with pytest.raises(ValueError, match=r"newer\.nc was written by a newer bayesmkl \(9\.0\)"):
        BM3KLClassifier.load(bad)
    with pytest.raises(ValueError, match=r"\['new_option'\]"):
        BM3KLClassifier.load(bad, verify=False)
    np.savetxt(tmp_path / "x.csv", data[0][:3], delimiter=",")
    assert main(["predict", str(bad), str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "newer bayesmkl" in err and "internal error" not in err


def test_deleting_checksum_and_format_is_refused(saved, data, tmp_path):
    """io_checksum_bypass_delete_two_attrs.py: deleting the checksum record and the format
    attribute loaded tampered draws as an "old format" file with only a warning. A file without
    checksums now needs verify=False, whatever its format attribute says."""
    path, clf = saved
    for fmt in (None, 1):
        bad = _copy(path, tmp_path / "tampered.nc")
        with h5py.File(bad, "r+") as f:
            del f.attrs["bayesmkl_sha256"]
            if fmt is None:
                del f.attrs["bayesmkl_format"]
            else:
                f.attrs["bayesmkl_format"] = fmt
            f["posterior/b"][...] = f["posterior/b"][...] + 5.0
        with pytest.raises(ValueError, match=r"tampered\.nc is corrupt: .*no checksum record"):
            BM3KLClassifier.load(bad)
        loaded = BM3KLClassifier.load(bad, verify=False)  # the caller's explicit choice
        assert not np.array_equal(loaded.predict_proba(data[0]), clf.predict_proba(data[0]))


# --------------------------------------------------------------------------------------------
# save(): temporary file and failing writes
# --------------------------------------------------------------------------------------------


def test_save_never_follows_a_planted_symlink(saved, tmp_path):
    """security_save_tmp_symlink_clobber.py: save() wrote through a symlink planted at its
    predictable temporary name .<name>.<pid>.tmp."""
    _, clf = saved
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious data\n")
    (shared / f".model.nc.{os.getpid()}.tmp").symlink_to(victim)
    clf.save(shared / "model.nc")
    assert victim.read_text() == "precious data\n"
    assert not (shared / "model.nc").is_symlink()
    BM3KLClassifier.load(shared / "model.nc")
    mode = stat.S_IMODE(os.stat(shared / "model.nc").st_mode)
    assert mode == 0o666 & ~bio._umask()


def test_save_on_full_disk_is_a_clear_oserror(saved, tmp_path, monkeypatch):
    """save_full_disk_segfault.sh: a save on a full disk segfaulted inside HDF5 and left its
    temporary file behind. The file is now built in memory; a failing write raises an OSError
    naming the file, removes the temporary file and keeps the previous file."""
    path, clf = saved
    out = tmp_path / "model.nc"
    out.write_bytes(b"previous")
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data)[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bio.os, "write", full_disk)
    with pytest.raises(OSError, match=r"could not save .*model\.nc: No space left") as info:
        clf.save(out)
    assert info.value.errno == 28
    monkeypatch.undo()
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.nc"]


def test_save_into_missing_directory_names_the_file(saved, tmp_path):
    _, clf = saved
    with pytest.raises(OSError, match=r"cannot save .*nodir/model\.nc"):
        clf.save(tmp_path / "nodir" / "model.nc")
