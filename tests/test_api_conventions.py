"""Signature conventions shared by every estimator of the package.

scikit-learn reads an estimator's parameters from its ``__init__`` signature, so these are checked
on the signatures themselves: the first parameter (``kernels``) may be positional, every other one
is keyword-only (a positional call such as ``SimpleMKL("simplemkl", 10.0)`` would silently bind a
value to whichever parameter happens to come second, and adding a parameter would change it).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

import bayesmkl
from bayesmkl import baselines

ESTIMATORS = [bayesmkl.BM3KLClassifier, bayesmkl.BM3KLRegressor] + [
    getattr(baselines, name) for name in baselines.__all__
]


def _params(cls):
    return [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_kernels_first_then_keyword_only(cls):
    params = _params(cls)
    assert issubclass(cls, BaseEstimator)
    assert params[0].name == "kernels"
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    positional = [p.name for p in params[1:] if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert positional == [], f"{cls.__name__}: {positional} should be keyword-only"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_params_round_trip(cls):
    """Every signature parameter is stored verbatim and survives ``clone``/``set_params``."""
    est = cls()
    names = [p.name for p in _params(cls)]
    assert sorted(est.get_params(deep=False)) == sorted(names)
    for p in _params(cls):
        assert getattr(est, p.name) is p.default or getattr(est, p.name) == p.default
    other = clone(est).set_params(kernels="linear")
    assert other.kernels == "linear" and est.kernels == _params(cls)[0].default
    with pytest.raises(TypeError):
        cls("linear", 1.0)


def _defaults(fn):
    return {p.name: p.default for p in inspect.signature(fn).parameters.values()}


def test_hyper_parameter_defaults_agree_everywhere():
    """The model's hyper-parameters are written out in the signatures of the NumPyro kernel and
    the MAP baseline (both ``Hyper()``'s, the default prior), and in
    the classifier's and the CLI's as ``None``, which means the named ``prior``'s value
    (``PRIORS``); the CLI (which must not import JAX to build its parser) names the same priors
    and offers every hyper-parameter."""
    from bayesmkl.cli.parser import HYPER_OPTIONS, PRIOR_NAMES, build_parser
    from bayesmkl.estimators._fitting import resolve_hyper
    from bayesmkl.model.classification import PRIORS, Hyper
    from bayesmkl.sampler.sampler import BM3KL

    hyper = Hyper()._asdict()
    assert PRIORS["default"] == Hyper() and PRIORS["paper"] == Hyper.paper()
    assert {name for name, _ in HYPER_OPTIONS} == set(hyper)
    assert PRIOR_NAMES == tuple(PRIORS) and PRIOR_NAMES[0] == "default"
    for fn, want in ((baselines.BM3KLMAP, hyper), (BM3KL.__init__, hyper)):
        defaults = _defaults(fn)
        assert {name: defaults[name] for name in hyper} == want, fn
    defaults = _defaults(bayesmkl.BM3KLClassifier)
    assert defaults["prior"] == "default" and all(defaults[name] is None for name in hyper)
    args = build_parser().parse_args(["fit", "x.csv", "--out", "m.nc"])
    assert args.prior == "default" and all(getattr(args, name) is None for name in hyper)
    # resolution: the preset, with the user's own values on top
    assert resolve_hyper(bayesmkl.BM3KLClassifier()) == PRIORS["default"]
    clf = bayesmkl.BM3KLClassifier(prior="paper", gamma0=5.0)
    assert resolve_hyper(clf) == Hyper.paper(gamma0=5.0)


def _sub_parsers():
    import argparse

    from bayesmkl.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_cli_choices_accept_their_defaults_and_every_move():
    """Every CLI option with choices accepts its own default when typed (argparse does not
    check defaults: ``--sampler collapsed_log``, the default move, was refused), ``--sampler``
    offers every move of :data:`bayesmkl.sampler.moves.MOVES`, and the CLI's sampler
    defaults are the estimator's."""
    from bayesmkl.sampler.moves import MOVES

    defaults = _defaults(bayesmkl.BM3KLClassifier)
    for name, parser in _sub_parsers().items():
        for action in parser._actions:
            if action.choices is not None and action.default is not None:
                assert action.default in action.choices, (name, action.dest)
            if action.dest == "sampler":
                assert set(action.choices) == set(MOVES), name
                assert action.default == defaults["sampler"], name
        args = parser.parse_args(["x.csv", "--sampler", defaults["sampler"]]
                                 if name == "fit" else ["--sampler", defaults["sampler"]]
                                 if name == "demo" else ["m.nc", "x.csv"])  # fmt: skip
        if name != "predict":
            assert args.sampler == defaults["sampler"]
            for opt in ("num_warmup", "num_samples", "max_samples", "step_size", "n_leapfrog"):
                assert getattr(args, opt) == defaults[opt], (name, opt)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_docstrings_have_no_unfilled_placeholders(cls):
    """Shared docstring entries (``{{name}}`` lines, :mod:`bayesmkl._docs`) are all filled."""
    docs = {name: getattr(cls, name).__doc__ for name in ("fit", "predict")}
    docs["class"] = cls.__doc__
    assert "Parameters" in cls.__doc__ and "kernels" in cls.__doc__
    for where, doc in docs.items():
        assert "{{" not in (doc or ""), f"{cls.__name__}.{where}"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_bad_parameter_is_refused_in_the_shared_wording(cls):
    """Every estimator checks its parameters with :mod:`bayesmkl.estimators._validation`, whose
    :func:`~bayesmkl.estimators._validation.check_param` words every refusal ``"<name> must be ...;
    got
    <value>"``: a negative ``max_time`` (or ``C`` where there is no budget) is refused so at fit."""
    names = [p.name for p in _params(cls)]
    name = "max_time" if "max_time" in names else "C"
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), np.arange(20) % 2
    with pytest.raises(ValueError, match=rf"^{name} must be [^;]+; got -1$"):
        cls(**{name: -1}).fit(X, y)


