"""The collapsed kernel-weight target: w | λ, ν, a_I with (a_A, b) integrated out.

Why: given (a, b, λ) the kernel weights are pinned down very tightly (Var(w | a, b, λ) is
1e-4…0.02 of Var(w)), so any move on w | a, b, λ mixes slowly. Integrating the sample weights
out removes that coupling.

Model (pseudo-observations T = δ(1 + λ), V = λ): T_c ~ N(f_c, diag V_c), f_c = K_w a_c + b_c 1,
a_c ~ N(0, diag ν_c), b_c ~ N(0, τ). Split the training points of class c into an *active* set
A_c — the ``n_active`` largest ν_ci — and the rest I_c. The active set depends only on ν,
which the move conditions on, so integrating out (a_A, b) for any such choice leaves an exact
target:

    T_c − K_w a_{I,c} ~ N(0, Σ_c(w)),   Σ_c(w) = diag V_c + U_c U_cᵀ,
    U_c(w) = [K_w[:, A_c] diag(√ν_{A_c}),  √τ 1]                         (N × (s + 1)),

with K_w a_{I,c} = Σ_m w_m (Φ_m − Φ^A_m)_c linear in w. With W = V^{-1/2} U, r = V^{-1/2} y
and G = I + WᵀW = L Lᵀ (Woodbury and the determinant lemma),

    yᵀ Σ⁻¹ y = ‖r − W β‖² + ‖β‖²,   β = G⁻¹ Wᵀ r      (a sum of squares: no cancellation),
    log |Σ| = Σ log V + 2 Σ log diag L,

so one evaluation costs O(C (P N s + N s² + s³)). When s = N (small problems) all of a is
integrated out. The sweep follows a move on this target by the exact draw of (a, b) | w, λ, ν,
which makes the pair a valid partially collapsed Gibbs step (van Dyk & Park 2008).

Shapes: P kernels, C problems, N points, s = ``n_active``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesmkl.sampler.simplex import LARGE_P

__all__ = [
    "FAST_CONTRACTION_MIN_P",
    "CollapsedData",
    "collapsed_log_lik",
    "collapsed_setup",
    "n_active_for",
    "uses_fast_contraction",
]

#: Upper bound on P·C·N·s, the number of gathered kernel entries (float64: 8 bytes each, held
#: twice: in the layout of the value's contraction and in that of the gradient's).
MAX_GATHERED = 2**25
#: From this many kernels on, the contractions over the kernels take the fast forms of
#: :func:`_contract`. The autodiff transpose of Σ_p w_p X_p, the contraction
#: "cns,pcns->p" that XLA emits for ∇_w, ran 5–28× slower than the same sum written
#: "pcns,cns->p" (measured at N = 145: 3.0 vs 0.6 ms at P = 800, 736 vs 25 ms at P = 8,000;
#: 12 per sweep), and the einsum "pcns,cs->pcn" of :func:`collapsed_setup` 13× slower than a
#: product and sum (1.30 vs 0.10 s at P = 8,000). The fast forms add in another order, so
#: they change the last bits; below this P the sampler keeps the old forms, bit for bit
#: (:data:`bayesmkl.sampler.simplex.LARGE_P`).
FAST_CONTRACTION_MIN_P = LARGE_P


def uses_fast_contraction(P: int, fast: bool | None = None) -> bool:
    """Whether the collapsed target of P kernels takes the fast contractions (``fast`` forces
    the answer; ``None``: from :data:`FAST_CONTRACTION_MIN_P` on)."""
    return P >= FAST_CONTRACTION_MIN_P if fast is None else bool(fast)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _contract_fast(spec, w, X):
    return jnp.einsum(spec, w, X)


def _contract_fast_fwd(spec, w, X):
    return jnp.einsum(spec, w, X), X


def _contract_fast_bwd(spec, X, g):
    # ∂/∂w_p of Σ_p w_p X_p · ḡ = ⟨X_p, ḡ⟩: X first, so that XLA runs a matrix–vector product
    # over X's rows; X is data here (the kernels), never differentiated
    axes = "".join(c for c in spec.split("->")[0].split(",")[1] if c != "p")
    return jnp.einsum(f"p{axes},{axes}->p", X, g), None


_contract_fast.defvjp(_contract_fast_fwd, _contract_fast_bwd)


def _contract(spec, w, X, fast: bool):
    """Σ_p w_p X_p by ``jnp.einsum(spec, w, X)``; with ``fast`` its gradient in w is
    :func:`_contract_fast`'s (X must not be differentiated)."""
    return _contract_fast(spec, w, X) if fast else jnp.einsum(spec, w, X)


