"""Multiclass (one-vs-all, shared kernel weights) and multi-view fits.

* wine (3 classes): scikit-learn's bundled copy always runs; the shared UCI ``wine.csv`` (same
  178 x 13 data) runs when present. SimpleMKL pool, 13 x 14 = 182 kernels.
* mfeat (10 classes, four views): shared data only; 300 training points and a reduced views pool
  (4 kernels per view) keep it fast.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split

from bayesmkl import BM3KLClassifier, KernelPool
from bayesmkl.estimators._fitting import validate_fit_input

# calibration=None: these tests check the sampler and the raw rule on 182 kernels; the calibrated
# multiclass path (three extra fits) is tested in test_calibration.py.
WINE = dict(
    kernels="simplemkl",
    num_warmup=60,
    num_samples=10,
    num_chains=1,
    calibration=None,
    random_state=0,
    progress_bar=False,
)


@pytest.mark.parametrize(
    "n_classes, options, centred",
    [
        (3, {}, True),
        (2, {}, False),
        (2, {"binary_mode": "ova"}, False),
        (3, {"prior": "paper"}, False),
        (3, {"kernels": "simplemkl"}, False),
        (3, {"kernels": KernelPool.bsvm16()}, False),
        (2, {"kernels": KernelPool.bsvm16(center=True)}, True),
    ],
)
def test_default_pool_is_centred_for_three_or_more_classes(n_classes, options, centred):
    """fit centres the named "bsvm16" pool for three or more classes under the default prior
    (mfeat's accuracy gap, ``_fitting.centres_pool``), and nothing else: two classes (either
    binary_mode), the paper's preset, the "simplemkl" pool and a user's pool keep their kernels."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = np.arange(30) % n_classes
    est = BM3KLClassifier(**options)
    kin, K, *_ = validate_fit_input(est, X, y)
    assert kin.pool.center is centred
    kernels = options.get("kernels", "bsvm16")
    if not isinstance(kernels, KernelPool):
        kernels = getattr(KernelPool, kernels)(center=centred)
    np.testing.assert_allclose(K, kernels.fit(X).train_kernels(), rtol=0, atol=1e-12)
    if centred:  # centring removed the constant mode of the widest Gaussian (σ = 64)
        plain = KernelPool.bsvm16().fit(X).train_kernels()[12]
        assert plain.min() > 0.99 and abs(K[12].mean()) < 0.05


def _split(X, y):
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def wine_fit():
    X, y = load_wine(return_X_y=True)
    Xtr, Xte, ytr, yte = _split(X, y)
    return BM3KLClassifier(**WINE).fit(Xtr, ytr), Xte, yte


def test_wine_accuracy_and_shapes(wine_fit):
    clf, Xte, yte = wine_fit
    assert len(clf.kernel_names_) == 182
    assert clf.posterior_["a"].shape == (1, 10, 3, 124)
    assert clf.posterior_["b"].shape == (1, 10, 3)
    P = clf.predict_proba(Xte)
    assert P.shape == (54, 3)
    assert np.max(np.abs(P.sum(axis=1) - 1.0)) <= 1e-12
    np.testing.assert_array_equal(clf.predict(Xte), clf.classes_[np.argmax(P, axis=1)])
    assert clf.decision_function(Xte).shape == (54, 3)
    acc = clf.score(Xte, yte)
    print(f"wine (bundled) simplemkl accuracy: {acc:.3f}")
    assert acc >= 0.85


def test_wine_proba_is_mean_softmax_psi(wine_fit):
    """Multiclass probabilities = mean over draws of softmax_c ψ(f_c), recomputed in numpy."""
    clf, Xte, _ = wine_fit
    F = clf.decision_draws(Xte)  # (S, M, C)
    s = np.sqrt(1.0 + 2.0 * clf.gamma0_)
    psi = 2.0 * F + 2.0 * s * np.clip(F, -1.0, 1.0)
    ex = np.exp(psi - psi.max(axis=-1, keepdims=True))
    ref = (ex / ex.sum(axis=-1, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(clf.predict_proba(Xte), ref, atol=1e-12)
    np.testing.assert_allclose(clf.decision_function(Xte), F.mean(axis=0), atol=1e-12)


def test_wine_datatree_class_coords(wine_fit):
    clf, _, _ = wine_fit
    tree = clf.to_datatree()
    assert tree["posterior"]["a"].coords["class"].values.tolist() == [0, 1, 2]
    assert tree["posterior"]["w"].sizes["kernel"] == 182


@pytest.mark.shared_data
def test_wine_shared_csv(uci_dir):
    from bayesmkl.datasets import load_uci

    X, y = load_uci("wine", data_dir=uci_dir)
    Xtr, Xte, ytr, yte = _split(X, y)
    acc = BM3KLClassifier(**WINE).fit(Xtr, ytr).score(Xte, yte)
    print(f"wine (shared csv) simplemkl accuracy: {acc:.3f}")
    assert acc >= 0.85


@pytest.mark.shared_data
@pytest.mark.slow
def test_mfeat_views(uci_dir):
    from bayesmkl.datasets import MFEAT_VIEWS, load_mfeat

    Xs, y = load_mfeat(data_dir=uci_dir)
    X = np.hstack(Xs)
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:50] for c in range(10)])
    idx = rng.permutation(idx)  # 500 points, 50 per class
    Xtr, Xte, ytr, yte = train_test_split(
        X[idx], y[idx], train_size=300, random_state=0, stratify=y[idx]
    )
    pool = KernelPool.views(
        [x.shape[1] for x in Xs],
        names=list(MFEAT_VIEWS),
        gauss_widths=(4.0, 16.0, 64.0),
        poly_degrees=(1,),
    )
    clf = BM3KLClassifier(
        kernels=pool,
        num_warmup=60,
        num_samples=10,
        num_chains=1,
        calibration=None,
        random_state=0,
        progress_bar=False,
    ).fit(Xtr, ytr)
    assert len(clf.kernel_names_) == 16
    assert {n.split("[")[1].rstrip("]") for n in clf.kernel_names_} == set(MFEAT_VIEWS)
    assert clf.posterior_["a"].shape == (1, 10, 10, 300)
    acc = clf.score(Xte, yte)
    by_view = {
        v: float(
            sum(
                w
                for n, w in zip(clf.kernel_names_, clf.kernel_weights_, strict=True)
                if n.endswith(f"[{v}]")
            )
        )
        for v in MFEAT_VIEWS
    }
    print(f"mfeat (300 train, 16 view kernels) accuracy: {acc:.3f}; weight per view: {by_view}")
    assert acc >= 0.85
    assert abs(sum(by_view.values()) - 1.0) < 1e-9
