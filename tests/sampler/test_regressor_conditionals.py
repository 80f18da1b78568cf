"""The regressor's likelihood and full conditionals against its model (docs/math.md §15).

* The augmentation: each hinge's λ-integral gives exp{−2 max(ζ, 0)}, so the two-λ mixture gives
  exp{−2c L_ε(r)} (quadrature); the normaliser 2ε + 1/c makes it a density in y whose
  variance, CDF and quantiles are those of :mod:`bayesmkl.model.regression_likelihood` (quadrature,
  KS test of its sampler).
* Density checks in the style of ``tests/sampler/test_conditionals.py``: for each block x,
  log q(x | rest) − log p(x, rest) must not depend on x, with p NumPyro's ``log_density`` of
  :func:`~bayesmkl.model.regression.reg_model` (augmented for λ, (a, b) and e; marginal for c
  and ε, which the sampler draws with λ integrated out).
* The slice updates of (c, ε) as a Markov chain: many chains, then the marginals of c and ε
  against the exact ones by 2-D quadrature (KS tests).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, stats

from bayesmkl.model import regression_likelihood as lik
from bayesmkl.model.classification import combine_kernels, decision_values
from bayesmkl.model.regression import RegHyper, reg_log_joint, reg_model
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.regression_conditionals import (
    lam_pm_params,
    log_c_conditional,
    log_eps_conditional,
    sample_lam_pm,
    sample_noise,
    tv_potential_and_grad,
)

KS_ALPHA = 1e-3
HYPER = RegHyper(eta=1.3, alpha_a=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, c_shape=1.7,
                 c_rate=0.4, eps_shape=1.5, eps_rate=3.0)  # fmt: skip


def problem(seed=0, N=9, P=3):
    """Kernels, targets ``(1, N)`` and a value of every site of the augmented model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    d2 = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    K = np.stack([np.exp(-d2 / (2 * s**2)) for s in np.geomspace(0.4, 3.0, P)])
    return dict(
        K=K, y=rng.normal(size=(1, N)), e=rng.gamma(2.0, size=P), a=rng.normal(size=(1, N)),
        b=rng.normal(size=1), lam_plus=rng.gamma(1.5, size=(1, N)),
        lam_minus=rng.gamma(1.5, size=(1, N)), nu=rng.gamma(1.5, size=(1, N)),
        varsigma=rng.gamma(1.5, size=(1, N)), c=1.3, eps=0.25,
    )  # fmt: skip


SITES = ("e", "varsigma", "nu", "a", "b", "c", "eps", "lam_plus", "lam_minus")


def logp(pb, augmented=True, **override):
    """log p(all sites, y) via NumPyro (no Jacobians)."""
    names = SITES if augmented else SITES[:7]
    params = {k: jnp.asarray(override.get(k, pb[k])) for k in names}
    lp, _ = log_density(
        reg_model, (pb["K"], pb["y"]), {"hyper": HYPER, "augmented": augmented}, params
    )
    return float(lp)


def f_of(pb, **kw):
    z = {**pb, **kw}
    w = jnp.asarray(z["e"]) / np.sum(z["e"])
    return np.asarray(decision_values(combine_kernels(jnp.asarray(pb["K"]), w), z["a"], z["b"]))


def assert_constant(diffs, tol=1e-9):
    diffs = np.asarray(diffs)
    assert np.ptp(diffs) < tol, diffs - diffs[0]


def gig_logpdf(x, p, rho, chi):
    p, rho, chi = (np.asarray(v) for v in (p, rho, chi))
    return stats.geninvgauss.logpdf(x, p, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))


# --------------------------------------------------------------------------------------------
# the likelihood and its augmentation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("r", "c", "eps"), [(0.1, 1.3, 0.25), (0.9, 1.3, 0.25), (-2.0, 0.4, 0.0),
                                             (0.0, 5.0, 1.0)])  # fmt: skip
