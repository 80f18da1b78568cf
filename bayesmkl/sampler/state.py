"""Configuration and state of the BM3KL chain (pure data; the sweep is in
:mod:`bayesmkl.sampler.sampler`).

:class:`BM3KLConfig` is the static, hashable configuration (part of the compilation key);
:class:`BM3KLState` the pytree a sweep maps to the next; :func:`init_state` its initial value
(docs/math.md A13); :func:`mass_window` the warm-up sweeps that estimate a dense mass matrix.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.model.classification import Hyper
from bayesmkl.sampler import simplex, tpbn
from bayesmkl.sampler.moves import (
    MOVE_SPECS,
    MOVES,
    DualAveragingState,
    WelfordState,
    dual_averaging_init,
    welford_init,
)

__all__ = [
    "BM3KLConfig",
    "BM3KLState",
    "CAPPED_LOOPS",
    "MASS_RESTART_STEP",
    "MIN_MASS_WINDOW",
    "NU_UPDATES",
    "SITES",
    "capped_loops",
    "hyper_arrays",
    "init_state",
    "mass_window",
]

SITES = ("e", "a", "b", "lam", "nu", "varsigma")
NU_UPDATES = ("gibbs", "collapsed")

#: The bits of :attr:`BM3KLState.capped`: the inner loops of a sweep that stop at a cap.
CAPPED_LOOPS = {
    simplex.CAP_SLICE_W: "the slice sampler of the kernel weights w (pairwise Gibbs)",
    simplex.CAP_TRUNCNORM: "the rejection sampler of the truncated-normal kernel-weight draws",
    tpbn.CAP_SLICE_NU: "the slice sampler of the TPBN scales nu (nu_update='collapsed')",
}


def capped_loops(bits) -> list[str]:
    """The descriptions (:data:`CAPPED_LOOPS`) of the loops whose bits are set in ``bits``."""
    return [text for bit, text in CAPPED_LOOPS.items() if int(bits) & bit]


class BM3KLConfig(NamedTuple):
    """Static configuration of the sweep (hashable; part of the compilation key).

    Attributes
    ----------
    hyper : Hyper
        Model hyper-parameters (η given as a float or a tuple).
    move : str
        Kernel-weight move, one of ``MOVES``.
    step_size : float
        ε (SGRHMC moves) or the initial ε/h of the exact moves.
    n_leapfrog : int
        L, inner steps per sweep (MH steps for ``"rmala"``).
    step_schedule : str
        ``"constant"`` or ``"inverse"`` (ε_t = ε/t, t the 1-based Gibbs iteration; footnote 2).
    adapt_step_size : bool
        Dual averaging of ε during warm-up (exact moves only).
    refresh_momentum : bool
        Draw r ~ N(0, I) at every sweep (default) or carry it across sweeps (SGRHMC moves).
    flip_momentum : bool
        Flip r's sign on reflection (docs/math.md A7; the paper does not).
    scale_refresh : bool or None
        Exact scale refresh after the move; ``None`` means the move's default (on unless the
        move is 'paper').
    pairs_per_kernel : float
        Pairwise Gibbs updates per sweep, as a multiple of P (moves "gibbs" and "collapsed").
    n_active : int
        Sample weights per class integrated out by the collapsed move (the largest ν); capped
        at N and by memory (:func:`bayesmkl.sampler.collapsed.n_active_for`). 32 by default:
        the move costs O(N·s²) per leapfrog step, and against 64 it gave 1.8–2.5× the
        smallest bulk ESS per second on breast cancer, wine, sonar and pima at a similar ESS
        per sweep (``benchmarks/results/sweep_settings.md``); 16 lost ESS per sweep on breast
        cancer and pima.
    dense_mass : bool
        Learn a dense inverse mass matrix for the HMC moves during warm-up (the covariance of
        u = 2√e over the middle half of warm-up; :func:`mass_window`). Off by default: on
        breast cancer (bsvm16, 4 chains) it did not raise the smallest ESS of w.
    nu_update : str
        ``"gibbs"`` (default): ν | a, ς then ς | ν (docs/math.md §3.3). ``"collapsed"``: the exact
        collapsed block of :mod:`bayesmkl.sampler.tpbn` (one O(N³) sweep over all points per
        class, plus one more (a, b) draw).
    nu_max : float
        Upper bound of ν under ``nu_update="collapsed"`` (a truncation of the TPB prior that
        keeps Σ factorisable; :mod:`bayesmkl.sampler.tpbn`).
    """

    hyper: Hyper = Hyper()
    move: str = "collapsed"
    step_size: float = 0.01
    n_leapfrog: int = 10
    step_schedule: str = "constant"
    adapt_step_size: bool = True
    refresh_momentum: bool = True
    flip_momentum: bool = False
    scale_refresh: bool | None = None
    pairs_per_kernel: float = 4.0
    n_active: int = 32
    dense_mass: bool = False
    nu_update: str = "gibbs"
    nu_max: float = tpbn.NU_MAX

    def validate(self) -> BM3KLConfig:
        if self.move not in MOVES:
            raise ValueError(f"unknown sampler move {self.move!r}; choose one of {MOVES}")
        if self.step_schedule not in ("constant", "inverse"):
            raise ValueError("step_schedule must be 'constant' or 'inverse'")
        if not self.step_size > 0:
            raise ValueError(f"step_size must be positive; got {self.step_size}")
        if int(self.n_leapfrog) < 1:
            raise ValueError(f"n_leapfrog must be at least 1; got {self.n_leapfrog}")
        h = self.hyper
        if np.any(np.asarray(h.eta) <= 0) or h.alpha_a <= 0 or h.beta_a <= 0 or h.kappa <= 0:
            raise ValueError("eta, alpha_a, beta_a and kappa must be positive")
        if h.bias_prior_var <= 0 or h.gamma0 < 0:
            raise ValueError("bias_prior_var must be positive and gamma0 non-negative")
        if not self.pairs_per_kernel > 0:
            raise ValueError(f"pairs_per_kernel must be positive; got {self.pairs_per_kernel}")
        if int(self.n_active) < 1:
            raise ValueError(f"n_active must be at least 1; got {self.n_active}")
        if self.nu_update not in NU_UPDATES:
            raise ValueError(f"nu_update must be one of {NU_UPDATES}; got {self.nu_update!r}")
        if not self.nu_max > 0:
            raise ValueError(f"nu_max must be positive; got {self.nu_max}")
        return self

    @property
    def spec(self):
        """The :class:`~bayesmkl.sampler.moves.MoveSpec` of ``move``."""
        return MOVE_SPECS[self.move]

    @property
    def uses_scale_refresh(self) -> bool:
        if self.scale_refresh is None:
            return self.spec.scale_refresh
        return bool(self.scale_refresh)

    @property
    def adapts(self) -> bool:
        """Whether the step size is tuned by dual averaging during warm-up."""
        return self.adapt_step_size and self.spec.target_accept is not None

    @property
    def adapts_mass(self) -> bool:
        """Whether a dense inverse mass matrix is learnt during warm-up."""
        return self.adapts and self.dense_mass and self.spec.dense_mass

    @property
    def eta_is_one(self) -> bool:
        """Static route of the pairwise updates: truncated normals (η ≡ 1) or slice sampling."""
        return bool(np.all(np.asarray(self.hyper.eta) == 1.0))


class BM3KLState(NamedTuple):
    """State of the BM3KL chain (a pytree).

    Attributes
    ----------
    i : int
        Number of sweeps done so far.
    z : dict
        Current values: ``e (P,)``, ``a (C, N)``, ``b (C,)``, ``lam (C, N)``, ``nu (C, N)``,
        ``varsigma (C, N)``. This is the ``sample_field``.
    r : array (P,)
        Momentum of the SGRHMC moves.
    step_size : float
        Step size used in the last sweep.
    accept_prob : float
        MH acceptance probability of the last e move (1 for moves without MH).
    diverging : bool
        Whether the last e move diverged.
    potential_energy : float
        −log p(z, data) of the augmented model after the sweep (up to a constant).
    adapt_state : DualAveragingState
        Step-size adaptation state (used by the exact moves during warm-up).
    mass_sqrt : array (P, P)
        Factor L of the HMC moves' inverse mass matrix L Lᵀ (identity until learnt).
    welford : WelfordState
        Running covariance of u = 2√e over the mass-adaptation window.
    capped : int32
        Bits (:data:`CAPPED_LOOPS`) of the inner loops that have stopped at their iteration cap
        in any sweep so far (kept once set, warm-up included). A capped loop gives NaN, so the
        draws from there on are unusable; the estimator raises ``SamplerDivergenceError``
        naming the loop.
    hyper : Hyper
        The numeric hyper-parameters as arrays. They travel in the state rather than as
        compile-time constants, so one compiled sweep serves every value (a grid search over
        β_a or γ0 hits the persistent compilation cache); only the route choices α_a = 1 and
        γ0 > 0 are static.
    rng_key : PRNG key
    """

    i: jax.Array
    z: dict
    r: jax.Array
    step_size: jax.Array
    accept_prob: jax.Array
    diverging: jax.Array
    potential_energy: jax.Array
    adapt_state: DualAveragingState
    mass_sqrt: jax.Array
    welford: WelfordState
    capped: jax.Array
    hyper: Hyper
    rng_key: jax.Array


def hyper_arrays(hyper: Hyper, P: int) -> Hyper:
    """The hyper-parameters as float64 arrays (η broadcast to ``(P,)``)."""
    f = lambda v: jnp.asarray(v, dtype=jnp.float64)
    return Hyper(jnp.broadcast_to(f(hyper.eta), (P,)), *(f(v) for v in hyper[1:]))


def init_state(rng_key, K, delta, config: BM3KLConfig, init_params=None) -> BM3KLState:
    """Initial state (docs/math.md A13): e = 1, A = 0, b = 0, λ = ν = ς = 1, r = 0.

    ``init_params`` (a dict with any of the keys of ``SITES``) overrides these values.
    """
    P = K.shape[0]
    C, N = delta.shape
    z = {
        "e": jnp.ones(P),
        "a": jnp.zeros((C, N)),
        "b": jnp.zeros(C),
        "lam": jnp.ones((C, N)),
        "nu": jnp.ones((C, N)),
        "varsigma": jnp.ones((C, N)),
    }
    if init_params:
        unknown = set(init_params) - set(SITES)
        if unknown:
            raise ValueError(f"unknown init_params {sorted(unknown)}; known: {SITES}")
        z.update({k: jnp.asarray(v, dtype=jnp.float64) for k, v in init_params.items()})
    zero = jnp.zeros(())
    return BM3KLState(
        i=jnp.zeros((), jnp.int32),
        z=z,
        r=jnp.zeros(P),
        step_size=jnp.asarray(config.step_size, dtype=jnp.float64),
        accept_prob=zero,
        diverging=jnp.zeros((), bool),
        potential_energy=zero,
        adapt_state=dual_averaging_init(config.step_size),
        mass_sqrt=jnp.eye(P),
        welford=welford_init(P),
        capped=jnp.zeros((), jnp.int32),
        hyper=hyper_arrays(config.hyper, P),
        rng_key=rng_key,
    )


#: Step size at which dual averaging restarts once the mass matrix is learnt (x = L⁻¹u has
#: roughly unit scale, so the step is of order 1).
MASS_RESTART_STEP = 0.5
#: Fewest warm-up sweeps in the window for a covariance worth using.
MIN_MASS_WINDOW = 20


def mass_window(num_warmup: int):
    """Sweeps ``[lo, hi)`` whose u = 2√e estimate the mass matrix: the middle half of warm-up,
    leaving the last quarter to re-tune the step size; ``None`` if that is under
    ``MIN_MASS_WINDOW`` sweeps."""
    lo, hi = num_warmup // 4, (3 * num_warmup) // 4
    return (lo, hi) if hi - lo >= MIN_MASS_WINDOW else None