class CollapsedData(NamedTuple):
    """What the collapsed target needs, gathered once per sweep.

    Attributes
    ----------
    K_A : array (P, C, N, s)
        Kernel columns of the active points of each class.
    sqrt_nu_A : array (C, s)
        √ν of the active points.
    Phi_I : array (P, C, N)
        Per-kernel contributions of the inactive sample weights, K_m a_{I,c}.
    K_A_t, Phi_I_t : arrays (C, N, s, P) and (C, N, P)
        ``K_A`` and ``Phi_I`` with the kernel axis last: the layout the gradient's contraction
        reads them in. Made once here, so that the leapfrog steps do not transpose ``K_A``
        (P·C·N·s float64) at every gradient evaluation, as the compiled program otherwise does.
        ``None`` from :data:`FAST_CONTRACTION_MIN_P` kernels on, whose fast contractions read
        ``K_A`` itself.
    """

    K_A: jax.Array
    sqrt_nu_A: jax.Array
    Phi_I: jax.Array
    K_A_t: jax.Array | None = None
    Phi_I_t: jax.Array | None = None


def n_active_for(P: int, C: int, N: int, requested: int, M: int | None = None) -> int:
    """The active-set size actually used: ``min(requested, M)`` (M the number of sample
    weights per class: N, or the landmarks' number), shrunk so that the gathered kernel
    columns stay below ``MAX_GATHERED`` entries; 0 means the collapsed move is off."""
    s = min(int(requested), N if M is None else int(M))
    cap = MAX_GATHERED // max(P * C * N, 1)
    return int(min(s, cap))


def collapsed_setup(K, a, nu, Phi, n_active: int, *, fast: bool | None = None) -> CollapsedData:
    """Choose the active sets (top-``n_active`` ν per class) and gather their kernel columns.

    ``K: (P, N, N)``, ``a, nu: (C, N)``, ``Phi: (P, C, N)`` (= A K_m for the current a). The
    landmark model's ``K: (P, N, M)`` with ``a, nu: (C, M)`` works unchanged: the active
    set is among the M landmark weights (docs/math.md §16.2). ``fast``:
    :func:`uses_fast_contraction`.
    """
    _, idx = jax.lax.top_k(nu, n_active)  # (C, s)
    # top_k's indices are in range, so "clip" changes nothing; the default ("fill") would test
    # every gathered entry and cost a pass over them.
    K_A = jnp.take(K, idx, axis=2, mode="clip")  # (P, N, C, s)
    K_A = jnp.transpose(K_A, (0, 2, 1, 3)).astype(jnp.float64)  # (P, C, N, s)
    a_A = jnp.take_along_axis(a, idx, axis=1)
    nu_A = jnp.take_along_axis(nu, idx, axis=1)
    if uses_fast_contraction(K.shape[0], fast):
        Phi_A = jnp.sum(K_A * a_A[None, :, None, :], axis=-1)
        # the barrier keeps XLA from fusing the gather into the move's 12 evaluations: one
        # jitted setup + HMC took 3.65 s at P = 8,000 against 0.80 + 0.81 s apart, 2.35 s with it
        return jax.lax.optimization_barrier(CollapsedData(K_A, jnp.sqrt(nu_A), Phi - Phi_A))
    # below FAST_CONTRACTION_MIN_P: the old arithmetic, bit for bit
    Phi_A = jnp.einsum("pcns,cs->pcn", K_A, a_A)
    Phi_I = Phi - Phi_A
    # Materialise K_A once: without the barrier the compiler re-derives it from the gather, with
    # a transposing copy, for each of its consumers (the first gradient, the leapfrog loop, the
    # last value, the transposed layout).
    K_A = jax.lax.optimization_barrier(K_A)
    return CollapsedData(
        K_A, jnp.sqrt(nu_A), Phi_I, jnp.moveaxis(K_A, 0, -1), jnp.moveaxis(Phi_I, 0, -1)
    )


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _w_contract(subscripts, w, X, X_t):
    """``einsum(subscripts, w, X)``, Σ_p w_p X[p, …]; its gradient in w reads ``X_t``, X with
    the kernel axis last (X and X_t are data: they get no cotangent).

    The value is the einsum automatic differentiation would see; the gradient is the same
    contraction as its transpose rule's, ``Σ_… ct[…] X[p, …]``, read from ``X_t`` in the layout
    that contraction wants, instead of a transposed copy of X made at every call.
    """
    return jnp.einsum(subscripts, w, X)


