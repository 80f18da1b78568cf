"""Save/load round trips (:mod:`bayesmkl.io`): identical predictions, parameters and draws."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import xarray as xr

from bayesmkl import BM3KLClassifier, KernelPool
from bayesmkl.io import pool_from_state, pool_to_state, save, saved_estimator
from tests.estimators.test_estimator import SMALL, small_data

load = BM3KLClassifier.load  # io.read + _set_fitted (bayesmkl.io does not import the estimator)


@pytest.fixture(scope="module")
def data():
    return small_data()


@pytest.fixture(scope="module")
def fitted(data):
    Xtr, ytr, _, _ = data
    names = np.array(["benign?", "malignant!"])
    # calibration="cv": the round trip covers the refits' out-of-fold predictive and loo_kfold
    return BM3KLClassifier(random_state=0, calibration="cv", **SMALL).fit(Xtr, names[1 - ytr])


def test_round_trip_identical(fitted, data, tmp_path):
    _, _, Xte, _ = data
    path = tmp_path / "model.nc"
    fitted.save(path)
    clf = BM3KLClassifier.load(path)
    np.testing.assert_array_equal(clf.predict_proba(Xte), fitted.predict_proba(Xte))
    np.testing.assert_array_equal(clf.decision_function(Xte), fitted.decision_function(Xte))
    np.testing.assert_array_equal(clf.predict(Xte), fitted.predict(Xte))
    # the calibration map, the out-of-fold log predictive and the log-likelihood group
    assert fitted.calibrator_ is not None and clf.calibrator_ == fitted.calibrator_
    np.testing.assert_array_equal(clf.predict_log_proba(Xte), fitted.predict_log_proba(Xte))
    np.testing.assert_array_equal(clf.oof_log_predictive_, fitted.oof_log_predictive_)
    np.testing.assert_array_equal(clf.log_likelihood_, fitted.log_likelihood_)
    assert clf.loo_kfold().elpd == fitted.loo_kfold().elpd
    raw, raw_back = (copy.deepcopy(c).set_params(calibration=None) for c in (fitted, clf))
    np.testing.assert_array_equal(raw_back.predict_proba(Xte), raw.predict_proba(Xte))
    assert clf.classes_.dtype == fitted.classes_.dtype
    assert clf.classes_.tolist() == fitted.classes_.tolist()
    assert clf.get_params() == fitted.get_params()
    for k, v in fitted.posterior_.items():
        np.testing.assert_array_equal(clf.posterior_[k], v)
    for k, v in fitted.sample_stats_.items():
        np.testing.assert_array_equal(clf.sample_stats_[k], v)
    assert clf.kernel_names_ == fitted.kernel_names_
    assert (clf.n_features_in_, clf.n_iter_, clf.random_seed_) == (30, 50, 0)
    np.testing.assert_array_equal(clf.y_train_, fitted.y_train_)
    # the run report travels with the draws: a loaded unconverged fit still says so
    assert clf.run_report_ == fitted.run_report_ and not clf.run_report_.converged


def test_file_is_an_arviz_datatree(fitted, tmp_path):
    import arviz as az

    path = save(fitted, tmp_path / "m.nc")
    with xr.open_datatree(path, engine="h5netcdf") as tree:
        assert {"posterior", "sample_stats", "observed_data", "kernel_pool"} <= set(tree.children)
        assert tree["posterior"]["w"].dims == ("chain", "draw", "kernel")
        params = json.loads(tree.attrs["bayesmkl_params"])
        assert params["num_warmup"] == 40 and params["kernels"] == "bsvm16"
        summ = az.summary(tree, var_names=["w"])
        assert np.isfinite(summ["r_hat"].astype(float)).all()


def test_precomputed_round_trip(data, tmp_path):
    Xtr, ytr, Xte, _ = data
    from bayesmkl.kernels.input import KernelInput

    kin, K = KernelInput.fit("bsvm16", Xtr)
    Kt = kin.cross(Xte)
    clf = BM3KLClassifier(kernels="precomputed", random_state=0, **SMALL).fit(K, ytr)
    clf.save(tmp_path / "pre.nc")
    back = load(tmp_path / "pre.nc")
    assert back.kernel_input_.pool is None
    assert back.calibrator_ == clf.calibrator_
    np.testing.assert_array_equal(back.predict_proba(Kt), clf.predict_proba(Kt))


def test_multiclass_per_class_map_round_trip(tmp_path):
    """The per-class calibration map (tuples of floats) and the centred pool survive the file."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    tr, te = idx[:60], idx[60:90]
    clf = BM3KLClassifier(random_state=0, **SMALL).fit(X[tr], y[tr])
    assert len(clf.calibrator_.class_temperatures) == 3
    clf.save(tmp_path / "mc.nc")
    back = load(tmp_path / "mc.nc")
    assert back.calibrator_ == clf.calibrator_
    assert back.kernel_input_.pool.center  # three classes: the default pool was centred
    np.testing.assert_array_equal(back.predict_proba(X[te]), clf.predict_proba(X[te]))


