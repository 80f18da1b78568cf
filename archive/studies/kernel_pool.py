"""Benchmark: building the Sonar SimpleMKL pool (793 kernels) with KernelPool vs plain NumPy.

One "build" = standardise with training statistics, training kernels ``(793, 145, 145)`` and
cross kernels ``(793, 63, 145)``, unit-diagonal normalised, float64, on a 70/30 split (seed 0).
The NumPy reference below loops over the kernels, as one would write it by hand.

Each implementation runs in its own fresh subprocess (so peak-memory figures do not mix):
one cold build (for JAX this includes compilation), then ``--repeats`` warm builds (median
reported), then one build under ``tracemalloc`` (NumPy-side allocations; XLA's own buffers are
invisible to it) and one build with a 1 ms RSS sampler (``/proc/self/statm``; relative to the
RSS just before, which may already hold memory the allocator kept from earlier builds). The
cold build's peak-RSS increase comes from ``resource.getrusage`` (peak over the process minus
the RSS before it).
CPU time (user + system, all threads) is reported next to wall time because the wall time of a
loaded shared machine is noisy.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/kernel_pool.py [--repeats 7]

Writes ``benchmarks/results/kernel_pool.json`` and ``benchmarks/results/kernel_pool.md`` and prints
the Markdown table. Uses ``sonar.csv`` from the shared UCI data when present, otherwise synthetic
data of the same shape (208 x 60), and says which.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GAUSS_WIDTHS = [2.0**k for k in range(-3, 7)]
POLY_DEGREES = [1, 2, 3]
MB = 1024.0**2


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------


def load_data():
    """Sonar (or synthetic 208 x 60) split 70/30 with seed 0; returns (Xtr, Xte, source)."""
    sys.path.insert(0, str(HERE.parent))
    from bayesmkl.datasets import find_uci_dir, load_uci

    if find_uci_dir() is not None:
        try:
            X, _ = load_uci("sonar")
            source = "UCI sonar (shared data)"
        except FileNotFoundError:
            X = None
    else:
        X = None
    if X is None:
        X = np.random.default_rng(0).uniform(size=(208, 60))
        source = "SYNTHETIC uniform 208 x 60 (shared sonar.csv not found)"
    perm = np.random.default_rng(0).permutation(X.shape[0])
    n_tr = int(0.7 * X.shape[0])
    return X[perm[:n_tr]], X[perm[n_tr:]], source


# ------------------------------------------------------------------------------------------
# plain NumPy reference: one kernel at a time
# ------------------------------------------------------------------------------------------


def reference_specs(d):
    fam = [("gauss", w) for w in GAUSS_WIDTHS] + [("poly", p) for p in POLY_DEGREES]
    specs = [(k, p, None) for k, p in fam]
    specs += [(k, p, j) for k, p in fam for j in range(d)]
    return specs


def reference_build(Xtr, Xte):
    """Plain NumPy: standardise, then loop over the 13 (d + 1) kernels; (K_train, K_test)."""
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    A, B = (Xtr - mu) / sd, (Xte - mu) / sd
    specs = reference_specs(A.shape[1])
    N, M = A.shape[0], B.shape[0]
    Ktr = np.empty((len(specs), N, N))
    Kte = np.empty((len(specs), M, N))
    for m, (kind, p, j) in enumerate(specs):
        a = A if j is None else A[:, [j]]
        b = B if j is None else B[:, [j]]
        if kind == "gauss":
            na, nb = (a * a).sum(1), (b * b).sum(1)
            Dtr = np.maximum(na[:, None] + na[None, :] - 2 * a @ a.T, 0)
            Dte = np.maximum(nb[:, None] + na[None, :] - 2 * b @ a.T, 0)
            Ktr[m] = np.exp(-Dtr / (2 * p * p))
            Kte[m] = np.exp(-Dte / (2 * p * p))
        else:
            Ktr[m] = (a @ a.T + 1.0) ** p
            Kte[m] = (b @ a.T + 1.0) ** p
            da = ((a * a).sum(1) + 1.0) ** p
            db = ((b * b).sum(1) + 1.0) ** p
            Ktr[m] /= np.sqrt(np.outer(da, da))
            Kte[m] /= np.sqrt(np.outer(db, da))
    return Ktr, Kte


def ours_build(Xtr, Xte):
    from bayesmkl.kernels import KernelPool

    pool = KernelPool.simplemkl().fit(Xtr)
    return pool.train_kernels(), pool.cross_kernels(Xte)


# ------------------------------------------------------------------------------------------
# measurement (worker side)
# ------------------------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_s() -> float:
    """User + system CPU seconds of this process, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class _RSSSampler:
    def __init__(self, period=0.001):
        self.period, self.peak, self._stop = period, 0, threading.Event()

    def __enter__(self):
        self.base = _rss_bytes()
        self.peak = self.base
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(self.period)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss_bytes())


