"""Behaviour fixture: fixed seeds give the same draws and weights as the stored ones.

Refactors (issue 12) must not change what the package computes. This test fits, on tiny
synthetic data generated here from a fixed seed, ``BM3KLClassifier`` with each exact
kernel-weight move (``"collapsed"``, ``"gibbs"``, ``"exact"``; ``"gibbs"`` on three classes,
so the one-vs-all path is covered too) and two baselines (SimpleMKL's kernel weights, BEMKL's
variational means), plus the kernels of the two named pools, and compares them with
the stored fixture (``rtol=1e-10``; the sampler cases ``1e-5``, see below). Every fit is
unweighted, so the test also guards that adding sample weights to the sampler leaves
unweighted draws unchanged.

A failure means the numbers changed. If the change is intended (a new default, a fixed bug in a
conditional), regenerate the fixture in a separate commit that says why::

    OPENBLAS_NUM_THREADS=1 python tests/test_fixture_draws.py --regen

and never regenerate it to make a refactor pass. The runs are short (10 + 5 sweeps, one chain).

One fixture per OpenBLAS kernel architecture (``tests/fixtures/draws-<arch>.npz``, the
architecture that ``threadpoolctl`` reports for NumPy's OpenBLAS): the kernel matrices are
computed with BLAS, and a different kernel (``OPENBLAS_CORETYPE=Haswell`` against the
auto-detected ``SkylakeX`` on the same processor) changes their last bits, which a sampler's
accept/reject steps turn into different draws within 15 sweeps (measured: all four
sampler/baseline cases differ, the kernels agree to 1e-10). On an architecture without a
fixture the test fails and says how to add one: ``--regen`` writes the current
architecture's file, from a commit whose behaviour is the reference (the commit before the
change under test), never from the change itself.

The sampler cases are compared at ``SAMPLER_RTOL = 1e-5``, not ``1e-10``: XLA compiles the
sampler for the host's instruction set, and the ``"exact"`` move (dense mass matrix) rounds
differently on processors that share an OpenBLAS architecture. Measured with the SkylakeX
fixture on a host with AVX512-FP16 (Sapphire Rapids or later): ``"collapsed"`` and
``"gibbs_3class"`` were bit-identical, ``"exact"`` drifted by up to 2e-7 in ``w`` and 9e-7 in
``lam`` over its 15 sweeps. A behaviour change is far larger: moving ``gamma0`` by one part in
a million moved ``"exact"``'s ``w`` by 7.5e-5, one part in ten thousand by 4.4e-3, and a
changed random stream moves the draws by O(1). The baselines and pools (NumPy/SciPy only) stay
at ``1e-10``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RTOL = 1e-10
SAMPLER_RTOL = 1e-5  # XLA codegen drift (<= 9e-7 measured) vs behaviour changes (>= 7.5e-5)


def blas_architecture() -> str:
    """NumPy's OpenBLAS kernel architecture, lower case (``"haswell"``, ``"skylakex"``, …)."""
    import threadpoolctl

    # NumPy's own library, not whichever OpenBLAS happens to be listed first (SciPy ships
    # another, and other extensions loaded during a long test session may bring more).
    libs = [i for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
    mine = [i for i in libs if "numpy" in str(i.get("filepath", ""))] or libs
    if not mine:
        return "not-openblas"
    return str(mine[0].get("architecture") or "unknown").lower()


def fixture_path() -> Path:
    return FIXTURES / f"draws-{blas_architecture()}.npz"


#: What each case stores: posterior draws of these variables (all draws for the small ones,
#: the last draw for the (C, N) ones) and the predictive probabilities of the held-out rows.
_FULL = ("w", "e", "b")
_LAST = ("a", "lam", "nu", "varsigma")

#: case name -> (sampler, number of classes)
BM3KL_CASES = {
    "collapsed": ("collapsed", 2),
    "gibbs_3class": ("gibbs", 3),
    "exact": ("exact", 2),
}


def _data(n_classes: int):
    """Fixed tiny data set: 30 points in 3 dimensions, the first 24 for training."""
    rng = np.random.default_rng(20240612 + n_classes)
    X = rng.normal(size=(30, 3))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=30)
    if n_classes == 2:
        y = (score > 0).astype(int)
    else:
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    return X[:24], y[:24], X[24:]


def _bm3kl_case(sampler: str, n_classes: int) -> dict[str, np.ndarray]:
    from bayesmkl import BM3KLClassifier

    X, y, X_test = _data(n_classes)
    clf = BM3KLClassifier(
        prior="paper",  # the prior the fixture was recorded with (the default until issue 21)
        sampler=sampler,
        num_warmup=10,
        num_samples=5,
        num_chains=1,
        calibration=None,
        progress_bar=False,
        random_state=7,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs: divergence/convergence warnings
        clf.fit(X, y)
    out = {name: np.asarray(clf.posterior_[name]) for name in _FULL}
    out.update({name: np.asarray(clf.posterior_[name])[:, -1] for name in _LAST})
    out["potential_energy"] = np.asarray(clf.sample_stats_["potential_energy"])
    out["proba"] = clf.predict_proba(X_test)
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


def _case(name: str) -> dict[str, np.ndarray]:
    if name in BM3KL_CASES:
        return _bm3kl_case(*BM3KL_CASES[name])
    return {"baselines": _baselines_case, "pools": _pools_case}[name]()


CASES = (*BM3KL_CASES, "baselines", "pools")


def _stored(name: str) -> dict[str, np.ndarray]:
    path = fixture_path()
    if not path.exists():
        have = sorted(p.stem.removeprefix("draws-") for p in FIXTURES.glob("draws-*.npz"))
        pytest.fail(
            f"no behaviour fixture for OpenBLAS architecture {blas_architecture()!r} (have: "
            f"{have}); write one from the reference commit with "
            "'python tests/test_fixture_draws.py --regen' (see the module docstring)"
        )
    with np.load(path) as f:
        prefix = f"{name}/"
        return {k[len(prefix) :]: f[k] for k in f.files if k.startswith(prefix)}


@pytest.mark.parametrize("name", CASES)
def test_same_seed_same_numbers(name):
    stored = _stored(name)
    assert stored, f"fixture has no entries for case {name!r}; regenerate it (see docstring)"
    got = _case(name)
    assert sorted(got) == sorted(stored)
    rtol = SAMPLER_RTOL if name in BM3KL_CASES else RTOL
    for key, want in stored.items():
        np.testing.assert_allclose(
            got[key], want, rtol=rtol, atol=0, err_msg=f"{name}/{key} changed"
        )


def regenerate() -> None:
    arrays = {}
    for name in CASES:
        for key, value in _case(name).items():
            arrays[f"{name}/{key}"] = np.asarray(value)
    path = fixture_path()
    path.parent.mkdir(exist_ok=True)
    np.savez_compressed(path, **arrays)
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(arrays)} arrays)")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python tests/test_fixture_draws.py --regen")
    regenerate()
