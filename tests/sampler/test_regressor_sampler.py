"""The regression sampler as a whole (docs/math.md §15.5), seeded, with MCSE-based tolerances.

* **Against NUTS on the marginal model** (λ⁺, λ⁻ integrated out analytically; NumPyro's NUTS
  on every continuous site of :func:`~bayesmkl.model.regression.reg_model` with
  ``augmented=False``, the sample weights non-centred): posterior means of w, b, c, ε and of
  f at a few training and test points agree within Z·√(MCSE₁² + MCSE₂²). The two samplers
  share only the model's density.
* **Simulation-based calibration** (Talts et al. 2018): data sets simulated from the prior
  (θ from the priors, y from the normalised ε-insensitive likelihood), one chain of the sweep
  per data set (vectorised over data sets; the exact pairwise ``"gibbs"`` kernel-weight move,
  which compiles and runs fastest: the default move is the NUTS test's), and the rank of the
  true θ among thinned posterior draws; ranks of w₁, b, c, ε and f at two points must be
  uniform (χ² test over 5 bins, p > 1e-3 each). This is possible only because the likelihood
  is normalised in y.
"""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
import scipy.stats as st
from numpyro.infer import MCMC, NUTS
from numpyro.infer.reparam import LocScaleReparam

from bayesmkl.kernels.pool import KernelPool, KernelSpec
from bayesmkl.model.classification import combine_kernels, decision_values
from bayesmkl.model.regression import RegHyper, reg_model
from bayesmkl.model.regression_likelihood import noise_sample
from bayesmkl.posterior.predictive import draw_decision_values
from bayesmkl.sampler import build_sweep, init_state
from bayesmkl.sampler.regression import BM3KLReg
from bayesmkl.sampler.runner import ChainRunner

Z = 4.5
#: Moderate shrinkage so that NUTS on the marginal model mixes: with β_a = 1 (a heavier TPB
#: tail) NUTS needed 1,023 leapfrog steps per draw and reached an ESS of 34 in 4 × 400 draws.
SMALL = RegHyper(eta=1.5, alpha_a=1.0, beta_a=3.0, kappa=1.0, bias_prior_var=1.0, c_shape=2.0,
                 c_rate=0.5, eps_shape=1.0, eps_rate=2.0)  # fmt: skip


def small_problem(n_train=30, n_test=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n_train + n_test, 2))
    y = np.sin(1.5 * X[:, 0]) + 0.4 * X[:, 1] + 0.25 * rng.normal(size=len(X))
    specs = [KernelSpec("gauss", 0.5), KernelSpec("gauss", 2.0), KernelSpec("poly", 2)]
    pool = KernelPool(specs).fit(X[:n_train])
    K = jnp.asarray(pool.train_kernels())
    K_test = jnp.asarray(pool.cross_kernels(X[n_train:]))
    ys = (y[:n_train] - y[:n_train].mean()) / y[:n_train].std()
    return K, K_test, jnp.asarray(ys[None])


def summaries(s, K, K_test, n_chains):
    """``(chains, draws, k)`` arrays of w, b, c, ε and f at 4 training and 4 test points."""
    w, a, b = (jnp.asarray(s[k]).reshape((-1,) + np.shape(s[k])[2:]) for k in ("w", "a", "b"))
    f_tr = np.asarray(draw_decision_values(w, a, b, K[:, :4]))[..., 0]
    f_te = np.asarray(draw_decision_values(w, a, b, K_test[:, :4]))[..., 0]
    flat = [np.asarray(w), np.asarray(b), np.asarray(s["c"]).reshape(-1, 1),
            np.asarray(s["eps"]).reshape(-1, 1), f_tr, f_te]  # fmt: skip
    x = np.concatenate(flat, axis=1)
    return x.reshape(n_chains, -1, x.shape[-1])


@pytest.mark.slow
def test_sweep_agrees_with_marginal_nuts():
    """Default sweep (collapsed_log) vs NUTS: means of w, b, c, ε, f within Z MCSE. NUTS mixes
    far worse on this kinked posterior (measured ESS 51–760 in 4 × 500 draws, against 820–2400
    for 4 × 1200 sweeps), so its MCSE dominates the tolerance."""
    K, K_test, y = small_problem()
    n_chains = 4
    model = numpyro.handlers.reparam(
        lambda K, y: reg_model(K, y, SMALL, augmented=False), config={"a": LocScaleReparam(0)}
    )
    nuts = MCMC(NUTS(model, max_tree_depth=8), num_warmup=400, num_samples=600,
                num_chains=n_chains, chain_method="vectorized", progress_bar=False)  # fmt: skip
    nuts.run(jax.random.key(7), K, y, extra_fields=("diverging",))
    assert np.mean(nuts.get_extra_fields()["diverging"]) < 0.01
    xn = summaries(nuts.get_samples(group_by_chain=True), K, K_test, n_chains)

    runner = ChainRunner(BM3KLReg(*SMALL, adapt_sweeps=300), n_chains, 1200)
    runner.run(jax.random.key(3), K, y)
    xg = summaries({k: v[:, 300:] for k, v in runner.get_samples().items()}, K, K_test, n_chains)
    for x, who, least in ((xn, "NUTS", 50), (xg, "Gibbs", 300)):
        assert az.ess(x).min() > least, (who, az.ess(x).min())
    se = np.sqrt(az.mcse(xn) ** 2 + az.mcse(xg) ** 2)
    z = np.abs(xn.mean((0, 1)) - xg.mean((0, 1))) / se
    assert np.all(z < Z), f"max z = {z.max():.2f} at {np.argmax(z)}\n{xn.mean((0, 1))}\n" + str(
        xg.mean((0, 1))
    )


