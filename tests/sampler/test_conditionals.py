"""Full conditionals of :mod:`bayesmkl.sampler.conditionals` vs the model
(docs/math.md §3, V1, V2, V8).

Density checks: for each block x, log q(x | rest) − log p(x, rest) must not depend on x, where p
is NumPyro's ``log_density`` of :func:`bayesmkl.model.classification.bm3kl_model` (augmented) with
every site
substituted, and q is built from the conditional's ``*_params`` companion with scipy densities.

Sampler checks: one-sample Kolmogorov–Smirnov tests of 10 000 seeded draws against scipy, each
asserting p > 1e-3 (it detects a CDF error of ≈ 0.02; 15 such tests, so a correct
implementation fails one spuriously with probability ≈ 1.5 % for a fresh seed; seeds are fixed).
Monte Carlo moment checks use |estimate − truth| < Z·SE with the standard error stated at each.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import stats

from bayesmkl.model.classification import Hyper, bm3kl_model, combine_kernels, decision_values
from bayesmkl.model.likelihood import margin_slack
from bayesmkl.sampler import conditionals as cond
from tests.sampler.helpers import make_problem

KS_ALPHA = 1e-3
N_KS = 10_000
SITES = ("e", "varsigma", "nu", "a", "b", "lam")


def _logp(pb, **override):
    """log p(all sites, data) of the augmented model via NumPyro (no Jacobians)."""
    params = {k: jnp.asarray(override.get(k, pb[k])) for k in SITES}
    lp, _ = log_density(bm3kl_model, (pb["K"], pb["delta"]), {"hyper": pb["hyper"]}, params)
    return float(lp)


def _f(pb, e=None, a=None, b=None):
    e = pb["e"] if e is None else e
    w = jnp.asarray(e) / jnp.sum(e)
    a = pb["a"] if a is None else a
    b = pb["b"] if b is None else b
    return np.asarray(decision_values(combine_kernels(jnp.asarray(pb["K"]), w), a, b))


def _gig_logpdf(x, p, rho, chi):
    """GIG(p, ϱ, χ) log density via scipy (docs/math.md §0 mapping)."""
    p, rho, chi = (np.asarray(v) for v in (p, rho, chi))
    return stats.geninvgauss.logpdf(x, p, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))


def _assert_constant(diffs, tol=1e-9):
    diffs = np.asarray(diffs)
    assert np.ptp(diffs) < tol, diffs - diffs[0]


# --------------------------------------------------------------------------------------------
# Conditional densities against NumPyro's joint (V1–V2)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma0", [0.0, 3.0, 100.0])
def test_lam_conditional_matches_joint(gamma0):
    pb = make_problem(seed=1, hyper=Hyper(eta=1.3, beta_a=0.7, kappa=0.2, bias_prior_var=0.5,
                                          gamma0=gamma0))  # fmt: skip
    zeta = margin_slack(_f(pb), pb["delta"])
    p, rho, chi = (np.asarray(v) for v in cond.lam_params(jnp.asarray(zeta), gamma0))
    assert np.allclose(p, 0.5) and np.allclose(rho, 1 + 2 * gamma0) and np.allclose(chi, zeta**2)
    rng = np.random.default_rng(2)
    diffs = []
    for _ in range(5):
        lam = rng.gamma(0.8, 2.0, size=zeta.shape)
        diffs.append(_gig_logpdf(lam, p, rho, chi).sum() - _logp(pb, lam=lam))
    _assert_constant(diffs)


@pytest.mark.parametrize("alpha_a", [1.0, 2.5])
def test_nu_conditional_matches_joint(alpha_a):
    pb = make_problem(seed=3, hyper=Hyper(eta=1.0, alpha_a=alpha_a, beta_a=0.7, kappa=0.2,
                                          bias_prior_var=0.5, gamma0=3.0))  # fmt: skip
    p, rho, chi = (np.asarray(v) for v in cond.nu_params(pb["a"], pb["varsigma"], alpha_a))
    rng = np.random.default_rng(4)
    diffs = []
    for _ in range(5):
        nu = rng.gamma(0.8, 2.0, size=pb["a"].shape)
        diffs.append(_gig_logpdf(nu, p, rho, chi).sum() - _logp(pb, nu=nu))
    _assert_constant(diffs)


def test_varsigma_conditional_matches_joint():
    h = Hyper(eta=1.0, alpha_a=1.7, beta_a=0.4, kappa=0.3, bias_prior_var=0.5, gamma0=3.0)
    pb = make_problem(seed=5, hyper=h)
    shape, rate = (np.asarray(v) for v in cond.varsigma_params(pb["nu"], 1.7, 0.4, 0.3))
    np.testing.assert_allclose(rate, pb["nu"] + 0.3)
    rng = np.random.default_rng(6)
    diffs = []
    for _ in range(5):
        vs = rng.gamma(0.8, 2.0, size=pb["nu"].shape)
        diffs.append(stats.gamma.logpdf(vs, shape, scale=1 / rate).sum() - _logp(pb, varsigma=vs))
    _assert_constant(diffs)


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
def test_ab_conditional_matches_joint(gamma0):
    """(a_c, b_c) | rest is the Gaussian of ``ab_precision_form`` (V2)."""
    pb = make_problem(seed=7, hyper=Hyper(eta=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5,
                                          gamma0=gamma0))  # fmt: skip
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
    mean, cov = (np.asarray(v) for v in cond.ab_precision_form(
        Kw, pb["delta"], pb["lam"], pb["nu"], pb["hyper"].bias_prior_var))  # fmt: skip
    rng = np.random.default_rng(8)
    C, N = pb["a"].shape
    diffs = []
    for _ in range(5):
        a = rng.normal(size=(C, N))
        b = rng.normal(size=C)
        beta = np.concatenate([a, b[:, None]], axis=1)
        lq = sum(stats.multivariate_normal.logpdf(beta[c], mean[c], cov[c]) for c in range(C))
        diffs.append(lq - _logp(pb, a=a, b=b))
    _assert_constant(diffs, tol=1e-8)


@pytest.mark.parametrize("eta", [1.3, (0.5, 1.0, 2.0)], ids=["scalar-eta", "vector-eta"])
def test_e_potential_matches_joint(eta):
    """−U(e) − log p(e, rest) is constant in e (U from ``e_potential``, Φ precomputed)."""
    h = Hyper(eta=eta, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=3.0)
    pb = make_problem(seed=9, hyper=h)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    eta_arr = jnp.asarray(eta)
    rng = np.random.default_rng(10)
    diffs = []
    for _ in range(6):
        e = rng.gamma(1.5, size=3) * rng.uniform(0.1, 10.0)  # vary the scale too
        U = float(cond.e_potential(jnp.asarray(e), Phi, pb["b"], pb["delta"], pb["lam"], eta_arr))
        diffs.append(-U - _logp(pb, e=e))
    _assert_constant(diffs)


def test_per_kernel_decisions():
    pb = make_problem(seed=11, N=9, C=3, P=4)
    ref = np.einsum("cj,mji->mci", pb["a"], pb["K"])
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    assert Phi.dtype == jnp.float64
    np.testing.assert_allclose(Phi, ref, rtol=1e-12, atol=1e-12)
    Phi32 = cond.per_kernel_decisions(jnp.asarray(pb["K"], jnp.float32), jnp.asarray(pb["a"]))
    np.testing.assert_allclose(Phi32, ref, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------
# ∇U (V2)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[1.0, (0.4, 1.0, 2.5, 1.2)], ids=["eta1", "eta-vec"])
def e_case(request):
    pb = make_problem(seed=12, N=9, C=3, P=4)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    eta = jnp.asarray(request.param, dtype=jnp.float64)
    e = jnp.array([0.3, 1.7, 0.05, 2.2])
    return dict(e=e, Phi=Phi, b=jnp.asarray(pb["b"]), delta=jnp.asarray(pb["delta"]),
                lam=jnp.asarray(pb["lam"]), eta=eta)  # fmt: skip


def _args(c):
    return c["Phi"], c["b"], c["delta"], c["lam"], c["eta"]


def test_grad_matches_autodiff_and_finite_differences(e_case):
    e = e_case["e"]
    U, g = cond.e_potential_and_grad(e, *_args(e_case))
    np.testing.assert_allclose(U, cond.e_potential(e, *_args(e_case)), rtol=1e-14)
    g_ad = jax.grad(cond.e_potential)(e, *_args(e_case))
    err_ad = float(jnp.max(jnp.abs(g - g_ad)) / jnp.max(jnp.abs(g_ad)))
    assert err_ad < 1e-12, err_ad
    # central differences with relative step 1e-5: truncation error O(h²·U''') ≈ 1e-9
    fd = []
    for m in range(e.shape[0]):
        h = 1e-5 * float(e[m])
        d = jnp.zeros_like(e).at[m].set(h)
        up = cond.e_potential(e + d, *_args(e_case))
        dn = cond.e_potential(e - d, *_args(e_case))
        fd.append(float(up - dn) / (2 * h))
    err_fd = float(np.max(np.abs(np.asarray(g) - fd)) / np.max(np.abs(fd)))
    print(f"relative gradient error: autodiff {err_ad:.1e}, finite differences {err_fd:.1e}")
    assert err_fd < 1e-6, err_fd


def test_likelihood_part_is_scale_invariant(e_case):
    """Σ_m e_m ∂U_lik/∂e_m = 0, with ∂U_lik/∂e = ∇U − (1 − (η − 1)/e)."""
    e, eta = e_case["e"], e_case["eta"]
    _, g = cond.e_potential_and_grad(e, *_args(e_case))
    g_lik = g - (1.0 - (eta - 1.0) / e)
    assert float(jnp.max(jnp.abs(g_lik))) > 1.0  # a non-trivial likelihood gradient
    assert abs(float(jnp.dot(e, g_lik))) < 1e-12 * float(jnp.sum(jnp.abs(e * g_lik)))

    # and U_lik itself is invariant: U(c·e) − prior(c·e) = U(e) − prior(e)
    def u_lik(x):
        return cond.e_potential(x, *_args(e_case)) - jnp.sum(x - (eta - 1.0) * jnp.log(x))

    np.testing.assert_allclose(u_lik(7.3 * e), u_lik(e), rtol=1e-13)


def test_quadratic_form_alternative(e_case):
    """§3.4: U_lik(w) = ½wᵀMw − vᵀw + const and g = Mw − v reproduce the O(PCN) gradient."""
    Phi, b, delta, lam, eta = (np.asarray(x) for x in _args(e_case))
    t = 1.0 + lam - delta * b[:, None]
    M = np.einsum("mcn,kcn->mk", Phi, Phi / lam)
    v = np.einsum("cn,mcn->m", delta * t / lam, Phi)
    e = np.asarray(e_case["e"])
    S = e.sum()
    w = e / S
    g = M @ w - v
    _, grad = cond.e_potential_and_grad(jnp.asarray(e), *_args(e_case))
    grad_quad = 1.0 - (eta - 1.0) / e + (g - w @ g) / S
    np.testing.assert_allclose(grad, grad_quad, rtol=1e-11, atol=1e-11)
    rng = np.random.default_rng(13)
    diffs = []
    for _ in range(5):
        x = rng.gamma(1.0, size=e.shape)
        wx = x / x.sum()
        U = float(cond.e_potential(jnp.asarray(x), *_args(e_case)))
        U_lik = U - np.sum(x - (eta - 1.0) * np.log(x))
        diffs.append(U_lik - (0.5 * wx @ M @ wx - v @ wx))
    _assert_constant(diffs)


# --------------------------------------------------------------------------------------------
# Matheron Λ-form against the precision form (V8)
# --------------------------------------------------------------------------------------------

Z_MC = 4.5  # per comparison: two-sided normal tail 7e-6; ≈ 180 comparisons → family rate ≈ 1e-3
N_MC = 4000


def _draw_ab(key, Kw, delta, lam, nu, tau, n=N_MC):
    keys = jax.random.split(key, n)
    a, b = jax.jit(jax.vmap(lambda k: cond.sample_ab(k, Kw, delta, lam, nu, tau)))(keys)
    return np.concatenate([np.asarray(a), np.asarray(b)[..., None]], axis=-1)  # (n, C, N+1)


def _assert_moments(beta, mean, cov, n=N_MC):
    """Per coordinate: |mean − μ| < Z·√(Σ_jj/n); per entry:
    |Σ̂_jk − Σ_jk| < Z·√((Σ_jj Σ_kk + Σ_jk²)/n) (the Gaussian variance of a sample covariance)."""
    for c in range(beta.shape[1]):
        x = beta[:, c]
        sd = np.sqrt(np.diag(cov[c]))
        assert np.all(np.abs(x.mean(0) - mean[c]) < Z_MC * sd / np.sqrt(n))
        S_hat = np.cov(x, rowvar=False)
        se = np.sqrt((np.outer(sd**2, sd**2) + cov[c] ** 2) / n)
        z = np.abs(S_hat - cov[c]) / se
        assert z.max() < Z_MC, (c, z.max())


def test_matheron_matches_precision_form():
    pb = make_problem(seed=14, N=10, C=2, P=3)
    tau = 0.3
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
    args = (Kw, jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]), jnp.asarray(pb["nu"]), tau)
    mean_p, cov_p = (np.asarray(v) for v in cond.ab_precision_form(*args))
    mean_l = np.asarray(cond.ab_mean_lambda_form(*args))
    rel = np.max(np.abs(mean_l - mean_p)) / np.max(np.abs(mean_p))
    print(f"Λ-form vs precision-form mean: max relative difference {rel:.1e}")
    assert rel < 1e-10
    _assert_moments(_draw_ab(jax.random.key(15), *args), mean_p, cov_p)


def test_matheron_extreme_scales_finite_and_correct():
    """ν = 1e-8 (all of class 0, half of class 1) and λ spanning 1e-6 … 1e2.

    The precision form needs 1/ν = 1e8 and 1/λ = 1e6, so it is not used as the reference.
    Instead: (i) the Λ-form mean solves the normal equations Qμ = X̃ᵀΛ⁻¹t with a backward
    error < 1e-10 (Q is formed entrywise, without inversion); (ii) the draws, whitened by the
    Cholesky factor of Q (β − μ ~ N(0, Q⁻¹) ⇔ Lᵀ(β − μ) ~ N(0, I)), have mean 0 and
    covariance I within the Z·SE bounds of :func:`_assert_moments`.
    """
    pb = make_problem(seed=16, N=10, C=2, P=3)
    N = 10
    rng = np.random.default_rng(17)
    nu = np.full((2, N), 1e-8)
    nu[1, ::2] = 1.0
    lam = np.stack([rng.permutation(np.logspace(-6, 2, N)) for _ in range(2)])
    tau = 1e-4
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
    args = (Kw, jnp.asarray(pb["delta"]), jnp.asarray(lam), jnp.asarray(nu), tau)
    mean = np.asarray(cond.ab_mean_lambda_form(*args))
    beta = _draw_ab(jax.random.key(18), *args)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(beta))
    Xt = np.concatenate([np.asarray(Kw), np.ones((N, 1))], axis=1)
    z = np.empty_like(beta)
    for c in range(2):
        d = np.concatenate([nu[c], [tau]])
        Q = Xt.T @ (Xt / lam[c][:, None]) + np.diag(1.0 / d)
        r = Xt.T @ (pb["delta"][c] * (1.0 + lam[c]) / lam[c])
        resid = np.abs(Q @ mean[c] - r).max() / (np.abs(Q).max() * np.abs(mean[c]).max()
                                                  + np.abs(r).max())  # fmt: skip
        assert resid < 1e-10, resid
        # Jacobi-scaled Cholesky of Q (Q = D½ Q̃ D½), so that the factorisation is accurate.
        s = np.sqrt(np.diag(Q))
        L = np.linalg.cholesky(Q / np.outer(s, s))
        z[:, c] = ((beta[:, c] - mean[c]) * s) @ L
    eye = np.broadcast_to(np.eye(N + 1), (2, N + 1, N + 1))
    _assert_moments(z, np.zeros((2, N + 1)), eye)


# --------------------------------------------------------------------------------------------
# λ, ν and ς samplers against scipy (KS)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
@pytest.mark.parametrize("zeta", [-2.0, 0.3, 5.0, 0.0])
def test_sample_lam_ks(zeta, gamma0):
    """λ draws against scipy geninvgauss with ``lam_params``; ζ = 0 → Gamma(1/2, rate s²/2)."""
    delta = jnp.ones((1, N_KS))
    f = jnp.full((1, N_KS), 1.0 - zeta)  # ζ = 1 − δf
    lam = np.asarray(cond.sample_lam(jax.random.key(100 + int(10 * zeta)), f, delta, gamma0))[0]
    assert np.all(np.isfinite(lam)) and np.all(lam > 0)
    p, rho, chi = (float(np.asarray(v).ravel()[0]) for v in cond.lam_params(
        margin_slack(f[:, :1], delta[:, :1]), gamma0))  # fmt: skip
    if zeta == 0.0:
        dist = stats.gamma(0.5, scale=2.0 / (1 + 2 * gamma0))
    else:
        dist = stats.geninvgauss(p, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))
    assert stats.kstest(lam, dist.cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize("alpha_a", [1.0, 2.5])
@pytest.mark.parametrize("a_val,vs", [(0.5, 0.7), (-2.0, 3.0), (0.0, 1.5)])
def test_sample_nu_ks(alpha_a, a_val, vs):
    """ν draws against geninvgauss(``nu_params``); a = 0 → Gamma(α − 1/2, rate ς)."""
    a = jnp.full((1, N_KS), a_val)
    varsigma = jnp.full((1, N_KS), vs)
    nu = np.asarray(cond.sample_nu(jax.random.key(200), a, varsigma, alpha_a))[0]
    assert np.all(np.isfinite(nu)) and np.all(nu > 0)
    p, rho, chi = alpha_a - 0.5, 2.0 * vs, a_val**2
    np.testing.assert_allclose([np.asarray(v)[0, 0] for v in cond.nu_params(a, varsigma, alpha_a)],
                               [p, rho, chi])  # fmt: skip
    if a_val == 0.0:
        dist = stats.gamma(p, scale=1.0 / vs)
    else:
        dist = stats.geninvgauss(p, np.sqrt(rho * chi), scale=np.sqrt(chi / rho))
    assert stats.kstest(nu, dist.cdf).pvalue > KS_ALPHA


def test_sample_varsigma_ks():
    nu = jnp.full((1, N_KS), 0.8)
    vs = np.asarray(cond.sample_varsigma(jax.random.key(300), nu, 1.0, 0.1, 1e-10))[0]
    assert stats.kstest(vs, stats.gamma(1.1, scale=1.0 / (0.8 + 1e-10)).cdf).pvalue > KS_ALPHA
