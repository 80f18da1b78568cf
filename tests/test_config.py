"""64-bit JAX is scoped to the package's calls (bayesmkl/config.py); importing leaves it alone."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesmkl import KernelPool
from bayesmkl.config import with_x64, x64_enabled, x64_scope
from bayesmkl.kernels import gaussian_kernel

REPO = Path(__file__).resolve().parent.parent


def test_tests_outside_the_low_level_list_run_with_float32_jax():
    """The rest of the suite exercises the scoping only if x64 is really off around it."""
    assert not x64_enabled()
    assert jnp.ones(1).dtype == jnp.float32


def test_entry_points_compute_in_float64_and_restore_the_callers_setting():
    # 1 − exp(−d²/2) for d² = 1e-10 is 5e-11: float32 would round the kernel to exactly 1.
    X = np.array([[0.0], [1e-5]])
    K = gaussian_kernel(X, widths=1.0)
    assert K.dtype == jnp.float64
    assert 1.0 - float(K[0, 1]) == pytest.approx(0.5e-10, rel=1e-5)
    assert not x64_enabled() and jnp.ones(1).dtype == jnp.float32

    rng = np.random.default_rng(0)
    Xtr, Xte = rng.normal(size=(20, 3)), rng.normal(size=(5, 3))
    pool = KernelPool.bsvm16().fit(Xtr)
    K_out = pool.cross_kernels(Xte)
    with x64_scope():  # the same call under a caller who enabled x64 globally
        K_in = pool.cross_kernels(Xte)
    assert K_out.dtype == np.float64
    np.testing.assert_array_equal(K_out, K_in)
    assert not x64_enabled()


def test_with_x64_nests_and_restores():
    @with_x64
    def inner():
        return x64_enabled(), jnp.asarray(1.0).dtype

    assert inner() == (True, jnp.float64)
    assert not x64_enabled()
    with jax.enable_x64(True):
        assert inner()[0] and x64_enabled()  # leaves an enclosing True in place
    assert not x64_enabled()


@pytest.mark.slow
def test_import_and_fits_leave_the_global_setting_alone():
    """A fresh process: x64 is off after ``import bayesmkl`` and after a BM3KL fit and a
    baseline fit, while the draws are float64; a user's float32 program stays float32."""
    code = textwrap.dedent(
        f"""
        import jax, jax.numpy as jnp, numpy as np
        import bayesmkl
        from bayesmkl.estimators.classifier import enable_compilation_cache
        enable_compilation_cache({str(Path(tempfile.gettempdir()) / "bayesmkl-test-jax-cache")!r})
        print("after import", jax.config.jax_enable_x64)
        from bayesmkl import BM3KLClassifier, KernelPool
        from bayesmkl.baselines import SimpleMKL
        rng = np.random.default_rng(0)
        X = rng.normal(size=(16, 2)); y = (X[:, 0] > 0).astype(int)
        pool = KernelPool([("gauss", 1.0), ("poly", 2)])
        clf = BM3KLClassifier(kernels=pool, num_warmup=3, num_samples=2, sampler="exact",
                              random_state=0, progress_bar=False).fit(X, y)
        p = clf.predict_proba(X)
        print("after fit", jax.config.jax_enable_x64)
        print("draws", clf.posterior_["w"].dtype, p.dtype)
        SimpleMKL(kernels=pool).fit(X, y)
        print("after baseline", jax.config.jax_enable_x64)
        print("user", (jnp.ones(2) * 2.0).dtype)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines == [
        "after import False",
        "after fit False",
        "draws float64 float64",
        "after baseline False",
        "user float32",
    ]
