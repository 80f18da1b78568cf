"""Collapsed update of the TPBN local scales ν with a, b and ς integrated out (issue 9).

Why: the plain TPBN Gibbs pair ν | a, ς and ς | ν moves log ν by O(1) per sweep. With the
paper's κ = 1e-10 the scale of an unused point sits near 1e-10 and that of a used one near
1e-2…1e2, so a point switches between "pruned" and "active" only by a random walk over ~20
units of log ν (the classic shrinkage-prior Gibbs trap), and with it the support of a, the
decision values f and the collapsed target of w. Here each ν_ci is drawn from its conditional
given w, λ and the other scales only, in one exact step.

Model per class c (pseudo-observations T = δ(1 + λ), V = λ, or their weighted forms of
:func:`bayesmkl.likelihood.pseudo_observations`): T_c = K_w a_c + b_c 1 + noise,
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

Measured (breast cancer, bsvm16, paper hyper-parameters, 4 chains × (200 + 400) sweeps with the
collapsed w-move; benchmarks/results/move_compare.md): ESS of Σ log ν 14.5 → 155, median ESS
of log ν_i 18 → 852, min/median ESS of w 10 → 33 / 259 → 241, 5% quantile / median ESS of the
held-in f 8.6 → 44 / 33 → 232, at 2.1× the CPU time per sweep. The worst f_i stays slow (ESS
≈ 8): there the chains sit in two states — a support vector (ν_i ≈ e³, λ_i ≈ 0.02, f_i near
the margin) or pruned and misclassified (ν_i ≈ e⁻¹⁵, λ_i ≈ 0.1) — and the switch appears to
need a joint move of (λ_i, ν_i), which single-site updates of either make rarely. Not the
default for that reason and for its cost.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.inference import conditionals as cond
from bayesmkl.inference.simplex import truncated_normal
from bayesmkl.likelihood import pseudo_observations, s_of
from bayesmkl.random import inverse_gaussian

__all__ = [
    "collapsed_lam",
    "collapsed_nu_step",
    "log_nu_conditional",
    "loo_f",
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
#: Most shrinkage steps of one slice update (each halves the bracket or better on average).
SLICE_MAX_SHRINK = 200
#: Sample weights below this skip the collapsed λ update (their V = λ/ϖ² is so large that the
#: predictive variance of f_i, 1/(Σ⁻¹)_ii − V_i, would be lost to cancellation); their λ is
#: then left to the sweep's plain λ | f draw. The choice depends on ϖ only, not on the state.
LAM_MIN_WEIGHT = 1e-2


def log_nu_conditional(theta, q, r, alpha, beta, kappa):
    """log π(θ) of θ = log ν_i given q_i, r_i (module docstring), up to a constant."""
    prior = alpha * theta - (alpha + beta) * jnp.logaddexp(theta, jnp.log(kappa))
    # log(1 + q e^θ) and e^θ / (1 + q e^θ) = 1 / (e^{−θ} + q), overflow-free for |θ| ≤ 700
    lik = -0.5 * jnp.logaddexp(0.0, jnp.log(q) + theta) + 0.5 * r**2 / (jnp.exp(-theta) + q)
    return prior + lik


def slice_stepping_out(
    key, x0, logpdf, lower=-THETA_MAX, upper=THETA_MAX, width=SLICE_WIDTH, max_steps=SLICE_MAX_STEPS
):
    """One exact univariate slice-sampling update (Neal 2003, stepping out and shrinkage).

    The target is restricted to [``lower``, ``upper``]. Stepping out uses the random split
    of ``max_steps`` between the two sides that makes it reversible (Neal 2003, Fig. 3); if
    shrinkage has not found a point after ``SLICE_MAX_SHRINK`` steps (a bracket of rounding
    width) x0 is kept, which is the only point left in it.
    """
    k_y, k_u, k_v, k_s = jax.random.split(key, 4)
    log_y = logpdf(x0) + jnp.log(jax.random.uniform(k_y, dtype=jnp.float64))

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

    init = (k_s, lo, hi, x0, jnp.asarray(False), jnp.zeros((), jnp.int32))
    out = jax.lax.while_loop(lambda c: ~c[4] & (c[5] < SLICE_MAX_SHRINK), shrink, init)
    return out[3]


def collapsed_lam(key, m, v, delta, weight, gamma0):
    """Draw λ_i given the Gaussian predictive N(m, v) of f_i with a, b integrated out.

    The augmented factor of point i is e^{−γ0 λ} N(T(λ); f_i, V(λ)) (:mod:`bayesmkl.likelihood`)
    and f_i | T_{−i} ~ N(m, v), so (f_i, λ_i) | T_{−i} is drawn by composition: first
    f_i ∝ N(f; m, v) · L'(y_i | f) — with g = δf and ζ = 1 − g, L' is e^{c₁(g − 1)} for g < 1 and
    e^{−c₂(g − 1)} for g > 1 (c₁ = ϖ(s + 1), c₂ = ϖ(s − 1)), so g is a two-component mixture of
    normals truncated to (−∞, 1) and (1, ∞) with means μ + c₁v and μ − c₂v (μ = δm) — then
    λ_i | f_i from :func:`bayesmkl.inference.conditionals.sample_lam`'s IG law. Scalars in,
    scalar out; ``weight`` is ϖ_i (1.0 unweighted), ``gamma0`` may be 0 (s = 1).
    """
    k_c, k_l, k_r, k_lam = jax.random.split(key, 4)
    s = s_of(gamma0)
    mu, sd = delta * m, jnp.sqrt(v)
    c1, c2 = weight * (s + 1.0), weight * (s - 1.0)
    mu1, mu2 = mu + c1 * v, mu - c2 * v
    log_w1 = c1 * (mu - 1.0) + 0.5 * c1**2 * v + jax.scipy.special.log_ndtr((1.0 - mu1) / sd)
    log_w2 = -c2 * (mu - 1.0) + 0.5 * c2**2 * v + jax.scipy.special.log_ndtr((mu2 - 1.0) / sd)
    left = jnp.log(jax.random.uniform(k_c, dtype=jnp.float64)) < log_w1 - jnp.logaddexp(
        log_w1, log_w2
    )
    g = jnp.where(
        left,
        truncated_normal(k_l, mu1, sd, -jnp.inf, 1.0),
        truncated_normal(k_r, mu2, sd, 1.0, jnp.inf),
    )
    zeta = weight * (1.0 - g)
    return 1.0 / inverse_gaussian(k_lam, s / jnp.maximum(jnp.abs(zeta), cond.ZETA_FLOOR), s**2)


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


def loo_f(b_ii, z_i, scale_i, t_i, v_i):
    """Predictive ``(m, v_f, σ²)`` of f_i given T_{−i} (a, b integrated out) from a scan's state.

    With (Σ⁻¹)_ii = B_ii / S_i² and (Σ⁻¹T)_i = z_i / S_i: T_i | T_{−i} ~ N(m, σ²) with
    m = T_i − z_i S_i / B_ii and σ² = S_i² / B_ii, and f_i | T_{−i} ~ N(m, σ² − V_i).
    """
    var_t = scale_i**2 / b_ii
    return t_i - z_i * scale_i / b_ii, var_t - v_i, var_t


def loo_qr(B, Kt, z, nu, i):
    """q_i = k_iᵀΣ₋ᵢ⁻¹k_i and r_i = k_iᵀΣ₋ᵢ⁻¹t from the state of a scan (for tests)."""
    k = Kt[:, i]
    return _loo(B @ k, k, z, nu[i])[3:]


def nu_scan(
    key, Kw, t, v, nu, tau, alpha, beta, kappa, nu_max=NU_MAX, return_inverse=False, lam_site=None
):
    """Sweep every ν_i of one class in a random order (module docstring); returns the new ν.

    ``Kw: (N, N)``, ``t, v, nu: (N,)`` (pseudo-targets, noise variances, current scales).
    ``return_inverse=True`` also returns the final B = Σ̃⁻¹, z = B t̃ and the scale of Σ̃ (for
    tests).

    ``lam_site=(lam, delta, weight, gamma0)`` (``lam, delta, weight: (N,)``; ``t, v`` must be
    their pseudo-observations) adds, right after each ν_i, the collapsed draw of λ_i given
    (w, ν, λ_{−i}) with a, b integrated out (:func:`collapsed_lam`; f_i | T_{−i} ~ N(m, v_f)
    with m = T_i − (Σ⁻¹T)_i / (Σ⁻¹)_ii and v_f = 1/(Σ⁻¹)_ii − V_i), followed by the rank-one
    update of B for the new V_i and of B T for the new T_i; the scan then returns ``(nu, lam)``.
    Points with ϖ_i < :data:`LAM_MIN_WEIGHT` keep their λ_i.

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
    with_lam = lam_site is not None
    lam = lam_site[0] if with_lam else jnp.zeros(N, t.dtype)
    n_cols = 2 * nblk if with_lam else nblk  # one rank-one term per ν_i (and per λ_i)

    def step(carry, xs):
        U, c, P0, E0, z, nu, lam = carry
        j, i, k_i = xs
        k_nu, k_lam = jax.random.split(k_i)
        k = Kt[:, i]
        u = P0[:, j] - U @ (c * (U.T @ k))  # B k with B = B₀ − U diag(c) Uᵀ
        q, r, d_old, q_m, r_m = _loo(u, k, z, nu[i])

        def logpdf(th):
            return log_nu_conditional(th, q_m, r_m, alpha, beta, kappa)

        th0 = jnp.clip(jnp.log(nu[i]), -THETA_MAX, upper)
        nu_new = jnp.exp(
            slice_stepping_out(k_nu if with_lam else k_i, th0, logpdf, -THETA_MAX, upper)
        )
        # a numerically broken factorisation (non-finite q, r) leaves ν_i as it is
        nu_new = jnp.where(jnp.isfinite(q_m) & jnp.isfinite(r_m), nu_new, nu[i])
        d = nu_new - nu[i]
        den = d_old + nu_new * q
        U = U.at[:, j].set(u)
        c = c.at[j].set(d / den)
        z = z - (d * r / den) * u
        if with_lam:
            U, c, z, lam = _lam_update(k_lam, U, c, E0, z, lam, i, j, nblk, scale, lam_site)
        return (U, c, P0, E0, z, nu.at[i].set(nu_new), lam), None

    def block(carry, xs):
        B, z, nu, lam = carry
        idx, ks = xs
        P0 = B @ Kt[:, idx]  # (N, nblk), one GEMM
        E0 = B[:, idx] if with_lam else P0  # columns B e_i of the block's points
        U0 = jnp.zeros((N, n_cols), B.dtype)
        c0 = jnp.zeros(n_cols, B.dtype)
        (U, c, _, _, z, nu, lam), _ = jax.lax.scan(
            step, (U0, c0, P0, E0, z, nu, lam), (jnp.arange(nblk), idx, ks)
        )
        return (B - (U * c) @ U.T, z, nu, lam), None

    (B, z, nu, lam), _ = jax.lax.scan(block, (B, z, nu, lam), (order, keys))
    out = (nu, lam) if with_lam else nu
    return (out, B, z, scale) if return_inverse else out


