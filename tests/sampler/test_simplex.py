"""Exact kernel-weight draws on the simplex, :mod:`bayesmkl.sampler.simplex`
(docs/math.md §2.1, §3.4).

Oracles, all independent of the module's own algebra:

* truncated normal: :class:`scipy.stats.truncnorm` (log-space in scipy ≥ 1.9) and
  :func:`scipy.special.ndtri_exp`/``log_ndtr``;
* one-dimensional edge densities p(x) ∝ exp(−q(x − μ)²/2) x^{η_j−1} (c − x)^{η_k−1} on [0, c]:
  CDF by Gauss–Jacobi quadrature (the edge singularities are in the weight, so the rule is exact
  to rounding for η < 1 too; cross-checked against adaptive ``quad`` below);
* P = 3: moments of p(w) ∝ Π_m w_m^{η_m−1} exp(−U_lik(w)) by a Gauss–Jacobi product rule on the
  simplex, with U_lik = Σ(λ + ζ)²/(2λ) from :func:`helpers.u_lik_np` (not from
  :func:`quadratic_form`), and the moments of e = w·S with S ~ Gamma(Ση, 1) independent of w.

Tolerances: Kolmogorov–Smirnov tests assert p > ``KS_ALPHA`` = 1e-3 (they detect a CDF error
of 1.95/√n: 0.014 with the truncated normal's 20 000 draws, 0.03 with 4 000); chain moments
assert |estimate − truth| < Z·MCSE with Z = 4 and MCSE = sd/√ESS (NumPyro's multi-chain ESS), a
false-alarm rate of 6e-5 per comparison. About 30 KS tests and 50 moment comparisons give a
spurious-failure probability of ≈ 3.5 % for fresh seeds; the seeds are fixed, so the suite is
deterministic. Each oracle was checked to catch deliberate mutations of the module (sign of the
edge mean, of the gradient update, the reflection, the rejection ratio, the slice level, the
quadratic form's bias, the scale's shape, η_j/η_k swapped (the asymmetric-η chain case), the
Newton iterations, pairs with j = k).
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from bayesmkl.sampler.simplex import (
    _inv_log_ndtr,
    _slice_segment,
    pairwise_gibbs,
    pairwise_gibbs_residual,
    quadratic_form,
    sample_w_exact,
    truncated_normal,
)
from tests.sampler.helpers import (
    make_problem,
    p3_conditional,
    pooled_mean_mcse,
    simplex_moments,
    u_lik_np,
)

KS_ALPHA = 1e-3
Z = 4.0


# --------------------------------------------------------------------------------------------
# Truncated normal
# --------------------------------------------------------------------------------------------

# (mean, sd, lo, hi). The rule in truncated_normal: "narrow" (rejection from the uniform) when
# width·max(|α|, |β|) < 1 in standard units; otherwise the log-space inverse CDF.
TN_CASES = {
    "around-mean": (0.0, 1.0, -1.0, 1.0),
    "asymmetric-around-mean": (0.3, 2.0, -1.0, 5.0),
    "wide": (0.0, 1.0, -1e3, 1e3),
    "half-line": (0.0, 1.0, -0.5, 1e3),
    "upper-tail": (0.0, 1.0, 5.0, 6.0),
    "upper-tail-21sd": (0.0, 1.0, 20.5, 21.5),
    "upper-tail-far": (0.0, 1.0, 30.0, 31.0),
    "upper-tail-long": (0.0, 1.0, 8.0, 1e3),
    "upper-tail-1000sd": (0.0, 1.0, 1000.0, 1000.05),
    "lower-tail-far": (0.0, 1.0, -40.0, -39.9),
    "lower-tail-scaled": (2.0, 0.5, -10.0, -3.0),
    "mean-far-above": (3.0, 1e-3, 0.0, 1.0),
    "mean-far-below": (-0.5, 1e-4, 0.0, 0.7),
    "narrow-rule-reject": (0.0, 1.0, -5.0, -4.85),  # width·|α| = 0.75: rejection route
    "narrow-rule-cdf": (0.0, 1.0, 4.79, 5.0),  # width·|β| = 1.05: inverse-CDF route
    "narrow-around-mean": (0.0, 1.0, -1e-3, 2e-3),
    "narrow-1e-8sd-tail": (0.0, 1.0, 12.0, 12.0 + 1e-8),
    "narrow-1e-8sd-scaled": (1.5, 2.0, 0.3, 0.3 + 2e-8),
    "narrow-huge-sd": (0.2, 1e3, 0.0, 1.0),
}

_tn_batch = jax.jit(jax.vmap(truncated_normal, in_axes=(0, None, None, None, None)))


@pytest.mark.parametrize("case", list(TN_CASES), ids=list(TN_CASES))
def test_truncated_normal_ks(case):
    """20 000 draws: finite, inside [lo, hi], and KS-consistent with scipy's truncnorm."""
    mean, sd, lo, hi = TN_CASES[case]
    seed = list(TN_CASES).index(case)
    x = np.asarray(_tn_batch(jax.random.split(jax.random.key(seed), 20_000), mean, sd, lo, hi))
    assert np.all(np.isfinite(x))
    assert np.all((x >= lo) & (x <= hi)), (x.min(), x.max())
    a, b = (lo - mean) / sd, (hi - mean) / sd
    p = stats.kstest((x - mean) / sd, stats.truncnorm(a, b).cdf).pvalue
    assert p > KS_ALPHA, p


