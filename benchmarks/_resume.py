"""Resumable benchmark runs: each finished unit of work is saved at once, and a restart skips it.

A *unit* is the smallest piece of a benchmark worth keeping on its own (one data set × split ×
method, one stress fit). :class:`UnitStore` keeps the units of one results file: every
:meth:`~UnitStore.add` writes the whole JSON file again, atomically (a temporary file in the
same directory, then ``os.replace``), so an interrupted run — Ctrl-C, a kill, a crash, a full
machine — leaves the units it finished, never a half-written file. Each unit records the package
commit it was computed with (``git rev-parse HEAD``, or ``"unknown"``), the load average when it
ended (``os.getloadavg()``), the process id and the time.

A restart with the same configuration skips the finished units; with another configuration it
refuses to mix them (pass ``fresh=True``, the scripts' ``--fresh``, to start over). A results
file of the earlier, non-resumable format is started over.

Setting ``BAYESMKL_BENCH_STOP_AFTER=k`` stops a run (exit status :data:`STOPPED`) after it has
finished ``k`` units, as a kill at that point would: the tests use it to interrupt and restart.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "STOPPED",
    "STOP_AFTER_ENV",
    "UnitStore",
    "add_merge_argument",
    "add_sweeps_argument",
    "eta_row",
    "git_commit",
    "load_dataset",
    "mean_se",
    "svc_line",
    "finished_splits",
    "fixed_run",
    "with_sweeps",
    "run_split_benchmark",
    "run_split_units",
    "split_arguments",
    "tiny_data",
    "write_atomic",
]

#: Environment variable: stop after this many units finished by the current process.
STOP_AFTER_ENV = "BAYESMKL_BENCH_STOP_AFTER"
#: Exit status of a run stopped by :data:`STOP_AFTER_ENV`.
STOPPED = 75

_REPO = Path(__file__).resolve().parent.parent


def git_commit(repo: Path = _REPO) -> str:
    """``git rev-parse HEAD`` of ``repo``, or ``"unknown"`` (no git, not a checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace`` (atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _loadavg():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


class UnitStore:
    """The finished units of one results file.

    Parameters
    ----------
    path : str or Path
        The results JSON. It holds ``{"unit_config": ..., "units": {key: record}, ...}``; the
        script adds its summary to the same file (:meth:`save`).
    config : dict
        What makes units comparable (everything that changes a unit's result). A file written
        with another configuration is refused.
    fresh : bool
        Ignore the units already in ``path`` and start over.
    default : callable, optional
        ``json.dumps``'s ``default`` for values JSON does not know.
    """

    def __init__(self, path, config: dict, *, fresh: bool = False, default=None):
        self.path = Path(path)
        self.config = json.loads(json.dumps(config, default=default))
        self.default = default
        self.commit = git_commit()
        self.units: dict[str, dict] = {}
        self.extra: dict = {}
        self.added = 0
        self.stop_after = int(os.environ.get(STOP_AFTER_ENV) or 0)
        if fresh or not self.path.is_file():
            return
        try:
            old = json.loads(self.path.read_text())
        except (OSError, ValueError):
            old = {}
        if not isinstance(old, dict) or "units" not in old:
            print(f"{self.path}: not a resumable results file; starting over", flush=True)
            return
        if old.get("unit_config") != self.config:
            raise SystemExit(
                f"{self.path} holds units of another configuration ({old.get('unit_config')}); "
                "pass --fresh to start over, or write elsewhere"
            )
        self.units = dict(old["units"])
        if self.units:
            print(f"resuming {self.path}: {len(self.units)} unit(s) already done", flush=True)

    @staticmethod
    def key(*parts) -> str:
        """The key of a unit: its parts joined by ``" | "``."""
        return " | ".join(str(p) for p in parts)

    def done(self, key: str) -> bool:
        return key in self.units

    def result(self, key: str):
        return self.units[key]["result"]

    def add(self, key: str, result) -> None:
        """Record a finished unit and write the file; stop if ``STOP_AFTER_ENV`` says so."""
        self.units[key] = {
            "result": result,
            "commit": self.commit,
            "loadavg": _loadavg(),
            "pid": os.getpid(),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        self.save()
        self.added += 1
        if self.stop_after and self.added >= self.stop_after:
            print(f"stopping after {self.added} unit(s) ({STOP_AFTER_ENV})", flush=True)
            sys.exit(STOPPED)

    def merge(self, path) -> int:
        """Add the finished units of another results file of the same configuration (e.g. one
        written by a second process that ran other data sets) and write this file.

        A unit already here is kept (never overwritten). Returns the number of units added;
        raises ``SystemExit`` when the other file holds another configuration.
        """
        other = json.loads(Path(path).read_text())
        if other.get("unit_config") != self.config:
            raise SystemExit(
                f"{path} holds units of another configuration ({other.get('unit_config')}); "
                f"cannot merge them into {self.path}"
            )
        new = {k: v for k, v in other.get("units", {}).items() if k not in self.units}
        self.units.update(new)
        self.save()
        print(f"merged {len(new)} unit(s) from {path}", flush=True)
        return len(new)

    def save(self, **extra) -> None:
        """Write config, units and ``extra`` (e.g. the summary) atomically."""
        self.extra.update(extra)
        payload = {**self.extra, "unit_config": self.config, "units": self.units}
        write_atomic(self.path, json.dumps(payload, indent=1, default=self.default) + "\n")


def add_merge_argument(parser) -> None:
    """The scripts' ``--merge JSON`` option (repeatable): before running, add the finished units
    of another results file of the same configuration (:meth:`UnitStore.merge`)."""
    parser.add_argument(
        "--merge", action="append", default=[], metavar="JSON",
        help="first add the finished units of this results file (same configuration; e.g. "
        "written by a second process on other data sets with another --out); repeatable",
    )  # fmt: skip


def run_split_units(
    store: UnitStore, datasets, n_splits: int, seed: int, compute, publish, label=None
):  # fmt: skip
    """Fill ``store`` with one unit per data set × split, skipping the finished ones.

    The splits are ``calibration.py``'s: ``StratifiedShuffleSplit(n_splits, test_size=0.3,
    random_state=seed)``; the unit of split k is ``compute(X, y, train, test, seed + k)`` under
    the key ``"<data set> | split k"`` (``"<label> | <data set> | split k"`` with a ``label``,
    e.g. one of several settings run on the same splits). After each unit JAX's caches are
    cleared (each fit maps memory until then) and ``publish()`` writes the summary. A data set
    that cannot be loaded is skipped with a message; names as :func:`load_dataset`.
    """
    import gc

    import jax
    from sklearn.model_selection import StratifiedShuffleSplit

    prefix = () if label is None else (label,)
    for ds in datasets:
        keys = [store.key(*prefix, ds, f"split {k}") for k in range(n_splits)]
        if all(store.done(k) for k in keys):
            continue
        try:
            X, y = load_dataset(ds)
        except FileNotFoundError as exc:
            print(f"skipping {ds}: {exc}")
            continue
        splitter = StratifiedShuffleSplit(n_splits, test_size=0.3, random_state=seed)
        for k, ((tr, te), key) in enumerate(zip(splitter.split(X, y), keys, strict=True)):
            if store.done(key):
                continue
            store.add(key, compute(X, y, tr, te, seed + k))
            jax.clear_caches()
            gc.collect()
            print(key, flush=True)
            publish()


def split_arguments(parser, datasets, out) -> None:
    """The options of a benchmark driven by :func:`run_split_benchmark`: ``--datasets``
    (default ``datasets``, comma-separated), ``--splits`` (5), ``--seed`` (0), ``--out``
    (results path stem, default ``out``), ``--fresh``, ``--merge`` and ``--sweeps``."""
    parser.add_argument("--datasets", default=",".join(datasets))
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(out))
    parser.add_argument("--fresh", action="store_true", help="ignore the units already in the file")
    add_merge_argument(parser)
    add_sweeps_argument(parser)


def add_sweeps_argument(parser) -> None:
    """``--sweeps N``: BM3KL fits of a fixed N warm-up and N kept sweeps on 2 chains instead of
    the default run length (:func:`fixed_run`), for smoke runs and the tests."""
    parser.add_argument(
        "--sweeps", type=int, default=None, metavar="N",
        help="BM3KL: N warm-up + N kept sweeps on 2 chains, not the default run length (smoke "
        "runs; kept in the unit configuration, so never mixed with full runs)",
    )  # fmt: skip


def fixed_run(args) -> dict:
    """The ``BM3KLClassifier`` options of ``--sweeps``: none (the default estimator's run
    length), or ``num_warmup = num_samples = N`` on 2 chains."""
    n = getattr(args, "sweeps", None)
    return {} if n is None else {"num_warmup": n, "num_samples": n, "num_chains": 2}


def with_sweeps(config: dict, args) -> dict:
    """``config`` with ``"sweeps"`` when ``--sweeps`` was given (absent otherwise, so the unit
    configuration of a full run is what it was before the option existed)."""
    n = getattr(args, "sweeps", None)
    return config if n is None else {**config, "sweeps": n}


def run_split_benchmark(args, config: dict, compute, summarise, render) -> int:
    """Run a benchmark of one unit per data set × split from its :func:`split_arguments`.

    ``config`` is added to ``{"splits", "seed"}`` as the file's unit configuration;
    ``compute(X, y, train, test, seed)`` computes a unit (:func:`run_split_units`);
    ``summarise(units, datasets, n_splits)`` the summary saved beside the units after each one,
    and ``render(summary, path)`` writes its Markdown to ``path``, printed at the end.
    """
    from bayesmkl.estimators._fitting import enable_compilation_cache

    enable_compilation_cache()
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    out = Path(args.out)
    config = with_sweeps({"splits": args.splits, "seed": args.seed, **config}, args)
    store = UnitStore(out.with_suffix(".json"), config, fresh=args.fresh)
    for other in args.merge:
        store.merge(other)

    def publish():
        summary = summarise(store.units, datasets, args.splits)
        store.save(summary=summary)
        render(summary, out.with_suffix(".md"))

    run_split_units(store, datasets, args.splits, args.seed, compute, publish)
    publish()
    print(out.with_suffix(".md").read_text())
    return 0


def finished_splits(units: dict, datasets, n_splits: int, label=None):
    """Yield ``(data set, results of its finished splits)`` for every data set with at least
    one finished split (units of :func:`run_split_units`, with the same ``label``)."""
    prefix = "" if label is None else f"{label} | "
    for ds in datasets:
        keys = (f"{prefix}{ds} | split {k}" for k in range(n_splits))
        results = [units[k]["result"] for k in keys if k in units]
        if results:
            yield ds, results


def mean_se(diffs) -> list[float]:
    """``[mean, standard error]`` of paired differences (SE nan for fewer than 2)."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    return [float(d.mean()), se]


def svc_line(metric: str, ratios) -> str:
    """Issue 22's calibration line for one metric, from BM3KL/SVC ratios of per-set means: on
    how many sets BM3KL is ≤ the SVC, and within 10 %."""
    ratios = list(ratios)
    return (f"{metric} ≤ SVC on {sum(r <= 1.0 for r in ratios)} of {len(ratios)}, "
            f"within 10 % on {sum(r <= 1.1 for r in ratios)}")  # fmt: skip


#: An η-study row: BM3KL with another Dirichlet concentration η under a wall-time budget (s),
#: named ``"BM3KL eta=0.1 max_time=1200"``. Both values are in the name, so that the units of
#: such a row share their file's configuration with the default rows (xu_table1, calibration).
ETA_ROW = re.compile(r"BM3KL eta=([0-9.eE+-]+) max_time=([0-9.]+)")


def eta_row(method: str) -> tuple[float, float] | None:
    """``(eta, max_time)`` of an η-study row's name; ``None`` for any other method."""
    match = ETA_ROW.fullmatch(method)
    return None if match is None else (float(match.group(1)), float(match.group(2)))


def load_dataset(name: str):
    """``(X, y)`` of a benchmark data set: ``"tiny"`` (:func:`tiny_data`), a shared UCI set
    (:func:`bayesmkl.datasets.load_uci`, ``FileNotFoundError`` when absent) or ``"<set>@<n>"``,
    a class-balanced subsample of that set with n // K rows of each of its K classes, drawn with
    seed 0 and kept in the file's order (``"mfeat-fou@500"``: stress.py's 10-class set).
    """
    import numpy as np

    from bayesmkl.datasets import load_uci

    base, _, size = name.partition("@")
    X, y = tiny_data() if base == "tiny" else load_uci(base)
    if not size:
        return X, y
    classes = np.unique(y)
    per_class = int(size) // len(classes)
    if per_class < 1:
        raise ValueError(f"{name}: fewer rows than the {len(classes)} classes")
    rng = np.random.default_rng(0)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == k), per_class, replace=False)
                                  for k in classes]))  # fmt: skip
    return X[idx], y[idx]


def tiny_data(n: int = 60, d: int = 3, seed: int = 0):
    """A small two-class synthetic set ``(X, y)`` for smoke runs (no shared data needed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y
