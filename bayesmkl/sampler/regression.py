"""The regressor's sweep: its likelihood (:class:`Regression`) and its kernel (:class:`BM3KLReg`)
(docs/math.md §15.5).

Given λ⁺, λ⁻, c and ε, the ε-insensitive likelihood is a Gaussian regression of f on
pseudo-observations (T, V) (:func:`bayesmkl.model.regression_likelihood.pseudo_observations`),
so a regression sweep is the shared sweep of :func:`~bayesmkl.sampler.sweep.build_sweep`:

1. the kernel-weight move given (T, V) (pairwise Gibbs on w, HMC on the collapsed target or on
   the conditional of e, the exact scale refresh, warm-up adaptation);
2. (a, b) | w, T, V, ν (Matheron's rule);
3. (c, ε) | f with λ integrated out, then λ⁺, λ⁻ | f, c, ε
   (:mod:`bayesmkl.sampler.regression_conditionals`): together an exact draw of
   (c, ε, λ) | w, a, b;
4. ν | a, ς and ς | ν.

After a collapsed move (1) integrated (a_A, b) out, and (2) draws them given the new w before
anything conditions on them (a partially collapsed Gibbs step, van Dyk & Park 2008); after the
other moves (2) is an ordinary Gibbs step. The targets ``y: (1, N)`` take the classifier's
``delta`` slot of ``MCMC.run(key, K, y)``, so one kernel adapter, one
:class:`~bayesmkl.sampler.runner.ChainRunner` and one run-length rule serve both models.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax.numpy as jnp
import numpy as np

from bayesmkl.model.regression import RegHyper, reg_log_joint, reg_model
from bayesmkl.model.regression_likelihood import pseudo_observations
from bayesmkl.sampler import steps
from bayesmkl.sampler.kernel import BM3KLKernel
from bayesmkl.sampler.moves import EXACT_MOVES
from bayesmkl.sampler.regression_conditionals import CAP_SLICE_NOISE, tv_potential_and_grad
from bayesmkl.sampler.state import CAPPED_LOOPS, RegressorPosition, SweepConfig

__all__ = ["EPS_INIT", "REG_CAPPED_LOOPS", "REG_SITES", "BM3KLReg", "Regression"]

REG_SITES = RegressorPosition._fields
#: The bits of ``State.capped`` a regression sweep may set (:data:`CAPPED_LOOPS` and the
#: slice updates of c and ε).
REG_CAPPED_LOOPS = {
    **CAPPED_LOOPS,
    CAP_SLICE_NOISE: "the slice sampler of the noise parameters c and epsilon",
}
#: Initial ε of a chain when ε is learnt (in the units of the sampler's targets).
EPS_INIT = 0.1

_DEFAULT = RegHyper()


@dataclass(frozen=True)
class Regression:
    """The regressor's likelihood, as :func:`~bayesmkl.sampler.sweep.build_sweep` reads it.

    Attributes
    ----------
    epsilon : float or None
        A fixed half-width ε of the tube (``None``: ε is learnt, with the Gamma prior of the
        hyper-parameters).
    """

    epsilon: float | None = None

    keys = ("next", "r", "g", "e", "s", "ab", "noise", "lam", "nu", "vs")
    ab_first = True
    monitored_sites = ("c", "eps")
    point_sites = ("lam_plus", "lam_minus")
    capped_loops = REG_CAPPED_LOOPS

    @property
    def learn_eps(self) -> bool:
        return self.epsilon is None

    def validate(self, config: SweepConfig) -> None:
        if config.move not in EXACT_MOVES:
            raise ValueError(
                f"the regressor samples with an exact kernel-weight move, one of {EXACT_MOVES}; "
                f"got {config.move!r}"
            )
        if config.nu_update != "gibbs":
            raise ValueError("the regressor updates nu by Gibbs only (nu_update='gibbs')")
        h = config.hyper
        if min(h.c_shape, h.c_rate, h.eps_shape, h.eps_rate) <= 0:
            raise ValueError("c_shape, c_rate, eps_shape and eps_rate must be positive")
        if self.epsilon is not None and not self.epsilon >= 0:
            raise ValueError(f"a fixed epsilon must be >= 0; got {self.epsilon}")

    def init_position(self, P: int, C: int, N: int, M: int | None = None) -> RegressorPosition:
        """e = 1, a = 0, b = 0, λ^± = ν = ς = 1, c = 1, ε = :data:`EPS_INIT` (or the fixed ε);
        a, ν, ς have M columns (default N; the landmark model's M landmarks)."""
        eps0 = EPS_INIT if self.epsilon is None else self.epsilon
        M = N if M is None else M
        return RegressorPosition(
            e=jnp.ones(P), a=jnp.zeros((C, M)), b=jnp.zeros(C), lam_plus=jnp.ones((C, N)),
            lam_minus=jnp.ones((C, N)), nu=jnp.ones((C, M)), varsigma=jnp.ones((C, M)),
            c=jnp.ones(()), eps=jnp.asarray(eps0, dtype=jnp.float64),
        )  # fmt: skip

    def check_args(self, y, weight, margin) -> None:
        if weight is not None or margin is not None:
            raise ValueError("BM3KLReg takes no sample weights or margins: MCMC.run(key, K, y)")

    def pseudo_observations(self, z, y, weight, margin):
        return pseudo_observations(y, z.lam_plus, z.lam_minus, z.c, z.eps)

    def e_conditional(self, z, Phi, T, V, y, eta, weight, margin):
        def pg(e):  # the conditional of e given a, b, T, V
            return tv_potential_and_grad(e, Phi, z.b, T, V, eta)

        return pg

    def augment(self, keys, f, z, y, hyper, weight, margin):
        c, eps, lam_plus, lam_minus, hit = steps.noise_lam_step(
            keys["noise"], keys["lam"], y, f, z.c, z.eps, hyper, self.learn_eps
        )
        return {"c": c, "eps": eps, "lam_plus": lam_plus, "lam_minus": lam_minus}, hit

    def log_joint(self, z, f, y, hyper, weight, margin):
        return reg_log_joint(z._asdict(), f, y, hyper, self.learn_eps)

    def model(self, hyper, landmarks: bool = False):
        return partial(reg_model, hyper=hyper, epsilon=self.epsilon, landmarks=landmarks)


class BM3KLReg(BM3KLKernel):
    """The BM³KL regressor's Gibbs sampler as a NumPyro MCMC kernel (``MCMC.run(key, K, y)``).

    Parameters
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var, c_shape, c_rate, eps_shape, eps_rate : float
        Hyper-parameters (:class:`~bayesmkl.model.regression.RegHyper`; the defaults are the
        regressor's default prior). ``eta`` may be a vector (P,).
    epsilon : float or None
        A fixed ε ≥ 0, or ``None`` to learn it.
    move, step_size, n_leapfrog, adapt_step_size, pairs_per_kernel, n_active, dense_mass
        The kernel-weight move and its settings (:class:`~bayesmkl.sampler.state.
        SweepConfig`); exact moves only.
    adapt_sweeps : int, optional
        Sweeps during which step size and mass adapt (default: ``MCMC``'s ``num_warmup``).
    landmarks : bool, default False
        Read ``K`` as the landmark model's kernels ``(P, N, M)`` (docs/math.md §16;
        :attr:`~bayesmkl.sampler.state.SweepConfig.landmarks`).
    inner_cycles : int or "auto", default "auto"
        :attr:`~bayesmkl.sampler.state.SweepConfig.inner_cycles`.
    """

    def __init__(
        self, eta=_DEFAULT.eta, alpha_a=_DEFAULT.alpha_a, beta_a=_DEFAULT.beta_a,
        kappa=_DEFAULT.kappa, bias_prior_var=_DEFAULT.bias_prior_var, c_shape=_DEFAULT.c_shape,
        c_rate=_DEFAULT.c_rate, eps_shape=_DEFAULT.eps_shape, eps_rate=_DEFAULT.eps_rate, *,
        epsilon=None, move="collapsed_log", step_size=0.01, n_leapfrog=10,
        adapt_step_size=True, pairs_per_kernel=4.0, n_active=32, dense_mass=False,
        adapt_sweeps=None, landmarks=False, inner_cycles="auto",
    ):  # fmt: skip
        eta = tuple(np.asarray(eta, dtype=float).ravel()) if np.ndim(eta) else float(eta)
        nums = [float(v) for v in (alpha_a, beta_a, kappa, bias_prior_var, c_shape, c_rate,
                                   eps_shape, eps_rate)]  # fmt: skip
        config = SweepConfig(
            RegHyper(eta, *nums), move, float(step_size), int(n_leapfrog),
            adapt_step_size=bool(adapt_step_size), pairs_per_kernel=float(pairs_per_kernel),
            n_active=int(n_active), dense_mass=bool(dense_mass), nu_update="gibbs",
            landmarks=bool(landmarks), inner_cycles=inner_cycles,
        )  # fmt: skip
        likelihood = Regression(None if epsilon is None else float(epsilon))
        super().__init__(likelihood, config, adapt_sweeps)
