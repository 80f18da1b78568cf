"""``BM3KLRegressor``: fitted attributes, the predictive distribution, DataTree and LOO,
reproducibility, and bad input (docs/math.md §15).

Runtime: every fit that can share a compiled program does (the same 60 training points,
3 kernels, 2 chains, 20 + 30 sweeps); the persistent compilation cache turns the later fits
into loads.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from bayesmkl import BM3KLRegressor, KernelPool
from bayesmkl.kernels import KernelSpec
from bayesmkl.model.regression_likelihood import noise_cdf

FAST = dict(num_warmup=20, num_samples=30, num_chains=2, progress_bar=False, random_state=0)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def pool():
    return KernelPool([KernelSpec("gauss", 0.5), KernelSpec("gauss", 2.0), KernelSpec("poly", 1)])


def data(n=60, m=15, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + m, 2))
    y = 10.0 + 3.0 * np.sin(1.5 * X[:, 0]) + X[:, 1] + 0.5 * rng.normal(size=n + m)
    return X[:n], y[:n], X[n:], y[n:]


@pytest.fixture(scope="module")
def fitted():
    Xtr, ytr, _, _ = data()
    return BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr)


def test_fitted_attributes(fitted):
    Xtr, ytr, _, _ = data()
    post = fitted.posterior_
    assert post["w"].shape == (2, 30, 3) and post["a"].shape == (2, 30, 1, 60)
    assert post["c"].shape == post["eps"].shape == (2, 30)
    assert np.all(post["c"] > 0) and np.all(post["eps"] > 0)
    np.testing.assert_allclose(fitted.kernel_weights_, post["w"].mean((0, 1)))
    assert fitted.y_mean_ == pytest.approx(ytr.mean()) and fitted.y_scale_ == pytest.approx(
        ytr.std()
    )
    assert fitted.epsilon_ == pytest.approx(post["eps"].mean() * ytr.std())
    assert fitted.noise_sd_ > 0 and fitted.n_features_in_ == 2
    K = pool().fit(Xtr).train_kernels().mean(axis=0)
    assert fitted.kappa_ == pytest.approx(60 / np.sum(K**2))  # N / ‖K̄‖²_F
    assert fitted.log_likelihood_.shape == (2, 30, 60)
    assert np.all(np.isfinite(fitted.log_likelihood_))
    assert fitted.run_report_.stopped_by == "num_samples" and fitted.n_iter_ == 50


def test_predictive_mean_std_quantiles_and_density(fitted):
    _, _, Xte, yte = data()
    mean, std = fitted.predict(Xte, return_std=True)
    mu = fitted.function_draws(Xte)
    np.testing.assert_allclose(mean, mu.mean(axis=0))
    assert np.all(std > mu.std(axis=0))  # the noise adds to the spread of f
    assert fitted.score(Xte, yte) > 0.5
    q = fitted.predict_quantiles(Xte, [0.05, 0.5, 0.95])
    assert q.shape == (15, 3) and np.all(np.diff(q, axis=1) > 0)
    # each quantile is one of the mixture's: mean over draws of the component CDFs
    c, eps = (fitted.posterior_[k].reshape(-1) for k in ("c", "eps"))
    cdf = noise_cdf((q[None, :, :] - mu[:, :, None]) / fitted.y_scale_, c[:, None, None],
                    eps[:, None, None]).mean(axis=0)  # fmt: skip
    np.testing.assert_allclose(cdf, np.broadcast_to([0.05, 0.5, 0.95], cdf.shape), atol=1e-9)
    np.testing.assert_allclose(fitted.predict_quantiles(Xte, 0.5), q[:, 1])
    iv = fitted.predict_interval(Xte, coverage=0.9)
    np.testing.assert_allclose(iv, q[:, [0, 2]])
    lpd = fitted.log_predictive_density(Xte, yte)
    assert lpd.shape == (15,) and np.all(np.isfinite(lpd))
    # the density integrates to 1 over y (trapezoid on a wide grid, one test point)
    grid = np.linspace(mean[0] - 12 * std[0], mean[0] + 12 * std[0], 4001)
    dens = np.exp(fitted.log_predictive_density(np.repeat(Xte[:1], len(grid), 0), grid))
    assert np.trapezoid(dens, grid) == pytest.approx(1.0, abs=2e-3)
    ys = fitted.sample_predictive(Xte, random_state=1)
    assert ys.shape == mu.shape and np.all(np.isfinite(ys))


def test_datatree_and_loo(fitted):
    import arviz as az

    tree = fitted.to_datatree()
    assert {"posterior", "sample_stats", "observed_data", "log_likelihood"} <= set(tree.children)
    assert tree["posterior"]["w"].dims == ("chain", "draw", "kernel")
    assert tree["posterior"]["a"].dims == ("chain", "draw", "obs")
    assert tree["posterior"]["c"].dims == ("chain", "draw")
    assert tree["log_likelihood"]["y"].shape == (2, 30, 60)
    np.testing.assert_allclose(tree["observed_data"]["y"].values, data()[1])
    res = az.loo(tree)
    assert np.isfinite(res.elpd) and res.elpd < 0
    assert fitted.loo().elpd == pytest.approx(res.elpd)


def test_same_seed_same_draws_and_precomputed_matches_features(fitted):
    Xtr, ytr, Xte, _ = data()
    again = BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr)
    np.testing.assert_array_equal(again.posterior_["c"], fitted.posterior_["c"])
    p = pool().fit(Xtr)
    pre = BM3KLRegressor("precomputed", **FAST).fit(p.train_kernels(), ytr)
    np.testing.assert_allclose(
        pre.predict(p.cross_kernels(Xte)), fitted.predict(Xte), rtol=1e-9, atol=1e-9
    )
    # the pointwise log-likelihood makes fits comparable (here two of the same pool)
    import arviz as az

    cmp = az.compare({"features": fitted.to_datatree(), "precomputed": pre.to_datatree()})
    assert len(cmp) == 2 and np.all(np.isfinite(cmp["elpd"]))


def test_fixed_epsilon_is_kept_in_the_units_of_y():
    Xtr, ytr, _, _ = data()
    reg = BM3KLRegressor(pool(), epsilon=0.2, kappa=0.5, **FAST).fit(Xtr, ytr)
    np.testing.assert_allclose(reg.posterior_["eps"], 0.2 / ytr.std())
    assert reg.kappa_ == 0.5
    assert reg.epsilon_ == pytest.approx(0.2)


def test_sample_weight_plot_takes_a_regressor(fitted):
    # it raised AttributeError('classes_'): the plot assumed a classifier
    from bayesmkl import plots

    fig = plots.plot_sample_weights(fitted)
    (ax,) = fig.axes
    title = ax.get_title(loc="left")
    assert title.startswith("regression function: ")
    assert "of 60 points above 10% of the largest" in title


# --------------------------------------------------------------------------------------------
# save / load (bayesmkl.io, shared with the classifier)
# --------------------------------------------------------------------------------------------


def test_save_load_round_trip_is_identical(fitted, tmp_path):
    # io.save raised AttributeError('classes_') on a regressor before
    _, _, Xte, yte = data()
    path = tmp_path / "reg.nc"
    fitted.save(path)
    back = BM3KLRegressor.load(path)
    (m1, s1), (m0, s0) = back.predict(Xte, return_std=True), fitted.predict(Xte, return_std=True)
    np.testing.assert_array_equal(m1, m0)
    np.testing.assert_array_equal(s1, s0)
    np.testing.assert_array_equal(back.predict_quantiles(Xte), fitted.predict_quantiles(Xte))
    np.testing.assert_array_equal(back.log_predictive_density(Xte, yte),
                                  fitted.log_predictive_density(Xte, yte))  # fmt: skip
    for k, v in fitted.posterior_.items():
        np.testing.assert_array_equal(back.posterior_[k], v)
        assert back.posterior_[k].shape == v.shape
    for k, v in fitted.sample_stats_.items():
        np.testing.assert_array_equal(back.sample_stats_[k], v)
    np.testing.assert_array_equal(back.log_likelihood_, fitted.log_likelihood_)
    np.testing.assert_array_equal(back.y_train_, fitted.y_train_)
    assert (back.y_mean_, back.y_scale_, back.kappa_) == (
        fitted.y_mean_,
        fitted.y_scale_,
        fitted.kappa_,
    )
    assert (back.epsilon_, back.noise_sd_, back.n_iter_, back.n_features_in_) == (
        fitted.epsilon_,
        fitted.noise_sd_,
        fitted.n_iter_,
        2,
    )
    assert back.run_report_ == fitted.run_report_
    assert back.get_params().keys() == fitted.get_params().keys()
    assert back.kernels.names == fitted.kernels.names
    assert back.loo().elpd == fitted.loo().elpd


def test_load_refuses_the_other_estimator_and_a_stripped_checksum(fitted, tmp_path):
    import h5py

    from bayesmkl import BM3KLClassifier
    from bayesmkl.io import saved_estimator

    path = tmp_path / "reg.nc"
    fitted.save(path)
    assert saved_estimator(path) == "BM3KLRegressor"
    with pytest.raises(ValueError, match="holds a fitted BM3KLRegressor; load it with "
                                         "BM3KLRegressor.load"):  # fmt: skip
        BM3KLClassifier.load(path)
    with h5py.File(path, "r+") as f:
        f["posterior/c"][0, 0] *= 2.0
        del f.attrs["bayesmkl_sha256"]
    with pytest.raises(ValueError, match="checksum"):
        BM3KLRegressor.load(path)


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["X", "y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_are_refused(where, bad):
    Xtr, ytr, _, _ = data()
    Xtr, ytr = Xtr.copy(), ytr.copy()
    (Xtr if where == "X" else ytr)[3] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr)


def test_constant_y_is_refused():
    Xtr, _, _, _ = data()
    with pytest.raises(ValueError, match="y is constant"):
        BM3KLRegressor(pool(), **FAST).fit(Xtr, np.full(len(Xtr), 3.0))


def test_y_whose_variance_overflows_is_refused():
    # one target of 1e300: np.std(y) is inf, and every prediction was NaN without a word
    Xtr, ytr, _, _ = data()
    ytr = ytr.copy()
    ytr[7] = 1e300
    with pytest.raises(ValueError, match=r"y cannot be standardised: its value 1e\+300 \(row 7\)"):
        BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr)
    # far from overflow a huge scale is fine: the fit works on the standardised targets
    Xtr, ytr, Xte, _ = data()
    big = BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr * 1e150).predict(Xte)
    assert np.all(np.isfinite(big)) and np.all(np.abs(big) > 1e149)
    # and so is a tiny one (np.std(y) underflowed to 0 and the fit was refused as an overflow)
    small = BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr * 1e-200).predict(Xte)
    np.testing.assert_allclose(small * 1e200, big * 1e-150, rtol=1e-6)


def test_epsilon_beyond_finite_arithmetic_is_refused():
    # epsilon = 1e300 in the units of y diverged in the sampler; the bound says why up front
    Xtr, ytr, _, _ = data()
    with pytest.raises(ValueError, match="standard deviations of y; at most 1e\\+100"):
        BM3KLRegressor(pool(), **{**FAST, "epsilon": 1e300}).fit(Xtr, ytr)


def test_wrong_shapes_are_refused(fitted):
    Xtr, ytr, Xte, yte = data()
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        BM3KLRegressor(pool(), **FAST).fit(Xtr, ytr[:-1])
    with pytest.raises(ValueError, match="2D array"):
        BM3KLRegressor(pool(), **FAST).fit(Xtr[:, 0], ytr)
    with pytest.raises(ValueError, match=r"\(P, N, N\)"):
        BM3KLRegressor("precomputed", **FAST).fit(np.ones((3, 60, 59)), ytr)
    with pytest.raises(ValueError, match="y has 59 values"):
        BM3KLRegressor("precomputed", **FAST).fit(np.ones((3, 60, 60)), ytr[:-1])
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.ones((4, 3)))
    with pytest.raises(ValueError, match="finite numbers"):
        fitted.log_predictive_density(Xte, yte[:-1])
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        fitted.predict_quantiles(Xte, [0.5, 1.0])
    for coverage in ("0.9", None, True, 1.0, float("nan")):
        with pytest.raises(ValueError, match=r"coverage must be a number in \(0, 1\)"):
            fitted.predict_interval(Xte, coverage)
    with pytest.raises(NotFittedError):
        BM3KLRegressor().predict(Xte)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": -1.0}, "epsilon must be"),
        ({"epsilon": "learn"}, "epsilon must be"),
        ({"c_shape": 0.0}, "c_shape must be"),
        ({"eps_rate": -2.0}, "eps_rate must be"),
        ({"kappa": "sometimes"}, "kappa must be"),
        ({"sampler": "paper"}, "sampler must be"),
        ({"prior": "flat"}, "prior must be"),
        ({"num_chains": 0}, "num_chains must be"),
    ],
)
def test_bad_parameters_are_refused(params, match):
    Xtr, ytr, _, _ = data()
    with pytest.raises(ValueError, match=match):
        BM3KLRegressor(pool(), **{**FAST, **params}).fit(Xtr, ytr)


def test_budget_spent_in_warm_up_says_so():
    # the regressor wrote its own message and said "after 0 sweeps" with 50 draws in hand;
    # it now shares the classifier's, which names what those draws are
    Xtr, ytr, _, _ = data()
    reg = BM3KLRegressor(pool(), num_warmup=100, num_chains=2, max_time=1e-3,
                         progress_bar=False, random_state=0)  # fmt: skip
    with pytest.warns(ConvergenceWarning) as record:
        reg.fit(Xtr, ytr)
    msg = " ".join(str(w.message) for w in record if w.category is ConvergenceWarning)
    assert "BM3KLRegressor stopped at its max_time budget during warm-up" in msg
    assert f"after {reg.run_report_.warmup_sweeps} warm-up sweeps per chain" in msg
    assert "its draws are warm-up sweeps, not a posterior sample" in msg
    assert reg.run_report_.num_samples == 0 and reg.posterior_["w"].shape[1] > 0
    with pytest.warns(ConvergenceWarning, match="predictions come from warm-up draws") as rec:
        reg.predict(Xtr[:3])
    assert rec[0].filename == __file__  # at the caller's line
