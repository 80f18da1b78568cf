"""The NumPyro model and ``log_joint`` of :mod:`bayesmkl.model.classification` (docs/math.md
§1–§2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import log_density
from scipy import stats

from bayesmkl.model.classification import (
    Hyper,
    bm3kl_model,
    combine_kernels,
    decision_values,
    log_joint,
    signed_targets,
)
from bayesmkl.model.likelihood import log_augmented_likelihood, log_pseudo_likelihood
from tests.sampler.helpers import make_problem

SITES = ("e", "varsigma", "nu", "a", "b", "lam")


def _f(pb):
    w = jnp.asarray(pb["e"] / pb["e"].sum())
    return decision_values(combine_kernels(jnp.asarray(pb["K"]), w), pb["a"], pb["b"])


@pytest.mark.parametrize("gamma0", [0.0, 0.5, 100.0])
@pytest.mark.parametrize("eta", [1.0, (0.6, 1.0, 3.0)], ids=["scalar-eta", "vector-eta"])
def test_log_joint_equals_numpyro_log_density(gamma0, eta):
    """``log_joint`` is exactly (to rounding) NumPyro's log density of the augmented model,
    including γ0 = 0, where λ's flat prior contributes 0."""
    h = Hyper(eta=eta, alpha_a=1.4, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=gamma0)
    pb = make_problem(seed=20, hyper=h)
    params = {k: jnp.asarray(pb[k]) for k in SITES}
    lp, trace = log_density(bm3kl_model, (pb["K"], pb["delta"]), {"hyper": h}, params)
    lj = log_joint(params, _f(pb), jnp.asarray(pb["delta"]), h)
    np.testing.assert_allclose(lj, lp, rtol=1e-13)
    np.testing.assert_allclose(trace["w"]["value"], pb["e"] / pb["e"].sum(), rtol=1e-14)
    # Independent hand-written prior terms (scipy), so a mistake common to both is caught too.
    eta_v = np.broadcast_to(np.asarray(eta, float), (3,))
    ref = (
        stats.gamma.logpdf(pb["e"], eta_v).sum()
        + stats.gamma.logpdf(pb["varsigma"], 0.7, scale=1 / 0.2).sum()
        + stats.gamma.logpdf(pb["nu"], 1.4, scale=1 / pb["varsigma"]).sum()
        + stats.norm.logpdf(pb["a"], 0, np.sqrt(pb["nu"])).sum()
        + stats.norm.logpdf(pb["b"], 0, np.sqrt(0.5)).sum()
        + (stats.expon.logpdf(pb["lam"], scale=1 / gamma0).sum() if gamma0 > 0 else 0.0)
        + float(log_augmented_likelihood(_f(pb), pb["delta"], pb["lam"]))
    )
    np.testing.assert_allclose(lp, ref, rtol=1e-12)


@pytest.mark.parametrize("gamma0", [0.0, 3.0])
def test_marginal_model_uses_pseudo_likelihood(gamma0):
    """``augmented=False``: same priors, factor log L / log L' instead of λ and (5)."""
    h = Hyper(eta=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=gamma0)
    pb = make_problem(seed=21, hyper=h)
    params = {k: jnp.asarray(pb[k]) for k in SITES if k != "lam"}
    lp_marg, tr = log_density(
        bm3kl_model, (pb["K"], pb["delta"]), {"hyper": h, "augmented": False}, params
    )
    assert "lam" not in tr
    params["lam"] = jnp.asarray(pb["lam"])
    lj = log_joint(params, _f(pb), jnp.asarray(pb["delta"]), h)
    lam_terms = float(log_augmented_likelihood(_f(pb), pb["delta"], pb["lam"]))
    if gamma0 > 0:
        lam_terms += stats.expon.logpdf(pb["lam"], scale=1 / gamma0).sum()
    expected = lj - lam_terms + log_pseudo_likelihood(_f(pb), pb["delta"], gamma0)
    np.testing.assert_allclose(lp_marg, expected, rtol=1e-12)


def test_prior_of_w_is_dirichlet():
    """Prior predictive: w = e/Σe ~ Dir(η) (w₁ ~ Beta(η₁, Ση − η₁), KS p > 1e-3) and
    S = Σe ~ Gamma(Ση, 1) (docs/math.md §2.1)."""
    eta = (0.5, 1.0, 2.5)
    pb = make_problem(seed=22, hyper=Hyper.paper(eta=eta))
    pred = Predictive(bm3kl_model, num_samples=4000, return_sites=["e", "w"])
    out = pred(jax.random.key(23), pb["K"], pb["delta"], hyper=Hyper.paper(eta=eta, gamma0=3.0))
    w = np.asarray(out["w"])
    np.testing.assert_allclose(w, out["e"] / out["e"].sum(-1, keepdims=True), rtol=1e-14)
    assert stats.kstest(w[:, 0], stats.beta(0.5, 3.5).cdf).pvalue > 1e-3
    assert stats.kstest(w[:, 2], stats.beta(2.5, 1.5).cdf).pvalue > 1e-3
    assert stats.kstest(np.asarray(out["e"]).sum(-1), stats.gamma(4.0).cdf).pvalue > 1e-3


def test_combine_kernels_and_decision_values():
    pb = make_problem(seed=24, N=7, C=3, P=4)
    w = pb["e"] / pb["e"].sum()
    Kw_ref = np.einsum("m,mij->ij", w, pb["K"])
    Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(w))
    np.testing.assert_allclose(Kw, Kw_ref, rtol=1e-13)
    Kw32 = combine_kernels(jnp.asarray(pb["K"], jnp.float32), jnp.asarray(w))
    assert Kw32.dtype == jnp.float64
    np.testing.assert_allclose(Kw32, Kw_ref, rtol=1e-6)
    f = decision_values(Kw, jnp.asarray(pb["a"]), jnp.asarray(pb["b"]))
    # f_ci = a_cᵀ h^i + b_c with h^i = K_w[:, i] (eq. 1)
    f_ref = np.array([[pb["a"][c] @ Kw_ref[:, i] + pb["b"][c] for i in range(7)]
                      for c in range(3)])  # fmt: skip
    np.testing.assert_allclose(f, f_ref, rtol=1e-12)


def test_signed_targets():
    codes = np.array([0, 1, 1, 0])
    np.testing.assert_array_equal(signed_targets(codes, 2), [[-1, 1, 1, -1]])
    np.testing.assert_array_equal(
        signed_targets(codes, 2, binary_mode="ova"), [[1, -1, -1, 1], [-1, 1, 1, -1]]
    )
    D = signed_targets(np.array([2, 0, 1]), 3)
    np.testing.assert_array_equal(D, [[-1, 1, -1], [-1, -1, 1], [1, -1, -1]])
