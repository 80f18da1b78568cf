"""The landmark (reduced-support) model of docs/math.md §16 in the sampler.

* The weight-space (a, b) conditional against the model's joint density (docs/math.md §13, V2).
* With M = N and Z = X the weight-space Gaussian is the function-space one (same mean and
  covariance to rounding; they are one Gaussian written two ways).
* The weight-space sampler's draws have the moments of its conditional.
* The sweep reads K (P, N, M): the shapes it carries, the route it takes, what it refuses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import MCMC
from numpyro.infer.util import log_density
from scipy import stats

from bayesmkl.config import x64_scope
from bayesmkl.model.classification import (
    Hyper,
    bm3kl_model,
    combine_kernels,
    kernel_decision_values,
)
from bayesmkl.model.likelihood import pseudo_observations
from bayesmkl.sampler import collapsed, steps
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.regression import BM3KLReg
from bayesmkl.sampler.sampler import BM3KL
from tests.sampler.helpers import make_problem

SITES = ("e", "varsigma", "nu", "a", "b", "lam")


def landmark_problem(seed=0, N=12, M=5, C=2, P=3):
    """Kernels K(X, Z) ``(P, N, M)`` between N random points and M of them, and values of every
    site of the landmark model (a, ν, ς of shape (C, M); λ of shape (C, N))."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    idx = np.sort(rng.choice(N, M, replace=False))
    widths = np.geomspace(0.3, 3.0, P)
    d2 = np.sum((X[:, None, :] - X[idx][None, :, :]) ** 2, axis=-1)
    K = np.stack([np.exp(-d2 / (2.0 * s**2)) for s in widths])
    labels = rng.integers(0, C, size=N)
    delta = np.where(labels[None, :] == np.arange(C)[:, None], 1.0, -1.0)
    hyper = Hyper(eta=1.3, alpha_a=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=3.0)
    return dict(
        K=K, X=X, idx=idx, delta=delta, hyper=hyper, e=rng.gamma(2.0, size=P),
        a=rng.normal(size=(C, M)), b=rng.normal(size=C), lam=rng.gamma(1.5, size=(C, N)),
        nu=rng.gamma(1.5, size=(C, M)), varsigma=rng.gamma(1.5, size=(C, M)),
    )  # fmt: skip


def _logp(pb, **override):
    """log p(all sites, data) of the augmented landmark model via NumPyro (no Jacobians)."""
    params = {k: jnp.asarray(override.get(k, pb[k])) for k in SITES}
    lp, _ = log_density(bm3kl_model, (pb["K"], pb["delta"]), {"hyper": pb["hyper"]}, params)
    return float(lp)


def _psi_w(pb):
    return combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))


def test_landmark_decision_values_are_the_sum_over_landmarks():
    """f_ci = Σ_j a_cj Σ_m w_m K_m(x_i, z_j) + b_c, and Φ[m] = A Ψ_mᵀ, written out."""
    with x64_scope():
        pb = landmark_problem(seed=1)
        w = pb["e"] / pb["e"].sum()
        f = np.asarray(kernel_decision_values(jnp.asarray(pb["K"]), jnp.asarray(w), pb["a"],
                                              pb["b"]))  # fmt: skip
        C, N = pb["delta"].shape
        loop = np.array([[sum(pb["a"][c, j] * np.dot(w, pb["K"][:, i, j])
                              for j in range(pb["a"].shape[1])) + pb["b"][c]
                          for i in range(N)] for c in range(C)])  # fmt: skip
        np.testing.assert_allclose(f, loop, rtol=1e-12, atol=1e-12)
        Phi = np.asarray(cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"])))
        for m in range(pb["K"].shape[0]):
            np.testing.assert_allclose(Phi[m], pb["a"] @ pb["K"][m].T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
def test_weight_space_ab_conditional_matches_joint(gamma0):
    """(a_c, b_c) | rest of the landmark model is the Gaussian of ``ab_weight_space_params``:
    log q(a, b) − log p(all, data) is constant in (a, b) (V2 for docs/math.md §16.2)."""
    with x64_scope():
        pb = landmark_problem(seed=7)
        pb["hyper"] = pb["hyper"]._replace(gamma0=gamma0)
        T, V = pseudo_observations(jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]))
        mean, cov = (np.asarray(v) for v in cond.ab_weight_space_params(
            _psi_w(pb), T, V, jnp.asarray(pb["nu"]), pb["hyper"].bias_prior_var))  # fmt: skip
        rng = np.random.default_rng(8)
        C, M = pb["a"].shape
        diffs = []
        for _ in range(5):
            a = rng.normal(size=(C, M))
            b = rng.normal(size=C)
            beta = np.concatenate([a, b[:, None]], axis=1)
            lq = sum(stats.multivariate_normal.logpdf(beta[c], mean[c], cov[c]) for c in range(C))
            diffs.append(lq - _logp(pb, a=a, b=b))
        diffs = np.asarray(diffs)
        assert np.ptp(diffs) < 1e-8, diffs - diffs[0]


