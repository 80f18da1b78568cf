"""Pure full-conditional samplers of BM3KL and the potential of e (docs/math.md §3).

Every function takes arrays (and a PRNG key where it samples) and returns arrays; all are
jit- and vmap-able. Shapes: P kernels, C one-vs-all problems, N training points.

For tests, each sampler has a companion that returns the parameters of its conditional law
(``*_params``), so the law can be compared with the model's joint density.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.model.likelihood import margin_slack, pseudo_observations, s_of
from bayesmkl.sampler.random import gamma, gig, inverse_gaussian

ZETA_FLOOR = 1e-10  # |ζ| floor (docs/math.md §3.1, A14); ζ = 0 gives λ ~ Gamma(1/2, s²/2)
A_FLOOR = 1e-300  # |a| floor for ν's IG mean (a → 0 gives ν ~ Gamma(1/2, ς))


# --------------------------------------------------------------------------------------------
# λ | rest  (docs/math.md §3.1)
# --------------------------------------------------------------------------------------------
def lam_params(zeta, gamma0):
    """GIG(p, ϱ, χ) parameters of λ | rest: ``(1/2, 1 + 2γ0, ζ²)``, each broadcast to ζ's shape."""
    return (
        jnp.full_like(zeta, 0.5),
        jnp.full_like(zeta, 1.0 + 2.0 * gamma0),
        zeta**2,
    )


def sample_lam(key, f, delta, gamma0, weight=None, margin=None):
    """Draw λ ``(C, N)`` given decision values ``f: (C, N)`` and targets ``delta: (C, N)``.

    Uses λ⁻¹ ~ IG(s/|ζ|, s²) with s = √(1 + 2γ0) (footnote 1 of the paper); with sample
    weights ϖ ``(N,)``, ζ is the scaled slack ϖζ, and with margins m ``(C, N)`` ζ = m − δf
    (:mod:`bayesmkl.model.likelihood`).
    """
    zeta = margin_slack(f, delta, weight, margin)
    s = s_of(gamma0)
    mean = s / jnp.maximum(jnp.abs(zeta), ZETA_FLOOR)
    return 1.0 / inverse_gaussian(key, mean, s**2)


# --------------------------------------------------------------------------------------------
# (a_c, b_c) | rest  (docs/math.md §3.2)
# --------------------------------------------------------------------------------------------
def ab_precision_form(Kw, delta, lam, nu, tau):
    """Mean ``(C, N+1)`` and covariance ``(C, N+1, N+1)`` of β_c = [a_c; b_c] in precision form.

    Numerically fragile (terms 1/ν and 1/λ); used by tests as the reference for the Matheron
    sampler, never by the sampler itself.
    """
    N = Kw.shape[0]
    Xt = jnp.concatenate([Kw, jnp.ones((N, 1))], axis=1)  # (N, N+1)

    def one(delta_c, lam_c, nu_c):
        prior_prec = jnp.concatenate([1.0 / nu_c, jnp.array([1.0 / tau])])
        prec = Xt.T @ (Xt / lam_c[:, None]) + jnp.diag(prior_prec)
        cov = jnp.linalg.inv(prec)
        cov = 0.5 * (cov + cov.T)
        mean = cov @ (Xt.T @ (delta_c * (1.0 + lam_c) / lam_c))
        return mean, cov

    return jax.vmap(one)(delta, lam, nu)


def ab_mean_lambda_form(Kw, delta, lam, nu, tau):
    """Posterior mean of β_c in Λ-form: ``D X̃ᵀ (X̃ D X̃ᵀ + Λ)⁻¹ t`` → ``(C, N+1)``."""
    N = Kw.shape[0]
    Xt = jnp.concatenate([Kw, jnp.ones((N, 1))], axis=1)

    def one(delta_c, lam_c, nu_c):
        d = jnp.concatenate([nu_c, jnp.array([tau])])
        M = (Xt * d) @ Xt.T + jnp.diag(lam_c)
        omega = jnp.linalg.solve(M, delta_c * (1.0 + lam_c))
        return d * (Xt.T @ omega)

    return jax.vmap(one)(delta, lam, nu)


