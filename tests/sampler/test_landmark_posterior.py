"""The landmark sampler as a whole (docs/math.md §16), seeded, with MCSE-based tolerances.

* **Against NUTS on the landmark model's marginal density** (λ integrated out analytically: the
  pseudo-likelihood L′ of §1.6 over all N training points, f = A Ψ_wᵀ + b over M landmark rows;
  NumPyro's NUTS on every continuous site, a non-centred): posterior means of w, b, a few
  landmark weights a_j and the decision values at a few test points agree within
  Z·√(MCSE₁² + MCSE₂²), and so do their posterior standard deviations (ArviZ's MCSE of the
  sd). NUTS shares only the model's density with the sweep
  (:func:`bayesmkl.model.classification.bm3kl_model` reads a non-square K as the landmark
  model), so agreement checks every changed conditional end to end: the weight-space (a, b)
  step, Φ = [Ψ_m a]_m in the pairwise w updates, and the collapsed target over Ψ_w with its
  active set among the M landmark weights: with the default ``n_active`` (32 ≥ M = 10: every
  landmark weight integrated out) and with ``n_active`` = 6 (the other 4 stay in Φ_I). The
  same for the regressor (§15 with §16; also c and ε).
* **M = N with Z = X against the exact sampler** on the same square kernels:
  ``landmarks=True`` (the weight-space (a, b) step) and the exact sweep (the Λ-form step) have
  the same posterior means and standard deviations of w, b, every a_j and the test decision
  values within MCSE.
"""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.infer import MCMC, NUTS
from numpyro.infer.reparam import LocScaleReparam

from bayesmkl.config import x64_scope
from bayesmkl.model.classification import Hyper, signed_targets
from bayesmkl.model.regression import RegHyper, reg_model
from bayesmkl.posterior.predictive import draw_decision_values
from bayesmkl.sampler import run_marginal_nuts
from bayesmkl.sampler.regression import BM3KLReg
from bayesmkl.sampler.sampler import BM3KL

Z = 4.5  # z-score tolerance of each MCSE-based comparison
#: The prior of the exact sampler's NUTS test (tests/sampler/test_sampler.py): moderate
#: shrinkage so that NUTS on the marginal model mixes, γ0 = 2 away from both limits of L′.
HYPER = Hyper(eta=1.0, alpha_a=1.0, beta_a=1.0, kappa=1.0, bias_prior_var=1.0, gamma0=2.0)
#: The prior of the exact regressor's NUTS test (tests/sampler/test_regressor_sampler.py).
REG_HYPER = RegHyper(eta=1.5, alpha_a=1.0, beta_a=3.0, kappa=1.0, bias_prior_var=1.0,
                     c_shape=2.0, c_rate=0.5, eps_shape=1.0, eps_rate=2.0)  # fmt: skip
N_ACTIVE = 6  # fewer than M = 10: the collapsed target keeps 4 landmark weights in Φ_I


def gaussian_blocks(X, Z_, widths=(0.5, 1.0, 2.5)):
    """Unit-diagonal Gaussian kernels between the rows of X and Z_: ``(P, len(X), len(Z_))``."""
    d2 = np.sum((X[:, None, :] - Z_[None, :, :]) ** 2, axis=-1)
    return np.stack([np.exp(-d2 / (2.0 * s**2)) for s in widths])


