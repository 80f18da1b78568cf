"""Shared pytest configuration and fixtures.

64-bit JAX: the package's entry points switch it on for their own calls (``bayesmkl.config``), so
most tests run with JAX's default (float32) and thereby check that scoping. Tests of the
low-level building blocks that a caller must run in 64-bit mode (the NumPyro kernel, random
variates, the likelihood, and prediction from JAX arrays the test builds itself; see
``_LOW_LEVEL``) get it from an autouse fixture.

UCI data: :mod:`bayesmkl.datasets` reads only its ``data_dir`` argument or ``$BAYESMKL_DATA``.
The tests read ``$BAYESMKL_DATA``, which this file sets to ``<repository>/../shared/data/uci``
when it is unset. ``uci_dir`` is that directory, found by
:func:`bayesmkl.datasets.find_uci_dir`; tests that request it are skipped cleanly when it is
absent. Mark such tests ``@pytest.mark.shared_data`` so ``-m "not shared_data"`` works.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from bayesmkl.config import x64_scope
from bayesmkl.estimators._fitting import enable_compilation_cache

# JAX compiles the sampler once per data shape and configuration; a persistent compilation
# cache shared by every test module turns repeated compilations of the same program into loads.
# Every program is stored, the small ones too (JAX's default keeps those that took at least a
# second): the suite fits hundreds of small data shapes, each with a score of programs that
# compile in 0.1-0.5 s and load in milliseconds.
enable_compilation_cache(Path(tempfile.gettempdir()) / "bayesmkl-test-jax-cache",
                         min_compile_time_secs=0.0)  # fmt: skip

_TESTS = Path(__file__).resolve().parent
#: The shared UCI data directory the tests read when ``$BAYESMKL_DATA`` is unset.
DEFAULT_DATA = _TESTS.parent.parent / "shared" / "data" / "uci"
os.environ.setdefault("BAYESMKL_DATA", str(DEFAULT_DATA))
#: Test paths (relative to tests/) whose code calls the low-level, unscoped API directly.
_LOW_LEVEL = (
    "sampler/",
    "model/",
    "posterior/test_predict.py",
)


@pytest.fixture(autouse=True, scope="module")
def _x64_for_low_level_api(request):
    """64-bit JAX around test modules of the low-level API (the caller's job there, see
    ``bayesmkl.config``); module-scoped, so that it also covers their module fixtures."""
    path = Path(request.node.path).resolve()
    rel = path.relative_to(_TESTS).as_posix() if path.is_relative_to(_TESTS) else ""
    if rel.startswith(_LOW_LEVEL):
        with x64_scope():
            yield
    else:
        yield


@pytest.fixture(autouse=True, scope="module")
def _release_jax_executables():
    """Clear JAX's caches after each test module.

    Every BM3KL fit compiles new executables (the sampler is a new closure per fit) and JAX's
    caches keep them mapped: about 1,100 memory maps per fit, never released. A process reaches
    vm.max_map_count (65,530 by default) after ~60 fits, and LLVM then segfaults ("Cannot
    allocate memory"); calibrated fits count four times (three cross-fitting refits).
    """
    yield
    import gc

    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def uci_dir() -> Path:
    """Path of the shared UCI data directory, or skip the test."""
    from bayesmkl.datasets import find_uci_dir

    path = find_uci_dir()
    if path is None:
        pytest.skip(f"shared UCI data not found in $BAYESMKL_DATA ({os.environ['BAYESMKL_DATA']})")
    return path
