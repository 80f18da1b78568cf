"""Reference (oracle) samplers for BM3KL built from NumPyro's own machinery (docs/math.md §4.4, E1).

Two exact samplers that share no transition code with :class:`~bayesmkl.sampler.BM3KL`'s
kernel-weight moves, used as test oracles and as the baseline of ``benchmarks/mixing.py``:

:func:`reference_kernel`
    docs/math.md E1: ``numpyro.infer.HMCGibbs`` with NumPyro's NUTS on the kernel-weight site
    ``e`` (sampled in φ = log e by NumPyro's default bijection for a Gamma site) and a Gibbs
    function that updates the remaining sites of the *augmented* model in the paper's order
    λ → (a, b) → ν → ς with the pure conditionals of :mod:`bayesmkl.sampler.conditionals`.
    Its target is the same augmented posterior (5) as the BM3KL kernel; only the e-move differs
    (NUTS on the full log density, computed by NumPyro from
    :func:`~bayesmkl.model.classification.bm3kl_model`,
    instead of the analytic potential of docs/math.md §3.4).

:func:`run_marginal_nuts`
    NUTS on *all* continuous sites of the marginal model ``bm3kl_model(..., augmented=False)``
    (λ integrated out analytically: the likelihood is L for γ0 = 0 and L' for γ0 > 0). It
    shares with the Gibbs sampler only the model's densities, so agreement of the two is an
    end-to-end check of the conditionals. The sample weights have a funnel-shaped prior
    (a | ν ~ N(0, ν)); with ``noncentered=True`` (default) the site ``a`` is reparameterised by
    ``LocScaleReparam(0)``, which changes the geometry NUTS sees, not the model. NUTS mixes
    acceptably on small problems with moderate shrinkage (e.g. κ = 1, β_a = 1); with the
    paper's κ = 1e-10 the prior on ν is so heavy that NUTS produces divergences.

Both are exact (asymptotically unbiased) but slow: NUTS differentiates through
K_w = Σ w_m K_m, i.e. O(P N²) work per leapfrog step, where the BM3KL moves need O(P C N).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpyro
from numpyro.infer import MCMC, NUTS, HMCGibbs
from numpyro.infer.reparam import LocScaleReparam

from bayesmkl._docs import fill_doc
from bayesmkl.model.classification import (
    DATA_DOCS,
    DEFAULT_HYPER,
    Hyper,
    bm3kl_model,
    combine_kernels,
    decision_values,
)
from bayesmkl.sampler import conditionals as cond

__all__ = [
    "GIBBS_SITES",
    "make_gibbs_fn",
    "marginal_model",
    "reference_kernel",
    "run_marginal_nuts",
]

#: Sites of the augmented model updated by the Gibbs function (all but ``e``).
GIBBS_SITES = ("lam", "a", "b", "nu", "varsigma")


@fill_doc(DATA_DOCS)
def make_gibbs_fn(K, delta, hyper: Hyper = DEFAULT_HYPER, weight=None):
    """Gibbs update of (λ, a, b, ν, ς) given e, for :class:`numpyro.infer.HMCGibbs`.

    Parameters
    ----------
    {{K_delta}}
    hyper : Hyper
        Hyper-parameters.
    weight : array (N,), optional
        Sample weights of the weighted model (:mod:`bayesmkl.model.likelihood`).

    Returns
    -------
    callable
        ``gibbs_fn(rng_key, gibbs_sites, hmc_sites) -> dict`` with keys ``GIBBS_SITES``. The
        update is λ | e, a, b → (a, b) | e, λ, ν → ν | a, ς → ς | ν (docs/math.md §5 steps 2–4),
        each from :mod:`bayesmkl.sampler.conditionals`.
    """
    K = jnp.asarray(K)
    delta = jnp.asarray(delta, dtype=jnp.float64)
    weight = None if weight is None else jnp.asarray(weight, dtype=jnp.float64)

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        k_lam, k_ab, k_nu, k_vs = jax.random.split(rng_key, 4)
        e = hmc_sites["e"]
        Kw = combine_kernels(K, e / jnp.sum(e))
        f = decision_values(Kw, gibbs_sites["a"], gibbs_sites["b"])
        lam = cond.sample_lam(k_lam, f, delta, hyper.gamma0, weight)
        nu_old, tau = gibbs_sites["nu"], hyper.bias_prior_var
        a, b = cond.sample_ab(k_ab, Kw, delta, lam, nu_old, tau, weight)
        nu = cond.sample_nu(k_nu, a, gibbs_sites["varsigma"], hyper.alpha_a)
        varsigma = cond.sample_varsigma(k_vs, nu, hyper.alpha_a, hyper.beta_a, hyper.kappa)
        return {"lam": lam, "a": a, "b": b, "nu": nu, "varsigma": varsigma}

    return gibbs_fn


def reference_kernel(
    K, delta, hyper: Hyper = DEFAULT_HYPER, weight=None, **nuts_kwargs
) -> HMCGibbs:
    """E1 reference sampler: NUTS on log e inside NumPyro's Gibbs machinery (docs/math.md §4.4).

    Parameters
    ----------
    K : array (P, N, N)
        Training kernels; also pass them to ``MCMC.run(key, K, delta)`` (the Gibbs function
        closes over the same arrays, since ``HMCGibbs`` does not hand it the model arguments).
    delta : array (C, N)
        Signed targets Δ.
    hyper : Hyper
        Hyper-parameters of the augmented model.
    weight : array (N,), optional
        Sample weights; pass them to ``MCMC.run(key, K, delta, weight)`` as well.
    **nuts_kwargs
        Passed to :class:`numpyro.infer.NUTS` (e.g. ``target_accept_prob``, ``max_tree_depth``).

    Returns
    -------
    numpyro.infer.HMCGibbs
        ``HMCGibbs(NUTS(model), gibbs_fn, gibbs_sites=["lam", "a", "b", "nu", "varsigma"])``
        with ``model = bm3kl_model(·, ·, hyper, augmented=True)``. Samples hold ``e``, ``w`` and
        the Gibbs sites.

    Notes
    -----
    Initialise the Gibbs sites sensibly (the default draws them uniformly in (-2, 2) on the
    unconstrained scale, which is fine), e.g. ``MCMC(...).run(key, K, delta,
    init_params={...})``. Each NUTS step recomputes K_w inside the model, so it costs O(P N²)
    per leapfrog step.

    Examples
    --------
    >>> hyper = Hyper(kappa=1.0, beta_a=1.0, gamma0=2.0)
    >>> kern = reference_kernel(K, delta, hyper)                # doctest: +SKIP
    >>> mcmc = MCMC(kern, num_warmup=500, num_samples=1000)     # doctest: +SKIP
    >>> mcmc.run(jax.random.key(0), K, delta)                   # doctest: +SKIP
    """
    model = partial(bm3kl_model, hyper=hyper, augmented=True)
    nuts = NUTS(model, **nuts_kwargs)
    gibbs_fn = make_gibbs_fn(K, delta, hyper, weight)
    return HMCGibbs(nuts, gibbs_fn=gibbs_fn, gibbs_sites=list(GIBBS_SITES))


def marginal_model(hyper: Hyper = DEFAULT_HYPER, noncentered: bool = True):
    """The marginal model ``bm3kl_model(K, delta, hyper, augmented=False)`` as a callable.

    With ``noncentered=True`` the site ``a`` is reparameterised (``LocScaleReparam(0)``: NumPyro
    samples ``a_decentered ~ N(0, 1)`` and sets a = √ν · a_decentered), which leaves the model
    unchanged and removes the funnel between a and ν.
    """
    model = partial(bm3kl_model, hyper=hyper, augmented=False)
    if noncentered:
        model = numpyro.handlers.reparam(model, config={"a": LocScaleReparam(0)})
    return model


def run_marginal_nuts(
    rng_key,
    K,
    delta,
    hyper: Hyper = DEFAULT_HYPER,
    *,
    weight=None,
    num_warmup: int = 500,
    num_samples: int = 1000,
    num_chains: int = 1,
    chain_method: str = "sequential",
    noncentered: bool = True,
    progress_bar: bool = False,
    extra_fields=("diverging", "accept_prob", "num_steps"),
    **nuts_kwargs,
) -> MCMC:
    """Run NumPyro NUTS on the marginal (λ-free) BM3KL model and return the fitted ``MCMC``.

    Parameters
    ----------
    rng_key : PRNG key
    K : array (P, N, N)
        Training kernels (model argument; not baked into the compiled program).
    delta : array (C, N)
        Signed targets Δ.
    hyper : Hyper
        Hyper-parameters; the likelihood is L (γ0 = 0) or L' (γ0 > 0).
    num_warmup, num_samples, num_chains, chain_method
        As for :class:`numpyro.infer.MCMC`.
    weight : array (N,), optional
        Sample weights of the weighted model (:mod:`bayesmkl.model.likelihood`).
    noncentered : bool
        Reparameterise ``a`` non-centrally (see :func:`marginal_model`).
    progress_bar : bool
    extra_fields : tuple of str
        Extra fields collected by ``MCMC.run`` (get them with ``get_extra_fields()``).
    **nuts_kwargs
        Passed to :class:`numpyro.infer.NUTS` (e.g. ``target_accept_prob=0.9``).

    Returns
    -------
    numpyro.infer.MCMC
        ``get_samples()`` holds ``e``, ``w``, ``a``, ``b``, ``nu``, ``varsigma`` (and
        ``a_decentered`` when ``noncentered``).
    """
    kernel = NUTS(marginal_model(hyper, noncentered), **nuts_kwargs)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=progress_bar,
        jit_model_args=True,
    )
    args = (K, delta) if weight is None else (K, delta, weight)
    mcmc.run(rng_key, *args, extra_fields=tuple(extra_fields))
    return mcmc
