"""Data sets that reproduce past defects, shared by the tests and the stress benchmark."""

from __future__ import annotations

import numpy as np


def duplicated_rows(n: int = 350, seed: int = 1):
    """Three low-cardinality features (one a rare binary) and a logistic label: many duplicated
    rows (12 distinct for the defaults), hence rank-deficient kernels. The stress benchmark's
    ``"repro"`` set, on which the sampler once returned all-NaN draws.

    Returns ``(X, y)``: ``X`` ``(n, 3)`` standardised, ``y`` ``(n,)`` int 0/1.
    """
    rng = np.random.default_rng(seed)
    cls = rng.choice(4, n, p=[0.15, 0.13, 0.32, 0.40]).astype(float)  # ordinal, 4 levels
    age = (rng.random(n) < 0.05).astype(float)  # rare binary
    sex = (rng.random(n) < 0.79).astype(float)
    X = np.column_stack([cls, age, sex])
    logit = -1.2 * sex + 0.8 * age - 0.5 * (cls - 1.5) + 0.2
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return (X - X.mean(0)) / X.std(0), y