def _documented_defaults(cls):
    """``{name: text}`` for each ``name : ..., default=text`` line of the class docstring."""
    import re

    out = {}
    for line in inspect.getdoc(cls).splitlines():
        m = re.match(r"^([\w, ]+) : .*\bdefault=(.+)$", line)
        if m:
            for name in m.group(1).split(","):
                out[name.strip()] = m.group(2).strip()
    return out


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_documented_defaults_match_the_signature(cls):
    """A ``default=`` in the docstring is the signature's default: shared docstring entries
    (``_docstrings.py``) and the parameter tables and hand-written signatures
    (:mod:`bayesmkl.estimators._params`) write a default in several places, so a changed default in
    one must show up here."""
    import ast

    defaults = {p.name: p.default for p in _params(cls)}
    documented = _documented_defaults(cls)
    assert documented, f"{cls.__name__}: no documented defaults found"
    for name, text in documented.items():
        assert name in defaults, f"{cls.__name__}: documents unknown parameter {name!r}"
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue  # prose such as 'default=None (all)' is not checked
        assert value == defaults[name], (
            f"{cls.__name__}.{name}: doc {text}, signature {defaults[name]!r}"
        )


# --------------------------------------------------------------------------------------------
# hand-written __init__: what editors and type checkers read
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_hand_written_init_agrees_with_the_parameter_table(cls):
    """Names, order and keyword-only-ness of the written-out ``__init__`` equal the class's one
    table ``_parameter_constraints``, every default meets its constraints, and the body stores
    every argument verbatim under its own name (each gets a distinct sentinel object)."""
    from bayesmkl.estimators._constraints import NO_VALIDATION, check_param
    from bayesmkl.estimators._params import parameter_table, signature_problems

    assert signature_problems(cls) == []
    assert "def __init__(" in inspect.getsource(cls.__init__)
    table = parameter_table(cls)
    for name, default in _defaults(cls.__init__).items():
        if name != "self" and table[name] is not NO_VALIDATION:
            check_param(name, default, table[name])
    sentinels = {name: object() for name in table}
    est = cls(**sentinels)
    for name, sentinel in sentinels.items():
        assert getattr(est, name) is sentinel, f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_parameters_are_checked_against_the_table_at_fit(cls):
    """Every entry of the table is a list of constraints or ``NO_VALIDATION`` (a value checked
    where it is used), and ``fit`` refuses a value that meets none of an entry's constraints
    before it reads the data (every checked parameter is given the string ``"x"``)."""
    from bayesmkl.estimators._constraints import NO_VALIDATION
    from bayesmkl.estimators._params import parameter_table

    table = parameter_table(cls)
    assert all(c is NO_VALIDATION or isinstance(c, list) for c in table.values()), cls
    checked = [name for name, c in table.items() if c is not NO_VALIDATION]
    assert len(checked) > 1, f"{cls.__name__} checks no parameter but kernels"
    for name in checked:
        with pytest.raises(ValueError, match=rf"\b{name}\b.*'x'"):
            cls(**{name: "x"}).fit(None, None)


