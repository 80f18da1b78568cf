"""Tests of the reference samplers (:mod:`bayesmkl.sampler.reference`)."""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro import handlers
from numpyro.infer import MCMC, HMCGibbs

import bayesmkl  # noqa: F401
from bayesmkl.model.classification import Hyper, signed_targets
from bayesmkl.sampler import BM3KL, make_gibbs_fn, marginal_model, reference_kernel

HYPER = Hyper(eta=1.0, alpha_a=1.0, beta_a=1.0, kappa=1.0, bias_prior_var=1e-4, gamma0=2.0)


def _problem(N=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=N) > 0).astype(int)
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    sq = (X**2).sum(1) + 1.0
    poly = (X @ X.T + 1.0) ** 2 / np.outer(sq, sq)  # unit-diagonal degree-2 polynomial
    K = np.stack([np.exp(-d2 / (2 * 0.5**2)), np.exp(-d2 / (2 * 2.0**2)), poly])
    return jnp.asarray(K), jnp.asarray(signed_targets(y, 2))


def test_gibbs_fn_shapes_and_determinism():
    K, delta = _problem()
    fn = make_gibbs_fn(K, delta, HYPER)
    C, N = delta.shape
    sites = {k: jnp.ones((C, N)) for k in ("lam", "a", "nu", "varsigma")} | {"b": jnp.zeros(C)}
    out1 = fn(jax.random.key(0), sites, {"e": jnp.ones(3)})
    out2 = fn(jax.random.key(0), sites, {"e": jnp.ones(3)})
    assert set(out1) == {"lam", "a", "b", "nu", "varsigma"}
    for k, v in out1.items():
        assert v.shape == sites[k].shape and np.all(np.isfinite(v))
        np.testing.assert_array_equal(v, out2[k])
    assert np.all(out1["lam"] > 0) and np.all(out1["nu"] > 0) and np.all(out1["varsigma"] > 0)


def test_reference_kernel_is_hmcgibbs_and_runs():
    K, delta = _problem()
    kern = reference_kernel(K, delta, HYPER)
    assert isinstance(kern, HMCGibbs)
    mcmc = MCMC(kern, num_warmup=30, num_samples=20, progress_bar=False)
    mcmc.run(jax.random.key(0), K, delta)
    s = mcmc.get_samples()
    assert s["e"].shape == (20, 3) and s["a"].shape == (20, 1, 20) and s["lam"].shape == (20, 1, 20)
    assert np.all(np.isfinite(s["e"])) and np.all(s["e"] > 0)
    np.testing.assert_allclose(s["w"].sum(-1), 1.0)


def test_marginal_model_noncentered_has_same_sites():
    K, delta = _problem()
    tr = handlers.trace(handlers.seed(marginal_model(HYPER, noncentered=True), 0)).get_trace(
        K, delta
    )
    assert "a_decentered" in tr and tr["a"]["type"] == "deterministic"
    assert "lam" not in tr  # λ integrated out
    tr_c = handlers.trace(handlers.seed(marginal_model(HYPER, noncentered=False), 0)).get_trace(
        K, delta
    )
    assert tr_c["a"]["type"] == "sample" and "a_decentered" not in tr_c


@pytest.mark.slow
def test_reference_agrees_with_bm3kl_exact():
    """E1 (NUTS on log e inside HMCGibbs) and the BM3KL exact move target the same posterior."""
    K, delta = _problem()
    n_chains = 2
    ref = MCMC(reference_kernel(K, delta, HYPER), num_warmup=300, num_samples=1500,
               num_chains=n_chains, chain_method="sequential", progress_bar=False)  # fmt: skip
    ref.run(jax.random.key(1), K, delta)
    gib = MCMC(BM3KL(*HYPER, move="exact", step_size=0.1), num_warmup=300, num_samples=1500,
               num_chains=n_chains, chain_method="vectorized", jit_model_args=True,
               progress_bar=False)  # fmt: skip
    gib.run(jax.random.key(2), K, delta)
    wr = np.asarray(ref.get_samples()["w"]).reshape(n_chains, -1, 3)
    wg = np.asarray(gib.get_samples()["w"]).reshape(n_chains, -1, 3)
    se = np.sqrt(az.mcse(wr) ** 2 + az.mcse(wg) ** 2)
    z = np.abs(wr.mean((0, 1)) - wg.mean((0, 1))) / se
    assert np.all(z < 4.5), (wr.mean((0, 1)), wg.mean((0, 1)), se)
