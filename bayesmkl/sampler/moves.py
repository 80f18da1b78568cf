"""Kernel-weight moves for e | rest (docs/math.md §4), selectable by name.

Step-size moves are pure functions ``move(key, e, r, step_size, potential_and_grad) ->
MoveResult`` where ``potential_and_grad(e) -> (U, ∇U)`` is a potential of e (the conditional of
docs/math.md §3.4, or the collapsed one of :mod:`bayesmkl.sampler.collapsed`). ``r`` is the
momentum the SGRHMC moves may carry between iterations. Each named move is a :class:`MoveSpec`
record, so that the sweep reads its policy from data and tests no names.

============  ==================================================================  ==========
name          transition                                                          exact?
============  ==================================================================  ==========
"collapsed"   default: exact pairwise Gibbs on w | a, b, λ, then HMC in u = 2√e    yes
              + MH on the collapsed target w | λ, ν (sample weights of the
              active set and b integrated out), then (a, b) | w, λ, ν
"gibbs"       exact pairwise Gibbs on w | a, b, λ (truncated normals on simplex    yes
              edges; :mod:`bayesmkl.sampler.simplex`); no step size
"exact"       HMC in u = 2√e (RMHMC with G = diag(1/e), E2) + Metropolis–Hastings  yes
"rmala"       reflected Riemannian MALA with folded-normal MH correction (E3)      yes
"paper"       literal SGRHMC of eqs. (7)–(8): explicit Euler, |·| reflection, no   no (O(ε))
              MH (Ma, Chen & Fox 2015 with D, Q of paper §5.2)
"stable"      paper move with exact Ornstein–Uhlenbeck friction/noise, a floor     no (O(ε))
              e ≥ 1e-12·S; the sweep adds the scale refresh (docs/math.md §4.3)
============  ==================================================================  ==========

The SGRHMC moves ("paper", "stable") are biased by O(ε) and are there to reproduce the
paper's transition, not as defaults. Step sizes of the MH moves are tuned during warm-up by
dual averaging (Hoffman & Gelman 2014), towards ``MoveSpec.target_accept``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.stats import norm
from numpyro.infer.hmc_util import dual_averaging

from bayesmkl.sampler.simplex import LARGE_P

E_FLOOR = 1e-12  # relative floor e_m ≥ 1e-12·S of the stable move (docs/math.md §4.3, item 3)
DIVERGENCE_ENERGY = 1000.0


class MoveResult(NamedTuple):
    """Output of one kernel-weight move.

    Attributes
    ----------
    e : array (P,)
        New expanded-mean weights.
    r : array (P,)
        Momentum after the move (SGRHMC moves; exact moves return the input unchanged).
    accept_prob : float
        Metropolis–Hastings acceptance probability (1 for moves without MH).
    diverging : bool
        Energy error above 1000 (exact moves) or non-finite state (SGRHMC moves).
    """

    e: jax.Array
    r: jax.Array
    accept_prob: jax.Array
    diverging: jax.Array


def _sgrhmc(key, e, r, eps, pg, n_leapfrog, stable, flip_momentum):
    def body(carry, k):
        e, r = carry
        _, grad = pg(e)
        sq = jnp.sqrt(e)
        e_prop = e + eps * sq * r  # eq. (7), explicit Euler: uses r^(l)
        e_new = jnp.abs(e_prop)
        xi = jax.random.normal(k, e.shape)
        drift = r - eps * sq * grad + eps / (2.0 * sq)
        if stable:
            e_new = jnp.maximum(e_new, E_FLOOR * jnp.sum(e_new))
            decay = jnp.exp(-eps * e)
            r_new = decay * drift + jnp.sqrt(-jnp.expm1(-2.0 * eps * e)) * xi
        else:  # eq. (8) literally
            r_new = drift - eps * e * r + jnp.sqrt(2.0 * eps * e) * xi
        if flip_momentum:
            r_new = jnp.where(e_prop < 0, -r_new, r_new)
        return (e_new, r_new), None

    (e, r), _ = jax.lax.scan(body, (e, r), jax.random.split(key, n_leapfrog))
    ok = jnp.all(jnp.isfinite(e)) & jnp.all(jnp.isfinite(r))
    return MoveResult(e, r, jnp.ones(()), ~ok)


def paper_move(key, e, r, step_size, pg, *, n_leapfrog=10, flip_momentum=False):
    """Literal SGRHMC (eqs. 7–8): L explicit-Euler steps, |·| reflection, no MH. Biased O(ε)."""
    return _sgrhmc(key, e, r, step_size, pg, n_leapfrog, False, flip_momentum)


def stable_move(key, e, r, step_size, pg, *, n_leapfrog=10, flip_momentum=False):
    """SGRHMC with exact OU friction/noise and a relative floor on e (docs/math.md §4.3)."""
    return _sgrhmc(key, e, r, step_size, pg, n_leapfrog, True, flip_momentum)


#: Coordinates u(e) in which the HMC moves run: name → (u(e), e(u), (u, U, ∇U) ↦ (V, ∇V)),
#: with U, ∇U the potential of e and its gradient at e(u); V adds −log|de/du| (the Jacobian).
POSITIONS = {
    # u = 2√e: RMHMC for the metric G = diag(1/e), flat in u (E2); V has a −(2η−1) log|u| wall
    "sqrt": (
        lambda e: 2.0 * jnp.sqrt(e),
        lambda u: u**2 / 4.0,
        lambda u, U, gU: (U - jnp.sum(jnp.log(jnp.abs(u))), 0.5 * u * gU - 1.0 / u),
    ),
    # u = log e: no wall at e = 0; the Gamma(η, 1) prior becomes e − η log e, smooth everywhere
    "log": (
        jnp.log,
        jnp.exp,
        lambda u, U, gU: (U - jnp.sum(u), jnp.exp(u) * gU - 1.0),
    ),
}


def exact_hmc_move(
    key, e, r, step_size, pg, *, n_leapfrog=10, flip_momentum=False, mass_sqrt=None,
    position="sqrt",
):  # fmt: skip
    """HMC in u = 2√e (``position="sqrt"``) or u = log e (``"log"``), potential
    V(u) = U(e(u)) − Σ log|de/du| (E2), plus MH.

    With ``"sqrt"`` and identity mass this is Girolami–Calderhead RMHMC for the metric
    G = diag(1/e): the metric is flat in u, so the ordinary leapfrog is exact-volume-preserving
    and reversible. ``mass_sqrt`` (P, P), a constant factor L of the inverse mass matrix
    M⁻¹ = L Lᵀ (learnt in warm-up, :func:`welford_update`, in the same coordinates u), runs the
    same leapfrog in x = L⁻¹u, which aligns the steps with correlated directions such as the
    ridge between near-collinear kernels.
    """
    to_u, to_e, v_and_grad = POSITIONS[position]
    P = e.shape[0]
    if mass_sqrt is None and P < LARGE_P:
        mass_sqrt = jnp.eye(P)  # the products below as before: bit for bit the old draws
    if mass_sqrt is None:
        # identity mass from LARGE_P kernels on: no P × P products (at P = 8,000 the two per
        # leapfrog step dominated the sweep). The same draws up to rounding: I·g = g, but
        # XLA compiles the step otherwise (last bits differed).

        def lmt(g):
            return g

        def lm(p):
            return p
    else:

        def lmt(g):
            return g @ mass_sqrt  # Lᵀg, reading L row by row (mass_sqrt.T @ g read it by column)

        def lm(p):
            return mass_sqrt @ p

    def vgrad(u):
        return v_and_grad(u, *pg(to_e(u)))

    u0 = to_u(e)
    p0 = jax.random.normal(key, e.shape)
    V0, g0 = vgrad(u0)

    # The momentum sees the gradient through Lᵀ∇V only: a step's closing half-kick and the next
    # step's opening one share it, so it is carried and computed once per gradient.
    def leap(carry, _):
        u, p, Lg = carry
        p = p - 0.5 * step_size * Lg
        u = u + step_size * lm(p)
        _, g = vgrad(u)
        Lg = lmt(g)
        p = p - 0.5 * step_size * Lg
        return (u, p, Lg), None

    (u1, p1, _), _ = jax.lax.scan(leap, (u0, p0, lmt(g0)), None, length=n_leapfrog)
    V1, _ = vgrad(u1)
    dH = (V1 + 0.5 * jnp.sum(p1**2)) - (V0 + 0.5 * jnp.sum(p0**2))
    dH = jnp.where(jnp.isfinite(dH), dH, jnp.inf)
    accept_prob = jnp.minimum(1.0, jnp.exp(-dH))
    accept = jax.random.uniform(jax.random.fold_in(key, 1)) < accept_prob
    e_new = jnp.where(accept, to_e(u1), e)
    return MoveResult(e_new, r, accept_prob, dH > DIVERGENCE_ENERGY)


def _folded_logpdf(x, mean, var):
    sd = jnp.sqrt(var)
    return jnp.sum(jnp.logaddexp(norm.logpdf(x, mean, sd), norm.logpdf(-x, mean, sd)))


def rmala_move(key, e, r, step_size, pg, *, n_leapfrog=1, flip_momentum=False):
    """Reflected Riemannian MALA with G = diag(1/e) and a folded-normal MH correction (E3).

    Drift μ(e) = e + (h/2)(1 − e ⊙ ∇U(e)) = e + (h/2)(η − e − w ⊙ (g − wᵀg)); proposal
    e* = |μ(e) + √(h e) ⊙ z|. ``n_leapfrog`` MH steps are taken per call.
    """
    h = step_size

    def step(carry, k):
        e, U, gU, _ = carry
        mu = e + 0.5 * h * (1.0 - e * gU)
        kz, ku = jax.random.split(k)
        e_star = jnp.abs(mu + jnp.sqrt(h * e) * jax.random.normal(kz, e.shape))
        U_s, gU_s = pg(e_star)
        mu_s = e_star + 0.5 * h * (1.0 - e_star * gU_s)
        log_alpha = (
            (U - U_s) + _folded_logpdf(e, mu_s, h * e_star) - _folded_logpdf(e_star, mu, h * e)
        )
        log_alpha = jnp.where(jnp.isfinite(log_alpha), log_alpha, -jnp.inf)
        acc_p = jnp.minimum(1.0, jnp.exp(log_alpha))
        accept = jax.random.uniform(ku) < acc_p
        new = (
            jnp.where(accept, e_star, e),
            jnp.where(accept, U_s, U),
            jnp.where(accept, gU_s, gU),
            acc_p,
        )
        return new, acc_p

    U0, g0 = pg(e)
    (e, _, _, _), accs = jax.lax.scan(
        step, (e, U0, g0, jnp.zeros(())), jax.random.split(key, n_leapfrog)
    )
    return MoveResult(e, r, jnp.mean(accs), ~jnp.all(jnp.isfinite(e)))


class MoveSpec(NamedTuple):
    """Policy of a named kernel-weight move, read by the sweep.

    Attributes
    ----------
    name : str
    exact : bool
        Whether the move leaves the posterior exactly invariant.
    step : callable or None
        Step-size move applied after the pairwise Gibbs updates (``None``: none).
    target_accept : float or None
        Dual-averaging target of the step size during warm-up (``None``: no adaptation; the
        step size is the user's, possibly on the ε/t schedule).
    pairwise : bool
        Start with exact pairwise Gibbs updates of w | a, b, λ.
    collapsed : bool
        ``step`` acts on the collapsed target w | λ, ν, and (a, b) are drawn right after it.
    scale_refresh : bool
        Default for the exact scale refresh e ← w·Gamma(Ση, 1) after the move.
    dense_mass : bool
        ``step`` accepts ``mass_sqrt``, a dense inverse-mass factor learnt during warm-up.
    position : str
        Coordinates of an HMC ``step`` (a key of :data:`POSITIONS`), in which the mass matrix is
        learnt too.
    """

    name: str
    exact: bool
    step: object
    target_accept: float | None
    pairwise: bool = False
    collapsed: bool = False
    scale_refresh: bool = True
    dense_mass: bool = False
    position: str = "sqrt"


MOVE_SPECS = {
    "collapsed": MoveSpec(
        "collapsed", True, exact_hmc_move, 0.8, pairwise=True, collapsed=True, dense_mass=True
    ),
    "collapsed_log": MoveSpec(
        "collapsed_log",
        True,
        exact_hmc_move,
        0.8,
        pairwise=True,
        collapsed=True,
        dense_mass=True,
        position="log",
    ),
    "gibbs": MoveSpec("gibbs", True, None, None, pairwise=True),
    "exact": MoveSpec("exact", True, exact_hmc_move, 0.8, dense_mass=True),
    "rmala": MoveSpec("rmala", True, rmala_move, 0.574),
    "paper": MoveSpec("paper", False, paper_move, None, scale_refresh=False),
    "stable": MoveSpec("stable", False, stable_move, None),
}
MOVES = tuple(MOVE_SPECS)
EXACT_MOVES = tuple(k for k, m in MOVE_SPECS.items() if m.exact)
TARGET_ACCEPT = {k: m.target_accept for k, m in MOVE_SPECS.items() if m.target_accept}


# --------------------------------------------------------------------------------------------
# Dual-averaging step-size adaptation (Nesterov 2009; Hoffman & Gelman 2014, §3.2.1)
# --------------------------------------------------------------------------------------------
class DualAveragingState(NamedTuple):
    """State of dual averaging on log ε.

    Attributes
    ----------
    log_step : float
        log ε used for the next iteration during warm-up.
    log_step_avg : float
        Averaged log ε̄, used after warm-up.
    h_bar : float
        Running average of (target − acceptance).
    count : int
        Number of updates so far.
    mu : float
        Shrinkage target log(10 ε₀).
    """

    log_step: jax.Array
    log_step_avg: jax.Array
    h_bar: jax.Array
    count: jax.Array
    mu: jax.Array


#: NumPyro's dual averaging (Hoffman & Gelman's constants t0 = 10, κ = 0.75, γ = 0.05); its state
#: tuple is (x_t, x̄_t, ḡ_t, t, prox_center), the fields of :class:`DualAveragingState` in order.
_DA_INIT, _DA_UPDATE = dual_averaging(t0=10, kappa=0.75, gamma=0.05)


def dual_averaging_init(step_size) -> DualAveragingState:
    """State before the first update: ε₀ is used until then, and the shrinkage target is
    log(10 ε₀) (NumPyro's HMC does the same)."""
    log_eps = jnp.log(jnp.asarray(step_size, dtype=jnp.float64))
    _, _, g_avg, count, mu = _DA_INIT(jnp.log(10.0) + log_eps)
    return DualAveragingState(log_eps, log_eps, g_avg, count, mu)


def dual_averaging_update(state: DualAveragingState, accept_prob, target) -> DualAveragingState:
    """One update of :func:`numpyro.infer.hmc_util.dual_averaging` with statistic
    ``target − accept_prob``."""
    return DualAveragingState(*_DA_UPDATE(target - accept_prob, tuple(state)))


# --------------------------------------------------------------------------------------------
# Dense mass-matrix adaptation (Welford covariance of u = 2√e over a warm-up window, Stan-style
# shrinkage towards a small multiple of the identity)
# --------------------------------------------------------------------------------------------
class WelfordState(NamedTuple):
    """Running mean and scatter matrix of u.

    Attributes
    ----------
    count : int
    mean : array (P,)
    m2 : array (P, P)
        Σ (u − mean)(u − mean)ᵀ over the values seen.
    """

    count: jax.Array
    mean: jax.Array
    m2: jax.Array


def welford_init(P: int) -> WelfordState:
    return WelfordState(jnp.zeros((), jnp.int32), jnp.zeros(P), jnp.zeros((P, P)))


def welford_update(state: WelfordState, u) -> WelfordState:
    n = state.count + 1
    d = u - state.mean
    mean = state.mean + d / n.astype(jnp.float64)
    return WelfordState(n, mean, state.m2 + jnp.outer(d, u - mean))


def mass_sqrt_from(state: WelfordState):
    """Cholesky factor of the regularised covariance (n/(n+5))·S + 1e-3·(5/(n+5))·I."""
    n = state.count.astype(jnp.float64)
    cov = state.m2 / jnp.maximum(n - 1.0, 1.0)
    cov = (n / (n + 5.0)) * cov + 1e-3 * (5.0 / (n + 5.0)) * jnp.eye(cov.shape[0])
    return jnp.linalg.cholesky(cov)
