"""Shared docstring entries: one place for text that several public callables document alike.

A docstring line that holds only ``{{name}}`` is replaced by the entry ``name`` of a table,
indented like the placeholder (the numpydoc sections stay readable in the source and complete in
``help()`` and the rendered docs). Under ``python -OO`` there are no docstrings and nothing is
done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["fill_doc"]

T = TypeVar("T")


def fill_doc(entries: Mapping[str, str]) -> Callable[[T], T]:
    """Decorator factory: replace each ``{{name}}`` line of ``obj.__doc__`` by ``entries[name]``.

    Parameters
    ----------
    entries : mapping of str to str
        Docstring fragments (numpydoc entries without indentation).

    Returns
    -------
    decorator : callable
        Fills the docstring of a function or class in place and returns it.

    Examples
    --------
    >>> @fill_doc({"x": "x : float\\n    A number."})
    ... def f(x):
    ...     '''Parameters
    ...     ----------
    ...     {{x}}
    ...     '''
    >>> "A number." in f.__doc__
    True
    """

    def decorate(obj: T) -> T:
        if not obj.__doc__:  # python -OO
            return obj
        lines = []
        for line in obj.__doc__.split("\n"):
            key = line.strip()
            if key.startswith("{{") and key.endswith("}}"):
                indent = line[: len(line) - len(line.lstrip())]
                lines += [indent + entry for entry in entries[key[2:-2]].split("\n")]
            else:
                lines.append(line)
        obj.__doc__ = "\n".join(lines)
        return obj

    return decorate
