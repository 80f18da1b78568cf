"""Shared pytest fixtures.

``uci_dir``: the directory with the real UCI CSVs (``../shared/data/uci``, ``$BAYESMKL_DATA``),
found by :func:`bayesmkl.datasets.find_uci_dir`; tests that request it are skipped cleanly when
it is absent. Mark such tests ``@pytest.mark.shared_data`` so ``-m "not shared_data"`` works.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def uci_dir() -> Path:
    """Path of the shared UCI data directory, or skip the test."""
    from bayesmkl.datasets import find_uci_dir

    path = find_uci_dir()
    if path is None:
        pytest.skip("shared UCI data not found (../shared/data/uci or $BAYESMKL_DATA)")
    return path
