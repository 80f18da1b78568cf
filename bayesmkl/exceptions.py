"""The errors and warnings that bayesmkl raises, for ``except`` clauses and warning filters."""

__all__ = [
    "DegeneratePosteriorWarning",
    "ExtremeDecisionWarning",
    "FitMemoryError",
    "KernelScaleWarning",
    "NonFinitePredictionError",
    "SamplerDivergenceError",
    "SamplerDivergenceWarning",
]


class SamplerDivergenceError(FloatingPointError):
    """The sampler produced non-finite draws; the fit cannot be used."""


class SamplerDivergenceWarning(RuntimeWarning):
    """Some kept sweeps were flagged ``diverging``; the draws may be unreliable."""


class FitMemoryError(ValueError, MemoryError):
    """The draws a fit would keep, with the sampler's working memory, would not fit in memory
    (raised before sampling, with the sizes, the limit and what to change; the limit is that of
    ``bayesmkl.kernels.pool.KernelMemoryError``)."""


class NonFinitePredictionError(FloatingPointError):
    """A prediction (decision value or probability) would have been NaN or infinite."""


class ExtremeDecisionWarning(RuntimeWarning):
    """Decision values so large, or test rows so far outside the training data, that the
    predictive probabilities are meaningless."""


class KernelScaleWarning(UserWarning):
    """Precomputed kernels far from the unit diagonal that BM3KL's prior is scaled for."""


class DegeneratePosteriorWarning(RuntimeWarning):
    """The fitted posterior does not use the data: its function at the training points is
    dominated by a common shift (the bias) or is flat, or a regression fits the training targets
    no better than their mean; typically a hyper-parameter at an extreme."""
