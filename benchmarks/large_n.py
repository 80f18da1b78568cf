"""Large data sets: the landmark BM³KL against the classifiers users pick at this size.

On the shared UCI sets with thousands to tens of thousands of rows (spambase 4,597 × 57,
satimage 6,435 × 36 with 6 classes, penbased 10,992 × 16 with 10, magic 19,020 × 10, letter
20,000 × 16 with 26), one stratified 70/30 split (seed 0), each method fitted on the training
part and scored on the test part by accuracy, log-loss and top-label ECE (15 bins):

* ``BM3KL``: ``BM3KLClassifier(n_landmarks=LANDMARKS, max_time=MAX_TIME)`` (the default pool,
  prior and run length; ``--landmarks``, ``--max-time``);
* ``BM3KL exact``: the exact model (``n_landmarks=None``), only where its training set has at
  most ``--exact-max-n`` rows (its sweep costs C·N³ and its kernels P·N² entries), under the same
  budget;
* ``SVC``: ``StandardScaler + SVC(probability=True)`` with C and γ chosen by a 3-fold
  ``GridSearchCV`` (C ∈ 2^{-1,1,3,5,7}, γ ∈ 2^{-3,-1,1,3}/d) on a stratified subsample of at
  most ``--svc-tune-n`` training rows, then refitted on the whole training part (the grid on all
  rows would take hours with Platt scaling's internal cross-validation);
* ``GPC``: scikit-learn's ``GaussianProcessClassifier(1.0·RBF(1.0))`` (Laplace, one-vs-rest),
  only where the training part has at most ``--gpc-max-n`` rows (O(N³) per optimiser step);
* ``SVGP``: a sparse variational GP classifier (GPJax; Bernoulli likelihood, ``--svgp-inducing``
  inducing points from k-means++, RBF with one length scale per feature, ``--svgp-iters`` Adam
  steps) for binary sets, run by
  ``benchmarks/peers/svgp_gpjax.py`` in the interpreter ``--peers-python`` (a separate
  environment with GPJax: a benchmark-only peer, never a dependency of bayesmkl).

Each unit (data set × method) runs in its own process, which reports its own peak resident
memory; a method that is not run on a set gets a row saying why. Units are resumable
(:class:`_common.UnitStore`): a restart skips the finished ones. Writes
``results/large_n.{json,md}``: ``results[dataset][method]`` has ``acc``, ``logloss``, ``ece``,
``fit_s``, ``converged`` and ``peak_rss_gb``.

Run in the background; each unit may take up to ``--max-time`` seconds plus prediction::

    nohup python benchmarks/large_n.py > large_n.log 2>&1 &
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    RESULTS,
    UnitStore,
    add_merge_argument,
    classification_metrics,
    json_default,
    load_dataset,
    machine_info,
    md_table,
    write_atomic,
)

DATASETS = ("spambase", "satimage", "penbased", "magic", "letter")
METHODS = ("BM3KL", "BM3KL exact", "SVC", "GPC", "SVGP")
#: How the Markdown table prints each number.
FORMATS = {"acc": "{:.3f}", "logloss": "{:.3f}", "ece": "{:.3f}", "fit_s": "{:.0f}",
           "rhat_max": "{:.3f}", "ess_bulk_min": "{:.0f}", "peak_rss_gb": "{:.2f}"}  # fmt: skip
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "svgp_gpjax.py"


def split(dataset: str, seed: int):
    """The stratified 70/30 split of ``dataset`` (labels coded 0..K−1)."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    X, y = load_dataset(dataset)
    _, codes = np.unique(y, return_inverse=True)
    return train_test_split(X, codes, test_size=0.3, random_state=seed, stratify=codes)


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _skip(reason: str) -> dict:
    return {"skipped": reason}


def _bm3kl(args, Xtr, ytr, Xte, landmarks):
    from bayesmkl import BM3KLClassifier

    clf = BM3KLClassifier(random_state=args.seed, max_time=args.max_time, n_landmarks=landmarks)
    t0 = time.perf_counter()
    clf.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    proba = clf.predict_proba(Xte)
    r = clf.run_report_
    info = {
        "fit_s": fit_s,
        "predict_s": time.perf_counter() - t0,
        "converged": bool(r.converged),
        "stopped_by": r.stopped_by,
        "num_samples": int(r.num_samples),
        "rhat_max": float(r.rhat_max),
        "ess_bulk_min": float(r.ess_bulk_min),
        "n_landmarks": clf.n_landmarks_,
    }
    return proba, info


