"""Data loaders: search path, errors, real UCI files (skipped when absent) and the offline demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bayesmkl
from bayesmkl import datasets


def _write(path: Path, rows):
    path.write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")


@pytest.fixture
def tiny_dir(tmp_path):
    _write(tmp_path / "toy.csv", [[0.5, 1.0, 0], [1.5, -2.0, 1], [2.5, 3.0, 1]])
    return tmp_path


def test_load_from_data_dir(tiny_dir):
    X, y = datasets.load_uci("toy", data_dir=tiny_dir)
    assert X.shape == (3, 2) and X.dtype == np.float64
    assert y.tolist() == [0, 1, 1] and y.dtype == np.int64
    assert datasets.load_uci("TOY.csv", data_dir=str(tiny_dir))[0][1, 1] == -2.0
    assert datasets.find_uci_dir(tiny_dir) == tiny_dir.resolve()


def test_env_var_is_searched(tiny_dir, monkeypatch):
    monkeypatch.setenv("BAYESMKL_DATA", str(tiny_dir))
    X, _ = datasets.load_uci("toy")
    assert X.shape == (3, 2)
    assert datasets.uci_search_path() == [("$BAYESMKL_DATA", tiny_dir)]


def test_unknown_name_lists_available_and_places(tiny_dir, monkeypatch):
    with pytest.raises(FileNotFoundError, match="unknown UCI data set 'nosuch'") as err:
        datasets.load_uci("nosuch", data_dir=tiny_dir)
    msg = str(err.value)
    assert "toy" in msg and str(tiny_dir) in msg and "working directory" not in msg
    monkeypatch.setenv("BAYESMKL_DATA", str(tiny_dir))
    with pytest.raises(FileNotFoundError, match="unknown UCI data set 'nosuch'") as err:
        datasets.load_uci("nosuch")
    msg = str(err.value)
    assert "BAYESMKL_DATA" in msg and "toy" in msg


def test_only_the_argument_or_the_environment_is_read(tmp_path, monkeypatch):
    """Without ``data_dir`` and ``$BAYESMKL_DATA`` nothing is read, not even a
    ``../shared/data/uci`` beside the working directory."""
    shared = tmp_path / "shared" / "data" / "uci"
    shared.mkdir(parents=True)
    _write(shared / "toy.csv", [[0.5, 0], [1.5, 1]])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("BAYESMKL_DATA", raising=False)
    assert datasets.uci_search_path() == [] and datasets.find_uci_dir() is None
    with pytest.raises(FileNotFoundError, match="no data directory given") as err:
        datasets.load_uci("toy")
    assert "BAYESMKL_DATA" in str(err.value)
    assert datasets.load_uci("toy", data_dir=shared)[0].shape == (2, 1)


def test_a_given_data_dir_is_the_only_place_searched(tiny_dir, tmp_path_factory, monkeypatch):
    """A misspelt or incomplete data_dir fell back to another copy of the data without a
    word (load_uci("sonar", "/nonexistent") read the shared sonar.csv)."""
    monkeypatch.setenv("BAYESMKL_DATA", str(tiny_dir))  # a copy of toy.csv elsewhere
    assert datasets.load_uci("toy")[0].shape == (3, 2)
    with pytest.raises(FileNotFoundError, match=r"data_dir '.*nope' is not a directory"):
        datasets.load_uci("toy", data_dir=tiny_dir / "nope")
    other = tmp_path_factory.mktemp("other")
    _write(other / "else.csv", [[0.0, 0], [1.0, 1]])
    with pytest.raises(FileNotFoundError, match="unknown UCI data set 'toy'"):
        datasets.load_uci("toy", data_dir=other)
    assert [o for o, _ in datasets.uci_search_path(other)] == ["data_dir argument"]


def test_no_directory_anywhere(tmp_path, monkeypatch):
    missing = [("data_dir argument", tmp_path / "a"), ("$BAYESMKL_DATA", tmp_path / "b")]
    monkeypatch.setattr(datasets, "uci_search_path", lambda data_dir=None: missing)
    assert datasets.find_uci_dir() is None
    with pytest.raises(FileNotFoundError, match="data directory is missing") as err:
        datasets.load_uci("sonar")
    assert str(tmp_path / "a" / "sonar.csv") in str(err.value)
    assert str(tmp_path / "b" / "sonar.csv") in str(err.value)


def test_bad_names_and_labels(tiny_dir):
    with pytest.raises(ValueError, match="not a path"):
        datasets.load_uci("../toy", data_dir=tiny_dir)
    _write(tiny_dir / "badlab.csv", [[0.5, 0.5], [1.0, 1.5]])
    with pytest.raises(ValueError, match="integer labels"):
        datasets.load_uci("badlab", data_dir=tiny_dir)


def test_mfeat_views_must_agree(tmp_path):
    _write(tmp_path / "mfeat-fou.csv", [[0.1, 0.2, 0], [0.3, 0.4, 1]])
    _write(tmp_path / "mfeat-kar.csv", [[1.0, 0], [2.0, 0]])
    with pytest.raises(ValueError, match="disagrees .*1 labels"):
        datasets.load_mfeat(("fou", "kar"), data_dir=tmp_path)
    _write(tmp_path / "mfeat-kar.csv", [[1.0, 0], [2.0, 1]])
    Xs, y = datasets.load_mfeat(("fou", "kar"), data_dir=tmp_path)
    assert [x.shape for x in Xs] == [(2, 2), (2, 1)] and y.tolist() == [0, 1]


def test_load_demo_offline():
    X, y, names = datasets.load_demo()
    assert X.shape == (569, 30) and y.shape == (569,) and len(names) == 30
    assert set(np.unique(y)) == {0, 1} and all(isinstance(n, str) for n in names)


def test_no_data_files_in_package():
    pkg = Path(bayesmkl.__file__).parent
    assert not list(pkg.rglob("*.csv"))


@pytest.mark.shared_data
def test_real_uci_files(uci_dir):
    X, y = datasets.load_uci("sonar", uci_dir)
    assert X.shape == (208, 60) and np.bincount(y).tolist() == [97, 111]
    X, y = datasets.load_uci("bupa", uci_dir)
    assert X.shape == (345, 6) and sorted(np.bincount(y).tolist()) == [145, 200]
    X, y = datasets.load_uci("wine")
    assert X.shape == (178, 13) and y.max() == 2


@pytest.mark.shared_data
def test_real_mfeat(uci_dir):
    Xs, y = datasets.load_mfeat(data_dir=uci_dir)
    assert [x.shape for x in Xs] == [(2000, 76), (2000, 216), (2000, 64), (2000, 240)]
    assert np.bincount(y).tolist() == [200] * 10
