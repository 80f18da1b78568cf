"""Benchmark: which prior can the default sampler actually sample? (issue 21, item 1)

A grid over the hyper-parameters that shape the posterior's geometry — γ0 (the rate of the
Exp prior on λ: how hard every y·f is pulled to the margin), κ and β_a (the TPBN: how close the
sample weights come to a spike-and-slab), τ = ``bias_prior_var`` (0.0001 pins the bias near 0,
so smooth kernels must stand in for it) and η (the Dirichlet concentration) — fitted with the
default sampler on the same split, seed and run length for every cell.

Per (data set, prior) unit, with ``BM3KLClassifier(..., num_warmup=W, num_samples=S,
num_chains=4, calibration=None)`` on a stratified 70/30 split (seed 0):

* ``ess_min`` / ``rhat_max``: smallest bulk ESS and largest rank R-hat over every kernel weight and
  every held-in decision value (the default run-length rule's quantities), and the same over the
  kernel weights alone (``ess_w_min``, ``rhat_w_max``);
* ``ess_per_s``: ``ess_min`` per second of sampling (warm-up included, compilation excluded: the
  persistent compilation cache is on and each shape is compiled once before timing);
* ``ess_per_ksweep``: ``ess_min`` per 1,000 sweeps per chain — the machine-independent number;
* test accuracy, and log-loss of the raw rule and of a Platt/temperature map fitted on the
  training draws' PSIS-LOO (what ``calibration="loo"`` does), so the choice does not rest on
  accuracy alone.

Resumable: every finished unit is written to the JSON at once (atomically) with the package
commit and the load average; a restart skips finished units. Usage::

    OPENBLAS_NUM_THREADS=1 nohup .venv/bin/python benchmarks/prior_study.py \\
        --datasets breast,sonar --grid main &

Writes ``benchmarks/results/prior_study.json`` (``{"config", "units": {key: row}}``) and
``prior_study.md`` (one table per data set, best ESS per second first).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _store import ResumableResults  # noqa: E402

PAPER = {"gamma0": 100.0, "kappa": 1e-10, "beta_a": 0.1, "bias_prior_var": 1e-4, "eta": 1.0}


def grid(name: str) -> list[dict]:
    """The prior cells of a named grid (each a dict of BM3KLClassifier hyper-parameters)."""
    if name == "main":
        # one axis at a time around the best cell first (η = 2, γ0 = 1, κ = 1, β_a = 1, τ = 1),
        # then the full product γ0 × (κ, β_a) × η × τ; a restart resumes in this order
        best = {"gamma0": 1.0, "kappa": 1.0, "beta_a": 1.0, "bias_prior_var": 1.0, "eta": 2.0}
        axes = [("eta", (4.0, 8.0, 1.0)), ("gamma0", (0.5, 2.0, 5.0, 0.0, 10.0, 100.0)),
                ("kappa", (10.0, 100.0, 1e-2, 1e-10)), ("beta_a", (0.1, 3.0)),
                ("bias_prior_var", (1e-4, 100.0))]  # fmt: skip
        cells = [dict(best), dict(PAPER), {**PAPER, "bias_prior_var": 1.0}]
        cells += [{**best, k: v} for k, vals in axes for v in vals]
        cells += [
            {"gamma0": g, "kappa": k, "beta_a": b, "bias_prior_var": t, "eta": e}
            for t, e, g, (k, b) in itertools.product(
                (1.0, 1e-4),
                (2.0, 4.0, 1.0),
                (1.0, 0.0, 10.0, 100.0),
                ((1.0, 1.0), (1e-10, 0.1), (1e-2, 1.0)),
            )
        ]
        cells = list({key_of("", c): c for c in cells}.values())  # drop repeats, keep order
    elif name == "short":  # the shortlist run on every data set
        cells = [
            dict(PAPER),
            {"gamma0": 1.0, "kappa": 1.0, "beta_a": 1.0, "bias_prior_var": 1.0, "eta": 2.0},
            {"gamma0": 1.0, "kappa": 1.0, "beta_a": 1.0, "bias_prior_var": 1.0, "eta": 4.0},
            {"gamma0": 0.0, "kappa": 1.0, "beta_a": 1.0, "bias_prior_var": 1.0, "eta": 2.0},
        ]
    else:
        raise SystemExit(f"unknown grid {name!r}")
    return cells


def key_of(dataset: str, cell: dict) -> str:
    return dataset + " " + " ".join(f"{k}={cell[k]:g}" for k in sorted(cell))


def run_unit(dataset: str, cell: dict, args) -> dict:
    from sklearn.metrics import accuracy_score, log_loss
    from sklearn.model_selection import train_test_split

    from bayesmkl import BM3KLClassifier
    from bayesmkl.datasets import load_demo, load_uci
    from bayesmkl.inference.runlength import convergence_stats

    if dataset == "breast-sklearn":
        X, y, _ = load_demo()
    else:
        X, y = load_uci(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    clf = BM3KLClassifier(
        **cell, num_warmup=args.num_warmup, num_samples=args.num_samples, num_chains=4,
        calibration="loo", random_state=0, progress_bar=False,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        clf.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
    r = clf.run_report_
    rhat_w, ess_w, _, _ = convergence_stats({"w": clf.posterior_["w"]})
    cal = clf.calibrator_
    p_loo = clf.predict_proba(Xte)
    p_raw = clf.set_params(calibration=None).predict_proba(Xte)
    row = {
        "dataset": dataset,
        **cell,
        "n_train": len(ytr),
        "n_kernels": len(clf.kernel_names_),
        "sweeps": args.num_warmup + args.num_samples,
        "ess_min": r.ess_bulk_min,
        "rhat_max": r.rhat_max,
        "worst": r.worst,
        "ess_w_min": ess_w,
        "rhat_w_max": rhat_w,
        "sample_s": r.seconds - r.compile_seconds,
        "compile_s": r.compile_seconds,
        "fit_s": fit_s,
        "acc": accuracy_score(yte, clf.predict(Xte)),
        "logloss_raw": log_loss(yte, p_raw, labels=clf.classes_),
        "logloss_loo": log_loss(yte, p_loo, labels=clf.classes_),
        "khat_bad_frac": cal.khat_bad_frac,
    }
    row["ess_per_s"] = row["ess_min"] / row["sample_s"]
    row["ess_per_ksweep"] = 1000.0 * row["ess_min"] / row["sweeps"]
    return row


def markdown(results: dict) -> str:
    units = list(results["units"].values())
    cfg = results["config"]
    out = [
        "# Prior study (issue 21)",
        "",
        f"Default sampler, 4 chains, {cfg['num_warmup']} warm-up + {cfg['num_samples']} kept "
        "sweeps, stratified 70/30 split (seed 0), `calibration=None`. ESS and R-hat over every "
        "kernel weight and every held-in decision value (the run-length rule's quantities); "
        "`ESS/ks` is that minimum ESS per 1,000 sweeps (machine-independent), `ESS/s` per second "
        "of sampling (compilation excluded; load average in the JSON). Log-loss: raw rule, and the "
        "PSIS-LOO calibration map fitted on the same draws (no refit).",
        "",
    ]
    for ds in dict.fromkeys(u["dataset"] for u in units):
        rows = sorted((u for u in units if u["dataset"] == ds), key=lambda u: -u["ess_per_ksweep"])
        out += [f"## {ds} (N = {rows[0]['n_train']}, P = {rows[0]['n_kernels']})", ""]
        out += [
            "| γ0 | κ | β_a | τ | η | min ESS | max R-hat | ESS/ks | ESS/s | min ESS w | "
            "max R-hat w | acc | log-loss raw | log-loss LOO |",
            "|" + "---|" * 14,
        ]
        for u in rows:
            ll = u.get("logloss_loo")
            out.append(
                f"| {u['gamma0']:g} | {u['kappa']:g} | {u['beta_a']:g} | {u['bias_prior_var']:g} "
                f"| {u['eta']:g} | {u['ess_min']:.1f} | {u['rhat_max']:.3f} | "
                f"{u['ess_per_ksweep']:.1f} | {u['ess_per_s']:.2f} | {u['ess_w_min']:.1f} | "
                f"{u['rhat_w_max']:.3f} | {u['acc']:.3f} | {u['logloss_raw']:.3f} | "
                + ("–" if ll is None else f"{ll:.3f}")
                + " |"
            )
        out.append("")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="breast-sklearn")
    p.add_argument("--grid", default="main")
    p.add_argument("--num-warmup", type=int, default=300)
    p.add_argument("--num-samples", type=int, default=500)
    p.add_argument("--out", default=str(HERE / "results" / "prior_study"))
    p.add_argument("--max-units", type=int, default=None, help="stop after this many new units")
    args = p.parse_args(argv)

    from bayesmkl._fitting import enable_compilation_cache

    enable_compilation_cache()
    config = {"num_warmup": args.num_warmup, "num_samples": args.num_samples, "chains": 4}
    store = ResumableResults(Path(args.out + ".json"), config, markdown)
    new = 0
    for ds in args.datasets.split(","):
        for cell in grid(args.grid):
            key = key_of(ds, cell)
            if store.done(key):
                continue
            if args.max_units is not None and new >= args.max_units:
                return
            row = run_unit(ds, cell, args)
            store.add(key, row)
            new += 1
            print(f"{key}: ESS {row['ess_min']:.1f}, R-hat {row['rhat_max']:.3f}", flush=True)


if __name__ == "__main__":
    main()