def test_two_lambda_mixture_gives_the_eps_insensitive_factor(r, c, eps):
    """∫∫ Π_± (2πλ)^{-1/2} exp{−(λ + ζ^±)²/(2λ)} dλ⁺ dλ⁻ = exp{−2c L_ε(r)} (the integral
    factorises over the two hinges; each by quadrature)."""
    zp, zm = lik.slacks(r, 0.0, c, eps)
    total = 1.0
    for z in (float(zp), float(zm)):
        val, _ = integrate.quad(
            lambda lam, z=z: np.exp(-0.5 * np.log(2 * np.pi * lam) - (lam + z) ** 2 / (2 * lam)),
            0, np.inf, limit=200,
        )  # fmt: skip
        total *= val
    np.testing.assert_allclose(total, np.exp(-2 * c * float(lik.eps_loss(r, eps))), rtol=1e-7)


@pytest.mark.parametrize(("c", "eps"), [(1.3, 0.25), (0.2, 2.0), (7.0, 0.0)])
def test_noise_law_normaliser_variance_cdf_quantile(c, eps):
    pdf = lambda r: np.exp(lik.noise_logpdf(r, c, eps))  # noqa: E731
    pieces = ((-np.inf, -eps), (-eps, eps), (eps, np.inf))
    mass = sum(integrate.quad(pdf, lo, hi)[0] for lo, hi in pieces)
    np.testing.assert_allclose(mass, 1.0, rtol=1e-9)
    var = sum(integrate.quad(lambda r: r * r * pdf(r), lo, hi)[0] for lo, hi in pieces)
    np.testing.assert_allclose(float(lik.noise_variance(c, eps)), var, rtol=1e-8)
    for r in (-3.0, -eps - 0.01, -eps / 2, 0.0, eps / 3, eps + 0.2, 4.0):
        num = sum(integrate.quad(pdf, lo, min(hi, r))[0] for lo, hi in pieces if lo < r)
        np.testing.assert_allclose(lik.noise_cdf(r, c, eps), num, rtol=1e-8, atol=1e-12)
    q = np.array([1e-6, 0.01, 0.3, 0.5, 0.77, 0.999])
    np.testing.assert_allclose(lik.noise_cdf(lik.noise_quantile(q, c, eps), c, eps), q, rtol=1e-10)
    x = lik.noise_sample(np.random.default_rng(1), np.full(20_000, c), eps)
    assert stats.kstest(x, lambda r: lik.noise_cdf(r, c, eps)).pvalue > KS_ALPHA


def test_pseudo_observations_complete_the_square():
    """Σ_± (λ + ζ^±)²/λ = (f − T)²/V + (λ⁺ + λ⁻ − 2cε)²/(λ⁺ + λ⁻) for every f."""
    rng = np.random.default_rng(3)
    y, lp, lm = rng.normal(size=50), rng.gamma(0.7, size=50), rng.gamma(0.7, size=50)
    c, eps = 1.7, 0.3
    T, V = lik.pseudo_observations(y, lp, lm, c, eps)
    for f in (rng.normal(size=50), 10 * rng.normal(size=50)):
        zp, zm = lik.slacks(y, f, c, eps)
        lhs = (lp + zp) ** 2 / lp + (lm + zm) ** 2 / lm
        rhs = (f - T) ** 2 / V + (lp + lm - 2 * c * eps) ** 2 / (lp + lm)
        np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


# --------------------------------------------------------------------------------------------
# conditionals against the joint
# --------------------------------------------------------------------------------------------


def test_lam_conditionals_match_joint():
    pb = problem(1)
    (pp, rp, cp), (pm, rm, cm) = lam_pm_params(pb["y"], f_of(pb), pb["c"], pb["eps"])
    zp, zm = lik.slacks(pb["y"], f_of(pb), pb["c"], pb["eps"])
    np.testing.assert_allclose(cp, zp**2)
    rng = np.random.default_rng(2)
    diffs = []
    for _ in range(5):
        lp, lm = rng.gamma(0.8, 2.0, size=(2,) + pb["y"].shape)
        lq = gig_logpdf(lp, pp, rp, cp).sum() + gig_logpdf(lm, pm, rm, cm).sum()
        diffs.append(lq - logp(pb, lam_plus=lp, lam_minus=lm))
    assert_constant(diffs)


