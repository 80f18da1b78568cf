"""The shared helpers of the product benchmarks: one result store and the small utilities.

**The result store.** A *unit* is the smallest piece of a benchmark worth keeping on its own
(one data set × split × method, one stress fit, one SBC replication). :class:`UnitStore` keeps
the units of one results file: every :meth:`~UnitStore.add` writes the whole JSON file again,
atomically (a temporary file in the same directory, then ``os.replace``), so an interrupted
run — Ctrl-C, a kill, a crash, a full machine — leaves the units it finished, never a
half-written file. Each unit records the package commit it was computed with (``git rev-parse
HEAD``, or ``"unknown"``), the load average when it ended (``os.getloadavg()``), the process id
and the time.

A restart with the same configuration skips the finished units; with another configuration it
refuses to mix them (pass ``fresh=True``, the scripts' ``--fresh``, to start over). A results
file that is not a store of units is started over.

Setting ``BAYESMKL_BENCH_STOP_AFTER=k`` stops a run (exit status :data:`STOPPED`) after it has
finished ``k`` units, as a kill at that point would: the tests use it to interrupt and restart.

**Data.** The UCI CSVs are read through :mod:`bayesmkl.datasets`, which looks only at its
``data_dir`` argument or ``$BAYESMKL_DATA``. Importing this module sets ``$BAYESMKL_DATA`` to
``<repository>/../shared/data/uci`` when it is unset (:data:`DEFAULT_DATA`), so that the
benchmarks, and the fits they start in subprocesses, find the shared data; a benchmark skips a
data set that is absent and says so. :func:`load_dataset` adds the synthetic ``"tiny"`` set
(smoke runs and the tests), ``"repro"`` (rank-deficient kernels from duplicated rows: the
stress benchmark's hard case) and class-balanced subsamples ``"<set>@<n>"``.

**Timing and reports.** :func:`best_time`, :func:`compile_time`, memory readings,
:func:`synthetic_kernels`, :func:`machine_info`, :func:`md_table` and :func:`write_results`
(``results/<name>.{json,md}``) for the performance benchmarks.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "DEFAULT_DATA",
    "RESULTS",
    "STOPPED",
    "STOP_AFTER_ENV",
    "UnitStore",
    "add_merge_argument",
    "best_time",
    "block",
    "classification_metrics",
    "compile_time",
    "current_rss_gib",
    "duplicated_rows",
    "ece_top_label",
    "eta_row",
    "git_commit",
    "json_default",
    "load_dataset",
    "machine_info",
    "md_table",
    "rss_gib",
    "synthetic_kernels",
    "tiny_data",
    "write_atomic",
    "write_results",
]

#: Environment variable: stop after this many units finished by the current process.
STOP_AFTER_ENV = "BAYESMKL_BENCH_STOP_AFTER"
#: Exit status of a run stopped by :data:`STOP_AFTER_ENV`.
STOPPED = 75

_REPO = Path(__file__).resolve().parent.parent
#: Where the results files go by default.
RESULTS = Path(__file__).resolve().parent / "results"
#: The shared UCI data directory used when ``$BAYESMKL_DATA`` is unset.
DEFAULT_DATA = _REPO.parent / "shared" / "data" / "uci"
os.environ.setdefault("BAYESMKL_DATA", str(DEFAULT_DATA))


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


#: An η-study row: BM3KL with another Dirichlet concentration η under a wall-time budget (s),
#: named ``"BM3KL eta=0.1 max_time=1200"``. Both values are in the name, so that the units of
#: such a row share their file's configuration with the default rows (xu_table1, calibration).
ETA_ROW = re.compile(r"BM3KL eta=([0-9.eE+-]+) max_time=([0-9.]+)")


def eta_row(method: str) -> tuple[float, float] | None:
    """``(eta, max_time)`` of an η-study row's name; ``None`` for any other method."""
    match = ETA_ROW.fullmatch(method)
    return None if match is None else (float(match.group(1)), float(match.group(2)))


def load_dataset(name: str):
    """``(X, y)`` of a benchmark data set: ``"tiny"`` (:func:`tiny_data`), ``"repro"``
    (:func:`duplicated_rows`), a shared UCI set (:func:`bayesmkl.datasets.load_uci`,
    ``FileNotFoundError`` when absent) or ``"<set>@<n>"``,
    a class-balanced subsample of that set with n // K rows of each of its K classes, drawn with
    seed 0 and kept in the file's order (``"mfeat-fou@500"``: stress.py's 10-class set).
    """
    import numpy as np

    from bayesmkl.datasets import load_uci

    base, _, size = name.partition("@")
    synthetic = {"tiny": tiny_data, "repro": duplicated_rows}
    X, y = synthetic[base]() if base in synthetic else load_uci(base)
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


def duplicated_rows(n: int = 350, seed: int = 1):
    """The stress benchmark's ``"repro"`` set: :func:`tests.defect_cases.duplicated_rows`."""
    if str(_REPO) not in sys.path:
        sys.path.insert(0, str(_REPO))
    from tests.defect_cases import duplicated_rows as make

    return make(n, seed)


