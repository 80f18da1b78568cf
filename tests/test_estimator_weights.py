"""BM3KLClassifier's class_weight parameter: validated with the baselines' shared helper.

The sampler does not use weights yet (the lead wires
:func:`bayesmkl._weights.effective_sample_weight` into it), so a valid non-None value is refused
rather than silently ignored.
"""

import numpy as np
import pytest
from sklearn.base import clone

from bayesmkl import BM3KLClassifier

X = np.random.default_rng(0).normal(size=(12, 2))
Y = np.r_[np.zeros(6, int), np.ones(6, int)]


def test_class_weight_is_a_parameter():
    clf = BM3KLClassifier(class_weight={0: 1.0, 1: 2.0})
    assert clone(clf).get_params()["class_weight"] == {0: 1.0, 1: 2.0}
    assert BM3KLClassifier().get_params()["class_weight"] is None


@pytest.mark.parametrize("bad", ["balance", ["a"], 3.0])
def test_class_weight_of_the_wrong_form_is_a_value_error(bad):
    with pytest.raises(ValueError, match="class_weight must be None, 'balanced' or a dict"):
        BM3KLClassifier(class_weight=bad, progress_bar=False).fit(X, Y)


@pytest.mark.parametrize("cw", ["balanced", {0: 1.0, 1: 3.0}])
def test_valid_class_weight_is_refused_until_the_sampler_uses_it(cw):
    with pytest.raises(NotImplementedError, match="not yet used by the sampler"):
        BM3KLClassifier(class_weight=cw, progress_bar=False).fit(X, Y)
