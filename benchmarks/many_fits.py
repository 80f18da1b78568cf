"""Benchmark: memory of a long-lived process that fits many models of distinct N (issue 21).

Fits ``--n-fits`` short BM3KL models (``num_warmup=5, num_samples=5, calibration=None``,
simplemkl pool on 3 features of breast cancer) with N = 100, 101, …, one process, and after each
fit records the number of memory mappings (lines of ``/proc/self/maps``; Linux's default limit
``vm.max_map_count`` is 65,530) and the resident memory (``/proc/self/statm``). Each N is a new
data shape, so each fit compiles a new program; the package holds the programs of at most
``MAX_HELD_SHAPES`` shapes (``bayesmkl.sampler.runner.hold_programs_for``), so the counts rise
and fall within a cycle of that many fits.

Growth is judged after the first 20 fits (target ≤ 10%): ``growth_maps`` and ``growth_rss``
are the largest value after fit 20 over the largest of the first 20, minus 1 (the peak of the
cycle must not rise); ``growth_maps_last`` and ``growth_rss_last`` compare the last fit with
fit 20.

Resumable only in the sense that matters here: the JSON is rewritten after every fit, so a
killed run keeps its rows (a restart starts a new process, whose memory starts afresh, so it
starts the sequence again). Usage::

    OPENBLAS_NUM_THREADS=1 nohup .venv/bin/python benchmarks/many_fits.py --n-fits 200 &

Writes ``benchmarks/results/many_fits.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import git_commit, write_atomic  # noqa: E402


def maps_and_rss() -> tuple[int, float]:
    with open("/proc/self/maps") as f:
        n_maps = sum(1 for _ in f)
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    return n_maps, rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-fits", type=int, default=200)
    p.add_argument("--out", default=str(HERE / "results" / "many_fits.json"))
    args = p.parse_args(argv)

    from bayesmkl import BM3KLClassifier
    from bayesmkl.datasets import load_demo

    X, y, _ = load_demo()
    order = np.random.default_rng(0).permutation(len(y))
    rows = []
    result = {"commit": git_commit(), "n_fits": args.n_fits, "rows": rows}
    for k in range(args.n_fits):
        n = 100 + k
        idx = order[:n]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            BM3KLClassifier(
                kernels="simplemkl", num_warmup=5, num_samples=5, calibration=None,
                random_state=k, progress_bar=False,
            ).fit(X[idx, :3], y[idx])  # fmt: skip
        n_maps, rss = maps_and_rss()
        rows.append({"fit": k + 1, "n": n, "maps": n_maps, "rss_mib": rss,
                     "fit_s": time.perf_counter() - t0, "loadavg": os.getloadavg()[0]})  # fmt: skip
        if len(rows) > 20:
            for key, name in (("maps", "maps"), ("rss_mib", "rss")):
                first = max(r[key] for r in rows[:20])
                result[f"growth_{name}"] = max(r[key] for r in rows[20:]) / first - 1.0
                result[f"growth_{name}_last"] = rows[-1][key] / rows[19][key] - 1.0
        write_atomic(Path(args.out), json.dumps(result, indent=1))
        print(f"fit {k + 1} N={n}: {n_maps} maps, {rss:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
