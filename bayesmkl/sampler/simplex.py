"""Exact draws of the kernel weights w | a, b, λ on the simplex by pairwise coordinate updates.

Given the other blocks, the augmented pseudo-likelihood is Gaussian in w (docs/math.md §3.4,
quadratic form): with pseudo-observations T (targets) and V (noise variances),

    U_lik(w) = Σ_ci (T_ci − b_c − Σ_m w_m Φ_mci)² / (2 V_ci) = ½ wᵀ M w − vᵀ w + const,
    M = Σ_ci Φ_·ci Φ_·ciᵀ / V_ci,   v = Σ_ci Φ_·ci (T_ci − b_c) / V_ci,   g = M w − v,

where T = δ ⊙ (1 + λ) and V = λ for the unweighted model (so (T − f)²/V = (λ + ζ)²/λ). The
prior is Dir(η). Moving along the edge direction e_j − e_k keeps w on the simplex; with
c = w_j + w_k, x = w_j the conditional of x is

    p(x) ∝ exp{−q (x − μ)² / 2} · [x (c − x)]^{η−1} on [0, c],
    q = M_jj + M_kk − 2 M_jk,   μ = w_j − (g_j − g_k) / q,

a normal truncated to [0, c] when η = 1 (drawn exactly, :func:`truncated_normal`) and otherwise
drawn by slice sampling with shrinkage from the whole segment (Neal 2003, exact). Each update is
an exact Gibbs step, so the sweep has no step size and nothing to tune. After the w-updates the
scale is drawn exactly, e = w · Gamma(Ση, 1) (docs/math.md §2.1).

Cost: M costs O(P² C N) once per sweep (one GEMM); each pair update costs O(P) for the
gradient update g ← g + s (M_·j − M_·k). From P = :data:`RESIDUAL_MIN_P` kernels on the pair
updates run without M (:func:`pairwise_gibbs_residual`): they carry the scaled residual
r = (T − b − Σ_m w_m Φ_m)/√V instead of g, so each costs O(C N) and the sweep O(P C N) in all;
the conditionals and the draws are the same, the arithmetic differs in the last bits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr, ndtri
from jax.scipy.stats import norm

from bayesmkl.sampler.random import gamma

__all__ = [
    "CAP_SLICE_W",
    "CAP_TRUNCNORM",
    "LARGE_P",
    "REJECT_MAX_ROUNDS",
    "SLICE_MAX_STEPS",
    "PAIR_PATH",
    "PAIR_PATHS",
    "RESIDUAL_MIN_P",
    "pairwise_gibbs",
    "pairwise_gibbs_residual",
    "quadratic_form",
    "sample_w_exact",
    "truncated_normal",
    "uses_residual_path",
]

_EDGE = 1e-15  # draws are kept inside [c·_EDGE, c·(1 − _EDGE)] so that log w stays finite

#: Most proposals of one slice update of a weight (:func:`_slice_segment`). Each rejected
#: proposal shrinks the bracket by a uniform factor (E log = −1), so the bracket reaches the
#: stopping width 1e-15·c after about 35 proposals; 1000 are never needed by a finite target.
SLICE_MAX_STEPS = 1000
#: Most rounds of the uniform-rejection route of :func:`truncated_normal` (acceptance ≥ e^{−1/2}
#: per round, so 1000 rejections have probability below 0.4^1000).
REJECT_MAX_ROUNDS = 1000
#: Bits of the ``capped`` flag: which loop stopped at its cap (the sweep's ``State.capped``).
CAP_SLICE_W = 1
CAP_TRUNCNORM = 2

#: Routes of the pair updates of :func:`sample_w_exact`: ``"gram"`` forms M = Σ Φ Φᵀ/V once per
#: sweep (O(P² C N)) and updates the gradient in O(P) per pair (:func:`pairwise_gibbs`);
#: ``"residual"`` never forms M and updates the residual in O(C N) per pair
#: (:func:`pairwise_gibbs_residual`); ``"auto"`` picks by :data:`RESIDUAL_MIN_P`.
PAIR_PATHS = ("auto", "gram", "residual")
#: The route :func:`sample_w_exact` takes when not told (read when it is traced).
PAIR_PATH = "auto"
#: From this many kernels on the sampler takes its large-P forms, each of which adds
#: in another order than before and so changes the last bits: the pair updates without M
#: (``"auto"`` route of :func:`sample_w_exact`), the fast contractions of the collapsed target
#: (:data:`bayesmkl.sampler.collapsed.FAST_CONTRACTION_MIN_P`) and the identity mass without
#: P × P products (:func:`bayesmkl.sampler.moves.exact_hmc_move`). Below it the sampler keeps
#: its arithmetic bit for bit (the reference draws of tests/behaviour use small P). Measured
#: for the pair updates (4P of them, η = 2 and 1, one chain and four vmapped, 2 shared cores):
#: the two routes cost the same within noise up to P = 128 (M is a fast GEMM there and O(P)
#: ≈ O(C N) per pair), and from P = 256 on the residual route was faster, 1.7–16× at
#: (C, N) = (1, 24), (3, 24), (3, 60), (1, 145) for P = 256…1600; only at C·N = 3,000 it was
#: still 20 % slower at P = 256 and 1.8× faster at 512.
LARGE_P = 256
#: Smallest P for which ``"auto"`` takes the residual route.
RESIDUAL_MIN_P = LARGE_P


def quadratic_form(Phi, b, T, V):
    """``M (P, P)`` and ``v (P,)`` of U_lik(w) = ½ wᵀMw − vᵀw + const.

    Parameters
    ----------
    Phi : array (P, C, N)
        Per-kernel decision contributions Φ_m = A K_m.
    b : array (C,)
    T, V : arrays (C, N)
        Pseudo-targets and pseudo-noise variances (T = δ(1 + λ), V = λ without weights).
    """
    P = Phi.shape[0]
    F = Phi.reshape(P, -1)
    Fs = F / jnp.sqrt(V).reshape(-1)
    M = Fs @ Fs.T
    v = F @ ((T - b[:, None]) / V).reshape(-1)
    return 0.5 * (M + M.T), v


# --------------------------------------------------------------------------------------------
# Truncated normal on [lo, hi]
# --------------------------------------------------------------------------------------------
def _inv_log_ndtr(logp):
    """x with log Φ(x) = ``logp`` (≤ 0), accurate far into the lower tail.

    Start from ``ndtri(exp(logp))`` (or the tail asymptote −√(−2 logp) where exp underflows) and
    polish with Newton steps on log Φ(x) − logp, whose derivative is φ(x)/Φ(x).
    """
    x = jnp.where(logp > -700.0, ndtri(jnp.exp(jnp.maximum(logp, -700.0))), -jnp.sqrt(-2 * logp))
    for _ in range(4):
        lx = log_ndtr(x)
        step = (lx - logp) * jnp.exp(lx - norm.logpdf(x))
        x = jnp.where(logp < -1.0, x - step, x)
    return x


def _log_diff_exp(a, b):
    """log(exp(a) − exp(b)) for a ≥ b."""
    return a + jnp.log1p(-jnp.exp(b - a))


def truncated_normal(key, mean, sd, lo, hi, *, return_capped=False):
    """One exact draw of N(mean, sd²) truncated to ``[lo, hi]`` (scalars; jit/vmap-able).

    Standardise to [α, β]; reflect so that the interval's midpoint is ≤ 0 (the lower tail, where
    log Φ is accurate); then invert the CDF in log space. When the interval is so narrow that the
    CDF difference would lose precision ((β − α)·max(|α|, |β|) < 1), draw from the uniform on the
    interval and accept with the normal density ratio instead (acceptance ≥ e^{−1/2}), at most
    :data:`REJECT_MAX_ROUNDS` rounds: a draw that hits the cap is NaN, never a silent value.
    ``return_capped=True`` also returns whether it did (a bool).
    """
    a = (lo - mean) / sd
    bt = (hi - mean) / sd
    flip = a + bt > 0
    a, bt = jnp.where(flip, -bt, a), jnp.where(flip, -a, bt)
    k_u, k_rej = jax.random.split(key)
    u = jax.random.uniform(k_u, dtype=jnp.float64)
    la, lb = log_ndtr(a), log_ndtr(bt)
    # log(u Φ(β) + (1 − u) Φ(α))
    lp = lb + jnp.log(u + (1.0 - u) * jnp.exp(la - lb))
    z_cdf = jnp.clip(_inv_log_ndtr(lp), a, bt)

    narrow = (bt - a) * jnp.maximum(jnp.abs(a), jnp.abs(bt)) < 1.0
    z_min = jnp.clip(0.0, a, bt)  # point of the interval closest to the mode

    def reject_cond(c):
        return ~c[1] & (c[3] < REJECT_MAX_ROUNDS)

    def reject_body(c):
        k, _, _, n = c
        k, k1, k2 = jax.random.split(k, 3)
        z = a + (bt - a) * jax.random.uniform(k1, dtype=jnp.float64)
        # z_min² − z² as a product: no cancellation far in the tails (|z| ~ 1e9 and beyond)
        ok = jnp.log(jax.random.uniform(k2, dtype=jnp.float64)) < 0.5 * (z_min - z) * (z_min + z)
        return k, ok, z, n + 1

    init = (k_rej, ~narrow, jnp.asarray(0.0, jnp.float64), jnp.zeros((), jnp.int32))
    _, accepted, z_rej, _ = jax.lax.while_loop(reject_cond, reject_body, init)
    capped = narrow & ~accepted
    z = jnp.where(narrow, jnp.where(capped, jnp.nan, z_rej), z_cdf)
    z = jnp.where(flip, -z, z)
    x = mean + sd * z
    return (x, capped) if return_capped else x


# --------------------------------------------------------------------------------------------
# Slice sampling on [0, c] for η ≠ 1
# --------------------------------------------------------------------------------------------
def _slice_segment(key, x0, c, logpdf, *, return_capped=False):
    """One exact slice-sampling update of x ∈ (0, c) for an unnormalised ``logpdf`` (Neal 2003).

    The initial bracket is the whole segment, so no stepping out is needed; shrinkage towards
    x0 ends it (at the latest when the bracket has shrunk to rounding width, where x0 is the only
    point left). Two guards make it end in every case, with NaN rather than a silent value: a
    non-finite ``x0``, ``c`` or slice level (NaN input) returns NaN at once, and an update that
    has not ended after :data:`SLICE_MAX_STEPS` proposals returns NaN. ``return_capped=True``
    also returns whether the cap was hit (a bool).
    """
    k_y, k_loop = jax.random.split(key)
    log_y = logpdf(x0) + jnp.log(jax.random.uniform(k_y, dtype=jnp.float64))
    bad = ~jnp.isfinite(x0) | ~jnp.isfinite(c) | jnp.isnan(log_y)

    def cond(s):
        return ~s[4] & (s[5] < SLICE_MAX_STEPS)

    def body(s):
        k, lo, hi, _, _, n = s
        k, k1 = jax.random.split(k)
        x = lo + (hi - lo) * jax.random.uniform(k1, dtype=jnp.float64)
        ok = logpdf(x) >= log_y
        lo = jnp.where(~ok & (x < x0), x, lo)
        hi = jnp.where(~ok & (x >= x0), x, hi)
        # a bracket shrunk to rounding width can only return x0 itself
        done = ok | (hi - lo <= 1e-15 * c)
        return k, lo, hi, jnp.where(ok, x, x0), done, n + 1

    init = (k_loop, jnp.zeros_like(x0), c, x0, bad, jnp.zeros((), jnp.int32))
    _, _, _, x, done, _ = jax.lax.while_loop(cond, body, init)
    capped = ~done
    x = jnp.where(bad | capped, jnp.nan, x)
    return (x, capped) if return_capped else x


# --------------------------------------------------------------------------------------------
# The sweep over pairs
# --------------------------------------------------------------------------------------------
def pairwise_gibbs(
    key, w, M, v, eta, n_pairs: int, *, eta_is_one: bool = True, return_capped: bool = False
):
    """``n_pairs`` exact pairwise Gibbs updates of w on the simplex.

    Parameters
    ----------
    key : PRNG key
    w : array (P,)
        Current weights (positive, summing to 1).
    M, v : arrays (P, P), (P,)
        Quadratic form of the likelihood (:func:`quadratic_form`).
    eta : array (P,)
        Dirichlet concentration.
    n_pairs : int
        Number of pair updates (static). Pairs (j, k), j ≠ k, are drawn uniformly at random,
        independently of the state, so each update leaves the conditional invariant.
    eta_is_one : bool
        Static route: truncated-normal draws (η ≡ 1) or slice sampling (any η).
    return_capped : bool
        Also return an int32 of the ``CAP_*`` bits of the loops that hit their cap (their
        draws are NaN, so w is NaN from there on).

    Returns
    -------
    array (P,)
    """
    P = w.shape[0]
    none = jnp.zeros((), jnp.int32)
    if P == 1:
        return (w, none) if return_capped else w
    g0 = M @ w - v

    def body(i, carry):
        w, g, capped = carry
        j, k, k_x = _pick_pair(key, i, P)
        c = w[j] + w[k]
        q = jnp.maximum(M[j, j] + M[k, k] - 2.0 * M[j, k], 0.0)
        wj = w[j]
        x, hit = _edge_draw(k_x, wj, c, q, g[j] - g[k], eta[j], eta[k], eta_is_one)
        s = x - wj
        w = w.at[j].set(x).at[k].set(c - x)
        g = g + s * (M[:, j] - M[:, k])
        return w, g, capped | hit

    w, _, capped = jax.lax.fori_loop(0, n_pairs, body, (w, g0, none))
    return (w, capped) if return_capped else w


def pairwise_gibbs_residual(
    key, w, Phi, b, T, V, eta, n_pairs: int, *, eta_is_one: bool = True,
    return_capped: bool = False,
):  # fmt: skip
    """The same ``n_pairs`` exact pairwise Gibbs updates as :func:`pairwise_gibbs`, without M.

    It carries the scaled residual r = (T − b − Σ_m w_m Φ_m)/√V (C, N) instead of the
    gradient g = Mw − v: with D_m = Φ_m/√V and d = D_j − D_k, the edge (j, k) has
    q = ‖d‖² (= M_jj + M_kk − 2M_jk) and g_j − g_k = −⟨d, r⟩, and after the draw
    r ← r − (x − w_j) d. Each update costs O(C N) instead of O(P), and nothing costs O(P²):
    the sweep is O(P C N) in all, against O(P² C N) for M. Pairs, uniforms and the draw
    (:func:`_edge_draw`) are those of :func:`pairwise_gibbs`, so with the same key both give
    the same w up to rounding (the arithmetic of q and g_j − g_k differs in the last bits).

    Parameters
    ----------
    key : PRNG key
    w : array (P,)
        Current weights (positive, summing to 1).
    Phi : array (P, C, N)
        Per-kernel decision contributions Φ_m = A K_m.
    b : array (C,)
    T, V : arrays (C, N)
        Pseudo-targets and pseudo-noise variances.
    eta : array (P,)
        Dirichlet concentration.
    n_pairs : int
        Number of pair updates (static).
    eta_is_one : bool
        Static route: truncated-normal draws (η ≡ 1) or slice sampling (any η).
    return_capped : bool
        Also return the ``CAP_*`` bits, as :func:`pairwise_gibbs` does.

    Returns
    -------
    array (P,)
    """
    P = w.shape[0]
    none = jnp.zeros((), jnp.int32)
    if P == 1:
        return (w, none) if return_capped else w
    D, r0 = _scaled_residual(w, Phi, b, T, V)
    w, _, capped = _residual_sweep(key, w, D, r0, eta, n_pairs, eta_is_one)
    return (w, capped) if return_capped else w


def _scaled_residual(w, Phi, b, T, V):
    """D = Φ/√V (P, C, N) and r = (T − b − Σ_m w_m Φ_m)/√V (C, N)."""
    sv = jnp.sqrt(V)
    D = Phi / sv
    return D, (T - b[:, None]) / sv - jnp.einsum("p,pcn->cn", w, D)


def _residual_edge(D, r, j, k):
    """d = D_j − D_k, and the edge's curvature q = ‖d‖² and slope g_j − g_k = −⟨d, r⟩."""
    d = D[j] - D[k]
    return d, jnp.sum(d * d), -jnp.sum(d * r)


