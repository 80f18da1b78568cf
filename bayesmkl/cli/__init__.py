"""The ``bayesmkl`` command line.

Sub-commands
------------
``bayesmkl demo``
    Fit BM³KL on scikit-learn's bundled breast-cancer data (stratified 70/30 split, seed 0,
    the 16-kernel pool, the default prior and 4 chains run until converged), print test
    metrics, kernel weights and ESS/R-hat, and write figures (PNG) and the fit (netCDF).
``bayesmkl fit DATA.csv``
    Fit on any CSV whose last column is the label (``--task regression``: a numeric target,
    fitted by :class:`~bayesmkl.BM3KLRegressor`); print test metrics; save the model.
``bayesmkl predict MODEL.nc DATA.csv``
    Write class probabilities of the rows of a CSV (with or without a label column), or for a
    saved regressor the predictive mean, standard deviation and 90% interval.

Every error ends with one line on stderr ("bayesmkl: error: ...") and a non-zero exit status,
never a traceback: 2 for bad input (paths, malformed CSV files, refused data or parameters,
corrupt or damaged model files), 1 for failures while running (not enough memory, a diverged
sampler, non-finite predictions, an output that cannot be written, a closed pipe as in
``bayesmkl predict ... | head``), 130 for Ctrl-C. ``BAYESMKL_DEBUG=1`` shows the traceback of an
unexpected error instead.

The JAX compilation cache is kept in ``$BAYESMKL_CACHE_DIR`` (default
``~/.cache/bayesmkl/jax``) so that repeated runs on data of the same shape skip most of the
compile time; set ``BAYESMKL_NO_JAX_CACHE=1`` to switch this off.

This module holds the sub-commands and the error handling; the parser is
:mod:`bayesmkl.cli.parser`, the CSV reader
:mod:`bayesmkl.cli.csv_input` (re-exported here as :func:`read_csv`) and what a fit prints and
writes
is :mod:`bayesmkl.cli.report`.
"""

from __future__ import annotations

import csv
import os
import sys
import warnings
from pathlib import Path

import numpy as np

from bayesmkl.cli.csv_input import read_csv
from bayesmkl.cli.parser import HYPER_OPTIONS, PROG, build_parser
from bayesmkl.cli.report import fit_and_report

__all__ = ["build_parser", "main", "read_csv"]


class CLIError(Exception):
    """An error reported as one line on stderr with exit status 2."""


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _enable_jax_cache() -> None:
    if os.environ.get("BAYESMKL_NO_JAX_CACHE"):
        return
    from bayesmkl.estimators._fitting import enable_compilation_cache

    enable_compilation_cache()


def _make_out(path) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create output directory {out}: {exc.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):  # checked before a long fit, not after it
        raise CLIError(f"output directory {out} is not writable")
    return out


def _split(X, y, test_size: float, seed: int, stratified: bool = True):
    from sklearn.model_selection import train_test_split

    if test_size == 0:
        return X, None, y, None
    if not stratified:
        return train_test_split(X, y, test_size=test_size, random_state=seed)
    _, counts = np.unique(y, return_counts=True)
    n_test = int(np.ceil(test_size * len(y)))
    stratify = y if counts.min() >= 2 and n_test >= len(counts) else None
    return train_test_split(X, y, test_size=test_size, random_state=seed, stratify=stratify)


# ----------------------------------------------------------------------------------------
# sub-commands
# ----------------------------------------------------------------------------------------


def _classifier(args, kernels):
    from bayesmkl.estimators.classifier import BM3KLClassifier

    return BM3KLClassifier(
        kernels=kernels,
        prior=args.prior,
        **{name: getattr(args, name) for name, _ in HYPER_OPTIONS},
        **_run_options(args),
        nu_update=args.nu_update,
        binary_mode=args.binary_mode,
        calibration=None if args.raw_proba or args.calibration == "none" else args.calibration,
    )


def _run_options(args) -> dict:
    """The sampler, run-length, storage and seed options both estimators take."""
    return dict(
        sampler=args.sampler,
        step_size=args.step_size,
        n_leapfrog=args.n_leapfrog,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        max_samples=args.max_samples,
        max_time=args.max_time,
        num_chains=args.chains,
        kernel_dtype=args.kernel_dtype,
        n_landmarks=args.n_landmarks,
        landmark_method=args.landmark_method,
        random_state=args.seed,
        progress_bar=not args.no_progress,
    )


#: Options of ``fit`` that only a classifier has, with their defaults; ``--task regression``
#: refuses any other value (rather than ignore it).
CLASSIFIER_ONLY = {"gamma0": None, "raw_proba": False, "calibration": "loo",
                   "binary_mode": "single", "nu_update": "gibbs"}  # fmt: skip


