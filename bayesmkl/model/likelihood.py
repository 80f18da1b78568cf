"""The max-margin pseudo-likelihood of BM3KL, written once (docs/math.md §1.3–§1.6 and §6).

Every other module (the NumPyro model, the Gibbs conditionals, prediction, the MAP baseline and
the tests) uses these functions, so there is one source of truth for each formula.

Shapes: ``f, delta, lam: (C, N)`` (or any common broadcast shape); ``delta`` holds the signed
one-vs-all targets δ_ci ∈ {−1, +1}.

=================  ==============================================================

formula            meaning
=================  ==============================================================

ζ = 1 − δ ⊙ f      margin slack
log L              −2 Σ max(ζ, 0)                              (γ0 = 0, eq. 2)
log L'             Σ [log(γ0/s) − ζ − s|ζ|],  s = √(1 + 2γ0)   (γ0 > 0, docs/math.md §1.6)
log L(λ)           Σ [−½ log(2πλ) − (λ + ζ)² / (2λ)]           (augmented, eq. 5)
ψ(f)               2f + 2s·clip(f, −1, 1)                       (prediction, docs/math.md §6)
=================  ==============================================================

Sample weights (``weight``, shape ``(N,)``, broadcast over the classifier axis): point i's
factor is raised to the power ϖ_i ≥ 0, i.e. log L' = Σ ϖ_i [log(γ0/s) − ζ − s|ζ|] + const.
Because exp{−ϖ(ζ + s|ζ|)} is the same hinge-type factor at the scaled slack ϖζ, the
augmentation is exact with ζ replaced by ϖζ: (λ + ϖζ)² / (2λ) in (5), λ | rest ~
GIG(1/2, s², ϖ²ζ²), and given λ a Gaussian regression with T = δ(1 + λ/ϖ), V = λ/ϖ². A zero
weight removes the point's likelihood term (its sample weight a_i and kernel column stay in
the model, as in :class:`~bayesmkl.baselines.BM3KLMAP`); ``weight=None`` is the unweighted
model, computed exactly as before.

Margins (``margin``, shape ``(C, N)``, a low-level capability the estimator does not expose):
the constant 1 of the slack becomes a per-observation margin m_ci, ζ = m − δ ⊙ f (with sample
weights ϖ ⊙ (m − δ ⊙ f)), and the pseudo-observations become T = δ(m + λ/ϖ), V = λ/ϖ²
(δ² = 1; docs/math.md §1.8). The augmented factor is then the Gaussian density
N(m; δf − λ, λ) of an observed margin m, which makes the model a proper generative model of m
(used by ``benchmarks/sbc.py``); an ε-insensitive regression loss is two such hinges with
margins y − ε and −(y + ε). ``margin=None`` is m ≡ 1, computed exactly as before.

"""

from __future__ import annotations

import jax.numpy as jnp

#: Smallest sample weight used in (T, V): a zero weight becomes 1e-100, whose pseudo-observation
#: has variance λ·1e200 and so carries relative information 1e-200 (none in float64), while T
#: and V stay finite.
WEIGHT_FLOOR = 1e-100


def s_of(gamma0):
    """``s = √(1 + 2γ0)``; ``s = 1`` for the flat λ prior (γ0 = 0)."""
    return jnp.sqrt(1.0 + 2.0 * gamma0)


def margin_slack(f, delta, weight=None, margin=None):
    """ζ = 1 − δ ⊙ f, shape of ``f``; with sample weights ϖ ``(N,)`` the scaled slack ϖ ⊙ ζ.

    ``margin`` ``(C, N)``: the margins m in place of 1, ζ = m − δ ⊙ f (module docstring).
    """
    zeta = (1.0 if margin is None else margin) - delta * f
    return zeta if weight is None else weight * zeta