def sample_ab(key, Kw, delta, lam, nu, tau, weight=None, margin=None):
    """Draw (a, b) jointly by Matheron's rule in Λ-form (Bhattacharya et al. 2016), batched over c.

    For each class: u ~ N(0, D), n ~ N(0, Λ), v = X̃u + n, solve (X̃ D X̃ᵀ + Λ) ω = t − v by one
    Cholesky, β = u + D X̃ᵀ ω, with X̃ = [K_w, 1], D = diag(ν_c, τ), Λ = diag(λ_c),
    t = δ_c ⊙ (1 + λ_c). Neither 1/ν nor 1/λ appears. The N×N system is Jacobi-scaled before
    the Cholesky, because its diagonal spans many orders of magnitude.

    Rank-deficient K_w (duplicated training rows) with ν_i ≫ λ_i make the scaled system
    numerically singular: its exact smallest eigenvalue λ_i/M_ii can fall below the rounding
    error of forming M (≈ N·ε·M_ii), and the Cholesky then returns NaN. For the classes where it
    does, the factorisation is retried with a jitter δ·I on the scaled system, δ = N·ε·10^k,
    k = 0, 1, … (:data:`AB_JITTER_RETRIES` at most), and the noise n gets a matching extra
    N(0, δ·M_ii), so the draw is *exact* for the conditional in which λ_i is replaced by
    λ_i + δ·M_ii — a perturbation of the size of the rounding error already incurred in
    forming M. Classes whose plain Cholesky succeeds are unaffected (δ = 0, same draws as
    without the retry); see :func:`sample_ab_jitter` for δ.

    Parameters
    ----------
    key : PRNG key
    Kw : array (N, N)
        Combined kernel (symmetric).
    delta, lam, nu : arrays (C, N)
    tau : float
        Prior variance of b.
    weight : array (N,), optional
        Sample weights ϖ: the regression then has targets T = δ(1 + λ/ϖ) and noise variances
        V = λ/ϖ² in place of δ(1 + λ) and λ (:func:`bayesmkl.model.likelihood.pseudo_observations`).
    margin : array (C, N), optional
        Margins m in place of 1: targets T = δ(m + λ/ϖ) (:mod:`bayesmkl.model.likelihood`).

    Returns
    -------
    a : array (C, N)
    b : array (C,)
    """
    a, b, _ = sample_ab_jitter(key, Kw, delta, lam, nu, tau, weight, margin)
    return a, b


#: Most retries of the jittered Cholesky in :func:`sample_ab` (δ ≤ N·ε·10^AB_JITTER_RETRIES).
#: With unit diagonal the scaled system's computed eigenvalues are ≥ −O(N²ε), so δ = N²·ε·10
#: always suffices: k = ⌈log10 N⌉ + 1 retries (4 for N < 1000); more are allowed for safety.
AB_JITTER_RETRIES = 8


def sample_ab_jitter(key, Kw, delta, lam, nu, tau, weight=None, margin=None):
    """:func:`sample_ab` that also returns the jitter δ ``(C,)`` used per class (0 = none).

    The draw is exact for the conditional with λ_c replaced by ``λ_c + δ_c · diag(M_c)``,
    ``M_c = K_w diag(ν_c) K_w + τ 11ᵀ + Λ_c``. A class whose system is still not factorisable
    after :data:`AB_JITTER_RETRIES` retries (only non-finite input) keeps NaN draws, which the
    estimator reports (:func:`bayesmkl.posterior.checks.check_draws`).
    """
    T, V = pseudo_observations(delta, lam, weight, margin)  # (δ(1 + λ), λ) by default
    return sample_ab_tv(key, Kw, T, V, nu, tau)