def _regressor(args, kernels):
    from bayesmkl.estimators.regressor import BM3KLRegressor

    given = [k for k, v in CLASSIFIER_ONLY.items() if getattr(args, k) != v]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise CLIError(f"{flags}: classification only; --task regression does not use it")
    return BM3KLRegressor(
        kernels=kernels,
        prior=args.prior,
        **{name: getattr(args, name) for name, _ in HYPER_OPTIONS if name != "gamma0"},
        epsilon="auto" if args.epsilon is None else args.epsilon,
        **_run_options(args),
    )


def _numeric_target(y, path) -> np.ndarray:
    """The last column as floats, or a CLIError naming the first row that is not a number."""
    out = np.empty(len(y))
    for i, v in enumerate(y):
        try:
            out[i] = float(v)
        except ValueError:
            raise CLIError(f"{path}: the target of data row {i + 1} is not a number: '{v}' "
                           "(--task regression needs a numeric last column)") from None  # fmt: skip
    if not np.all(np.isfinite(out)):
        i = int(np.flatnonzero(~np.isfinite(out))[0])
        raise CLIError(f"{path}: the target of data row {i + 1} is {out[i]!r}, not finite")
    # checked here, on the file's rows: the regressor's own refusal would number the row within
    # the training split, not the file
    from bayesmkl.posterior.checks import scaled_sd

    with np.errstate(over="ignore", invalid="ignore"):
        overflows = not (np.isfinite(np.mean(out)) and np.isfinite(scaled_sd(out)))
    if overflows:
        i = int(np.argmax(np.abs(out)))
        raise CLIError(
            f"{path}: the target of data row {i + 1} is {out[i]:.3g}, which makes the mean or "
            "variance of the targets overflow float64. Rescale the target column (e.g. divide it "
            "by its largest absolute value, or take a logarithm) or remove the row."
        )
    return out


def cmd_demo(args) -> int:
    from bayesmkl.datasets import load_demo

    X, y, _ = load_demo()
    names = np.array(["malignant", "benign"])
    y = names[y]
    X_tr, X_te, y_tr, y_te = _split(X, y, 0.3, 0)
    print(
        f"breast cancer (scikit-learn bundled): {X.shape[0]} points, {X.shape[1]} features; "
        f"stratified 70/30 split, seed 0 -> {len(y_tr)} train / {len(y_te)} test"
    )
    out = _make_out(args.out)
    clf = _classifier(args, "bsvm16")
    fit_and_report(clf, X_tr, y_tr, X_te, y_te, out, "bm3kl_demo")
    return 0


def cmd_fit(args) -> int:
    if not 0 <= args.test_size < 1:
        raise CLIError(f"--test-size must be in [0, 1); got {args.test_size}")
    regression = args.task == "regression"
    if args.epsilon is not None and not regression:
        raise CLIError("--epsilon: regression only; add --task regression")
    clf = _regressor(args, args.pool) if regression else _classifier(args, args.pool)
    X, y, _ = read_csv(args.data, has_label=True, label_col=args.label_col)
    if regression:
        y = _numeric_target(y, args.data)
    elif len(np.unique(y)) < 2:
        raise CLIError(f"{args.data}: the label column has a single class")
    X_tr, X_te, y_tr, y_te = _split(X, y, args.test_size, args.split_seed, not regression)
    out = _make_out(args.out)
    what = "a numeric target" if regression else f"{len(np.unique(y))} classes"
    print(
        f"{args.data}: {X.shape[0]} points, {X.shape[1]} features, {what}; "
        f"{len(y_tr)} train / {0 if y_te is None else len(y_te)} test"
    )
    fit_and_report(clf, X_tr, y_tr, X_te, y_te, out, "model")
    return 0


def _load_model(model: Path):
    """The classifier or regressor saved in ``model`` (the file says which)."""
    from bayesmkl import io
    from bayesmkl.estimators.classifier import BM3KLClassifier
    from bayesmkl.estimators.regressor import BM3KLRegressor

    if not model.is_file():
        raise CLIError(f"no such model file: {model}")
    try:
        cls = BM3KLRegressor if io.saved_estimator(model) == io.REGRESSOR else BM3KLClassifier
        return cls.load(model)
    except (ValueError, OSError, KeyError) as exc:
        raise CLIError(f"cannot load model {model}: {exc}") from None


def _number(v) -> str:
    """A predicted number as written to the CSV: 6 significant digits."""
    return f"{float(v):.6g}"