def _lam_update(key, U, c, E0, z, lam, i, j, nblk, scale, lam_site):
    """The collapsed λ_i step of :func:`nu_scan` on its blocked state (U, c, B₀e, z = B t̃).

    In the Jacobi-scaled basis (Σ̃ = S⁻¹ΣS⁻¹, B = Σ̃⁻¹, z = B S⁻¹T) a new V_i adds
    d̃ = ΔV_i / S_i² to Σ̃_ii and a new T_i adds ΔT_i / S_i to t̃_i: with u = B e_i,
    B ← B − d̃ u uᵀ / ρ and z ← z + u (ΔT_i / S_i − d̃ z_i) / ρ, ρ = 1 + d̃ B_ii = (v_f + V_i')/σ².
    """
    _, delta, weight, gamma0 = lam_site
    u = E0[:, j] - U @ (c * U[i, :])  # B e_i
    sc = scale[i]
    t_old, v_old = pseudo_observations(delta[i], lam[i], weight[i])
    m, v_f, var_t = loo_f(u[i], z[i], sc, t_old, v_old)
    ok = (weight[i] >= LAM_MIN_WEIGHT) & jnp.isfinite(m) & (v_f > 0.0) & jnp.isfinite(v_f)
    lam_new = collapsed_lam(key, m, jnp.where(ok, v_f, 1.0), delta[i], weight[i], gamma0)
    lam_new = jnp.where(ok & jnp.isfinite(lam_new) & (lam_new > 0.0), lam_new, lam[i])
    t_new, v_new = pseudo_observations(delta[i], lam_new, weight[i])
    d_t = (v_new - v_old) / sc**2
    rho = jnp.where(ok, (v_f + v_new) / var_t, 1.0)
    U = U.at[:, nblk + j].set(u)
    c = c.at[nblk + j].set(d_t / rho)
    z = z + u * ((t_new - t_old) / sc - d_t * z[i]) / rho
    return U, c, z, lam.at[i].set(lam_new)