def test_signature_problems_sees_each_kind_of_difference():
    """The checker itself: a renamed, reordered, default-less or positional parameter is
    reported."""
    from bayesmkl.estimators._params import signature_problems

    def make(table, init):
        return type("Est", (), {"_parameter_constraints": table, "__init__": init})

    def ok(self, kernels="k", *, C=1.0, tol=0.1):
        pass

    def swapped(self, kernels="k", *, tol=0.1, C=1.0):
        pass

    def positional(self, kernels="k", C=1.0, *, tol=0.1):
        pass

    def no_default(self, kernels="k", *, C, tol=0.1):
        pass

    table = {"kernels": [], "C": [], "tol": []}
    assert signature_problems(make(table, ok)) == []
    assert "parameters" in signature_problems(make(table, swapped))[0]
    assert "keyword-only" in " ".join(signature_problems(make(table, positional)))
    assert signature_problems(make(table, no_default)) == ["Est: C has no default in __init__"]
    ok.__signature__ = inspect.signature(ok)
    assert "generated __signature__" in signature_problems(make(table, ok))[0]


def test_parameter_tables_name_what_the_model_and_sampler_define():
    """The BM3KL tables (JAX-free, for the command line) write out the names of the moves,
    priors, ν updates and named pools; they are the sampler's and the model's, and the
    parameters a warm start compares are the resume module's."""
    from bayesmkl.estimators import _resume as resume
    from bayesmkl.estimators._params import (
        CLASSIFIER_CONSTRAINTS,
        REGRESSOR_CONSTRAINTS,
        RESUME_PARAMS,
        choices,
    )
    from bayesmkl.kernels.input import NAMED_POOLS
    from bayesmkl.model.classification import PRIORS
    from bayesmkl.model.regression import REG_PRIORS
    from bayesmkl.sampler.moves import EXACT_MOVES, MOVES
    from bayesmkl.sampler.state import NU_UPDATES

    clf, reg = CLASSIFIER_CONSTRAINTS, REGRESSOR_CONSTRAINTS
    assert set(choices(clf, "sampler")) == set(MOVES)
    assert set(choices(reg, "sampler")) == set(EXACT_MOVES)
    assert choices(clf, "prior") == tuple(PRIORS) and choices(reg, "prior") == tuple(REG_PRIORS)
    assert set(choices(clf, "nu_update")) == set(NU_UPDATES)
    assert choices(clf, "kernels") == choices(reg, "kernels") == (*NAMED_POOLS, "precomputed")
    assert resume.POSTERIOR_PARAMS is RESUME_PARAMS["posterior"]  # one list, read there
    assert resume.CHAIN_PARAMS is RESUME_PARAMS["chain"]
    assert set(RESUME_PARAMS["posterior"] + RESUME_PARAMS["chain"]) <= set(clf)


def test_cli_parser_imports_no_jax():
    """Building the parser (its choices from the parameter tables) imports neither JAX nor the
    estimators, so ``bayesmkl --help`` stays quick."""
    import subprocess
    import sys

    code = (
        "import sys; from bayesmkl.cli.parser import build_parser; build_parser(); "
        "assert 'jax' not in sys.modules and 'bayesmkl.estimators.classifier' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "code",
    [
        "from bayesmkl import BM3KLClassifier\nBM3KLClassifier(",
        "from bayesmkl.baselines import BM3KLMAP\nBM3KLMAP(",
    ],
)
def test_jedi_lists_the_parameters(code):
    """An editor's completion (jedi, statically: no import of the package) sees the
    parameters, through the packages' lazy ``__getattr__`` too."""
    from pathlib import Path

    jedi = pytest.importorskip("jedi")
    root = Path(__file__).resolve().parent.parent
    script = jedi.Script(
        code, path=root / "probe.py", project=jedi.Project(root),
        environment=jedi.InterpreterEnvironment(),
    )  # fmt: skip
    signatures = script.get_signatures()
    assert len(signatures) == 1
    names = [p.name for p in signatures[0].params]
    assert "gamma0" in names and names[0] == "kernels"


@pytest.mark.parametrize("package", [bayesmkl, baselines])
def test_type_checking_imports_cover_the_lazy_names(package):
    """Every lazily exported name is also imported under ``if TYPE_CHECKING`` (what jedi and
    the type checkers read); M3K and OBSCURE were missing there."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(package.__file__).read_text())
    seen = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom):
                    seen.update(a.asname or a.name for a in imp.names)
    assert seen == set(package.__all__) - {"__version__"}
