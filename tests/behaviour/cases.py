"""The behaviour cases: fixed-seed fits through the public API, written to one ``.npz``.

Run as a script by :mod:`tests.behaviour.test_reference_ab`, once with the package of the
reference commit first on ``sys.path`` and once with the package under test::

    PYTHONPATH=<package root> python tests/behaviour/cases.py OUT.npz [CASE ...]

It uses only the public API with every parameter that selects behaviour written out, so the
same script runs against the reference commit and against today's code. Each case stores every
posterior variable and sampler statistic (all draws), the predictions of held-out rows, and for
the baselines and pools the fitted weights and a few quadratic forms of the kernels.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

#: classifier cases: name -> (explicit parameters, number of classes)
CLASSIFIER_CASES = {
    # the paper's prior, each exact kernel-weight move; one-vs-all on three classes
    "paper_collapsed": (dict(prior="paper", sampler="collapsed", calibration=None), 2),
    "paper_gibbs_3class": (dict(prior="paper", sampler="gibbs", calibration=None), 3),
    "paper_exact": (dict(prior="paper", sampler="exact", calibration=None), 2),
    # what users run: the default prior, the collapsed log-scale move, LOO calibration
    "default_binary": (
        dict(prior="default", sampler="collapsed_log", calibration="loo", nu_update="gibbs"),
        2,
    ),
    "default_3class": (
        dict(prior="default", sampler="collapsed_log", calibration="loo", nu_update="gibbs"),
        3,
    ),
}

REGRESSOR_CASES = {
    "regressor_default": dict(prior="default", sampler="collapsed_log", epsilon="auto"),
}

CASES = (*CLASSIFIER_CASES, *REGRESSOR_CASES, "baselines", "pools")

#: a short run: enough sweeps for every step (warm-up adaptation, LOO weights) to act
RUN = dict(num_warmup=20, num_samples=10, num_chains=2, random_state=7, progress_bar=False)


def _data(n_classes: int):
    """Fixed tiny data set: 30 points in 3 dimensions, the first 24 for training."""
    rng = np.random.default_rng(20240612 + n_classes)
    X = rng.normal(size=(30, 3))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=30)
    if n_classes == 0:  # regression targets
        y = 3.0 * score + 10.0
    elif n_classes == 2:
        y = (score > 0).astype(int)
    else:
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    return X[:24], y[:24], X[24:]


def _draws(est) -> dict[str, np.ndarray]:
    out = {f"posterior/{k}": np.asarray(v) for k, v in est.posterior_.items()}
    out.update({f"sample_stats/{k}": np.asarray(v) for k, v in est.sample_stats_.items()})
    return out


def _classifier_case(params: dict, n_classes: int) -> dict[str, np.ndarray]:
    from bayesmkl import BM3KLClassifier

    X, y, X_test = _data(n_classes)
    clf = BM3KLClassifier(kernels="bsvm16", **params, **RUN).fit(X, y)
    out = _draws(clf)
    out["proba"] = clf.predict_proba(X_test)
    out["decision"] = clf.decision_function(X_test)
    return out


def _regressor_case(params: dict) -> dict[str, np.ndarray]:
    from bayesmkl import BM3KLRegressor

    X, y, X_test = _data(0)
    reg = BM3KLRegressor(kernels="bsvm16", **params, **RUN).fit(X, y)
    out = _draws(reg)
    mean, sd = reg.predict(X_test, return_std=True)
    out["mean"], out["sd"] = mean, sd
    out["interval"] = reg.predict_interval(X_test, coverage=0.9)
    return out


def _baselines_case() -> dict[str, np.ndarray]:
    from bayesmkl.baselines import BEMKL, SimpleMKL

    X, y, X_test = _data(2)
    simple = SimpleMKL(kernels="bsvm16").fit(X, y)
    bemkl = BEMKL(kernels="bsvm16", n_iter=20, random_state=0).fit(X, y)
    return {
        "simplemkl_weights": simple.kernel_weights_,
        "simplemkl_decision": simple.decision_function(X_test),
        "bemkl_weights": bemkl.kernel_weights_,
        "bemkl_proba": bemkl.predict_proba(X_test),
    }


def _pools_case() -> dict[str, np.ndarray]:
    """Two quadratic forms per training and cross kernel (a few numbers, not the Grams)."""
    from bayesmkl import KernelPool

    X, _, X_test = _data(2)
    v = np.random.default_rng(5).normal(size=(2, len(X)))
    u = np.random.default_rng(6).normal(size=(2, len(X_test)))
    out = {}
    for name, pool in (
        ("bsvm16", KernelPool.bsvm16()),
        ("simplemkl_centered", KernelPool.simplemkl(center=True)),
    ):
        pool.fit(X)
        out[f"{name}_train"] = np.einsum("ri,pij,rj->pr", v, pool.train_kernels(), v)
        out[f"{name}_cross"] = np.einsum("ri,pij,rj->pr", u, pool.cross_kernels(X_test), v)
    return out


def run_case(name: str) -> dict[str, np.ndarray]:
    """The arrays of one case, keyed by name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs: convergence and divergence warnings
        if name in CLASSIFIER_CASES:
            return _classifier_case(*CLASSIFIER_CASES[name])
        if name in REGRESSOR_CASES:
            return _regressor_case(REGRESSOR_CASES[name])
        return {"baselines": _baselines_case, "pools": _pools_case}[name]()


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python cases.py OUT.npz [CASE ...]")
    out, names = argv[0], argv[1:] or list(CASES)
    arrays = {}
    for name in names:
        for key, value in run_case(name).items():
            arrays[f"{name}/{key}"] = np.asarray(value)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1:])
