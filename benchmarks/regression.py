"""Benchmark: BM3KLRegressor's predictive distributions against tuned baselines (issue 24).

Data (every method sees the same ``--splits`` random 70/30 splits, ``ShuffleSplit`` seed 0):

* ``diabetes``: scikit-learn's bundled diabetes data (442 × 10);
* ``california``: California housing (scikit-learn's features and target, in $100k),
  subsampled to ``--california-rows`` rows (default 700, seed 0). Read from scikit-learn's
  cache (``fetch_california_housing(download_if_missing=False)``) or, where that is absent, from
  the original StatLib CSV in the layout of Géron's ``housing.csv`` (``$BAYESMKL_CALIFORNIA`` or
  ``~/scikit_learn_data/housing.csv``; the 207 rows without ``total_bedrooms`` dropped, the
  features derived as scikit-learn derives them); the JSON records which source was used;
* ``liver``: the shared UCI BUPA liver-disorders file (``../shared/data/uci/liver.csv``) with its
  proper regression target, the number of half-pint drinks (column 6), on the five blood tests
  (McDermott & Forsyth 2016, "Diagnosing a disorder in a classification benchmark"; the 7th,
  "selector" column is not used).

Methods (features standardised with the training split for every method):

* ``BM3KL``: the default ``BM3KLRegressor`` (16-kernel pool, learnt c and ε, 4 chains, the
  data-driven run length); whether each fit reached its R-hat/ESS targets is kept;
* ``SVR``: ``GridSearchCV(SVR)`` over C ∈ 2^{-3,-1,…,9}, γ ∈ 2^{-11,-9,…,1}, ε ∈ {0.05, 0.1,
  0.2, 0.5} (standardised y), 5-fold, squared error;
* ``KRR``: ``GridSearchCV(KernelRidge(rbf))`` over α ∈ 10^{-3…1}, γ ∈ 2^{-11,-9,…,1};
* ``GPR``: ``GaussianProcessRegressor(C·RBF + WhiteKernel, normalize_y=True)``, 2 restarts;
* ``MKR``: himalaya's ``MultipleKernelRidgeCV`` on the same 16 kernels as BM3KL (random search,
  ``--mkr-iter`` kernel-weight candidates), fitted only when ``import himalaya`` works (it is
  never a dependency of the package; ``pip install --target DIR himalaya`` and
  ``PYTHONPATH=DIR``); its units already in the file are summarised either way, as are those
  of a data set that cannot be read here.

SVR, KRR and MKR give point predictions only. Their predictive distribution here is a Gaussian
centred at the prediction with the variance of the out-of-fold residuals of their own 5-fold
cross-validation (the grid search's best mean squared error; for MKR a 5-fold refit), so lpd,
coverage and CRPS are those of that plug-in Gaussian.

Metrics on the test split: ``rmse``; ``lpd``, the mean log predictive density (BM3KL: the
mixture over draws, :meth:`BM3KLRegressor.log_predictive_density`; GPR: its Gaussian);
``coverage90``, the share of test targets inside the central 90% predictive interval;
``crps`` (BM3KL: from one predictive draw per posterior draw, E|Y − y| − ½E|Y − Y'|; Gaussians:
closed form); ``fit_s``.

Usage::

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/regression.py [--datasets diabetes]
        [--methods BM3KL,GPR] [--splits 5] [--quick] [--fresh]

Writes ``benchmarks/results/regression.json`` (``datasets``: data set → method → means over
splits and SDs; ``per_split``: the per-unit rows; configuration, machine) and
``regression.md``. Resumable (``benchmarks/_common.py``): each finished data set × split ×
method is written at once with the package commit and the load average, and a restart skips it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import UnitStore, write_atomic  # noqa: E402

DATASETS = ("diabetes", "california", "liver")
METHODS = ("BM3KL", "SVR", "KRR", "GPR", "MKR")
METRICS = ("rmse", "lpd", "coverage90", "crps", "fit_s")
Z90 = 1.6448536269514722


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------


def _california_csv(path: Path):
    """scikit-learn's 8 features and target from the StatLib CSV in Géron's layout."""
    import csv

    rows = []
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        next(reader)
        for r in reader:
            if len(r) == 10 and r[4] != "":
                rows.append([float(v) for v in r[:9]])
    a = np.array(rows)
    lon, lat, age, rooms, beds, pop, hh, inc, value = a.T
    X = np.column_stack([inc, age, rooms / hh, beds / hh, pop, pop / hh, lat, lon])
    return X, value / 1e5


def load(name: str, args):
    """``(X, y, source)`` of a data set."""
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        return X, y, "sklearn.datasets.load_diabetes"
    if name == "california":
        try:
            from sklearn.datasets import fetch_california_housing

            X, y = fetch_california_housing(download_if_missing=False, return_X_y=True)
            source = "sklearn.datasets.fetch_california_housing (cache)"
        except OSError:
            env = os.environ.get("BAYESMKL_CALIFORNIA")
            path = Path(env) if env else Path.home() / "scikit_learn_data" / "housing.csv"
            if not path.is_file():
                raise FileNotFoundError(
                    "California housing not found: no scikit-learn cache and no CSV at "
                    f"{path} (set $BAYESMKL_CALIFORNIA)"
                ) from None
            X, y = _california_csv(path)
            source = f"StatLib CSV {path.name} ({len(y)} complete rows)"
        idx = np.random.default_rng(0).permutation(len(y))[: args.california_rows]
        return X[idx], y[idx], source + f", {len(idx)} rows drawn with seed 0"
    if name == "liver":
        from bayesmkl.datasets import find_uci_dir

        d = find_uci_dir()
        if d is None:
            raise FileNotFoundError("shared UCI data not found (../shared/data/uci)")
        a = np.loadtxt(Path(d) / "liver.csv", delimiter=",")
        return a[:, :5], a[:, 5], "shared UCI liver.csv: columns 1-5 -> drinks (column 6)"
    raise ValueError(name)


# ------------------------------------------------------------------------------------------
# metrics
# ------------------------------------------------------------------------------------------


def gaussian_metrics(y, mean, sd) -> dict:
    from scipy.stats import norm

    z = (y - mean) / sd
    crps = sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    return {
        "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
        "lpd": float(np.mean(norm.logpdf(y, mean, sd))),
        "coverage90": float(np.mean(np.abs(z) <= Z90)),
        "crps": float(np.mean(crps)),
    }


def sample_crps(draws, y) -> float:
    """Mean over points of E|Y − y| − ½ E|Y − Y'| from draws ``(S, M)`` (sorted-sample form)."""
    S = draws.shape[0]
    xs = np.sort(draws, axis=0)
    term1 = np.mean(np.abs(draws - y[None, :]), axis=0)
    k = np.arange(1, S + 1)[:, None]
    term2 = np.sum((2 * k - S - 1) * xs, axis=0) / S**2  # = ½ E|Y − Y'|
    return float(np.mean(term1 - term2))


