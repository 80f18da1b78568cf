"""Per-observation margins m in the slack ζ = m − δf (docs/math.md §1.8).

Checks, each against an independent oracle:

* the augmented factor with margins is the normalised Gaussian density N(m; δf − λ, λ) of m
  (scipy), and its λ-integral under Exp(γ0) is the marginal term of
  :func:`bayesmkl.model.likelihood.log_pseudo_likelihood_terms` at ζ = m − δf (quadrature);
* the pseudo-observations T = δ(m + λ/ϖ), V = λ/ϖ² reproduce the residual (λ + ϖζ)²/λ;
* every conditional that the margins enter (λ, (a, b), the potential of e and its gradient)
  against NumPyro's joint density of the model with margins (log q − log p constant in the
  block), with and without sample weights;
* ``margin=None`` is m ≡ 1: the likelihood functions agree bit for bit, and whole chains of the
  default sampler (and of the collapsed ν update) give the same draws bit for bit, through
  ``MCMC`` and through :class:`~bayesmkl.sampler.runner.ChainRunner`; with a non-trivial
  margin both paths still agree, and the reported potential energy is the joint with margins.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC
from numpyro.infer.util import log_density
from scipy import integrate, stats

from bayesmkl.model.classification import (
    Hyper,
    bm3kl_model,
    combine_kernels,
    decision_values,
    log_joint,
)
from bayesmkl.model.likelihood import (
    log_augmented_likelihood,
    log_pseudo_likelihood,
    log_pseudo_likelihood_terms,
    margin_slack,
    pseudo_observations,
    s_of,
)
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.runner import ChainRunner
from bayesmkl.sampler.sampler import BM3KL
from tests.sampler.helpers import make_problem

SITES = ("e", "varsigma", "nu", "a", "b", "lam")
WEIGHTS = np.array([0.0, 0.4, 1.0, 2.5, 1.0, 0.05, 3.0, 1.7])


def _margins(pb, seed=0):
    """Non-trivial margins (C, N): negative, small and large values around 1."""
    return np.random.default_rng(seed).normal(0.5, 1.5, size=pb["delta"].shape)


def _f(pb):
    w = jnp.asarray(pb["e"] / pb["e"].sum())
    return np.asarray(decision_values(combine_kernels(jnp.asarray(pb["K"]), w), pb["a"], pb["b"]))


def _logp(pb, margin, weight=None, **override):
    """log p(all sites, margins) of the augmented model via NumPyro (no Jacobians)."""
    params = {k: jnp.asarray(override.get(k, pb[k])) for k in SITES}
    w = None if weight is None else jnp.asarray(weight)
    kwargs = {"hyper": pb["hyper"], "margin": jnp.asarray(margin)}
    lp, _ = log_density(bm3kl_model, (pb["K"], pb["delta"], w), kwargs, params)
    return float(lp)


def _assert_constant(diffs, tol=1e-9):
    diffs = np.asarray(diffs)
    assert np.ptp(diffs) < tol, diffs - diffs[0]


# --------------------------------------------------------------------------------------------
# the likelihood with margins
# --------------------------------------------------------------------------------------------


def test_augmented_factor_is_the_gaussian_density_of_the_margin():
    pb = make_problem(seed=40)
    f, m = _f(pb), _margins(pb, 41)
    lam = pb["lam"]
    ours = float(log_augmented_likelihood(f, pb["delta"], lam, margin=m))
    ref = stats.norm.logpdf(m, pb["delta"] * f - lam, np.sqrt(lam)).sum()
    assert ours == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("gamma0", [0.5, 1.0, 100.0])
@pytest.mark.parametrize("m", [-2.0, 0.3, 1.0, 4.0])
def test_marginal_with_margin_is_the_lambda_integral(m, gamma0):
    """∫ Exp(λ | γ0) N(m; δf − λ, λ) dλ = exp(log(γ0/s) − ζ − s|ζ|) at ζ = m − δf."""
    f, delta, margin = jnp.array([[0.7]]), jnp.array([[-1.0]]), jnp.array([[m]])

    def integrand(x):
        aug = log_augmented_likelihood(f, delta, jnp.array([[x]]), margin=margin)
        return gamma0 * np.exp(-gamma0 * x) * np.exp(float(aug))

    zeta = m + 0.7
    mode = abs(zeta) / float(s_of(gamma0)) + 1e-3
    cuts = (0.0, mode, 10 * mode + 10, np.inf)
    total = sum(
        integrate.quad(integrand, lo, hi, limit=200, epsabs=0, epsrel=1e-11)[0]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
    )
    term = float(log_pseudo_likelihood_terms(f, delta, gamma0, margin=margin)[0, 0])
    assert np.log(total) == pytest.approx(term, abs=1e-8)


@pytest.mark.parametrize("weight", [None, WEIGHTS])
def test_pseudo_observations_reproduce_the_residual_with_margins(weight):
    pb = make_problem(seed=42)
    f, m = _f(pb), _margins(pb, 43)
    wt = 1.0 if weight is None else weight
    T, V = (np.asarray(x) for x in pseudo_observations(pb["delta"], pb["lam"], weight, m))
    zeta = np.asarray(margin_slack(f, pb["delta"], weight, m))
    np.testing.assert_allclose(zeta, wt * (m - pb["delta"] * f), rtol=1e-14)
    np.testing.assert_allclose((T - f) ** 2 / V, (pb["lam"] + zeta) ** 2 / pb["lam"], rtol=1e-11)


@pytest.mark.parametrize("weight", [None, WEIGHTS])
def test_unit_margin_is_no_margin_bit_for_bit(weight):
    pb = make_problem(seed=44)
    f, d, lam, ones = _f(pb), pb["delta"], pb["lam"], np.ones_like(pb["delta"])
    pairs = [
        (margin_slack(f, d, weight), margin_slack(f, d, weight, ones)),
        *zip(pseudo_observations(d, lam, weight), pseudo_observations(d, lam, weight, ones),
             strict=True),
        (log_augmented_likelihood(f, d, lam, weight),
         log_augmented_likelihood(f, d, lam, weight, ones)),
        (log_pseudo_likelihood(f, d, 3.0, weight), log_pseudo_likelihood(f, d, 3.0, weight, ones)),
    ]  # fmt: skip
    for plain, unit in pairs:
        assert np.array_equal(np.asarray(plain), np.asarray(unit))


# --------------------------------------------------------------------------------------------
# conditionals against the joint with margins
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [None, WEIGHTS])
@pytest.mark.parametrize("gamma0", [0.0, 1.0])
def test_lam_conditional_with_margins_matches_joint(gamma0, weight):
    """λ | rest ~ GIG(1/2, s², ϖ²(m − δf)²): its parameters, and log q − log p constant."""
    h = Hyper(eta=1.3, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=gamma0)
    pb = make_problem(seed=45, hyper=h)
    f, m = _f(pb), _margins(pb, 46)
    wt = 1.0 if weight is None else weight
    chi = (wt * (m - pb["delta"] * f)) ** 2
    zeta = margin_slack(jnp.asarray(f), pb["delta"], weight, m)
    np.testing.assert_allclose(cond.lam_params(zeta, gamma0)[2], chi, rtol=1e-12)
    rho = 1.0 + 2.0 * gamma0
    rng = np.random.default_rng(47)
    diffs = []
    for _ in range(5):
        lam = rng.gamma(0.8, 2.0, size=chi.shape)
        log_q = np.sum(-0.5 * np.log(lam) - 0.5 * (rho * lam + chi / lam))
        diffs.append(log_q - _logp(pb, m, weight, lam=lam))
    _assert_constant(diffs)


def test_sample_lam_with_margins_ks():
    """λ draws at ζ = m − δf against scipy's GIG (δ = −1, so a sign error in ζ shows)."""
    n, gamma0 = 10_000, 1.0
    delta, f, m = -jnp.ones((1, n)), jnp.full((1, n), 0.4), jnp.full((1, n), -1.5)
    lam = np.asarray(cond.sample_lam(jax.random.key(48), f, delta, gamma0, margin=m))
    rho, chi = 1.0 + 2.0 * gamma0, (-1.5 + 0.4) ** 2
    dist = stats.geninvgauss(0.5, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))
    assert stats.kstest(lam[0], dist.cdf).pvalue > 1e-3


