"""Stress test of the default estimator: NaN runs, silent failures and hangs (issues 11, 22).

Protocol (full run, issue 22): every shared UCI data set — binary (sonar, liver, ionosphere,
pima, heart, breast) and multiclass (wine, glass, and mfeat with its Fourier view only,
subsampled to 500 rows, 50 per class) — plus the data of ``../shared/repro/nan_divergence.py``
(350 rows, 12 distinct), each with a stratified 70/30 split (seed 0), × prior ∈ {default,
paper} × γ0 ∈ {1, 100, 10000} × 5 seeds, each fit with the estimator's DEFAULT run length
(``num_samples="auto"``: until R-hat ≤ 1.01 and bulk ESS ≥ 400, at most ``max_samples`` = 5,000
sweeps, no time budget) and its default calibration. The 5 seeds are the 5 chains of one
``BM3KLClassifier`` fit with ``num_chains=5`` (NumPyro splits one key into 5 chain keys).

Then the **extreme-but-valid settings** (and a few just outside the validated range, which must
be refused with a clear error), one at a time with the others at the defaults, on the repro
data with a 120 s time budget: η ∈ {1e-6, 0.02, 1e3, 1e6}, γ0 ∈ {0, 1e8, 1e300}, κ ∈ {1e-200,
1e10, 1e300}, α_a at 0.02 and 1e6, β_a at 0.02, 10 and 1e6, τ (``bias_prior_var``) at 1e-100,
1e10 and 1e20 (β_a = 1e6 and τ = 1e20 are refused since issue 46: the model degenerates there).

**Watchdog.** Every fit runs in its own process (a JAX loop that never returns cannot be
interrupted from inside Python), killed when it has made no progress — no new output of its
progress bar, which moves after every chunk of sweeps — for ``--watchdog`` of its own CPU
seconds (default 900; 300 for the extreme settings) or three times that in wall time. Not a limit
on the whole fit: the slowest grid fits took 1,070 s of wall time (pima, 5,000 sweeps) with two
other jobs running, and mfeat's take longer, so a wall-clock limit counted slow fits on a loaded
machine as hangs; a loop that never returns burns CPU without output and is caught as fast on a
loaded machine as on an idle one. A fit killed by it counts as a *hang* for each of its chains.

Counted per run (= per chain):

* ``nan_run``: some kept draw of the chain is NaN/inf;
* ``raised`` / ``warned``: the fit raised (``SamplerDivergenceError``) or warned
  (``SamplerDivergenceWarning``); ``refused``: validation refused the setting (``ValueError``);
* ``hang``: the watchdog killed the fit; ``crashed``: the fit's process died with another
  error (its message is kept);
* ``silent_failure``: a NaN run with neither raise nor warning, or test probabilities returned
  non-finite without an exception;
* ``converged``: the fit met its R-hat and ESS targets (``run_report_.converged``).

Writes ``benchmarks/results/stress.json`` (``{"runs", "nan_runs", "silent_failures", "hangs",
"converged_runs", ..., "rows": [...]}``) and ``stress.md``; ``--quick`` (repro + liver + wine,
default prior, 200 fixed sweeps) writes ``stress_quick.*``; ``--tiny`` (a 60-row synthetic
set, 6 sweeps, 2 chains, γ0 ∈ {1, 100}, no calibration: a smoke run) writes ``stress_tiny.*``.

Resumable (``benchmarks/_common.py``): every fit (data set × prior × γ0, or extreme setting)
is written to the JSON as soon as it ends, with the package commit and the load average; a
restart with the same settings skips the fits already there (``--fresh`` starts over). The
grid runs first with the default prior, then the extreme settings, then the paper's prior.
Processes may run disjoint parts side by side (``--datasets``/``--priors``, each with its own
``--out``); ``--merge`` adds their finished fits to the main file, and ``--summary-only`` then
rewrites its summary without running anything.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/stress.py [--quick | --tiny]
        [--datasets repro,wine] [--priors default,paper] [--gammas 1,100] [--sweeps N]
        [--chains 5] [--no-extremes] [--watchdog S] [--out STEM] [--fresh] [--merge JSON]

Cost: the default prior's fits converge in 15-250 s each (benchmarks/results/convergence.md);
the paper's prior runs to ``max_samples`` (a few minutes each); mfeat's fits (350 × 10 classes)
run to ``max_samples`` with either prior, about 1.5 CPU-hours each: over 10 CPU-hours in all.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    UnitStore,
    add_merge_argument,
    json_default,
    load_dataset,
    machine_info,
    md_table,
    write_atomic,
)

# 64-bit JAX for the whole process (the estimator switches it on only inside its own calls)
jax.config.update("jax_enable_x64", True)

BINARY = ("sonar", "liver", "ionosphere", "pima", "heart", "breast")
MULTICLASS = ("wine", "glass", "mfeat-fou")
FULL = ("repro",) + BINARY + MULTICLASS
QUICK = ("repro", "liver", "wine")
GAMMAS = (1.0, 100.0, 10000.0)
PRIORS = ("default", "paper")
#: (parameter, value): the validated bounds (bayesmkl/model/bounds.py), values inside them far from
#: the defaults, and values outside them that the audit of issue 22 found hanging.
EXTREMES = (
    ("eta", 1e-6), ("eta", 0.02), ("eta", 1e3), ("eta", 1e6),
    ("gamma0", 0.0), ("gamma0", 1e8), ("gamma0", 1e300),
    ("kappa", 1e-200), ("kappa", 1e10), ("kappa", 1e300),
    ("alpha_a", 0.02), ("alpha_a", 1e6), ("beta_a", 0.02), ("beta_a", 10.0), ("beta_a", 1e6),
    ("bias_prior_var", 1e-100), ("bias_prior_var", 1e10), ("bias_prior_var", 1e20),
)  # fmt: skip
EXTREME_DATA = "repro"
EXTREME_MAX_TIME = 120.0
_MARK = "STRESS-UNIT-RESULT "
#: A fit is also killed after this many times its CPU limit in wall time without progress.
WALL_FACTOR = 3.0


def load(name: str):
    """``(X, y)`` or ``None`` when the shared data are absent."""
    if name in ("repro", "tiny"):
        return load_dataset(name)
    from bayesmkl.datasets import find_uci_dir

    if find_uci_dir() is None:
        return None
    # mfeat: 50 rows of each of the 10 digits (500 rows)
    return load_dataset(f"{name}@500" if name.startswith("mfeat") else name)


def split(X, y, seed=0, test=0.3):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=test, random_state=seed, stratify=y)


def run_one(spec: dict) -> list[dict]:
    """One fit of ``spec`` in this process; one row per chain.

    ``spec``: ``dataset``, ``prior``, ``chains``, ``sweeps`` (None: the default run length),
    ``calibration``, ``max_time`` and ``params`` (hyper-parameters set on the estimator).
    """
    from bayesmkl import BM3KLClassifier
    from bayesmkl.exceptions import SamplerDivergenceError, SamplerDivergenceWarning

    X, y = load(spec["dataset"])
    Xtr, Xte, ytr, yte = split(X, y)
    chains, sweeps = spec["chains"], spec["sweeps"]
    run_length = {} if sweeps is None else {"num_warmup": sweeps // 2,
                                             "num_samples": sweeps - sweeps // 2}  # fmt: skip
    clf = BM3KLClassifier(
        prior=spec["prior"], num_chains=chains, chain_method="vectorized", random_state=0,
        progress_bar=True, calibration=spec["calibration"], max_time=spec["max_time"],
        **run_length, **spec["params"],
    )  # fmt: skip
    base = {"dataset": spec["dataset"], "n_train": len(ytr), "n_classes": len(np.unique(y)),
            "prior": spec["prior"], **spec["params"]}  # fmt: skip
    raised = refused = ""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clf.fit(Xtr, ytr)
        except SamplerDivergenceError as exc:
            raised = str(exc)
        except ValueError as exc:  # validation: a clear refusal of the setting
            refused = str(exc)
    fit_s = round(time.perf_counter() - t0, 2)
    warned = any(issubclass(w.category, SamplerDivergenceWarning) for w in caught)
    post = getattr(clf, "posterior_", None)
    if refused or post is None:
        error = (refused or raised)[:300]
        return [{**base, "chain": c, "refused": bool(refused), "raised": bool(raised),
                 "error": error, "fit_s": fit_s} for c in range(chains)]  # fmt: skip
    finite = np.ones(chains, bool)
    for v in post.values():
        finite &= np.isfinite(v.reshape(chains, -1)).all(axis=1)
    P, pred_error = None, ""
    try:
        P = clf.proba_draws(Xte)  # (chains·draws, M, K), chain-major
    except (FloatingPointError, ValueError) as exc:
        pred_error = f"{type(exc).__name__}: {exc}"
    report = clf.run_report_
    rows = []
    for c in range(chains):
        row = {
            **base, "chain": c, "sweeps": int(clf.n_iter_), "sampler": clf.sampler,
            "stopped_by": report.stopped_by, "converged": bool(report.converged),
            "rhat_max": float(report.rhat_max) if report.rhat_max is not None else None,
            "nan_run": bool(not finite[c]), "raised": bool(raised), "warned": bool(warned),
            "diverging_frac": float(np.mean(clf.sample_stats_["diverging"][c])),
            "fit_s": fit_s,
        }  # fmt: skip
        returned_nonfinite = False
        if P is not None:
            Pc = P.reshape(chains, -1, *P.shape[1:])[c].mean(axis=0)
            returned_nonfinite = not np.all(np.isfinite(Pc))
            labels = clf.classes_[np.argmax(Pc, axis=1)]
            row["test_accuracy"] = round(float(np.mean(labels == yte)), 4)
        else:
            row["test_accuracy"] = None
            row["prediction_error"] = pred_error[:200]
        row["silent_failure"] = bool(
            (row["nan_run"] and not (row["raised"] or row["warned"])) or returned_nonfinite
        )
        rows.append(row)
    if raised:
        rows[0]["error"] = raised[:300]
    return rows


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds so far of process ``pid`` (all its threads), from
    ``/proc/PID/stat``; nan where there is no procfs."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_watched(spec: dict, watchdog: float, cmd=None) -> list[dict]:
    """:func:`run_one` in a child process, killed (a *hang*) once it has made no progress for
    ``watchdog`` of its own CPU seconds, or for :data:`WALL_FACTOR` times that in wall time (a
    hang that sleeps).

    Progress is output on the child's stderr (its progress bar moves after every chunk of
    sweeps, and warnings). A loop that never returns burns CPU without output and is caught as
    fast on a loaded machine as on an idle one, while a long fit that keeps sampling, a slow
    fit on a loaded machine, or a benchmark suspended for a while is not counted as a hang (a
    limit on the whole fit's wall or CPU time would count mfeat's 5,000-sweep fits as hangs).
    Each finished fit's rows get the child's ``cpu_s``. ``cmd`` replaces the child's command
    (tests). The child's stderr goes to a named temporary file, deleted when the fit ends, whose
    path is printed first, so that the progress of a long fit can be followed with ``tail``."""
    cmd = cmd or [sys.executable, str(Path(__file__).resolve()), "--unit", json.dumps(spec)]
    env = dict(os.environ)
    env.pop("BAYESMKL_BENCH_STOP_AFTER", None)  # the child writes no units
    base = {"dataset": spec["dataset"], "prior": spec["prior"], **spec["params"]}
    t0, used0 = time.perf_counter(), _children_cpu()
    # the child's stderr (progress bar, warnings), in a file one can follow while the fit runs
    with tempfile.NamedTemporaryFile("w+", prefix="bayesmkl-stress-", suffix=".log") as log:
        name = " | ".join(str(v) for v in base.values())
        print(f"{name}: started; progress: tail -f {log.name}", flush=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        size, cpu_mark, wall_mark = 0, 0.0, t0
        while True:
            try:  # communicate() keeps reading stdout, so the child cannot block on it
                out, _ = proc.communicate(timeout=min(1.0, watchdog / 4))
                break
            except subprocess.TimeoutExpired:
                now, cpu = time.perf_counter(), _cpu_seconds(proc.pid)
                if os.fstat(log.fileno()).st_size != size:  # progress: restart both clocks
                    size, cpu_mark, wall_mark = os.fstat(log.fileno()).st_size, cpu, now
                    continue
                idle_cpu = (cpu - cpu_mark) if np.isfinite(cpu) else now - wall_mark
                if idle_cpu > watchdog or now - wall_mark > WALL_FACTOR * watchdog:
                    proc.kill()
                    proc.communicate()
                    return [{**base, "chain": c, "hang": True, "fit_s": round(now - t0, 2),
                             "cpu_s": round(cpu, 2),
                             "error": f"killed by the watchdog: no progress for {idle_cpu:.1f} "
                                      f"CPU s ({now - wall_mark:.1f} s wall; limits "
                                      f"{watchdog:g} CPU s, {WALL_FACTOR * watchdog:g} s wall)"}
                            for c in range(spec["chains"])]  # fmt: skip
        log.seek(0)
        err = log.read()
    cpu = round(_children_cpu() - used0, 2)  # the child has been waited for
    for line in reversed(out.splitlines()):
        if line.startswith(_MARK):
            return [{**r, "cpu_s": cpu} for r in json.loads(line[len(_MARK) :])]
    tail = (err or out)[-600:]
    return [{**base, "chain": c, "crashed": True, "error": f"exit {proc.returncode}: {tail}"}
            for c in range(spec["chains"])]  # fmt: skip


def _count(rows, flag):
    return sum(bool(r.get(flag)) for r in rows)


def summarise(rows, protocol):
    return {
        "runs": len(rows),
        "nan_runs": _count(rows, "nan_run"),
        "silent_failures": _count(rows, "silent_failure"),
        "hangs": _count(rows, "hang"),
        "crashed_runs": _count(rows, "crashed"),
        "converged_runs": _count(rows, "converged"),
        "raised_runs": _count(rows, "raised"),
        "warned_runs": _count(rows, "warned"),
        "refused_runs": _count(rows, "refused"),
        "protocol": protocol,
    }


COLUMNS = ["dataset", "prior", "gamma0", "chain", "sweeps", "stopped_by", "converged", "nan_run",
           "raised", "warned", "silent_failure", "hang", "diverging_frac", "test_accuracy",
           "fit_s", "cpu_s"]  # fmt: skip


def markdown(summary, grid_rows, extreme_rows):
    s = summary
    md = [
        "# Stress test: NaN runs, silent failures and hangs (issues 11, 22)\n",
        f"{s['runs']} runs (chains), {s['nan_runs']} NaN runs, {s['silent_failures']} silent "
        f"failures, {s['hangs']} hangs, {s['crashed_runs']} crashed, {s['converged_runs']} in "
        f"fits that converged; {s['raised_runs']} runs in fits that raised, {s['warned_runs']} "
        f"in fits that warned, {s['refused_runs']} refused by validation. Protocol: "
        f"`{json.dumps(s['protocol'])}`.\n",
    ]
    if grid_rows:
        md += ["## Grid\n", md_table(grid_rows, COLUMNS)]
    if extreme_rows:
        cols = ["setting", "chain", "refused", "sweeps", "stopped_by", "converged", "nan_run",
                "raised", "warned", "silent_failure", "hang", "diverging_frac", "test_accuracy",
                "fit_s", "error"]  # fmt: skip
        md += ["\n## Extreme settings (repro data, 120 s budget)\n", md_table(extreme_rows, cols)]
    return "\n".join(md)


def units(names, priors, gammas, extremes):
    """``(key parts, spec overrides)`` in the order they run."""
    out = []
    for prior in priors:
        out += [((name, prior, f"gamma0={g:g}"), {"dataset": name, "prior": prior,
                 "params": {"gamma0": g}}) for name in names for g in gammas]  # fmt: skip
        if prior == "default" and extremes:
            out += [(("extreme", f"{p}={v:g}"), {"dataset": EXTREME_DATA, "prior": "default",
                     "params": {p: v}, "max_time": EXTREME_MAX_TIME, "extreme": True})
                    for p, v in EXTREMES]  # fmt: skip
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="repro + liver + wine, 200 sweeps")
    ap.add_argument(
        "--tiny", action="store_true",
        help="smoke run: a 60-row synthetic set, 6 sweeps, 2 chains, γ0 1 and 100, raw rule",
    )  # fmt: skip
    ap.add_argument("--datasets", help="comma-separated subset of " + ",".join(FULL + ("tiny",)))
    ap.add_argument("--priors", help="comma-separated subset of default,paper (default both)")
    ap.add_argument("--gammas", help="comma-separated γ0 values (default 1,100,10000)")
    ap.add_argument("--sweeps", type=int, help="fixed sweeps per chain (default: auto)")
    ap.add_argument("--chains", type=int, default=None, help="seeds = vectorized chains (5)")
    ap.add_argument("--no-extremes", action="store_true", help="skip the extreme settings")
    ap.add_argument("--watchdog", type=float, default=900.0,
                    help="CPU seconds without progress before a grid fit is killed")  # fmt: skip
    ap.add_argument("--out", help="results path stem (default benchmarks/results/stress[_quick])")
    ap.add_argument("--fresh", action="store_true", help="ignore the fits already in the JSON")
    ap.add_argument(
        "--summary-only", action="store_true",
        help="rewrite the summary and Markdown from the fits in the JSON; run none",
    )  # fmt: skip
    add_merge_argument(ap)
    ap.add_argument("--unit", help=argparse.SUPPRESS)  # internal: one fit, in a child process
    args = ap.parse_args(argv)
    if args.unit:
        from bayesmkl.estimators._fitting import enable_compilation_cache

        enable_compilation_cache()
        print(_MARK + json.dumps(run_one(json.loads(args.unit)), default=json_default), flush=True)
        return None
    small = args.tiny or args.quick
    default_names = ("tiny",) if args.tiny else (QUICK if args.quick else FULL)
    names = args.datasets.split(",") if args.datasets else default_names
    priors = args.priors.split(",") if args.priors else (("default",) if small else PRIORS)
    default_gammas = (1.0, 100.0) if args.tiny else GAMMAS
    gammas = tuple(float(g) for g in args.gammas.split(",")) if args.gammas else default_gammas
    sweeps = args.sweeps or (6 if args.tiny else 200 if args.quick else None)
    chains = args.chains or (2 if args.tiny else 5)
    calibration = None if args.tiny else "loo"
    extremes = not (args.no_extremes or small)
    stem = "stress_tiny" if args.tiny else "stress_quick" if args.quick else "stress"
    out = Path(args.out) if args.out else RESULTS / stem
    common = {"chains": chains, "sweeps": sweeps, "calibration": calibration, "max_time": None}
    store = UnitStore(
        out.with_suffix(".json"),
        {**common, "split": "stratified 70/30, seed 0", "run_length": "auto" if sweeps is None
         else "fixed", "extreme_max_time": EXTREME_MAX_TIME},
        fresh=args.fresh, default=json_default,
    )  # fmt: skip
    for other in args.merge:
        store.merge(other)
    grid_rows, extreme_rows, skipped = [], [], []
    plan = units(names, priors, gammas, extremes)

    def publish(pending=None):
        """Write the summary of the fits finished so far (after every fit, so that a run
        stopped at any point leaves a consistent JSON and Markdown; ``protocol.partial`` says
        how far it got; ``pending``: the key of a fit in the rows but not yet in the store)."""
        protocol = {
            "datasets": list(names), "skipped": skipped, "priors": list(priors),
            "gamma0": list(gammas), "seeds_as_vectorized_chains": chains,
            "run_length": "default (auto)" if sweeps is None else f"{sweeps} sweeps",
            "extremes": [f"{p}={v:g}" for p, v in EXTREMES] if extremes else [],
            "split": "stratified 70/30, seed 0", "calibration": calibration,
            "watchdog_idle_cpu_s": args.watchdog, "quick": bool(args.quick),
            "tiny": bool(args.tiny),
        }  # fmt: skip
        n_done = sum(store.done(k) or k == pending for k in (store.key(*p) for p, _ in plan))
        if n_done < len(plan):
            protocol["partial"] = f"{n_done} of {len(plan)} fits finished; the run resumes"
        summary = summarise(grid_rows + extreme_rows, protocol)
        store.save(benchmark=stem, machine=machine_info(), **summary, rows=grid_rows + extreme_rows)
        write_atomic(out.with_suffix(".md"), markdown(summary, grid_rows, extreme_rows))
        return summary

    for parts, over in plan:
        key = store.key(*parts)
        target = extreme_rows if over.get("extreme") else grid_rows
        if store.done(key):
            target += store.result(key)
            continue
        if over["dataset"] in skipped or args.summary_only:
            continue
        if over["dataset"] not in ("repro", "tiny") and load(over["dataset"]) is None:
            skipped.append(over["dataset"])
            print(f"{over['dataset']}: shared UCI data not found; skipped", flush=True)
            continue
        spec = {**common, **over}
        spec.pop("extreme", None)
        watchdog = min(args.watchdog, 300.0) if over.get("extreme") else args.watchdog
        got = run_watched(spec, watchdog)
        if over.get("extreme"):
            got = [{**r, "setting": parts[1]} for r in got]
        target += got
        print(
            f"{' | '.join(parts):>40}: nan={_count(got, 'nan_run')} "
            f"silent={_count(got, 'silent_failure')} hang={_count(got, 'hang')} "
            f"crashed={_count(got, 'crashed')} refused={_count(got, 'refused')} "
            f"converged={_count(got, 'converged')} stopped_by={got[0].get('stopped_by')} "
            f"acc={[r.get('test_accuracy') for r in got]} fit {got[0].get('fit_s')} s",
            flush=True,
        )
        publish(pending=key)  # before add(), which a stop after k units ends the process in
        store.add(key, got)
    summary = publish()
    print(f"wrote {out.with_suffix('.json')} and .md")
    return summary


if __name__ == "__main__":
    main()
