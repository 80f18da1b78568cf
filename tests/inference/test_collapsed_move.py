"""The collapsed kernel-weight move samples its target: HMC on w | a_I, λ, ν (P = 3) against
quadrature of the collapsed density on the simplex, at a frozen state with part of a active."""

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size

from bayesmkl.inference import collapsed as coll
from bayesmkl.inference import conditionals as cond
from bayesmkl.inference.moves import exact_hmc_move

Z = 4.0


def _frozen_state(N=12, n_active=5):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, 2))
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    K = np.stack([np.exp(-d2 / 0.5), np.exp(-d2 / 4.0), (1.0 + x @ x.T) ** 2 / 10.0])
    a = rng.normal(size=(1, N)) * 0.8
    nu = rng.gamma(1.0, 1.0, size=(1, N))
    lam = rng.gamma(2.0, 0.1, size=(1, N))
    delta = np.sign(x[:, :1].T + 0.3 * rng.normal(size=(1, N)))
    T, V = delta * (1.0 + lam), lam
    K, a, nu = jnp.asarray(K), jnp.asarray(a), jnp.asarray(nu)
    Phi = cond.per_kernel_decisions(K, a)
    data = coll.collapsed_setup(K, a, nu, Phi, n_active)
    return data, jnp.asarray(T), jnp.asarray(V)


def test_collapsed_hmc_matches_quadrature():
    tau = 0.5
    data, T, V = _frozen_state()
    eta = jnp.ones(3)
    # quadrature of p(w) ∝ exp(log p(T | w, ...)) (Dirichlet(1) prior) on a simplex grid
    n = 300
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = i + j <= n
    W = np.stack([i[keep], j[keep], n - i[keep] - j[keep]], -1) / n
    ll = np.asarray(jax.vmap(lambda w: coll.collapsed_log_lik(w, data, T, V, tau))(W))
    p = np.exp(ll - ll.max())
    p /= p.sum()
    truth = p @ W
    truth_sd = np.sqrt(p @ (W - truth) ** 2)
    assert ll.max() - ll.min() > 5.0  # the likelihood informs w: the test has power
    assert np.all(np.abs(truth - 1 / 3) > 3 * truth_sd / np.sqrt(4000))  # far from the prior

    pg = coll.collapsed_potential_and_grad(data, T, V, tau, eta)

    def chain(key):
        k0, k1 = jax.random.split(key)
        e0 = jax.random.gamma(k0, 1.0, (3,))

        def step(e, k):
            res = exact_hmc_move(k, e, jnp.zeros(3), 0.15, pg, n_leapfrog=8)
            return res.e, (res.e / jnp.sum(res.e), res.accept_prob)

        _, (w, acc) = jax.lax.scan(step, e0, jax.random.split(k1, 400))
        return w[100:], acc

    w, acc = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(0), 64))
    w = np.asarray(w)  # (chains, draws, 3)
    assert float(np.mean(acc)) > 0.6
    ess = np.asarray(effective_sample_size(w))
    assert ess.min() > 500
    mean, sd = w.mean((0, 1)), w.std((0, 1))
    np.testing.assert_array_less(np.abs(mean - truth), Z * sd / np.sqrt(ess))
    # the sd of w as well (its MCSE ≈ sd / √(2 ESS) for near-Gaussian marginals)
    np.testing.assert_array_less(np.abs(sd - truth_sd), Z * sd / np.sqrt(2 * ess) + 1e-3)