def landmark_data(n_train=36, n_test=6, M=10, seed=3, target="class"):
    """2-D blobs (or a smooth regression target): K(X, Z) ``(P, N, M)`` with Z = M training rows,
    K(X*, Z) ``(P, T, M)``, the targets, and the square K(X, X) for the M = N checks."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    if target == "class":
        centres = np.array([[-1.0, 0.0], [1.0, 0.5]])
        y = np.arange(n) % 2
        X = centres[y] + rng.normal(size=(n, 2))
        t = signed_targets(y[:n_train], 2)
    else:
        X = rng.uniform(-2.0, 2.0, size=(n, 2))
        y = np.sin(1.5 * X[:, 0]) + 0.4 * X[:, 1] + 0.25 * rng.normal(size=n)
        t = ((y[:n_train] - y[:n_train].mean()) / y[:n_train].std())[None, :]
    idx = np.sort(rng.choice(n_train, M, replace=False))
    Xtr, Xte = X[:n_train], X[n_train:]
    return dict(
        K=jnp.asarray(gaussian_blocks(Xtr, Xtr[idx])),
        K_test=jnp.asarray(gaussian_blocks(Xte, Xtr[idx])),
        K_full=jnp.asarray(gaussian_blocks(Xtr, Xtr)),
        K_full_test=jnp.asarray(gaussian_blocks(Xte, Xtr)),
        targets=jnp.asarray(t),
    )


def summaries(s, K_test, n_chains, n_a=3, extra=()):
    """``(chains, draws, k)``: w, b, the first ``n_a`` sample weights of class 0, f at the
    test points (``n_a=None``: every sample weight) and the scalar sites ``extra``."""
    w, a, b = (jnp.asarray(s[k]).reshape((-1,) + np.shape(s[k])[2:]) for k in ("w", "a", "b"))
    f = np.asarray(draw_decision_values(w, a, b, K_test))[..., 0]
    parts = [np.asarray(w), np.asarray(b), np.asarray(a[:, 0, :n_a]), f]
    parts += [np.asarray(s[k]).reshape(-1, 1) for k in extra]
    x = np.concatenate(parts, axis=1)
    return x.reshape(n_chains, -1, x.shape[-1])


def agree(A, B, what):
    """Means and standard deviations of ``(chains, draws, k)`` arrays within Z combined MCSE
    (ArviZ's MCSE of the mean and of the sd); returns the largest z-scores of each."""
    se = np.sqrt(az.mcse(A) ** 2 + az.mcse(B) ** 2)
    z = np.abs(A.mean((0, 1)) - B.mean((0, 1))) / se
    se_sd = np.sqrt(az.mcse(A, method="sd") ** 2 + az.mcse(B, method="sd") ** 2)
    z_sd = np.abs(A.std((0, 1)) - B.std((0, 1))) / se_sd
    assert np.all(z < Z), f"{what}, means: max z = {z.max():.2f} at {np.argmax(z)}\n{z}"
    assert np.all(z_sd < Z), f"{what}, sds: max z = {z_sd.max():.2f} at {np.argmax(z_sd)}\n{z_sd}"
    print(f"{what}: max z of the means {z.max():.2f}, of the sds {z_sd.max():.2f}; "
          f"min ESS {az.ess(A).min():.0f} / {az.ess(B).min():.0f}")  # fmt: skip
    return z.max(), z_sd.max()


def sweep_chains(kernel, key, args, num_warmup, num_samples, n_chains):
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=n_chains,
                chain_method="vectorized", jit_model_args=True, progress_bar=False)  # fmt: skip
    mcmc.run(key, *args, extra_fields=("accept_prob", "diverging"))
    acc = float(np.mean(mcmc.get_extra_fields()["accept_prob"]))
    assert 0.5 < acc <= 1.0, f"kernel-weight move acceptance {acc:.3f}"
    return mcmc.get_samples(group_by_chain=True)


