"""The collapsed kernel-weight move samples its target: HMC on w | a_I, λ, ν (P = 3) against
quadrature of the collapsed density on the simplex, at a frozen state with part of a active,
in both coordinates of the move (u = 2√e, and u = log e, the default sampler's)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size

from bayesmkl.sampler import collapsed as coll
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.moves import exact_hmc_move

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


@pytest.mark.parametrize("position", ["sqrt", "log"])
def test_collapsed_hmc_matches_quadrature(position):
    """In u = log e the scales of the coordinates differ by orders of magnitude (a small
    weight's log spreads over units, a large one's over hundredths), so, as in the sampler's
    warm-up, a pilot run learns the inverse mass matrix first: any fixed mass leaves the
    target invariant, and the main run with it is what is checked."""
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

    def chain(key, eps, mass_sqrt, n_iter=400):
        k0, k1 = jax.random.split(key)
        e0 = jax.random.gamma(k0, 1.0, (3,))

        def step(e, k):
            res = exact_hmc_move(
                k, e, jnp.zeros(3), eps, pg, n_leapfrog=8, mass_sqrt=mass_sqrt, position=position
            )
            return res.e, (res.e, res.accept_prob)

        _, (e, acc) = jax.lax.scan(step, e0, jax.random.split(k1, n_iter))
        return e[n_iter // 4 :] / jnp.sum(e[n_iter // 4 :], -1, keepdims=True), e, acc

    mass_sqrt, eps = jnp.eye(3), 0.15
    if position == "log":  # pilot: small steps, identity mass; then L = chol(cov(log e))
        _, e_pilot, _ = jax.jit(jax.vmap(lambda k: chain(k, 0.02, jnp.eye(3))))(
            jax.random.split(jax.random.key(1), 64)
        )
        u = np.log(np.asarray(e_pilot)[:, 100:]).reshape(-1, 3)
        mass_sqrt, eps = jnp.asarray(np.linalg.cholesky(np.cov(u.T))), 0.35
    w, _, acc = jax.jit(jax.vmap(lambda k: chain(k, eps, mass_sqrt)))(
        jax.random.split(jax.random.key(0), 64)
    )
    w = np.asarray(w)  # (chains, draws, 3)
    assert float(np.mean(acc)) > 0.6
    ess = np.asarray(effective_sample_size(w))
    assert ess.min() > 500
    mean, sd = w.mean((0, 1)), w.std((0, 1))
    np.testing.assert_array_less(np.abs(mean - truth), Z * sd / np.sqrt(ess))
    # the sd of w as well (its MCSE ≈ sd / √(2 ESS) for near-Gaussian marginals)
    np.testing.assert_array_less(np.abs(sd - truth_sd), Z * sd / np.sqrt(2 * ess) + 1e-3)
