"""``chain_method="parallel"``: chains on several devices, the draws of "sequential" to rounding.

On jaxlib 0.12 the per-device programs round the last bits differently from the single-device
one (measured 3e-12 after 8 sweeps); a wrong key or chain assignment differs at O(1), so
``rtol=1e-9`` still fails on any real difference.

Several host CPU devices need ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` before JAX
starts, so the fits run in a subprocess (the test process keeps its single device). The draws
compared are whole posterior arrays, every site, so one differing sweep in any chain fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayesmkl.sampler.chains import XLA_DEVICE_FLAG, DeviceChains, resolve_chain_method

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import os, sys, tempfile, warnings
    os.environ["XLA_FLAGS"] = "{flag}=2"
    import jax
    import numpy as np
    import bayesmkl.estimators._base as est
    from bayesmkl import BM3KLClassifier
    from bayesmkl.datasets import load_demo
    from bayesmkl.sampler.chains import DeviceChains, resolve_chain_method

    est.enable_compilation_cache(os.path.join(tempfile.gettempdir(), "bayesmkl-test-jax-cache"))
    assert jax.local_device_count() == 2, jax.local_devices()
    assert isinstance(resolve_chain_method("parallel", 2), DeviceChains)
    X, y, _ = load_demo()
    idx = np.random.default_rng(0).permutation(len(y))[:30]
    X, y = X[idx], y[idx]
    # the auto run length: a first run (warm-up + one chunk), then a chunk continued from
    # last_state, so both kinds of MCMC.run are compared
    est.AUTO_CHUNK = 4
    out = {{}}
    for method in ("sequential", "parallel"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no fallback warning on 2 devices
            warnings.simplefilter("ignore", est.ConvergenceWarning)
            clf = BM3KLClassifier(
                num_warmup=4, num_samples="auto", num_chains=2, chain_method=method,
                calibration=None, random_state=7, progress_bar=False, max_samples=8,
            ).fit(X, y)
        for k, v in clf.posterior_.items():
            out[f"{{method}}/{{k}}"] = v
        out[f"{{method}}/n"] = np.array(clf.run_report_.num_samples)
    np.savez(sys.argv[1], **out)
    """
)


@pytest.mark.slow
def test_parallel_draws_equal_sequential_on_two_host_devices(tmp_path):
    script = tmp_path / "two_devices.py"
    script.write_text(SCRIPT.format(flag=XLA_DEVICE_FLAG))
    out = tmp_path / "draws.npz"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = np.load(out)
    assert int(d["sequential/n"]) == int(d["parallel/n"]) == 8  # two chunks of 4
    for site in ("w", "e", "a", "b", "lam", "nu", "varsigma"):
        seq, par = d[f"sequential/{site}"], d[f"parallel/{site}"]
        assert seq.shape[:2] == (2, 8)
        np.testing.assert_allclose(par, seq, rtol=1e-9, atol=1e-9 * np.abs(seq).max(), err_msg=site)
    # the two chains are different chains (distinct keys), not one chain twice
    assert not np.array_equal(d["sequential/w"][0], d["sequential/w"][1])


class _Dev:
    platform = "cpu"


def test_parallel_on_one_device_warns_with_the_xla_flag():
    with pytest.warns(UserWarning, match=XLA_DEVICE_FLAG + "=4"):
        assert resolve_chain_method("parallel", 4, devices=[_Dev()]) == "sequential"


def test_chain_method_resolution():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_chain_method("parallel", 1, devices=[_Dev()]) == "sequential"
        assert resolve_chain_method("vectorized", 4) == "vectorized"
        assert resolve_chain_method("sequential", 4) == "sequential"
        par = resolve_chain_method("parallel", 4, devices=[_Dev(), _Dev()])
    assert isinstance(par, DeviceChains) and len(par.devices) == 2
    with pytest.raises(ValueError, match="at least one device"):
        DeviceChains([])


def test_numpyros_chain_methods_sample_with_one_blas_thread(monkeypatch):
    """``chain_method="sequential"`` (NumPyro's MCMC, not the chunk runner) also samples with
    one BLAS thread, and the setting comes back after the fit."""
    import numpyro.infer.mcmc as mcmc_module
    from threadpoolctl import threadpool_info, threadpool_limits

    from bayesmkl import BM3KLClassifier

    def blas_threads():
        return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    seen = []
    real_run = mcmc_module.MCMC.run

    def run(self, *args, **kwargs):
        seen.append(blas_threads())
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(mcmc_module.MCMC, "run", run)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    with threadpool_limits(limits=2, user_api="blas"):
        BM3KLClassifier(num_samples=4, num_warmup=4, num_chains=2, chain_method="sequential",
                        calibration=None, progress_bar=False, random_state=0).fit(X, y)  # fmt: skip
        assert seen and set(seen) == {1}
        assert blas_threads() == 2
