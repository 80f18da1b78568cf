"""Messages, far-out test inputs, the CLI's row numbers and blocked prediction under the outside
audit's inputs (issue 46; the reproducers in ../shared/repro/audit-turn4/)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

from bayesmkl import BM3KLClassifier, BM3KLRegressor
from bayesmkl.cli import main
from bayesmkl.exceptions import ExtremeDecisionWarning
from tests.test_hostile_inputs import _assembled

FAST = dict(num_warmup=10, num_samples=10, num_chains=2, progress_bar=False, random_state=0)


@pytest.fixture(scope="module")
def bc40():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:40], y[:40]


def _gram(A, B):
    """Three kernels of standardised rows: two Gaussians and a scaled linear one."""
    g = lambda s: np.exp(-((A[:, None] - B[None]) ** 2).sum(-1) / (2 * s * s * A.shape[1]))  # noqa: E731
    return np.stack([g(4.0), g(1.0), A @ B.T / A.shape[1]])


@pytest.fixture(scope="module")
def precomputed(bc40):
    """``(classifier on precomputed kernels, test kernels of 5 ordinary rows)``."""
    X, y = bc40
    Xs = (X - X.mean(0)) / X.std(0)
    return _assembled(_gram(Xs, Xs), y, kernels="precomputed"), _gram(Xs[:5] + 0.1, Xs)


# --------------------------------------------------------------------------------------------
# messages
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("est", [BM3KLClassifier, BM3KLRegressor])
def test_precomputed_list_of_mismatched_sizes_names_the_shapes(est):
    """precomputed_list_mismatch_message.py: a list of Gram matrices of different sizes failed
    with NumPy's "inhomogeneous shape" message."""
    y = np.arange(40) % 2
    with pytest.raises(ValueError, match=r"differ in shape.*\(40, 40\).*\(30, 30\)"):
        est(kernels="precomputed").fit([np.eye(40), np.eye(30)], y)


def test_precomputed_test_kernel_list_of_mismatched_shapes_names_them(precomputed):
    """precomputed_list_mismatch_message.py, at predict: a list of test kernels of different
    shapes is refused with the shapes named."""
    clf, Kt = precomputed
    with pytest.raises(ValueError, match=r"test kernels differ in shape.*\(5, 40\).*\(4, 40\)"):
        clf.predict_proba([Kt[0], Kt[1, :4], Kt[2]])
    assert clf.predict_proba(list(Kt)).shape == (5, 2)  # a list of equal shapes is a stack


def test_interval_coverage_too_close_to_one_talks_about_coverage():
    """regressor_coverage_message.py: predict_interval(coverage=1 - 1e-16) was refused with a
    message about "quantiles" the caller never passed."""
    with pytest.raises(ValueError, match=r"coverage=.* is too close to 1") as info:
        BM3KLRegressor().predict_interval(np.zeros((2, 3)), 1 - 1e-16)
    assert "quantiles must" not in str(info.value)


# --------------------------------------------------------------------------------------------
# test rows far outside the training data
# --------------------------------------------------------------------------------------------


def test_feature_far_outside_training_range_warns(bc40):
    """predict_feature_1e20_no_warning.py: a feature at 1e20 moved p from 0.97 to 0.63 with no
    warning (the unit-diagonal normalisation keeps f small)."""
    X, y = bc40
    clf = _assembled(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict_proba(X)  # the training rows themselves: no warning
        clf.predict_proba(X.mean(0) + 5 * (X - X.mean(0)))  # five times as spread: no warning
    X2 = X[:3].copy()
    X2[1, 2] = 1e20
    with pytest.warns(ExtremeDecisionWarning, match=r"1 test row\(s\) \(first rows \[1\]\) lie "
                                                   "far outside the training data"):  # fmt: skip
        clf.predict_proba(X2)


def test_precomputed_test_row_far_above_training_scale_warns(precomputed, tmp_path):
    """precomputed_test_row_1e6_silent.py: a test row of all 1e6 (training kernels of unit
    diagonal) gave p = 0.55 with no warning; the threshold was |f| > 1e8."""
    clf, Kt = precomputed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict_proba(Kt)
    Kt = Kt.copy()
    Kt[:, 1, :] = 1e6
    match = r"1 test row\(s\) \(first rows \[1\]\) lie far outside .*largest diagonal"
    with pytest.warns(ExtremeDecisionWarning, match=match):
        clf.predict_proba(Kt)
    clf.save(tmp_path / "m.nc")  # the training scale is saved with the model
    loaded = BM3KLClassifier.load(tmp_path / "m.nc")
    assert loaded.kernel_input_.train_scale == clf.kernel_input_.train_scale
    with pytest.warns(ExtremeDecisionWarning, match=match):
        loaded.predict_proba(Kt)


# --------------------------------------------------------------------------------------------
# the CLI
# --------------------------------------------------------------------------------------------


def test_cli_regression_target_overflow_names_the_file_row(tmp_path, capsys):
    """cli_regression_wrong_row_number.sh: a 1e300 target on data row 40 was refused as "row 2"
    (its index in the training split); the refusal names the row of the file, before fitting."""
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:40], y[:40].copy()
    y[-1] = 1e300
    path = tmp_path / "reg_big.csv"
    lines = (",".join(f"{v:.6g}" for v in x) + f",{t:g}" for x, t in zip(X, y, strict=True))
    path.write_text("\n".join(lines) + "\n")
    rc = main(["fit", str(path), "--task", "regression", "--num-warmup", "5",
               "--num-samples", "5", "--chains", "2", "--no-progress",
               "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "data row 40 is 1e+300" in err and "overflow" in err
    assert not (tmp_path / "o" / "model.nc").exists()
