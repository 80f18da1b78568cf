"""Degenerate posteriors at allowed settings (issue 46; ``../shared/repro/audit-turn4/``
``bias_prior_var_at_bound_silent.py`` and ``upper_corner_silent.py``).

The validated ranges of :mod:`bayesmkl.model.bounds` are where the model works, so the settings
of the reproducers are refused; and a fit whose posterior does not use the data says so with a
:class:`~bayesmkl.exceptions.DegeneratePosteriorWarning` that names the likely cause (checked by
fitting the reproducers with the range check switched off, and on constant kernels, which
pass every check of the inputs). Ordinary fits do not warn.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris

from bayesmkl import BM3KLClassifier, BM3KLRegressor
from bayesmkl.estimators import _constraints
from bayesmkl.exceptions import DegeneratePosteriorWarning
from bayesmkl.posterior.checks import DEGENERATE_LIMITS, degenerate_posterior

FAST = dict(num_warmup=50, num_samples=50, num_chains=2, progress_bar=False, random_state=0)
#: The upper corner of the box before issue 46 (upper_corner_silent.py).
OLD_CORNER = dict(eta=1e6, alpha_a=1e6, beta_a=1e6, kappa=1e10, bias_prior_var=1e20)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def bc40():
    """The reproducers' data: 20 + 20 rows of breast cancer."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), 20, replace=False) for c in (0, 1)])
    rng.shuffle(idx)
    return X[idx], y[idx]


def diabetes40():
    X, y = load_diabetes(return_X_y=True)
    return X[:40], y[:40]


@pytest.fixture
def unchecked_ranges(monkeypatch):
    """Fit with the hyper-parameter ranges switched off (the settings the reproducers used)."""
    monkeypatch.setattr(_constraints, "check_hyper", lambda name, value, label=None: value)


# --------------------------------------------------------------------------------------------
# (a) the ranges
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("est", [BM3KLClassifier, BM3KLRegressor])
def test_bias_prior_var_at_the_old_bound_is_refused(est):
    """bias_prior_var_at_bound_silent.py: τ = 1e20 was allowed and gave training accuracy 0.5
    (classifier) and a predictive mean of -2200 with sd 1.6e7 for targets in [25, 346]."""
    with pytest.raises(ValueError, match=r"^bias_prior_var must be a number in \[1e-100, "):
        est(bias_prior_var=1e20, **FAST).fit(*(bc40() if est is BM3KLClassifier else diabetes40()))


@pytest.mark.parametrize("est", [BM3KLClassifier, BM3KLRegressor])
def test_the_old_upper_corner_is_refused(est):
    """upper_corner_silent.py: every hyper-parameter at its old upper bound."""
    X, y = bc40() if est is BM3KLClassifier else diabetes40()
    with pytest.raises(ValueError, match=r"^(beta_a|bias_prior_var) must be a number in"):
        est(**OLD_CORNER, **FAST).fit(X, y)


# --------------------------------------------------------------------------------------------
# (b) the check after the fit
# --------------------------------------------------------------------------------------------


def test_bias_prior_var_1e20_posterior_is_detected(unchecked_ranges):
    """The reproducer's fits, had τ = 1e20 been allowed: both warn and name τ."""
    match = r"posterior is degenerate.*Likely cause: bias_prior_var=1e\+20 \(default 1\)"
    with pytest.warns(DegeneratePosteriorWarning, match=match):
        BM3KLClassifier(**FAST, calibration=None, bias_prior_var=1e20).fit(*bc40())
    with pytest.warns(DegeneratePosteriorWarning, match=match):
        BM3KLRegressor(**FAST, bias_prior_var=1e20).fit(*diabetes40())


@pytest.mark.parametrize(
    ("est", "extra"),
    [
        (BM3KLClassifier, dict(gamma0=1e8, nu_update="collapsed", calibration=None)),
        (BM3KLRegressor, dict(sampler="gibbs")),
    ],
)
def test_the_old_upper_corner_posterior_is_detected(unchecked_ranges, est, extra):
    """upper_corner_silent.py: p = (0.48, 0.52) for every training row (classifier), means
    500-4700 with sd 10,000-25,000 (regressor), and no warning but ConvergenceWarning."""
    X, y = bc40() if est is BM3KLClassifier else diabetes40()
    with pytest.warns(DegeneratePosteriorWarning, match=r"Likely cause: .*beta_a=1e\+06"):
        est(**OLD_CORNER, **extra, **FAST).fit(X, y)


@pytest.mark.parametrize("est", [BM3KLClassifier, BM3KLRegressor])
def test_constant_kernels_give_a_flat_posterior_that_warns(est):
    """Within every range: kernels that are the same for every pair of points carry no
    information, the function is the same at every training point, and the fit says so."""
    X, y = bc40() if est is BM3KLClassifier else diabetes40()
    K = np.ones((2, len(y), len(y)))
    with pytest.warns(DegeneratePosteriorWarning, match="(flat|shifts the whole function|as well)"):
        est(kernels="precomputed", **FAST).fit(K, y)


def test_degenerate_posterior_tells_each_kind_apart():
    rng = np.random.default_rng(0)
    margins = rng.choice([-1.5, 1.5], size=(1, 30, 1)) + 0.1 * rng.normal(size=(100, 30, 1))
    assert degenerate_posterior(margins) is None  # an ordinary classifier
    shifted = margins + 50 * rng.normal(size=(100, 1, 1))  # a bias that swamps the margins
    assert "shifts the whole function" in degenerate_posterior(shifted)
    flat = 1e-4 * rng.normal(size=(100, 30, 1))  # every sample weight shrunk to zero
    assert "flat" in degenerate_posterior(flat)
    assert degenerate_posterior(np.full((1, 30, 1), np.nan)) is None  # other checks handle these

    ys = rng.normal(size=30)
    ys = (ys - ys.mean()) / ys.std()
    fit = 0.8 * ys + 0.1 * rng.normal(size=(100, 30))
    assert degenerate_posterior(fit, ys) is None
    assert degenerate_posterior(fit) is None
    useless = 0.3 * rng.normal(size=(100, 1)) + 0.3 * rng.normal(size=(1, 30))  # not y at all
    assert "about as well as their mean" in degenerate_posterior(useless, ys)
    wide = fit + DEGENERATE_LIMITS["regression_sd"] * 3 * rng.normal(size=(100, 30))
    assert "posterior sd" in degenerate_posterior(wide, ys)


# --------------------------------------------------------------------------------------------
# ordinary fits
# --------------------------------------------------------------------------------------------


def _fit_without_warning(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegeneratePosteriorWarning)
        est.fit(X, y)


@pytest.mark.parametrize("prior", ["default", "paper"])
def test_ordinary_fits_do_not_warn(prior):
    """The sklearn data sets with both named priors: no DegeneratePosteriorWarning."""
    _fit_without_warning(BM3KLClassifier(prior=prior, calibration=None, **FAST), *bc40())
    X, y = load_iris(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))[:60]
    _fit_without_warning(BM3KLClassifier(prior=prior, calibration=None, **FAST), X[idx], y[idx])
    _fit_without_warning(BM3KLRegressor(prior=prior, **FAST), *diabetes40())


@pytest.mark.parametrize("name", ["heart", "sonar", "liver"])
def test_ordinary_fits_of_uci_sets_do_not_warn(uci_dir, name):
    from bayesmkl.datasets import load_uci

    X, y = load_uci(name, data_dir=uci_dir)
    idx = np.random.default_rng(0).permutation(len(y))[:80]
    _fit_without_warning(BM3KLClassifier(calibration=None, **FAST), X[idx], y[idx])