def test_truncated_normal_is_not_uniform_on_narrow_rejection_route():
    """The rejection route really tilts the uniform by the normal density: on [−5, −4.85] the
    density ratio between the ends is e^{0.74}, so the mean must sit above the midpoint by
    ≈ 0.0019 (exact value from scipy, ±4 standard errors)."""
    mean, sd, lo, hi = TN_CASES["narrow-rule-reject"]
    n = 20_000
    x = np.asarray(_tn_batch(jax.random.split(jax.random.key(99), n), mean, sd, lo, hi))
    ref = stats.truncnorm(lo, hi)
    assert abs(x.mean() - ref.mean()) < Z * ref.std() / np.sqrt(n)
    assert ref.mean() - 0.5 * (lo + hi) > 10 * ref.std() / np.sqrt(n)  # the test can tell


def test_inverse_log_cdf_is_exact_to_rounding():
    """``_inv_log_ndtr`` inverts log Φ: in the Newton region (logp ≤ −1, down to x ≈ −1400) x
    agrees with scipy's ``ndtri_exp`` to 1e-10 relative and scipy's log Φ(x) = logp to 3e-11
    relative; Φ(x) = exp(logp) to 2 ulp of 1 everywhere (the probability-space error that
    matters for draws near the upper end).

    The 3e-11 (not 1e-12) is JAX's ``log_ndtr``, whose asymptotic series for x < −20 has a
    relative error in Φ of up to 4e-9 (log Φ off by 4e-9 at x = −20); Newton converges to the
    root of that approximation. It cancels to ~2e-11 in the truncated CDF (next test)."""
    logp = -np.concatenate([np.geomspace(1e-14, 1e6, 400), [1.0, 699.999, 700.0, 700.001]])
    x = np.asarray(jax.jit(_inv_log_ndtr)(jnp.asarray(logp)))
    assert np.all(np.isfinite(x))
    tail = logp <= -1.0
    np.testing.assert_allclose(x[tail], special.ndtri_exp(logp[tail]), rtol=1e-10)
    np.testing.assert_allclose(special.log_ndtr(x[tail]), logp[tail], rtol=3e-11)
    np.testing.assert_allclose(special.ndtr(x), np.exp(logp), rtol=0, atol=2.3e-16)


