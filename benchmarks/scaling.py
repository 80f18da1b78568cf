"""Scaling of the compiled BM3KL sweep in P (at N = 145) and in N (at P = 100), C = 1.

For each size: the per-sweep time of :func:`bayesmkl.sampler.sweep` (``move="stable"``,
L = 10; timed as a jitted loop of sweeps, compile apart) and the process's resident memory
(current RSS after the run, peak RSS so far). Log-log slopes of time against P and against N are
fitted by least squares (expected: about 1 in P, since every O(P) term is a pass over the
kernels; at most 3 in N, from the O(C N³) Gaussian step; the O(P N²) passes give 2).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    best_time,
    compile_time,
    current_rss_gib,
    md_table,
    rss_gib,
    synthetic_kernels,
    write_results,
)

from bayesmkl.model.classification import Hyper  # noqa: E402
from bayesmkl.sampler import SweepConfig, build_sweep, init_state  # noqa: E402
from bayesmkl.sampler.sampler import CLASSIFICATION  # noqa: E402

# the benchmark calls the low-level sampler outside the package's 64-bit scope
jax.config.update("jax_enable_x64", True)

P_SIZES = (800, 2000, 8000)
N_SIZES = (100, 200, 400, 800)


def time_sweep(N, P, C=1, reps=5, n_inner=5):
    K, delta = synthetic_kernels(P, N, C)
    config = SweepConfig(hyper=Hyper.paper(), move="stable", step_size=0.01,
                         n_leapfrog=10).validate()  # fmt: skip
    state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, config).state
    sweep_pair = build_sweep(CLASSIFICATION, config, 0)

    def sweep(state, K, delta):
        return sweep_pair(state, K, delta)[0]

    one = jax.jit(sweep)
    for _ in range(2):
        state = one(state, K, delta)

    @jax.jit
    def many(state, K, delta):
        return jax.lax.fori_loop(0, n_inner, lambda i, s: sweep(s, K, delta), state)

    comp, many_c = compile_time(many, state, K, delta)
    t, t_med = best_time(many_c, state, K, delta, reps=reps)
    row = {"N": N, "P": P, "C": C, "sweep_s": t / n_inner, "sweep_s_median": t_med / n_inner,
           "compile_s": comp, "kernel_gib": K.nbytes / 2**30,
           "rss_gib": current_rss_gib(), "peak_rss_gib": rss_gib()}  # fmt: skip
    del K
    return row


def slope(x, y):
    b, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(b)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, smaller grids")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 5
    p_sizes = P_SIZES if not args.quick else (800, 2000, 4000)
    n_sizes = N_SIZES if not args.quick else (100, 200, 400)
    t0 = time.time()
    rows_p, rows_n = [], []
    for P in p_sizes:
        rows_p.append(time_sweep(145, P, reps=reps))
        print(rows_p[-1], flush=True)
    for N in n_sizes:
        rows_n.append(time_sweep(N, 100, reps=reps))
        print(rows_n[-1], flush=True)
    s_p = slope([r["P"] for r in rows_p], [r["sweep_s"] for r in rows_p])
    s_n = slope([r["N"] for r in rows_n], [r["sweep_s"] for r in rows_n])
    # the slope over the two largest N, where the N³ term should dominate
    s_n_top = slope([r["N"] for r in rows_n[-2:]], [r["sweep_s"] for r in rows_n[-2:]])
    cols = ["N", "P", "sweep_s", "compile_s", "kernel_gib", "rss_gib", "peak_rss_gib"]
    fmt = {c: "{:.3g}" for c in cols}
    md = (
        "# scaling\n\nPer-sweep time of the compiled sweep (stable move, L = 10, C = 1).\n\n"
        f"## P at N = 145 (log-log slope {s_p:.2f}; expected ≈ 1)\n\n"
        + md_table(rows_p, cols, fmt)
        + f"\n## N at P = 100 (log-log slope {s_n:.2f} overall, {s_n_top:.2f} over the two "
        "largest N; expected ≤ 3)\n\n" + md_table(rows_n, cols, fmt)
    )
    write_results("scaling", {"vary_P": rows_p, "vary_N": rows_n, "slope_P": s_p,
                              "slope_N": s_n, "slope_N_top": s_n_top,
                              "wall_s": time.time() - t0, "quick": args.quick}, md)  # fmt: skip


if __name__ == "__main__":
    main()