def _svc(args, Xtr, ytr, Xte):
    import numpy as np
    from sklearn.model_selection import GridSearchCV, train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    d = Xtr.shape[1]
    t0 = time.perf_counter()
    if len(ytr) > args.svc_tune_n:
        Xs, _, ys, _ = train_test_split(
            Xtr, ytr, train_size=args.svc_tune_n, random_state=args.seed, stratify=ytr
        )
    else:
        Xs, ys = Xtr, ytr
    grid = {
        "svc__C": [2.0**k for k in (-1, 1, 3, 5, 7)],
        "svc__gamma": [2.0**k / d for k in (-3, -1, 1, 3)],
    }
    search = GridSearchCV(make_pipeline(StandardScaler(), SVC()), grid, cv=3, n_jobs=1)
    search.fit(Xs, ys)
    best = {k.split("__")[1]: v for k, v in search.best_params_.items()}
    model = make_pipeline(StandardScaler(), SVC(probability=True, random_state=args.seed, **best))
    model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    proba = model.predict_proba(Xte)
    return np.asarray(proba), {"fit_s": fit_s, "converged": None, "best": best,
                               "tuned_on": int(len(ys))}  # fmt: skip


def _gpc(args, Xtr, ytr, Xte):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    t0 = time.perf_counter()
    model = make_pipeline(
        StandardScaler(),
        GaussianProcessClassifier(ConstantKernel(1.0) * RBF(1.0), random_state=args.seed),
    )
    model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    return model.predict_proba(Xte), {"fit_s": fit_s, "converged": None}


def _svgp(args, Xtr, ytr, Xte):
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        out = Path(tmp) / "out.json"
        np.savez(data, Xtr=Xtr, ytr=ytr, Xte=Xte)
        cmd = [args.peers_python, str(PEER_SCRIPT), str(data), str(out), str(args.seed),
               str(args.svgp_inducing), str(args.svgp_iters)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.max_time * 3)
        if proc.returncode != 0:
            raise RuntimeError(f"the GPJax peer failed: {proc.stderr[-2000:]}")
        res = json.loads(out.read_text())
    proba = np.asarray(res.pop("proba"))
    return proba, {**res, "converged": None, "peak_rss_gb_peer": res.get("peak_rss_gb")}


def run_unit(args, dataset: str, method: str) -> dict:
    """Fit and score one method on one data set in this process; the record of the unit."""
    import numpy as np

    Xtr, Xte, ytr, yte = split(dataset, args.seed)
    n, k = len(ytr), int(np.max(ytr)) + 1
    if method == "BM3KL exact" and n > args.exact_max_n:
        return _skip(f"the exact model's sweep costs C·N³ and its kernels P·N² entries: "
                     f"{n} training rows > --exact-max-n {args.exact_max_n}")  # fmt: skip
    if method == "GPC" and n > args.gpc_max_n:
        return _skip(f"Laplace GPC costs O(N³) per optimiser step and one problem per class: "
                     f"{n} training rows > --gpc-max-n {args.gpc_max_n}")  # fmt: skip
    if method == "SVGP" and k != 2:
        return _skip("the GPJax peer is written for binary sets (Bernoulli likelihood)")
    if method == "SVGP" and not Path(args.peers_python).exists():
        return _skip(f"no peer interpreter at {args.peers_python} (GPJax environment)")
    if method.startswith("BM3KL M="):
        landmarks = int(method.removeprefix("BM3KL M="))
        if landmarks >= n:
            return _skip(f"{landmarks} landmarks for {n} training rows: that is the exact model")
        method = "BM3KL"
    else:
        landmarks = args.landmarks
    fit = {
        "BM3KL": lambda: _bm3kl(args, Xtr, ytr, Xte, landmarks),
        "BM3KL exact": lambda: _bm3kl(args, Xtr, ytr, Xte, None),
        "SVC": lambda: _svc(args, Xtr, ytr, Xte),
        "GPC": lambda: _gpc(args, Xtr, ytr, Xte),
        "SVGP": lambda: _svgp(args, Xtr, ytr, Xte),
    }[method]
    proba, info = fit()
    rec = {**classification_metrics(proba, yte), **info}
    rec["peak_rss_gb"] = max(_peak_rss_gb(), rec.pop("peak_rss_gb_peer", None) or 0.0)
    rec.update(n_train=int(n), n_test=int(len(yte)), classes=k)
    return rec


