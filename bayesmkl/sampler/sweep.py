"""One Gibbs sweep for either model: :func:`build_sweep` composes the steps of
:mod:`bayesmkl.sampler.steps` around a likelihood.

A sweep, given pseudo-observations (T, V) of f from the current augmentation variables
(the likelihood's ``pseudo_observations``):

1. Φ = A·K_m for all m (one GEMM over the stored kernels);
2. the kernel-weight move on e (:func:`~bayesmkl.sampler.steps.kernel_weight_step`), as the
   configuration's :class:`~bayesmkl.sampler.moves.MoveSpec` says;
3. K_w = Σ w_m K_m (one GEMV), then the Gaussian (a, b) step and the likelihood's augmentation
   step: (a, b) first after a collapsed move (which integrated (a, b) out, so they must be drawn
   given the new w before anything else conditions on them) or when the likelihood says so
   (``ab_first``, the regressor), else the augmentation first (the classifier's paper order
   λ → (a, b));
4. the TPBN step: ν | a, ς and ς | ν, or, with ``nu_update="collapsed"``, the collapsed block
   of :mod:`bayesmkl.sampler.tpbn` (which ends with its own (a, b) draw);
5. :func:`~bayesmkl.sampler.steps.inner_cycles_for` more cycles of the blocks that condition
   on w: the augmentation, (a, b), the TPBN step (keys from ``fold_in(next, 1)``; by default
   none for the exact model, 1 to 8 for the landmark model).

A likelihood is a small hashable record (:class:`bayesmkl.sampler.sampler.Classification`,
:class:`bayesmkl.sampler.regression.Regression`) with

* ``keys``: the names of the PRNG keys a sweep splits from ``State.rng_key``, in split order
  (``"next"`` is the next sweep's key; ``"r", "g", "e", "s"`` the kernel-weight step's;
  ``"ab"``, ``"nu"``, ``"vs"`` the (a, b) and TPBN steps'; the rest the augmentation's);
* ``point_sites``: the sites of the position with one value per training point (the
  augmentation variables; a landmark fit need not store their draws);
* ``ab_first`` (bool), ``init_position(P, C, N)``, ``pseudo_observations(z, targets, weight,
  margin) -> (T, V)``, ``e_conditional(z, Phi, T, V, targets, eta, weight, margin) -> pg``
  (the potential of e given a, b and the augmentation, for moves that are not collapsed),
  ``augment(keys, f, z, targets, hyper, weight, margin) -> (updates, capped bits or None)``,
  ``log_joint(z, f, targets, hyper, weight, margin)``.

The sweep is a pure function of ``(state, K, targets, weight, margin)``: the kernels and targets
are arguments, never closure constants, so they are not baked into the compiled program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesmkl.model.classification import (
    combine_kernels,
    decision_values,
    is_landmark,
    landmark_decision_values,
)
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler import steps
from bayesmkl.sampler.state import Info, State, SweepConfig

__all__ = ["build_sweep"]


def build_sweep(likelihood, config: SweepConfig, num_warmup: int):
    """The pure sweep ``(state, K, targets, weight=None, margin=None) -> (State, Info)`` of the
    model ``likelihood`` describes, with the kernel-weight move and TPBN update of ``config``
    and step-size and mass adaptation during the first ``num_warmup`` sweeps.

    ``K: (P, N, N)`` (or the landmark model's ``(P, N, M)``, docs/math.md §16: read so when it is
    not square or ``config.landmarks`` is set; then a, ν, ς are ``(C, M)``, f = A K_wᵀ + b 1ᵀ and
    (a, b) is drawn in weight space), ``targets: (C, N)`` (the classifier's signed targets Δ,
    the regressor's standardised y with C = 1), ``weight``: sample weights ``(N,)`` or ``None``,
    ``margin``: margins ``(C, N)`` or ``None`` (classifier only; :mod:`bayesmkl.model.likelihood`).
    """
    num_warmup = int(num_warmup)
    collapsed_tpbn = config.nu_update == "collapsed"
    ig_shortcut = config.hyper.alpha_a == 1.0

    def tpbn_step(k_nu, k_vs, z, h, Kw, T, V, landmark):
        """The TPBN step: ν | a, ς and ς | ν, or the collapsed block (which ends with (a, b) |
        w, T, V, ν). Returns the new position and the capped bit (``None`` if none)."""
        if collapsed_tpbn:  # conditions on (w, T, V) only
            if landmark:
                raise ValueError(
                    "nu_update='collapsed' needs the exact model's square kernels; the landmark "
                    "model updates nu by Gibbs (nu_update='gibbs')"
                )
            nu, varsigma, a, b, hit = steps.tpbn_collapsed_step(
                k_nu, Kw, T, V, z.nu, h, config.nu_max
            )
            return z._replace(a=a, b=b, nu=nu, varsigma=varsigma), hit
        nu, varsigma = steps.tpbn_gibbs_step(k_nu, k_vs, z.a, z.varsigma, h, ig_shortcut)
        return z._replace(nu=nu, varsigma=varsigma), None

    def sweep(state: State, K, targets, weight=None, margin=None) -> tuple[State, Info]:
        h = state.hyper  # traced values; config.hyper only decides static routes
        # the landmark model (docs/math.md §16): K (P, N, M), (a, b) drawn in weight space
        landmark = is_landmark(K, config.landmarks)
        dv = landmark_decision_values if landmark else decision_values
        z = state.z
        split = jax.random.split(state.rng_key, len(likelihood.keys))
        k = dict(zip(likelihood.keys, split, strict=True))

        def tv(z):
            return likelihood.pseudo_observations(z, targets, weight, margin)

        # (1)-(2) kernel weights given (T, V)
        Phi = cond.per_kernel_decisions(K, z.a)
        T, V = tv(z)
        pg = likelihood.e_conditional(z, Phi, T, V, targets, h.eta, weight, margin)
        ws = steps.kernel_weight_step(
            (k["r"], k["g"], k["e"], k["s"]), state, K, Phi, T, V, config, num_warmup, pg
        )
        Kw = combine_kernels(K, ws.e / jnp.sum(ws.e))
        tau = h.bias_prior_var

        def augment_then_ab(keys, z):
            """The augmentation | f, then (a, b) | w, T, V, ν; returns the new position, its
            (T, V) and the augmentation's capped bit (``None`` if none)."""
            aug, hit = likelihood.augment(keys, dv(Kw, z.a, z.b), z, targets, h, weight, margin)
            z = z._replace(**aug)
            T, V = tv(z)
            a, b = steps.gaussian_ab_step(keys["ab"], Kw, T, V, z.nu, tau, landmark)
            return z._replace(a=a, b=b), T, V, hit

        # (3) (a, b) and the augmentation, in the order the move and the likelihood need
        if ws.collapsed or likelihood.ab_first:
            a, b = steps.gaussian_ab_step(k["ab"], Kw, T, V, z.nu, tau, landmark)
            aug, hit = likelihood.augment(k, dv(Kw, a, b), z, targets, h, weight, margin)
            z = z._replace(a=a, b=b, **aug)
            if collapsed_tpbn:
                T, V = tv(z)
        else:
            z, T, V, hit = augment_then_ab(k, z)
        capped = ws.capped if hit is None else ws.capped | hit
        # (4) TPBN
        z, hit = tpbn_step(k["nu"], k["vs"], z, h, Kw, T, V, landmark)
        capped = capped if hit is None else capped | hit
        z = z._replace(e=ws.e)
        # (5) extra cycles of the blocks given w: augmentation, (a, b), TPBN
        P, N, M = K.shape
        n_cycles = steps.inner_cycles_for(config, P, targets.shape[0], N, M, landmark)
        if n_cycles:
            keys = jax.random.split(jax.random.fold_in(k["next"], 1), n_cycles)

            def cycle(carry, key):
                z, capped = carry
                kc = dict(zip(likelihood.keys, jax.random.split(key, len(likelihood.keys)),
                              strict=True))  # fmt: skip
                z, T, V, hit = augment_then_ab(kc, z)
                capped = capped if hit is None else capped | hit
                z, hit = tpbn_step(kc["nu"], kc["vs"], z, h, Kw, T, V, landmark)
                return (z, capped if hit is None else capped | hit), None

            (z, capped), _ = jax.lax.scan(cycle, (z, capped), keys)
        f = dv(Kw, z.a, z.b)
        pe = -likelihood.log_joint(z, f, targets, h, weight, margin)
        new_state = State(
            i=state.i + 1, z=z, r=ws.r, adapt_state=ws.adapt_state, mass_sqrt=ws.mass_sqrt,
            welford=ws.welford, capped=capped, hyper=h, rng_key=k["next"],
        )  # fmt: skip
        info = Info(
            step_size=ws.step_size, accept_prob=ws.accept_prob,
            diverging=ws.diverging | ~jnp.isfinite(pe), potential_energy=pe, f=f,
        )  # fmt: skip
        return new_state, info

    return sweep
