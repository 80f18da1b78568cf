"""Estimator parameters stored as scikit-learn's contract asks, written once.

scikit-learn reads an estimator's parameters from its ``__init__`` signature and expects
``__init__`` to store each of them, unchanged, under its own name, and to do nothing else
(validation belongs in ``fit``; see :mod:`bayesmkl._validation`). Every estimator of the package
gets that ``__init__`` from :func:`estimator_init`, a table of its parameters and their defaults:
the first parameter (``kernels``) may be positional, every other one is keyword-only, and the
body is :func:`store_params`. Groups of parameters that several estimators share (the model's
hyper-parameters, :class:`bayesmkl.model.Hyper`; the SVM solvers' options) are spliced into the
table with ``**`` from the one place that defines them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from inspect import Parameter, Signature

__all__ = ["estimator_init", "store_params"]


def store_params(estimator, init_locals: Mapping) -> None:
    """Set ``estimator.<name> = value`` for every argument in ``init_locals``, verbatim.

    Parameters
    ----------
    estimator : object
        The instance being initialised.
    init_locals : mapping
        The arguments by name (e.g. ``locals()`` taken as the first statement of ``__init__``),
        plus ``self`` (and ``__class__`` where the method uses ``super()``), which are skipped.

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


def estimator_init(kernels, /, **params) -> Callable[..., None]:
    """An ``__init__(self, kernels=<kernels>, *, **params)`` that stores every argument verbatim.

    The signature is explicit (``inspect.signature`` and hence scikit-learn's ``get_params``,
    ``clone`` and ``repr`` see each parameter with its default, in the order given); a call binds
    its arguments to it exactly as a hand-written ``def`` would (a second positional argument or
    an unknown name raises ``TypeError``) and :func:`store_params` stores them.

    Parameters
    ----------
    kernels : object
        Default of the first parameter, ``kernels`` (positional or keyword).
    **params
        The keyword-only parameters and their defaults, in signature order.

    Returns
    -------
    function
        To be assigned as the class's ``__init__``.

    Examples
    --------
    >>> class Est:
    ...     __init__ = estimator_init("linear", C=1.0, tol=1e-3)
    >>> import inspect
    >>> inspect.signature(Est.__init__)
    <Signature (self, kernels='linear', *, C=1.0, tol=0.001)>
    >>> vars(Est("rbf", tol=0.1))
    {'kernels': 'rbf', 'C': 1.0, 'tol': 0.1}
    """
    signature = Signature(
        [
            Parameter("self", Parameter.POSITIONAL_OR_KEYWORD),
            Parameter("kernels", Parameter.POSITIONAL_OR_KEYWORD, default=kernels),
            *(Parameter(name, Parameter.KEYWORD_ONLY, default=v) for name, v in params.items()),
        ]
    )

    def __init__(self, *args, **kwargs) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        store_params(self, bound.arguments)

    __init__.__signature__ = signature
    return __init__