def test_truncated_normal_inverts_the_truncated_cdf(monkeypatch):
    """With the uniform fixed at u, a draw on the inverse-CDF route (every non-narrow case) is
    the u-quantile of the truncated normal: F(x) = u, or 1 − F(x) = u when the interval lies
    mostly above the mean (the documented reflection).

    Tolerance 1e-10 plus what rounding x = mean + sd·z to float64 costs in probability,
    4·f(x)·ε·(|mean| + |x| + sd·max(|α|, |β|)) with f the truncated density of x: that term
    matters only where the interval is thousands of sd from the mean (there the distribution is
    narrower than the spacing of floats near x allows to resolve to 1e-10).

    The test substitutes the uniform the module draws (``jax.random.uniform``, traced under
    vmap): the first call (the inverse-CDF uniform) returns u, later ones (the rejection loop's,
    never run on this route) return 0, so that a change of route fails instead of hanging."""
    cases = [c for c in TN_CASES if not c.startswith("narrow")]
    us = np.array([1e-6, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0 - 1e-9])
    grid = np.array([(*TN_CASES[c], u) for c in cases for u in us])

    def quantile(mean, sd, lo, hi, u):
        calls = []

        def fake_uniform(*args, **kw):
            calls.append(None)
            return u if len(calls) == 1 else jnp.zeros_like(u)

        monkeypatch.setattr(jax.random, "uniform", fake_uniform)
        return truncated_normal(jax.random.key(0), mean, sd, lo, hi)

    x = np.asarray(jax.vmap(quantile)(*jnp.asarray(grid.T)))
    monkeypatch.undo()
    for (mean, sd, lo, hi, u), xi in zip(grid, x, strict=True):
        a, b = (lo - mean) / sd, (hi - mean) / sd
        ref = stats.truncnorm(a, b)
        z = (xi - mean) / sd
        got = ref.sf(z) if a + b > 0 else ref.cdf(z)
        rounding = np.finfo(float).eps * (abs(mean) + abs(xi) + sd * max(abs(a), abs(b)))
        tol = 1e-10 + 4.0 * ref.pdf(z) / sd * rounding
        assert abs(got - u) < tol, ((mean, sd, lo, hi), u, xi, got - u, tol)


# --------------------------------------------------------------------------------------------
# One-dimensional edge densities: oracle and slice sampler
# --------------------------------------------------------------------------------------------


def gauss_jacobi01(n, p, r):
    """Nodes and weights on [0, 1] for ∫₀¹ s^p (1 − s)^r h(s) ds ≈ Σ w_k h(s_k)."""
    t, wt = special.roots_jacobi(n, r, p)  # weight (1 − t)^r (1 + t)^p on [−1, 1]
    return 0.5 * (1.0 + t), wt * 2.0 ** (-p - r - 1.0)


def edge_cdf(x, c, q, mu, eta_j, eta_k, n=120):
    """CDF of p(x) ∝ exp(−q(x − μ)²/2) x^{η_j−1} (c − x)^{η_k−1} on [0, c] (vectorised in x).

    For x ≤ c/2: ∫₀ˣ = x^{η_j} ∫₀¹ s^{η_j−1} (c − xs)^{η_k−1} g(xs) ds (Gauss–Jacobi in s, smooth
    remainder since c − xs ≥ c/2); for x > c/2 the mirror image from the right end.
    """
    x = np.atleast_1d(np.asarray(x, float))
    mode = np.clip(mu, 0.0, c)

    def g(t):
        return np.exp(-0.5 * q * ((t - mu) ** 2 - (mode - mu) ** 2))

    sl, wl = gauss_jacobi01(n, eta_j - 1.0, 0.0)
    sr, wr = gauss_jacobi01(n, eta_k - 1.0, 0.0)

    def left(x):  # ∫₀ˣ, x ≤ c/2
        t = x[:, None] * sl
        return x**eta_j * np.sum(wl * (c - t) ** (eta_k - 1.0) * g(t), axis=1)

    def right(x):  # ∫ₓᶜ, x ≥ c/2
        d = c - x
        t = c - d[:, None] * sr
        return d**eta_k * np.sum(wr * t ** (eta_j - 1.0) * g(t), axis=1)

    half = np.array([0.5 * c])
    total = left(half)[0] + right(half)[0]
    lo = x <= 0.5 * c
    out = np.empty_like(x)
    out[lo] = left(x[lo]) / total
    out[~lo] = 1.0 - right(x[~lo]) / total
    return out


# (c, q, μ, η_j, η_k)
EDGE_CASES = {
    "beta-like-eta0.6": (0.7, 30.0, 0.2, 0.6, 0.6),
    "peaked-near-end-eta2.5/1.5": (1.0, 200.0, 0.95, 2.5, 1.5),
    "pure-beta-0.6/2.5": (0.3, 0.0, 0.0, 0.6, 2.5),
    "mode-outside-eta1": (1.0, 50.0, -0.1, 1.0, 1.0),
    "tiny-segment-eta0.6/1.3": (1e-6, 1e12, 0.3e-6, 0.6, 1.3),
}