def _ab_gaussian(Kw, delta, lam, nu, tau, weight, margin):
    """β_c = [a_c; b_c] | rest in precision form: noise precision ϖ²/λ and targets
    T = δ(m + λ/ϖ), so that ϖ²T/λ = δ(ϖ²m/λ + ϖ)."""
    N = Kw.shape[0]
    Xt = np.concatenate([np.asarray(Kw), np.ones((N, 1))], axis=1)
    means, covs = [], []
    for c in range(delta.shape[0]):
        prec_n = weight**2 / lam[c]
        Q = Xt.T @ (Xt * prec_n[:, None]) + np.diag(1.0 / np.r_[nu[c], tau])
        r = Xt.T @ (delta[c] * (weight**2 * margin[c] / lam[c] + weight))
        cov = np.linalg.inv(Q)
        means.append(cov @ r)
        covs.append(0.5 * (cov + cov.T))
    return np.array(means), np.array(covs)


@pytest.mark.parametrize("weight", [None, WEIGHTS])
def test_ab_conditional_with_margins_matches_joint_and_draws(weight):
    h = Hyper(eta=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=1.0)
    pb = make_problem(seed=49, hyper=h)
    m, tau = _margins(pb, 50), h.bias_prior_var
    wt = np.ones(8) if weight is None else weight
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
    mean, cov = _ab_gaussian(Kw, pb["delta"], pb["lam"], pb["nu"], tau, wt, m)
    rng = np.random.default_rng(51)
    C, N = pb["a"].shape
    diffs = []
    for _ in range(5):
        a, b = rng.normal(size=(C, N)), rng.normal(size=C)
        beta = np.concatenate([a, b[:, None]], axis=1)
        lq = sum(stats.multivariate_normal.logpdf(beta[c], mean[c], cov[c]) for c in range(C))
        diffs.append(lq - _logp(pb, m, weight, a=a, b=b))
    _assert_constant(diffs, tol=1e-8)
    # sample_ab's draws have these moments: |mean − μ| < Z·sd/√n per coordinate (Z = 4.5)
    n, Z = 4000, 4.5
    keys = jax.random.split(jax.random.key(52), n)
    w_arg = None if weight is None else jnp.asarray(weight)
    args = (Kw, jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]), jnp.asarray(pb["nu"]), tau,
            w_arg, jnp.asarray(m))  # fmt: skip
    a, b = jax.jit(jax.vmap(lambda k: cond.sample_ab(k, *args)))(keys)
    draws = np.concatenate([np.asarray(a), np.asarray(b)[..., None]], axis=-1)
    for c in range(C):
        sd = np.sqrt(np.diag(cov[c]))
        assert np.all(np.abs(draws[:, c].mean(0) - mean[c]) < Z * sd / np.sqrt(n))


