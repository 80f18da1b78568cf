"""Defaults agree at every layer: ``Hyper()``, ``BM3KL()`` and ``BM3KLReg()`` sample what the
estimators sample by default; the paper's values are the named preset ``Hyper.paper()``."""

from bayesmkl import BM3KLClassifier, BM3KLRegressor
from bayesmkl.model.classification import PRIORS, Hyper
from bayesmkl.model.regression import REG_PRIORS, RegHyper
from bayesmkl.sampler.regression import BM3KLReg
from bayesmkl.sampler.sampler import BM3KL

PAPER = dict(eta=1.0, alpha_a=1.0, beta_a=0.1, kappa=1e-10, bias_prior_var=1e-4, gamma0=100.0)
DEFAULT = dict(eta=2.0, alpha_a=1.0, beta_a=1.0, kappa=1.0, bias_prior_var=1.0, gamma0=1.0)


def test_hyper_defaults_are_the_default_prior_and_the_paper_is_a_preset():
    assert Hyper() == PRIORS["default"] == Hyper(**DEFAULT)
    assert Hyper.paper() == PRIORS["paper"] == Hyper(**PAPER)
    assert Hyper.paper(gamma0=5.0) == Hyper(**{**PAPER, "gamma0": 5.0})


def test_bm3kl_samples_what_the_classifier_samples_by_default():
    """The kernel the classifier builds from its default parameters is ``BM3KL()``."""
    p = BM3KLClassifier().get_params()
    own = {k: p[k] for k in Hyper._fields if p[k] is not None}
    hyper = PRIORS[p["prior"]]._replace(**own)
    built = BM3KL(*hyper, move=p["sampler"], step_size=p["step_size"],
                  n_leapfrog=p["n_leapfrog"], nu_update=p["nu_update"])  # fmt: skip
    assert BM3KL().config == built.config
    assert BM3KL().config.hyper == Hyper() and BM3KL().config.move == p["sampler"]


def test_bm3klreg_samples_what_the_regressor_samples_by_default():
    """The regressor's default prior is ``RegHyper()`` (whose κ the estimator replaces by the
    data's unit-variance κ) and its default move is ``BM3KLReg()``'s."""
    p = BM3KLRegressor().get_params()
    assert RegHyper() == REG_PRIORS[p["prior"]]
    assert all(p[k] is None for k in Hyper._fields[:5])
    assert all(p[k] == getattr(RegHyper(), k) for k in RegHyper._fields[5:])
    built = BM3KLReg(*RegHyper(), move=p["sampler"], step_size=p["step_size"],
                     n_leapfrog=p["n_leapfrog"])  # fmt: skip
    assert BM3KLReg().config == built.config
    assert BM3KLReg().likelihood == built.likelihood