# =============================================================================================
# simulation-based calibration
# =============================================================================================
SBC_HYPER = RegHyper(eta=2.0, alpha_a=1.0, beta_a=3.0, kappa=1.0, bias_prior_var=0.5,
                     c_shape=4.0, c_rate=2.0, eps_shape=2.0, eps_rate=4.0)  # fmt: skip
SBC_N = 12
SBC_SETS = 200
SBC_WARMUP, SBC_KEEP, SBC_THIN = 100, 180, 20  # 9 kept draws per data set → ranks 0..9
SBC_BINS = 5


def prior_draw(key, K, h: RegHyper):
    """θ from the prior and y | θ from the normalised likelihood (NumPy noise, seeded by key)."""
    P, N = K.shape[0], K.shape[1]
    ks = jax.random.split(key, 8)
    e = jax.random.gamma(ks[0], h.eta, (P,))
    vs = jax.random.gamma(ks[1], h.beta_a, (1, N)) / h.kappa
    nu = jax.random.gamma(ks[2], h.alpha_a, (1, N)) / vs
    a = jnp.sqrt(nu) * jax.random.normal(ks[3], (1, N))
    b = np.sqrt(h.bias_prior_var) * jax.random.normal(ks[4], (1,))
    c = jax.random.gamma(ks[5], h.c_shape) / h.c_rate
    eps = jax.random.gamma(ks[6], h.eps_shape) / h.eps_rate
    f = decision_values(combine_kernels(K, e / e.sum()), a, b)
    return dict(w=e / e.sum(), b=b, c=c, eps=eps, f=f)


@pytest.mark.slow
def test_simulation_based_calibration():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-2, 2, size=SBC_N))[:, None]
    d2 = (X - X.T) ** 2
    K = jnp.asarray(np.stack([np.exp(-d2 / (2 * 0.5**2)), np.exp(-d2 / (2 * 2.0**2))]))
    kern = BM3KLReg(*SBC_HYPER, move="gibbs", adapt_sweeps=SBC_WARMUP)
    config, lik = kern.config, kern.likelihood
    sweep = build_sweep(lik, config, SBC_WARMUP)
    truths = [prior_draw(k, K, SBC_HYPER) for k in jax.random.split(jax.random.key(5), SBC_SETS)]
    truth = {k: np.stack([np.asarray(t[k]) for t in truths]) for k in truths[0]}
    noise = noise_sample(rng, truth["c"][:, None], truth["eps"][:, None] * np.ones(SBC_N))
    y = jnp.asarray(truth["f"][:, 0] + noise)[:, None, :]  # (sets, 1, N)

    def chain(key, y):
        state = init_state(lik, key, K, y, config).state

        def step(s, _):
            s, info = sweep(s, K, y)
            z, f = s.z, info.f
            return s, (z.e[0] / z.e.sum(), z.b[0], z.c, z.eps, f[0, 0], f[0, -1])

        _, out = jax.lax.scan(step, state, None, length=SBC_WARMUP + SBC_KEEP)
        return tuple(o[SBC_WARMUP::SBC_THIN] for o in out)

    keys = jax.random.split(jax.random.key(11), SBC_SETS)
    draws = [np.asarray(d) for d in jax.jit(jax.vmap(chain))(keys, y)]  # each (sets, L)
    names = ("w1", "b", "c", "eps", "f_first", "f_last")
    true = (truth["w"][:, 0], truth["b"][:, 0], truth["c"], truth["eps"], truth["f"][:, 0, 0],
            truth["f"][:, 0, -1])  # fmt: skip
    L = draws[0].shape[1]
    for name, d, t in zip(names, draws, true, strict=True):
        ranks = np.sum(d < t[:, None], axis=1)  # 0..L
        counts = np.bincount(ranks * SBC_BINS // (L + 1), minlength=SBC_BINS)
        p = st.chisquare(counts).pvalue
        assert p > 1e-3, (name, counts, p)
