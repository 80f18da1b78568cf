"""BM3KLClassifier's ``sample_weight`` (fit argument) and ``class_weight`` (parameter).

The weighted model itself (each conditional against the weighted joint, zero-weight points
carrying no information through every move) is tested in
tests/sampler/test_sample_weights.py; here the estimator's plumbing: class weights and sample
weights combine as in scikit-learn, reach the sampler and move predictions toward an up-weighted
class, and bad weights are refused before any sampling. That the calibration's fold fits get the
weights is tested in tests/posterior/test_calibration.py.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score

from bayesmkl import BM3KLClassifier, KernelPool
from bayesmkl.kernels import KernelSpec

X = np.random.default_rng(0).normal(size=(12, 2))
Y = np.r_[np.zeros(6, int), np.ones(6, int)]
POOL = KernelPool([KernelSpec("gauss", 1.0), KernelSpec("gauss", 3.0), KernelSpec("linear")])
SHORT = dict(kernels=POOL, num_warmup=60, num_samples=60, num_chains=1, calibration=None,
             progress_bar=False, random_state=0)  # fmt: skip


def test_class_weight_is_a_parameter():
    clf = BM3KLClassifier(class_weight={0: 1.0, 1: 2.0})
    assert clone(clf).get_params()["class_weight"] == {0: 1.0, 1: 2.0}
    assert BM3KLClassifier().get_params()["class_weight"] is None


@pytest.mark.parametrize("bad", ["balance", ["a"], 3.0])
def test_class_weight_of_the_wrong_form_is_a_value_error(bad):
    with pytest.raises(ValueError, match="class_weight must be None, 'balanced' or a dict"):
        BM3KLClassifier(class_weight=bad, progress_bar=False).fit(X, Y)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(sample_weight=np.r_[np.ones(11), -1.0]), "Negative"),
        (dict(sample_weight=np.ones(5)), "sample_weight.shape"),
        (dict(sample_weight=np.r_[np.ones(6), np.zeros(6)]), "zero"),
    ],
)
def test_bad_sample_weight_is_refused_before_sampling(kw, match):
    with pytest.raises(ValueError, match=match):
        BM3KLClassifier(progress_bar=False).fit(X, Y, **kw)


def test_class_weight_missing_a_class_is_refused():
    with pytest.raises(ValueError, match="no weight for the classes"):
        BM3KLClassifier(class_weight={0: 2.0}, progress_bar=False).fit(X, Y)


def _imbalanced(seed=0):
    """96 vs 4 training points of two overlapping Gaussian blobs; a balanced test set."""
    rng = np.random.default_rng(seed)

    def blobs(n0, n1):
        Xb = np.r_[rng.normal(size=(n0, 2)), rng.normal(size=(n1, 2)) + 1.2]
        return Xb, np.r_[np.zeros(n0, int), np.ones(n1, int)]

    return blobs(96, 4), blobs(300, 300)


@pytest.mark.slow
def test_balanced_class_weight_moves_predictions_toward_the_minority():
    """With 96 vs 4 points the unweighted posterior predicts the majority almost everywhere;
    class_weight='balanced' (minority weight 12.5) must raise the minority's predicted
    probability everywhere on average and the balanced accuracy (the issue's 4-vs-196 case).
    Same seed and sampler for both fits; the weights are the only difference."""
    (Xtr, ytr), (Xte, yte) = _imbalanced()
    res = {}
    for cw in (None, "balanced"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a short run: convergence is not the point here
            clf = BM3KLClassifier(class_weight=cw, **SHORT).fit(Xtr, ytr)
        p1 = clf.predict_proba(Xte)[:, 1].mean()
        res[cw] = (p1, balanced_accuracy_score(yte, clf.predict(Xte)))
    (p0, ba0), (p1, ba1) = res[None], res["balanced"]
    assert p1 > p0 + 0.05, res
    assert ba1 > ba0, res


@pytest.mark.slow
def test_class_weight_equals_the_same_sample_weight():
    """class_weight={0: 1, 1: 3} and sample_weight = 3 on class 1 are the same weights, so the
    same seed gives the same draws (that weights change the draws at all is shown by the
    imbalance test above)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = BM3KLClassifier(class_weight={0: 1.0, 1: 3.0}, **SHORT).fit(X, Y)
        b = BM3KLClassifier(**SHORT).fit(X, Y, sample_weight=np.where(Y == 1, 3.0, 1.0))
    for site in ("w", "a", "b"):
        np.testing.assert_array_equal(a.posterior_[site], b.posterior_[site])