def test_lam_draws_follow_their_gig_laws():
    """``sample_lam_pm`` against GIG(1/2, 1, ζ²) for a point inside the tube and one far out
    (KS tests of 10,000 draws each)."""
    y = jnp.array([[0.3, 2.5]])
    lp, lm = jax.vmap(lambda k: sample_lam_pm(k, y, jnp.zeros_like(y), 1.3, 0.25))(
        jax.random.split(jax.random.key(4), 10_000)
    )
    zp, zm = lik.slacks(np.asarray(y)[0], 0.0, 1.3, 0.25)
    for draws, zeta in ((lp, zp), (lm, zm)):
        for i in range(2):
            chi = float(zeta[i]) ** 2
            dist = stats.geninvgauss(0.5, np.sqrt(chi), scale=np.sqrt(chi))
            assert stats.kstest(np.asarray(draws)[:, 0, i], dist.cdf).pvalue > KS_ALPHA


def test_ab_conditional_matches_joint_and_the_draws():
    """(a, b) | rest is the Gaussian regression on (T, V); ``sample_ab_tv`` draws from it."""
    pb = problem(4)
    Kw = np.asarray(combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum())))
    T, V = lik.pseudo_observations(pb["y"], pb["lam_plus"], pb["lam_minus"], pb["c"], pb["eps"])
    T, V = np.asarray(T)[0], np.asarray(V)[0]
    N = Kw.shape[0]
    Xt = np.concatenate([Kw, np.ones((N, 1))], axis=1)
    prec = Xt.T @ (Xt / V[:, None]) + np.diag(np.r_[1 / pb["nu"][0], 1 / HYPER.bias_prior_var])
    cov = np.linalg.inv(prec)
    mean = cov @ (Xt.T @ (T / V))
    rng = np.random.default_rng(5)
    diffs = []
    for _ in range(5):
        beta = rng.normal(size=N + 1)
        lq = stats.multivariate_normal.logpdf(beta, mean, cov)
        diffs.append(lq - logp(pb, a=beta[None, :N], b=beta[N:]))
    assert_constant(diffs, tol=1e-8)
    keys = jax.random.split(jax.random.key(0), 20_000)
    draw = jax.vmap(lambda k: cond.sample_ab_tv(k, Kw, T[None], V[None], pb["nu"],
                                                HYPER.bias_prior_var)[:2])  # fmt: skip
    a, b = draw(keys)
    beta = np.concatenate([np.asarray(a)[:, 0], np.asarray(b)], axis=1)
    z = (beta.mean(axis=0) - mean) / np.sqrt(np.diag(cov) / len(keys))
    assert np.max(np.abs(z)) < 4.5, z


def test_c_and_eps_conditionals_match_the_marginal_joint():
    """With λ integrated out: log p(θ = log c | f, ε) − log p(c, rest) − θ is constant in θ, and
    likewise for φ = log ε (the Jacobians e^θ, e^φ are in the conditionals)."""
    pb = problem(6)
    r = pb["y"] - f_of(pb)
    loss = float(np.sum(lik.eps_loss(r, pb["eps"])))
    diffs_c, diffs_e = [], []
    for v in (0.3, 1.0, 2.2, 6.0):
        th = np.log(v)
        lc = log_c_conditional(th, loss, r.size, pb["eps"], HYPER.c_shape, HYPER.c_rate)
        diffs_c.append(float(lc) - logp(pb, augmented=False, c=v) - th)
        le = log_eps_conditional(np.log(v / 4), np.abs(r), pb["c"], HYPER.eps_shape,
                                 HYPER.eps_rate)  # fmt: skip
        diffs_e.append(float(le) - logp(pb, augmented=False, eps=v / 4) - np.log(v / 4))
    assert_constant(diffs_c)
    assert_constant(diffs_e)


