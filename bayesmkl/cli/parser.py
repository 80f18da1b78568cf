"""The argument parser of the ``bayesmkl`` command (:mod:`bayesmkl.cli` runs it).

Building the parser imports neither JAX nor the estimators, so ``bayesmkl --help`` is quick: the
choices of the options come from the parameter tables of :mod:`bayesmkl.estimators._params`,
which import neither.
"""

from __future__ import annotations

import argparse

from bayesmkl.estimators._params import AUTO_EXACT_MAX_N, AUTO_N_LANDMARKS, choices
from bayesmkl.estimators._params import CLASSIFIER_CONSTRAINTS as _TABLE
from bayesmkl.model.bounds import HYPER_BOUNDS

__all__ = ["CALIBRATIONS", "DEMO_MAX_TIME", "HYPER_OPTIONS", "MOVE_NAMES", "POOLS",
           "PRIOR_NAMES", "TASKS", "build_parser"]  # fmt: skip

PROG = "bayesmkl"

# ----------------------------------------------------------------------------------------
# argument parsing
# ----------------------------------------------------------------------------------------


#: Sampling budget of ``bayesmkl demo`` in seconds: a safety cap (the default prior reaches the
#: targets in well under it on breast cancer; with --calibration cv, 3 refits follow).
DEMO_MAX_TIME = 120.0
#: Kernel-weight moves offered by the CLI: the classifier's ``sampler`` choices.
MOVE_NAMES = choices(_TABLE, "sampler")

#: The model's hyper-parameters as options ``--name`` (name, symbol); each defaults to the value
#: of the named ``--prior`` (``bayesmkl.model.classification.PRIORS``).
HYPER_OPTIONS = (
    ("gamma0", "γ0"),
    ("beta_a", "β_a"),
    ("alpha_a", "α_a"),
    ("eta", "η, Dirichlet concentration"),
    ("kappa", "κ"),
    ("bias_prior_var", "τ, prior variance of the biases"),
)
PRIOR_NAMES = choices(_TABLE, "prior")
#: ``fit --task`` choices, the first the default.
TASKS = ("classification", "regression")
#: ``--calibration`` choices, the first the default (``none`` is ``calibration=None``).
CALIBRATIONS = (*choices(_TABLE, "calibration"), "none")
#: ``--pool`` choices: the named pools of ``kernels``.
POOLS = tuple(k for k in choices(_TABLE, "kernels") if k != "precomputed")


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer written in digits (any size: the estimators reduce
    seeds of 2**63 or more to JAX's key space); ``1e20`` or ``-1`` is refused by argparse."""
    t = text.strip()
    if not t.isdigit():
        raise argparse.ArgumentTypeError(
            f"must be a non-negative integer written in digits, e.g. 0 or 12345; got {text!r}"
        )
    return int(t)


def _n_landmarks(text: str):
    """``--n-landmarks``: ``auto``, ``exact`` (``None``) or an integer of at least 1."""
    if text in ("auto", "exact"):
        return None if text == "exact" else text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be 'auto', 'exact' or an integer of at least 1; got {text!r}"
        )
    return value


def _or_auto(cast, what: str):
    """An argparse ``type``: the word ``auto``, or ``cast(text)`` (``what`` names it in errors)."""

    def parse(text: str):
        if text == "auto":
            return text
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} or 'auto'; got {text!r}") from None

    return parse


def _add_label_col(p) -> None:
    p.add_argument(
        "--label-col",
        metavar="NAME|INDEX",
        default=None,
        help="the label (target) column: its header name or 0-based position, negative from "
        "the end (default: the last column)",
    )