def _class_rows(clf, X, y, path):
    """Header, rows and summary line of ``predict`` for a classifier."""
    if y is not None:  # compared as the estimator does: 1, 1.0 and "1.0" are the same label
        from bayesmkl.estimators._validation import label_codes

        try:
            codes = label_codes(y, clf.classes_, f"the label column of {path}")
        except ValueError as exc:
            raise CLIError(f"{exc}; drop the column and --has-label to predict anyway") from None
    proba = clf.predict_proba(X)
    pred = clf.classes_[np.argmax(proba, axis=1)]
    header = [f"p_{c}" for c in clf.classes_.tolist()] + ["predicted"]
    rows = ([_number(v) for v in p] + [lab] for p, lab in zip(proba, pred, strict=True))
    if y is None:
        return header, rows, None
    acc = float(np.mean(np.argmax(proba, axis=1) == codes))
    return header, rows, f"accuracy on the labelled rows: {acc:.4f}"


def _target_rows(reg, X, y, path):
    """Header, rows and summary line of ``predict`` for a regressor."""
    y = None if y is None else _numeric_target(y, path)
    mean, sd = reg.predict(X, return_std=True)
    lo, hi = reg.predict_interval(X, 0.9).T
    header = ["mean", "sd", "lower_90", "upper_90"]
    rows = ([_number(v) for v in r] for r in zip(mean, sd, lo, hi, strict=True))
    if y is None:
        return header, rows, None
    rmse = float(np.sqrt(np.mean((mean - y) ** 2)))
    cover = float(np.mean((lo <= y) & (y <= hi)))
    summary = f"RMSE on the labelled rows: {rmse:.6g}; 90% interval coverage: {cover:.3f}"
    return header, rows, summary


def cmd_predict(args) -> int:
    est = _load_model(Path(args.model))
    has_label = args.has_label or args.label_col is not None
    X, y, _ = read_csv(args.data, has_label=has_label, label_col=args.label_col)
    d = getattr(est, "n_features_in_", None)
    if d is not None and X.shape[1] != d:
        hint = "" if has_label else " (if the last column is a label, pass --has-label)"
        raise CLIError(f"{args.data} has {X.shape[1]} feature columns; the model expects {d}{hint}")
    rule = _class_rows if hasattr(est, "classes_") else _target_rows
    header, rows, summary = rule(est, X, y, args.data)
    try:
        fh = open(args.out, "w", newline="") if args.out else sys.stdout
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    try:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    finally:
        if args.out:
            fh.close()
    if args.out:
        what = "probabilities" if rule is _class_rows else "predictions"
        print(f"wrote {what} of {X.shape[0]} rows to {args.out}", file=sys.stderr)
    if summary:
        print(summary, file=sys.stderr)
    return 0


def main(argv=None) -> int:
    """Entry point of the ``bayesmkl`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command in ("demo", "fit"):
            for name in ("num_samples", "max_samples", "chains", "n_leapfrog"):
                if getattr(args, name) != "auto" and getattr(args, name) < 1:
                    raise CLIError(f"--{name.replace('_', '-')} must be at least 1")
            if args.num_warmup < 0:
                raise CLIError("--num-warmup must be non-negative")
            from bayesmkl.estimators._validation import check_hyper

            for name, _ in HYPER_OPTIONS:  # before reading data: the ranges of _bounds
                if getattr(args, name) is not None:  # None: the prior's value
                    check_hyper(name, getattr(args, name), "--" + name.replace("_", "-"))
        _enable_jax_cache()
        commands = {"demo": cmd_demo, "fit": cmd_fit, "predict": cmd_predict}
        formatwarning = warnings.formatwarning
        warnings.formatwarning = _format_warning  # printed warnings only; recorders still see all
        try:
            return int(commands[args.command](args) or 0)
        finally:
            warnings.formatwarning = formatwarning
    except CLIError as exc:
        return _fail(exc, 2)
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (e.g. `| head`): no flush error at exit
        return _fail("output closed before all rows were written (broken pipe)", 1)
    except MemoryError as exc:  # also KernelMemoryError, which says how much was needed
        if isinstance(exc, ValueError):
            return _fail(exc, 1)
        return _fail(f"out of memory{': ' + str(exc) if str(exc) else ''}", 1)
    except FloatingPointError as exc:  # diverged sampler, non-finite predictions
        return _fail(exc, 1)
    except (ImportError, ValueError) as exc:  # invalid parameters, refused data, bad files
        return _fail(exc, 2)
    except OSError as exc:  # e.g. an output file or directory that cannot be written
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        return _fail(f"cannot access{where}: {exc.strerror or exc}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        if os.environ.get("BAYESMKL_DEBUG"):
            raise
        return _fail(f"internal error ({type(exc).__name__}: {exc}); BAYESMKL_DEBUG=1 shows "
                     "the traceback", 1)  # fmt: skip


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as the command's own line: the message, without the package's file paths."""
    return f"{PROG}: warning: {message}\n"


def _fail(msg, code: int) -> int:
    """Print ``msg`` as one line on stderr and return ``code``."""
    text = str(msg).strip()
    line = text.splitlines()[0] if text else type(msg).__name__
    try:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    except (OSError, ValueError):  # stderr closed too
        pass
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or already closed
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