def test_weight_space_equals_function_space_when_landmarks_are_the_points():
    """M = N, Z = X: the weight-space Gaussian has the mean and covariance of the precision
    form (and the Λ-form mean) of the exact model's (a, b) step, to rounding."""
    with x64_scope():
        pb = make_problem(seed=14, N=10, C=2, P=3)
        tau = 0.3
        Kw = combine_kernels(jnp.asarray(pb["K"]), jnp.asarray(pb["e"] / pb["e"].sum()))
        args = (Kw, jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]), jnp.asarray(pb["nu"]), tau)
        mean_p, cov_p = (np.asarray(v) for v in cond.ab_precision_form(*args))
        mean_l = np.asarray(cond.ab_mean_lambda_form(*args))
        T, V = pseudo_observations(args[1], args[2])
        mean_w, cov_w = (np.asarray(v) for v in cond.ab_weight_space_params(Kw, T, V, args[3],
                                                                             tau))  # fmt: skip
        assert mean_w.shape == (2, 11) and cov_w.shape == (2, 11, 11)
        np.testing.assert_allclose(mean_w, mean_p, rtol=1e-9, atol=1e-10 * np.abs(mean_p).max())
        np.testing.assert_allclose(mean_w, mean_l, rtol=1e-9, atol=1e-10 * np.abs(mean_p).max())
        np.testing.assert_allclose(cov_w, cov_p, rtol=1e-9, atol=1e-10 * np.abs(cov_p).max())


Z_MC = 4.5
N_MC = 4000


def test_weight_space_sampler_has_the_moments_of_its_conditional():
    """Draws of ``sample_ab_weight_space`` (rectangular Ψ_w, λ over 1e-4 … 10, ν over
    1e-6 … 10) have the conditional's mean and covariance within Monte Carlo error."""
    with x64_scope():
        pb = landmark_problem(seed=3, N=14, M=6, C=2)
        lam = np.geomspace(1e-4, 10.0, 14)[None, :] * np.ones((2, 1))
        nu = np.geomspace(1e-6, 10.0, 6)[None, :] * np.ones((2, 1))
        T, V = pseudo_observations(jnp.asarray(pb["delta"]), jnp.asarray(lam))
        Psi = _psi_w(pb)
        tau = 0.7
        mean, cov = (np.asarray(v) for v in cond.ab_weight_space_params(Psi, T, V, nu, tau))
        keys = jax.random.split(jax.random.key(5), N_MC)
        a, b = jax.jit(jax.vmap(lambda k: cond.sample_ab_weight_space(k, Psi, T, V, nu, tau)))(keys)
        beta = np.concatenate([np.asarray(a), np.asarray(b)[..., None]], axis=-1)
        assert np.all(np.isfinite(beta))
        for c in range(2):
            x = beta[:, c]
            sd = np.sqrt(np.diag(cov[c]))
            assert np.all(np.abs(x.mean(0) - mean[c]) < Z_MC * sd / np.sqrt(N_MC))
            se = np.sqrt((np.outer(sd**2, sd**2) + cov[c] ** 2) / N_MC)
            assert (np.abs(np.cov(x, rowvar=False) - cov[c]) / se).max() < Z_MC


def test_sweep_on_a_landmark_block_carries_landmark_shapes():
    """MCMC on K (P, N, M): a, ν, ς have M columns, λ N, and every draw is finite."""
    with x64_scope():
        pb = landmark_problem(seed=2, N=30, M=8, C=1)
        mcmc = MCMC(BM3KL(), num_warmup=30, num_samples=20, num_chains=1, progress_bar=False)
        mcmc.run(jax.random.key(0), pb["K"], pb["delta"][:1])
        s = mcmc.get_samples()
        assert s["a"].shape == (20, 1, 8) and s["nu"].shape == (20, 1, 8)
        assert s["varsigma"].shape == (20, 1, 8) and s["lam"].shape == (20, 1, 30)
        assert all(np.all(np.isfinite(np.asarray(v))) for v in s.values())
        reg = MCMC(BM3KLReg(), num_warmup=20, num_samples=10, num_chains=1, progress_bar=False)
        reg.run(jax.random.key(1), pb["K"], pb["X"][:, :1].T)
        assert reg.get_samples()["a"].shape == (10, 1, 8)


