"""The metrics the calibration benchmark reports (``benchmarks/calibration.py``), against hand
computations."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from calibration import ece_top_label  # noqa: E402


def test_ece_top_label_by_hand():
    """Two occupied bins: confidences 0.95 (2 points, 1 hit) and 0.62 (2 points, 2 hits):
    ECE = (2·|0.5 − 0.95| + 2·|1 − 0.62|) / 4."""
    proba = np.array([[0.95, 0.05], [0.05, 0.95], [0.62, 0.38], [0.38, 0.62]])
    codes = np.array([0, 0, 0, 1])
    assert ece_top_label(proba, codes) == pytest.approx((2 * 0.45 + 2 * 0.38) / 4, rel=1e-12)