#: Bytes of edge directions d = D_j − D_k that :func:`_residual_sweep` gathers at once.
_EDGE_BLOCK_BYTES = 1 << 20


def _residual_sweep(key, w, D, r, eta, n_pairs, eta_is_one):
    """The loop of :func:`pairwise_gibbs_residual`; returns ``(w, r, capped)``, r the carried
    residual of the returned w.

    D is fixed during the updates, so the pairs and their directions d = D_j − D_k are gathered
    ahead of the sequential loop, in blocks of about :data:`_EDGE_BLOCK_BYTES`: one vectorised
    gather per block instead of two random rows of D per update (at P = 8,000 kernels D does
    not fit in the cache, and the loop waited on those reads); the loop then reads the
    directions in order.
    """
    P = w.shape[0]
    jj, kk, kx = jax.vmap(lambda i: _pick_pair(key, i, P))(jnp.arange(n_pairs))
    row_bytes = max(1, D[0].size * D.dtype.itemsize)
    block = int(max(1, min(n_pairs, _EDGE_BLOCK_BYTES // row_bytes)))

    def updates(start, size, carry):
        j_b = jax.lax.dynamic_slice_in_dim(jj, start, size)
        k_b = jax.lax.dynamic_slice_in_dim(kk, start, size)
        x_b = jax.lax.dynamic_slice_in_dim(kx, start, size)
        d_b = D[j_b] - D[k_b]  # (size, C, N)

        def body(i, carry):
            w, r, capped = carry
            j, k, d = j_b[i], k_b[i], d_b[i]
            # the barrier makes XLA read w_j, w_k before it updates w in place; without it, w
            # (P,) was copied at every update: O(P) per pair, 5 µs at P = 8,000 against 0.01
            wj, wk, w = jax.lax.optimization_barrier((w[j], w[k], w))
            c = wj + wk
            q, dg = jnp.sum(d * d), -jnp.sum(d * r)
            x, hit = _edge_draw(x_b[i], wj, c, q, dg, eta[j], eta[k], eta_is_one)
            w = w.at[j].set(x).at[k].set(c - x)
            r = r - (x - wj) * d
            return w, r, capped | hit

        return jax.lax.fori_loop(0, size, body, carry)

    n_full, rest = divmod(n_pairs, block)
    carry = (w, r, jnp.zeros((), jnp.int32))
    if n_full:
        carry = jax.lax.fori_loop(0, n_full, lambda b, c: updates(b * block, block, c), carry)
    if rest:
        carry = updates(n_full * block, rest, carry)
    return carry


def _pick_pair(key, i, P):
    """The pair (j, k), j ≠ k uniform, and the draw's key of update ``i``: a function of
    ``key`` and ``i`` only, so both routes update the same pairs with the same uniforms."""
    k_i = jax.random.fold_in(key, i)
    k_j, k_k, k_x = jax.random.split(k_i, 3)
    j = jax.random.randint(k_j, (), 0, P)
    k = (j + jax.random.randint(k_k, (), 1, P)) % P
    return j, k, k_x


def _edge_draw(k_x, wj, c, q, dg, eta_j, eta_k, eta_is_one):
    """One exact draw of x = w_j on [0, c] from p(x) ∝ exp{−dg s − q s²/2} x^{η_j−1}
    (c − x)^{η_k−1}, s = x − w_j (``dg`` = g_j − g_k, ``q`` ≥ 0 the curvature along
    e_j − e_k), kept inside [c·_EDGE, c·(1 − _EDGE)]. Returns ``(x, CAP_* bits)``."""
    logpdf = _edge_logpdf(wj, dg, q, eta_j, eta_k, c)

    def slice_draw():
        x, hit = _slice_segment(k_x, wj, c, logpdf, return_capped=True)
        return x, jnp.where(hit, jnp.int32(CAP_SLICE_W), jnp.int32(0))

    if eta_is_one:
        # q = 0 (identical kernels along this edge): the conditional is exponential-linear
        # (uniform when g_j = g_k); slice sampling covers that case exactly.
        def tn_draw():
            qq = jnp.where(q > 0, q, 1.0)
            x, hit = truncated_normal(
                k_x, wj - dg / qq, 1.0 / jnp.sqrt(qq), 0.0, c, return_capped=True
            )
            return x, jnp.where(hit, jnp.int32(CAP_TRUNCNORM), jnp.int32(0))

        x, hit = jax.lax.cond(q > 0, tn_draw, slice_draw)
    else:
        x, hit = slice_draw()
    return jnp.clip(x, c * _EDGE, c * (1.0 - _EDGE)), hit


def _edge_logpdf(wj, dg, q, eta_j, eta_k, c):
    """log p(x) along the edge e_j − e_k, up to a constant, for x ∈ (0, c)."""

    def logpdf(x):
        s = x - wj
        return (
            -(dg * s + 0.5 * q * s**2) + (eta_j - 1.0) * jnp.log(x) + (eta_k - 1.0) * jnp.log(c - x)
        )

    return logpdf


def uses_residual_path(P: int, path: str | None = None) -> bool:
    """Whether :func:`sample_w_exact` runs :func:`pairwise_gibbs_residual` (no M) for P
    kernels: ``path`` (default :data:`PAIR_PATH`) ``"gram"`` never, ``"residual"`` always,
    ``"auto"`` from P ≥ :data:`RESIDUAL_MIN_P` on."""
    path = PAIR_PATH if path is None else path
    if path not in PAIR_PATHS:
        raise ValueError(f"pair path must be one of {PAIR_PATHS}; got {path!r}")
    return path == "residual" or (path == "auto" and P >= RESIDUAL_MIN_P)


def sample_w_exact(
    key, e, Phi, b, T, V, eta, n_pairs: int, *, eta_is_one: bool = True, return_capped=False,
    path: str | None = None,
):  # fmt: skip
    """Exact kernel-weight update: pairwise Gibbs on w, then e = w · Gamma(Ση, 1).

    ``e: (P,)``, ``Phi: (P, C, N)``, ``b: (C,)``, ``T, V: (C, N)``, ``eta: (P,)``. Returns the
    new ``e (P,)``, and with ``return_capped=True`` the ``CAP_*`` bits of :func:`pairwise_gibbs`.
    ``path`` (static; default :data:`PAIR_PATH`, read when traced) picks the route of the pair
    updates (:func:`uses_residual_path`): both draw from the same conditionals and agree to
    rounding, not bit for bit.
    """
    k_w, k_s = jax.random.split(key)
    w0 = e / jnp.sum(e)
    if uses_residual_path(e.shape[0], path):
        w, capped = pairwise_gibbs_residual(
            k_w, w0, Phi, b, T, V, eta, n_pairs, eta_is_one=eta_is_one, return_capped=True
        )
    else:
        M, v = quadratic_form(Phi, b, T, V)
        w, capped = pairwise_gibbs(
            k_w, w0, M, v, eta, n_pairs, eta_is_one=eta_is_one, return_capped=True
        )
    e = w * gamma(k_s, jnp.sum(eta))
    return (e, capped) if return_capped else e