@pytest.mark.parametrize("case", list(EDGE_CASES), ids=list(EDGE_CASES))
def test_edge_cdf_oracle_against_quad(case):
    """The Gauss–Jacobi CDF agrees with adaptive ``quad`` (algebraic end weights) to 1e-9."""
    c, q, mu, ej, ek = EDGE_CASES[case]
    mode = np.clip(mu, 0.0, c)

    def g(t):
        return np.exp(-0.5 * q * ((t - mu) ** 2 - (mode - mu) ** 2))

    def g_right(t):
        return g(t) * (c - t) ** (ek - 1.0)

    kw = dict(epsabs=0.0, epsrel=1e-12, limit=200)
    total = integrate.quad(g, 0.0, c, weight="alg", wvar=(ej - 1.0, ek - 1.0), **kw)[0]
    for frac in (0.05, 0.3, 0.5, 0.8, 0.97):
        x = frac * c
        part = integrate.quad(g_right, 0.0, x, weight="alg", wvar=(ej - 1.0, 0.0), **kw)[0]
        np.testing.assert_allclose(edge_cdf(x, c, q, mu, ej, ek), part / total, rtol=1e-9)


@jax.jit
def _slice_chains(key, c, q, mu, ej, ek):
    """4 000 chains of 25 :func:`_slice_segment` updates from x0 = 0.37c; final states."""

    def logpdf(x):
        return -0.5 * q * (x - mu) ** 2 + (ej - 1.0) * jnp.log(x) + (ek - 1.0) * jnp.log(c - x)

    def chain(k):
        def step(x, kk):
            return _slice_segment(kk, x, c, logpdf), None

        return jax.lax.scan(step, 0.37 * c, jax.random.split(k, 25))[0]

    return jax.vmap(chain)(jax.random.split(key, 4000))


@pytest.mark.parametrize("case", list(EDGE_CASES), ids=list(EDGE_CASES))
def test_slice_segment_converges_to_edge_density(case):
    """4 000 chains of 25 slice updates from x0 = 0.37c: the final states are KS-consistent with
    the edge density. This checks invariance and that the kernel actually moves (a kernel that
    kept x0 would fail)."""
    c, q, mu, ej, ek = EDGE_CASES[case]
    x = np.asarray(_slice_chains(jax.random.key(7), *map(jnp.float64, EDGE_CASES[case])))
    assert np.all((x > 0) & (x < c))
    p = stats.kstest(x, lambda t: edge_cdf(t, c, q, mu, ej, ek)).pvalue
    assert p > KS_ALPHA, p


# --------------------------------------------------------------------------------------------
# quadratic_form
# --------------------------------------------------------------------------------------------


def test_quadratic_form_matches_the_pseudo_likelihood():
    """½ wᵀMw − vᵀw differs from Σ(T − f)²/(2V) (f = Σ w_m Φ_m + b) by a w-free constant, also
    off the simplex; M is symmetric positive semi-definite."""
    pb = make_problem(seed=4, N=9, C=3, P=4)
    K, a, b, lam, delta = pb["K"], pb["a"], pb["b"], pb["lam"], pb["delta"]
    Phi = np.einsum("mij,cj->mci", K, a)
    T, V = delta * (1.0 + lam), lam
    M, v = (np.asarray(t) for t in quadratic_form(*map(jnp.asarray, (Phi, b, T, V))))
    np.testing.assert_allclose(M, M.T, rtol=0, atol=0)
    assert np.linalg.eigvalsh(M).min() > -1e-10 * np.abs(M).max()
    W = np.random.default_rng(0).normal(size=(6, 4))
    f = np.einsum("wm,mcn->wcn", W, Phi) + b[:, None]
    direct = np.sum((T - f) ** 2 / (2.0 * V), axis=(1, 2))
    quad = 0.5 * np.einsum("wm,mk,wk->w", W, M, W) - W @ v
    diff = direct - quad
    assert np.ptp(diff) < 1e-10 * np.abs(direct).max(), diff - diff[0]
    # and it is the spec's U_lik = Σ(λ + ζ)²/(2λ) for these T, V
    np.testing.assert_allclose(direct, u_lik_np(W, Phi, b, delta, lam), rtol=1e-12)


