"""What the DataTree labels (issue 46): the ``obs`` coordinate carries a pandas ``DataFrame``'s
index (``train_index_``, kept by ``save``/``load``), and a regressor's ``eps`` is in units of y,
like ``epsilon_``, with the sampler's standardised draws beside it as ``eps_standardised``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesmkl import BM3KLClassifier, BM3KLRegressor, KernelPool
from bayesmkl.kernels import KernelSpec
from bayesmkl.posterior.diagnostics import regression_posterior_from_tree

FAST = dict(num_warmup=10, num_samples=10, num_chains=2, progress_bar=False, random_state=0)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def pool():
    return KernelPool([KernelSpec("gauss", 1.0), KernelSpec("poly", 1)])


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    index = pd.Index([f"patient-{i}" for i in range(24)], name="id")
    X = pd.DataFrame(rng.normal(size=(24, 2)), columns=["u", "v"], index=index)
    return X, (X["u"] + 0.3 * rng.normal(size=24) > 0).astype(int), 50.0 * X["u"] + 120.0


def _obs(tree, group):
    return tree[group]["obs"].values.tolist()


def test_dataframe_index_is_the_classifiers_obs_coordinate(frame, tmp_path):
    X, y, _ = frame
    clf = BM3KLClassifier(pool(), calibration=None, **FAST).fit(X, y)
    names = X.index.tolist()
    assert clf.train_index_.tolist() == names
    tree = clf.to_datatree(posterior_predictive=True)
    for group in ("posterior", "observed_data", "log_likelihood", "posterior_predictive"):
        assert _obs(tree, group) == names, group
    assert _obs(clf.predict_datatree(X.iloc[[3, 1]]), "predictions") == [names[3], names[1]]
    clf.save(tmp_path / "clf.nc")
    loaded = BM3KLClassifier.load(tmp_path / "clf.nc")
    assert loaded.train_index_.tolist() == names
    assert _obs(loaded.to_datatree(), "posterior") == names


def test_dataframe_index_is_the_regressors_obs_coordinate(frame, tmp_path):
    X, _, t = frame
    Xd = X.set_axis(pd.date_range("2024-01-01", periods=len(X), freq="D"))  # dates: as strings
    reg = BM3KLRegressor(pool(), **FAST).fit(Xd, t.to_numpy())
    tree = reg.to_datatree()
    assert _obs(tree, "posterior")[0].startswith("2024-01-01")
    assert _obs(tree, "posterior") == _obs(tree, "log_likelihood") == reg.train_index_.tolist()
    reg.save(tmp_path / "reg.nc")  # no 'units' attribute on the dates: the file loads
    assert BM3KLRegressor.load(tmp_path / "reg.nc").train_index_.tolist() == _obs(tree, "posterior")


def test_arrays_keep_obs_0_to_n_minus_1(frame):
    X, y, _ = frame
    clf = BM3KLClassifier(pool(), calibration=None, **FAST).fit(X.to_numpy(), y.to_numpy())
    assert clf.train_index_.tolist() == list(range(len(y)))
    assert _obs(clf.to_datatree(), "posterior") == list(range(len(y)))


def test_regressor_eps_in_the_tree_is_in_units_of_y(frame, tmp_path):
    """The tree's eps was the standardised draw (0.95) beside epsilon_ in units of y (77.8)."""
    X, _, t = frame
    reg = BM3KLRegressor(pool(), **FAST).fit(X, t)
    post = reg.to_datatree()["posterior"]
    assert float(post["eps"].mean()) == pytest.approx(reg.epsilon_, rel=1e-12)
    np.testing.assert_array_equal(post["eps_standardised"].values, reg.posterior_["eps"])
    assert "units of y" in post["eps"].attrs["description"]
    assert "standardised" in post["eps_standardised"].attrs["description"]
    reg.save(tmp_path / "reg.nc")  # the loaded model samples eps from the standardised draws
    loaded = BM3KLRegressor.load(tmp_path / "reg.nc")
    np.testing.assert_array_equal(loaded.posterior_["eps"], reg.posterior_["eps"])
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))
    assert loaded.epsilon_ == pytest.approx(reg.epsilon_, rel=1e-14)  # summation order


def test_a_tree_saved_before_eps_standardised_reads_eps_as_standardised():
    """Files written before this change hold the standardised draws under ``eps``."""
    old = {"eps": np.full((2, 3), 0.5), "b": np.zeros((2, 3))}
    new = {"eps": np.full((2, 3), 40.0), "eps_standardised": np.full((2, 3), 0.5), "b": old["b"]}
    for tree in (old, new):
        post = regression_posterior_from_tree(tree)
        assert set(post) == {"eps", "b"} and np.all(post["eps"] == 0.5)
        assert post["b"].shape == (2, 3, 1)