def test_reg_log_joint_is_the_marginal_model_density():
    pb = problem(7)
    z = {k: jnp.asarray(pb[k]) for k in SITES[:7]}
    lj = reg_log_joint(z, jnp.asarray(f_of(pb)), jnp.asarray(pb["y"]), HYPER, True)
    np.testing.assert_allclose(float(lj), logp(pb, augmented=False), rtol=1e-12)


def test_e_potential_matches_joint_and_its_gradient():
    """−U(e) − log p(e, rest) is constant in e, and ∇U agrees with autodiff."""
    pb = problem(8)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    T, V = lik.pseudo_observations(pb["y"], pb["lam_plus"], pb["lam_minus"], pb["c"], pb["eps"])
    eta = jnp.full(3, HYPER.eta)
    args = (Phi, jnp.asarray(pb["b"]), T, V, eta)
    rng = np.random.default_rng(9)
    diffs = []
    for _ in range(5):
        e = rng.gamma(1.5, size=3) * rng.uniform(0.1, 10.0)
        U, g = tv_potential_and_grad(jnp.asarray(e), *args)
        diffs.append(-float(U) - logp(pb, e=e))
        g_ad = jax.grad(lambda x: tv_potential_and_grad(x, *args)[0])(jnp.asarray(e))
        np.testing.assert_allclose(g, g_ad, rtol=1e-10, atol=1e-12)
    assert_constant(diffs)


# --------------------------------------------------------------------------------------------
# the slice updates of (c, ε) as a Markov chain
# --------------------------------------------------------------------------------------------


def test_noise_updates_leave_the_conditional_invariant():
    """2,000 chains of 12 sweeps of the (c, ε) | f update (5 alternations each) from a fixed
    start; the final c and ε are compared with their exact marginals under p(c, ε | f),
    computed on a log grid (KS tests). A wrong conditional or a biased slice update moves them.
    """
    pb = problem(10, N=12)
    f = f_of(pb)
    y = pb["y"]

    def chain(key):
        def step(carry, k):
            c, eps, _ = sample_noise(k, y, f, *carry, HYPER, True)
            return (c, eps), None

        (c, eps), _ = jax.lax.scan(step, (jnp.asarray(1.0), jnp.asarray(0.1)),
                                   jax.random.split(key, 12))  # fmt: skip
        return c, eps

    c, eps = (np.asarray(v) for v in jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(1),
                                                                                2000)))  # fmt: skip
    # exact joint on a (log c, log ε) grid: log p + Jacobians θ + φ
    th = np.linspace(-5, 4, 900)
    ph = np.linspace(-12, 3, 1500)
    T, P = np.meshgrid(th, ph, indexing="ij")
    Cg, Eg = np.exp(T), np.exp(P)
    r = np.abs(y - f).ravel()
    loss = np.maximum(r[None, None, :] - Eg[..., None], 0.0).sum(-1)
    lp = (stats.gamma.logpdf(Cg, HYPER.c_shape, scale=1 / HYPER.c_rate)
          + stats.gamma.logpdf(Eg, HYPER.eps_shape, scale=1 / HYPER.eps_rate)
          - r.size * np.log(2 * Eg + 1 / Cg) - 2 * Cg * loss + T + P)  # fmt: skip
    dens = np.exp(lp - lp.max())
    for draws, grid, axis in ((np.log(c), th, 1), (np.log(eps), ph, 0)):
        marg = dens.sum(axis=axis)
        cdf = np.cumsum(marg) / marg.sum()
        p = stats.kstest(draws, lambda x, g=grid, cd=cdf: np.interp(x, g, cd)).pvalue
        assert p > KS_ALPHA, p