# --------------------------------------------------------------------------------------------
# pairwise_gibbs with P = 2: one pair update is the exact edge conditional
# --------------------------------------------------------------------------------------------


def _p2_form():
    rng = np.random.default_rng(12)
    F = rng.normal(size=(2, 6))
    M = F @ F.T
    v = np.array([1.3, -0.4]) + M @ np.array([0.35, 0.65])
    q = M[0, 0] + M[1, 1] - 2 * M[0, 1]
    xs = (M[1, 1] - M[0, 1] + v[0] - v[1]) / q  # maximiser of −½wᵀMw + vᵀw on the edge
    assert 0.0 < xs < 1.0 and 1.0 / np.sqrt(q) > 0.05  # a non-trivial truncation
    return M, v, q, xs, F


def _p2_data(F, v):
    """(Φ, b, T, V) whose quadratic form is (M, v) = (F Fᵀ, v): Φ = F (C = 1), b = 0, V = 1 and
    T = Fᵀ (F Fᵀ)⁻¹ v, so that F T = v."""
    T = F.T @ np.linalg.solve(F @ F.T, v)
    return F[:, None, :], np.zeros(1), T[None, :], np.ones((1, F.shape[1]))


N_P2 = 8000


def _run_p2(key, w0, M, v, n_steps, data=None):
    """``N_P2`` independent runs of ``n_steps`` single-pair updates (η = 1 route) of w ∈ Δ¹;
    with ``data = (Φ, b, T, V)`` by the residual route instead of (M, v)."""
    w0 = jnp.asarray(w0, jnp.float64)
    keys = jax.random.split(key, N_P2)
    if data is not None:
        return np.asarray(_p2_runs_residual(keys, w0, *map(jnp.asarray, data), n_steps))
    return np.asarray(_p2_runs(keys, w0, *map(jnp.asarray, (M, v)), n_steps))


@jax.jit
def _p2_runs(keys, w0, M, v, n_steps):
    def one(k):
        def body(i, w):
            return pairwise_gibbs(jax.random.fold_in(k, i), w, M, v, jnp.ones(2), 1)

        return jax.lax.fori_loop(0, n_steps, body, w0)

    return jax.vmap(one)(keys)


@jax.jit
def _p2_runs_residual(keys, w0, Phi, b, T, V, n_steps):
    def one(k):
        def body(i, w):
            key = jax.random.fold_in(k, i)
            return pairwise_gibbs_residual(key, w, Phi, b, T, V, jnp.ones(2), 1)

        return jax.lax.fori_loop(0, n_steps, body, w0)

    return jax.vmap(one)(keys)


@pytest.mark.parametrize("path", ["gram", "residual"])
def test_pairwise_gibbs_p2_eta1_is_an_exact_draw(path):
    """P = 2, η = 1: one pair update draws w₀ exactly from N(x*, 1/q) truncated to [0, 1],
    x* = (M₁₁ − M₀₁ + v₀ − v₁)/q, q = M₀₀ + M₁₁ − 2M₀₁, whatever the starting point (two
    starts, 8 000 draws each); by the M route and by the residual route (data with this M, v)."""
    M, v, q, xs, F = _p2_form()
    data = _p2_data(F, v) if path == "residual" else None
    if data is not None:  # the data do have this quadratic form
        M_d, v_d = quadratic_form(*map(jnp.asarray, data))
        np.testing.assert_allclose(M_d, M, rtol=1e-12)
        np.testing.assert_allclose(v_d, v, rtol=1e-12)
    ref = stats.truncnorm(-xs * np.sqrt(q), (1 - xs) * np.sqrt(q), loc=xs, scale=1 / np.sqrt(q))
    for seed, w0 in ((1, [0.5, 0.5]), (2, [0.97, 0.03])):
        W = _run_p2(jax.random.key(seed), w0, M, v, 1, data)
        np.testing.assert_allclose(W.sum(1), 1.0, rtol=0, atol=1e-15)
        assert np.all(W > 0)
        assert stats.kstest(W[:, 0], ref.cdf).pvalue > KS_ALPHA


