"""Collapsed update of the TPBN local scales ν with a, b and ς integrated out.

Why: the plain TPBN Gibbs pair ν | a, ς and ς | ν moves log ν by O(1) per sweep. With the
paper's κ = 1e-10 the scale of an unused point sits near 1e-10 and that of a used one near
1e-2…1e2, so a point switches between "pruned" and "active" only by a random walk over ~20
units of log ν (the classic shrinkage-prior Gibbs trap), and with it the support of a, the
decision values f and the collapsed target of w. Here each ν_ci is drawn from its conditional
given w, λ and the other scales only, in one exact step.

Model per class c (pseudo-observations T = δ(1 + λ), V = λ, or their weighted forms of
:func:`bayesmkl.model.likelihood.pseudo_observations`): T_c = K_w a_c + b_c 1 + noise,
noise ~ N(0, diag V_c), a_ci ~ N(0, ν_ci), b_c ~ N(0, τ), so with (a_c, b_c) integrated out

    T_c ~ N(0, Σ_c),   Σ_c = K_w diag(ν_c) K_w + τ 1 1ᵀ + diag V_c,

and ς_ci integrated out of ν_ci | ς_ci ~ Gamma(α_a, ς_ci), ς_ci ~ Gamma(β_a, κ) gives the TPB
prior p(ν) ∝ ν^{α_a − 1} (ν + κ)^{−(α_a + β_a)}. Write Σ = Σ₋ᵢ + ν_i k_i k_iᵀ (k_i = K_w[:, i],
Σ₋ᵢ the covariance without point i's term) and q_i = k_iᵀΣ₋ᵢ⁻¹k_i, r_i = k_iᵀΣ₋ᵢ⁻¹T_c. By the
matrix determinant lemma and Sherman–Morrison the conditional of θ = log ν_i is, up to a constant,

    log π(θ) = α_a θ − (α_a + β_a) log(e^θ + κ) − ½ log(1 + q_i e^θ) + ½ r_i² e^θ / (1 + q_i e^θ)

(the Jacobian e^θ included), drawn exactly by slice sampling with stepping out (Neal 2003) on
θ ∈ [−THETA_MAX, log ν_max]. The lower end removes a relative prior mass below
e^{−α_a(THETA_MAX + log κ)} (log π grows at slope α_a as θ → −∞): negligible for α_a ≥ 0.1.
The upper end ν_max is a real truncation of the TPB prior (so the update is exact for the model
with ν ≤ ν_max): with β_a = 0.1 the prior tail p(ν) ∝ ν^{−1−β_a} is so heavy that, once a is
integrated out, the scale of a point whose kernel column is (numerically) in the span of the
others follows the prior up to ν ≈ 1/q_i, and q_i can be 1e-15 on real kernel matrices; Σ then
has condition numbers beyond 1e20 and no float64 factorisation is meaningful. The prior mass
cut is P(ν > ν_max) ≈ (κ/ν_max)^{β_a} per point (1.6% for κ = 1e-10, β_a = 0.1, ν_max = 1e8),
in directions of a that the data do not determine. The plain TPBN Gibbs update has the same
posterior tail but moves log ν by O(1) per sweep, so in practice it rarely reaches it.

The points of each class are swept in a random order (drawn independently of the state), keeping
B = Σ⁻¹ (of the Jacobi-scaled Σ) and B T up to date by rank-one updates, so a sweep over all
N points costs one O(N³) factorisation plus N rank-one updates per class (applied blockwise
as GEMMs, :func:`nu_scan`). With u = B k_i, q = k_iᵀu
and r = k_iᵀ B T for the current Σ, q_i = q / (1 − ν_i q) and r_i = r / (1 − ν_i q); after
ν_i ← ν_i', B ← B − d u uᵀ / (1 − ν_i q + ν_i' q) with d = ν_i' − ν_i (both terms of the
denominator are non-negative: no cancellation).

Validity (partially collapsed Gibbs, van Dyk & Park 2008). Each single-point step is the
blocked draw of (ν_ci, ς_ci, a_c, b_c) from its full conditional given (w, λ, ν_{−ci}, ς_{−ci}),
done by composition: ν_ci from its marginal above (which does not depend on ς_{−ci}), then
ς_ci | ν_ci, then (a_c, b_c) | w, λ, ν. No later step of the block conditions on a or b before
the block ends with an exact draw of (a, b) | w, λ, ν, and ς_ci enters no other point's
conditional, so the draws of a, b inside the block and of ς_ci until the end can be skipped
(trimmed) without changing the transition: the block is a valid Gibbs step of the joint and
leaves the posterior invariant. It conditions only on (w, λ), so it may follow any step of the
sweep. Any α_a > 0 works (no IG shortcut needed).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.model.likelihood import pseudo_observations
from bayesmkl.sampler import conditionals as cond

__all__ = [
    "CAP_SLICE_NU",
    "collapsed_nu_step",
    "collapsed_nu_step_tv",
    "log_nu_conditional",
    "loo_qr",
    "nu_scan",
    "scaled_inverse",
    "slice_stepping_out",
]

#: Support of θ = log ν in the slice sampler (a truncation with negligible prior mass).
THETA_MAX = 600.0
#: Points per block of the scan (:func:`nu_scan`).
SCAN_BLOCK = 64
#: Default upper bound ν_max of the scales (module docstring).
NU_MAX = 1e8
#: Initial width of the slice bracket in θ and the most steps it is stepped out on each side.
SLICE_WIDTH = 2.0
SLICE_MAX_STEPS = 64
#: Most shrinkage steps of one slice update (each halves the bracket or better on average, and
#: x0, always inside the slice, is proposed once the bracket is a few ulps wide).
SLICE_MAX_SHRINK = 200
#: Relative width under which a bracket counts as collapsed onto x0 (64 ulps of 1).
_ROUNDING_WIDTH = 64 * 2.0**-52
#: Bit of the sweep's ``capped`` flag (``State.capped``) set when a slice update of ν
#: stopped at ``SLICE_MAX_SHRINK`` (the bits of :mod:`~bayesmkl.sampler.simplex` are 1 and 2).
CAP_SLICE_NU = 4


def log_nu_conditional(theta, q, r, alpha, beta, kappa):
    """log π(θ) of θ = log ν_i given q_i, r_i (module docstring), up to a constant."""
    prior = alpha * theta - (alpha + beta) * jnp.logaddexp(theta, jnp.log(kappa))
    # log(1 + q e^θ) and e^θ / (1 + q e^θ) = 1 / (e^{−θ} + q), overflow-free for |θ| ≤ 700
    lik = -0.5 * jnp.logaddexp(0.0, jnp.log(q) + theta) + 0.5 * r**2 / (jnp.exp(-theta) + q)
    return prior + lik


def slice_stepping_out(
    key,
    x0,
    logpdf,
    lower=-THETA_MAX,
    upper=THETA_MAX,
    width=SLICE_WIDTH,
    max_steps=SLICE_MAX_STEPS,
    *,
    return_capped=False,
):
    """One exact univariate slice-sampling update (Neal 2003, stepping out and shrinkage).

    The target is restricted to [``lower``, ``upper``]. Stepping out uses the random split
    of ``max_steps`` between the two sides that makes it reversible (Neal 2003, Fig. 3).
    Shrinkage ends when a point of the slice is found, after at most ``SLICE_MAX_SHRINK``
    steps. Each step shrinks the bracket by a uniform factor, so by then it has shrunk to a few
    ulps around x0 (about e^{−200} of its width), and x0 — in the slice, but not found there
    when rounding hides the gap ``log π(x0) − log y`` of a very peaked conditional — is the
    only point left: x0 is kept, as the exact update would (nearly) do. A bracket that is still
    wider than that at the cap (only NaN arithmetic gets there), or a non-finite x0 or slice
    level, returns NaN, never a silent value; ``return_capped=True`` also returns whether the
    cap was hit that way (a bool).
    """
    k_y, k_u, k_v, k_s = jax.random.split(key, 4)
    log_y = logpdf(x0) + jnp.log(jax.random.uniform(k_y, dtype=jnp.float64))
    bad = ~jnp.isfinite(x0) | jnp.isnan(log_y)

    def inside(x):
        return (x >= lower) & (x <= upper) & (logpdf(x) > log_y)

    lo = x0 - width * jax.random.uniform(k_u, dtype=jnp.float64)
    hi = lo + width
    j = jnp.floor(max_steps * jax.random.uniform(k_v, dtype=jnp.float64)).astype(jnp.int32)
    k = max_steps - 1 - j
    # stepping out, all candidate ends at once: the left end moves out while it is inside the
    # slice and fewer than j steps were taken (the same ends as the sequential loop)
    steps = jnp.arange(max_steps)
    lo_in = jax.vmap(inside)(lo - width * steps) & (steps < j)
    hi_in = jax.vmap(inside)(hi + width * steps) & (steps < k)
    lo = lo - width * jnp.argmin(jnp.concatenate([lo_in, jnp.array([False])]))
    hi = hi + width * jnp.argmin(jnp.concatenate([hi_in, jnp.array([False])]))

    def shrink(c):
        key, lo, hi, x, done, n = c
        key, k1 = jax.random.split(key)
        x1 = lo + (hi - lo) * jax.random.uniform(k1, dtype=jnp.float64)
        ok = inside(x1)
        lo = jnp.where(~ok & (x1 < x0), x1, lo)
        hi = jnp.where(~ok & (x1 >= x0), x1, hi)
        return key, lo, hi, jnp.where(ok, x1, x), ok, n + 1

    init = (k_s, lo, hi, x0, bad, jnp.zeros((), jnp.int32))
    _, lo, hi, x, done, _ = jax.lax.while_loop(
        lambda c: ~c[4] & (c[5] < SLICE_MAX_SHRINK), shrink, init
    )
    # at the cap: x0 when the bracket has collapsed to rounding width around it, else a failure
    collapsed = hi - lo <= _ROUNDING_WIDTH * jnp.maximum(1.0, jnp.abs(x0))
    capped = ~done & ~collapsed
    x = jnp.where(bad | capped, jnp.nan, x)
    return (x, capped) if return_capped else x


def _loo(u, k, z, nu_i):
    """q_i, r_i of the covariance without point i, from u = Σ⁻¹k, q = kᵀu, r = kᵀΣ⁻¹T."""
    q = jnp.maximum(jnp.dot(k, u), 0.0)
    r = jnp.dot(k, z)
    d_old = jnp.maximum(1.0 - nu_i * q, jnp.finfo(q.dtype).tiny)
    return q, r, d_old, q / d_old, r / d_old


def scaled_inverse(Kw, t, v, nu, tau):
    """Start of a scan: ``(K̃, B, B t̃, scale)`` for the Jacobi-scaled Σ̃ = S⁻¹ΣS⁻¹.

    S = diag(scale) = diag(Σ)^{1/2}, K̃ = S⁻¹K_w (column i is k̃_i), t̃ = S⁻¹t, B = Σ̃⁻¹ (one
    Cholesky). q_i and r_i are invariant under this change of basis.
    """
    N = t.shape[0]
    Sigma = (Kw * nu) @ Kw + tau + jnp.diag(v)
    scale = jnp.sqrt(jnp.diagonal(Sigma))
    L = jnp.linalg.cholesky(Sigma / (scale[:, None] * scale[None, :]))
    B = jax.scipy.linalg.cho_solve((L, True), jnp.eye(N, dtype=Sigma.dtype))
    B = 0.5 * (B + B.T)
    return Kw / scale[:, None], B, B @ (t / scale), scale


def loo_qr(B, Kt, z, nu, i):
    """q_i = k_iᵀΣ₋ᵢ⁻¹k_i and r_i = k_iᵀΣ₋ᵢ⁻¹t from the state of a scan (for tests)."""
    k = Kt[:, i]
    return _loo(B @ k, k, z, nu[i])[3:]


def nu_scan(
    key, Kw, t, v, nu, tau, alpha, beta, kappa, nu_max=NU_MAX, return_inverse=False,
    return_capped=False,
):  # fmt: skip
    """Sweep every ν_i of one class in a random order (module docstring); returns the new ν.

    ``Kw: (N, N)``, ``t, v, nu: (N,)`` (pseudo-targets, noise variances, current scales).
    ``return_inverse=True`` also returns the final B = Σ̃⁻¹, z = B t̃ and the scale of Σ̃ (for
    tests); ``return_capped=True`` appends whether a slice update hit its cap (a bool; that
    ν_i is then NaN).

    The points are visited in blocks of ``min(SCAN_BLOCK, N)``: for a block the products B₀K̃_block
    are one GEMM, the rank-one updates inside it are kept as B = B₀ − U diag(c) Uᵀ (so each
    step costs O(N·SCAN_BLOCK) instead of O(N²)), and B₀ absorbs them by one more GEMM at the
    end of the block. The order is a random permutation padded to whole blocks by the first
    points of a second one (a point may then be visited twice; the sequence of sites does not
    depend on the state, so every visit is a valid Gibbs step).
    """
    N = t.shape[0]
    nblk = min(SCAN_BLOCK, N)
    nb = -(-N // nblk)
    Kt, B, z, scale = scaled_inverse(Kw, t, v, nu, tau)
    k_perm, k_pad, k_steps = jax.random.split(key, 3)
    order = jnp.concatenate(
        [jax.random.permutation(k_perm, N), jax.random.permutation(k_pad, N)[: nb * nblk - N]]
    ).reshape(nb, nblk)
    keys = jax.random.split(k_steps, nb * nblk).reshape(nb, nblk)
    upper = jnp.log(nu_max)

    def step(carry, xs):
        U, c, P0, z, nu, capped = carry
        j, i, k_i = xs
        k = Kt[:, i]
        u = P0[:, j] - U @ (c * (U.T @ k))  # B k with B = B₀ − U diag(c) Uᵀ
        q, r, d_old, q_m, r_m = _loo(u, k, z, nu[i])

        def logpdf(th):
            return log_nu_conditional(th, q_m, r_m, alpha, beta, kappa)

        th0 = jnp.clip(jnp.log(nu[i]), -THETA_MAX, upper)
        th_new, hit = slice_stepping_out(k_i, th0, logpdf, -THETA_MAX, upper, return_capped=True)
        nu_new = jnp.exp(th_new)
        # a numerically broken factorisation (non-finite q, r) leaves ν_i as it is
        nu_new = jnp.where(jnp.isfinite(q_m) & jnp.isfinite(r_m), nu_new, nu[i])
        d = nu_new - nu[i]
        den = d_old + nu_new * q
        U = U.at[:, j].set(u)
        c = c.at[j].set(d / den)
        z = z - (d * r / den) * u
        return (U, c, P0, z, nu.at[i].set(nu_new), capped | hit), None

    def block(carry, xs):
        B, z, nu, capped = carry
        idx, ks = xs
        P0 = B @ Kt[:, idx]  # (N, nblk), one GEMM
        U0 = jnp.zeros((N, nblk), B.dtype)
        c0 = jnp.zeros(nblk, B.dtype)
        (U, c, _, z, nu, capped), _ = jax.lax.scan(
            step, (U0, c0, P0, z, nu, capped), (jnp.arange(nblk), idx, ks)
        )
        return (B - (U * c) @ U.T, z, nu, capped), None

    init = (B, z, nu, jnp.asarray(False))
    (B, z, nu, capped), _ = jax.lax.scan(block, init, (order, keys))
    out = (nu, B, z, scale) if return_inverse else (nu,)
    out = out + (capped,) if return_capped else out
    return out if len(out) > 1 else out[0]


def collapsed_nu_step(
    key, Kw, delta, lam, nu, hyper, nu_max=NU_MAX, weight=None, margin=None, *,
    return_capped=False,
):  # fmt: skip
    """The collapsed TPBN block of the classifier: ν | w, λ point by point, then ς | ν, then
    (a, b) | w, λ, ν.

    ``Kw: (N, N)``, ``delta, lam, nu: (C, N)``; ``hyper`` a
    :class:`~bayesmkl.model.classification.Hyper` of (possibly traced) values; ``nu_max`` the
    upper bound of ν; ``weight`` sample weights ``(N,)`` or ``None`` and ``margin`` margins
    ``(C, N)`` or ``None`` (they only change the pseudo-observations T, V:
    :func:`bayesmkl.model.likelihood.pseudo_observations`). Returns ``(nu, varsigma, a, b)``,
    and with ``return_capped=True`` also :data:`CAP_SLICE_NU` (int32) when a slice update hit
    its cap, else 0.
    """
    T, V = pseudo_observations(delta, lam, weight, margin)
    out = collapsed_nu_step_tv(key, Kw, T, V, nu, hyper, nu_max)
    return out if return_capped else out[:4]


def collapsed_nu_step_tv(key, Kw, T, V, nu, hyper, nu_max=NU_MAX):
    """The collapsed TPBN block for pseudo-targets ``T (C, N)`` with noise variances
    ``V (C, N)`` (any likelihood that is Gaussian in f given its augmentation): ν | w, T, V point
    by point (:func:`nu_scan`), then ς | ν, then (a, b) | w, T, V, ν. ``hyper`` needs
    ``alpha_a, beta_a, kappa, bias_prior_var``. Returns ``(nu, varsigma, a, b, capped)`` with
    ``capped`` :data:`CAP_SLICE_NU` (int32) when a slice update hit its cap, else 0.
    """
    k_nu, k_vs, k_ab = jax.random.split(key, 3)
    C = T.shape[0]
    scan = lambda k, t, v, n: nu_scan(  # noqa: E731
        k, Kw, t, v, n, hyper.bias_prior_var, hyper.alpha_a, hyper.beta_a, hyper.kappa, nu_max,
        return_capped=True,
    )  # fmt: skip
    nu, capped = jax.vmap(scan)(jax.random.split(k_nu, C), T, V, nu)
    varsigma = cond.sample_varsigma(k_vs, nu, hyper.alpha_a, hyper.beta_a, hyper.kappa)
    a, b, _ = cond.sample_ab_tv(k_ab, Kw, T, V, nu, hyper.bias_prior_var)
    bits = jnp.where(jnp.any(capped), jnp.int32(CAP_SLICE_NU), jnp.int32(0))
    return nu, varsigma, a, b, bits
