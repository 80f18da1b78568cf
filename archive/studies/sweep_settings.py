"""Benchmark: which settings of the default sweep reach the run-length targets fastest (issue 21).

The default fit stops when every kernel weight and every monitored held-in decision value has
R-hat ≤ 1.01 and bulk ESS ≥ 400. What decides its time is the smallest bulk ESS per second of
sampling over those quantities. This script measures it for settings of the collapsed
kernel-weight move that trade cost per sweep against mixing per sweep:

* ``n_active``: the active set whose sample weights the move integrates out (the move's cost
  grows as N·s² per leapfrog step);
* ``n_leapfrog``: L, leapfrog steps per sweep.

Each unit is one (data set, setting, seed): the default prior (``prior="default"``) and kernel
pool of :class:`~bayesmkl.BM3KLClassifier`, 4 vectorised chains, ``--num-warmup`` warm-up and
``--num-samples`` kept sweeps (a fixed length, so that units compare), stratified 70/30 split
with seed 0. Reported: ``sample_s`` (wall seconds minus compilation), ``ess_min`` and
``rhat_max`` over w and the monitored decision values (the fit's own run-length monitor), the
slowest quantity, the share of diverging sweeps, and ``ess_per_s = ess_min / sample_s``.
Settings are compared by ``ess_per_s`` of the same data set and seed, measured in the same run.

Resumable: each finished unit is written at once (``_store.ResumableResults``); a restart skips
finished units. Usage::

    OPENBLAS_NUM_THREADS=1 nohup .venv/bin/python benchmarks/sweep_settings.py \\
        [--datasets breast-sklearn,wine,sonar] [--seeds 0,1] &

Writes ``benchmarks/results/sweep_settings.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _store import ResumableResults  # noqa: E402

#: name → BM3KL settings (the rest as the estimator's defaults)
SETTINGS = {
    "s64 L10": {"n_active": 64, "n_leapfrog": 10},
    "s32 L10": {"n_active": 32, "n_leapfrog": 10},
    "s16 L10": {"n_active": 16, "n_leapfrog": 10},
    "log s32 L10": {"move": "collapsed_log", "n_active": 32, "n_leapfrog": 10},
    "s32 L5": {"n_active": 32, "n_leapfrog": 5},
}


def load(dataset: str):
    from bayesmkl.datasets import load_demo, load_uci

    if dataset == "breast-sklearn":
        X, y, _ = load_demo()
        return X, y
    return load_uci(dataset)


def run_unit(dataset: str, setting: str, seed: int, args) -> dict:
    import jax
    from sklearn.model_selection import train_test_split

    from bayesmkl import BM3KLClassifier
    from bayesmkl._fitting import resolve_hyper, run_monitor
    from bayesmkl._x64 import x64_scope
    from bayesmkl.inference.runlength import sample_until_converged
    from bayesmkl.inference.runner import ChainRunner
    from bayesmkl.inference.sampler import BM3KL
    from bayesmkl.model import signed_targets

    X, y = load(dataset)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    clf = BM3KLClassifier(random_state=0)
    clf._validate_params()
    with x64_scope():
        _, K, classes, codes, _ = clf._validate_fit_input(Xtr, ytr)
        delta = signed_targets(codes, len(classes), clf.binary_mode)
        settings = {"move": "collapsed", **SETTINGS[setting]}
        kernel = BM3KL(*resolve_hyper(clf), adapt_sweeps=args.num_warmup, **settings)
        monitor = run_monitor(K, 0)
        runner = ChainRunner(kernel, 4, 50, monitor_points=monitor.points)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            _, extra, rep = sample_until_converged(
                runner, jax.random.key(seed), (K, delta), monitor, num_warmup=args.num_warmup,
                extra_fields=("diverging",), max_samples=args.num_samples, fixed=True,
                max_kept=10**9,
            )  # fmt: skip
            wall = time.perf_counter() - t0
    sample_s = rep.seconds - rep.compile_seconds
    return {
        "dataset": dataset, "setting": setting, "seed": seed, **settings,
        "n_train": int(K.shape[-1]), "n_kernels": int(K.shape[0]), "C": int(delta.shape[0]),
        "sweeps": args.num_warmup + args.num_samples, "sample_s": sample_s,
        "compile_s": rep.compile_seconds, "wall_s": wall, "ess_min": rep.ess_bulk_min,
        "rhat_max": rep.rhat_max, "worst": rep.worst,
        "diverging": float(np.mean(extra["diverging"])),
        "ess_per_s": rep.ess_bulk_min / sample_s,
    }  # fmt: skip


def markdown(results: dict) -> str:
    cfg = results["config"]
    units = list(results["units"].values())
    lines = [
        "# Settings of the default sweep: smallest bulk ESS per second (issue 21)",
        "",
        f"Default prior and kernel pool, 4 vectorised chains, {cfg['num_warmup']} warm-up + "
        f"{cfg['num_samples']} kept sweeps, 70/30 split (seed 0). `ess_min`, `rhat_max`: over "
        "the kernel weights and the monitored held-in decision values (the fit's run-length "
        "monitor). `vs s64 L10`: `ess_per_s` over that of `s64 L10` for the same data set and "
        "seed (only where both `ess_min` ≥ 100).",
        "",
        "| data | N | P | C | setting | seed | sample s | min ESS | max R-hat | worst "
        "| diverging | ESS/s | vs s64 L10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {(u["dataset"], u["seed"]): u for u in units if u["setting"] == "s64 L10"}
    for u in sorted(units, key=lambda u: (u["dataset"], u["seed"], u["setting"])):
        b = base.get((u["dataset"], u["seed"]))
        ok = b is not None and min(b["ess_min"], u["ess_min"]) >= 100
        ratio = f"{u['ess_per_s'] / b['ess_per_s']:.2f}" if ok else "—"
        lines.append(
            f"| {u['dataset']} | {u['n_train']} | {u['n_kernels']} | {u['C']} | {u['setting']} "
            f"| {u['seed']} | {u['sample_s']:.1f} | {u['ess_min']:.0f} | {u['rhat_max']:.3f} "
            f"| {u['worst']} | {u['diverging']:.2%} | {u['ess_per_s']:.2f} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="breast-sklearn,wine,sonar")
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--num-warmup", type=int, default=300)
    p.add_argument("--num-samples", type=int, default=1000)
    p.add_argument("--out", default=str(HERE / "results" / "sweep_settings.json"))
    args = p.parse_args(argv)

    from bayesmkl._fitting import enable_compilation_cache

    enable_compilation_cache()
    config = {"num_warmup": args.num_warmup, "num_samples": args.num_samples, "chains": 4}
    store = ResumableResults(Path(args.out), config, markdown)
    for ds in args.datasets.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for setting in args.settings.split(","):
                key = f"{ds} {setting} seed={seed}"
                if store.done(key):
                    continue
                row = run_unit(ds, setting, seed, args)
                store.add(key, row)
                print(f"{key}: ESS {row['ess_min']:.0f}, R-hat {row['rhat_max']:.3f}, "
                      f"{row['ess_per_s']:.2f}/s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
