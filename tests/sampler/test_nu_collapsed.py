"""The collapsed TPBN update of :mod:`bayesmkl.sampler.tpbn` (ν with a, b, ς integrated out).

Oracles:

* the dense marginal density of the pseudo-targets, log N(T_c; 0, K_w diag ν K_w + τ11ᵀ + diag
  V) evaluated by scipy for each value of ν_i, plus the TPB prior of ν_i obtained by numerical
  integration of Gamma(ν; α, ς)·Gamma(ς; β, κ) over ς — independent of the closed forms in the
  module; both are compared as differences over a grid of ν_i (the module is specified up to a
  constant) to 1e-8 or the derived rounding bound of the stiff case (~1e-6), far below any wrong
  term (O(1) differences);
* quadrature of the 1-D conditional (a KS test of the slice sampler's draws);
* a Geweke successive-conditional test of the block on the proper Gaussian-data model of
  test_sampler.py (§3 there): its conditionals are the sweep's with pseudo-targets T = y.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from bayesmkl.model.classification import Hyper, combine_kernels
from bayesmkl.sampler import tpbn
from tests.sampler.helpers import make_problem

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
    nu_new, B, z, scale = tpbn.nu_scan(
        jax.random.key(0), *(jnp.asarray(x) for x in (Kw, t, v, nu)), TAU, *abk,
        return_inverse=True,
    )  # fmt: skip
    nu_new, B, z, scale = (np.asarray(x) for x in (nu_new, B, z, scale))
    assert np.all(np.abs(np.log(nu_new / nu)) > 1e-6)  # every scale moved
    S = ((Kw * nu_new) @ Kw + TAU + np.diag(v)) / np.outer(scale, scale)
    B_ref = np.linalg.inv(S)
    tol = len(t) * np.finfo(float).eps * np.linalg.cond(S)
    err = np.abs(B - B_ref).max() / np.abs(B_ref).max()
    assert err < tol, err
    # z = B t̃ is carried by the same rank-one updates (the r_i of every later point uses it)
    z_ref = B_ref @ (t / scale)
    assert np.abs(z - z_ref).max() / np.abs(z_ref).max() < tol


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


GEWEKE_HYPER = Hyper(eta=1.0, alpha_a=1.5, beta_a=1.0, kappa=0.5, bias_prior_var=0.5, gamma0=1.0)


def _prior_theta(key, hyper, C, N):
    """Ancestral draw of (ς, ν, a, b) (general α_a: the block needs no IG shortcut)."""
    ks = jax.random.split(key, 4)
    vs = jax.random.gamma(ks[0], hyper.beta_a, (C, N)) / hyper.kappa
    nu = jax.random.gamma(ks[1], hyper.alpha_a, (C, N)) / vs
    a = jnp.sqrt(nu) * jax.random.normal(ks[2], (C, N))
    b = np.sqrt(hyper.bias_prior_var) * jax.random.normal(ks[3], (C,))
    return {"varsigma": vs, "nu": nu, "a": a, "b": b}


@jax.jit
def _geweke_block(key):
    """Final θ = (ς, ν, a, b) of 2000 chains alternating the block | y, w, λ with y | θ, w, λ.

    Model: θ ~ prior, y ~ N(K_w a + b, diag λ) with w, λ fixed per chain (drawn once, λ over
    two decades). Started from exact joint draws, the alternation keeps θ ~ prior.
    """
    pb = make_problem(seed=4, N=5, C=1, P=2)
    K = jnp.asarray(pb["K"])
    h = GEWEKE_HYPER

    def chain(key):
        kw, kl, k0, ky, kr = jax.random.split(key, 5)
        Kw = combine_kernels(K, jax.random.dirichlet(kw, jnp.ones(2)))
        lam = jnp.exp(jax.random.uniform(kl, (1, 5), minval=-3.0, maxval=1.5))

        def draw_y(k, th):
            return Kw @ th["a"][0] + th["b"] + jnp.sqrt(lam) * jax.random.normal(k, (1, 5))

        def step(carry, k):
            th, y = carry
            k1, k2 = jax.random.split(k)
            nu, vs, a, b = tpbn.collapsed_nu_step(k1, Kw, y / (1.0 + lam), lam, th["nu"], h)
            th = {"varsigma": vs, "nu": nu, "a": a, "b": b}
            return (th, draw_y(k2, th)), None

        th0 = _prior_theta(k0, h, 1, 5)
        (th, _), _ = jax.lax.scan(step, (th0, draw_y(ky, th0)), jax.random.split(kr, 15))
        return th

    k_run, k_ref = jax.random.split(key)
    end = jax.vmap(chain)(jax.random.split(k_run, 2000))
    ref = jax.vmap(lambda k: _prior_theta(k, h, 1, 5))(jax.random.split(k_ref, 2000))
    return end, ref


def _theta_stats(th):
    a = np.asarray(th["a"])[:, 0]
    out = {"b": np.asarray(th["b"])[:, 0], "a_sum": a.sum(1), "a_sq": np.sum(a**2, 1)}
    for i in range(5):
        out[f"a{i}"] = a[:, i]
        out[f"lognu{i}"] = np.log(np.asarray(th["nu"])[:, 0, i])
        out[f"logvs{i}"] = np.log(np.asarray(th["varsigma"])[:, 0, i])
    return out


@pytest.mark.slow  # compiling the vmapped block dominates (~25-50 s on 2 shared cores)
def test_geweke_collapsed_block():
    """Successive-conditional (Geweke) test of the collapsed block alone.

    2000 chains × 15 block/y steps from exact joint draws; final θ against fresh prior draws by
    two-sample KS tests (family-wise α = 1e-3, Bonferroni over 18 statistics). Power, measured
    once with a deliberately wrong conditional (the −½ log(1 + q e^θ) term dropped): log ν_i
    and a_sq fail with p < 1e-10.
    """
    end, ref = _geweke_block(jax.random.key(11))
    s_end, s_ref = _theta_stats(end), _theta_stats(ref)
    pvals = {k: stats.ks_2samp(s_end[k], s_ref[k]).pvalue for k in s_end}
    alpha = 1e-3 / len(pvals)
    bad = {k: p for k, p in pvals.items() if p < alpha}
    assert not bad, f"Geweke KS failures (alpha={alpha:.1e}): {bad}"


@pytest.mark.parametrize("weighted", [False, True])
def test_sweep_option_and_validation(weighted):
    """``nu_update="collapsed"`` runs in the BM3KL sweep (with and without sample weights):
    finite draws, every ν moves in every sweep and respects ν_max; bad values are refused."""
    from numpyro.infer import MCMC

    from bayesmkl.sampler import BM3KL

    with pytest.raises(ValueError, match="nu_update"):
        BM3KL(nu_update="bogus")
    with pytest.raises(ValueError, match="nu_max"):
        BM3KL(nu_update="collapsed", nu_max=0.0)
    pb = make_problem(seed=6, N=6, C=1, P=2)
    K, delta = jnp.asarray(pb["K"]), jnp.asarray(pb["delta"])
    mcmc = MCMC(
        BM3KL(*Hyper.paper(), nu_update="collapsed", move="gibbs", nu_max=1e6), num_warmup=0,
        num_samples=5, jit_model_args=True, progress_bar=False,
    )  # fmt: skip
    weight = [jnp.asarray([1.0, 0.0, 2.0, 0.5, 1.0, 3.0])] if weighted else []
    mcmc.run(jax.random.key(0), K, delta, *weight)
    z = mcmc.get_samples()
    assert all(np.all(np.isfinite(np.asarray(v))) for v in z.values())
    nu = np.asarray(z["nu"])
    assert np.all(nu <= 1e6) and np.all(np.diff(np.log(nu), axis=0) != 0.0)
