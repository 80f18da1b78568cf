"""The BM3KL Gibbs sweep: a pure functional core and a thin NumPyro ``MCMCKernel`` around it.

One sweep, in the paper's order (spec §5):

1. Φ = A·K_m for all m (one GEMM over the stored kernels);
2. the kernel-weight move on e, as its :class:`~bayesmkl.inference.moves.MoveSpec` says: exact
   pairwise Gibbs updates of w | a, b, λ, then a step-size move (on the conditional of e, or on
   the collapsed target w | λ, ν), then, except for the literal ``"paper"`` move, the exact
   scale refresh e ← w·Gamma(Ση, 1);
3. K_w = Σ w_m K_m (one GEMV), then λ | rest and (a, b) | rest (Matheron's rule, batched over
   classes) — in the order (a, b) → λ after a collapsed move, since that move integrated (a, b)
   out and they must be drawn given the new w before anything else conditions on them;
4. ν | a, ς and ς | ν — or, with ``nu_update="collapsed"``, the collapsed TPBN block of
   :mod:`bayesmkl.inference.tpbn` (each ν_ci | w, λ, ν_{-ci} with a, b, ς integrated out, then
   ς | ν and (a, b) | w, λ, ν).

The whole sweep is one jitted function of ``(state, K, delta)``; it is compiled once per data
shape and configuration. The kernels ``K: (P, N, N)`` and targets ``delta: (C, N)`` are the
*model arguments* (``MCMC.run(key, K, delta)``), never closure constants, so they are not baked
into the compiled program; run :class:`numpyro.infer.MCMC` with ``jit_model_args=True``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from bayesmkl._x64 import x64_enabled
from bayesmkl.inference import collapsed as coll
from bayesmkl.inference import conditionals as cond
from bayesmkl.inference import simplex, tpbn
from bayesmkl.inference.moves import (
    MOVE_SPECS,
    MOVES,
    DualAveragingState,
    WelfordState,
    dual_averaging_init,
    dual_averaging_update,
    mass_sqrt_from,
    welford_init,
    welford_update,
)
from bayesmkl.likelihood import pseudo_observations
from bayesmkl.model import Hyper, bm3kl_model, combine_kernels, decision_values, log_joint

SITES = ("e", "a", "b", "lam", "nu", "varsigma")
NU_UPDATES = ("gibbs", "collapsed")


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
        Flip r's sign on reflection (spec A7; the paper does not).
    scale_refresh : bool or None
        Exact scale refresh after the move; ``None`` means the move's default (on unless the
        move is 'paper').
    pairs_per_kernel : float
        Pairwise Gibbs updates per sweep, as a multiple of P (moves "gibbs" and "collapsed").
    n_active : int
        Sample weights per class integrated out by the collapsed move (the largest ν); capped
        at N and by memory (:func:`bayesmkl.inference.collapsed.n_active_for`).
    dense_mass : bool
        Learn a dense inverse mass matrix for the HMC moves during warm-up (the covariance of
        u = 2√e over the middle half of warm-up; :func:`mass_window`). Off by default: on
        breast cancer (bsvm16, 4 chains) it did not raise the smallest ESS of w.
    nu_update : str
        ``"gibbs"`` (default): ν | a, ς then ς | ν (spec §3.3). ``"collapsed"``: the exact
        collapsed block of :mod:`bayesmkl.inference.tpbn` (one O(N³) sweep over all points per
        class, plus one more (a, b) draw).
    nu_max : float
        Upper bound of ν under ``nu_update="collapsed"`` (a truncation of the TPB prior that
        keeps Σ factorisable; :mod:`bayesmkl.inference.tpbn`).
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
    n_active: int = 64
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
        """The :class:`~bayesmkl.inference.moves.MoveSpec` of ``move``."""
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
    hyper: Hyper
    rng_key: jax.Array


def hyper_arrays(hyper: Hyper, P: int) -> Hyper:
    """The hyper-parameters as float64 arrays (η broadcast to ``(P,)``)."""
    f = lambda v: jnp.asarray(v, dtype=jnp.float64)
    return Hyper(jnp.broadcast_to(f(hyper.eta), (P,)), *(f(v) for v in hyper[1:]))


def init_state(rng_key, K, delta, config: BM3KLConfig, init_params=None) -> BM3KLState:
    """Initial state (spec A13): e = 1, A = 0, b = 0, λ = ν = ς = 1, r = 0.

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
        hyper=hyper_arrays(config.hyper, P),
        rng_key=rng_key,
    )


