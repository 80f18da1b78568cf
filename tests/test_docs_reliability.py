"""``docs/reliability.md`` names, for every defect it lists, the test that guards it: each name
(or ``*`` pattern) it cites must match a test function in ``tests/``, so the table cannot point
at a test that was renamed or deleted."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cited_tests(text: str) -> set[str]:
    return set(re.findall(r"`(test_[A-Za-z0-9_*]+)`", text))


def defined_tests() -> set[str]:
    names = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names |= set(re.findall(r"^\s*def (test_\w+)\(", path.read_text(), flags=re.M))
    return names


def test_every_test_the_reliability_page_cites_exists():
    cited = cited_tests((ROOT / "docs" / "reliability.md").read_text())
    assert len(cited) > 20  # the table is found
    defined = defined_tests()
    missing = sorted(c for c in cited if not fnmatch.filter(defined, c))
    assert not missing, f"docs/reliability.md cites tests that do not exist: {missing}"


def test_a_missing_test_is_reported():
    assert cited_tests("guarded by `test_nothing_like_this_*` and `test_io`") == {
        "test_nothing_like_this_*",
        "test_io",
    }
    assert not fnmatch.filter(defined_tests(), "test_nothing_like_this_*")