def collapsed_nu_step(key, Kw, delta, lam, nu, hyper, nu_max=NU_MAX, weight=None, update_lam=False):
    """The collapsed TPBN block: ν | w, λ point by point, then ς | ν, then (a, b) | w, λ, ν.

    ``Kw: (N, N)``, ``delta, lam, nu: (C, N)``; ``hyper`` a :class:`~bayesmkl.model.Hyper`
    of (possibly traced) values; ``nu_max`` the upper bound of ν; ``weight`` sample weights
    ``(N,)`` or ``None`` (they only change the pseudo-observations T, V:
    :func:`bayesmkl.likelihood.pseudo_observations`). ``update_lam=True`` also draws each λ_ci
    given (w, ν, λ_{−ci}) with a, b integrated out, right after ν_ci (:func:`nu_scan`), so that
    a point can leave the support and re-enter it with its slack in one scan. Returns
    ``(nu, varsigma, a, b, lam)`` (``lam`` unchanged unless ``update_lam``).
    """
    k_nu, k_vs, k_ab = jax.random.split(key, 3)
    C, N = delta.shape
    T, V = pseudo_observations(delta, lam, weight)
    h = hyper
    wt = jnp.ones(N, T.dtype) if weight is None else weight

    def scan(k, t, v, n, lam_c, delta_c):
        site = (lam_c, delta_c, wt, h.gamma0) if update_lam else None
        return nu_scan(
            k, Kw, t, v, n, h.bias_prior_var, h.alpha_a, h.beta_a, h.kappa, nu_max, lam_site=site
        )

    out = jax.vmap(scan)(jax.random.split(k_nu, C), T, V, nu, lam, delta)
    nu, lam = out if update_lam else (out, lam)
    varsigma = cond.sample_varsigma(k_vs, nu, h.alpha_a, h.beta_a, h.kappa)
    a, b = cond.sample_ab(k_ab, Kw, delta, lam, nu, h.bias_prior_var, weight)
    return nu, varsigma, a, b, lam
