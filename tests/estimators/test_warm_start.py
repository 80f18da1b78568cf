"""``BM3KLClassifier(warm_start=True)``: continue the stored chains and append their draws.

The first fit is the shared small configuration of ``test_estimator.py`` (same compiled
programs). The continuation is checked against one longer run with the same seed: the stored
state carries each chain's PRNG key, so the draws must agree bitwise.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from bayesmkl import BM3KLClassifier
from bayesmkl.estimators._resume import data_fingerprint
from tests.estimators.test_estimator import SMALL, small_data

SITES = ("w", "e", "a", "b", "lam", "nu", "varsigma")


@pytest.fixture(scope="module")
def data():
    return small_data()


@pytest.fixture(scope="module")
def first(data):
    Xtr, ytr, _, _ = data
    return BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr)


@pytest.fixture(scope="module")
def resumed(first, data):
    Xtr, ytr, _, _ = data
    clf = copy.deepcopy(first)
    cal = clf.calibrator_
    clf.set_params(warm_start=True, num_samples=15, random_state=123).fit(Xtr, ytr)
    return clf, cal


@pytest.mark.slow
def test_continuation_equals_one_longer_run(first, resumed, data):
    Xtr, ytr, _, _ = data
    clf, _ = resumed
    longer = BM3KLClassifier(random_state=0, **{**SMALL, "num_samples": 25}, calibration=None).fit(
        Xtr, ytr
    )
    for site in SITES:
        assert clf.posterior_[site].shape == longer.posterior_[site].shape
        # the old draws are kept as they were, the new ones continue the same chains
        np.testing.assert_array_equal(clf.posterior_[site][:, :10], first.posterior_[site])
        np.testing.assert_array_equal(clf.posterior_[site], longer.posterior_[site])
    for k in ("acceptance_rate", "potential_energy", "step_size", "diverging"):
        np.testing.assert_array_equal(clf.sample_stats_[k], longer.sample_stats_[k])


def test_resumed_attributes_cover_all_draws(resumed):
    clf, cal = resumed
    assert clf.posterior_["w"].shape[:2] == (2, 25)
    assert clf.run_report_.num_samples == 25 and clf.run_report_.thinning == 1
    assert clf.n_iter_ == 40 + 25
    assert clf.log_likelihood_.shape == (2, 25, 100)
    np.testing.assert_allclose(clf.kernel_weights_, clf.posterior_["w"].mean(axis=(0, 1)))
    # random_state is not used by a continuation: the chains' own keys are
    assert clf.random_seed_ == 0
    # calibration unchanged -> the map of the first fit is kept (no refits)
    assert clf.calibrator_ is cal


def test_warm_start_without_previous_fit_is_a_fresh_fit(first, data):
    Xtr, ytr, _, _ = data
    clf = BM3KLClassifier(random_state=0, warm_start=True, calibration=None, **SMALL)
    clf.fit(Xtr, ytr)
    for site in SITES:
        np.testing.assert_array_equal(clf.posterior_[site], first.posterior_[site])


def _refit(clf, X, y, **params):
    return copy.deepcopy(clf).set_params(warm_start=True, **params).fit(X, y)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"beta_a": 1.0}, "beta_a: None -> 1.0"),
        ({"sampler": "gibbs"}, "sampler"),
        ({"num_chains": 3}, "num_chains"),
        ({"num_warmup": 50}, "num_warmup"),
        ({"binary_mode": "ova"}, "binary_mode"),
    ],
)
def test_changed_parameters_raise(first, data, change, match):
    Xtr, ytr, _, _ = data
    with pytest.raises(ValueError, match=match):
        _refit(first, Xtr, ytr, **change)


def test_changed_data_raises(first, data):
    Xtr, ytr, _, _ = data
    y2 = ytr.copy()
    y2[0] = 1 - y2[0]
    with pytest.raises(ValueError, match="training data"):
        _refit(first, Xtr, y2)
    X2 = Xtr.copy()
    X2[3, 2] += 1e-9
    with pytest.raises(ValueError, match="training data"):
        _refit(first, X2, ytr)
    with pytest.raises(ValueError, match="training data"):
        _refit(first, Xtr[:-1], ytr[:-1])
    sw = np.ones(len(ytr))
    sw[5] = 2.0
    with pytest.raises(ValueError, match="training data"):
        copy.deepcopy(first).set_params(warm_start=True).fit(Xtr, ytr, sample_weight=sw)


def test_loaded_model_cannot_be_resumed(first, data, tmp_path):
    Xtr, ytr, _, _ = data
    first.save(tmp_path / "m.nc")
    loaded = BM3KLClassifier.load(tmp_path / "m.nc")
    assert loaded.warm_start is False  # the parameter round-trips
    with pytest.raises(ValueError, match="cannot be continued"):
        loaded.set_params(warm_start=True).fit(Xtr, ytr)


def test_warm_start_validation(data):
    Xtr, ytr, _, _ = data
    with pytest.raises(ValueError, match="warm_start must be True or False"):
        BM3KLClassifier(warm_start="yes").fit(Xtr, ytr)


def test_fingerprint_sees_dtype_shape_and_values():
    a = np.arange(6.0).reshape(2, 3)
    assert data_fingerprint(a) == data_fingerprint(a.copy())
    assert data_fingerprint(a) != data_fingerprint(a.astype(np.float32))
    assert data_fingerprint(a) != data_fingerprint(a.reshape(3, 2))
    b = a.copy()
    b[1, 2] = np.nextafter(b[1, 2], 10)
    assert data_fingerprint(a) != data_fingerprint(b)
    assert data_fingerprint(a, None) != data_fingerprint(a)
