"""Estimator parameters: scikit-learn's contract, written out by hand and checked against a table.

scikit-learn reads an estimator's parameters from its ``__init__`` signature and expects
``__init__`` to store each of them, unchanged, under its own name, and to do nothing else
(validation belongs in ``fit``; see :mod:`bayesmkl.estimators._validation`). Every estimator of the
package
writes that ``__init__`` out, as scikit-learn's own estimators do, so that editors and type
checkers (jedi, pyright, mypy) see its parameters: ``kernels`` first (positional or keyword),
every other parameter keyword-only, and a body of ``self.<name> = <name>`` lines.

Each estimator class also holds its parameter table, ``_param_defaults`` (name → default, in
signature order). Groups of parameters that several estimators share are spliced into the tables
with ``**`` from the one place that defines them (the model's hyper-parameters,
:class:`bayesmkl.model.classification.Hyper`; the SVM solvers' ``ITERATIVE_PARAMS`` and
``SVM_OPTIONS``), so a
changed shared default leaves a table that no longer matches a hand-written signature:
:func:`signature_problems` lists the differences, and ``tests/test_api_conventions.py`` requires
that there are none, for every estimator.
"""

from __future__ import annotations

import inspect

from bayesmkl.model.classification import Hyper
from bayesmkl.model.regression import RegHyper

__all__ = ["BM3KL_PARAMS", "BM3KL_REG_PARAMS", "signature_problems"]

#: :class:`~bayesmkl.BM3KLClassifier`'s parameters and defaults, in signature order (kept here
#: rather than in the class body, which holds the hand-written ``__init__``).
BM3KL_PARAMS = dict(
    kernels="bsvm16",
    prior="default",
    **dict.fromkeys(
        Hyper._fields
    ),  # None: the named prior's value (bayesmkl.model.classification.PRIORS)
    sampler="collapsed_log",
    step_size=0.01,
    n_leapfrog=10,
    nu_update="gibbs",
    num_warmup=300,
    num_samples="auto",
    num_chains=4,
    chain_method="vectorized",
    rhat_target=1.01,
    ess_target=400,
    max_samples=5000,
    max_time=None,
    binary_mode="single",
    decision="proba",
    calibration="loo",
    kernel_dtype="float64",
    random_state=None,
    progress_bar=True,
    class_weight=None,
    kernel_names=None,
    warm_start=False,
)


#: :class:`~bayesmkl.BM3KLRegressor`'s parameters and defaults, in signature order: the
#: classifier's prior of w, a and b (``None``: the named prior's value), the noise law's ε and
#: its priors (:class:`bayesmkl.model.regression.RegHyper`), and the classifier's run settings.
BM3KL_REG_PARAMS = dict(
    kernels="bsvm16",
    prior="default",
    **dict.fromkeys(Hyper._fields[:5]),
    epsilon="auto",
    **{k: v for k, v in RegHyper()._asdict().items() if k not in Hyper._fields},
    sampler="collapsed_log",
    step_size=0.01,
    n_leapfrog=10,
    num_warmup=300,
    num_samples="auto",
    num_chains=4,
    chain_method="vectorized",
    rhat_target=1.01,
    ess_target=400,
    max_samples=5000,
    max_time=None,
    kernel_dtype="float64",
    random_state=None,
    progress_bar=True,
    kernel_names=None,
)


def signature_problems(cls) -> list[str]:
    """How ``cls.__init__`` departs from the table ``cls._param_defaults`` (empty if it agrees).

    Checked: the parameter names and their order, each default (value and type, so ``1`` for
    ``1.0`` is a difference), ``kernels`` first and positional-or-keyword, every other parameter
    keyword-only, and that ``__init__`` is a written-out function (no generated
    ``__signature__``).

    Examples
    --------
    >>> class Est:
    ...     _param_defaults = {"kernels": "linear", "C": 1.0}
    ...     def __init__(self, kernels="linear", *, C=1):
    ...         self.kernels = kernels
    ...         self.C = C
    >>> signature_problems(Est)
    ['Est: C defaults to 1 (int) in __init__ but to 1.0 (float) in the table']
    """
    name = cls.__name__
    table = dict(cls._param_defaults)
    init = cls.__init__
    problems = []
    if "__signature__" in vars(init):
        problems.append(f"{name}: __init__ has a generated __signature__; write the def out")
    params = [p for p in inspect.signature(init).parameters.values() if p.name != "self"]
    names = [p.name for p in params]
    if names != list(table):
        problems.append(f"{name}: __init__ has the parameters {names}, the table {list(table)}")
    for i, p in enumerate(params):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if i == 0 else inspect.Parameter.KEYWORD_ONLY
        if p.kind is not kind:
            problems.append(f"{name}: {p.name} is {p.kind.description}, not {kind.description}")
        if p.name not in table:
            continue
        want = table[p.name]
        if p.default is inspect.Parameter.empty:
            problems.append(f"{name}: {p.name} has no default in __init__")
        elif type(p.default) is not type(want) or p.default != want:
            problems.append(
                f"{name}: {p.name} defaults to {p.default!r} ({type(p.default).__name__}) in "
                f"__init__ but to {want!r} ({type(want).__name__}) in the table"
            )
    return problems
