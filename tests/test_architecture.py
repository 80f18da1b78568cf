"""Package structure: no import cycle inside ``bayesmkl``; a root with only the public face.

The import graph is read from the source with :mod:`ast` (nothing is imported): a node per module
(``bayesmkl.kernels`` is ``bayesmkl/kernels/__init__.py``), an edge per ``import`` or ``from ...
import`` of another ``bayesmkl`` module, wherever it stands — at the top, inside a function (a lazy
import) or under ``if TYPE_CHECKING`` — so a cycle cannot hide behind a deferred import.
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``. Each
checker is first run on a small synthetic package that has the defect, so that a checker that
found nothing could not pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bayesmkl"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """``{module: modules of the same package it imports}`` for every ``.py`` under ``package``."""
    root = package.parent
    paths = {_module_name(p, root): p for p in sorted(package.rglob("*.py"))}
    top = package.name
    graph = {}
    for name, path in paths.items():
        # the package a relative import starts from: the module's own for an __init__
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.add(sub if sub in paths else module)
        graph[name] = {t for t in targets if t in paths and t != name and t.split(".")[0] == top}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle ``[a, b, ..., a]`` of ``graph`` (depth-first search), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def root_modules(package: Path) -> list[str]:
    """The ``.py`` modules directly in ``package`` other than ``__init__`` and ``__main__``."""
    return sorted(p.name for p in package.glob("*.py") if p.stem not in ("__init__", "__main__"))


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / next(iter(files)).split("/")[0]


def test_find_cycle_on_small_graphs():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None  # a diamond is fine
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"y"}, "y": {"y2"}, "y2": {"y"}}) == ["y", "y2", "y"]


def test_import_graph_sees_every_form_of_import(tmp_path):
    """Absolute, ``from`` and relative imports, a lazy one and a re-export from an ``__init__``."""
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub import helper\n",
            "pkg/a.py": "import numpy\nfrom pkg import b\n",
            "pkg/b.py": "def f():\n    from .sub import tools\n",
            "pkg/sub/__init__.py": "from . import tools\n\nhelper = 1\n",
            "pkg/sub/tools.py": "import pkg.a\nfrom ..b import f\n",
        },
    )
    graph = import_graph(pkg)
    assert graph == {
        "pkg": {"pkg.sub"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.tools"},
        "pkg.sub": {"pkg.sub.tools"},
        "pkg.sub.tools": {"pkg.a", "pkg.b"},
    }
    # pkg.a -> pkg.b -> (lazily) pkg.sub.tools -> pkg.a, found from whichever node comes first
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and set(cycle) == {"pkg.a", "pkg.b", "pkg.sub.tools"}
    del graph["pkg.b"]  # without the lazy import's module there is none
    assert find_cycle(graph) is None


def test_no_import_cycle_in_the_package():
    graph = import_graph(PACKAGE)
    assert "bayesmkl.estimators.classifier" in graph and "bayesmkl.sampler.sampler" in graph
    assert (
        "bayesmkl.estimators._validation" in graph["bayesmkl.baselines._solvers"]
    )  # edges are found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_root_modules_lists_only_the_top_level(tmp_path):
    pkg = _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "pkg/sub/b.py": ""})
    (pkg / "__main__.py").write_text("")
    assert root_modules(pkg) == ["a.py"]


def test_the_root_holds_the_public_face_only():
    """Concepts live in subpackages; the root keeps at most 8 modules besides the dunders."""
    assert len(root_modules(PACKAGE)) <= 8, root_modules(PACKAGE)