def block(x):
    """Wait for ``x``'s JAX computations to finish."""
    import jax

    return jax.block_until_ready(x)


def best_time(fn, *args, reps: int = 5, min_time: float = 0.0):
    """Best and median wall time of ``fn(*args)`` over ``reps`` calls (already compiled), in
    seconds."""
    import numpy as np

    block(fn(*args))
    times = []
    t_all = time.perf_counter()
    for _ in range(reps):
        t = time.perf_counter()
        block(fn(*args))
        times.append(time.perf_counter() - t)
        if min_time and time.perf_counter() - t_all > min_time and len(times) >= 2:
            break
    return float(min(times)), float(np.median(times))


def compile_time(jitted, *args):
    """Seconds to lower and compile ``jitted`` for ``args``; returns (seconds, compiled)."""
    t = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return time.perf_counter() - t, compiled


def rss_gib() -> float:
    """Peak resident set size of this process so far (GiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def current_rss_gib() -> float:
    """Current resident set size of this process (GiB)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def synthetic_kernels(P: int, N: int, C: int, dtype=None, seed: int = 0):
    """Gaussian kernels ``(P, N, N)`` (unit diagonal, widths log-spaced) on random 5-D points,
    and ±1 one-vs-all targets ``(C, N)`` (C = 1: binary)."""
    import jax.numpy as jnp
    import numpy as np

    dtype = np.float64 if dtype is None else dtype
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    widths = np.exp(np.linspace(np.log(0.25), np.log(16.0), P))
    K = np.empty((P, N, N), dtype=dtype)
    for s in range(0, P, 256):
        w = widths[s : s + 256]
        K[s : s + 256] = np.exp(-d2[None] / (2.0 * w[:, None, None] ** 2))
    n_cls = 2 if C == 1 else C
    y = rng.integers(0, n_cls, N)
    from bayesmkl.model.classification import signed_targets

    return jnp.asarray(K), jnp.asarray(signed_targets(y, n_cls))


def machine_info() -> dict:
    """The platform, CPUs, JAX devices and version, load average and thread settings."""
    import jax

    load = os.getloadavg()
    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "jax_devices": [str(d) for d in jax.devices()],
        "jax": jax.__version__,
        "loadavg_1_5_15": [round(x, 2) for x in load],
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
    }


def write_results(name: str, payload: dict, markdown: str):
    """Write ``results/<name>.json`` (``payload`` with the machine) and ``results/<name>.md``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": machine_info(), **payload}
    text = json.dumps(payload, indent=2, default=json_default) + "\n"
    (RESULTS / f"{name}.json").write_text(text)
    (RESULTS / f"{name}.md").write_text(markdown)
    print(f"wrote {RESULTS / (name + '.json')} and .md")


def json_default(x):
    """``json.dumps``'s ``default``: NumPy scalars and arrays, JAX arrays, else ``str``."""
    import numpy as np

    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray) or type(x).__module__.startswith("jax"):  # JAX arrays
        return np.asarray(x).tolist()
    return str(x)


def md_table(rows: list[dict], cols: list[str], fmt: dict | None = None) -> str:
    """A Markdown table of ``rows`` over ``cols``; ``fmt`` maps a column to a format string."""
    fmt = fmt or {}
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            f = fmt.get(c)
            cells.append(f.format(v) if f and isinstance(v, (int, float)) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def ece_top_label(proba, codes, n_bins: int = 15) -> float:
    """Top-label expected calibration error with ``n_bins`` equal-width confidence bins."""
    import numpy as np

    conf = proba.max(axis=1)
    hit = (proba.argmax(axis=1) == codes).astype(float)
    which = np.clip(np.digitize(conf, np.linspace(0, 1, n_bins + 1)[1:-1]), 0, n_bins - 1)
    n = np.bincount(which, minlength=n_bins)
    gap = np.abs(
        np.bincount(which, weights=hit, minlength=n_bins)
        - np.bincount(which, weights=conf, minlength=n_bins)
    )
    return float(gap.sum() / max(1, n.sum()))


def classification_metrics(proba, codes) -> dict:
    """Log-loss (probabilities clipped at 1e-15), top-label ECE, accuracy and Brier score of
    class probabilities ``proba (n, K)`` against integer labels ``codes``."""
    import numpy as np

    proba = np.asarray(proba, dtype=float)
    rows = np.arange(len(codes))
    onehot = np.zeros_like(proba)
    onehot[rows, codes] = 1.0
    return {
        "logloss": float(-np.mean(np.log(np.clip(proba[rows, codes], 1e-15, 1.0)))),
        "ece": ece_top_label(proba, codes),
        "acc": float(np.mean(proba.argmax(axis=1) == codes)),
        "brier": float(np.mean(np.sum((proba - onehot) ** 2, axis=1))),
    }