def _w_contract_fwd(subscripts, w, X, X_t):
    return jnp.einsum(subscripts, w, X), X_t


def _w_contract_bwd(subscripts, X_t, ct):
    grad_w = jax.lax.dot_general(ct, X_t, ((tuple(range(ct.ndim)),) * 2, ((), ())))
    return grad_w, None, None


_w_contract.defvjp(_w_contract_fwd, _w_contract_bwd)


def collapsed_log_lik(w, data: CollapsedData, T, V, tau, *, fast: bool | None = None):
    """log p(T | w, λ, ν, a_I) with (a_A, b) integrated out, up to a w-free constant.

    ``w: (P,)``, ``T, V: (C, N)``, ``tau`` scalar; ``fast``: :func:`uses_fast_contraction`
    (the same value; the gradient in w adds in another order). Returns a scalar.
    """
    fast = uses_fast_contraction(w.shape[0], fast)
    if fast or data.K_A_t is None:
        KwA = _contract("p,pcns->cns", w, data.K_A, fast)  # (C, N, s)
        y = T - _contract("p,pcn->cn", w, data.Phi_I, fast)
    else:  # the gradient reads the stored kernel-last layouts: the same arithmetic, no copies
        KwA = _w_contract("p,pcns->cns", w, data.K_A, data.K_A_t)  # (C, N, s)
        y = T - _w_contract("p,pcn->cn", w, data.Phi_I, data.Phi_I_t)
    C, N, _ = KwA.shape
    U = jnp.concatenate(
        [KwA * data.sqrt_nu_A[:, None, :], jnp.full((C, N, 1), jnp.sqrt(tau))], axis=-1
    )
    sv = jnp.sqrt(V)
    W = U / sv[..., None]
    r = y / sv
    G = jnp.eye(W.shape[-1]) + jnp.einsum("cni,cnj->cij", W, W)
    L = jnp.linalg.cholesky(G)
    Wr = jnp.einsum("cni,cn->ci", W, r)
    beta = jax.scipy.linalg.cho_solve((L, True), Wr[..., None])[..., 0]
    resid = r - jnp.einsum("cni,ci->cn", W, beta)
    quad = jnp.sum(resid**2) + jnp.sum(beta**2)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))
    return -0.5 * (quad + logdet)


def collapsed_potential_and_grad(data: CollapsedData, T, V, tau, eta, *, fast=None):
    """``pg(e) -> (U(e), ∇U(e))`` for the collapsed conditional of e (Gamma(η, 1) prior on e).

    U(e) = Σ_m [e_m − (η_m − 1) log e_m] − log p(T | w = e/Σe, …), the form every kernel-weight
    move of :mod:`bayesmkl.sampler.moves` takes.
    """

    def U(e):
        w = e / jnp.sum(e)
        prior = jnp.sum(e - (eta - 1.0) * jnp.log(e))
        return prior - collapsed_log_lik(w, data, T, V, tau, fast=fast)

    return jax.value_and_grad(U)
