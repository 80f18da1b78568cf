"""The metrics the calibration benchmarks report (``benchmarks/calibration.py``,
``benchmarks/ece_floor.py``), against hand computations and closed forms."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from calibration import ece_top_label  # noqa: E402
from ece_floor import ece_floor  # noqa: E402


def test_ece_top_label_by_hand():
    """Two occupied bins: confidences 0.95 (2 points, 1 hit) and 0.62 (2 points, 2 hits):
    ECE = (2·|0.5 − 0.95| + 2·|1 − 0.62|) / 4."""
    proba = np.array([[0.95, 0.05], [0.05, 0.95], [0.62, 0.38], [0.38, 0.62]])
    codes = np.array([0, 0, 0, 1])
    assert ece_top_label(proba, codes) == pytest.approx((2 * 0.45 + 2 * 0.38) / 4, rel=1e-12)


def test_ece_floor_matches_the_binomial_closed_form():
    """All confidences ½ fall in one bin, so the ECE of labels drawn from the probabilities
    is |X/n − ½| with X ~ Binomial(n, ½); its mean is known exactly, and the Monte Carlo
    floor must land within 4 of its standard errors (which are small enough to matter)."""
    n = 400
    proba = np.full((n, 2), 0.5)
    k = np.arange(n + 1)
    truth = float(np.sum(binom.pmf(k, n, 0.5) * np.abs(k / n - 0.5)))
    floor, se = ece_floor(proba, n_draws=4000, seed=0)
    assert abs(floor - truth) < 4 * se and se < 0.05 * truth, (floor, truth, se)
    # and a calibrated predictor with confident, spread-out probabilities has a floor too
    rng = np.random.default_rng(1)
    p1 = rng.uniform(size=n)
    floor2, _ = ece_floor(np.c_[1 - p1, p1], n_draws=200, seed=0)
    assert floor2 > 0.02


def test_test_label_bound_recovers_temperature_and_noise_floor():
    """``calibration_map.fit_test_bound`` is a maximum-likelihood fit of (T, ε) in
    ε/2 + (1 − ε)·σ(T·f): labels drawn from that model with T = 2, ε = 0.1 on 20 000 points
    must give back both within about 4 and 5 of their standard errors (0.053 and 0.006,
    measured over 20 seeds), and without the floor ε stays 0."""
    from calibration_map import fit_test_bound

    rng = np.random.default_rng(3)
    f = rng.normal(0.0, 2.0, size=20000)
    p1 = 0.05 + 0.9 / (1.0 + np.exp(-2.0 * f))
    codes = (rng.uniform(size=f.size) < p1).astype(np.int64)
    F = f[None, :, None]  # one draw, one binary classifier
    (T, eps), _ = fit_test_bound(F, codes, with_floor=True)
    assert abs(T - 2.0) < 0.2 and abs(eps - 0.1) < 0.03, (T, eps)
    (T0, eps0), _ = fit_test_bound(F, codes, with_floor=False)
    assert eps0 == 0.0 and T0 < T  # without the floor, the slope flattens to absorb the noise
