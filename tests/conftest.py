"""Shared pytest configuration and fixtures.

``uci_dir``: the directory with the real UCI CSVs (``../shared/data/uci``, ``$BAYESMKL_DATA``),
found by :func:`bayesmkl.datasets.find_uci_dir`; tests that request it are skipped cleanly when
it is absent. Mark such tests ``@pytest.mark.shared_data`` so ``-m "not shared_data"`` works.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bayesmkl.estimator import enable_compilation_cache

# JAX compiles the sampler once per data shape and configuration; a persistent compilation
# cache shared by every test module turns repeated compilations of the same program into loads.
enable_compilation_cache(Path(tempfile.gettempdir()) / "bayesmkl-test-jax-cache")


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
        pytest.skip("shared UCI data not found (../shared/data/uci or $BAYESMKL_DATA)")
    return path