@pytest.mark.parametrize("tilt", [0.0, 2.0], ids=["flat", "tilted"])
def test_pairwise_gibbs_identical_kernels(tilt):
    """Identical kernels along the edge (q = 0, η = 1): the conditional of w₀ is ∝ e^{tilt·x}
    on [0, 1] (uniform for tilt = 0), drawn by the slice fallback; 20 updates from (0.9, 0.1)."""
    M = np.full((2, 2), 3.0)
    v = np.array([1.0 + tilt, 1.0])
    x = _run_p2(jax.random.key(4), [0.9, 0.1], M, v, 20)[:, 0]
    assert np.all(np.isfinite(x)) and np.all((x > 0) & (x < 1))
    cdf = (lambda t: t) if tilt == 0 else (lambda t: np.expm1(tilt * t) / np.expm1(tilt))
    assert stats.kstest(x, cdf).pvalue > KS_ALPHA


def test_pairwise_gibbs_residual_identical_kernels():
    """The residual route with Φ₀ = Φ₁ (q = 0 exactly, and then g₀ = g₁): w₀ is uniform on
    [0, 1] after 20 updates from (0.9, 0.1) (the slice fallback)."""
    Phi = np.repeat(np.array([[[0.3, -1.2, 0.8]]]), 2, axis=0)
    data = (Phi, np.array([0.2]), np.array([[1.5, -0.3, 2.0]]), np.array([[0.5, 1.0, 2.0]]))
    x = _run_p2(jax.random.key(4), [0.9, 0.1], None, None, 20, data)[:, 0]
    assert np.all(np.isfinite(x)) and np.all((x > 0) & (x < 1))
    assert stats.kstest(x, lambda t: t).pvalue > KS_ALPHA


def test_single_kernel_is_left_alone():
    """P = 1: pairwise_gibbs returns w = (1,) unchanged, and sample_w_exact a positive e."""
    one = jnp.ones(1)
    w = pairwise_gibbs(jax.random.key(0), one, jnp.ones((1, 1)), one, one, 5)
    np.testing.assert_array_equal(w, [1.0])
    Phi, b, T, V = jnp.ones((1, 1, 3)), jnp.zeros(1), jnp.ones((1, 3)), jnp.ones((1, 3))
    e = np.asarray(sample_w_exact(jax.random.key(1), one, Phi, b, T, V, jnp.array([1.7]), 3))
    assert e.shape == (1,) and np.isfinite(e[0]) and e[0] > 0


# --------------------------------------------------------------------------------------------
# sample_w_exact on the P = 3 conditional against quadrature on the simplex
# --------------------------------------------------------------------------------------------


def simplex_moments_jacobi(Phi, b, delta, lam, eta, n=80):
    """E[w], E[w²] under p(w) ∝ Π w_m^{η_m−1} exp(−U_lik(w)) on the 2-simplex, any η > 0.

    Duffy map w = (x, (1 − x)y, (1 − x)(1 − y)), dw = (1 − x) dx dy, so the Dirichlet factor
    becomes x^{η₀−1}(1 − x)^{η₁+η₂−1} · y^{η₁−1}(1 − y)^{η₂−1}: a Gauss–Jacobi product rule
    carries it exactly and integrates the smooth exp(−U_lik) spectrally.
    """
    eta = np.broadcast_to(np.asarray(eta, float), (3,))
    x, wx = gauss_jacobi01(n, eta[0] - 1.0, eta[1] + eta[2] - 1.0)
    y, wy = gauss_jacobi01(n, eta[1] - 1.0, eta[2] - 1.0)
    X, Y = np.meshgrid(x, y, indexing="ij")
    W = np.stack([X, (1 - X) * Y, (1 - X) * (1 - Y)], axis=-1)
    U = u_lik_np(W, Phi, b, delta, lam)
    dens = np.outer(wx, wy) * np.exp(-(U - U.min()))
    Z0 = dens.sum()
    return np.einsum("ij,ijm->m", dens, W) / Z0, np.einsum("ij,ijm->m", dens, W**2) / Z0


