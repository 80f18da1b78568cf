"""(a, b) | rest on rank-deficient kernels: the jittered Cholesky retry of ``sample_ab``.

Duplicated training rows make ``K_w`` rank-deficient; with ν_i ≫ λ_i (both reached by real chains,
see ``../shared/repro/nan_divergence.py``) the Jacobi-scaled ``M = K_w D K_w + τ11ᵀ + Λ`` has an
exact smallest eigenvalue below the rounding error of forming it, and a plain Cholesky returns
NaN. ``sample_ab`` then retries with a jitter δ and matching noise, which makes the draw exact for
λ' = λ + δ·diag(M). The reference moments here are computed in exact rational arithmetic
(``fractions.Fraction``), so they do not share the ill-conditioning of the float computation.
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.sampler import conditionals as cond
from tests.sampler.helpers import gaussian_kernels

Z = 4.5  # per comparison two-sided normal tail 7e-6; ~100 comparisons → family rate ≈ 1e-3
N_DRAWS = 4000


def _exact_moments(Kw, delta, lam, nu, tau):
    """Mean and covariance of β = [a; b] | rest, exactly (precision form, Gauss–Jordan)."""
    N = Kw.shape[0]
    Xt = [[Fraction(float(Kw[i, j])) for j in range(N)] + [Fraction(1)] for i in range(N)]
    d = [Fraction(float(v)) for v in nu] + [Fraction(float(tau))]
    lf = [Fraction(float(v)) for v in lam]
    n = N + 1
    Q = [
        [sum(Xt[i][r] * Xt[i][c] / lf[i] for i in range(N)) + (1 / d[r] if r == c else 0)
         for c in range(n)]
        for r in range(n)
    ]  # fmt: skip
    rhs = [sum(Xt[i][r] * int(delta[i]) * (1 + lf[i]) / lf[i] for i in range(N)) for r in range(n)]
    A = [row[:] + [Fraction(int(r == c)) for c in range(n)] for r, row in enumerate(Q)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(A[r][col]))
        A[col], A[piv] = A[piv], A[col]
        A[col] = [v / A[col][col] for v in A[col]]
        for r in range(n):
            if r != col and A[r][col] != 0:
                f = A[r][col]
                A[r] = [x - f * y for x, y in zip(A[r], A[col], strict=True)]
    cov = [[A[r][n + c] for c in range(n)] for r in range(n)]
    mean = [sum(cov[r][c] * rhs[c] for c in range(n)) for r in range(n)]
    return np.array([float(m) for m in mean]), np.array([[float(v) for v in r] for r in cov])


def _duplicated_row_problem():
    """N = 8 points with 3 distinct rows, ν up to 1e11 and λ down to 1e-7 (plain Cholesky fails)."""
    X = np.random.default_rng(0).normal(size=(3, 2))[[0, 0, 0, 1, 1, 2, 2, 2]]
    Kw = gaussian_kernels(X, [1.0])[0]
    nu = np.array([[1e11, 1e-3, 1e10, 1.0, 1e11, 1e-6, 1e9, 1.0]])
    lam = np.array([[1e-7, 1.0, 3e-6, 0.5, 1e-7, 0.2, 2e-7, 1.0]])
    delta = np.array([[1.0, 1, 1, -1, -1, 1, 1, 1]])
    return Kw, delta, lam, nu, 1e-4


def _scaled_system(Kw, lam, nu, tau):
    M = Kw @ np.diag(nu) @ Kw + tau + np.diag(lam)
    s = np.sqrt(np.diag(M))
    return M, M / np.outer(s, s)


def test_plain_cholesky_fails_and_retry_gives_finite_draws():
    Kw, delta, lam, nu, tau = _duplicated_row_problem()
    M, Ms = _scaled_system(Kw, lam[0], nu[0], tau)
    assert np.linalg.matrix_rank(Kw) == 3
    # the situation of the repro: λ_i/M_ii below machine precision, plain factorisation breaks
    assert (lam[0] / np.diag(M)).min() < np.finfo(float).eps
    assert np.isnan(np.asarray(jnp.linalg.cholesky(jnp.asarray(Ms)))).any()
    args = (jnp.asarray(Kw), jnp.asarray(delta), jnp.asarray(lam), jnp.asarray(nu), tau)
    a, b, jit = cond.sample_ab_jitter(jax.random.key(0), *args)
    assert np.all(np.isfinite(np.asarray(a))) and np.all(np.isfinite(np.asarray(b)))
    N = Kw.shape[0]
    eps = np.finfo(float).eps
    # the smallest jitter level that works: N·ε·10^k with k small (documented bound)
    assert 0 < float(jit[0]) <= N * eps * 10.0**cond.AB_JITTER_RETRIES
    a2, b2 = cond.sample_ab(jax.random.key(0), *args)  # the public sampler: same draw
    np.testing.assert_array_equal(np.asarray(a2), np.asarray(a))
    np.testing.assert_array_equal(np.asarray(b2), np.asarray(b))


def test_no_jitter_when_cholesky_succeeds():
    Kw, delta, lam, nu, tau = _duplicated_row_problem()
    lam = np.full_like(lam, 0.5)  # well conditioned: λ_i/M_ii ≫ ε
    nu = np.full_like(nu, 1.0)
    args = (jnp.asarray(Kw), jnp.asarray(delta), jnp.asarray(lam), jnp.asarray(nu), tau)
    _, _, jit = cond.sample_ab_jitter(jax.random.key(1), *args)
    assert float(jit[0]) == 0.0


def test_jittered_draws_are_exact_for_the_inflated_noise():
    """Draws match the exact moments of the conditional with λ' = λ + δ·diag(M) (Z·SE bounds),
    and those moments differ from the un-jittered ones by under 1 % in every sd here."""
    Kw, delta, lam, nu, tau = _duplicated_row_problem()
    args = (jnp.asarray(Kw), jnp.asarray(delta), jnp.asarray(lam), jnp.asarray(nu), tau)
    keys = jax.random.split(jax.random.key(2), N_DRAWS)
    a, b, jit = jax.jit(jax.vmap(lambda k: cond.sample_ab_jitter(k, *args)))(keys)
    beta = np.concatenate([np.asarray(a)[:, 0], np.asarray(b)[:, 0, None]], axis=1)
    assert np.all(np.isfinite(beta))
    delta_used = np.unique(np.asarray(jit))
    assert delta_used.size == 1 and delta_used[0] > 0  # deterministic given the state
    M, _ = _scaled_system(Kw, lam[0], nu[0], tau)
    lam_j = lam[0] + delta_used[0] * np.diag(M)
    mean, cov = _exact_moments(Kw, delta[0], lam_j, nu[0], tau)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(beta.mean(0) - mean) < Z * sd / np.sqrt(N_DRAWS))
    S = np.cov(beta, rowvar=False)
    se = np.sqrt((np.outer(sd**2, sd**2) + cov**2) / N_DRAWS)
    assert np.max(np.abs(S - cov) / se) < Z
    _, cov0 = _exact_moments(Kw, delta[0], lam[0], nu[0], tau)
    assert np.max(np.abs(sd / np.sqrt(np.diag(cov0)) - 1.0)) < 0.01