def sample_ab_tv(key, Kw, T, V, nu, tau):
    """:func:`sample_ab_jitter` for a Gaussian regression of f on pseudo-targets ``T (C, N)``
    with noise variances ``V (C, N)``: β_c = [a_c; b_c] | · for T_c ~ N(K_w a_c + b_c 1,
    diag V_c). Every model of the package whose likelihood is Gaussian in f given its
    augmentation variables draws (a, b) here: the classifier with (T, V) from
    :func:`bayesmkl.model.likelihood.pseudo_observations`, the regressor with those of
    :mod:`bayesmkl.model.regression_likelihood`. Returns ``a (C, N)``, ``b (C,)`` and the jitter
    ``(C,)`` (the draw is exact for V_c replaced by ``V_c + δ_c · diag(M_c)``).
    """
    lam = V
    C, N = T.shape
    ku, kn = jax.random.split(key)
    u_a = jax.random.normal(ku, (C, N + 1))
    z_n = jax.random.normal(kn, (C, N))
    d = jnp.concatenate([nu, jnp.full((C, 1), tau)], axis=1)  # (C, N+1)
    u = u_a * jnp.sqrt(d)
    v = u[:, :N] @ Kw + u[:, N:] + jnp.sqrt(lam) * z_n  # X̃u + n, (C, N)  (K_w symmetric)
    # M_c = K_w diag(ν_c) K_w + τ 11ᵀ + Λ_c  — one batched GEMM for all classes
    M = jnp.einsum("ij,cj,jk->cik", Kw, nu, Kw) + tau + jax.vmap(jnp.diag)(lam)
    scale = jnp.sqrt(jnp.diagonal(M, axis1=1, axis2=2))  # (C, N) Jacobi scaling
    Ms = M / (scale[:, :, None] * scale[:, None, :])
    L = jnp.linalg.cholesky(Ms)

    def failed(L):
        return ~jnp.all(jnp.isfinite(L), axis=(1, 2))  # (C,)

    eye = jnp.eye(N, dtype=Ms.dtype)
    base = N * jnp.finfo(Ms.dtype).eps

    def retry(carry):  # only entered when some class failed; δ_c grows tenfold per round
        k, L, jit = carry
        bad = failed(L)
        jit_k = jnp.where(bad, base * 10.0**k, jit)
        L_k = jnp.linalg.cholesky(Ms + jit_k[:, None, None] * eye)
        return k + 1, jnp.where(bad[:, None, None], L_k, L), jit_k

    _, L, jit = jax.lax.while_loop(
        lambda c: jnp.any(failed(c[1])) & (c[0] <= AB_JITTER_RETRIES),
        retry,
        (jnp.zeros((), jnp.int32), L, jnp.zeros(C, Ms.dtype)),
    )
    # matching noise N(0, δ·M_ii): exact draw for λ' = λ + δ·diag(M); zero when δ = 0
    z_j = jax.random.normal(jax.random.fold_in(key, 2), (C, N))
    v = v + jnp.sqrt(jit)[:, None] * scale * z_j
    rhs = T - v
    omega = jax.scipy.linalg.cho_solve((L, True), (rhs / scale)[..., None])[..., 0] / scale
    a = u[:, :N] + nu * (omega @ Kw)
    b = u[:, N] + tau * jnp.sum(omega, axis=1)
    return a, b, jit


# --------------------------------------------------------------------------------------------
# (a_c, b_c) | rest of the landmark model, in weight space  (docs/math.md §16.2)
# --------------------------------------------------------------------------------------------
def _weight_space_system(Psi_w, T, V, nu, tau):
    """The whitened design ``Λ^{-1/2} X̃`` ``(C, N, M+1)``, the prior sd ``D^{1/2}``
    ``(C, M+1)`` and ``B_c = I + D^{1/2} X̃ᵀ Λ_c⁻¹ X̃ D^{1/2}`` ``(C, M+1, M+1)``, with
    X̃ = [Ψ_w, 1] and D_c = diag(ν_c, τ)."""
    C, N = T.shape
    M = Psi_w.shape[1]
    Xt = jnp.concatenate([Psi_w, jnp.ones((N, 1), Psi_w.dtype)], axis=1)  # (N, M+1)
    sd = jnp.sqrt(jnp.concatenate([nu, jnp.full((C, 1), tau)], axis=1))  # (C, M+1)
    Wt = Xt[None, :, :] / jnp.sqrt(V)[:, :, None]  # (C, N, M+1)
    G = jnp.einsum("cni,cnj->cij", Wt, Wt)  # X̃ᵀ Λ⁻¹ X̃
    B = jnp.eye(M + 1) + sd[:, :, None] * G * sd[:, None, :]
    return Wt, sd, B