def test_jacobi_simplex_oracle():
    """The Gauss–Jacobi simplex rule agrees with the Gauss–Legendre helper for η = 1 (1e-10) and
    is converged for η = 0.6 and asymmetric η (n = 50 vs 80, 1e-11)."""
    cp = p3_conditional()
    m, s2 = simplex_moments_jacobi(**cp)
    m_gl, sd_gl = simplex_moments(**cp)
    np.testing.assert_allclose(m, m_gl, rtol=1e-10)
    np.testing.assert_allclose(s2, sd_gl**2 + m_gl**2, rtol=1e-10)
    for eta in (0.6, (0.6, 1.0, 2.5)):
        cp["eta"] = eta
        for a, b in zip(
            simplex_moments_jacobi(**cp), simplex_moments_jacobi(**cp, n=50), strict=True
        ):
            np.testing.assert_allclose(a, b, rtol=1e-11)


N_CHAINS, N_ITER, N_BURN = 64, 2100, 100


@partial(jax.jit, static_argnames=("path",))
def _w_chains(key, Phi, b, T, V, eta, path):
    return _chains(key, Phi, b, T, V, eta, True, path)


@partial(jax.jit, static_argnames=("path",))
def _w_chains_slice(key, Phi, b, T, V, eta, path):
    return _chains(key, Phi, b, T, V, eta, False, path)


def _chains(key, Phi, b, T, V, eta, eta_is_one, path):
    """N_CHAINS chains of N_ITER sample_w_exact calls (3 pair updates each) from e = (1, 1, 1),
    the pair updates by the route ``path``."""

    def chain(k):
        def it(e, kk):
            e = sample_w_exact(kk, e, Phi, b, T, V, eta, 3, eta_is_one=eta_is_one, path=path)
            return e, e

        return jax.lax.scan(it, jnp.ones(3), jax.random.split(k, N_ITER))[1]

    return jax.vmap(chain)(jax.random.split(key, N_CHAINS))


@pytest.mark.parametrize("path", ["gram", "residual"])
@pytest.mark.parametrize(
    "eta", [1.0, 2.5, 0.6, (0.6, 1.0, 2.5)], ids=["eta1", "eta2.5", "eta0.6", "eta-asym"]
)
def test_sample_w_exact_matches_simplex_quadrature(eta, path):
    """Chains of exact updates (pair updates by the M route or the residual route, issue 47)
    on the P = 3 conditional of :func:`helpers.p3_conditional`
    (E[w] ≈ (0.74, 0.23, 0.03)): E[w_m], E[w_m²], E[e_m], E[e_m²] within 4 MCSE of quadrature
    (E[e] = E[w]·Ση, E[e²] = E[w²]·Ση(Ση + 1)); w ≥ 0 and Σw = 1 for every draw; the scale
    Σe is Gamma(Ση, 1) (KS) and uncorrelated with w₀."""
    cp = p3_conditional()
    cp["eta"] = eta
    eta_v = np.broadcast_to(np.asarray(eta, float), (3,))
    H = eta_v.sum()
    Ew, Ew2 = simplex_moments_jacobi(**cp)
    T, V = cp["delta"] * (1.0 + cp["lam"]), cp["lam"]
    run = _w_chains if np.all(eta_v == 1.0) else _w_chains_slice
    args = map(jnp.asarray, (cp["Phi"], cp["b"], T, V, eta_v))
    E = np.asarray(run(jax.random.key(21), *args, path))
    E = E[:, N_BURN:]
    S = E.sum(-1)
    W = E / S[..., None]
    assert np.all(E > 0)
    np.testing.assert_allclose(W.sum(-1), 1.0, rtol=0, atol=1e-14)

    checks = {
        "E[w]": (W, Ew),
        "E[w²]": (W**2, Ew2),
        "E[e]": (E, Ew * H),
        "E[e²]": (E**2, Ew2 * H * (H + 1.0)),
    }
    for name, (draws, truth) in checks.items():
        est, _, mcse, ess = pooled_mean_mcse(draws)
        assert np.all(ess > 0.1 * N_CHAINS * (N_ITER - N_BURN)), (name, ess)
        assert np.all(np.abs(est - truth) < Z * mcse), (name, est, truth, (est - truth) / mcse)

    s = S.ravel()[::10]  # iid by construction; thinned to keep the KS test quick
    assert stats.kstest(s, stats.gamma(H).cdf).pvalue > KS_ALPHA
    r = np.corrcoef(S.ravel(), W[..., 0].ravel())[0, 1]
    assert abs(r) < Z / np.sqrt(S.size)