def test_landmark_flag_routes_a_square_block_to_weight_space(monkeypatch):
    """``landmarks=True`` with a square K (M = N landmarks) draws (a, b) in weight space; the
    default never does (the exact path)."""
    calls = {"weight": 0, "function": 0}
    real_w, real_f = cond.sample_ab_weight_space, cond.sample_ab_tv

    def spy_w(*args):
        calls["weight"] += 1
        return real_w(*args)

    def spy_f(*args):
        calls["function"] += 1
        return real_f(*args)

    monkeypatch.setattr(cond, "sample_ab_weight_space", spy_w)
    monkeypatch.setattr(cond, "sample_ab_tv", spy_f)
    with x64_scope():
        pb = make_problem(seed=4, N=9, C=1, P=2)
        for flag in (False, True):
            calls.update(weight=0, function=0)
            mcmc = MCMC(BM3KL(landmarks=flag), num_warmup=2, num_samples=2, num_chains=1,
                        progress_bar=False)  # fmt: skip
            mcmc.run(jax.random.key(0), pb["K"], pb["delta"])
            assert (calls["weight"] > 0) == flag and (calls["function"] > 0) == (not flag)


def test_collapsed_nu_update_is_refused_for_landmarks():
    with pytest.raises(ValueError, match="landmark"):
        BM3KL(nu_update="collapsed", landmarks=True)
    with x64_scope():
        pb = landmark_problem(seed=5, N=10, M=4, C=1)
        mcmc = MCMC(BM3KL(nu_update="collapsed"), num_warmup=1, num_samples=1,
                    progress_bar=False)  # fmt: skip
        with pytest.raises(ValueError, match="nu_update='collapsed'"):
            mcmc.run(jax.random.key(0), pb["K"], pb["delta"][:1])


def test_active_set_is_capped_by_the_landmarks():
    """The collapsed move integrates out at most M landmark weights per class."""
    assert collapsed.n_active_for(3, 1, 500, 32, M=10) == 10
    assert collapsed.n_active_for(3, 1, 500, 32) == 32
    with x64_scope():
        pb = landmark_problem(seed=6, N=20, M=7, C=2)
        Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
        data = collapsed.collapsed_setup(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]),
                                         jnp.asarray(pb["nu"]), Phi, 7)  # fmt: skip
        # all M weights active: nothing left in Φ_I
        np.testing.assert_allclose(np.asarray(data.Phi_I), 0.0, atol=1e-12)
        assert data.K_A.shape == (3, 2, 20, 7)


def test_gaussian_step_dispatch():
    """``gaussian_ab_step(weight_space=True)`` returns a (C, M) from an (N, M) kernel."""
    with x64_scope():
        pb = landmark_problem(seed=9, N=11, M=4, C=2)
        T, V = pseudo_observations(jnp.asarray(pb["delta"]), jnp.asarray(pb["lam"]))
        a, b = steps.gaussian_ab_step(jax.random.key(0), _psi_w(pb), T, V,
                                      jnp.asarray(pb["nu"]), 0.5, True)  # fmt: skip
        assert a.shape == (2, 4) and b.shape == (2,)


# ---------------------------------------------------------------------------------------------
# Geweke successive-conditional test of the landmark sweep (the Gaussian-data model of
# tests/sampler/test_sampler.py §3, with f = A Ψ_wᵀ + b over M = 3 landmarks of N = 6 points)
# ---------------------------------------------------------------------------------------------
GEWEKE_HYPER = Hyper(eta=1.0, alpha_a=1.0, beta_a=2.0, kappa=1.0, bias_prior_var=0.5, gamma0=1.0)
_t = np.arange(6.0)
_z = np.array([0.5, 2.0, 4.5])
GEWEKE_K = np.stack([np.exp(-0.5 * (_t[:, None] - _z[None, :]) ** 2),
                     0.5 + 0.5 * np.exp(-0.1 * (_t[:, None] - _z[None, :]) ** 2)])  # fmt: skip