# ------------------------------------------------------------------------------------------
# methods
# ------------------------------------------------------------------------------------------


def fit_bm3kl(Xtr, ytr, Xte, yte, seed, args):
    from bayesmkl import BM3KLRegressor

    params = {"random_state": seed, "progress_bar": False}
    if args.max_time is not None:
        params["max_time"] = args.max_time
    reg = BM3KLRegressor(**params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    mean = reg.predict(Xte)
    iv = reg.predict_interval(Xte, 0.9)
    row = {
        "rmse": float(np.sqrt(np.mean((yte - mean) ** 2))),
        "lpd": float(np.mean(reg.log_predictive_density(Xte, yte))),
        "coverage90": float(np.mean((yte >= iv[:, 0]) & (yte <= iv[:, 1]))),
        "crps": sample_crps(reg.sample_predictive(Xte, random_state=seed), yte),
        "fit_s": fit_s,
    }
    r = reg.run_report_
    info = {"converged": bool(r.converged), "stopped_by": r.stopped_by,
            "rhat_max": float(r.rhat_max), "ess_bulk_min": float(r.ess_bulk_min),
            "worst": r.worst, "num_samples": int(r.num_samples),
            "epsilon": reg.epsilon_, "noise_sd": reg.noise_sd_, "kappa": reg.kappa_,
            "kernel_weights": reg.kernel_weights_.round(4).tolist()}  # fmt: skip
    return row, info


def fit_baseline(name, Xtr, ytr, Xte, yte, seed, args):
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVR

    cv = KFold(5, shuffle=True, random_state=seed)
    gammas = 2.0 ** np.arange(-11, 2, 2)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "GPR":
            kernel = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
            model = make_pipeline(StandardScaler(), GaussianProcessRegressor(
                kernel, normalize_y=True, n_restarts_optimizer=2, random_state=seed))  # fmt: skip
            model.fit(Xtr, ytr)
            fit_s = time.perf_counter() - t0
            mean, sd = model.predict(Xte, return_std=True)
            return {**gaussian_metrics(yte, mean, sd), "fit_s": fit_s}, {
                "kernel": str(model[-1].kernel_)
            }
        if name == "MKR":
            return fit_mkr(Xtr, ytr, Xte, yte, seed, args)
        if name == "SVR":
            est = make_pipeline(StandardScaler(), SVR())
            grid = {"svr__C": 2.0 ** np.arange(-3, 10, 2), "svr__gamma": gammas,
                    "svr__epsilon": [0.05, 0.1, 0.2, 0.5]}  # fmt: skip
        elif name == "KRR":
            est = make_pipeline(StandardScaler(), KernelRidge(kernel="rbf"))
            grid = {"kernelridge__alpha": 10.0 ** np.arange(-3, 2), "kernelridge__gamma": gammas}
        else:  # pragma: no cover
            raise ValueError(name)
        grid = {f"regressor__{k}": v for k, v in grid.items()}
        model = GridSearchCV(
            TransformedTargetRegressor(est, transformer=StandardScaler()), grid, cv=cv,
            scoring="neg_mean_squared_error", n_jobs=1,
        )  # fmt: skip
        model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    sd = np.sqrt(-model.best_score_)  # out-of-fold residual sd of the chosen configuration
    mean = model.predict(Xte)
    return {**gaussian_metrics(yte, mean, np.full_like(mean, sd)), "fit_s": fit_s}, {
        "best_params": {k.split("__")[-1]: float(v) for k, v in model.best_params_.items()},
        "cv_residual_sd": float(sd),
    }


def fit_mkr(Xtr, ytr, Xte, yte, seed, args):
    """himalaya's MultipleKernelRidgeCV on the BM3KL pool; Gaussian with 5-fold residual sd."""
    from himalaya.kernel_ridge import MultipleKernelRidgeCV
    from sklearn.model_selection import KFold

    from bayesmkl import KernelPool

    def fit_predict(Xa, ya, Xb):
        pool = KernelPool.bsvm16().fit(Xa)
        m, s = ya.mean(), ya.std()
        model = MultipleKernelRidgeCV(
            kernels="precomputed", solver="random_search",
            solver_params={"n_iter": args.mkr_iter, "alphas": np.logspace(-4, 3, 15),
                           "progress_bar": False},
            cv=5, random_state=seed,
        )  # fmt: skip
        model.fit(pool.train_kernels(), (ya - m) / s)
        return m + s * np.asarray(model.predict(pool.cross_kernels(Xb))).ravel()

    t0 = time.perf_counter()
    mean = fit_predict(Xtr, ytr, Xte)
    oof = np.empty_like(ytr)
    for a, b in KFold(5, shuffle=True, random_state=seed).split(Xtr):
        oof[b] = fit_predict(Xtr[a], ytr[a], Xtr[b])
    fit_s = time.perf_counter() - t0
    sd = float(np.sqrt(np.mean((oof - ytr) ** 2)))
    return {**gaussian_metrics(yte, mean, np.full_like(mean, sd)), "fit_s": fit_s}, {
        "cv_residual_sd": sd
    }


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------


def summarise(per: dict) -> dict:
    out = {}
    for method, rows in per.items():
        d = {}
        for m in METRICS:
            v = np.array([r[m] for r in rows], dtype=float)
            d[m] = float(v.mean())
            d[m + "_sd"] = float(v.std(ddof=1)) if len(v) > 1 else 0.0
        d["n_splits"] = len(rows)
        out[method] = d
    return out


def target(summary: dict) -> dict:
    """Issue 24's done-when for one set: BM3KL's 90% coverage within 5 points of nominal and its
    lpd at least GPR's."""
    bm, gp = summary.get("BM3KL"), summary.get("GPR")
    if bm is None:
        return {}
    out = {"coverage_within_5pts": abs(bm["coverage90"] - 0.9) <= 0.05}
    if gp is not None:
        out["lpd_ge_gpr"] = bm["lpd"] >= gp["lpd"]
    return out


def write_markdown(result: dict, path: Path) -> None:
    cfg = result["config"]
    lines = [
        "# Regression benchmark (issue 24)",
        "",
        f"{cfg['splits']} random 70/30 splits per set (`ShuffleSplit`, seed 0); BM3KL: the "
        "default `BM3KLRegressor`"
        + (f" with `max_time={cfg['max_time']}`" if cfg.get("max_time") else "")
        + ". Means over the splits finished so far (± SD; n = splits). SVR, KRR and MKR "
        "predict points only: their lpd, coverage and CRPS are those of a Gaussian with the "
        "variance of their own 5-fold out-of-fold residuals (see `benchmarks/regression.py`).",
        "",
        "Data: " + "; ".join(f"{k}: {v}" for k, v in result["sources"].items()) + ".",
        "",
        f"Machine: {result['machine']['cpu_count']} CPUs, shared with other jobs; load average "
        f"at the end {result['machine'].get('loadavg_1_5_15')}.",
        "",
    ]
    for metric, fmt, better in (("rmse", ".4g", "lower"), ("lpd", ".3f", "higher"),
                                ("coverage90", ".3f", "0.9"), ("crps", ".4g", "lower"),
                                ("fit_s", ".1f", "lower")):  # fmt: skip
        methods = [m for m in METHODS if any(m in s for s in result["datasets"].values())]
        header = "| data set | " + " | ".join(methods) + " |"
        lines += [
            f"## {metric} ({better} is better)",
            "",
            header,
            "|---" * (len(methods) + 1) + "|",
        ]
        for ds, summ in result["datasets"].items():
            cells = []
            for m in methods:
                if m not in summ:
                    cells.append("–")
                    continue
                s_m = summ[m]
                cells.append(
                    f"{s_m[metric]:{fmt}} ± {s_m[metric + '_sd']:{fmt}} (n={s_m['n_splits']})"
                )
            lines.append(f"| {ds} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Issue 24 target", "",
              "| data set | BM3KL coverage90 within 5 pts | BM3KL lpd ≥ GPR | BM3KL converged |",
              "|---|---|---|---|"]  # fmt: skip
    for ds, t in result["target"].items():
        infos = result["bm3kl_info"].get(ds, [])
        conv = f"{sum(i['converged'] for i in infos)}/{len(infos)}" if infos else "–"
        lines.append(f"| {ds} | {t.get('coverage_within_5pts', '–')} | "
                     f"{t.get('lpd_ge_gpr', '–')} | {conv} |")  # fmt: skip
    write_atomic(path, "\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--california-rows", type=int, default=700)
    p.add_argument("--max-time", type=float, default=None, help="BM3KL's max_time (default none)")
    p.add_argument("--mkr-iter", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="diabetes, 2 splits, BM3KL max_time 60")
    p.add_argument("--fresh", action="store_true", help="ignore the units already in the file")
    p.add_argument("--out", default=None, help="results path stem (default results/regression)")
    args = p.parse_args(argv)
    datasets = [d for d in args.datasets.split(",") if d]
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS)) + sorted(set(datasets) - set(DATASETS))
    if unknown:
        p.error(f"unknown method(s) or data set(s) {unknown}")
    stem = "regression"
    if args.quick:
        datasets, args.splits, args.max_time, stem = ["diabetes"], 2, 60.0, "regression_quick"
    runnable = list(methods)  # the methods whose missing units this run fits
    if "MKR" in methods:
        try:
            import himalaya  # noqa: F401
        except ImportError:
            print("himalaya is not installed: no new MKR unit (those already done are kept)")
            runnable.remove("MKR")

    import jax
    from sklearn.model_selection import ShuffleSplit

    from bayesmkl.estimators._fitting import enable_compilation_cache

    enable_compilation_cache()
    out = Path(args.out) if args.out else RESULTS / stem
    unit_keys = ("splits", "california_rows", "max_time", "mkr_iter")
    store = UnitStore(out.with_suffix(".json"), {k: getattr(args, k) for k in unit_keys},
                      fresh=args.fresh)  # fmt: skip
    result = {
        "config": {**vars(args), "methods": methods, "datasets": datasets, "split_seed": 0},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "sources": {}, "datasets": {}, "per_split": {}, "target": {}, "bm3kl_info": {},
    }  # fmt: skip
    path = out.with_suffix(".json")
    earlier_sources = json.loads(path.read_text()).get("sources", {}) if path.is_file() else {}
    for ds in datasets:
        try:
            X, y, source = load(ds, args)
        except FileNotFoundError as exc:  # its finished units are still summarised
            print(f"{ds}: {exc}; no new unit of it, those already done are kept")
            X, source = None, earlier_sources.get(ds)
        if source is not None:
            result["sources"][ds] = source
        splits = [None] * args.splits
        if X is not None:
            splits = list(ShuffleSplit(args.splits, test_size=0.3, random_state=0).split(X))
        per, infos = {}, []
        for k, split in enumerate(splits):
            for m in methods:
                key = store.key(ds, f"split {k}", m)
                if not store.done(key) and (m not in runnable or split is None):
                    continue
                if not store.done(key):
                    fit = fit_bm3kl if m == "BM3KL" else (
                        lambda *a, m=m: fit_baseline(m, *a))  # fmt: skip
                    tr, te = split
                    row, info = fit(X[tr], y[tr], X[te], y[te], k, args)
                    store.add(key, {"row": row, "info": info})
                    print(f"{ds} split {k} {m}: " + ", ".join(
                        f"{n} {row[n]:.4g}" for n in METRICS), flush=True)  # fmt: skip
                    if m == "BM3KL":
                        jax.clear_caches()
                        gc.collect()
                unit = store.result(key)
                per.setdefault(m, []).append(unit["row"])
                if m == "BM3KL":
                    infos.append(unit["info"])
            if not per:
                continue
            # partial summaries after every split, so the files show the progress
            summ = summarise(per)
            result["datasets"][ds] = summ
            result["per_split"][ds] = per
            result["target"][ds] = target(summ)
            result["bm3kl_info"][ds] = infos
            result["machine"]["loadavg_1_5_15"] = list(os.getloadavg())
            store.save(**result)
            write_markdown(result, out.with_suffix(".md"))
    print(out.with_suffix(".md").read_text() if out.with_suffix(".md").exists() else "no results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
