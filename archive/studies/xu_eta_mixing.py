"""Where does a budgeted sparse-η BM3KL fit fail to mix? One split of ``xu_table1.py``'s protocol.

``xu_eta.md`` found that BM3KL with η = 0.1 matches the sparse MKLs' accuracy on ionosphere's
455-kernel pool while none of its fits converged. This script refits one of those units (same
split, kernels, seed and estimator: ``xu_table1.py``'s ``SplitData`` and ``make_estimator``) and
splits the convergence verdict by quantity: R-hat and bulk ESS of the kernel weights w, of the
held-in and of the test decision values; how many weights miss R-hat 1.01 and 1.05; each chain's
test accuracy on its own; and whether the chains agree on which kernels carry the weight (the
overlap of each chain's top-20 kernels with chain 0's, the kernels above 1 % weight per chain).

Usage::

    python benchmarks/xu_eta_mixing.py --dataset ionosphere --split 0 --eta 0.1 --max-time 1200

Writes ``benchmarks/results/xu_eta_mixing.{json,md}`` (``--out`` changes the stem).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from _resume import git_commit, write_atomic  # noqa: E402
from arviz_stats.base import array_stats  # noqa: E402
from xu_table1 import FULL, SplitData, load, make_estimator  # noqa: E402

from bayesmkl.inference.runlength import convergence_stats  # noqa: E402
from bayesmkl.predict import draw_decision_values, draw_probabilities  # noqa: E402

TOP = 20


def chain_accuracy(proba, classes, y) -> float:
    """Test accuracy of the class with the largest mean probability over ``proba (S, M, K)``."""
    return float(np.mean(classes[np.argmax(proba.mean(axis=0), axis=-1)] == y))


def diagnose(est, Ktr, Kte, yte) -> dict:
    """The convergence verdict of a fitted ``BM3KLClassifier`` split by quantity."""
    w, a, b = (np.asarray(est.posterior_[k]) for k in ("w", "a", "b"))
    c, d, P = w.shape

    def per_chain(x):
        return x.reshape((c, d) + x.shape[1:])

    flat = [x.reshape((c * d,) + x.shape[2:]) for x in (w, a, b)]
    F = {"f_train": np.asarray(draw_decision_values(*flat, Ktr)),
         "f_test": np.asarray(draw_decision_values(*flat, Kte))}  # fmt: skip
    out = {}
    for name, x in {"w": w, **{k: per_chain(v) for k, v in F.items()}}.items():
        rhat, ess, worst, _ = convergence_stats({name: x})
        out[name] = dict(rhat_max=rhat, ess_bulk_min=ess, worst=worst)
    r_w = np.asarray(array_stats.rhat(np.moveaxis(w, -1, 0), chain_axis=-2, draw_axis=-1,
                                      method="rank"))  # fmt: skip
    proba = per_chain(np.asarray(draw_probabilities(F["f_test"], est.gamma0_)))
    mean_w = w.mean(axis=1)  # (chains, P)
    top = [set(np.argsort(-m)[:TOP].tolist()) for m in mean_w]
    names = np.asarray(est.kernel_names_)
    out.update(
        chains=c, draws=d, P=P,
        w_rhat_over_1_01=int(np.sum(r_w > 1.01)), w_rhat_over_1_05=int(np.sum(r_w > 1.05)),
        acc_per_chain=[chain_accuracy(p, est.classes_, yte) for p in proba],
        acc_all_chains=chain_accuracy(proba.reshape((c * d,) + proba.shape[2:]), est.classes_, yte),
        acc_predict=float(np.mean(est.predict(Kte) == yte)),
        top20_overlap_with_chain0=[len(top[0] & t) for t in top],
        kernels_over_1pct_per_chain=(mean_w > 0.01).sum(axis=1).tolist(),
        max_w_per_chain=mean_w.max(axis=1).tolist(),
        top3_per_chain=[names[np.argsort(-m)[:3]].tolist() for m in mean_w],
    )  # fmt: skip
    return out


def write_markdown(path: Path, r: dict) -> None:
    rep = r["run_report"]
    rows = [f"| {k} | {r[k]['rhat_max']:.3f} | {r[k]['ess_bulk_min']:.0f} | {r[k]['worst']} |"
            for k in ("w", "f_train", "f_test")]  # fmt: skip
    lines = [
        f"# Mixing of a sparse-η BM3KL fit: {r['dataset']} split {r['split']}, η = {r['eta']}",
        "",
        f"`benchmarks/xu_eta_mixing.py {' '.join(r['argv'])}` at commit {r['commit']}: "
        f"`xu_table1.py`'s unit `BM3KL eta={r['eta']} max_time={r['max_time']:g}` refitted. "
        f"The fit stopped by {rep['stopped_by']} after {rep['num_samples']} sweeps per chain "
        f"({rep['seconds']:.0f} s; 1-min load average {r['loadavg'][0]:.1f} at the end), "
        f"{r['chains']} chains, P = {r['P']} kernels.",
        "",
        "| quantity | max R-hat | min bulk ESS | worst |",
        "|---|---|---|---|",
        *rows,
        "",
        f"- Kernel weights with R-hat > 1.01: {r['w_rhat_over_1_01']} of {r['P']}; "
        f"> 1.05: {r['w_rhat_over_1_05']}.",
        f"- Test accuracy of each chain alone: {', '.join(f'{x:.4f}' for x in r['acc_per_chain'])}"
        f"; all chains: {r['acc_all_chains']:.4f} (`predict`: {r['acc_predict']:.4f}).",
        f"- Each chain's top {TOP} kernels shared with chain 0's: "
        f"{', '.join(map(str, r['top20_overlap_with_chain0']))}; kernels above 1 % weight per "
        f"chain: {', '.join(map(str, r['kernels_over_1pct_per_chain']))}; largest weight per "
        f"chain: {', '.join(f'{x:.3f}' for x in r['max_w_per_chain'])}.",
        "- Top 3 kernels per chain: "
        + "; ".join(", ".join(t) for t in r["top3_per_chain"]) + ".",
    ]  # fmt: skip
    write_atomic(path, "\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="ionosphere", help="a Table I set, or tiny")
    ap.add_argument("--split", type=int, default=0, help="split index (seed = split)")
    ap.add_argument("--eta", type=float, default=0.1)
    ap.add_argument("--max-time", type=float, default=1200.0, help="wall-time budget (s)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "xu_eta_mixing"))
    args = ap.parse_args(argv)
    X, y = load(args.dataset)
    Ktr, Kte, ytr, yte, _, _ = SplitData(X, y, args.split, FULL, seed=0).get()
    name = f"BM3KL eta={args.eta} max_time={args.max_time}"
    est = make_estimator(name, {}, Ktr.shape[0], {"split_seed": args.split})
    t0 = time.perf_counter()
    est.fit(Ktr, ytr)
    result = dict(
        argv=sys.argv[1:] if argv is None else list(argv), commit=git_commit(),
        dataset=args.dataset, split=args.split, eta=args.eta, max_time=args.max_time,
        fit_seconds=time.perf_counter() - t0, run_report=est.run_report_._asdict(),
        loadavg=list(os.getloadavg()), **diagnose(est, Ktr, Kte, yte),
    )  # fmt: skip
    out = Path(args.out)
    write_atomic(out.with_suffix(".json"), json.dumps(result, indent=1, default=float))
    write_markdown(out.with_suffix(".md"), result)
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
