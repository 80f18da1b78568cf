"""The BM3KL estimators' parameter tables, and the check that a class's table and its written-out
``__init__`` agree.

scikit-learn reads an estimator's parameters from its ``__init__`` signature and expects
``__init__`` to store each of them, unchanged, under its own name, and to do nothing else
(validation belongs in ``fit``). Every estimator of the package writes that ``__init__`` out,
as scikit-learn's own estimators do, so that editors and type checkers (jedi, pyright, mypy) see
its parameters and defaults: ``kernels`` first (positional or keyword), every other parameter
keyword-only, and a body of ``self.<name> = <name>`` lines.

Each estimator class declares its parameters once more, in one table
``_parameter_constraints`` (name → list of constraints of
:mod:`bayesmkl.estimators._constraints`, in signature order), which ``fit`` validates against,
the command line takes its choices from, and :func:`signature_problems` checks against the
signature. The two BM3KL tables are here, in a module that imports neither JAX nor
scikit-learn, so that :mod:`bayesmkl.cli.parser` can read them; the baselines declare theirs in
their class bodies (with the groups they share from :mod:`bayesmkl.baselines._base` and
:mod:`bayesmkl.baselines._solvers` spliced in). The names of the moves, priors, ν updates and
named pools are written out in the tables; ``tests/test_api_conventions.py`` checks them against
:data:`bayesmkl.sampler.moves.MOVES`, :data:`bayesmkl.model.classification.PRIORS` and the others.
"""

from __future__ import annotations

import inspect

from bayesmkl.estimators._constraints import (
    MAX_TIME,
    NO_VALIDATION,
    Boolean,
    ClassWeight,
    DtypeOptions,
    HyperRange,
    Interval,
    KernelsParam,
    Options,
)

__all__ = [
    "CLASSIFIER_CONSTRAINTS",
    "REGRESSOR_CONSTRAINTS",
    "RESUME_PARAMS",
    "choices",
    "parameter_table",
    "signature_problems",
]

_POSITIVE = [Interval("real", 0, None, closed="neither")]
_KERNELS = [KernelsParam("bsvm16", "simplemkl", "precomputed")]
_PRIOR = [Options("default", "paper")]
_NUM_SAMPLES = [Interval("int", 1, 1_000_000, closed="both"), Options("auto")]
_RHAT_TARGET = [
    Interval("real", 1, None, closed="neither", allow_inf=True, description="a number > 1")
]
_KERNEL_DTYPE = [DtypeOptions("float64", "float32"), None]
#: ``n_landmarks="auto"`` fits the exact model on at most this many training rows and the
#: landmark model above. At N = 1,400 (magic, three splits, docs/benchmarks.md) the exact fit
#: converged in none of its 600 s budgets, while landmark fits from M = 250 on reached its
#: log-loss within two standard errors.
AUTO_EXACT_MAX_N = 1000
#: Landmarks of an ``n_landmarks="auto"`` fit above :data:`AUTO_EXACT_MAX_N` rows: from 250
#: on the landmark fit matched the exact fit's log-loss, and the sweep costs O(N·M²).
AUTO_N_LANDMARKS = 300
#: The landmark model (docs/math.md §16): ``None`` (exact), M ≥ 1 landmarks (M ≤ N is checked
#: at fit, where N is known) or ``"auto"`` (by N, at fit), and the rule that picks them
#: (:data:`bayesmkl.kernels.landmarks.LANDMARK_METHODS`).
_LANDMARKS = {
    "n_landmarks": [None, Interval("int", 1, None, closed="left"), Options("auto")],
    "landmark_method": [Options("kmeans++", "stratified")],
}

