"""The range of each model hyper-parameter in which the sampler's float64 arithmetic stays finite.

:class:`~bayesmkl.BM3KLClassifier` and the ``bayesmkl`` command refuse values outside these
closed intervals at ``fit`` (:func:`bayesmkl.estimators._validation.check_hyper`, with the shared
wording);
outside them a fit may hang or end in a ``SamplerDivergenceError``. This module imports
nothing, so the command line can show the ranges in its help without importing JAX.

How the bounds were found: the jitted sweep on a small problem (N = 30; P = 2, 3 and
16 kernels) with one hyper-parameter at a time set to 1e-300, 1e-280, …, 1e300 (then finer
near the edges) and the others at the defaults, for the moves "collapsed" (the default),
"gibbs" and "exact" and both ν updates, 4-32 chains of 200-2000 sweeps each. A run *fails* when a
site or the potential becomes non-finite; the share of sweeps flagged ``diverging`` (an energy
error above 1000 in the exact HMC step of the default move, about 0.01-0.03 at the defaults)
shows where the arithmetic degrades before it fails.

* ``eta`` ≥ 0.02: the scale draw e = w·Gamma(Ση) underflows (P(Gamma(k) < 1e-308) = e^{−709k})
  and w = e/Σe becomes 0/0. With P = 2, η = 0.007 failed in 9 of 32 chains within 2000 sweeps
  and η = 0.01 in none; a chain fails at about 3·e^{−709·Ση} per sweep, below 1e-12 for η ≥
  0.02 and P ≥ 2. ``eta`` ≤ 1e6: the Gamma sampler loses its acceptance test to rounding for
  shapes above 1e12 (NaN draws from 1e13, 41 % at 1e17; η = 1e15 and 1e20 failed in every move),
  so Ση stays below that for up to 1e6 kernels.
* ``alpha_a``, ``beta_a`` ≥ 0.02: α_a + β_a is the shape of ς's Gamma draws (C·N per sweep), which
  underflow alike: α_a = β_a = 0.005 failed (16 chains × 1000 sweeps), 0.01 did not. ≤ 1e6: the
  same Gamma limit (1e12 failed).
* ``kappa`` ≤ 1e10: ``diverging`` jumps from 0.04 at 1e10 to 0.75 at 1e12 (0.9 at 1e20; 1e300
  fails: ν ≈ 1/κ underflows). ≥ 1e-200: finite down to 1e-300, but the collapsed ν update's
  support θ = log ν ≥ −600 must still hold the scales of pruned points (ν ~ κ).
* ``gamma0`` ≤ 1e8: λ ~ 1/γ0 is the pseudo-noise variance, so the quadratic forms grow with γ0;
  ``diverging`` rises steadily, 0.08 at 1e4 (the paper's largest), 0.20 at 1e8, 0.43 at 1e18,
  0.67 at 1e20 and 0.99 at 1e300 (where the old code hung on the NaN that followed).
* ``bias_prior_var`` ≤ 1e20: ``diverging`` stays at 0.01 up to 1e26 and rises from 1e28 (0.16 at
  1e40, 0.34 at 1e60; before the truncated-normal fix the kernel-weight draws lost their
  rejection test to rounding there). ≥ 1e-100: finite down to 1e-300 (τ → 0 pins b at 0).

The box as a whole: at all 64 corners (each bound at its end), 4 chains × 200 sweeps each with
the moves "collapsed" and "exact" and with the collapsed ν update, every chain stayed finite and
no loop hit its cap; ``diverging`` is at most 0.67, at corners that combine the upper ends of
α_a (or η), κ, τ and γ0 (median 0.14 with the default move): ``fit`` then warns.
"""

from __future__ import annotations

__all__ = ["HYPER_BOUNDS"]

#: ``{name: (smallest, largest)}`` allowed value of each hyper-parameter (closed intervals;
#: every entry of a vector ``eta``).
HYPER_BOUNDS = {
    "eta": (0.02, 1e6),
    "alpha_a": (0.02, 1e6),
    "beta_a": (0.02, 1e6),
    "kappa": (1e-200, 1e10),
    "bias_prior_var": (1e-100, 1e20),
    "gamma0": (0.0, 1e8),
}