def _add_sampler_args(p, *, chains_default: int, max_time_default=None) -> None:
    g = p.add_argument_group("sampler and hyper-parameters")
    g.add_argument(
        "--num-warmup",
        type=int,
        default=300,
        metavar="N",
        help="Gibbs sweeps discarded (default 300; the paper: 180)",
    )
    g.add_argument(
        "--num-samples",
        type=_or_auto(int, "an integer"),
        default="auto",
        metavar="N",
        help="sweeps kept per chain, or 'auto' (default): until R-hat <= 1.01 and bulk ESS "
        ">= 400 on the kernel weights and held-in decision values, or the budget",
    )
    g.add_argument(
        "--max-samples",
        type=int,
        default=5000,
        metavar="N",
        help="budget of sweeps per chain for --num-samples auto (default 5000)",
    )
    g.add_argument(
        "--max-time",
        type=float,
        default=max_time_default,
        metavar="S",
        help="time budget in seconds for --num-samples auto, calibration refits excluded "
        f"(default {max_time_default})",
    )
    g.add_argument(
        "--chains",
        type=int,
        default=chains_default,
        metavar="N",
        help=f"number of chains (default {chains_default})",
    )
    g.add_argument("--seed", type=_seed, default=0, help="sampler seed (default 0)")
    _add_choice(g, "--prior", PRIOR_NAMES, "named hyper-parameters (the paper's: 'paper')")
    for name, symbol in HYPER_OPTIONS:
        flag = "--" + name.replace("_", "-")
        lo, hi = HYPER_BOUNDS[name]  # refused outside (main): there the arithmetic fails
        text = f"{symbol} (default: the prior's; allowed {lo:g} to {hi:g})"
        g.add_argument(flag, type=float, default=None, help=text)
    g.add_argument(
        "--sampler",
        choices=MOVE_NAMES,
        default="collapsed_log",
        help="kernel-weight move (default collapsed_log; paper and stable are biased)",
    )
    g.add_argument("--step-size", type=float, default=0.01, help="ε (default 0.01)")
    g.add_argument("--n-leapfrog", type=int, default=10, help="L (default 10)")
    _add_choice(g, "--nu-update", choices(_TABLE, "nu_update"), "update of the TPBN scales ν")
    _add_choice(
        g, "--binary-mode", choices(_TABLE, "binary_mode"),
        "two classes: one classifier or one-vs-all",
    )  # fmt: skip
    _add_choice(
        g,
        "--kernel-dtype",
        choices(_TABLE, "kernel_dtype"),
        "storage of the kernels; float32 halves their memory",
    )
    _add_choice(
        g,
        "--calibration",
        CALIBRATIONS,
        "probability map: PSIS-LOO on the one posterior (loo), 3-fold refits (cv), or none",
    )
    g.add_argument(
        "--n-landmarks",
        type=_n_landmarks,
        default="auto",
        metavar="M|auto|exact",
        help="fit the landmark model on M training rows (a sweep costs O(N M^2) instead of "
        "O(N^3); for thousands of rows), or the exact model; default: auto (exact up to "
        f"{AUTO_EXACT_MAX_N:,} training rows, {AUTO_N_LANDMARKS} landmarks above)",
    )
    _add_choice(
        g,
        "--landmark-method",
        choices(_TABLE, "landmark_method"),
        "choice of the landmark rows with --n-landmarks",
    )
    g.add_argument("--raw-proba", action="store_true", help="the same as --calibration none")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _add_choice(parser, flag: str, choices: tuple, text: str) -> None:
    """Add ``flag`` taking one of ``choices``; the first is the default, named in the help."""
    parser.add_argument(
        flag, choices=choices, default=choices[0], help=f"{text} (default {choices[0]})"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``bayesmkl`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bayesian multiple kernel learning (BM3KL, Du et al. 2016).",
    )
    from bayesmkl import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,fit,predict}")

    p = sub.add_parser(
        "demo",
        help="fit BM3KL on the bundled breast-cancer data",
        description="Fit BM3KL on scikit-learn's breast-cancer data (stratified "
        "70/30 split, seed 0, 16-kernel pool, the default prior, 4 chains sampled until "
        "converged or for --max-time seconds); print "
        "metrics, kernel weights and ESS/R-hat; write PNG figures and the fit.",
    )
    p.add_argument(
        "--out",
        default="bayesmkl-demo",
        metavar="DIR",
        help="output directory (default bayesmkl-demo)",
    )
    _add_sampler_args(p, chains_default=4, max_time_default=DEMO_MAX_TIME)

    p = sub.add_parser(
        "fit",
        help="fit on a CSV file (label or target in the last column)",
        description="Fit BM3KL on a numeric CSV whose last column is the class "
        "label, or with --task regression the numeric target (BM3KLRegressor); an optional "
        "header row is detected. Print test metrics and save the model, figures included, "
        "into --out.",
    )
    p.add_argument("data", metavar="DATA.csv")
    _add_choice(p, "--task", TASKS, "what the last column is: a class label or a target")
    _add_label_col(p)
    _add_choice(p, "--pool", POOLS, "kernel pool")
    p.add_argument(
        "--test-size",
        type=float,
        default=0.3,
        help="held-out fraction, stratified when possible; 0 trains on all (default 0.3)",
    )
    p.add_argument(
        "--epsilon",
        type=_or_auto(float, "a number"),
        default=None,
        metavar="E",
        help="--task regression: half-width ε of the insensitive tube in the target's units, "
        "or 'auto' (default: learnt, with its prior)",
    )
    p.add_argument("--split-seed", type=int, default=0, help="seed of the split (default 0)")
    p.add_argument(
        "--out",
        default="bayesmkl-model",
        metavar="DIR",
        help="output directory (default bayesmkl-model); the model is DIR/model.nc",
    )
    _add_sampler_args(p, chains_default=4)

    p = sub.add_parser(
        "predict",
        help="class probabilities (or predictive intervals) for the rows of a CSV file",
        description="Write the posterior predictive class probabilities (one "
        "column per class) and the predicted label of each row as CSV; for a regression "
        "model, the predictive mean, standard deviation and 90% interval of each row.",
    )
    p.add_argument("model", metavar="MODEL.nc", help="a model written by 'bayesmkl fit'")
    p.add_argument("data", metavar="DATA.csv")
    p.add_argument("--out", metavar="probs.csv", help="output CSV (default: stdout)")
    p.add_argument(
        "--has-label",
        action="store_true",
        help="the last column is a label (target): drop it and report accuracy (RMSE and "
        "the 90%% interval's coverage)",
    )
    _add_label_col(p)
    return parser
