"""The ``bayesmkl`` command line: demo, fit/predict round trip, help, clean errors."""

from __future__ import annotations

import csv
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from bayesmkl import BM3KLClassifier
from bayesmkl.cli import main, read_csv
from bayesmkl.cli.parser import build_parser
from bayesmkl.cli.report import kernels_phrase
from bayesmkl.estimators._fitting import validate_fit_input
from tests.estimators.test_estimator import SMALL, small_data


def _write_csv(path, X, y=None, header=True):
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        if header:
            wr.writerow([f"f{j}" for j in range(X.shape[1])] + (["label"] if y is not None else []))
        for i, row in enumerate(X):
            wr.writerow([repr(float(v)) for v in row] + ([y[i]] if y is not None else []))


@pytest.mark.parametrize(
    "argv", [["--help"], ["demo", "--help"], ["fit", "--help"], ["predict", "--help"]]
)
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: bayesmkl" in out
    assert "%%" not in out  # a description is not %-formatted: "90%%" printed as written


def test_demo_writes_figures_and_netcdf(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(
        [
            "demo",
            "--out",
            str(out),
            "--num-warmup",
            "5",
            "--num-samples",
            "4",
            "--chains",
            "2",
            "--raw-proba",
            "--no-progress",
        ]
    )
    assert rc == 0
    for name in (
        "kernel_weights.png",
        "trace.png",
        "reliability.png",
        "sample_weights.png",
        "bm3kl_demo.nc",
    ):
        assert (out / name).stat().st_size > 1000, name
    text = capsys.readouterr().out
    for word in ("accuracy", "log-loss", "Brier", "89% interval", "r_hat", "ess_bulk"):
        assert word in text
    clf = BM3KLClassifier.load(out / "bm3kl_demo.nc")
    assert clf.classes_.tolist() == ["benign", "malignant"]
    assert clf.posterior_["w"].shape == (2, 4, 16)
    assert clf.calibration is None and clf.calibrator_ is None  # --raw-proba: the paper's rule


def test_fit_predict_round_trip(tmp_path, capsys):
    Xtr, ytr, Xte, yte = small_data()
    _write_csv(tmp_path / "train.csv", Xtr, ytr)
    _write_csv(tmp_path / "test.csv", Xte, yte, header=False)
    _write_csv(tmp_path / "test_nolabel.csv", Xte)
    rc = main(
        [
            "fit",
            str(tmp_path / "train.csv"),
            "--test-size",
            "0",
            "--out",
            str(tmp_path / "m"),
            "--num-warmup",
            "40",
            "--num-samples",
            "10",
            "--chains",
            "2",
            "--no-progress",
        ]
    )
    assert rc == 0
    assert (tmp_path / "m" / "model.nc").is_file()
    rc = main(
        [
            "predict",
            str(tmp_path / "m" / "model.nc"),
            str(tmp_path / "test.csv"),
            "--has-label",
            "--out",
            str(tmp_path / "probs.csv"),
        ]
    )
    assert rc == 0
    with open(tmp_path / "probs.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["p_0", "p_1", "predicted"]
    probs = np.array([[float(v) for v in r[:2]] for r in rows[1:]])
    # the same fit in Python (same seed, data, settings) gives the same probabilities
    ref = BM3KLClassifier(random_state=0, calibration="loo", **SMALL).fit(Xtr, ytr)
    np.testing.assert_allclose(probs, ref.predict_proba(Xte), rtol=1e-5, atol=1e-7)  # 6 digits
    assert [int(r[2]) for r in rows[1:]] == ref.predict(Xte).tolist()
    assert "accuracy on the labelled rows" in capsys.readouterr().err
    # without a label column, to stdout
    rc = main(["predict", str(tmp_path / "m" / "model.nc"), str(tmp_path / "test_nolabel.csv")])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 41
    # a label column the model does not expect: clear error with a hint
    rc = main(["predict", str(tmp_path / "m" / "model.nc"), str(tmp_path / "test.csv")])
    assert rc == 2
    assert "--has-label" in capsys.readouterr().err


@pytest.mark.parametrize(("n_classes", "phrase"), [(3, "16 centred kernels"), (2, "16 kernels")])
def test_fit_summary_says_when_the_pool_was_centred(n_classes, phrase):
    """The command's first line after a fit names a centred pool (the default's for three or
    more classes), so that weights unlike a binary fit's are not a surprise."""
    X = np.random.default_rng(0).normal(size=(30, 4))
    kin, *_ = validate_fit_input(BM3KLClassifier(), X, np.arange(30) % n_classes)
    assert kernels_phrase(SimpleNamespace(kernel_input_=kin, kernel_names_=["k"] * 16)) == phrase


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("1,2,0\n3,4\n", "line 2: 2 fields, expected 3"),
        ("1,2,0\n3,x,1\n", "line 2, column 2: 'x' is not a finite number"),
        ("a,b,c\n", "has a header but no data rows"),
        ("", "is empty"),
        ("1,2,0\n3,4,0\n", "single class"),
        ("1,nan,0\n3,4,1\n", "is not a finite number"),
    ],
)
def test_malformed_csv_exit_2_one_line(tmp_path, capsys, content, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["fit", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bayesmkl: error:")
    assert match in err


def test_bad_paths(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1,2\n")
    assert main(["predict", str(tmp_path / "nope.nc"), str(tmp_path / "x.csv")]) == 2
    assert "no such model file" in capsys.readouterr().err
    (tmp_path / "fake.nc").write_text("garbage")
    assert main(["predict", str(tmp_path / "fake.nc"), str(tmp_path / "x.csv")]) == 2
    assert "cannot load model" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "x.csv"), "--num-samples", "0"]) == 2
    assert "--num-samples must be at least 1" in capsys.readouterr().err


