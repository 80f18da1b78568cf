"""The BM3KL generative model in NumPyro (docs/math.md §1–§2).

Sites (names follow the paper; shapes with P kernels, C one-vs-all problems, N training points):

==========  =========  ==============================================================
site        shape      distribution
==========  =========  ==============================================================
e           (P,)       Gamma(η, 1) — the expanded mean; η scalar or a vector
w           (P,)       deterministic e / Σe  (so w ~ Dirichlet(η))
varsigma    (C, N)     Gamma(β_a, κ)                    (TPBN rate ς)
nu          (C, N)     Gamma(α_a, ς)                    (TPBN local variance ν)
a           (C, N)     Normal(0, variance ν)            (sample weights)
b           (C,)       Normal(0, variance τ)            (biases; τ = ``bias_prior_var``)
lam         (C, N)     Exp(γ0), or flat on (0, ∞) when γ0 = 0   (augmented form only)
==========  =========  ==============================================================

The pseudo-likelihood enters as ``numpyro.factor("pseudo_lik", ...)``: the augmented form (5)
with λ, or, with ``augmented=False``, the marginal L (γ0 = 0) or L' (γ0 > 0) directly, which NUTS
can sample without λ. All Gamma distributions are shape–rate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayesmkl._docs import fill_doc
from bayesmkl.model.likelihood import log_augmented_likelihood, log_pseudo_likelihood


class Hyper(NamedTuple):
    """BM3KL hyper-parameters (paper symbols). The defaults are the package's default prior
    (``PRIORS["default"]``, what :class:`~bayesmkl.BM3KLClassifier` samples by default);
    :meth:`paper` gives the paper's values (docs/math.md §7.1).

    Attributes
    ----------
    eta : float or array (P,)
        Dirichlet concentration η (default 2; paper: 1).
    alpha_a, beta_a, kappa : float
        TPBN parameters α_a (default 1; paper: 1), β_a (default 1; paper: 0.1 … 3), κ (default
        1; paper: 1e-10).
    bias_prior_var : float
        τ, the prior *variance* of each bias (default 1; paper: 1e-4; docs/math.md §2.3 on this
        reading).
    gamma0 : float
        Rate of the Exp(γ0) prior on λ (default 1; paper: 100); 0 gives the flat prior and the
        hinge likelihood L.
    """

    eta: float = 2.0
    alpha_a: float = 1.0
    beta_a: float = 1.0
    kappa: float = 1.0
    bias_prior_var: float = 1.0
    gamma0: float = 1.0

    @classmethod
    def paper(cls, **changes) -> Hyper:
        """The paper's hyper-parameters (Table 2: η = 1, α_a = 1, β_a = 0.1, κ = 1e-10,
        τ = 1e-4, γ0 = 100), with ``changes`` on top."""
        values = dict(eta=1.0, alpha_a=1.0, beta_a=0.1, kappa=1e-10, bias_prior_var=1e-4,
                      gamma0=100.0)  # fmt: skip
        return cls(**{**values, **changes})


def combine_kernels(K, w):
    """``K_w = Σ_m w_m K_m`` as one GEMV: ``K: (P, N, M)``, ``w: (P,)`` → ``(N, M)`` (float64)."""
    P = K.shape[0]
    Kw = jnp.dot(w.astype(K.dtype), K.reshape(P, -1))
    return Kw.reshape(K.shape[1:]).astype(jnp.float64)


def decision_values(Kw, a, b):
    """``f = A K_w + b 1ᵀ``: ``Kw: (N, N)`` symmetric, ``a: (C, N)``, ``b: (C,)`` → ``(C, N)``."""
    return a @ Kw + b[:, None]


def landmark_decision_values(Psi_w, a, b):
    """``f = A Ψ_wᵀ + b 1ᵀ`` of the landmark model (docs/math.md §16.1): ``Psi_w: (N, M)`` the
    combined kernel between the N training points and the M landmarks, ``a: (C, M)``,
    ``b: (C,)`` → ``(C, N)``."""
    return a @ Psi_w.T + b[:, None]


def is_landmark(K, landmarks: bool = False) -> bool:
    """Whether the kernel block ``K: (P, N, M)`` is read as the landmark model's (docs/math.md
    §16): when asked (``landmarks``) or when it is not square (a static, shape-level test)."""
    return bool(landmarks) or K.shape[-2] != K.shape[-1]


def kernel_decision_values(K, w, a, b, landmarks: bool = False):
    """Decision values ``(C, N)`` of weights ``w (P,)``, ``a (C, M)``, ``b (C,)`` on the
    training kernels ``K (P, N, M)``: :func:`decision_values` for the exact model (square,
    symmetric K), :func:`landmark_decision_values` for the landmark model
    (:func:`is_landmark`)."""
    Kw = combine_kernels(K, w)
    if is_landmark(K, landmarks):
        return landmark_decision_values(Kw, a, b)
    return decision_values(Kw, a, b)


def signed_targets(codes, n_classes: int, binary_mode: str = "single"):
    """Δ, the ±1 targets ``(C, N)`` from integer class codes ``(N,)`` in ``0..n_classes-1``.

    Two classes with ``binary_mode="single"`` give one classifier (C = 1, +1 = class 1;
    docs/math.md §1.2), otherwise one row per class (one-vs-all).
    """
    codes = np.asarray(codes)
    if n_classes == 2 and binary_mode == "single":
        return np.where(codes == 1, 1.0, -1.0)[None, :]
    return np.where(codes[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)


DEFAULT_HYPER = Hyper()

#: Named priors of :class:`~bayesmkl.BM3KLClassifier` (``prior=``). ``"paper"``: the paper's
#: hyper-parameters (Table 2), a near spike-and-slab over the support vectors whose posterior no
#: exact sampler of the package mixes in a user's time. ``"default"`` (:class:`Hyper`'s
#: defaults): a Dirichlet(2) on the kernel weights (away from the simplex's edges, where
#: neighbouring Gaussian widths trade weight along a ridge), a TPBN with κ = β_a = 1
#: (heavy-tailed, not spiky), a unit-variance bias prior (so that the bias, not a near-constant
#: kernel, carries the offset) and γ0 = 1 (a Laplace of scale ≈ 0.6 around the margin instead
#: of ≈ 0.07).
PRIORS = {"default": Hyper(), "paper": Hyper.paper()}

#: Docstring entries of the model's data arguments (``{{K_delta}}``, see :mod:`bayesmkl._docs`).
DATA_DOCS = {
    "K_delta": """K : array (P, N, N)
    Training kernels (symmetric).
