"""The metrics the calibration benchmark reports (``benchmarks/calibration.py``), against hand
computations."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _common import ece_top_label  # noqa: E402


def test_ece_top_label_by_hand():
    """Two occupied bins: confidences 0.95 (2 points, 1 hit) and 0.62 (2 points, 2 hits):
    ECE = (2·|0.5 − 0.95| + 2·|1 − 0.62|) / 4."""
    proba = np.array([[0.95, 0.05], [0.05, 0.95], [0.62, 0.38], [0.38, 0.62]])
    codes = np.array([0, 0, 0, 1])
    assert ece_top_label(proba, codes) == pytest.approx((2 * 0.45 + 2 * 0.38) / 4, rel=1e-12)


# --------------------------------------------------------------------------------------------
# sweep_floor.py: the floor model of the default sweep
# --------------------------------------------------------------------------------------------
SHAPES = [(40, 4, 1, True), (30, 6, 3, True), (20, 7, 3, False), (12, 260, 3, True)]


@pytest.mark.parametrize(("N", "P", "C", "collapse"), SHAPES)
def test_sweep_floor_formulas_count_the_blocks_flops(N, P, C, collapse, monkeypatch):
    """Each block's dot, Cholesky and triangular-solve flops in the floor model equal a count
    over the jaxpr of the block's function (the (a, b) step's 2CN³ + 6CN² dot flops, CN³/3
    Cholesky flops, ...), with the collapsed move on and off (s = 0: HMC on the conditional)
    and on the large-P route (P ≥ 256: the pair updates without M, no w_M block)."""
    import jax
    import sweep_floor as sf
    from _common import synthetic_kernels

    from bayesmkl.config import x64_scope
    from bayesmkl.sampler import collapsed as coll
    from bayesmkl.sampler.sampler import CLASSIFICATION
    from bayesmkl.sampler.state import init_state

    if not collapse:
        monkeypatch.setattr(coll, "MAX_GATHERED", 1)
    with x64_scope():
        kernel, chains = sf.default_kernel()
        assert chains == 4 and kernel.config.move == "collapsed_log"
        K, delta = synthetic_kernels(P, N, C)
        state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, kernel.config).state
        fns, s = sf.block_functions(kernel, K, delta, state)
        assert (s > 0) == collapse
        costs = sf.block_costs(N, P, delta.shape[0], s, kernel.config.n_leapfrog)
        assert set(fns) == set(costs) == set(sf.BLOCKS) - ({"w_M"} if P >= 256 else set())
        for name, (fn, args) in fns.items():
            counted = sf.jaxpr_flops(fn, *args)
            c = costs[name]
            model = {"dot": c["gemm"] + c["gemm32"], "chol": c["chol"], "trsm": c["trsm"]}
            assert counted == pytest.approx(model, rel=1e-12), name
    ab = costs["ab"]
    Cd = delta.shape[0]
    assert ab["gemm"] == 2 * Cd * N**3 + 6 * Cd * N**2 and ab["chol"] == Cd * N**3 / 3


def test_sweep_floor_block_floor_is_the_larger_bound():
    import sweep_floor as sf

    rates = {"bandwidth_Bps": 1e10, "gemm_f64_flops": 1e11, "gemm_f32_flops": 2e11}
    cost = dict(gemm=1e11, gemm32=0.0, vec=0.0, trsm=0.0, chol=0.0, bytes=1e9)
    assert sf.block_floor_s(cost, rates, None) == (1.0, "flops")
    cost["bytes"] = 3e10
    assert sf.block_floor_s(cost, rates, None) == (3.0, "bytes")
    cost.update(chol=2e9, chol_n=100)
    assert sf.block_floor_s(cost, rates, lambda n: 1e9)[0] == pytest.approx(3.0)
    cost["bytes"] = 0.0
    assert sf.block_floor_s(cost, rates, lambda n: 1e9)[0] == pytest.approx(3.0)


def test_sweep_floor_refuses_to_record_at_high_load(monkeypatch, tmp_path):
    """Above a 1-minute load average of 1.5 the script stops before timing anything."""
    import sweep_floor as sf

    monkeypatch.setattr(sf.os, "getloadavg", lambda: (4.0, 3.0, 2.0))
    with pytest.raises(SystemExit, match="refusing to record"):
        sf.main(["--quick", "--out", str(tmp_path / "floor")])
    assert not list(tmp_path.iterdir())
