"""Why does the collapsed sweep mix slowly? Default chains against chains with ν (and λ) frozen.

Breast cancer (bsvm16, paper hyper-parameters), 4 vectorized chains of ``--warmup`` +
``--samples`` sweeps each:

* ``default``: the default sweep (collapsed move, TPBN Gibbs ν | a, ς and ς | ν);
* ``frozen nu``: the same sweep with (ν, ς) held at chain 0's first post-warm-up draw of the
  default run, every chain started from its own first post-warm-up draw (w, a, b, λ move);
* ``frozen nu, lam``: as above with λ frozen too (only w, a, b move).

If w and the held-in decision values f mix well once ν is frozen, the slow mixing comes from ν
(hypothesis A: sticky TPBN scales); if they still mix slowly, from w itself (B: a ridge).

    python benchmarks/nu_diagnose.py [--warmup 200] [--samples 400]

Writes ``benchmarks/results/nu_diagnose.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from move_compare import load_data, run  # noqa: E402

from bayesmkl._x64 import x64_scope  # noqa: E402
from bayesmkl.inference import sampler as kmod  # noqa: E402

_sweep = kmod.sweep


def frozen_sweep(sites):
    """``sweep`` that puts back the input state's values of ``sites`` after each sweep."""

    def one(state, K, delta, config, num_warmup, weight=None):
        new = _sweep(state, K, delta, config, num_warmup, weight)
        return new._replace(z={**new.z, **{k: state.z[k] for k in sites}})

    return one


FROZEN = {"frozen nu": ("nu", "varsigma"), "frozen nu, lam": ("nu", "varsigma", "lam")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument(
        "--init-cache", type=Path, default=None,
        help="npz of the default run's first post-warm-up draws: written if absent; if present, "
        "the default run is skipped (its row kept from the existing JSON)",
    )  # fmt: skip
    ap.add_argument("--frozen", nargs="*", default=list(FROZEN), help="frozen rows to run")
    args = ap.parse_args()
    out = Path(__file__).parent / "results"
    rows = {}
    kw = {"move": "collapsed", "n_active": 64}
    with x64_scope():
        K, delta = load_data()
        if (out / "nu_diagnose.json").exists():  # rows not rerun are kept
            rows = json.loads((out / "nu_diagnose.json").read_text())["rows"]
        if args.init_cache is not None and args.init_cache.exists():
            own = dict(np.load(args.init_cache))
        else:
            rows["default"], z = run(kw, K, delta, args.warmup, args.samples)
            print("default", rows["default"], flush=True)
            own = {k: np.asarray(z[k][:, 0]) for k in ("e", "a", "b", "lam", "nu", "varsigma")}
            if args.init_cache is not None:
                np.savez(args.init_cache, **own)
        for name in args.frozen:
            sites = FROZEN[name]
            # frozen sites: chain 0's values in every chain (one target); the rest: their own
            init = {k: np.broadcast_to(v[:1], v.shape).copy() if k in sites else v
                    for k, v in own.items()}  # fmt: skip
            kmod.sweep = frozen_sweep(sites)
            try:
                rows[name], _ = run(kw, K, delta, args.warmup, args.samples, init_params=init)
            finally:
                kmod.sweep = _sweep
            print(name, rows[name], flush=True)
    meta = {"data": "breast cancer, 70/30 seed 0, bsvm16, paper hyper-parameters",
            "chains": 4, "warmup": args.warmup, "samples": args.samples, "move": kw}  # fmt: skip
    (out / "nu_diagnose.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    write_markdown(rows, args, out)


def write_markdown(rows, args, out):
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    lines = [
        "# Is ν the slow block? Default sweep against ν (and λ) frozen (breast, bsvm16)",
        "",
        f"4 chains, {args.warmup} warm-up + {args.samples} sweeps; collapsed move, n_active 64.",
        "Frozen rows: ν, ς (and λ) fixed at chain 0's first post-warm-up draw of the default run",
        "in every chain; the other sites start from each chain's own first post-warm-up draw.",
        "Rows without cpu_seconds are from an earlier run of this script (same seed and code,",
        "so the same ESS; wall seconds depend on the machine's load, which varied from 2 to 9).",
        "",
        "| quantity | " + " | ".join(rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(str(r.get(k, "–")) for r in rows.values()) + " |")
    (out / "nu_diagnose.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