delta : array (C, N)
    Signed targets Δ.""",
}


@fill_doc(DATA_DOCS)
def prior_sites(P: int, C: int, N: int, hyper):
    """The prior's NumPyro sites, shared by every BM³KL model: e ~ Gamma(η, 1) with
    w = e/Σe (deterministic site ``w``), the TPBN hierarchy ς ~ Gamma(β_a, κ), ν ~ Gamma(α_a, ς),
    a ~ N(0, ν) (all ``(C, N)``) and b ~ N(0, τ) ``(C,)``; returns ``(w, a, b)``. ``hyper``
    needs ``eta, alpha_a, beta_a, kappa, bias_prior_var``."""
    eta = jnp.broadcast_to(jnp.asarray(hyper.eta, dtype=jnp.float64), (P,))
    e = numpyro.sample("e", dist.Gamma(eta, 1.0).to_event(1))
    w = numpyro.deterministic("w", e / jnp.sum(e))
    varsigma = numpyro.sample(
        "varsigma", dist.Gamma(hyper.beta_a, hyper.kappa).expand((C, N)).to_event(2)
    )
    nu = numpyro.sample("nu", dist.Gamma(hyper.alpha_a, varsigma).to_event(2))
    a = numpyro.sample("a", dist.Normal(0.0, jnp.sqrt(nu)).to_event(2))
    b = numpyro.sample(
        "b", dist.Normal(0.0, np.sqrt(hyper.bias_prior_var)).expand((C,)).to_event(1)
    )
    return w, a, b


def bm3kl_model(
    K,
    delta,
    weight=None,
    hyper: Hyper = DEFAULT_HYPER,
    augmented: bool = True,
    margin=None,
    landmarks: bool = False,
):
    """NumPyro model of BM3KL.

    Parameters
    ----------
    {{K_delta}}
    weight : array (N,), optional
        Sample weights ϖ ≥ 0: point i's likelihood factor is raised to the power ϖ_i
        (:mod:`bayesmkl.model.likelihood`); ``None`` is the unweighted model.
    hyper : Hyper
        Hyper-parameters.
    augmented : bool
        Include the augmentation variables λ (the model the Gibbs sampler targets); ``False``
        gives the marginal model with the same posterior over (e, a, b, ν, ς).
    margin : array (C, N), optional
        Margins m in place of 1 in the slack ζ = m − δ ⊙ f (:mod:`bayesmkl.model.likelihood`); with
        them the augmented factor is the density N(m; δf − λ, λ) of observed margins.
    landmarks : bool
        Read ``K (P, N, M)`` as the kernels between the training points and M landmarks
        (docs/math.md §16): a, ν, ς have M columns. A non-square ``K`` is read so anyway.
    """
    C, N = delta.shape
    w, a, b = prior_sites(K.shape[0], C, K.shape[2], hyper)
    f = kernel_decision_values(K, w, a, b, landmarks)
    if augmented:
        if hyper.gamma0 > 0:
            lam_prior = dist.Exponential(hyper.gamma0).expand((C, N)).to_event(2)
        else:
            lam_prior = dist.ImproperUniform(constraints.positive, (), (C, N))
        lam = numpyro.sample("lam", lam_prior)
        numpyro.factor("pseudo_lik", log_augmented_likelihood(f, delta, lam, weight, margin))
    else:
        lik = log_pseudo_likelihood(f, delta, hyper.gamma0, weight, margin)
        numpyro.factor("pseudo_lik", lik)


def log_prior(z, hyper):
    """log density of the prior sites of :func:`prior_sites` at the constrained values ``z``
    (keys ``e, varsigma, nu, a, b``), without Jacobians; shared by every BM³KL log joint."""
    P = z["e"].shape[0]
    eta = jnp.broadcast_to(jnp.asarray(hyper.eta, dtype=jnp.float64), (P,))
    lp = dist.Gamma(eta, 1.0).log_prob(z["e"]).sum()
    lp += dist.Gamma(hyper.beta_a, hyper.kappa).log_prob(z["varsigma"]).sum()
    lp += dist.Gamma(hyper.alpha_a, z["varsigma"]).log_prob(z["nu"]).sum()
    lp += dist.Normal(0.0, jnp.sqrt(z["nu"])).log_prob(z["a"]).sum()
    lp += dist.Normal(0.0, jnp.sqrt(hyper.bias_prior_var)).log_prob(z["b"]).sum()
    return lp


def log_joint(z, f, delta, hyper: Hyper, weight=None, margin=None):
    """log p(e, varsigma, nu, a, b, lam, data) of the augmented model, without Jacobians.

    The same density as :func:`bm3kl_model` (``augmented=True``) evaluated at the constrained
    values ``z`` (keys ``e, varsigma, nu, a, b, lam``) with decision values ``f: (C, N)``
    already formed; the sampler reports its negative as ``potential_energy``. Tested against
    NumPyro's ``log_density`` of the model. With γ0 = 0 the flat prior of λ contributes 0.
    Every hyper-parameter may be a traced JAX value (the sampler carries them in its state so
    that one compiled sweep serves all their values). ``weight``: optional sample weights
    ``(N,)`` of the weighted model; ``margin``: optional margins ``(C, N)`` in place of 1.
    """
    lp = log_prior(z, hyper)
    gamma0 = jnp.asarray(hyper.gamma0, dtype=jnp.float64)
    positive = gamma0 > 0
    lam_lp = dist.Exponential(jnp.where(positive, gamma0, 1.0)).log_prob(z["lam"]).sum()
    lp += jnp.where(positive, lam_lp, 0.0)
    return lp + log_augmented_likelihood(f, delta, z["lam"], weight, margin)