def _prior(key, h, P, N, M):
    ks = jax.random.split(key, 6)
    e = jax.random.gamma(ks[0], h.eta, (P,))
    vs = jax.random.gamma(ks[1], h.beta_a, (1, M)) / h.kappa
    nu = jax.random.gamma(ks[2], h.alpha_a, (1, M)) / vs
    a = jnp.sqrt(nu) * jax.random.normal(ks[3], (1, M))
    b = np.sqrt(h.bias_prior_var) * jax.random.normal(ks[4], (1,))
    lam = jax.random.exponential(ks[5], (1, N)) / (h.gamma0 + 0.5)
    return {"e": e, "varsigma": vs, "nu": nu, "a": a, "b": b, "lam": lam}


def _f(z, K):
    return kernel_decision_values(K, z["e"] / jnp.sum(z["e"]), z["a"], z["b"])


def _landmark_geweke_sweep(key, z, y, K, h):
    """The default sweep's order on the Gaussian-data model with a landmark block: pairwise
    Gibbs on w, HMC on the collapsed target (2 of the 3 landmark weights and b integrated out),
    scale refresh, (a, b) in weight space, λ, ν, ς (pseudo-observations T = y, V = λ)."""
    from bayesmkl.sampler import simplex
    from bayesmkl.sampler.moves import exact_hmc_move

    k_g, k_e, k_s, k_lam, k_ab, k_nu, k_vs = jax.random.split(key, 7)
    eta = jnp.broadcast_to(jnp.asarray(h.eta, dtype=jnp.float64), z["e"].shape)
    P = z["e"].shape[0]
    Phi = cond.per_kernel_decisions(K, z["a"])
    e = simplex.sample_w_exact(k_g, z["e"], Phi, z["b"], y, z["lam"], eta, 4 * P, eta_is_one=True)
    data = collapsed.collapsed_setup(K, z["a"], z["nu"], Phi, 2)
    pg = collapsed.collapsed_potential_and_grad(data, y, z["lam"], h.bias_prior_var, eta)
    res = exact_hmc_move(k_e, e, jnp.zeros_like(e), 0.15, pg, n_leapfrog=8)
    e = cond.sample_scale(k_s, res.e, eta)
    Psi = combine_kernels(K, e / jnp.sum(e))
    a, b = cond.sample_ab_weight_space(k_ab, Psi, y, z["lam"], z["nu"], h.bias_prior_var)
    f = kernel_decision_values(K, e / jnp.sum(e), a, b)
    lam = cond.sample_lam(k_lam, 1.0 - (y - f), jnp.ones_like(y), h.gamma0)
    nu = cond.sample_nu(k_nu, a, z["varsigma"], h.alpha_a)
    vs = cond.sample_varsigma(k_vs, nu, h.alpha_a, h.beta_a, h.kappa)
    return {"e": e, "lam": lam, "a": a, "b": b, "nu": nu, "varsigma": vs}, res.accept_prob


@jax.jit
def _landmark_geweke_run(key):
    K = jnp.asarray(GEWEKE_K)
    h = GEWEKE_HYPER
    P, N, M = K.shape

    def draw_y(k, z):
        f = _f(z, K)
        return f + jnp.sqrt(z["lam"]) * jax.random.normal(k, f.shape)

    def chain(key):
        k0, ky, kr = jax.random.split(key, 3)
        z = _prior(k0, h, P, N, M)

        def step(carry, k):
            z, y = carry
            k1, k2 = jax.random.split(k)
            z, acc = _landmark_geweke_sweep(k1, z, y, K, h)
            return (z, draw_y(k2, z)), acc

        (z, _), acc = jax.lax.scan(step, (z, draw_y(ky, z)), jax.random.split(kr, 20))
        return z, jnp.mean(acc)

    k_chain, k_prior = jax.random.split(key)
    z_end, acc = jax.vmap(chain)(jax.random.split(k_chain, 1500))
    z_prior = jax.vmap(lambda k: _prior(k, h, P, N, M))(jax.random.split(k_prior, 1500))
    return z_end, z_prior, acc


def _geweke_stats(z):
    e = np.asarray(z["e"])
    out = {"w0": e[:, 0] / e.sum(1), "logS": np.log(e.sum(1)), "b": np.asarray(z["b"])[:, 0]}
    a = np.asarray(z["a"])[:, 0, :]
    for j in range(a.shape[1]):
        out[f"a{j}"] = a[:, j]
        out[f"nu{j}"] = np.log(np.asarray(z["nu"])[:, 0, j])
        out[f"varsigma{j}"] = np.log(np.asarray(z["varsigma"])[:, 0, j])
    for i in (0, 3, 5):
        out[f"lam{i}"] = np.log(np.asarray(z["lam"])[:, 0, i])
    out["a_sum"], out["a_sq"] = a.sum(1), np.sum(a**2, 1)
    return out