#: The landmark parameters' and attributes' docstring entries, shared by both estimators
#: (:func:`bayesmkl._docs.fill_doc`).
LANDMARK_DOCS = {
    "n_landmarks": f"""n_landmarks : "auto", int or None, default="auto"
    ``"auto"``: the exact model on at most {AUTO_EXACT_MAX_N:,} training rows, \
{AUTO_N_LANDMARKS} landmarks
    above (with precomputed kernels, or ``nu_update="collapsed"``, the exact model); the
    fit's choice is ``n_landmarks_``. ``None``: the exact model, one sample weight per
    training point (the Gaussian step costs O(N³) per sweep and the kernels P·N² entries).
    An int M
    (1 ≤ M ≤ N): the landmark (reduced-support) model of docs/math.md §16,
    f(x) = Σ_j a_j K_w(x, z_j) + b over M training rows z_j (``landmarks_``) chosen by
    ``landmark_method``; the pseudo-likelihood still runs over all N points. A sweep then
    costs O(N·M² + M³) and the kernels take P·N·M entries, so it is the setting for large N
    (M of a few hundred); M = N with the landmarks in training order is the exact model.
    Prediction needs the kernels against the M landmarks only. An int with
    ``nu_update="collapsed"`` is refused. With ``kernels="precomputed"`` the estimator cannot
    choose landmarks: ``fit`` then takes the kernels between the training points and
    landmarks of your choice, ``(P, N, M)``, and prediction ``(P, M_new, M)``. A pool with
    ``center=True`` (the classifier's ``"bsvm16"`` with three or more classes) is centred at
    the landmarks' mean.""",
    "landmark_method": """landmark_method : {"kmeans++", "stratified"}, default="kmeans++"
    How a landmark fit picks its M training rows
    (:func:`bayesmkl.kernels.landmarks.choose_landmarks`): k-means++ seeding on the
    standardised features (rows spread over the data), or a uniform random subset stratified
    by class (a plain uniform subset for regression). Seeded by ``random_state``.""",
    "landmark_attributes": """landmarks_ : ndarray (M, d)
    A landmark fit's landmarks in input space (the training rows ``landmark_indices_``, up to
    rounding); set only for a landmark fit (``None`` with precomputed kernels).
landmark_indices_ : ndarray of int (M,)
    The landmarks' training rows (``None`` with precomputed kernels).
n_landmarks_ : int or None
    The fit's number of landmarks M (``None``: the exact model), ``n_landmarks`` resolved.""",
}


def _hyper(*names) -> dict:
    """``None`` (the named prior's value) or a value within the hyper-parameter's range."""
    return {name: [None, HyperRange(name)] for name in names}


#: Upper bounds of the run-length parameters of both BM3KL estimators. One compiled call runs
#: ``RUN_CHUNK`` sweeps of ``n_leapfrog`` steps each and cannot be interrupted (neither
#: ``max_time`` nor Ctrl-C acts inside it: ``n_leapfrog=10**9`` ran for hours), so ``n_leapfrog``
#: is bounded where a chunk takes seconds on the data sizes the package handles; the others bound
#: the draws kept in memory (chains × draws × points) and the warm-up to sizes no fit needs more.
LOOP_BOUNDS = {
    "n_leapfrog": 1_000,
    "num_warmup": 100_000,
    "num_samples": 1_000_000,
    "max_samples": 1_000_000,
    "num_chains": 256,
}


def _count(name: str, low: int) -> list:
    return [Interval("int", low, LOOP_BOUNDS[name], closed="both")]


def _run(*, with_nu_update: bool, moves: Options) -> dict:
    """The sampler and run-length parameters (``nu_update`` only where the model has it)."""
    return {
        "sampler": [moves],
        "step_size": _POSITIVE,
        "n_leapfrog": _count("n_leapfrog", 1),
        **({"nu_update": [Options("gibbs", "collapsed")]} if with_nu_update else {}),
        "num_warmup": _count("num_warmup", 0),
        "num_samples": _NUM_SAMPLES,
        "num_chains": _count("num_chains", 1),
        "chain_method": [Options("sequential", "parallel", "vectorized")],
        "rhat_target": _RHAT_TARGET,
        "ess_target": _POSITIVE,
        "max_samples": _count("max_samples", 1),
        "max_time": MAX_TIME,
    }


