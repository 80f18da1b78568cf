"""Prediction from BM3KL posterior draws (docs/math.md §6).

Per draw t, f^(t)(x*) = a^(t) Σ_m w_m^(t) k_m(x*) + b^(t). The posterior predictive probability
(P1) averages, over draws, the normalised pseudo-likelihood, which is a softmax over classes of
ψ(f_c) (or σ(ψ(f)) for the single binary classifier); ψ is the same as in training (ψ_L for
γ0 = 0, ψ_L' otherwise). ``decision="mean_f"`` instead predicts argmax of the mean decision value
(docs/math.md A4 (c)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.config import with_x64
from bayesmkl.model.likelihood import psi

#: Draws whose decision values :func:`draw_decision_values` computes at once.
DECISION_BATCH = 64
#: Most entries ``batch_size·M·N`` of the weighted kernels a batch of :func:`draw_decision_values`
#: may hold (256 MiB in float64). Above it the decision values go through the per-kernel
#: contributions ``K_m a`` ``(P, M, batch_size·C)`` when there are at most
#: :data:`MAX_PER_KERNEL_CLASSIFIERS` classifiers, else through the weighted kernels of fewer
#: draws at a time: a landmark fit on magic (M = 13,314 training rows, N = 300 landmarks) held
#: 64 × 13,314 × 300 float64 = 2.0 GB per batch there.
MAX_WEIGHTED_KERNEL_ENTRIES = 2**25
#: Most classifiers C for which the per-kernel contributions (one GEMM over all kernels,
#: 2·P·M·N·C flops a draw) cost less than forming each draw's weighted kernel (P·M·N, bound by
#: memory) and multiplying it (2·M·N·C flops).
MAX_PER_KERNEL_CLASSIFIERS = 2


@with_x64
def draw_decision_values(w, a, b, K_test, *, batch_size: int = DECISION_BATCH):
    """Per-draw decision values.

    Parameters
    ----------
    w : array (S, P)
        Kernel weights of S draws.
    a : array (S, C, N)
    b : array (S, C)
    K_test : array (P, M, N)
        Kernel rows between M new points and the N training points.
    batch_size : int
        Draws processed at once. Memory is bounded at ``batch_size·M·N`` values (the weighted
        kernels of a batch). When that is above :data:`MAX_WEIGHTED_KERNEL_ENTRIES`, it is
        bounded at ``P·M·batch_size·C`` (the per-kernel contributions K_m a of a batch, summed
        over m with each draw's weights) for at most :data:`MAX_PER_KERNEL_CLASSIFIERS`
        classifiers, and otherwise the batch is cut to the draws whose weighted kernels fit in
        that bound: the same values up to rounding.

    Returns
    -------
    array (S, M, C)
    """
    P, M, N = K_test.shape
    C = a.shape[1]
    if batch_size * M * N > MAX_WEIGHTED_KERNEL_ENTRIES and C > MAX_PER_KERNEL_CLASSIFIERS:
        batch_size = max(1, MAX_WEIGHTED_KERNEL_ENTRIES // (M * N))
    if batch_size * M * N <= MAX_WEIGHTED_KERNEL_ENTRIES or C > MAX_PER_KERNEL_CLASSIFIERS:
        Kflat = K_test.reshape(P, M * N)

        def one_batch(args):
            wb, ab, bb = args
            Kw = (wb.astype(Kflat.dtype) @ Kflat).reshape(-1, M, N).astype(jnp.float64)
            return jnp.einsum("smn,scn->smc", Kw, ab) + bb[:, None, :]
    else:  # large blocks (landmark fits at their training rows): one GEMM over all kernels
        Krows = K_test.reshape(P * M, N)

        def one_batch(args):
            wb, ab, bb = args
            Phi = Krows @ ab.reshape(-1, N).T.astype(Krows.dtype)  # (P·M, batch·C)
            Phi = Phi.reshape(P, M, -1, C).astype(jnp.float64)
            return jnp.einsum("sp,pmsc->smc", wb, Phi) + bb[:, None, :]

    S = w.shape[0]
    pad = (-S) % batch_size
    padded = [jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]) for x in (w, a, b)]
    batched = [x.reshape((-1, batch_size) + x.shape[1:]) for x in padded]
    F = jax.lax.map(one_batch, tuple(batched))
    return F.reshape((-1, M, a.shape[1]))[:S]


@with_x64
def draw_probabilities(F, gamma0):
    """Per-draw class probabilities ``(S, M, K)`` from decision values ``F: (S, M, C)``.

    C = 1 (single binary classifier): p(class 1) = σ(ψ(f)), K = 2. Otherwise softmax of ψ(f_c).
    """
    scores = psi(F, gamma0)
    if F.shape[-1] == 1:
        p1 = jax.nn.sigmoid(scores[..., 0])
        return jnp.stack([1.0 - p1, p1], axis=-1)
    return jax.nn.softmax(scores, axis=-1)


@with_x64
def draw_log_probabilities(F, gamma0):
    """Per-draw log class probabilities ``(S, M, K)``: the log of :func:`draw_probabilities`.

    Computed as ``log_softmax`` (or ``log σ``), so it stays finite where the probability
    underflows to 0.
    """
    scores = psi(F, gamma0)
    if F.shape[-1] == 1:
        return jnp.stack([jax.nn.log_sigmoid(-scores[..., 0]), jax.nn.log_sigmoid(scores[..., 0])],
                         axis=-1)  # fmt: skip
    return jax.nn.log_softmax(scores, axis=-1)


@with_x64
def predictive_proba(F, gamma0):
    """Posterior predictive probabilities (P1): the mean over draws of :func:`draw_probabilities`.

    ``F: (S, M, C)`` → ``(M, K)``; rows sum to 1.
    """
    return jnp.mean(draw_probabilities(F, gamma0), axis=0)


@with_x64
def mean_decision(F):
    """Posterior mean decision values ``(M, C)`` (the ``decision="mean_f"`` rule)."""
    return jnp.mean(F, axis=0)


def flat_draws(posterior: dict, sites=("w", "a", "b")) -> tuple:
    """The draws of ``sites`` with chains and draws merged: ``w (S, P), a (S, C, N), b (S, C)``
    for the default sites (S = chains · draws, chain-major)."""
    return tuple(posterior[k].reshape((-1,) + posterior[k].shape[2:]) for k in sites)


def posterior_decision_values(posterior: dict, K):
    """Decision values ``(S, M, C)`` of every draw of ``posterior`` (``posterior_``'s layout,
    with a chain axis) at kernel rows ``K: (P, M, N)``: :func:`draw_decision_values` of the
    merged draws."""
    return draw_decision_values(*flat_draws(posterior), K)
