"""Probabilities from the SVM-based baselines through scikit-learn's ``CalibratedClassifierCV``.

The SVM-based baselines have no ``predict_proba`` of their own (an SVM's decision value is not a
probability); the documented route (``bayesmkl.baselines`` module docstring) is Platt scaling by
``CalibratedClassifierCV``, which clones the estimator, refits it on folds and maps its
``decision_function`` (binary: ``(M,)``; one-vs-rest: ``(M, n_classes)``) to probabilities. This
checks that the composition works for every such baseline, binary and multiclass, with sample
weights, and that the probabilities carry the decision values' information. BM3KLMAP has a
``predict_proba`` (the raw rule's, near 0 or 1), and the same wrapper must improve on it.
"""

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import log_loss

from bayesmkl import baselines

SVM_BASED = (
    "AverageMKL", "BestSingleKernelSVM", "SimpleMKL", "LpMKL", "SoftMarginMKL", "SGMKL",
    "MLMKLSum", "MLMKLSA",  # with single-label y (CalibratedClassifierCV takes no indicator y)
)  # fmt: skip
CRAMMER_SINGER = ("M3K", "OBSCURE")  # joint multiclass margin; binary: f_1 − f_0


def _data(n_classes, n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    if n_classes == 2:
        y = (X[:, 0] + X[:, 1] ** 2 - 1.0 + 0.3 * rng.normal(size=n) > 0).astype(int)
    else:
        angle = np.arctan2(X[:, 1], X[:, 0]) + 0.3 * rng.normal(size=n)
        y = np.floor((angle + np.pi) / (2 * np.pi) * n_classes).astype(int) % n_classes
    return X[:100], y[:100], X[100:], y[100:]


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", SVM_BASED + CRAMMER_SINGER)
def test_platt_scaling_of_a_baseline_gives_informative_probabilities(name, n_classes):
    cls = getattr(baselines, name)
    assert not hasattr(cls, "predict_proba")  # else this route is not the documented one
    X, y, Xt, yt = _data(n_classes)
    est = cls(kernels="bsvm16")
    cal = CalibratedClassifierCV(est, method="sigmoid", cv=3).fit(X, y)
    P = cal.predict_proba(Xt)
    assert P.shape == (len(yt), n_classes)
    assert np.all(np.isfinite(P)) and np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    # Far better than the base rates (log-loss of the training class frequencies on the test
    # set; about 0.69 and 1.10 here): the map carries the decision values' information.
    freq = np.bincount(y, minlength=n_classes) / len(y)
    base = log_loss(yt, np.tile(freq, (len(yt), 1)), labels=np.arange(n_classes))
    assert log_loss(yt, P, labels=np.arange(n_classes)) < 0.75 * base
    # Each fold's estimator is a fitted clone of the baseline.
    assert all(type(c.estimator) is cls for c in cal.calibrated_classifiers_)


def test_platt_scaling_passes_sample_weights_to_the_baseline():
    X, y, Xt, _ = _data(2)
    w = np.ones(len(y))
    w[y == 1] = 1e-3  # class 1 nearly ignored: probabilities of class 1 must fall
    ref = CalibratedClassifierCV(baselines.AverageMKL(kernels="bsvm16"), cv=3).fit(X, y)
    weighted = CalibratedClassifierCV(baselines.AverageMKL(kernels="bsvm16"), cv=3)
    weighted.fit(X, y, sample_weight=w)
    assert weighted.predict_proba(Xt)[:, 1].mean() < 0.5 * ref.predict_proba(Xt)[:, 1].mean()


def test_platt_scaling_of_bm3klmap_beats_its_raw_rule():
    """BM3KLMAP's own probabilities at the paper's γ0 = 100 are the raw rule's, near 0 or 1; its
    docstring points to CalibratedClassifierCV, which must then do better on held-out log-loss."""
    from bayesmkl.model.classification import Hyper

    paper = Hyper.paper()._asdict()
    X, y, Xt, yt = _data(2)
    raw = baselines.BM3KLMAP(kernels="bsvm16", **paper).fit(X, y).predict_proba(Xt)
    cal = CalibratedClassifierCV(baselines.BM3KLMAP(kernels="bsvm16", **paper), cv=3).fit(X, y)
    assert log_loss(yt, cal.predict_proba(Xt)) < log_loss(yt, raw)