@pytest.mark.slow
def test_landmark_sweep_geweke_successive_conditional():
    """Chains that alternate the landmark sweep with y | θ, λ from exact joint draws keep the
    prior's law (two-sample KS against fresh prior draws, family level 1e-3): a wrong
    weight-space (a, b) conditional, or a step that mixes up the N and M axes, drifts."""
    with x64_scope():
        z_end, z_prior, acc = _landmark_geweke_run(jax.random.key(45))
    assert float(np.mean(acc)) > 0.5
    s_end, s_prior = _geweke_stats(z_end), _geweke_stats(z_prior)
    pvals = {k: stats.ks_2samp(s_end[k], s_prior[k]).pvalue for k in s_end}
    alpha = 1e-3 / len(pvals)
    print(f"landmark Geweke: min p = {min(pvals.values()):.3g} over {len(pvals)} statistics")
    bad = {k: p for k, p in pvals.items() if p < alpha}
    assert not bad, f"Geweke KS failures (alpha={alpha:.1e}): {bad}"


# ---------------------------------------------------------------------------------------------
# Extra cycles of the blocks given w (SweepConfig.inner_cycles)
# ---------------------------------------------------------------------------------------------
def test_auto_inner_cycles_balance_the_kernel_weight_move():
    """ "auto": none for the exact model; for the landmark model round(3(L + 1)(P·s + s²)/M²),
    clipped to 1..MAX_INNER_CYCLES; an int is taken as it is."""
    config = BM3KL().config
    assert config.inner_cycles == "auto"
    cycles = steps.inner_cycles_for
    assert cycles(config, 16, 1, 4000, 4000, landmark=False) == 0
    assert cycles(config, 16, 1, 4000, 100, landmark=True) == 5  # 33·(512 + 1024)/10⁴ = 5.07
    assert cycles(config, 16, 1, 4000, 300, landmark=True) == 1  # 0.56, at least one
    assert cycles(config, 16, 1, 4000, 20, landmark=True) == steps.MAX_INNER_CYCLES
    # the active set shrinks by memory, and the cycles with it (s = 2**25 // (16·10·20000) = 10)
    assert cycles(config, 16, 10, 20000, 100, landmark=True) == 1
    assert cycles(config._replace(move="gibbs"), 16, 1, 4000, 100, landmark=True) == 1
    assert cycles(config._replace(inner_cycles=3), 16, 1, 4000, 4000, landmark=False) == 3


@pytest.mark.parametrize("bad", [-1, 2.0, "some"])
def test_inner_cycles_must_be_auto_or_a_count(bad):
    with pytest.raises(ValueError, match="inner_cycles must be 'auto'"):
        BM3KL(inner_cycles=bad).config.validate()


def test_auto_inner_cycles_leave_the_exact_sweep_as_it_was():
    """On square kernels "auto" is no cycle: the same draws, bit for bit, as inner_cycles=0."""
    pb = make_problem(seed=3, N=14, C=1, P=3)
    K, delta = pb["K"], pb["delta"]

    def draws(cycles):
        with x64_scope():
            mcmc = MCMC(BM3KL(inner_cycles=cycles), num_warmup=10, num_samples=10, num_chains=1,
                        progress_bar=False)  # fmt: skip
            mcmc.run(jax.random.key(4), K, delta)
            return {k: np.asarray(v) for k, v in mcmc.get_samples().items()}

    auto, none = draws("auto"), draws(0)
    for k in auto:
        np.testing.assert_array_equal(auto[k], none[k], err_msg=k)


def test_inner_cycles_move_the_landmark_decision_values_within_a_sweep():
    """A landmark sweep with cycles draws (a, b) and λ again after the TPBN step: the state it
    ends in differs from the sweep without them, while w, whose move comes first, is the same."""
    with x64_scope():
        pb = landmark_problem(seed=2, N=16, M=5, C=1)

        def one_sweep(cycles):
            mcmc = MCMC(BM3KL(inner_cycles=cycles), num_warmup=0, num_samples=1, num_chains=1,
                        progress_bar=False)  # fmt: skip
            mcmc.run(jax.random.key(8), pb["K"], pb["delta"][:1])
            return {k: np.asarray(v) for k, v in mcmc.get_samples().items()}

        none, two = one_sweep(0), one_sweep(2)
    np.testing.assert_array_equal(none["w"], two["w"])
    for k in ("a", "b", "lam", "nu"):
        assert not np.allclose(none[k], two[k]), k