def test_subprocess_exit_code(tmp_path):
    """The installed entry point path (``python -m bayesmkl``) exits 2 with one stderr line."""
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,0\n3,4\n")
    res = subprocess.run(
        [sys.executable, "-m", "bayesmkl", "fit", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "expected 3" in res.stderr
    assert "Traceback" not in res.stderr


def test_read_csv_string_labels(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("x1,x2,y\n0.5,1,cat\n2,3,dog\n")
    X, y, header = read_csv(p)
    assert X.shape == (2, 2) and y.tolist() == ["cat", "dog"] and header[-1] == "y"


def _regression_csvs(tmp_path):
    """80 training and 30 test rows of scikit-learn's diabetes data (4 features)."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = X[:, :4]
    _write_csv(tmp_path / "reg_train.csv", X[:80], y[:80])
    _write_csv(tmp_path / "reg_test.csv", X[80:110], y[80:110])
    return X[:80], y[:80], X[80:110], y[80:110]


REG_FIT = ["--num-warmup", "30", "--num-samples", "15", "--chains", "2", "--no-progress"]


def test_landmark_fit_predict_round_trip(tmp_path, capsys):
    """``fit --n-landmarks M --landmark-method stratified`` fits the landmark model (the
    written model predicts as the same fit in Python does), and a bad M is refused by argparse
    with exit code 2."""
    Xtr, ytr, Xte, _ = small_data()
    _write_csv(tmp_path / "train.csv", Xtr, ytr)
    _write_csv(tmp_path / "test.csv", Xte)
    opts = ["--num-warmup", "40", "--num-samples", "10", "--chains", "2", "--no-progress"]
    landmarks = ["--n-landmarks", "12", "--landmark-method", "stratified"]
    argv = ["fit", str(tmp_path / "train.csv"), "--test-size", "0", "--out", str(tmp_path / "m")]
    assert main(argv + opts + landmarks) == 0
    rc = main(["predict", str(tmp_path / "m" / "model.nc"), str(tmp_path / "test.csv"),
               "--out", str(tmp_path / "probs.csv")])  # fmt: skip
    assert rc == 0
    with open(tmp_path / "probs.csv") as fh:
        probs = np.array([[float(v) for v in r[:2]] for r in list(csv.reader(fh))[1:]])
    ref = BM3KLClassifier(random_state=0, n_landmarks=12, landmark_method="stratified",
                          **SMALL).fit(Xtr, ytr)  # fmt: skip
    assert ref.landmarks_.shape[0] == 12
    np.testing.assert_allclose(probs, ref.predict_proba(Xte), rtol=1e-5, atol=1e-7)
    capsys.readouterr()
    for bad in ("0", "-3", "1.5", "many"):
        with pytest.raises(SystemExit) as exc:
            main(argv + ["--n-landmarks", bad])
        assert exc.value.code == 2
        assert "--n-landmarks" in capsys.readouterr().err
    parse = build_parser().parse_args
    assert parse(["fit", "d.csv"]).n_landmarks == "auto"
    assert parse(["fit", "d.csv", "--n-landmarks", "exact"]).n_landmarks is None
    assert parse(["fit", "d.csv", "--n-landmarks", "auto"]).n_landmarks == "auto"


def test_regression_fit_predict_round_trip(tmp_path, capsys):
    """``fit --task regression`` fits a BM3KLRegressor (the same draws as in Python), prints
    regression metrics and saves it; ``predict`` recognises the saved regressor and writes its
    predictive mean, sd and 90% interval, with RMSE and coverage for a labelled file."""
    from bayesmkl import BM3KLRegressor

    Xtr, ytr, Xte, yte = _regression_csvs(tmp_path)
    out = tmp_path / "r"
    argv = ["fit", str(tmp_path / "reg_train.csv"), "--task", "regression", "--test-size", "0",
            "--out", str(out), *REG_FIT]  # fmt: skip
    with pytest.warns(UserWarning):  # 15 sweeps: not converged, and fit says so
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "a numeric target" in printed and "training function values" in printed
    assert (out / "model.nc").is_file() and (out / "kernel_weights.png").is_file()
    rc = main(["predict", str(out / "model.nc"), str(tmp_path / "reg_test.csv"), "--has-label",
               "--out", str(tmp_path / "pred.csv")])  # fmt: skip
    assert rc == 0
    with open(tmp_path / "pred.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["mean", "sd", "lower_90", "upper_90"] and len(rows) == 31
    got = np.array([[float(v) for v in r] for r in rows[1:]])
    with pytest.warns(UserWarning):
        ref = BM3KLRegressor(random_state=0, num_warmup=30, num_samples=15, num_chains=2,
                             progress_bar=False).fit(Xtr, ytr)  # fmt: skip
    mean, sd = ref.predict(Xte, return_std=True)
    np.testing.assert_allclose(got[:, 0], mean, rtol=1e-5)  # written with 6 digits
    np.testing.assert_allclose(got[:, 1], sd, rtol=1e-5)
    np.testing.assert_allclose(got[:, 2:], ref.predict_interval(Xte, 0.9), rtol=1e-5)
    err = capsys.readouterr().err
    rmse = np.sqrt(np.mean((mean - yte) ** 2))
    assert f"RMSE on the labelled rows: {rmse:.6g}" in err


def test_regression_options_refused_where_they_do_not_apply(tmp_path, capsys):
    """Classification-only options with --task regression, --epsilon without it, and a target
    that is not a number each end in one clear line and exit status 2, before any fit."""
    _regression_csvs(tmp_path)
    data = str(tmp_path / "reg_train.csv")
    cases = [
        (["--task", "regression", "--gamma0", "5"], "--gamma0: classification only"),
        (["--task", "regression", "--calibration", "cv"], "--calibration: classification only"),
        (["--epsilon", "0.5"], "--epsilon: regression only"),
    ]
    for extra, match in cases:
        assert main(["fit", data, "--out", str(tmp_path / "x"), *extra, *REG_FIT]) == 2
        assert match in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("1,2,3.5\n4,5,high\n")
    assert main(["fit", str(tmp_path / "bad.csv"), "--task", "regression"]) == 2
    assert "target of data row 2 is not a number: 'high'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # refused before the output directory was made


def test_a_run_stopped_in_warm_up_says_so_and_counts_the_sweeps_that_ran(capsys):
    """A budget spent in warm-up: the report says how many warm-up sweeps ran (not the
    ``num_warmup`` asked) and that the draws are no posterior sample."""
    import warnings

    from bayesmkl.cli.report import print_diagnostics

    Xtr, ytr, _, _ = small_data()
    clf = BM3KLClassifier(
        kernels="bsvm16", num_warmup=1000, num_samples="auto", num_chains=2, max_time=1e-3,
        calibration=None, progress_bar=False, random_state=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(Xtr, ytr)
    rep = clf.run_report_
    assert rep.stopped_in == "warmup" and rep.num_samples == 0
    assert 0 < rep.warmup_sweeps < 1000
    print_diagnostics(clf)
    out = capsys.readouterr().out
    assert f"stopped during warm-up, after {rep.warmup_sweeps} of 1000 warm-up sweeps" in out
    assert "sweeps per chain after" not in out


def test_csv_reader_keeps_the_first_row_after_a_byte_order_mark(tmp_path):
    """cli_bom_without_header_drops_row.sh: a UTF-8 BOM made the first field non-numeric, so
    the first data row was taken for a header and dropped (39 of 40 points were fitted)."""
    (tmp_path / "bom.csv").write_bytes("\ufeff1.5,2,0\n3,4,1\n5,6,0\n".encode())
    X, y, header = read_csv(tmp_path / "bom.csv")
    assert header is None and X.shape == (3, 2) and X[0, 0] == 1.5
    assert y.tolist() == [0, 1, 0]


def test_csv_labels_are_compared_as_the_estimator_compares_them(tmp_path):
    """cli_labels_1_and_1.0_split_classes.sh and cli_label_nan_becomes_class.sh: 1 and 1.0 are
    one class; a 'nan' (or empty, or 'inf') label is refused with its row."""
    (tmp_path / "mixed.csv").write_text("1,2,0\n3,4,1.0\n5,6,0.0\n7,8,1\n")
    _, y, _ = read_csv(tmp_path / "mixed.csv")
    assert y.dtype.kind == "i" and sorted(set(y.tolist())) == [0, 1]
    for bad in ("nan", "", "inf", "NA"):
        (tmp_path / "bad.csv").write_text(f"1,2,0\n3,4,{bad}\n5,6,1\n")
        with pytest.raises(ValueError, match="data row 2: the label .* is missing or not finite"):
            read_csv(tmp_path / "bad.csv")


def test_label_col_by_position_or_name_and_a_hint_for_label_first_files(tmp_path):
    (tmp_path / "first.csv").write_text("benign,1,2\nmalignant,3,4\nbenign,5,6\n")
    with pytest.raises(ValueError, match="pass --label-col 0"):
        read_csv(tmp_path / "first.csv")
    X, y, _ = read_csv(tmp_path / "first.csv", label_col=0)
    assert X.tolist() == [[1, 2], [3, 4], [5, 6]] and y.tolist()[1] == "malignant"
    (tmp_path / "named.csv").write_text("a,label,b\n1,x,2\n3,y,4\n")
    X, y, header = read_csv(tmp_path / "named.csv", label_col="label")
    assert header == ["a", "label", "b"] and X.tolist() == [[1, 2], [3, 4]]
    assert y.tolist() == ["x", "y"]
    with pytest.raises(ValueError, match="has no column 'lab'"):
        read_csv(tmp_path / "named.csv", label_col="lab")


def test_cli_warnings_print_without_the_package_paths(tmp_path):
    """Warnings of a fit print as 'bayesmkl: warning: ...', not with internal file paths."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    rows = np.c_[X, (X[:, 0] > 0).astype(int)]
    np.savetxt(tmp_path / "d.csv", rows, delimiter=",", fmt="%.6g")
    proc = subprocess.run(
        [sys.executable, "-m", "bayesmkl", "fit", str(tmp_path / "d.csv"), "--num-warmup", "5",
         "--num-samples", "5", "--chains", "2", "--out", str(tmp_path / "m")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "bayesmkl: warning:" in proc.stderr  # 5 sweeps: unconverged
    assert "bayesmkl/" not in proc.stderr and ".py:" not in proc.stderr
