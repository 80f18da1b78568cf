"""BM³KL regression: the ε-insensitive max-margin likelihood with the classifier's MKL prior.

:mod:`~bayesmkl.regression.likelihood` (the loss, its normaliser, the augmentation and the
noise law), :mod:`~bayesmkl.regression.model` (NumPyro model, hyper-parameters),
:mod:`~bayesmkl.regression.conditionals` and :mod:`~bayesmkl.regression.sampler` (the Gibbs
sweep and its MCMC kernel), :mod:`~bayesmkl.regression.estimator` (``BM3KLRegressor``).
docs/math.md §15 has the mathematics.
"""
