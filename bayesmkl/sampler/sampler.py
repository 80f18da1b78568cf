"""The classifier's sweep: its likelihood (:class:`Classification`) and its kernel (:class:`BM3KL`).

Given λ, the hinge pseudo-likelihood is a Gaussian regression of f on the pseudo-targets
T = δ(1 + λ) with noise variances V = λ (:func:`bayesmkl.model.likelihood.pseudo_observations`,
with their weighted and margin forms), so a classifier sweep is the shared sweep of
:func:`~bayesmkl.sampler.sweep.build_sweep` in the paper's order (docs/math.md §5) with the
augmentation step λ | rest:

1. Φ = A·K_m; the kernel-weight move on e (pairwise Gibbs of w | a, b, λ, then a step-size move
   on the conditional of e or on the collapsed target w | λ, ν, then, except for the literal
   ``"paper"`` move, the exact scale refresh e ← w·Gamma(Ση, 1));
2. K_w, then λ | rest and (a, b) | rest (Matheron's rule, batched over classes) — in the order
   (a, b) → λ after a collapsed move;
3. ν | a, ς and ς | ν — or, with ``nu_update="collapsed"``, the collapsed TPBN block of
   :mod:`bayesmkl.sampler.tpbn`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from bayesmkl.model.classification import Hyper, bm3kl_model, log_joint
from bayesmkl.model.likelihood import pseudo_observations
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler import steps, tpbn
from bayesmkl.sampler.kernel import BM3KLKernel
from bayesmkl.sampler.state import CAPPED_LOOPS, ClassifierPosition, SweepConfig

__all__ = ["BM3KL", "CLASSIFICATION", "Classification"]

_DEFAULT = Hyper()


@dataclass(frozen=True)
class Classification:
    """The classifier's likelihood, as :func:`~bayesmkl.sampler.sweep.build_sweep` reads it.

    Targets are the signed targets Δ ``(C, N)``; sample weights ``(N,)`` and margins ``(C, N)``
    enter through the slack and the pseudo-observations (T, V) only.
    """

    keys = ("next", "r", "g", "e", "s", "lam", "ab", "nu", "vs")
    ab_first = False
    monitored_sites = ()
    point_sites = ("lam",)
    capped_loops = CAPPED_LOOPS

    def validate(self, config: SweepConfig) -> None:
        if config.hyper.gamma0 < 0:
            raise ValueError("gamma0 must be non-negative")

    def init_position(self, P: int, C: int, N: int, M: int | None = None) -> ClassifierPosition:
        """e = 1, A = 0, b = 0, λ = ν = ς = 1; a, ν, ς have M columns (default N; the
        landmark model's M landmarks)."""
        M = N if M is None else M
        return ClassifierPosition(
            e=jnp.ones(P), a=jnp.zeros((C, M)), b=jnp.zeros(C), lam=jnp.ones((C, N)),
            nu=jnp.ones((C, M)), varsigma=jnp.ones((C, M)),
        )  # fmt: skip

    def check_args(self, delta, weight, margin) -> None:
        _check_weight(weight, delta.shape[1])
        _check_margin(margin, delta.shape)

    def pseudo_observations(self, z, delta, weight, margin):
        return pseudo_observations(delta, z.lam, weight, margin)

    def e_conditional(self, z, Phi, T, V, delta, eta, weight, margin):
        def pg(e):  # the conditional of e given a, b, λ
            return cond.e_potential_and_grad(e, Phi, z.b, delta, z.lam, eta, weight, margin)

        return pg

    def augment(self, keys, f, z, delta, hyper, weight, margin):
        return {"lam": steps.lam_step(keys["lam"], f, delta, hyper.gamma0, weight, margin)}, None

    def log_joint(self, z, f, delta, hyper, weight, margin):
        return log_joint(z._asdict(), f, delta, hyper, weight, margin)

    def model(self, hyper, landmarks: bool = False):
        def model(K, delta, weight=None, margin=None):
            return bm3kl_model(K, delta, weight, hyper=hyper, augmented=True, margin=margin,
                               landmarks=landmarks)  # fmt: skip

        return model


CLASSIFICATION = Classification()


class BM3KL(BM3KLKernel):
    """The BM3KL classifier's Gibbs sampler as a NumPyro MCMC kernel.

    Parameters
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var, gamma0 : float
        Model hyper-parameters (:class:`bayesmkl.model.classification.Hyper`; the defaults are
        the estimator's default prior, ``Hyper.paper()`` the paper's); ``eta`` may be a vector
        (P,).
    move : {"collapsed_log", "collapsed", "gibbs", "exact", "rmala", "paper", "stable"}
        Kernel-weight move (:mod:`bayesmkl.sampler.moves`); "collapsed_log" is the default, as
        in :class:`~bayesmkl.BM3KLClassifier`.
    step_size, n_leapfrog, step_schedule, adapt_step_size, refresh_momentum, flip_momentum,
    scale_refresh, pairs_per_kernel, n_active, dense_mass, nu_update, nu_max
        See :class:`~bayesmkl.sampler.state.SweepConfig`.
    adapt_sweeps : int, optional
        Sweeps (counted from the chain's start) during which the step size and mass matrix
        adapt; default: ``MCMC``'s ``num_warmup``. Set it with ``MCMC(num_warmup=0)`` to run
        the warm-up in chunks of your own
        (:func:`~bayesmkl.sampler.runlength.sample_until_converged`'s ``num_warmup``).
    landmarks : bool, default False
        Read ``K`` as the landmark model's kernels ``(P, N, M)`` between the training points
        and M landmarks (docs/math.md §16; :attr:`SweepConfig.landmarks`). A non-square ``K``
        is read so anyway.
    inner_cycles : int or "auto", default "auto"
        :attr:`~bayesmkl.sampler.state.SweepConfig.inner_cycles`.

    Examples
    --------
    >>> from numpyro.infer import MCMC
    >>> mcmc = MCMC(BM3KL(), num_warmup=180, num_samples=20, jit_model_args=True)
    >>> mcmc.run(jax.random.key(0), K, delta)          # doctest: +SKIP
    >>> mcmc.get_samples()["w"].shape                    # doctest: +SKIP
    (20, P)

    ``MCMC.run(key, K, delta, weight, margin)`` also takes sample weights ``(N,)`` and margins
    ``(C, N)`` (either may be ``None``).
    """

    def __init__(
        self,
        eta=_DEFAULT.eta,
        alpha_a=_DEFAULT.alpha_a,
        beta_a=_DEFAULT.beta_a,
        kappa=_DEFAULT.kappa,
        bias_prior_var=_DEFAULT.bias_prior_var,
        gamma0=_DEFAULT.gamma0,
        *,
        move="collapsed_log",
        step_size=0.01,
        n_leapfrog=10,
        step_schedule="constant",
        adapt_step_size=True,
        refresh_momentum=True,
        flip_momentum=False,
        scale_refresh=None,
        pairs_per_kernel=4.0,
        n_active=32,
        dense_mass=False,
        nu_update="gibbs",
        nu_max=tpbn.NU_MAX,
        adapt_sweeps=None,
        landmarks=False,
        inner_cycles="auto",
    ):
        eta = tuple(np.asarray(eta, dtype=float).ravel()) if np.ndim(eta) else float(eta)
        hyper = Hyper(eta, float(alpha_a), float(beta_a), float(kappa), float(bias_prior_var),
                      float(gamma0))  # fmt: skip
        config = SweepConfig(
            hyper, move, float(step_size), int(n_leapfrog), step_schedule,
            bool(adapt_step_size), bool(refresh_momentum), bool(flip_momentum), scale_refresh,
            float(pairs_per_kernel), int(n_active), bool(dense_mass), str(nu_update),
            float(nu_max), bool(landmarks), inner_cycles,
        )  # fmt: skip
        super().__init__(CLASSIFICATION, config, adapt_sweeps)


def _check_weight(weight, n: int) -> None:
    """Sample weights must be ``None`` or ``n`` finite non-negative numbers, not all zero."""
    if weight is None:
        return
    w = np.asarray(weight)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(
            f"sample weights must be {n} finite non-negative numbers, not all zero; got an "
            f"array of shape {w.shape}"
        )


def _check_margin(margin, shape) -> None:
    """Margins must be ``None`` or finite numbers of the targets' shape ``(C, N)``."""
    if margin is None:
        return
    m = np.asarray(margin)
    if m.shape != tuple(shape) or not np.all(np.isfinite(m)):
        raise ValueError(
            f"margins must be finite numbers of shape {tuple(shape)} (the targets'); got an "
            f"array of shape {m.shape}"
        )
