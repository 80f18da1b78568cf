"""The vectorised R-hat and bulk ESS give ArviZ's values, quantity by quantity."""

import numpy as np
import pytest
from arviz_stats.base import array_stats

from bayesmkl.sampler.convergence import rhat_and_ess_bulk


def _ar1(rng, k, chains, draws, phi, offsets=0.0):
    x = np.zeros((k, chains, draws))
    noise = rng.normal(size=(k, chains, draws))
    for t in range(draws):
        x[..., t] = (phi * x[..., t - 1] if t else 0.0) + noise[..., t]
    return x + offsets * rng.normal(size=(k, chains, 1))


def _arviz(x):
    r = np.asarray(array_stats.rhat(x, chain_axis=-2, draw_axis=-1, method="rank"), dtype=float)
    e = np.asarray(array_stats.ess(x, chain_axis=-2, draw_axis=-1, method="bulk"), dtype=float)
    return r, e


@pytest.mark.parametrize(
    ("chains", "draws", "phi", "offsets"),
    [
        (4, 1000, 0.0, 0.0),  # independent draws: ESS near chains·draws
        (4, 1001, 0.95, 0.0),  # odd length: the middle draw is dropped by the split
        (4, 400, 0.999, 1.0),  # stuck chains at different levels: R-hat far above 1
        (3, 333, -0.6, 0.0),  # antithetic: ESS above chains·draws, the Geyer pairs alternate
        (1, 200, 0.5, 0.0),  # one chain: R-hat undefined, ESS defined
        (2, 7, 0.3, 0.0),  # the shortest split chains
        (4, 3, 0.0, 0.0),  # too few draws: both undefined
    ],
)
def test_rhat_and_ess_equal_arviz(chains, draws, phi, offsets):
    rng = np.random.default_rng(draws + chains)
    x = _ar1(rng, 24, chains, draws, phi, offsets)
    x[:4] = np.round(x[:4])  # ties: shared average ranks
    x[4] = 2.5  # a constant quantity
    x[5, 0, 1] = np.nan  # a nan draw makes both undefined
    r0, e0 = _arviz(x)
    r1, e1 = rhat_and_ess_bulk(x)
    np.testing.assert_allclose(r1, r0, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(e1, e0, rtol=1e-12, equal_nan=True)
    assert np.isnan(r1[5]) and np.isnan(e1[5])


def test_rhat_separates_stuck_chains_from_mixed_ones():
    rng = np.random.default_rng(1)
    mixed = rng.normal(size=(3, 4, 500))
    stuck = mixed + np.arange(4)[None, :, None]  # each chain around its own level
    (r_mixed, e_mixed), (r_stuck, e_stuck) = rhat_and_ess_bulk(mixed), rhat_and_ess_bulk(stuck)
    assert r_mixed.max() < 1.01
    assert r_stuck.min() > 1.5
    assert e_mixed.min() > 1000 > e_stuck.max()