def _landmarks_arg(text: str):
    return text if text == "auto" else int(text)


def _parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--landmarks", type=_landmarks_arg, default="auto",
                   help="n_landmarks of the BM3KL row: an int or 'auto'")  # fmt: skip
    p.add_argument("--max-time", type=float, default=600.0, help="budget (s) of each BM3KL fit")
    p.add_argument("--exact-max-n", type=int, default=1500)
    p.add_argument("--gpc-max-n", type=int, default=3500)
    p.add_argument("--svc-tune-n", type=int, default=2000)
    p.add_argument("--peers-python", default=os.environ.get(
        "BAYESMKL_PEERS_PYTHON", str(Path(__file__).resolve().parents[2] / "peers-venv" / "bin"
                                     / "python")))  # fmt: skip
    p.add_argument("--svgp-inducing", type=int, default=200)
    p.add_argument("--svgp-iters", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0, help="the split's seed (the first split's)")
    p.add_argument("--splits", type=int, default=1, help="splits, seeds SEED, SEED+1, ...")
    p.add_argument(
        "--m-study",
        metavar="DATASET",
        default=None,
        help="the accuracy-against-M study on DATASET (e.g. magic@2000): BM3KL with "
        "each of --m-values landmarks and the exact model, over --splits",
    )
    p.add_argument("--m-values", type=lambda t: [int(v) for v in t.split(",")],
                   default=[50, 100, 250, 500, 1000])  # fmt: skip
    p.add_argument("--unit-timeout", type=float, default=3600.0,
                   help="a unit's process is killed after this many seconds")  # fmt: skip
    p.add_argument("--fresh", action="store_true", help="ignore the units already in the file")
    p.add_argument("--summary-only", action="store_true",
                   help="write the tables of the finished units; run none")  # fmt: skip
    p.add_argument("--out", default=str(RESULTS / "large_n"), help="results path stem")
    add_merge_argument(p)
    p.add_argument("--unit", nargs=2, metavar=("DATASET", "METHOD"), help=argparse.SUPPRESS)
    return p


def _note(r: dict) -> str:
    """Why a row has no result, or why a BM3KL fit did not converge (where its budget ended)."""
    if r.get("skipped") or r.get("error"):
        return str(r.get("skipped") or r.get("error"))
    if r.get("converged") is False:
        n = r.get("num_samples")
        where = "in warm-up (no kept draws)" if n == 0 else f"after {n} draws per chain"
        return f"not converged: stopped by {r.get('stopped_by')} {where}"
    return ""


