"""What a chain carries and reports, its configuration and its initial value (pure data).

:class:`SweepConfig` is the static, hashable configuration of a sweep (with the likelihood,
the compilation key); :class:`ClassifierPosition` and :class:`RegressorPosition` are the
model's current values; :class:`State` is what one sweep reads and the next sweep is given;
:class:`Info` what a sweep reports and nothing downstream in the chain reads;
:class:`ChainState` both in one record, which NumPyro's ``MCMC`` and
:class:`~bayesmkl.sampler.runner.ChainRunner` carry (NumPyro reads a kernel's extra fields and
key as attributes of one state). :func:`init_state` is the initial value (docs/math.md A13) of
either model; :func:`mass_window` the warm-up sweeps that estimate a dense mass matrix.
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
    "ChainState",
    "ClassifierPosition",
    "Info",
    "RegressorPosition",
    "State",
    "SweepConfig",
    "capped_loops",
    "hyper_arrays",
    "init_state",
    "mass_window",
]

NU_UPDATES = ("gibbs", "collapsed")

#: The bits of :attr:`State.capped`: the inner loops of a sweep that stop at a cap.
CAPPED_LOOPS = {
    simplex.CAP_SLICE_W: "the slice sampler of the kernel weights w (pairwise Gibbs)",
    simplex.CAP_TRUNCNORM: "the rejection sampler of the truncated-normal kernel-weight draws",
    tpbn.CAP_SLICE_NU: "the slice sampler of the TPBN scales nu (nu_update='collapsed')",
}


def capped_loops(bits) -> list[str]:
    """The descriptions (:data:`CAPPED_LOOPS`) of the loops whose bits are set in ``bits``."""
    return [text for bit, text in CAPPED_LOOPS.items() if int(bits) & bit]


class SweepConfig(NamedTuple):
    """Static configuration of a sweep (hashable; with the likelihood, the compilation key).

    Attributes
    ----------
    hyper : Hyper or RegHyper
        The model's hyper-parameters (η given as a float or a tuple): the values a chain starts
        with (they travel in :attr:`State.hyper` as arrays) and the static routes read from
        them (η ≡ 1, α_a = 1).
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
        at N and by memory (:func:`bayesmkl.sampler.collapsed.n_active_for`); the move costs
        O(N·s²) per leapfrog step.
    dense_mass : bool
        Learn a dense inverse mass matrix for the HMC moves during warm-up (the covariance of
        u = 2√e over the middle half of warm-up; :func:`mass_window`).
    nu_update : str
        ``"gibbs"``: ν | a, ς then ς | ν (docs/math.md §3.3). ``"collapsed"``: the exact
        collapsed block of :mod:`bayesmkl.sampler.tpbn` (one O(N³) sweep over all points per
        class, plus one more (a, b) draw; classification only).
    nu_max : float
        Upper bound of ν under ``nu_update="collapsed"`` (a truncation of the TPB prior that
        keeps Σ factorisable; :mod:`bayesmkl.sampler.tpbn`).
    landmarks : bool
        Read the kernels ``K (P, N, M)`` as the landmark model's (docs/math.md §16: M
        landmarks, a, ν, ς of shape (C, M), (a, b) drawn in weight space). A non-square ``K``
        is read so anyway; the flag makes a square block (M = N landmarks that are not the
        training points in order) the landmark model too. ``False`` with a square ``K`` is the
        exact model.
    inner_cycles : int or "auto"
        Extra cycles, each sweep, of the blocks that condition on the kernel weights: the
        augmentation | f, then (a, b) | w, T, V, ν, then the TPBN step (each an exact
        conditional draw, so the sweep's target is unchanged). 0: none. ``"auto"``
        (:func:`bayesmkl.sampler.steps.inner_cycles_for`): none for the exact model, whose
        (a, b) draw is the sweep's largest cost; for the landmark model as many (1 to
        :data:`~bayesmkl.sampler.steps.MAX_INNER_CYCLES`) as cost about what the kernel-weight
        move costs. The decision values mix slowly through the augmentation (λ given f pins
        the points near the margin); each cycle is a cheap step of that Gibbs chain.
    """

    hyper: Hyper = Hyper()
    move: str = "collapsed_log"
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
    landmarks: bool = False
    inner_cycles: int | str = "auto"

    def validate(self) -> SweepConfig:
        """Check the settings both models share (the likelihood checks its own); returns self."""
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
        if h.bias_prior_var <= 0:
            raise ValueError("bias_prior_var must be positive")
        if not self.pairs_per_kernel > 0:
            raise ValueError(f"pairs_per_kernel must be positive; got {self.pairs_per_kernel}")
        if int(self.n_active) < 1:
            raise ValueError(f"n_active must be at least 1; got {self.n_active}")
        if self.nu_update not in NU_UPDATES:
            raise ValueError(f"nu_update must be one of {NU_UPDATES}; got {self.nu_update!r}")
        if not self.nu_max > 0:
            raise ValueError(f"nu_max must be positive; got {self.nu_max}")
        if self.inner_cycles != "auto" and not (
            isinstance(self.inner_cycles, int | np.integer) and self.inner_cycles >= 0
        ):
            raise ValueError(
                f"inner_cycles must be 'auto' or an int of at least 0; got {self.inner_cycles!r}"
            )
        if self.landmarks and self.nu_update == "collapsed":
            raise ValueError(
                "nu_update='collapsed' is for the exact model only; the landmark model updates "
                "nu by Gibbs (nu_update='gibbs')"
            )
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


#: The name the classifier's configuration has always had.
BM3KLConfig = SweepConfig


class ClassifierPosition(NamedTuple):
    """The classifier's current values (``State.z``); C one-vs-all problems, N points.

    Attributes
    ----------
    e : array (P,)
        Expanded-mean kernel weights (w = e / Σe).
    a : array (C, N)
        Sample weights ((C, M) in the landmark model, docs/math.md §16).
    b : array (C,)
        Biases.
    lam : array (C, N)
        Augmentation variables λ of the hinge pseudo-likelihood.
    nu : array (C, N)
        TPBN local variances ν of a (shaped like a).
    varsigma : array (C, N)
        TPBN rates ς of ν (shaped like a).
    """

    e: jax.Array
    a: jax.Array
    b: jax.Array
    lam: jax.Array
    nu: jax.Array
    varsigma: jax.Array


class RegressorPosition(NamedTuple):
    """The regressor's current values (``State.z``); C = 1, N points.

    Attributes
    ----------
    e, a, b, nu, varsigma
        As in :class:`ClassifierPosition`.
    lam_plus, lam_minus : array (1, N)
        Augmentation variables λ⁺, λ⁻ of the upper and lower hinge of the ε-insensitive loss.
    c : array ()
        Scale of the loss.
    eps : array ()
        Half-width ε of the tube (constant when ε is fixed).
    """

    e: jax.Array
    a: jax.Array
    b: jax.Array
    lam_plus: jax.Array
    lam_minus: jax.Array
    nu: jax.Array
    varsigma: jax.Array
    c: jax.Array
    eps: jax.Array


#: Sites of the classifier's position (the keys ``init_params`` may set).
SITES = ClassifierPosition._fields


class State(NamedTuple):
    """What one sweep reads (a pytree): the chain's position and the move's carried state.

    Attributes
    ----------
    i : int32
        Number of sweeps done so far.
    z : ClassifierPosition or RegressorPosition
        Current values; the ``sample_field`` of the NumPyro adapter.
    r : array (P,)
        Momentum that the SGRHMC moves may carry from one sweep to the next.
    adapt_state : DualAveragingState
        Step-size adaptation state (the exact moves, during warm-up).
    mass_sqrt : array (P, P), or (0, 0) when the configuration learns no mass matrix
        Factor L of the HMC moves' inverse mass matrix L Lᵀ (identity until learnt). Without
        dense-mass adaptation no move reads it, so the state carries an empty array rather than
        P² numbers per chain (8,000 kernels: 0.5 GB).
    welford : WelfordState
        Running covariance of the HMC coordinates u over the mass-adaptation window (of size 0
        when the configuration learns no mass matrix).
    capped : int32
        Bits (:data:`CAPPED_LOOPS`, and those of the regressor's noise updates) of the inner
        loops that have stopped at their iteration cap in any sweep so far (kept once set,
        warm-up included). A capped loop gives NaN, so the draws from there on are unusable;
        the estimators raise ``SamplerDivergenceError`` naming the loop.
    hyper : Hyper or RegHyper
        The numeric hyper-parameters as arrays. They travel in the state rather than as
        compile-time constants, so one compiled sweep serves every value (a grid search over
        β_a or γ0 hits the persistent compilation cache); only static routes (α_a = 1, η ≡ 1)
        are read from :attr:`SweepConfig.hyper`.
    rng_key : PRNG key
        The key the next sweep splits.
    """

    i: jax.Array
    z: ClassifierPosition | RegressorPosition
    r: jax.Array
    adapt_state: DualAveragingState
    mass_sqrt: jax.Array
    welford: WelfordState
    capped: jax.Array
    hyper: object
    rng_key: jax.Array


class Info(NamedTuple):
    """What one sweep reports about itself (a pytree); no later sweep reads it.

    Attributes
    ----------
    step_size : float
        Step size the kernel-weight move used.
    accept_prob : float
        Metropolis–Hastings acceptance probability of the move (1 for moves without MH).
    diverging : bool
        Whether the move diverged or the new state's potential energy is not finite.
    potential_energy : float
        −log p(z, data) of the augmented model at the new state (up to a constant).
    f : array (C, N)
        Held-in decision values A K_w + b 1ᵀ of the new state (the run-length monitor reads
        them instead of recomputing K_w).
    """

    step_size: jax.Array
    accept_prob: jax.Array
    diverging: jax.Array
    potential_energy: jax.Array
    f: jax.Array


class ChainState(NamedTuple):
    """:class:`State`'s fields then :class:`Info`'s, as one record: the state of the NumPyro
    adapter and of :class:`~bayesmkl.sampler.runner.ChainRunner`, whose extra fields
    (``accept_prob``, ``diverging``, ``step_size``, ``potential_energy``) and key NumPyro reads
    as attributes. The fields are documented on :class:`State` and :class:`Info`."""

    i: jax.Array
    z: ClassifierPosition | RegressorPosition
    r: jax.Array
    adapt_state: DualAveragingState
    mass_sqrt: jax.Array
    welford: WelfordState
    capped: jax.Array
    hyper: object
    rng_key: jax.Array
    step_size: jax.Array
    accept_prob: jax.Array
    diverging: jax.Array
    potential_energy: jax.Array
    f: jax.Array

    @classmethod
    def join(cls, state: State, info: Info) -> ChainState:
        return cls(*state, *info)

    @property
    def state(self) -> State:
        """The :class:`State` part (what the next sweep reads)."""
        return State(*self[: len(State._fields)])

    @property
    def info(self) -> Info:
        """The :class:`Info` part (what the last sweep reported)."""
        return Info(*self[len(State._fields) :])


#: The name the chain's state has always had.
BM3KLState = ChainState


def hyper_arrays(hyper, P: int):
    """The hyper-parameters (a :class:`Hyper` or ``RegHyper``) as float64 arrays, η broadcast
    to ``(P,)``."""
    f = lambda v: jnp.asarray(v, dtype=jnp.float64)  # noqa: E731
    return type(hyper)(jnp.broadcast_to(f(hyper.eta), (P,)), *(f(v) for v in hyper[1:]))


def init_state(likelihood, rng_key, K, targets, config: SweepConfig, init_params=None):
    """Initial :class:`ChainState` (docs/math.md A13) of the model ``likelihood`` describes:
    e = 1, A = 0, b = 0, r = 0 and the likelihood's values of the other sites (λ = ν = ς = 1
    for the classifier; λ^± = ν = ς = c = 1 and ε = 0.1 or the fixed ε for the regressor).

    ``K: (P, N, N)`` (the landmark model's ``(P, N, M)``: a, ν, ς get M columns),
    ``targets: (C, N)``; ``init_params`` (a dict with any of the position's fields) overrides
    these values.
    """
    P = K.shape[0]
    C, N = targets.shape
    P_mass = P if config.adapts_mass else 0  # no move reads the metric without adaptation
    z = likelihood.init_position(P, C, N, K.shape[2])
    if init_params:
        unknown = set(init_params) - set(type(z)._fields)
        if unknown:
            raise ValueError(f"unknown init_params {sorted(unknown)}; known: {type(z)._fields}")
        z = z._replace(**{k: jnp.asarray(v, dtype=jnp.float64) for k, v in init_params.items()})
    zero = jnp.zeros(())
    state = State(
        i=jnp.zeros((), jnp.int32),
        z=z,
        r=jnp.zeros(P),
        adapt_state=dual_averaging_init(config.step_size),
        mass_sqrt=jnp.eye(P_mass),
        welford=welford_init(P_mass),
        capped=jnp.zeros((), jnp.int32),
        hyper=hyper_arrays(config.hyper, P),
        rng_key=rng_key,
    )
    info = Info(
        step_size=jnp.asarray(config.step_size, dtype=jnp.float64),
        accept_prob=zero,
        diverging=jnp.zeros((), bool),
        potential_energy=zero,
        f=jnp.zeros((C, N)),
    )
    return ChainState.join(state, info)


#: Step size at which dual averaging restarts once the mass matrix is learnt (x = L⁻¹u has
#: roughly unit scale, so the step is of order 1).
MASS_RESTART_STEP = 0.5
#: Fewest warm-up sweeps in the window for a covariance worth using.
MIN_MASS_WINDOW = 20


def mass_window(num_warmup: int):
    """Sweeps ``[lo, hi)`` whose HMC coordinates u estimate the mass matrix: the middle half of
    warm-up, leaving the last quarter to re-tune the step size; ``None`` if that is under
    ``MIN_MASS_WINDOW`` sweeps."""
    lo, hi = num_warmup // 4, (3 * num_warmup) // 4
    return (lo, hi) if hi - lo >= MIN_MASS_WINDOW else None
