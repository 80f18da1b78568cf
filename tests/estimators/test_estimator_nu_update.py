"""``nu_update``: the estimator and the CLI hand the TPBN scale update to the sampler.

The update itself (exactness, the scan's bookkeeping) is tested in
tests/sampler/test_nu_collapsed.py; here only that the choice reaches
:class:`~bayesmkl.sampler.sampler.BM3KL`, is validated in the shared wording and takes part in
the warm-start check of chain parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

import bayesmkl.estimators.classifier as estimator_module
from bayesmkl import BM3KLClassifier
from bayesmkl.cli import _classifier, build_parser
from bayesmkl.sampler import BM3KL

SMALL = dict(
    num_chains=1, num_warmup=5, num_samples=5, calibration=None, progress_bar=False,
    random_state=0, sampler="gibbs",
)  # fmt: skip


def _data():
    return make_classification(n_samples=30, n_features=4, random_state=0)


def test_nu_update_reaches_the_sampler(monkeypatch):
    seen = []

    class Recorder(BM3KL):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("nu_update"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(estimator_module, "BM3KL", Recorder)
    X, y = _data()
    for choice in ("collapsed", "gibbs"):
        clf = BM3KLClassifier(nu_update=choice, **SMALL).fit(X, y)
        assert np.all(np.isfinite(clf.predict_proba(X)))
    assert seen == ["collapsed", "gibbs"]


def test_bad_nu_update_is_refused():
    X, y = _data()
    with pytest.raises(ValueError, match="nu_update"):
        BM3KLClassifier(nu_update="slice", **SMALL).fit(X, y)


def test_warm_start_refuses_a_changed_nu_update():
    X, y = _data()
    clf = BM3KLClassifier(warm_start=True, **SMALL).fit(X, y)
    clf.set_params(nu_update="collapsed")
    with pytest.raises(ValueError, match="nu_update"):
        clf.fit(X, y)


def test_cli_option():
    parser = build_parser()
    args = parser.parse_args(["fit", "data.csv", "--nu-update", "collapsed"])
    assert _classifier(args, "bsvm16").nu_update == "collapsed"
    assert parser.parse_args(["fit", "data.csv"]).nu_update == "gibbs"
