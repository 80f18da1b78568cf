"""The range of each model hyper-parameter in which the sampler's float64 arithmetic stays finite
and the model works.

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
  underflow alike: α_a = β_a = 0.005 failed (16 chains × 1000 sweeps), 0.01 did not.
  ``alpha_a`` ≤ 1e6: the same Gamma limit (1e12 failed); ``beta_a``: see below.
* ``kappa`` ≤ 1e10: ``diverging`` jumps from 0.04 at 1e10 to 0.75 at 1e12 (0.9 at 1e20; 1e300
  fails: ν ≈ 1/κ underflows). ≥ 1e-200: finite down to 1e-300, but the collapsed ν update's
  support θ = log ν ≥ −600 must still hold the scales of pruned points (ν ~ κ).
* ``gamma0`` ≤ 1e8: λ ~ 1/γ0 is the pseudo-noise variance, so the quadratic forms grow with γ0;
  ``diverging`` rises steadily, 0.08 at 1e4 (the paper's largest), 0.20 at 1e8, 0.43 at 1e18,
  0.67 at 1e20 and 0.99 at 1e300 (where the old code hung on the NaN that followed).
* ``bias_prior_var`` ≥ 1e-100: finite down to 1e-300 (τ → 0 pins b at 0). The arithmetic stays
  finite up to 1e26 (``diverging`` 0.01; it rises from 1e28, 0.16 at 1e40), but the *model*
  breaks down much earlier: a nearly flat prior on b lets every draw shift the whole
  function, and the posterior predictive becomes the same at every point. Measured on 40 rows
  (breast cancer; diabetes for the regressor), 2 chains × (100 + 100) sweeps, seeds 0 and 1: the
  regressor is as at τ = 1 up to 1e13 (training RMSE 0.50-0.55 sds of y) and breaks at 1e14
  (RMSE 0.94-1.66, the function's common shift 1.3-3.4 times its spread across the points),
  worse at 1e16 and 1e20 (predictive mean −2,200 and sd 1.6e7 for targets in [25, 346]); the
  classifier works up to 1e14 and breaks at 1e15 (training accuracy 0.68, the common shift 110
  times the spread) and 1e20 (accuracy 0.50, p ≈ 0.51 everywhere). Hence **≤ 1e10**, four
  orders below the first breakdown; at 1e10, two-feature data and runs of 300 + 1000 sweeps fit
  normally (classifier accuracy 0.95-1.0, regressor RMSE 0.49-0.83, no degenerate posterior).
* ``beta_a`` ≤ 10: β_a shrinks every sample weight (the TPBN's prior variance falls
  like 1/β_a), and at large β_a the function is flat: the fit predicts a constant. Same runs:
  the regressor's training RMSE is 0.50 at β_a = 1, 0.83-0.86 at 3, 0.96-0.98 at 10, 0.99 at 30
  and 1.00-1.02 from 100 to 1e6; the classifier keeps training accuracy 0.95 up to 100 and
  breaks at 1e3 (accuracy 0.5-0.95, the bias 13-14 times the spread of f), 1e4 and 1e6 (spread
  of f across the training points 0.008 and 0.0008 of the margin, accuracy 0.50). The
  paper's largest value is 3 (its Table 3 grid {1, 2, 3}).

Where the model still degenerates inside these ranges (a small ``alpha_a`` or ``kappa`` of the
regressor: κ ≤ 1e-10 left its function flat on the data above, α_a = 0.02-0.1 fitted
training RMSE 0.91-0.98), ``fit`` says so:
:func:`bayesmkl.posterior.checks.check_degenerate_posterior` warns
(:class:`~bayesmkl.exceptions.DegeneratePosteriorWarning`) whenever the posterior does not use
the data.

The box as a whole: at all 64 corners (each bound at its end), 4 chains × 200 sweeps each with
the moves "collapsed" and "exact" and with the collapsed ν update, every chain stayed finite and
no loop hit its cap; ``diverging`` is at most 0.67, at corners that combine the upper ends of
α_a (or η), κ, τ and γ0 (median 0.14 with the default move): ``fit`` then warns. (Measured with
the old upper ends β_a = 1e6 and τ = 1e20.) At the upper corner of today's box (η = α_a = 1e6,
β_a = 10, κ = 1e10, τ = 1e10, γ0 = 1e8; 2 chains × (300 + 1000) sweeps) the classifier (either
ν update) has training accuracy 1.0 and the regressor ("collapsed_log" and "gibbs") training
RMSE 0.03: no degenerate posterior.
"""

from __future__ import annotations

__all__ = ["HYPER_BOUNDS"]

#: ``{name: (smallest, largest)}`` allowed value of each hyper-parameter (closed intervals;
#: every entry of a vector ``eta``).
HYPER_BOUNDS = {
    "eta": (0.02, 1e6),
    "alpha_a": (0.02, 1e6),
    "beta_a": (0.02, 10.0),  # flat functions from 30 (regressor)
    "kappa": (1e-200, 1e10),
    "bias_prior_var": (1e-100, 1e10),  # degenerate from 1e14
    "gamma0": (0.0, 1e8),
}
