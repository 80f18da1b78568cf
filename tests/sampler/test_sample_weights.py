"""Sample weights in the BM3KL model and its conditionals (point i's factor raised to ϖ_i).

The weighted model is defined by its marginal pseudo-likelihood, Σ_i ϖ_i × (point i's log L'
terms). Checks, each against an independent oracle:

* the weighted augmented factor integrates over λ (scipy quadrature, Exp(γ0) or flat prior) to
  the weighted marginal of :func:`bayesmkl.model.likelihood.log_pseudo_likelihood_terms`, which is ϖ
  times the unweighted term plus a constant;
* every weighted conditional against NumPyro's joint density of the weighted model (log q − log
  p constant in the block), the (a, b) draws against the weighted precision-form Gaussian by
  Monte Carlo moments, the λ draws against scipy by KS;
* the (T, V) pseudo-observations used by every Gaussian step and w-move reproduce the weighted
  residual (so the collapsed and pairwise moves, written in (T, V), inherit the weights);
* in whole chains (:class:`~bayesmkl.sampler.sampler.BM3KL`): a zero-weight point carries no
  information, so flipping its label leaves every draw unchanged (a missing weight anywhere in
  the sweep would let the label leak in).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC
from numpyro.infer.util import log_density
from scipy import integrate, stats

from bayesmkl.model.classification import Hyper, bm3kl_model, combine_kernels, decision_values
from bayesmkl.model.likelihood import (
    log_augmented_likelihood,
    log_pseudo_likelihood_terms,
    margin_slack,
    pseudo_observations,
    s_of,
)
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.sampler import BM3KL
from tests.sampler.helpers import make_problem

SITES = ("e", "varsigma", "nu", "a", "b", "lam")
#: Sample weights of the N = 8 test problems: a zero, small, unit and large weights.
WEIGHTS = np.array([0.0, 0.4, 1.0, 2.5, 1.0, 0.05, 3.0, 1.7])


def _logp(pb, weight, **override):
    """log p(all sites, data) of the weighted augmented model via NumPyro (no Jacobians)."""
    params = {k: jnp.asarray(override.get(k, pb[k])) for k in SITES}
    args = (pb["K"], pb["delta"], jnp.asarray(weight))
    lp, _ = log_density(bm3kl_model, args, {"hyper": pb["hyper"]}, params)
    return float(lp)


def _assert_constant(diffs, tol=1e-9):
    diffs = np.asarray(diffs)
    assert np.ptp(diffs) < tol, diffs - diffs[0]


# --------------------------------------------------------------------------------------------
# the weighted likelihood
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma0", [0.0, 2.0, 100.0])
@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0, 2.5])
@pytest.mark.parametrize("zeta", [-1.7, 0.4, 3.0])
def test_weighted_marginal_is_the_lambda_integral(zeta, weight, gamma0):
    """∫ p(λ) (2πλ)^{-1/2} exp{−(λ + ϖζ)²/(2λ)} dλ = exp(weighted term), by quadrature."""
    f, delta = jnp.array([[1.0 - zeta]]), jnp.array([[1.0]])
    lam_prior = (lambda x: gamma0 * np.exp(-gamma0 * x)) if gamma0 > 0 else (lambda x: 1.0)

    def integrand(x):
        aug = log_augmented_likelihood(f, delta, jnp.array([[x]]), jnp.array([weight]))
        return lam_prior(x) * np.exp(float(aug))

    mode = abs(weight * zeta) / float(s_of(gamma0)) + 1e-3  # split the range at the bulk
    cuts = (0.0, mode, 10 * mode + 10, np.inf)
    total = sum(
        integrate.quad(integrand, lo, hi, limit=200, epsabs=0, epsrel=1e-11)[0]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
    )
    term = float(log_pseudo_likelihood_terms(f, delta, gamma0, jnp.array([weight]))[0, 0])
    assert np.log(total) == pytest.approx(term, abs=1e-8)
    # ... which is ϖ times the unweighted term plus a constant (log(γ0/s), or 0 for γ0 = 0)
    plain = float(log_pseudo_likelihood_terms(f, delta, gamma0)[0, 0])
    const = float(np.log(gamma0 / s_of(gamma0))) if gamma0 > 0 else 0.0
    assert term == pytest.approx(const + weight * (plain - const), abs=1e-12)


def test_pseudo_observations_reproduce_the_weighted_residual():
    """(T − f)²/V = (λ + ϖζ)²/λ for ϖ > 0, and → λ (no dependence on f) for ϖ = 0."""
    pb = make_problem(seed=21)
    f = np.asarray(decision_values(combine_kernels(jnp.asarray(pb["K"]), pb["e"] / pb["e"].sum()),
                                   pb["a"], pb["b"]))  # fmt: skip
    T, V = (np.asarray(x) for x in pseudo_observations(pb["delta"], pb["lam"], WEIGHTS))
    zeta = np.asarray(margin_slack(f, pb["delta"]))
    expect = (pb["lam"] + WEIGHTS * zeta) ** 2 / pb["lam"]
    np.testing.assert_allclose((T - f) ** 2 / V, expect, rtol=1e-12)
    assert np.all(np.isfinite(T)) and np.all(np.isfinite(V))
    # unweighted (T, V) are the unit-weight values, bit for bit
    T1, V1 = pseudo_observations(pb["delta"], pb["lam"], np.ones(8))
    T0, V0 = pseudo_observations(pb["delta"], pb["lam"])
    assert np.array_equal(T1, T0) and np.array_equal(V1, V0)


# --------------------------------------------------------------------------------------------
# conditionals against the weighted joint
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
def test_weighted_lam_conditional_matches_joint(gamma0):
    """λ | rest ∝ λ^{-1/2} exp{−(s²λ + ϖ²ζ²/λ)/2} (GIG(1/2, s², ϖ²ζ²); unnormalised, so that
    ϖ = 0 is covered), constant offset from the weighted joint."""
    h = Hyper(eta=1.3, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=gamma0)
    pb = make_problem(seed=22, hyper=h)
    f = np.asarray(decision_values(combine_kernels(jnp.asarray(pb["K"]), pb["e"] / pb["e"].sum()),
                                   pb["a"], pb["b"]))  # fmt: skip
    chi = (WEIGHTS * (1.0 - pb["delta"] * f)) ** 2
    rho = 1.0 + 2.0 * gamma0
    rng = np.random.default_rng(23)
    diffs = []
    for _ in range(5):
        lam = rng.gamma(0.8, 2.0, size=chi.shape)
        log_q = np.sum(-0.5 * np.log(lam) - 0.5 * (rho * lam + chi / lam))
        diffs.append(log_q - _logp(pb, WEIGHTS, lam=lam))
    _assert_constant(diffs)


@pytest.mark.parametrize("weight", [0.0, 0.3, 2.5])
def test_weighted_sample_lam_ks(weight):
    """λ draws against scipy: GIG(1/2, s², (ϖζ)²), or Gamma(1/2, rate s²/2) when ϖζ = 0."""
    n, zeta, gamma0 = 10_000, 0.8, 3.0
    delta = jnp.ones((1, n))
    f = jnp.full((1, n), 1.0 - zeta)
    lam = np.asarray(cond.sample_lam(jax.random.key(24), f, delta, gamma0, jnp.full(n, weight)))
    rho, chi = 1.0 + 2.0 * gamma0, (weight * zeta) ** 2
    if weight == 0.0:
        dist = stats.gamma(0.5, scale=2.0 / rho)
    else:
        dist = stats.geninvgauss(0.5, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))
    assert stats.kstest(lam[0], dist.cdf).pvalue > 1e-3


def _weighted_ab_gaussian(Kw, delta, lam, nu, tau, weight):
    """Mean and covariance of β_c = [a_c; b_c] | rest in precision form: noise precision
    ϖ²/λ, targets T = δ(1 + λ/ϖ) (so ϖ²T/λ = δ(ϖ²/λ + ϖ), finite at ϖ = 0)."""
    N = Kw.shape[0]
    Xt = np.concatenate([np.asarray(Kw), np.ones((N, 1))], axis=1)
    means, covs = [], []
    for c in range(delta.shape[0]):
        prec_n = weight**2 / lam[c]
        Q = Xt.T @ (Xt * prec_n[:, None]) + np.diag(1.0 / np.r_[nu[c], tau])
        r = Xt.T @ (delta[c] * (weight**2 / lam[c] + weight))
        cov = np.linalg.inv(Q)
        means.append(cov @ r)
        covs.append(0.5 * (cov + cov.T))
    return np.array(means), np.array(covs)


def test_weighted_ab_conditional_matches_joint_and_draws():
    h = Hyper(eta=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=100.0)
    pb = make_problem(seed=25, hyper=h)
    tau = h.bias_prior_var
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
    mean, cov = _weighted_ab_gaussian(Kw, pb["delta"], pb["lam"], pb["nu"], tau, WEIGHTS)
    # (i) the Gaussian is the weighted joint's conditional: log q − log p constant in (a, b)
    rng = np.random.default_rng(26)
    C, N = pb["a"].shape
    diffs = []
    for _ in range(5):
        a, b = rng.normal(size=(C, N)), rng.normal(size=C)
        beta = np.concatenate([a, b[:, None]], axis=1)
        lq = sum(stats.multivariate_normal.logpdf(beta[c], mean[c], cov[c]) for c in range(C))
        diffs.append(lq - _logp(pb, WEIGHTS, a=a, b=b))
    _assert_constant(diffs, tol=1e-8)
    # (ii) sample_ab's weighted draws have its moments: |mean − μ| < Z·sd/√n per coordinate,
    # and the Gaussian standard error of each sample covariance entry (Z = 4.5, ≈ 90 entries)
    n, Z = 4000, 4.5
    keys = jax.random.split(jax.random.key(27), n)
    args = (Kw, jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]), jnp.asarray(pb["nu"]), tau,
            jnp.asarray(WEIGHTS))  # fmt: skip
    a, b = jax.jit(jax.vmap(lambda k: cond.sample_ab(k, *args)))(keys)
    draws = np.concatenate([np.asarray(a), np.asarray(b)[..., None]], axis=-1)
    for c in range(C):
        sd = np.sqrt(np.diag(cov[c]))
        assert np.all(np.abs(draws[:, c].mean(0) - mean[c]) < Z * sd / np.sqrt(n))
        se = np.sqrt((np.outer(sd**2, sd**2) + cov[c] ** 2) / n)
        assert np.max(np.abs(np.cov(draws[:, c], rowvar=False) - cov[c]) / se) < Z


def test_weighted_e_potential_matches_joint_and_its_gradient():
    h = Hyper(eta=1.3, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=3.0)
    pb = make_problem(seed=28, hyper=h)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    args = (Phi, jnp.asarray(pb["b"]), jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]),
            jnp.asarray(1.3), jnp.asarray(WEIGHTS))  # fmt: skip
    rng = np.random.default_rng(29)
    diffs = []
    for _ in range(6):
        e = rng.gamma(1.5, size=3) * rng.uniform(0.1, 10.0)
        diffs.append(-float(cond.e_potential(jnp.asarray(e), *args)) - _logp(pb, WEIGHTS, e=e))
    _assert_constant(diffs)
    e = jnp.array([0.4, 1.9, 0.7])
    U, g = cond.e_potential_and_grad(e, *args)
    assert float(U) == pytest.approx(float(cond.e_potential(e, *args)), rel=1e-14)
    np.testing.assert_allclose(g, jax.grad(cond.e_potential)(e, *args), rtol=1e-11, atol=1e-12)


# --------------------------------------------------------------------------------------------
# whole chains
# --------------------------------------------------------------------------------------------


def _chain(move, K, delta, weight, seed=0):
    mcmc = MCMC(BM3KL(eta=1.0, kappa=0.2, beta_a=0.7, bias_prior_var=0.5, gamma0=3.0, move=move),
                num_warmup=15, num_samples=15, progress_bar=False, jit_model_args=True)  # fmt: skip
    args = (K, delta) if weight is None else (K, delta, jnp.asarray(weight))
    mcmc.run(jax.random.key(seed), *args)
    return {k: np.asarray(v) for k, v in mcmc.get_samples().items()}


# "collapsed" contains the pairwise gibbs step and the (T, V) moves; the e-potential that the
# "exact" move uses is checked against the weighted joint above
@pytest.mark.parametrize("move", ["collapsed"])
def test_zero_weight_point_carries_no_information(move):
    """Flipping the labels of zero-weight points leaves the chain unchanged (same keys)."""
    pb = make_problem(seed=30, N=12, C=2, P=3)
    weight = np.ones(12)
    weight[[1, 4, 9]] = 0.0
    flipped = pb["delta"].copy()
    flipped[:, [1, 4, 9]] *= -1.0
    K = jnp.asarray(pb["K"])
    a = _chain(move, K, jnp.asarray(pb["delta"]), weight)
    b = _chain(move, K, jnp.asarray(flipped), weight)
    for site in ("w", "a", "b"):
        np.testing.assert_allclose(a[site], b[site], rtol=1e-7, atol=1e-10, err_msg=site)
    # ... while flipping a point of weight 1 changes the draws (the test is not vacuous)
    flipped[:, 0] *= -1.0
    c = _chain(move, K, jnp.asarray(flipped), weight)
    assert not np.allclose(a["a"], c["a"], rtol=1e-3)


@pytest.mark.parametrize("bad", [np.ones(5), np.r_[np.ones(11), -1.0], np.zeros(12),
                                 np.r_[np.ones(11), np.nan]])  # fmt: skip
def test_bad_weights_are_refused(bad):
    pb = make_problem(seed=32, N=12, C=1, P=2)
    with pytest.raises(ValueError, match="sample weights must be 12 finite non-negative"):
        _chain("gibbs", jnp.asarray(pb["K"]), jnp.asarray(pb["delta"]), bad)