def test_pool_state_round_trip():
    """A fitted per-feature, centred pool survives the JSON + arrays split bitwise."""
    rng = np.random.default_rng(0)
    X, Xnew = rng.normal(size=(15, 3)), rng.normal(size=(4, 3))
    pool = KernelPool.simplemkl(center=True, poly_offset=0.5).fit(X)
    meta, arrays = pool_to_state(pool)
    json.dumps(meta)  # JSON-able
    back = pool_from_state(json.loads(json.dumps(meta)), arrays)
    assert back.names == pool.names
    np.testing.assert_array_equal(back.cross_kernels(Xnew), pool.cross_kernels(Xnew))
    unfitted = pool_from_state(meta)
    assert not unfitted.is_fitted
    named = KernelPool.simplemkl().fit(X, feature_names=["age", "dose", "bmi"])
    meta, arrays = pool_to_state(named)
    back = pool_from_state(json.loads(json.dumps(meta)), arrays)
    assert back.names == named.names and "gauss(s=1)[dose]" in back.names
    del meta["feature_names_in"]  # a file written before kernels were named by column
    assert pool_from_state(meta, arrays).names == pool.names


def test_kernelpool_parameter_is_saved(fitted, tmp_path):
    """A KernelPool given as ``kernels`` is stored as its recipe (the fitted model is not
    refitted here: only the parameter's serialisation is checked)."""
    import copy

    clf = copy.deepcopy(fitted)
    clf.kernels = KernelPool.views([10, 20], names=["u", "v"], gauss_widths=(1.0,))
    save(clf, tmp_path / "p.nc")
    back = load(tmp_path / "p.nc")
    assert isinstance(back.kernels, KernelPool)
    assert back.kernels.names == clf.kernels.names and back.kernels.n_features == 30


@pytest.mark.parametrize("reader", [load, saved_estimator], ids=["load", "saved_estimator"])
def test_load_errors(tmp_path, reader):
    with pytest.raises(FileNotFoundError, match="no such model file"):
        reader(tmp_path / "missing.nc")
    bad = tmp_path / "bad.nc"
    bad.write_text("not a netCDF file")
    with pytest.raises(ValueError, match="not a readable netCDF"):
        reader(bad)
    other = tmp_path / "other.nc"
    xr.Dataset({"x": ("i", np.arange(3))}).to_netcdf(other, engine="h5netcdf")
    with pytest.raises(ValueError, match="not a saved bayesmkl model"):
        reader(other)


def test_a_classifier_file_is_not_loaded_as_a_regressor(fitted, tmp_path):
    from bayesmkl import BM3KLRegressor

    fitted.save(tmp_path / "clf.nc")
    assert saved_estimator(tmp_path / "clf.nc") == "BM3KLClassifier"
    with pytest.raises(ValueError, match="holds a fitted BM3KLClassifier; load it with "
                                         "BM3KLClassifier.load"):  # fmt: skip
        BM3KLRegressor.load(tmp_path / "clf.nc")


def test_save_unfitted(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        BM3KLClassifier().save(tmp_path / "x.nc")
