"""The collapsed TPBN update of :mod:`bayesmkl.inference.tpbn` (ν with a, b, ς integrated out).

Oracles:

* the dense marginal density of the pseudo-targets, log N(T_c; 0, K_w diag ν K_w + τ11ᵀ + diag
  V) evaluated by scipy for each value of ν_i, plus the TPB prior of ν_i obtained by numerical
  integration of Gamma(ν; α, ς)·Gamma(ς; β, κ) over ς — independent of the closed forms in the
  module; both are compared as differences over a grid of ν_i (the module is specified up to a
  constant) to 1e-8 or the derived rounding bound of the stiff case (~1e-6), far below any wrong
  term (O(1) differences);
* quadrature of the 1-D conditional (a KS test of the slice sampler's draws);
* the existing TPBN Gibbs (a, b) | ν → ν | a, ς → ς | ν, which leaves the same conditional
  p(a, b, ν, ς | w, λ) invariant: both chains' means agree within a derived MCSE bound.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import make_problem, pooled_mean_mcse
from scipy import integrate, stats

from bayesmkl.inference import conditionals as cond
from bayesmkl.inference import tpbn
from bayesmkl.model import Hyper, combine_kernels

TAU = 0.3


def _class_problem(seed, N=7, stiff=False):
    pb = make_problem(seed=seed, N=N, C=1, P=3)
    Kw = np.tensordot(pb["e"] / pb["e"].sum(), pb["K"], axes=1)
    lam, nu = pb["lam"][0].copy(), pb["nu"][0].copy()
    if stiff:  # pruned points at the paper's κ scale, a large scale, λ over six decades
        nu[::3] = 1e-10
        nu[1] = 50.0
        lam = lam * np.geomspace(1e-6, 1.0, N)
    t = pb["delta"][0] * (1.0 + lam)
    return Kw, t, lam, nu


def _dense_loglik(Kw, t, v, nu):
    Sigma = (Kw * nu) @ Kw + TAU + np.diag(v)
    return stats.multivariate_normal(np.zeros(len(t)), Sigma).logpdf(t)


def _tpb_log_prior(nu, alpha, beta, kappa):
    """log ∫ Gamma(ν; α, rate ς) Gamma(ς; β, rate κ) dς by quadrature in log ς."""

    def f(ls):
        s = np.exp(ls)
        return np.exp(
            stats.gamma.logpdf(nu, alpha, scale=1.0 / s)
            + stats.gamma.logpdf(s, beta, scale=1.0 / kappa)
            + ls
        )

    val, _ = integrate.quad(f, -40.0, 40.0, limit=400, epsabs=0.0, epsrel=1e-12)
    return np.log(val)


@pytest.mark.parametrize("stiff", [False, True])
def test_conditional_matches_dense_marginal(stiff):
    Kw, t, v, nu = _class_problem(seed=1, stiff=stiff)
    alpha, beta, kappa = 1.5, 0.7, 0.4
    Kt, B, z, _ = tpbn.scaled_inverse(*(jnp.asarray(x) for x in (Kw, t, v, nu)), TAU)
    for i in (0, 1, 4):
        q, r = tpbn.loo_qr(B, Kt, z, jnp.asarray(nu), i)
        grid = np.geomspace(1e-4, 1e2, 9)
        ours = np.array(
            [float(tpbn.log_nu_conditional(np.log(g), q, r, alpha, beta, kappa)) for g in grid]
        )
        brute = []
        for g in grid:
            nu_g = nu.copy()
            nu_g[i] = g
            brute.append(
                _dense_loglik(Kw, t, v, nu_g) + _tpb_log_prior(g, alpha, beta, kappa) + np.log(g)
            )
        diff = ours - np.array(brute)
        # q_i, r_i come from Σ⁻¹ through 1 − ν_i q, which cancels log10(1 + ν_i q_i) digits
        # of a solve accurate to ε·cond(Σ̃); the log density carries that error times r²/q
        cond_s = np.linalg.cond(np.asarray(B))
        tol = 10 * np.finfo(float).eps * cond_s * (1 + nu[i] * q) * (1 + r**2 / q)
        np.testing.assert_allclose(diff - diff[0], 0.0, atol=max(1e-8, float(tol)))


@pytest.mark.parametrize("stiff", [False, True])
def test_scan_keeps_the_inverse_exact(stiff):
    """After a sweep over all points, the rank-one-updated B equals Σ̃(ν')⁻¹ to rounding.

    Bound: N·ε·cond(Σ̃') (each update is accurate to ε·cond; measured ≤ 0.25·ε·cond here). The
    stiff case (paper κ, β_a; λ over six decades) reaches ν near ν_max and cond ≈ 1e9…1e12, the
    mild one cond ≈ 200 (bound ≈ 5e-13); a wrong update formula errs at O(1).
    """
    Kw, t, v, nu = _class_problem(seed=2, N=12, stiff=stiff)
    abk = (1.0, 0.1, 1e-10) if stiff else (1.0, 0.7, 0.2)
    nu_new, B, scale = tpbn.nu_scan(
        jax.random.key(0), *(jnp.asarray(x) for x in (Kw, t, v, nu)), TAU, *abk,
        return_inverse=True,
    )  # fmt: skip
    nu_new, B, scale = (np.asarray(x) for x in (nu_new, B, scale))
    assert np.all(np.abs(np.log(nu_new / nu)) > 1e-6)  # every scale moved
    S = ((Kw * nu_new) @ Kw + TAU + np.diag(v)) / np.outer(scale, scale)
    B_ref = np.linalg.inv(S)
    err = np.abs(B - B_ref).max() / np.abs(B_ref).max()
    assert err < len(t) * np.finfo(float).eps * np.linalg.cond(S), err


def test_slice_draws_follow_the_conditional():
    """Independent chains of the slice update: their last states against the quadrature CDF."""
    q, r, alpha, beta, kappa = 3.0, 4.0, 1.0, 0.1, 1e-10
    logpdf = lambda th: tpbn.log_nu_conditional(th, q, r, alpha, beta, kappa)  # noqa: E731

    def chain(key):
        def it(th, k):
            return tpbn.slice_stepping_out(k, th, logpdf), None

        return jax.lax.scan(it, jnp.asarray(-20.0), jax.random.split(key, 30))[0]

    n = 4000
    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(1), n)))
    grid = np.linspace(-60.0, 60.0, 240001)
    logd = np.asarray(logpdf(jnp.asarray(grid)))
    dens = np.exp(logd - logd.max())
    cdf = np.cumsum(dens)
    cdf /= cdf[-1]
    # the target is bimodal in θ (the pruned plateau around log κ ≈ −23 and the data mode):
    # both must carry mass, or the test would not exercise the jumps between them
    p_low = np.interp(-5.0, grid, cdf)
    assert 0.05 < p_low < 0.95
    ks = stats.kstest(draws, lambda x: np.interp(x, grid, cdf))
    assert ks.pvalue > 1e-3, ks


def _block_chains(nu_update, key, Kw, delta, lam, hyper, n_chains, n_iter):
    """Chains on (a, b, ν, ς) | w, λ: the collapsed block, or the existing TPBN Gibbs."""
    C, N = delta.shape

    def it(carry, k):
        a, b, nu, vs = carry
        k1, k2, k3 = jax.random.split(k, 3)
        if nu_update == "collapsed":
            nu, vs, a, b = tpbn.collapsed_nu_step(k1, Kw, delta, lam, nu, hyper)
        else:
            a, b = cond.sample_ab(k1, Kw, delta, lam, nu, hyper.bias_prior_var)
            nu = cond.sample_nu(k2, a, vs, hyper.alpha_a)
            vs = cond.sample_varsigma(k3, nu, hyper.alpha_a, hyper.beta_a, hyper.kappa)
        out = jnp.concatenate([a.ravel(), b, jnp.log(nu).ravel()])
        return (a, b, nu, vs), out

    def chain(k):
        init = (jnp.zeros((C, N)), jnp.zeros(C), jnp.ones((C, N)), jnp.ones((C, N)))
        return jax.lax.scan(it, init, jax.random.split(k, n_iter))[1]

    return np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(key, n_chains)))


def test_block_leaves_the_conditional_invariant():
    """Collapsed block and TPBN Gibbs sample the same p(a, b, log ν | w, λ).

    64 chains × 300 iterations each (first 100 dropped); for every coordinate the two means
    differ by less than 4.5 combined MCSE (MCSE = sd/√ESS, multi-chain ESS). With 2·6 + 2
    coordinates the chance of a false alarm is below 1e-4.
    """
    pb = make_problem(seed=5, N=6, C=2, P=2)
    hyper = Hyper(alpha_a=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5)
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray([0.6, 0.4]))
    delta, lam = jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"])
    res = {}
    for name in ("collapsed", "gibbs"):
        x = _block_chains(name, jax.random.key(7), Kw, delta, lam, hyper, 64, 300)[:, 100:]
        res[name] = pooled_mean_mcse(x)
    (m1, _, se1, ess1), (m2, _, se2, ess2) = res["collapsed"], res["gibbs"]
    assert np.min(ess1) > 200 and np.min(ess2) > 200
    z = np.abs(m1 - m2) / np.sqrt(se1**2 + se2**2)
    assert np.all(z < 4.5), z
