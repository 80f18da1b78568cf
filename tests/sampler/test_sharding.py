"""The sweep with its training-point axis sharded over two (forced) CPU devices equals the
unsharded sweep to rounding, for the landmark and the exact model (issue 45, item 4).

``XLA_FLAGS=--xla_force_host_platform_device_count=2`` must be set before JAX is imported, so
the comparison runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import json
    import os
    import jax
    import numpy as np
    from bayesmkl.config import x64_scope
    from bayesmkl.estimators._fitting import enable_compilation_cache
    from bayesmkl.sampler import BM3KL
    from bayesmkl.sampler.runner import ChainRunner
    from bayesmkl.sampler.sharding import ROWS, row_mesh, shard_rows
    from tests.sampler.test_landmark_sampler import landmark_problem

    def run(K, delta, sweeps):
        runner = ChainRunner(BM3KL(adapt_sweeps=4), num_chains=2, num_samples=sweeps)
        runner.run(jax.random.key(3), K, delta)
        return runner

    # the test suite's compilation cache (tests/conftest.py): a later run loads the programs
    if os.environ.get("BAYESMKL_TEST_CACHE"):
        enable_compilation_cache(os.environ["BAYESMKL_TEST_CACHE"], min_compile_time_secs=0.0)
    out = {"devices": len(jax.devices())}
    with x64_scope():
        for name, M in (("landmark", 8), ("exact", 40)):
            pb = landmark_problem(seed=4, N=40, M=M, C=2)
            K, delta = jax.numpy.asarray(pb["K"]), jax.numpy.asarray(pb["delta"])
            plain = run(K, delta, 3)
            Ks, ds = shard_rows(K, delta, mesh=row_mesh())
            sharded = run(Ks, ds, 3)
            a, b = plain.get_samples(), sharded.get_samples()
            out[name] = {
                "max_rel": max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k]))
                                      / (1.0 + np.abs(np.asarray(a[k]))))) for k in a),
                "lam_spec": str(sharded.last_state.z.lam.sharding.spec),
                "K_spec": str(Ks.sharding.spec),
                "shapes_equal": all(a[k].shape == b[k].shape for k in a),
            }
        try:
            shard_rows(K[:, :39], delta[:, :39])
        except ValueError as exc:
            out["uneven"] = str(exc)
    print("RESULT " + json.dumps(out))
    """
)


def test_sharded_sweep_equals_the_unsharded_one_on_two_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu",
               BAYESMKL_TEST_CACHE=jax.config.jax_compilation_cache_dir or "")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    res = json.loads(line.removeprefix("RESULT "))
    assert res["devices"] == 2
    for name in ("landmark", "exact"):
        r = res[name]
        assert r["shapes_equal"]
        assert "rows" in r["K_spec"]  # the inputs really are split ...
        assert "rows" in r["lam_spec"]  # ... and so is the per-point state the sweep carries
        assert r["max_rel"] < 1e-9, r  # the same draws up to the order of the sums
    assert "39 training points do not split evenly over 2 devices" in res["uneven"]
