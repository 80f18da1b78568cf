"""Estimator parameters stored as scikit-learn's contract asks, written once.

scikit-learn reads an estimator's parameters from its ``__init__`` signature and expects
``__init__`` to store each of them, unchanged, under its own name, and to do nothing else
(validation belongs in ``fit``; see :mod:`bayesmkl._validation`). Every estimator of the package
does exactly that with ``store_params(self, locals())`` as the only statement of its ``__init__``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["store_params"]


def store_params(estimator, init_locals: Mapping) -> None:
    """Set ``estimator.<name> = value`` for every argument in ``init_locals``, verbatim.

    Parameters
    ----------
    estimator : object
        The instance being initialised.
    init_locals : mapping
        ``locals()`` taken as the first statement of ``__init__``: the arguments, plus ``self``
        (and ``__class__`` where the method uses ``super()``), which are skipped.

    Examples
    --------
    >>> class Est:
    ...     def __init__(self, kernels="linear", *, C=1.0):
    ...         store_params(self, locals())
    >>> vars(Est(C=2.0))
    {'kernels': 'linear', 'C': 2.0}
    """
    for name, value in init_locals.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)