@pytest.mark.parametrize("weight", [None, WEIGHTS])
def test_e_potential_with_margins_matches_joint_and_its_gradient(weight):
    h = Hyper(eta=1.3, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=1.0)
    pb = make_problem(seed=53, hyper=h)
    m = _margins(pb, 54)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    w_arg = None if weight is None else jnp.asarray(weight)
    args = (Phi, jnp.asarray(pb["b"]), jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]),
            jnp.asarray(1.3), w_arg, jnp.asarray(m))  # fmt: skip
    rng = np.random.default_rng(55)
    diffs = []
    for _ in range(6):
        e = rng.gamma(1.5, size=3) * rng.uniform(0.1, 10.0)
        diffs.append(-float(cond.e_potential(jnp.asarray(e), *args)) - _logp(pb, m, weight, e=e))
    _assert_constant(diffs)
    e = jnp.array([0.4, 1.9, 0.7])
    U, g = cond.e_potential_and_grad(e, *args)
    assert float(U) == pytest.approx(float(cond.e_potential(e, *args)), rel=1e-14)
    np.testing.assert_allclose(g, jax.grad(cond.e_potential)(e, *args), rtol=1e-11, atol=1e-12)


# --------------------------------------------------------------------------------------------
# whole chains
# --------------------------------------------------------------------------------------------

