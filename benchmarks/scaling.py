"""Scaling of the compiled BM3KL sweep in P (at N = 145) and in N (at P = 100), C = 1.

Also the default sampler's sweep (``SweepConfig()``: move ``"collapsed_log"``, the default
prior, η = 2 so the pair updates slice-sample) at N = 145 and P = 800 and 8,000, the sizes of
issue 47 (target: time(P = 8,000) / time(P = 800) ≤ 11). Each row records the 1-minute load
average before and after it (the machine is shared, so a row's time is only as good as its
load).

For each size: the per-sweep time of :func:`bayesmkl.sampler.sweep` (``move="stable"``,
L = 10; timed as a jitted loop of sweeps, compile apart) and the process's resident memory
(current RSS after the run, peak RSS so far). Log-log slopes of time against P and against N are
fitted by least squares (expected: about 1 in P, since every O(P) term is a pass over the
kernels; at most 3 in N, from the O(C N³) Gaussian step; the O(P N²) passes give 2).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scaling.py [--quick] [--default-only]

``--default-only`` times only the default sampler's rows and replaces them (key ``default_P``,
or ``default_P_LABEL`` with ``--label LABEL``) in the existing ``results/scaling.json``, keeping
its other rows. The rows "before" issue 47 were written by this script with the package of
the commit before it first on ``PYTHONPATH`` and ``--label before``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    best_time,
    compile_time,
    current_rss_gib,
    git_commit,
    md_table,
    rss_gib,
    synthetic_kernels,
    write_results,
)

from bayesmkl.model.classification import Hyper  # noqa: E402
from bayesmkl.sampler import SweepConfig, build_sweep, init_state, simplex  # noqa: E402
from bayesmkl.sampler.sampler import CLASSIFICATION  # noqa: E402

# the benchmark calls the low-level sampler outside the package's 64-bit scope
jax.config.update("jax_enable_x64", True)

P_SIZES = (800, 2000, 8000)
N_SIZES = (100, 200, 400, 800)
#: the default sampler's sizes (issue 47)
DEFAULT_P = (800, 8000)


def time_default_sweep(N, P, C=1, reps=3, n_inner=3, pair_path=None):
    """Seconds per sweep of the default sampler (``SweepConfig()``), compile excluded;
    ``pair_path`` forces the route of the pair updates (:data:`bayesmkl.sampler.simplex.
    PAIR_PATHS`; ``None``: the sampler's choice, and the only setting a package from before
    issue 47 knows)."""
    load0 = os.getloadavg()[0]
    K, delta = synthetic_kernels(P, N, C)
    config = SweepConfig().validate()
    old = getattr(simplex, "PAIR_PATH", None)
    if pair_path is not None:
        simplex.PAIR_PATH = pair_path  # read when the sweep is traced, below
    try:
        state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, config).state
        sweep_pair = build_sweep(CLASSIFICATION, config, 0)

        def sweep(state, K, delta):
            return sweep_pair(state, K, delta)[0]

        one = jax.jit(sweep)
        for _ in range(2):  # leave the initial state (a = 0)
            state = one(state, K, delta)

        @jax.jit
        def many(state, K, delta):
            return jax.lax.fori_loop(0, n_inner, lambda i, s: sweep(s, K, delta), state)

        comp, many_c = compile_time(many, state, K, delta)
    finally:
        if pair_path is not None:
            simplex.PAIR_PATH = old
    t, t_med = best_time(many_c, state, K, delta, reps=reps)
    row = {"N": N, "P": P, "C": C, "sampler": "default (SweepConfig(): collapsed_log)",
           "pair_path": pair_path or getattr(simplex, "PAIR_PATH", "gram (before issue 47)"),
           "package_commit": git_commit(Path(simplex.__file__).resolve().parents[2]),
           "sweep_s": t / n_inner, "sweep_s_median": t_med / n_inner, "compile_s": comp,
           "kernel_gib": K.nbytes / 2**30, "rss_gib": current_rss_gib(),
           "peak_rss_gib": rss_gib(), "loadavg_1min_before": load0,
           "loadavg_1min_after": os.getloadavg()[0]}  # fmt: skip
    del K
    return row


def default_rows(reps):
    rows = []
    for P in DEFAULT_P:
        rows.append(time_default_sweep(145, P, reps=reps))
        print(rows[-1], flush=True)
    return rows


def default_ratio(rows):
    """sweep_s(P = 8,000) / sweep_s(P = 800)."""
    t = {r["P"]: r["sweep_s"] for r in rows}
    return t[DEFAULT_P[-1]] / t[DEFAULT_P[0]] if all(P in t for P in DEFAULT_P) else None


DEFAULT_COLS = ["N", "P", "pair_path", "package_commit", "sweep_s", "sweep_s_median", "compile_s",
                "peak_rss_gib", "loadavg_1min_before", "loadavg_1min_after"]  # fmt: skip


def default_markdown(payload):
    """The default sampler's section: its rows and those of other packages (``default_P_*``)."""
    fmt = {c: "{:.3g}" for c in DEFAULT_COLS if c not in ("N", "P")}
    out = [
        "\n## The default sampler at N = 145 (issue 47: sweep_s(8000) / sweep_s(800) ≤ 11)\n",
        "SweepConfig() (collapsed_log, default prior, η = 2: slice draws), one chain, C = 1, "
        "float64 kernels. The machine is shared (2 cores): each row records the 1-minute load "
        "average before and after it.\n",
    ]
    for key in sorted(k for k in payload if k.startswith("default_P")):
        rows = payload[key]
        label = key.removeprefix("default_P").strip("_") or "this package"
        ratio = default_ratio(rows)
        ratio_s = "n/a" if ratio is None else f"{ratio:.2f}"
        out.append(f"### {label} (ratio {ratio_s})\n\n" + md_table(rows, DEFAULT_COLS, fmt))
    return "\n".join(out)


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
    ap.add_argument(
        "--default-only",
        action="store_true",
        help="only the default sampler's rows, merged into results/scaling.json",
    )
    ap.add_argument(
        "--label",
        help="store the default sampler's rows as default_P_LABEL (e.g. 'before', with "
        "PYTHONPATH at an older package)",
    )
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 5
    if args.default_only:
        path = RESULTS / "scaling.json"
        payload = json.loads(path.read_text())
        payload.pop("benchmark", None)
        # write_results records this run's machine; keep the one of the other rows' run
        machine = payload.pop("machine", None)
        payload.setdefault("machine_vary_P_N", machine)
        key = "default_P" + (f"_{args.label}" if args.label else "")
        payload[key] = default_rows(reps=3)
        payload[key.replace("default_P", "default_ratio_P8000_P800")] = default_ratio(payload[key])
        md = (RESULTS / "scaling.md").read_text().split("\n## The default sampler")[0]
        write_results("scaling", payload, md.rstrip("\n") + "\n" + default_markdown(payload))
        return
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
    rows_d = default_rows(reps=3)
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
        "largest N; expected ≤ 3)\n\n"
        + md_table(rows_n, cols, fmt)
        + default_markdown({"default_P": rows_d})
    )
    write_results("scaling", {"vary_P": rows_p, "vary_N": rows_n, "slope_P": s_p,
                              "slope_N": s_n, "slope_N_top": s_n_top, "default_P": rows_d,
                              "default_ratio_P8000_P800": default_ratio(rows_d),
                              "wall_s": time.time() - t0, "quick": args.quick}, md)  # fmt: skip


if __name__ == "__main__":
    main()
