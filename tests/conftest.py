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


@pytest.fixture(scope="session")
def uci_dir() -> Path:
    """Path of the shared UCI data directory, or skip the test."""
    from bayesmkl.datasets import find_uci_dir

    path = find_uci_dir()
    if path is None:
        pytest.skip("shared UCI data not found (../shared/data/uci or $BAYESMKL_DATA)")
    return path