def ab_weight_space_params(Psi_w, T, V, nu, tau):
    """Mean ``(C, M+1)`` and covariance ``(C, M+1, M+1)`` of β_c = [a_c; b_c] | w, T, V, ν of
    the landmark model (docs/math.md §16.2) in weight space: with β_c = D_c^{1/2} γ,
    γ ~ N(B_c⁻¹ D_c^{1/2} X̃ᵀ Λ_c⁻¹ t_c, B_c⁻¹). ``Psi_w: (N, M)`` is the combined kernel
    between the training points and the landmarks; ``T, V: (C, N)``; ``nu: (C, M)``. With
    M = N and Ψ_w = K_w it is the Gaussian of :func:`ab_precision_form`. For tests (an
    explicit inverse); the sampler is :func:`sample_ab_weight_space`."""
    Wt, sd, B = _weight_space_system(Psi_w, T, V, nu, tau)
    Binv = jnp.linalg.inv(B)
    Binv = 0.5 * (Binv + jnp.swapaxes(Binv, 1, 2))
    r = sd * jnp.einsum("cni,cn->ci", Wt, T / jnp.sqrt(V))
    mean = sd * jnp.einsum("cij,cj->ci", Binv, r)
    cov = sd[:, :, None] * Binv * sd[:, None, :]
    return mean, cov


def sample_ab_weight_space(key, Psi_w, T, V, nu, tau):
    """Draw (a, b) of the landmark model (docs/math.md §16.2) in weight space, batched over c.

    For each class, with X̃ = [Ψ_w, 1] ``(N, M+1)``, D_c = diag(ν_c, τ) and
    B_c = I + D_c^{1/2} X̃ᵀ Λ_c⁻¹ X̃ D_c^{1/2} (SPD, eigenvalues ≥ 1):
    γ = B_c⁻¹ (D_c^{1/2} X̃ᵀ Λ_c⁻¹ T_c + D_c^{1/2} X̃ᵀ Λ_c^{-1/2} ξ₂ + ξ₁), ξ₁, ξ₂ ~ N(0, I), has
    covariance B_c⁻¹ B_c B_c⁻¹ = B_c⁻¹; β_c = D_c^{1/2} γ. Neither 1/ν nor an N × N system
    appears: one ``(M+1) × (M+1)`` Cholesky factorisation (after a Jacobi scaling, as in
    :func:`sample_ab_tv`) per class, cost O(N·M² + M³).

    Parameters
    ----------
    key : PRNG key
    Psi_w : array (N, M)
        Combined kernel between the N training points and the M landmarks.
    T, V : arrays (C, N)
        Pseudo-targets and noise variances (:func:`sample_ab_tv`).
    nu : array (C, M)
        TPBN variances of the landmark weights.
    tau : float
        Prior variance of b.

    Returns
    -------
    a : array (C, M)
    b : array (C,)
    """
    C, N = T.shape
    M = Psi_w.shape[1]
    Wt, sd, B = _weight_space_system(Psi_w, T, V, nu, tau)
    k1, k2 = jax.random.split(key)
    xi1 = jax.random.normal(k1, (C, M + 1))
    xi2 = jax.random.normal(k2, (C, N))
    rhs = sd * jnp.einsum("cni,cn->ci", Wt, T / jnp.sqrt(V) + xi2) + xi1
    scale = jnp.sqrt(jnp.diagonal(B, axis1=1, axis2=2))  # (C, M+1)
    L = jnp.linalg.cholesky(B / (scale[:, :, None] * scale[:, None, :]))
    gamma = jax.scipy.linalg.cho_solve((L, True), (rhs / scale)[..., None])[..., 0] / scale
    beta = sd * gamma
    return beta[:, :M], beta[:, M]


# --------------------------------------------------------------------------------------------
# TPBN: ν | a, ς and ς | ν  (docs/math.md §3.3)
# --------------------------------------------------------------------------------------------
def nu_params(a, varsigma, alpha_a):
    """GIG(p, ϱ, χ) parameters of ν | a, ς: ``(α_a − 1/2, 2ς, a²)``."""
    return jnp.full_like(a, alpha_a - 0.5), 2.0 * varsigma, a**2


def sample_nu(key, a, varsigma, alpha_a, ig_shortcut=None):
    """Draw ν ``(C, N)``. For α_a = 1 via ν⁻¹ ~ IG(√(2ς)/|a|, 2ς); otherwise by the GIG sampler.

    ``ig_shortcut`` (a Python bool) chooses the route when ``alpha_a`` is a traced value; by
    default it is ``alpha_a == 1``.
    """
    if ig_shortcut is None:
        ig_shortcut = float(alpha_a) == 1.0
    if ig_shortcut:
        mean = jnp.sqrt(2.0 * varsigma) / jnp.maximum(jnp.abs(a), A_FLOOR)
        return 1.0 / inverse_gaussian(key, mean, 2.0 * varsigma)
    p, rho, chi = nu_params(a, varsigma, alpha_a)
    return gig(key, p, rho, chi)