def worker(which: str, repeats: int) -> dict:
    Xtr, Xte, source = load_data()
    if which == "ours":
        import jax.numpy as jnp

        import bayesmkl  # noqa: F401  (KernelPool scopes 64-bit JAX itself)

        jnp.zeros(1).block_until_ready()  # start the backend before measuring
        build = ours_build
    else:
        build = reference_build
    gc.collect()
    rss0 = _rss_bytes()
    t0 = time.perf_counter()
    Ktr, Kte = build(Xtr, Xte)
    cold = time.perf_counter() - t0
    cold_rss = (_maxrss_bytes() - rss0) / MB  # peak over the process minus RSS before
    shapes = [list(Ktr.shape), list(Kte.shape)]
    out_mb = (Ktr.nbytes + Kte.nbytes) / MB
    del Ktr, Kte
    gc.collect()
    times, cpu = [], []
    for _ in range(repeats):
        c0, t0 = _cpu_s(), time.perf_counter()
        Ktr, Kte = build(Xtr, Xte)
        times.append(time.perf_counter() - t0)
        cpu.append(_cpu_s() - c0)
        del Ktr, Kte
        gc.collect()
    tracemalloc.start()
    Ktr, Kte = build(Xtr, Xte)
    _, tm_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del Ktr, Kte
    gc.collect()
    with _RSSSampler() as s:
        Ktr, Kte = build(Xtr, Xte)
    warm_rss = (s.peak - s.base) / MB
    med = statistics.median(times)
    return {
        "impl": which,
        "data": source,
        "shapes": shapes,
        "output_mb": round(out_mb, 1),
        "cold_s": round(cold, 4),
        "compile_s_estimate": round(cold - med, 4) if which == "ours" else None,
        "warm_times_s": [round(t, 4) for t in times],
        "median_s": round(med, 4),
        "median_cpu_s": round(statistics.median(cpu), 4),
        "tracemalloc_peak_mb": round(tm_peak / MB, 1),
        "rss_peak_delta_cold_mb": round(cold_rss, 1),
        "rss_peak_delta_warm_mb": round(warm_rss, 1),
    }


# ------------------------------------------------------------------------------------------
# orchestration
# ------------------------------------------------------------------------------------------


def run_worker(which: str, repeats: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", which, "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {which} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def agreement() -> float:
    import bayesmkl  # noqa: F401

    Xtr, Xte, _ = load_data()
    a, b = ours_build(Xtr, Xte), reference_build(Xtr, Xte)
    return float(max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max()))


def markdown(res: dict) -> str:
    o, r = res["ours"], res["reference"]
    lines = [
        f"Sonar SimpleMKL pool: train {o['shapes'][0]} + cross {o['shapes'][1]} float64 "
        f"({o['output_mb']} MB of output); data: {o['data']}.",
        "",
        "| | KernelPool (JAX) | NumPy reference | ours / reference |",
        "|---|---:|---:|---:|",
        f"| median build time, s ({len(o['warm_times_s'])} warm repeats) | {o['median_s']:.3f} "
        f"| {r['median_s']:.3f} | {o['median_s'] / r['median_s']:.2f} |",
        f"| median CPU time per build, s (user + sys, all threads) | {o['median_cpu_s']:.3f} "
        f"| {r['median_cpu_s']:.3f} | {o['median_cpu_s'] / r['median_cpu_s']:.2f} |",
        f"| first build, s | {o['cold_s']:.3f} | {r['cold_s']:.3f} | |",
        f"| compile time (first - median), s | {o['compile_s_estimate']:.3f} | – | |",
        f"| tracemalloc peak, MB (NumPy side) | {o['tracemalloc_peak_mb']:.1f} "
        f"| {r['tracemalloc_peak_mb']:.1f} "
        f"| {o['tracemalloc_peak_mb'] / r['tracemalloc_peak_mb']:.2f} |",
        f"| RSS peak increase, warm build, MB | {o['rss_peak_delta_warm_mb']:.1f} "
        f"| {r['rss_peak_delta_warm_mb']:.1f} "
        f"| {o['rss_peak_delta_warm_mb'] / max(r['rss_peak_delta_warm_mb'], 1e-9):.2f} |",
        f"| RSS peak increase, first build (getrusage), MB | {o['rss_peak_delta_cold_mb']:.1f} "
        f"| {r['rss_peak_delta_cold_mb']:.1f} | |",
        "",
        f"Max |ours - reference| over all entries: {res['max_abs_diff']:.2e}. "
        f"Machine: {res['machine']}.",
    ]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--worker", choices=["ours", "ref"])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, max(args.repeats, 1))))
        return
    if args.repeats < 5:
        ap.error("use at least 5 repeats")
    import jax

    load = os.getloadavg()
    res = {
        "ours": run_worker("ours", args.repeats),
        "reference": run_worker("ref", args.repeats),
        "max_abs_diff": agreement(),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} CPUs, load average before the run "
            f"{load[0]:.1f}, Python {platform.python_version()}, numpy {np.__version__}, "
            f"jax {jax.__version__} ({jax.default_backend()}), "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
        ),
    }
    res["ratio_time_ours_over_reference"] = round(
        res["ours"]["median_s"] / res["reference"]["median_s"], 3
    )
    res["ratio_cpu_ours_over_reference"] = round(
        res["ours"]["median_cpu_s"] / res["reference"]["median_cpu_s"], 3
    )
    res["ratio_tracemalloc_ours_over_reference"] = round(
        res["ours"]["tracemalloc_peak_mb"] / res["reference"]["tracemalloc_peak_mb"], 3
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernel_pool.json").write_text(json.dumps(res, indent=2) + "\n")
    md = markdown(res)
    (args.out / "kernel_pool.md").write_text("# Kernel pool benchmark\n\n" + md + "\n")
    print(md)


if __name__ == "__main__":
    main()