#: :class:`~bayesmkl.BM3KLClassifier`'s parameters and their constraints, in signature order.
CLASSIFIER_CONSTRAINTS = {
    "kernels": _KERNELS,
    "prior": _PRIOR,
    **_hyper("eta", "alpha_a", "beta_a", "kappa", "bias_prior_var", "gamma0"),
    **_run(
        with_nu_update=True,
        moves=Options(
            "collapsed_log",
            "collapsed",
            "gibbs",
            "exact",
            "rmala",
            "paper",
            "stable",
            message="unknown {name}={value!r}; choose one of {values}",
        ),
    ),  # fmt: skip
    "binary_mode": [Options("single", "ova")],
    "decision": [Options("proba", "mean_f")],
    "calibration": [Options("loo", "cv"), None, Interval("int", 2, None, closed="left")],
    **_LANDMARKS,
    "kernel_dtype": _KERNEL_DTYPE,
    "random_state": NO_VALIDATION,  # make_rng_key
    "progress_bar": NO_VALIDATION,
    "class_weight": [None, ClassWeight()],
    "kernel_names": NO_VALIDATION,  # bayesmkl.kernels.input.KernelInput
    "warm_start": [Boolean()],
}

_NOISE_PRIOR = [Interval("real", 0, 1e6, closed="right", description="a number in (0, 1e6]")]

#: :class:`~bayesmkl.BM3KLRegressor`'s parameters and their constraints, in signature order.
REGRESSOR_CONSTRAINTS = {
    "kernels": _KERNELS,
    "prior": _PRIOR,
    **_hyper("eta", "alpha_a", "beta_a", "kappa", "bias_prior_var"),
    "epsilon": [Options("auto"), Interval("real", 0, None, closed="left")],
    "c_shape": _NOISE_PRIOR,
    "c_rate": _NOISE_PRIOR,
    "eps_shape": _NOISE_PRIOR,
    "eps_rate": _NOISE_PRIOR,
    **_run(
        with_nu_update=False,
        moves=Options("collapsed_log", "collapsed", "gibbs", "exact", "rmala"),  # exact only
    ),
    **_LANDMARKS,
    "kernel_dtype": _KERNEL_DTYPE,
    "random_state": NO_VALIDATION,
    "progress_bar": NO_VALIDATION,
    "kernel_names": NO_VALIDATION,
}

#: The classifier's parameters that a ``warm_start`` fit must find unchanged, by role: those
#: that define the posterior (with the data) and those that define the Markov chain
#: (:mod:`bayesmkl.estimators._resume` reads them).
RESUME_PARAMS = {
    "posterior": ("kernels", "prior", "eta", "alpha_a", "beta_a", "kappa", "bias_prior_var",
                  "gamma0", "binary_mode", "kernel_dtype", "class_weight", "n_landmarks",
                  "landmark_method"),
    "chain": ("sampler", "step_size", "n_leapfrog", "nu_update", "num_warmup", "num_chains"),
}  # fmt: skip


def choices(table: dict, name: str) -> tuple:
    """The values of the :class:`~bayesmkl.estimators._constraints.Options` (or named kernels)
    that ``table`` allows for ``name``, in their order (for the command line's choices)."""
    return tuple(v for c in table[name] if hasattr(c, "values") for v in c.values)


def parameter_table(cls) -> dict:
    """``cls._parameter_constraints``, the estimator's one table of its parameters (declared in
    the class or inherited with its ``__init__``); ``TypeError`` for a class without one."""
    table = getattr(cls, "_parameter_constraints", None)
    if not table:
        raise TypeError(f"{cls.__name__} declares no _parameter_constraints table")
    return table


def signature_problems(cls) -> list[str]:
    """How ``cls.__init__`` departs from the table ``cls._parameter_constraints`` (empty if it
    agrees).

    Checked: the parameter names and their order, that every parameter has a default,
    ``kernels`` first and positional-or-keyword, every other parameter keyword-only, and that
    ``__init__`` is a written-out function (no generated ``__signature__``).

    Examples
    --------
    >>> class Est:
    ...     _parameter_constraints = {"kernels": [], "tol": [], "C": []}
    ...     def __init__(self, kernels="linear", *, C=1.0, tol=0.1):
    ...         self.kernels = kernels
    ...         self.C = C
    ...         self.tol = tol
    >>> signature_problems(Est)  # doctest: +NORMALIZE_WHITESPACE
    ["Est: __init__ has the parameters ['kernels', 'C', 'tol'], the table ['kernels', 'tol',
    'C']"]
    """
    name = cls.__name__
    table = dict(parameter_table(cls))
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
        if p.default is inspect.Parameter.empty:
            problems.append(f"{name}: {p.name} has no default in __init__")
    return problems
