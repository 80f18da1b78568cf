"""Model comparison by K-fold ELPD (:mod:`bayesmkl.estimators.compare`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayesmkl import BM3KLClassifier, BM3KLRegressor, KernelPool, compare_kfold
from bayesmkl.estimators.compare import kfold_elpd_of

RUN = dict(num_warmup=10, num_samples=10, num_chains=1, progress_bar=False, random_state=0)


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    return X, (X[:, 0] > 0).astype(int)  # the label is column 0's sign; column 1 is noise


def test_compare_kfold_ranks_the_pool_that_sees_the_signal_first():
    X, y = _data()
    models = {
        "noise": BM3KLClassifier(KernelPool([("gauss", 1.0, [1])]), calibration=None, **RUN),
        "signal": BM3KLClassifier(KernelPool([("gauss", 1.0, [0])]), calibration=None, **RUN),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs
        table = compare_kfold(models, X, y, n_folds=2)
    assert list(table.index) == ["signal", "noise"]
    gap = table.loc["noise", "elpd_diff"]
    assert gap < 0 and abs(gap) > 2 * table.loc["noise", "dse"]


def test_kfold_elpd_is_the_held_out_log_predictive():
    """Each point's elpd_i is its log probability under the fit that did not see it: the sum
    equals the held-out log-loss, which is worse than the in-sample one of the full fit."""
    X, y = _data()
    model = BM3KLClassifier(KernelPool([("gauss", 1.0, [0])]), calibration=None, **RUN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kfold_elpd_of(model, X, y, n_folds=2, random_state=1)
        full = BM3KLClassifier(KernelPool([("gauss", 1.0, [0])]), calibration=None, **RUN)
        full.fit(X, y)
    elpd_i = np.asarray(res.elpd_i)
    assert elpd_i.shape == (60,) and np.all(elpd_i <= 0)
    assert res.elpd == pytest.approx(elpd_i.sum())
    in_sample = np.log(full.predict_proba(X)[np.arange(60), y]).sum()
    assert res.elpd < in_sample
    assert res.n_folds == 2


def test_compare_kfold_refuses_one_model_and_mixed_kinds():
    X, y = _data()
    with pytest.raises(ValueError, match="at least two models"):
        compare_kfold({"a": BM3KLClassifier()}, X, y)
    with pytest.raises(ValueError, match="classifiers with classifiers"):
        compare_kfold({"a": BM3KLClassifier(), "b": BM3KLRegressor()}, X, y)
