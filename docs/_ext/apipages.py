"""Sphinx extension: the API reference, generated from the package's public names.

Nothing in ``docs/api/`` is written by hand. At ``builder-inited`` (before Sphinx reads any
source) this writes, from what the package itself declares public:

* ``api/index.rst``: one table per public module, with each name's one-line summary;
* ``api/<module>.rst``: the module's docstring and its table (constants shown in full there);
* ``api/<qualified name>.rst``: one page per public class, exception or function.

**Public** means: every name in ``bayesmkl.__all__``, and every name in the ``__all__`` of each
top-level module or subpackage of ``bayesmkl`` whose name does not start with ``_``; a public
module without ``__all__`` contributes the classes and functions it defines whose names do not
start with ``_``. Submodules of subpackages (``bayesmkl.sampler.moves``) are not listed: the
subpackage's ``__all__`` is its public face. So a new estimator added to ``bayesmkl.__all__``,
or a new public module, gets its pages with no edit here.

An object importable from several public places (``bayesmkl.KernelPool`` is also
``bayesmkl.kernels.KernelPool``) is documented once, under the first of them in
:func:`public_modules`'s order (the top-level package first); the other tables link there.
Files are rewritten only when their text changes, so an incremental build stays incremental;
pages of names that are no longer public are deleted.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

PACKAGE = "bayesmkl"
#: Members whose defining class lives outside these packages (scikit-learn's ``get_params``,
#: ``set_fit_request``, ...) are not repeated on our pages: their docstrings cite
#: scikit-learn's own documentation, whose labels do not exist here.
OWN_PREFIXES = ("bayesmkl",)


def public_modules(package: str = PACKAGE) -> list[str]:
    """The package itself, then its public top-level modules and subpackages, sorted."""
    pkg = importlib.import_module(package)
    names = sorted(
        f"{package}.{info.name}"
        for info in pkgutil.iter_modules(pkg.__path__)
        if not info.name.startswith("_")
    )
    return [package, *names]


def public_names(module) -> list[str]:
    """``module.__all__`` without dunders, else the public classes and functions it defines."""
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if not (n.startswith("__") and n.endswith("__"))]
    return sorted(
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    )


def kind_of(obj) -> str:
    """``"exception"``, ``"class"``, ``"function"`` or ``"data"``."""
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj) and (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
        return "function"
    if callable(obj) and hasattr(obj, "__wrapped__"):
        return "function"
    return "data"


def collect(package: str = PACKAGE):
    """``(modules, canonical)``: ``modules`` maps each public module to its ``[(name, obj,
    kind)]``; ``canonical`` maps ``id(obj)`` of each class and function to the one qualified
    name under which it is documented."""
    modules, canonical = {}, {}
    for modname in public_modules(package):
        module = importlib.import_module(modname)
        entries = []
        for name in public_names(module):
            obj = getattr(module, name)
            kind = kind_of(obj)
            entries.append((name, obj, kind))
            if kind != "data":
                canonical.setdefault(id(obj), f"{modname}.{name}")
        modules[modname] = entries
    return modules, canonical


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _object_page(qualname: str, kind: str) -> str:
    module, _, name = qualname.rpartition(".")
    head = _title(qualname) + f"\n.. currentmodule:: {module}\n\n"
    if kind == "function":
        return head + f".. autofunction:: {name}\n"
    directive = "autoexception" if kind == "exception" else "autoclass"
    return head + f".. {directive}:: {name}\n   :members:\n   :inherited-members:\n"


def _table(modname: str | None, entries, canonical) -> str:
    """An autosummary table of a module's classes and functions, each linked to its page.

    ``modname`` is the current module of the page (``None`` on the index): names documented
    under it are written relative to it, as autosummary asks."""
    rows = []
    for _, obj, kind in entries:
        if kind == "data":
            continue
        where = canonical[id(obj)]
        home, _, name = where.rpartition(".")
        rows.append(name if home == modname else f"~{where}")
    if not rows:
        return ""
    return (
        "\n".join([".. autosummary::", "   :nosignatures:", "", *(f"   {r}" for r in rows)]) + "\n"
    )


def _short_repr(obj, limit: int = 70) -> bool:
    try:
        return len(repr(obj)) <= limit
    except Exception:  # pragma: no cover - a repr that fails is not shown
        return False


def _module_page(modname: str, entries, canonical, indexed_data: set[str]) -> str:
    text = _title(modname) + f"\n.. automodule:: {modname}\n   :no-members:\n\n"
    text += f".. currentmodule:: {modname}\n\n"
    table = _table(modname, entries, canonical)
    here = [
        f"{modname}.{n}"
        for n, o, k in entries
        if k != "data" and canonical[id(o)] == f"{modname}.{n}"
    ]
    if here:
        text += ".. toctree::\n   :hidden:\n\n" + "".join(f"   {q}\n" for q in here) + "\n"
    if table:
        text += _title("Classes and functions", "-") + "\n" + table + "\n"
        moved = [
            (name, canonical[id(obj)])
            for name, obj, kind in entries
            if kind != "data" and canonical[id(obj)] != f"{modname}.{name}"
        ]
        if moved:
            text += "Also importable from here, documented where first made public: "
            text += ", ".join(f":py:obj:`{name} <{where}>`" for name, where in moved) + ".\n\n"
    data = [(name, obj) for name, obj, kind in entries if kind == "data"]
    if data:
        text += _title("Constants", "-") + "\n"
        for name, obj in data:
            text += f".. autodata:: {modname}.{name}\n"
            if not _short_repr(obj):
                text += "   :no-value:\n"
            if name in indexed_data:
                text += "   :no-index:\n"
            indexed_data.add(name)
            text += "\n"
    return text


def _index_page(modules, canonical) -> str:
    text = _title("API reference") + (
        "\nGenerated from the package's public names (``bayesmkl.__all__`` and the ``__all__`` "
        "of each public module and subpackage): every public class and function has a page. "
        "All estimators follow scikit-learn's conventions (``fit``, ``predict``, "
        "``get_params``/``set_params``, ``score``); the methods they inherit from "
        "scikit-learn unchanged are documented there.\n\n"
    )
    text += ".. toctree::\n   :hidden:\n\n" + "".join(f"   {m}\n" for m in modules) + "\n"
    for modname, entries in modules.items():
        text += _title(f":mod:`{modname}`", "-") + "\n"
        table = _table(None, entries, canonical)
        if table:
            text += table + "\n"
        data = [name for name, _, kind in entries if kind == "data"]
        if data:
            text += "Constants: " + ", ".join(f":py:data:`~{modname}.{n}`" for n in data)
            text += ".\n\n"
    return text


def pages(package: str = PACKAGE) -> dict[str, str]:
    """``{file name in docs/api: text}`` of every generated page."""
    modules, canonical = collect(package)
    out = {"index.rst": _index_page(modules, canonical)}
    indexed_data: set[str] = set()
    for modname, entries in modules.items():
        out[f"{modname}.rst"] = _module_page(modname, entries, canonical, indexed_data)
    kinds = {}
    for entries in modules.values():
        for _, obj, kind in entries:
            if kind != "data":
                kinds[canonical[id(obj)]] = kind
    for qualname, kind in kinds.items():
        out[f"{qualname}.rst"] = _object_page(qualname, kind)
    return out


def write_pages(outdir: Path, package: str = PACKAGE) -> list[str]:
    """Write :func:`pages` into ``outdir``; returns the names of the files it changed."""
    outdir.mkdir(parents=True, exist_ok=True)
    wanted = pages(package)
    changed = []
    for name, text in wanted.items():
        path = outdir / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    for path in outdir.glob("*.rst"):
        if path.name not in wanted:
            path.unlink()
            changed.append(path.name)
    return changed


def _defined_in_own_package(obj) -> bool:
    if not (inspect.isroutine(obj) or isinstance(obj, property)):
        return True  # a class attribute: documented where the class documents it
    target = obj.fget if isinstance(obj, property) else obj
    target = getattr(target, "__func__", target)
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] in OWN_PREFIXES


def skip_foreign_members(app, what, name, obj, skip, options):
    """``autodoc-skip-member``: skip inherited members defined outside this package."""
    if what in ("class", "exception") and not _defined_in_own_package(obj):
        return True
    return None


def _generate(app) -> None:
    write_pages(Path(app.srcdir) / "api")


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("autodoc-skip-member", skip_foreign_members)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