_KW = dict(
    eta=2.0, beta_a=1.0, kappa=1.0, bias_prior_var=1.0, gamma0=1.0, adapt_sweeps=4, move="collapsed"
)


def _mcmc(K, delta, margin, **kw):
    mcmc = MCMC(BM3KL(**{**_KW, **kw}), num_warmup=4, num_samples=6, num_chains=2,
                chain_method="vectorized", progress_bar=False, jit_model_args=True)  # fmt: skip
    args = (K, delta) if margin is None else (K, delta, None, jnp.asarray(margin))
    mcmc.run(jax.random.key(56), *args, extra_fields=("potential_energy",))
    draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    return draws, np.asarray(mcmc.get_extra_fields(group_by_chain=True)["potential_energy"])


def _runner(K, delta, margin, **kw):
    run = ChainRunner(BM3KL(**{**_KW, **kw}), num_chains=2, num_samples=10)
    args = (K, delta) if margin is None else (K, delta, None, jnp.asarray(margin))
    run.run(jax.random.key(56), *args)
    return {k: v[:, 4:] for k, v in run.get_samples().items()}


@pytest.mark.parametrize(
    "kw", [dict(move="collapsed_log"), dict(move="gibbs", nu_update="collapsed")]
)
def test_unit_margin_chains_are_the_plain_chains_bit_for_bit(kw):
    pb = make_problem(seed=57, N=10, C=2, P=3)
    K, delta = jnp.asarray(pb["K"]), jnp.asarray(pb["delta"])
    ones = np.ones(pb["delta"].shape)
    for run in (lambda m: _mcmc(K, delta, m, **kw)[0], lambda m: _runner(K, delta, m, **kw)):
        plain, unit = run(None), run(ones)
        for site in ("e", "a", "b", "lam", "nu", "varsigma"):
            assert np.array_equal(plain[site], unit[site]), site


def test_chains_with_margins_agree_across_runners_and_report_the_joint():
    pb = make_problem(seed=58, N=10, C=2, P=3)
    K, delta = jnp.asarray(pb["K"]), jnp.asarray(pb["delta"])
    m = _margins(pb, 59)
    ref, pe = _mcmc(K, delta, m, move="collapsed_log")
    got = _runner(K, delta, m, move="collapsed_log")
    plain = _runner(K, delta, None, move="collapsed_log")
    for site in ("e", "a", "b", "lam", "nu"):
        np.testing.assert_allclose(got[site], ref[site], rtol=1e-9, atol=1e-12, err_msg=site)
    assert not np.allclose(got["a"], plain["a"])  # the margins reached the chain
    hyper = Hyper(2.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    for c in range(2):
        z = {k: jnp.asarray(ref[k][c, -1]) for k in SITES}
        f = decision_values(combine_kernels(K, z["e"] / z["e"].sum()), z["a"], z["b"])
        lj = float(log_joint(z, f, delta, hyper, margin=jnp.asarray(m)))
        assert -pe[c, -1] == pytest.approx(lj, rel=1e-12)


def test_bad_margins_are_refused():
    pb = make_problem(seed=60, N=10, C=2, P=3)
    K, delta = jnp.asarray(pb["K"]), jnp.asarray(pb["delta"])
    for bad in (np.ones((1, 10)), np.r_[np.ones(19), np.nan].reshape(2, 10)):
        with pytest.raises(ValueError, match="margins must be finite numbers of shape"):
            _mcmc(K, delta, bad)