def write_markdown(store: UnitStore, results: dict, path: Path, summary=None) -> None:
    cols = ["data set", "method", "n_train", "acc", "logloss", "ece", "fit_s", "converged",
            "rhat_max", "ess_bulk_min", "peak_rss_gb", "note"]  # fmt: skip
    rows = []
    for ds, methods in results.items():
        for m, r in methods.items():
            note = _note(r).replace("|", "/")
            where = ds.replace(" | ", ", ")
            row = {c: r.get(c) for c in cols}
            rows.append({**row, "data set": where, "method": m, "note": note})
    lines = [
        "# large_n: BM³KL with landmarks against SVC, GP classifiers and the exact model",
        "",
        f"Machine: {machine_info()}",
        "",
        f"Configuration: {store.config}. One stratified 70/30 split; `fit_s` includes "
        "compilation and, for SVC, the grid search; `peak_rss_gb` is the unit's own process "
        "(and the GPJax peer's). Each unit records the load average when it ended in the JSON.",
        "",
        md_table(rows, cols, FORMATS),
        "",
    ]
    if summary:
        srows = [{"method": m, **r} for m, r in summary.items()]
        lines += [
            "## Log-loss against the number of landmarks",
            "",
            "Means over the splits; `logloss_minus_exact`: the paired difference to the exact "
            "fit of the same split, `se` its standard error.",
            "",
            md_table(
                srows,
                [
                    "method",
                    "splits",
                    "converged",
                    "acc",
                    "logloss",
                    "logloss_minus_exact",
                    "se",
                    "within_2se",
                    "fit_s",
                ],
                {**FORMATS, "logloss_minus_exact": "{:+.4f}", "se": "{:.4f}"},
            ),  # fmt: skip
        ]
    write_atomic(path, "\n".join(lines))


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.unit:
        rec = run_unit(args, *args.unit)
        print("UNIT " + json.dumps(rec, default=json_default), flush=True)
        return 0
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    config = {"seed": args.seed, "landmarks": args.landmarks, "max_time": args.max_time,
              "exact_max_n": args.exact_max_n, "gpc_max_n": args.gpc_max_n,
              "svc_tune_n": args.svc_tune_n, "svgp_inducing": args.svgp_inducing,
              "svgp_iters": args.svgp_iters}  # fmt: skip
    if args.m_study:
        datasets = [args.m_study]
        methods = [f"BM3KL M={m}" for m in args.m_values] + ["BM3KL exact"]
        config.update(m_study=args.m_study, m_values=args.m_values, splits=args.splits)
    out = Path(args.out)
    store = UnitStore(out.with_suffix(".json"), config, fresh=args.fresh, default=json_default)
    for other in args.merge:
        store.merge(other)
    passed = list(argv if argv is not None else sys.argv[1:])
    for seed in range(args.seed, args.seed + args.splits):
        for ds in datasets:
            for m in methods:
                one = args.splits == 1 and not args.m_study
                key = store.key(ds, m) if one else store.key(ds, f"split {seed}", m)
                if not store.done(key) and not args.summary_only:
                    store.add(key, _unit_in_a_process(args, ds, m, seed, passed))
    results: dict = {}
    for key, unit in store.units.items():
        *where, m = key.split(" | ")
        results.setdefault(" | ".join(where), {})[m] = unit["result"]
    summary = m_study_summary(store.units) if args.m_study else None
    store.save(results=results, machine=machine_info(), m_study=summary)
    write_markdown(store, results, out.with_suffix(".md"), summary)
    return 0


def _unit_in_a_process(args, ds: str, method: str, seed: int, passed: list) -> dict:
    """Run one unit in a fresh process (its own peak memory); its record or an error row."""
    try:
        load_dataset(ds)
    except FileNotFoundError as exc:
        return _skip(f"data set not found: {exc}")
    print(f"{time.strftime('%H:%M:%S')} {ds} / split {seed} / {method} ...", flush=True)
    cmd = [sys.executable, __file__, *passed, "--unit", ds, method, "--seed", str(seed)]
    if method == "BM3KL exact" and args.m_study:
        cmd += ["--exact-max-n", str(10**9)]  # the study's reference: always run
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.unit_timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"killed after --unit-timeout {args.unit_timeout:.0f} s"}
    line = [x for x in proc.stdout.splitlines() if x.startswith("UNIT ")]
    if proc.returncode != 0 or not line:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        rec = {"error": f"exit {proc.returncode}: {last[-1500:]}"}
    else:
        rec = json.loads(line[-1][5:])
    print(f"    {rec}", flush=True)
    return rec


def m_study_summary(units: dict) -> dict:
    """Per number of landmarks: mean log-loss, accuracy and fit seconds over the splits, and the
    paired log-loss difference to the exact fit of the same split with its standard error."""
    import numpy as np

    by_split: dict = {}
    for key, unit in units.items():
        _, split_, m = key.split(" | ")
        if "logloss" in unit["result"]:
            by_split.setdefault(split_, {})[m] = unit["result"]
    methods = sorted({m for s in by_split.values() for m in s}, key=_m_order)
    out = {}
    for m in methods:
        recs = [s[m] for s in by_split.values() if m in s]
        diffs = [s[m]["logloss"] - s["BM3KL exact"]["logloss"]
                 for s in by_split.values() if m in s and "BM3KL exact" in s]  # fmt: skip
        row = {k: float(np.mean([r[k] for r in recs])) for k in ("logloss", "acc", "fit_s")}
        row["splits"] = len(recs)
        row["converged"] = sum(bool(r.get("converged")) for r in recs)
        if len(diffs) >= 2:
            row["logloss_minus_exact"] = float(np.mean(diffs))
            row["se"] = float(np.std(diffs, ddof=1) / np.sqrt(len(diffs)))
            row["within_2se"] = bool(abs(row["logloss_minus_exact"]) <= 2 * row["se"])
        out[m] = row
    return out


def _m_order(method: str) -> float:
    return float(method.removeprefix("BM3KL M=")) if "M=" in method else float("inf")


if __name__ == "__main__":
    raise SystemExit(main())
