"""``BM3KLRegressor``: fitted attributes, the predictive distribution, DataTree and LOO,
reproducibility, and bad input (docs/math.md §15).

Runtime: every fit that can share a compiled program does (the same 60 training points,
3 kernels, 2 chains, 20 + 30 sweeps); the persistent compilation cache turns the later fits
into loads.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from bayesmkl import BM3KLRegressor, KernelPool
from bayesmkl.kernels import KernelSpec
from bayesmkl.regression.likelihood import noise_cdf

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
