"""Every citation of the mathematics in the package's docstrings and comments resolves.

The code cites the formulas it implements as ``docs/math.md §3.4``, ``docs/math.md A2``,
``docs/math.md §6, P1`` or ``docs/baselines_math.md paper C`` (issue 12: users have the docs, not
the project's internal specification). Each cited section or label must be a heading of the cited
file; no docstring may still cite the internal specification ("spec §3", "spec A2",
``bm3kl.md``); and a bare "§" must belong to such a citation, or cite a paper ("paper §5.2") or
another dated work ("Hoffman & Gelman 2014, §3.2.1").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bayesmkl"

#: One cited item: a section (§3.4, §1, §(b)), a label (A2, P1, E1, A4 (a)) or a source paper.
_REF = r"(?:§\d+(?:\.\d+)*|§\([a-z]\)|[A-Z]\d+(?:\s\([a-z]\))?|paper [A-D])"
_CITATION = re.compile(
    rf"docs/(?P<file>[a-z_]+\.md)(?P<refs>\s+{_REF}(?:\s*(?:,|–|-|and|or)\s*{_REF})*)?"
)
_ONE_REF = re.compile(r"§\d+(?:\.\d+)*|§\([a-z]\)|[A-Z]\d+|paper [A-D]")
#: Citations of the internal specification, which users do not have.
_SPEC = re.compile(r"\bspec\s+(?:§|[AEPV]\d)|``(?:bm3kl|baselines)\.md``|\bthe spec\b")
#: What may stand right before a "§" that is not part of a docs citation.
_OTHER_SOURCE = re.compile(r"(?:\bpaper|\b(?:19|20)\d\d,)\s*$")


def heading_keys(markdown: str) -> set[str]:
    """The section or label that each heading of a docs page starts with (§3.4, A2, paper C)."""
    keys = set()
    for line in markdown.splitlines():
        m = re.match(r"#+\s+(\S+)(?:\s+(\S+))?", line)
        if not m:
            continue
        first, second = m.group(1), m.group(2) or ""
        if first.lower() == "paper" and re.fullmatch(r"[A-D]:?", second):
            keys.add(f"paper {second.rstrip(':')}")
        else:
            keys.add(first.rstrip(".:"))
    return keys


def citation_problems(text: str, where: str, docs: dict[str, set[str]]) -> list[str]:
    """Citations in ``text`` that do not resolve, and leftover citations of the specification."""
    problems = []
    covered = []
    for m in _CITATION.finditer(text):
        covered.append(m.span())
        name = m.group("file")
        line = text.count("\n", 0, m.start()) + 1
        if name not in docs:
            problems.append(f"{where}:{line}: docs/{name} does not exist")
            continue
        for ref in _ONE_REF.findall(m.group("refs") or ""):
            if ref not in docs[name]:
                problems.append(f"{where}:{line}: docs/{name} has no heading {ref!r}")
    for m in _SPEC.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        problems.append(f"{where}:{line}: cites the internal specification ({m.group(0)!r})")
    for m in re.finditer("§", text):
        if any(a <= m.start() < b for a, b in covered):
            continue
        if not _OTHER_SOURCE.search(text[max(0, m.start() - 12) : m.start()]):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{where}:{line}: bare '§' that cites no docs file or paper")
    return problems


@pytest.fixture(scope="module")
def docs() -> dict[str, set[str]]:
    return {p.name: heading_keys(p.read_text()) for p in (ROOT / "docs").glob("*.md")}


def test_the_math_pages_have_the_cited_structure(docs):
    """The pages exist and carry the spec's numbering (a rename must not empty the check)."""
    math, baselines = docs["math.md"], docs["baselines_math.md"]
    for key in ("§0", "§1.6", "§3.4", "§4.4", "§6", "§7.2", "§9", "A1", "A18", "E1", "P2"):
        assert key in math
    for key in ("paper A", "paper D", "§(b)", "§(c)"):
        assert key in baselines


def test_every_citation_in_the_package_resolves(docs):
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 40
    problems, n_citations = [], 0
    for path in files:
        text = path.read_text()
        n_citations += len(_CITATION.findall(text))
        problems += citation_problems(text, str(path.relative_to(ROOT)), docs)
    assert not problems, "\n".join(problems)
    assert n_citations >= 50  # the package cites the docs throughout


def test_the_checker_catches_wrong_citations(docs):
    """Each kind of wrong citation is reported (so a passing run means something)."""
    ok = (
        "see docs/math.md §1.3–§1.6 and §6, docs/math.md §3.1, A14, docs/math.md A4 (a), "
        "docs/baselines_math.md paper C, docs/baselines_math.md §(b), paper §5.2, "
        "Hoffman & Gelman 2014, §3.2.1"
    )
    assert citation_problems(ok, "x", docs) == []
    bad = {
        "docs/math.md §19": "no heading '§19'",
        "docs/math.md §1.3–§1.9": "no heading '§1.9'",
        "docs/math.md §6, P7": "no heading 'P7'",
        "docs/math.md A19": "no heading 'A19'",
        "docs/baselines_math.md A2": "no heading 'A2'",
        "docs/maths.md §3": "does not exist",
        "(spec §3.4)": "internal specification",
        "(spec A2)": "internal specification",
        "spec ``bm3kl.md`` §9": "internal specification",
        "E1 of the spec": "internal specification",
        "the conditional of §3.4": "bare '§'",
    }
    for text, message in bad.items():
        found = citation_problems(text, "x", docs)
        assert found and message in found[0], (text, found)
