"""Exact BM3KL fits on whatever accelerator JAX sees: time per sweep at large N and many kernels.

Units (each resumable; a unit is one fit through the public API, fixed run length):

* ``fit N=<n>``: ``BM3KLClassifier(kernels="bsvm16")`` on a binary synthetic problem of N
  training points (``make_classification``, 20 features), ``--warmup`` + ``--samples`` sweeps
  of ``--chains`` chains, no calibration. Recorded: fit seconds, compile seconds (JAX's own
  compile clock, from ``run_report_``), milliseconds per sweep of all chains after compilation,
  and the training accuracy as a sanity check.
* ``sweep (280, 3088, 40)``: the paper's largest kernel pool (3,088 kernels on 280 points in 40
  classes) as precomputed Gaussian kernels, same run settings.

A unit whose kernels (P·N² entries in ``--dtype``) would take more than ``--max-kernel-gb`` is
recorded as skipped with the memory it needs. The device's name is written with every unit.

Usage (on a GPU machine: ``pip install -e ".[cuda]"`` first)::

    python benchmarks/device.py [--sizes 2000 5000 10000 20000] [--quick] [--fresh]

Writes ``benchmarks/results/device.json`` and ``device.md`` (``--out`` another stem).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, UnitStore, json_default, machine_info, md_table  # noqa: E402

SIZES = (2000, 5000, 10000, 20000)
PAPER_SHAPE = (280, 3088, 40)  # (N, P, C)


def device_name() -> str:
    import jax

    d = jax.devices()[0]
    return f"{d.platform}:{getattr(d, 'device_kind', str(d))}"


def _timing(clf, n_sweeps: int, seconds: float) -> dict:
    rep = clf.run_report_
    run = max(rep.seconds - rep.compile_seconds, 1e-9)
    return {
        "fit_s": round(seconds, 3),
        "compile_s": round(rep.compile_seconds, 3),
        "sweep_ms": round(1e3 * run / n_sweeps, 3),
        "sweeps": n_sweeps,
        "device": device_name(),
    }


def fit_unit(n: int, args) -> dict:
    from sklearn.datasets import make_classification

    from bayesmkl import BM3KLClassifier

    gb = 16 * n * n * np.dtype(args.dtype).itemsize / 1e9
    if gb > args.max_kernel_gb:
        return {"skipped": f"kernels need {gb:.1f} GB > --max-kernel-gb {args.max_kernel_gb}",
                "device": device_name()}  # fmt: skip
    X, y = make_classification(n, 20, n_informative=8, random_state=0)
    clf = BM3KLClassifier(
        kernels="bsvm16", num_warmup=args.warmup, num_samples=args.samples,
        num_chains=args.chains, calibration=None, kernel_dtype=args.dtype, progress_bar=False,
        n_landmarks=None, random_state=0,
    )  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed short run is not meant to converge
        clf.fit(X, y)
    out = _timing(clf, args.warmup + args.samples, time.perf_counter() - t0)
    out.update(N=n, P=16, C=1, kernel_gb=round(gb, 2), train_acc=float(clf.score(X, y)))
    return out


def paper_shape_unit(args) -> dict:
    from bayesmkl import BM3KLClassifier

    n, p, c = (24, 64, 4) if args.quick else PAPER_SHAPE
    gb = p * n * n * np.dtype(args.dtype).itemsize / 1e9
    if gb > args.max_kernel_gb:
        return {"skipped": f"kernels need {gb:.1f} GB", "device": device_name()}
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    widths = np.exp(np.linspace(np.log(0.25), np.log(16.0), p))
    K = np.exp(-d2[None] / (2.0 * widths[:, None, None] ** 2)).astype(args.dtype)
    y = np.arange(n) % c
    clf = BM3KLClassifier(
        kernels="precomputed", num_warmup=args.warmup, num_samples=args.samples,
        num_chains=args.chains, calibration=None, progress_bar=False, random_state=0,
    )  # fmt: skip
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(K, y)
    out = _timing(clf, args.warmup + args.samples, time.perf_counter() - t0)
    out.update(N=n, P=p, C=c, kernel_gb=round(gb, 2))
    return out


def markdown(store: UnitStore) -> str:
    rows = []
    for key, unit in store.units.items():
        r = dict(unit["result"])
        rows.append({"unit": key.replace(" | ", " "), **r, "load": unit.get("loadavg")})
    cols = ["unit", "device", "N", "P", "C", "fit_s", "compile_s", "sweep_ms", "train_acc",
            "skipped"]  # fmt: skip
    return (
        "# Exact BM3KL fits on the device JAX sees\n\n"
        "Fixed run length (warm-up + samples below), no calibration; `sweep_ms` is the time of "
        "one sweep of all chains after compilation. Written by `benchmarks/device.py`.\n\n"
        f"Run: {store.config}\n\n"
        + md_table(rows, cols, {"sweep_ms": "{:.1f}", "train_acc": "{:.3f}"})
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--max-kernel-gb", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, to check the script")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--out", default=None, help="results stem (default: device)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.warmup, args.samples = [60, 120], 5, 5
    stem = args.out or ("device_quick" if args.quick else "device")
    config = {k: getattr(args, k) for k in ("warmup", "samples", "chains", "dtype", "quick")}
    config["device"] = device_name()
    store = UnitStore(RESULTS / f"{stem}.json", config, fresh=args.fresh, default=json_default)
    for n in args.sizes:
        key = UnitStore.key("fit", f"N={n}")
        if not store.done(key):
            print(f"{key} ...", flush=True)
            store.add(key, fit_unit(n, args))
    key = UnitStore.key("sweep", "(N, P, C) = " + str((24, 64, 4) if args.quick else PAPER_SHAPE))
    if not store.done(key):
        print(f"{key} ...", flush=True)
        store.add(key, paper_shape_unit(args))
    store.save(machine=machine_info())
    (RESULTS / f"{stem}.md").write_text(markdown(store))
    print(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