def varsigma_params(nu, alpha_a, beta_a, kappa):
    """Gamma(shape, rate) of ς | ν: ``(α_a + β_a, ν + κ)``."""
    return jnp.full_like(nu, alpha_a + beta_a), nu + kappa


def sample_varsigma(key, nu, alpha_a, beta_a, kappa):
    """Draw ς ``(C, N)`` ~ Gamma(α_a + β_a, rate ν + κ)."""
    shape, rate = varsigma_params(nu, alpha_a, beta_a, kappa)
    return gamma(key, shape) / rate


# --------------------------------------------------------------------------------------------
# e | rest: potential and gradient (docs/math.md §3.4)
# --------------------------------------------------------------------------------------------
def per_kernel_decisions(K, a):
    """Φ with Φ[m] = A K_m: ``K: (P, N, N)``, ``a: (C, N)`` → ``(P, C, N)`` (float64).

    One GEMM of ``K.reshape(P·N, N)`` against ``Aᵀ`` (uses K_m = K_mᵀ); runs in K's dtype, so
    float32 kernel storage keeps the pass over K in float32. The landmark model's block
    ``K: (P, N, M)`` with ``a: (C, M)`` gives Φ[m] = A Ψ_mᵀ, the same product (docs/math.md
    §16.2).
    """
    P, N, M = K.shape
    Phi = (K.reshape(P * N, M) @ a.T.astype(K.dtype)).reshape(P, N, -1)
    return jnp.transpose(Phi, (0, 2, 1)).astype(jnp.float64)


def e_potential(e, Phi, b, delta, lam, eta, weight=None, margin=None):
    """U(e) = Σ_m [e_m − (η_m − 1) log e_m] + Σ (λ + ϖζ)²/(2λ) with f = Σ_m w_m Φ_m + b.

    ``e: (P,)``, ``Phi: (P, C, N)``, ``b: (C,)``, ``delta, lam: (C, N)``, ``eta`` scalar or (P,),
    ``weight (N,)`` optional sample weights ϖ (1 without), ``margin (C, N)`` optional margins m
    (ζ = m − δf; 1 without).
    """
    w = e / jnp.sum(e)
    f = jnp.tensordot(w, Phi, axes=1) + b[:, None]
    zeta = margin_slack(f, delta, weight, margin)
    return jnp.sum(e - (eta - 1.0) * jnp.log(e)) + jnp.sum((lam + zeta) ** 2 / (2.0 * lam))


def e_potential_and_grad(e, Phi, b, delta, lam, eta, weight=None, margin=None):
    """U(e) and ∇_e U in O(PCN) (analytic; docs/math.md §3.4).

    g_m = −⟨R, Φ_m⟩ with R = Δ ⊙ (1 + ζ/λ); ∇U = 1 − (η − 1)/e + (g − (wᵀg) 1)/S. With
    sample weights ϖ, ζ is the scaled slack ϖζ and R = ϖ Δ ⊙ (1 + ϖζ/λ). Margins m change
    only ζ = m − δf (∂ζ/∂f = −δ still), so R keeps its form.

    Returns
    -------
    U : scalar
    grad : array (P,)
    """
    S = jnp.sum(e)
    w = e / S
    f = jnp.tensordot(w, Phi, axes=1) + b[:, None]
    zeta = margin_slack(f, delta, weight, margin)
    U = jnp.sum(e - (eta - 1.0) * jnp.log(e)) + jnp.sum((lam + zeta) ** 2 / (2.0 * lam))
    R = delta * (1.0 + zeta / lam)
    if weight is not None:
        R = weight * R
    g = -jnp.tensordot(Phi, R, axes=([1, 2], [0, 1]))
    grad = 1.0 - (eta - 1.0) / e + (g - jnp.dot(w, g)) / S
    return U, grad


def sample_scale(key, e, eta):
    """Exact scale refresh e ← (e/Σe)·S', S' ~ Gamma(Σ_m η_m, 1); w is unchanged.

    docs/math.md §2.1, §4.3.
    """
    P = e.shape[0]
    total = jnp.sum(jnp.broadcast_to(eta, (P,)))
    return e / jnp.sum(e) * gamma(key, total)