def sweep(
    state: BM3KLState, K, delta, config: BM3KLConfig, num_warmup: int, weight=None
) -> BM3KLState:
    """One Gibbs sweep (pure); returns the next state.

    ``K: (P, N, N)``, ``delta: (C, N)``, ``weight``: sample weights ``(N,)`` or ``None``
    (unweighted; :mod:`bayesmkl.likelihood`).
    """
    h = state.hyper  # traced values; config.hyper only decides the static routes below
    spec = config.spec
    eta = h.eta
    z = state.z
    P, C, N = K.shape[0], delta.shape[0], delta.shape[1]
    key, k_r, k_g, k_e, k_s, k_lam, k_ab, k_nu, k_vs = jax.random.split(state.rng_key, 9)

    # (1) kernel weights
    Phi = cond.per_kernel_decisions(K, z["a"])
    T, V = pseudo_observations(delta, z["lam"], weight)
    e = z["e"]
    if spec.pairwise:
        n_pairs = max(1, int(np.ceil(config.pairs_per_kernel * P)))
        e = simplex.sample_w_exact(
            k_g, e, Phi, z["b"], T, V, eta, n_pairs, eta_is_one=config.eta_is_one
        )

    t = (state.i + 1).astype(jnp.float64)
    warm = state.i < num_warmup
    if config.adapts:
        step_size = jnp.exp(
            jnp.where(warm, state.adapt_state.log_step, state.adapt_state.log_step_avg)
        )
    elif config.step_schedule == "inverse":
        step_size = config.step_size / t
    else:
        step_size = jnp.asarray(config.step_size, dtype=jnp.float64)
    r = jax.random.normal(k_r, state.r.shape) if config.refresh_momentum else state.r
    accept_prob, diverging, r_new = jnp.ones(()), jnp.zeros((), bool), r
    s_act = coll.n_active_for(P, C, N, config.n_active) if spec.collapsed else 0
    collapsed = s_act > 0
    if spec.step is not None:
        if collapsed:
            data = coll.collapsed_setup(K, z["a"], z["nu"], Phi, s_act)
            pg = coll.collapsed_potential_and_grad(data, T, V, h.bias_prior_var, eta)
        else:

            def pg(e):
                return cond.e_potential_and_grad(e, Phi, z["b"], delta, z["lam"], eta, weight)

        extra = {"mass_sqrt": state.mass_sqrt} if config.adapts_mass else {}
        res = spec.step(
            k_e, e, r, step_size, pg,
            n_leapfrog=config.n_leapfrog, flip_momentum=config.flip_momentum, **extra,
        )  # fmt: skip
        e, accept_prob, diverging, r_new = res.e, res.accept_prob, res.diverging, res.r
    if config.uses_scale_refresh:
        e = cond.sample_scale(k_s, e, eta)
    adapt_state = state.adapt_state
    if config.adapts:
        new_adapt = dual_averaging_update(adapt_state, accept_prob, spec.target_accept)
        adapt_state = _select(warm, new_adapt, adapt_state)
    mass_sqrt, welford = state.mass_sqrt, state.welford
    window = mass_window(num_warmup) if config.adapts_mass else None
    if window is not None:
        lo, hi = window
        collect = (state.i >= lo) & (state.i < hi)
        welford = _select(collect, welford_update(welford, 2.0 * jnp.sqrt(e)), welford)
        done = state.i == hi - 1  # new metric; restart dual averaging from a step of order 1
        mass_sqrt = jnp.where(done, mass_sqrt_from(welford), mass_sqrt)
        adapt_state = _select(done, dual_averaging_init(MASS_RESTART_STEP), adapt_state)

    w = e / jnp.sum(e)
    Kw = combine_kernels(K, w)
    tau = h.bias_prior_var
    if collapsed:  # (a, b) were integrated out: draw them given the new w first
        a, b = cond.sample_ab(k_ab, Kw, delta, z["lam"], z["nu"], tau, weight)
        lam = cond.sample_lam(k_lam, decision_values(Kw, a, b), delta, h.gamma0, weight)
    else:  # the paper's order: λ | w, a, b, then (a, b) | w, λ, ν
        f = decision_values(Kw, z["a"], z["b"])
        lam = cond.sample_lam(k_lam, f, delta, h.gamma0, weight)
        a, b = cond.sample_ab(k_ab, Kw, delta, lam, z["nu"], tau, weight)
    # (4) TPBN
    if config.nu_update == "collapsed":  # conditions on (w, λ) only; ends with (a, b) | w, λ, ν
        nu, varsigma, a, b = tpbn.collapsed_nu_step(
            k_nu, Kw, delta, lam, z["nu"], h, config.nu_max, weight
        )
    else:
        nu = cond.sample_nu(k_nu, a, z["varsigma"], h.alpha_a, config.hyper.alpha_a == 1.0)
        varsigma = cond.sample_varsigma(k_vs, nu, h.alpha_a, h.beta_a, h.kappa)

    z_new = {"e": e, "a": a, "b": b, "lam": lam, "nu": nu, "varsigma": varsigma}
    pe = -log_joint(z_new, decision_values(Kw, a, b), delta, h, weight)
    return BM3KLState(
        i=state.i + 1,
        z=z_new,
        r=r_new,
        step_size=step_size,
        accept_prob=accept_prob,
        diverging=diverging | ~jnp.isfinite(pe),
        potential_energy=pe,
        adapt_state=adapt_state,
        mass_sqrt=mass_sqrt,
        welford=welford,
        hyper=h,
        rng_key=key,
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


def _select(pred, new, old):
    return jax.tree.map(lambda n, o: jnp.where(pred, n, o), new, old)


class BM3KL(MCMCKernel):
    """BM3KL Gibbs sampler as a NumPyro MCMC kernel.

    Parameters
    ----------
    eta, alpha_a, beta_a, kappa, bias_prior_var, gamma0 : float
        Model hyper-parameters (see :class:`bayesmkl.model.Hyper`); ``eta`` may be a vector (P,).
    move : {"collapsed", "gibbs", "exact", "rmala", "paper", "stable"}
        Kernel-weight move (:mod:`bayesmkl.inference.moves`); "collapsed" is the default.
    step_size, n_leapfrog, step_schedule, adapt_step_size, refresh_momentum, flip_momentum,
    scale_refresh, pairs_per_kernel, n_active, dense_mass, nu_update, nu_max
        See :class:`BM3KLConfig`.

    Examples
    --------
    >>> from numpyro.infer import MCMC
    >>> mcmc = MCMC(BM3KL(gamma0=100.0), num_warmup=180, num_samples=20, jit_model_args=True)
    >>> mcmc.run(jax.random.key(0), K, delta)          # doctest: +SKIP
    >>> mcmc.get_samples()["w"].shape                    # doctest: +SKIP
    (20, P)
    """

    sample_field = "z"

    def __init__(
        self,
        eta=1.0,
        alpha_a=1.0,
        beta_a=0.1,
        kappa=1e-10,
        bias_prior_var=1e-4,
        gamma0=100.0,
        *,
        move="collapsed",
        step_size=0.01,
        n_leapfrog=10,
        step_schedule="constant",
        adapt_step_size=True,
        refresh_momentum=True,
        flip_momentum=False,
        scale_refresh=None,
        pairs_per_kernel=4.0,
        n_active=64,
        dense_mass=False,
        nu_update="gibbs",
        nu_max=tpbn.NU_MAX,
    ):
        eta = tuple(np.asarray(eta, dtype=float).ravel()) if np.ndim(eta) else float(eta)
        hyper = Hyper(eta, float(alpha_a), float(beta_a), float(kappa), float(bias_prior_var),
                      float(gamma0))  # fmt: skip
        self.config = BM3KLConfig(
            hyper, move, float(step_size), int(n_leapfrog), step_schedule,
            bool(adapt_step_size), bool(refresh_momentum), bool(flip_momentum), scale_refresh,
            float(pairs_per_kernel), int(n_active), bool(dense_mass), str(nu_update),
            float(nu_max),
        ).validate()  # fmt: skip
        self._num_warmup = 0
        self._sample_fn = None

    @property
    def model(self):
        """The augmented NumPyro model this kernel samples (``model(K, delta[, weight])``)."""
        return partial(bm3kl_model, hyper=self.config.hyper, augmented=True)

    @property
    def default_fields(self):
        return ("z",)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        K, delta, weight = _unpack_args(model_args, model_kwargs)
        _check_weight(weight, delta.shape[1])
        if not x64_enabled():
            raise RuntimeError(
                "the BM3KL sweep needs 64-bit JAX: run it inside bayesmkl._x64.x64_scope() or "
                'after jax.config.update("jax_enable_x64", True)'
            )
        if np.ndim(self.config.hyper.eta) and len(self.config.hyper.eta) != K.shape[0]:
            raise ValueError(
                f"eta has {len(self.config.hyper.eta)} entries but there are {K.shape[0]} kernels"
            )
        self._num_warmup = int(num_warmup)
        config, nw = self.config, self._num_warmup

        def one_sweep(state, K, delta, weight):
            return sweep(state, K, delta, config, nw, weight)

        if is_prng_key(rng_key):
            self._sample_fn = jax.jit(one_sweep)
            return init_state(rng_key, K, delta, self.config, init_params)
        # chain_method="vectorized": one key per chain (and init_params with a chain axis)
        self._sample_fn = jax.jit(jax.vmap(one_sweep, in_axes=(0, None, None, None)))
        return jax.vmap(lambda k, p: init_state(k, K, delta, self.config, p))(rng_key, init_params)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, *_unpack_args(model_args, model_kwargs))

    def postprocess_fn(self, model_args, model_kwargs):
        def add_w(z):
            return {**z, "w": z["e"] / jnp.sum(z["e"], axis=-1, keepdims=True)}

        return add_w

    def get_diagnostics_str(self, state):
        if self.config.adapts:
            return f"step {float(state.step_size):.2e}, acc {float(state.accept_prob):.2f}"
        return f"S={float(jnp.sum(state.z['e'])):.3g}, -lp {float(state.potential_energy):.4g}"


def _unpack_args(model_args, model_kwargs):
    """``(K, delta, weight)`` from ``MCMC.run(key, K, delta[, weight])`` (or keywords)."""
    if model_kwargs and "K" in model_kwargs:
        return model_kwargs["K"], model_kwargs["delta"], model_kwargs.get("weight")
    if len(model_args) not in (2, 3):
        raise ValueError("BM3KL expects MCMC.run(rng_key, K, delta) or (rng_key, K, delta, weight)")
    K, delta, *rest = model_args
    return K, delta, (rest[0] if rest else None)


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