def pseudo_observations(delta, lam, weight=None, margin=None):
    """Pseudo-targets and noise variances ``(T, V)`` of the augmented likelihood, ``(C, N)`` each.

    With T = δ ⊙ (1 + λ) and V = λ, (λ + ζ)²/λ = (T − f)²/V because δ² = 1: given λ the
    augmented pseudo-likelihood is a Gaussian regression of T on f with noise variances V
    (docs/math.md §3.2). Every Gaussian step (the (a, b) draw, the w-moves) is written in (T, V).
    With sample weights ϖ, (λ + ϖζ)²/λ = (T − f)²/V for T = δ(1 + λ/ϖ), V = λ/ϖ² (weights
    below :data:`WEIGHT_FLOOR` are raised to it, so that a zero weight stays finite). With
    margins m ``(C, N)`` the slack is m − δf and T = δ(m + λ/ϖ): (λ + ϖ(m − δf))²/λ =
    ϖ²(δ(m + λ/ϖ) − f)²/λ, again because δ² = 1.
    """
    m = 1.0 if margin is None else margin
    if weight is None:
        return delta * (m + lam), lam
    wt = jnp.maximum(weight, WEIGHT_FLOOR)
    return delta * (m + lam / wt), lam / wt**2


def log_pseudo_likelihood_terms(f, delta, gamma0, weight=None, margin=None):
    """Elementwise terms of :func:`log_pseudo_likelihood`, shape of ``f``.

    Summed over the classifier axis they give each training point's factor in the posterior
    (e.g. for leave-one-out importance ratios). With sample weights ϖ the terms are those of
    the weighted model, log(γ0/s) − ϖζ − s|ϖζ| (the λ integral of the weighted augmented
    factor; it is ϖ times the unweighted term plus a constant). ``margin``: margins m ``(C, N)``
    in place of 1 (module docstring).
    """
    zeta = margin_slack(f, delta, weight, margin)
    if float(gamma0) == 0.0:
        return -2.0 * jnp.maximum(zeta, 0.0)
    s = s_of(gamma0)
    return jnp.log(gamma0 / s) - zeta - s * jnp.abs(zeta)


def log_pseudo_likelihood(f, delta, gamma0, weight=None, margin=None):
    """Marginal log pseudo-likelihood summed over all (c, i): log L (γ0 = 0) or log L' (γ0 > 0).

    Parameters
    ----------
    f, delta : arrays (C, N)
        Decision values and signed targets.
    gamma0 : float
        Rate of the Exp(γ0) prior on λ; 0 selects the flat prior and the hinge form (2).
    weight : array (N,), optional
        Sample weights ϖ ≥ 0 (module docstring).
    margin : array (C, N), optional
        Margins m in place of 1: ζ = m − δ ⊙ f (module docstring).
    """
    return jnp.sum(log_pseudo_likelihood_terms(f, delta, gamma0, weight, margin))


def log_augmented_likelihood(f, delta, lam, weight=None, margin=None):
    """Augmented log pseudo-likelihood Σ [−½ log(2πλ) − (λ + ϖζ)²/(2λ)] (eq. 5), no λ prior.

    ϖ = 1 without sample weights; ζ = m − δ ⊙ f with margins ``margin`` m (1 without). With
    ϖ = 1 each term is log N(m; δf − λ, λ), a normalised density of m.
    """
    zeta = margin_slack(f, delta, weight, margin)
    return jnp.sum(-0.5 * jnp.log(2.0 * jnp.pi * lam) - (lam + zeta) ** 2 / (2.0 * lam))


def psi(f, gamma0):
    """ψ(f) = 2f + 2s·clip(f, −1, 1), the class score of the predictive softmax (docs/math.md §6).

    For γ0 = 0 (s = 1) this is ψ_L(f) = 2[max(1+f, 0) − max(1−f, 0)]; for γ0 > 0 it is ψ_L'.
    It is strictly increasing in f.
    """
    return 2.0 * f + 2.0 * s_of(gamma0) * jnp.clip(f, -1.0, 1.0)