@pytest.mark.slow
def test_landmark_sweep_agrees_with_marginal_nuts():
    """The default landmark sweep (collapsed_log, Gibbs ν; (a, b) in weight space) against NUTS
    on the landmark model's marginal density, N = 36, M = 10, P = 3, binary."""
    n_chains = 4
    with x64_scope():
        d = landmark_data()
        assert d["K"].shape == (3, 36, 10)
        nuts = run_marginal_nuts(jax.random.key(45), d["K"], d["targets"], HYPER,
                                 num_warmup=300, num_samples=600, num_chains=n_chains,
                                 chain_method="vectorized")  # fmt: skip
        div = float(np.mean(nuts.get_extra_fields()["diverging"]))
        assert div < 0.01, f"NUTS divergence rate {div:.3f}"
        assert nuts.get_samples(group_by_chain=True)["a"].shape == (n_chains, 600, 1, 10)
        xn = summaries(nuts.get_samples(group_by_chain=True), d["K_test"], n_chains)
        assert az.ess(xn).min() > 100, f"ESS of NUTS: {az.ess(xn).min():.0f}"
        for n_active in (32, N_ACTIVE):
            kernel = BM3KL(*HYPER, n_active=n_active)
            xg = summaries(sweep_chains(kernel, jax.random.key(46), (d["K"], d["targets"]),
                                        500, 800, n_chains), d["K_test"], n_chains)  # fmt: skip
            assert az.ess(xg).min() > 100, f"ESS, n_active {n_active}: {az.ess(xg).min():.0f}"
            agree(xg, xn, f"landmark sweep (n_active {n_active}) vs NUTS: w, b, a_0..2, f(test)")


@pytest.mark.slow
def test_landmark_regressor_sweep_agrees_with_marginal_nuts():
    """The regressor's landmark sweep against NUTS on its marginal model (λ⁺, λ⁻ integrated
    out; the prior of the exact regressor's NUTS test): w, b, a_0..2, f(test)."""
    n_chains = 4
    with x64_scope():
        d = landmark_data(target="reg", seed=4)
        model = numpyro.handlers.reparam(
            lambda K, y: reg_model(K, y, REG_HYPER, augmented=False),
            config={"a": LocScaleReparam(0)},
        )
        nuts = MCMC(NUTS(model, max_tree_depth=8), num_warmup=400, num_samples=600,
                    num_chains=n_chains, chain_method="vectorized", progress_bar=False)  # fmt: skip
        nuts.run(jax.random.key(7), d["K"], d["targets"], extra_fields=("diverging",))
        assert np.mean(nuts.get_extra_fields()["diverging"]) < 0.01
        assert nuts.get_samples(group_by_chain=True)["a"].shape == (n_chains, 600, 1, 10)
        xn = summaries(
            nuts.get_samples(group_by_chain=True), d["K_test"], n_chains, extra=("c", "eps")
        )
        kernel = BM3KLReg(*REG_HYPER, n_active=N_ACTIVE)
        xg = summaries(sweep_chains(kernel, jax.random.key(8), (d["K"], d["targets"]), 500,
                                    1200, n_chains), d["K_test"], n_chains,
                       extra=("c", "eps"))  # fmt: skip
    # NUTS mixes worse on the kinked ε-insensitive posterior (as for the exact regressor)
    for x, who, least in ((xn, "NUTS", 50), (xg, "landmark sweep", 300)):
        assert az.ess(x).min() > least, f"ESS of {who}: {az.ess(x).min():.0f}"
    agree(xg, xn, "regressor landmark sweep vs NUTS: w, b, a_0..2, f(test), c, ε")


@pytest.mark.slow
def test_all_points_as_landmarks_reproduce_the_exact_posterior():
    """M = N, Z = X: the landmark sweep (``landmarks=True``) and the exact sweep on the same
    square kernels agree on w, b, every a_j and f at the test points within MCSE."""
    n_chains = 4
    with x64_scope():
        d = landmark_data(n_train=24, seed=5)
        args = (d["K_full"], d["targets"])
        out = {}
        for flag in (False, True):
            s = sweep_chains(BM3KL(*HYPER, landmarks=flag), jax.random.key(int(flag)), args,
                             400, 800, n_chains)  # fmt: skip
            out[flag] = summaries(s, d["K_full_test"], n_chains, n_a=None)
    assert out[True].shape == out[False].shape == (n_chains, 800, 3 + 1 + 24 + 6)
    for x in out.values():
        assert az.ess(x).min() > 100, f"ESS {az.ess(x).min():.0f}"
    agree(out[True], out[False], "M = N landmark sweep vs exact sweep")
