"""Kernel-weight moves of :mod:`bayesmkl.sampler.moves` (docs/math.md §4, V3–V5).

Oracle: the P = 3, C = 1, N = 10 conditional of e in :func:`helpers.p3_conditional`, whose
exact E[w] and E[w²] come from 2-D Gauss–Legendre quadrature on the simplex (cross-checked
against scipy ``dblquad`` below). The scale S = Σe is independent of w and Gamma(Pη, 1) under
this conditional (docs/math.md §2.1), so the w-marginal is all that quadrature needs.

Statistical tolerances are |estimate − truth| < Z·MCSE with MCSE = sd/√ESS, ESS being NumPyro's
multi-chain Geyer estimate over many vmapped chains. Z = 4 gives a two-sided false-alarm rate
of 6e-5 per comparison (normal approximation); the file makes about 30 such comparisons, so a
correct implementation fails spuriously with probability ≈ 2e-3 (the seeds are fixed, so the
suite is deterministic anyway).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from scipy import integrate

from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.moves import (
    MOVE_SPECS,
    MOVES,
    dual_averaging_init,
    dual_averaging_update,
    exact_hmc_move,
    paper_move,
    rmala_move,
    stable_move,
)
from tests.sampler.helpers import (
    chains_in_blocks,
    exact_w_draws,
    p3_conditional,
    pooled_mean_mcse,
    simplex_moments,
    u_lik_np,
)

Z = 4.0  # tolerance in MCSE units; see the module docstring


@pytest.fixture(scope="module")
def cp():
    return p3_conditional()


@pytest.fixture(scope="module")
def truth(cp):
    """Quadrature E[w], sd(w) and E[w²] of the P = 3 conditional."""
    mean, sd = simplex_moments(**cp)
    return mean, sd, sd**2 + mean**2


def _pg(cp):
    args = [jnp.asarray(cp[k]) for k in ("Phi", "b", "delta", "lam")]
    return lambda e: cond.e_potential_and_grad(e, *args, cp["eta"])


# --------------------------------------------------------------------------------------------
# The oracle itself
# --------------------------------------------------------------------------------------------


def test_quadrature_oracle_against_dblquad(cp, truth):
    """Gauss–Legendre simplex moments agree with adaptive ``dblquad`` to 1e-8."""
    mean, _, second = truth
    assert abs(mean.sum() - 1.0) < 1e-12

    def dens(w2, w1):
        w = np.array([[w1, w2, 1.0 - w1 - w2]])
        return np.exp(-u_lik_np(w, cp["Phi"], cp["b"], cp["delta"], cp["lam"])[0] + 7.0)

    def integral(g):
        return integrate.dblquad(
            lambda w2, w1: g(w1, w2) * dens(w2, w1), 0.0, 1.0, 0.0, lambda w1: 1.0 - w1,
            epsabs=1e-13, epsrel=1e-11,
        )[0]  # fmt: skip

    Z0 = integral(lambda w1, w2: 1.0)
    np.testing.assert_allclose(integral(lambda w1, w2: w1) / Z0, mean[0], rtol=1e-8)
    np.testing.assert_allclose(integral(lambda w1, w2: w2**2) / Z0, second[1], rtol=1e-8)
    # Coarser rule agrees too (the integrand is smooth).
    np.testing.assert_allclose(simplex_moments(**cp, n=60)[0], mean, rtol=1e-10)


def test_exact_draws_match_quadrature(cp, truth):
    """The rejection sampler used to start chains is exact: iid means within Z·sd/√n."""
    mean, sd, _ = truth
    n = 20_000
    W = exact_w_draws(np.random.default_rng(11), n, **cp)
    assert np.all(np.abs(W.mean(0) - mean) < Z * sd / np.sqrt(n))


# --------------------------------------------------------------------------------------------
# Deterministic checks of the update equations
# --------------------------------------------------------------------------------------------


def _paper_reference(key, e, r, eps, pg, L, stable, flip=False):
    """Eqs. (7)–(8) (or the OU variant of §4.3) written out in numpy with the move's noise;
    ``flip`` negates the new momentum of reflected coordinates (docs/math.md A7 option)."""
    e, r = np.array(e), np.array(r)
    for k in jax.random.split(key, L):
        xi = np.asarray(jax.random.normal(k, e.shape))
        grad = np.asarray(pg(jnp.asarray(e))[1])
        e_prop = e + eps * np.sqrt(e) * r
        e_new = np.abs(e_prop)
        drift = r - eps * np.sqrt(e) * grad + eps / (2.0 * np.sqrt(e))
        if stable:
            e_new = np.maximum(e_new, 1e-12 * e_new.sum())
            r = np.exp(-eps * e) * drift + np.sqrt(1.0 - np.exp(-2.0 * eps * e)) * xi
        else:
            r = drift - eps * e * r + np.sqrt(2.0 * eps * e) * xi
        if flip:
            r = np.where(e_prop < 0, -r, r)
        e = e_new
    return e, r


@pytest.mark.parametrize("flip", [False, True], ids=["noflip", "flip"])
@pytest.mark.parametrize("stable", [False, True], ids=["paper", "stable"])
def test_sgrhmc_moves_follow_equations(cp, stable, flip):
    """``paper_move``/``stable_move`` equal a line-by-line transcription of (7)–(8) / §4.3.

    ε = 0.3 makes some coordinates reflect (the e + ε√e r < 0 branch is exercised).
    """
    pg = _pg(cp)
    e0 = jnp.array([0.9, 0.05, 2.0])
    r0 = jnp.array([0.3, -2.5, 1.0])
    key = jax.random.key(5)
    move = stable_move if stable else paper_move
    res = move(key, e0, r0, 0.3, pg, n_leapfrog=7, flip_momentum=flip)
    e_ref, r_ref = _paper_reference(key, e0, r0, 0.3, pg, 7, stable, flip)
    np.testing.assert_allclose(res.e, e_ref, rtol=1e-12)
    np.testing.assert_allclose(res.r, r_ref, rtol=1e-12, atol=1e-12)
    assert float(res.accept_prob) == 1.0 and not bool(res.diverging)
    # the reflection branch was taken at the first step
    assert float(e0[1] + 0.3 * jnp.sqrt(e0[1]) * r0[1]) < 0


# position: (u(e), e(u), log|de/du|), written out here independently of moves.POSITIONS
HMC_POSITIONS = {
    "sqrt": (lambda e: 2.0 * jnp.sqrt(e), lambda u: u**2 / 4.0, lambda u: jnp.log(jnp.abs(u) / 2)),
    "log": (jnp.log, jnp.exp, lambda u: u),
}


@pytest.mark.parametrize("position", list(HMC_POSITIONS))
def test_exact_hmc_energy_error_is_second_order(cp, position):
    """Leapfrog in u = 2√e or u = log e: acceptance = min(1, e^{−ΔH}), ΔH = O(ε²) at fixed time.

    The trajectory is recomputed here with ``jax.grad`` of V(u) = U(e(u)) − Σ log|de/du|
    (docs/math.md E2), independently of the move's hand-written ∇V. Halving ε must divide |ΔH|
    by ≈ 4 (the ratio must lie in [3, 5]); a wrong ∇V, or a missing log-Jacobian, would not
    give that.
    """
    pg = _pg(cp)
    e0 = jnp.array([1.5, 0.6, 0.2])
    key = jax.random.key(3)
    to_u, to_e, log_jac = HMC_POSITIONS[position]

    def V(u):
        return pg(to_e(u))[0] - jnp.sum(log_jac(u))

    gV = jax.jit(jax.grad(V))

    def energy_error(eps, L):
        u0 = to_u(e0)
        p0 = jax.random.normal(key, (3,))  # the move draws its momentum from the same key
        u, p = u0, p0
        for _ in range(L):
            p = p - 0.5 * eps * gV(u)
            u = u + eps * p
            p = p - 0.5 * eps * gV(u)
        err = float(V(u) + 0.5 * jnp.sum(p**2) - V(u0) - 0.5 * jnp.sum(p0**2))
        res = exact_hmc_move(key, e0, jnp.zeros(3), eps, pg, n_leapfrog=L, position=position)
        np.testing.assert_allclose(float(res.accept_prob), min(1.0, np.exp(-err)), rtol=1e-9)
        assert np.allclose(res.e, to_e(u), rtol=1e-10) or np.allclose(res.e, e0)
        return abs(err)

    e1, e2, e3 = energy_error(0.08, 5), energy_error(0.04, 10), energy_error(0.02, 20)
    assert 3.0 < e1 / e2 < 5.0 and 3.0 < e2 / e3 < 5.0, (e1, e2, e3)
    # and a long trajectory with a small step is accepted: the move lands on e(u(T))
    res = exact_hmc_move(key, e0, jnp.zeros(3), 0.01, pg, n_leapfrog=40, position=position)
    assert float(res.accept_prob) > 0.99


def _g_numpy(cp, w):
    """g = ∂U_lik/∂w = −⟨R, Φ_m⟩, R = Δ ⊙ (1 + ζ/λ) (docs/math.md §3.4), in numpy."""
    f = np.einsum("m,mcn->cn", w, cp["Phi"]) + cp["b"][:, None]
    zeta = 1.0 - cp["delta"] * f
    R = cp["delta"] * (1.0 + zeta / cp["lam"])
    return -np.einsum("cn,mcn->m", R, cp["Phi"])


def test_rmala_acceptance_probability(cp):
    """One RMALA step: the proposal is |μ(e) + √(he) z| with the spec's E3 drift
    μ(e) = e + (h/2)(η − e − w ⊙ (g − wᵀg)) (g from numpy), and the acceptance probability is
    the folded-normal Metropolis–Hastings ratio."""
    from scipy.stats import norm

    pg = _pg(cp)
    e = np.array([1.2, 0.4, 0.1])
    h = 0.3
    key = jax.random.key(9)
    res = rmala_move(key, jnp.asarray(e), jnp.zeros(3), h, pg, n_leapfrog=1)
    kz, _ = jax.random.split(jax.random.split(key, 1)[0])
    z = np.asarray(jax.random.normal(kz, (3,)))

    def U(x):
        w = x / x.sum()
        return (
            np.sum(x - (cp["eta"] - 1) * np.log(x))
            + u_lik_np(w[None], cp["Phi"], cp["b"], cp["delta"], cp["lam"])[0]
        )

    def mu(x):
        w = x / x.sum()
        g = _g_numpy(cp, w)
        return x + 0.5 * h * (cp["eta"] - x - w * (g - w @ g))

    def logq(y, x):
        m, sd = mu(x), np.sqrt(h * x)
        return np.sum(np.log(norm.pdf(y, m, sd) + norm.pdf(-y, m, sd)))

    e_star = np.abs(mu(e) + np.sqrt(h * e) * z)
    log_alpha = U(e) - U(e_star) + logq(e, e_star) - logq(e_star, e)
    assert 0.05 < np.exp(log_alpha) < 0.95  # a non-trivial case
    np.testing.assert_allclose(float(res.accept_prob), min(1.0, np.exp(log_alpha)), rtol=1e-9)
    assert np.allclose(res.e, e_star, rtol=1e-12) or np.allclose(res.e, e)


# --------------------------------------------------------------------------------------------
# Exact moves against the quadrature oracle (V3, V5)
# --------------------------------------------------------------------------------------------

EXACT_SETTINGS = {
    # move: (step size, MH steps / leapfrog steps per iteration)
    "exact": (exact_hmc_move, 0.25, 8),
    "rmala": (rmala_move, 0.15, 2),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXACT_SETTINGS))
def test_exact_move_matches_quadrature(cp, truth, name):
    """Exact moves plus the scale refresh recover E[w] and E[w²] within Z·MCSE.

    500 chains start from the Dir(η)·Gamma(Pη, 1) prior (E[w] = 1/3 each, far from the target
    (0.737, 0.229, 0.034)), so a move that does not mix cannot pass; 100 iterations are
    discarded and 200 kept.
    """
    move, eps, L = EXACT_SETTINGS[name]
    mean, _, second = truth
    rng = np.random.default_rng(21)
    n_chains = 500
    e0 = rng.gamma(cp["eta"], size=(n_chains, 3))
    w, acc = chains_in_blocks(
        jax.random.key(22), e0, eps, cp, move=move, n_burn=1, n_keep=2, n_leapfrog=L
    )
    assert np.all(np.isfinite(w))
    assert 0.4 < acc.mean() < 0.99, acc.mean()
    m, _, mcse, ess = pooled_mean_mcse(w)
    print(f"{name}: E[w] {m} MCSE {mcse} ESS {ess} acc {acc.mean():.3f} (truth {mean})")
    assert np.all(ess > 5000), ess  # many effective draws: the chains do move
    assert np.all(np.abs(m - mean) < Z * mcse), (m, mean, mcse)
    m2, _, mcse2, _ = pooled_mean_mcse(w**2)
    assert np.all(np.abs(m2 - second) < Z * mcse2), (m2, second, mcse2)


# --------------------------------------------------------------------------------------------
# Bias of the SGRHMC moves shrinks with ε (V4)
# --------------------------------------------------------------------------------------------

BIAS_EPS = (0.05, 0.03, 0.01)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper", "stable"])
def test_sgrhmc_bias_decreases_with_step_size(cp, truth, name):
    """|E_ε[w₃] − E[w₃]| is strictly decreasing over ε = 0.05, 0.03, 0.01 (w₃ is the small
    weight, where docs/math.md §4.2 locates the bias), each gap larger than
    Z·√(MCSE₁² + MCSE₂²), and
    the bias at ε = 0.05 is itself larger than Z·MCSE (the test can detect a bias).

    500 chains start from exact draws of w (so the measured bias is the move's own); run length
    is about equal in continuous time (ε·L·iterations ≈ 100 for burn-in and for the kept part).
    The paper move is run as the sweep runs it, without the scale refresh; the stable move with
    it. The literal paper move has no floor on e: when a small weight reaches ~1e-9 the
    ε/(2√e) term throws e_m to the hundreds and the explicit friction diverges (ε·e_m > 2), as
    docs/math.md §4.2 warns; about one chain in 500 does so here at ε = 0.03. Such chains are
    excluded (at most 1 % allowed); at ε = 0.1 chains diverge within a few hundred iterations. The
    stable move must never produce a non-finite value.
    """
    move = {"paper": paper_move, "stable": stable_move}[name]
    mean = truth[0]
    rng = np.random.default_rng(31)
    n_chains = 500
    W0 = exact_w_draws(rng, n_chains, **cp)
    e0 = W0 * rng.gamma(3 * cp["eta"], size=(n_chains, 1))
    bias, mcse = [], []
    for j, eps in enumerate(BIAS_EPS):
        n_blocks = int(round(0.1 / eps))  # block = 100 iterations × L = 10 → time 1000ε
        w, _ = chains_in_blocks(
            jax.random.key(32 + j), e0, eps, cp, move=move, n_burn=n_blocks, n_keep=n_blocks,
            scale_refresh=(name == "stable"),
        )  # fmt: skip
        finite = np.all(np.isfinite(w), axis=(1, 2))
        if name == "stable":
            assert np.all(finite)
        else:  # the literal scheme diverges now and then (docs/math.md §4.2): rare, then excluded
            assert finite.mean() >= 0.99, finite.mean()
        m, _, se, _ = pooled_mean_mcse(w[finite][..., 2:])
        bias.append(abs(m[0] - mean[2]))
        mcse.append(se[0])
    bias, mcse = np.array(bias), np.array(mcse)
    print(f"{name}: |bias of w3| {bias} MCSE {mcse}")
    assert bias[0] > Z * mcse[0], (bias, mcse)
    for k in range(len(BIAS_EPS) - 1):
        margin = Z * np.hypot(mcse[k], mcse[k + 1])
        assert bias[k] - bias[k + 1] > margin, (bias, mcse)


def test_sample_scale_is_gamma_and_keeps_w():
    """``sample_scale``: w unchanged, S' ~ Gamma(Ση, 1) (KS, p > 1e-3), vector η too."""
    from scipy import stats

    e = jnp.array([0.2, 3.0, 1.1, 0.01])
    eta = jnp.array([0.5, 1.0, 2.0, 0.7])
    keys = jax.random.split(jax.random.key(4), 20_000)
    out = np.asarray(jax.vmap(lambda k: cond.sample_scale(k, e, eta))(keys))
    np.testing.assert_allclose(out / out.sum(1, keepdims=True), np.broadcast_to(e / e.sum(),
                               out.shape), rtol=1e-12)  # fmt: skip
    assert stats.kstest(out.sum(1), stats.gamma(4.2).cdf).pvalue > 1e-3
    # ESS helper sanity: iid draws have ESS ≈ n
    ess = float(effective_sample_size(out[None, :, :1].reshape(4, 5000, 1))[0])
    assert 15_000 < ess < 25_000


def test_move_registry():
    """Every move has a spec; only the exact ones adapt (an MH acceptance to aim at), the SGRHMC
    moves are flagged inexact, and a move with no step has the pairwise Gibbs updates."""
    assert tuple(MOVE_SPECS) == MOVES
    for name, spec in MOVE_SPECS.items():
        assert spec.name == name
        assert (spec.target_accept is not None) == (spec.exact and spec.step is not None)
        assert spec.step is not None or spec.pairwise
        assert spec.exact == (name not in ("paper", "stable"))


def test_dual_averaging_reaches_target_acceptance():
    """Dual averaging on a known acceptance curve a(ε) = 1/(1 + (ε/0.3)²): the averaged step
    converges to the ε* with a(ε*) = target (0.8 → ε* = 0.15) from either side."""

    def run(eps0):
        def body(state, _):
            acc = 1.0 / (1.0 + (jnp.exp(state.log_step) / 0.3) ** 2)
            return dual_averaging_update(state, acc, 0.8), None

        state, _ = jax.lax.scan(body, dual_averaging_init(eps0), None, length=3000)
        return float(jnp.exp(state.log_step_avg))

    for eps0 in (0.01, 2.0):
        assert run(eps0) == pytest.approx(0.15, rel=0.03)


def test_dual_averaging_is_hoffman_gelman_in_float64():
    """The step-size adaptation is NumPyro's dual averaging; checked against Hoffman & Gelman's
    Algorithm 5 (t0 = 10, γ = 0.05, κ = 0.75, μ = log 10ε₀) written out in NumPy float64 over
    300 updates. A 32-bit update counter would make JAX divide in float32 (1/(t + t0)) and
    miss this tolerance by orders of magnitude."""
    rng = np.random.default_rng(3)
    eps0, target = 0.01, 0.8
    state = dual_averaging_init(eps0)
    mu, h_bar, log_avg = np.log(10 * eps0), 0.0, np.log(eps0)
    assert float(state.log_step) == pytest.approx(np.log(eps0), rel=1e-15)
    for t, acc in enumerate(rng.random(300), start=1):
        state = dual_averaging_update(state, acc, target)
        h_bar = (1 - 1 / (t + 10)) * h_bar + (target - acc) / (t + 10)
        log_step = mu - np.sqrt(t) / 0.05 * h_bar
        log_avg = t**-0.75 * log_step + (1 - t**-0.75) * log_avg
        np.testing.assert_allclose(
            [float(state.log_step), float(state.log_step_avg), float(state.h_bar)],
            [log_step, log_avg, h_bar],
            rtol=1e-12,
            atol=1e-15,
        )
    assert int(state.count) == 300


def test_hmc_applies_each_mass_product_once_per_gradient():
    """The leapfrog loop multiplies by the mass factor twice per step (L p for the drift, Lᵀ∇V
    shared by a step's closing half-kick and the next one's opening kick), not three times:
    counted as dot products with a (P, P) operand in the scan body's jaxpr."""
    P, L = 5, 7
    mass = jnp.asarray(np.tril(np.random.default_rng(0).normal(size=(P, P))) + 3 * np.eye(P))

    def pg(e):
        return jnp.sum(e**2), 2.0 * e

    def move(e):
        return exact_hmc_move(jax.random.key(0), e, e, 0.1, pg, n_leapfrog=L, mass_sqrt=mass)

    jaxpr = jax.make_jaxpr(move)(jnp.ones(P)).jaxpr
    scans = [q for q in jaxpr.eqns if q.primitive.name == "scan"]
    assert len(scans) == 1 and scans[0].params["length"] == L

    def mass_dots(jp):
        return sum(
            q.primitive.name == "dot_general"
            and any(getattr(v.aval, "shape", ()) == (P, P) for v in q.invars)
            for q in jp.eqns
        )

    assert mass_dots(scans[0].params["jaxpr"].jaxpr) == 2
    assert mass_dots(jaxpr) == 1  # Lᵀ∇V at the start
