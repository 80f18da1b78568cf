"""Deterministic and variational MKL baselines, run on the same kernels as BM3KL.

Each is a scikit-learn classifier taking the same ``kernels=`` argument as
:class:`bayesmkl.BM3KLClassifier` (see :mod:`bayesmkl.kernels.input`).

=====================  ==================================================================
class                  method
=====================  ==================================================================
AverageMKL             uniform weights, one SVM
BestSingleKernelSVM    the single kernel chosen by cross-validation
SimpleMKL              L1-MKL by reduced gradient (Rakotomamonjy et al. 2008)
LpMKL                  Lp-norm MKL with Kloft's analytic update (p = 1 … ∞)
SoftMarginMKL          SM1MKL (hinge), SM2MKL (square hinge), square loss (Xu et al. 2013)
SGMKL                  elastic-net constrained MKL (Yang et al. 2011)
MLMKLSum, MLMKLSA      multi-label MKL, summed or worst-class by stochastic approximation
MKMMC                  multiple-kernel maximum margin criterion + 1-NN (Gu & Zhou)
BEMKL                  Bayesian efficient MKL by variational Bayes (Gönen 2012); sparse=True
                       gives sBEMKL
M3K                    multiclass (Crammer–Singer) MKL maximising the multiclass margin,
                       ‖μ‖_q ≤ 1 (Cortes, Mohri & Rostamizadeh 2013)
OBSCURE                p-norm multiclass MKL by online-batch stochastic mirror descent
                       (Orabona, Jie & Caputo 2010)
BM3KLMAP               MAP estimate of the BM3KL posterior
=====================  ==================================================================

Probabilities: BEMKL and BM3KLMAP have ``predict_proba``. The SVM-based classes (AverageMKL,
BestSingleKernelSVM, SimpleMKL, LpMKL, SoftMarginMKL, SGMKL, MLMKLSum and MLMKLSA on
single-label ``y``, M3K, OBSCURE) return decision values only; wrap one in scikit-learn's
``CalibratedClassifierCV(est, method="sigmoid")`` for Platt-scaled probabilities (it refits the
baseline on each fold, so it costs that many fits). MKMMC is a 1-nearest-neighbour rule and has
neither.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # static analysers (jedi, pyright, mypy) cannot see through __getattr__
    from bayesmkl.baselines.average import AverageMKL as AverageMKL
    from bayesmkl.baselines.average import BestSingleKernelSVM as BestSingleKernelSVM
    from bayesmkl.baselines.bemkl import BEMKL as BEMKL
    from bayesmkl.baselines.lpmkl import LpMKL as LpMKL
    from bayesmkl.baselines.m3k import M3K as M3K
    from bayesmkl.baselines.map import BM3KLMAP as BM3KLMAP
    from bayesmkl.baselines.mkmmc import MKMMC as MKMMC
    from bayesmkl.baselines.mlmkl import MLMKLSA as MLMKLSA
    from bayesmkl.baselines.mlmkl import MLMKLSum as MLMKLSum
    from bayesmkl.baselines.obscure import OBSCURE as OBSCURE
    from bayesmkl.baselines.sgmkl import SGMKL as SGMKL
    from bayesmkl.baselines.simplemkl import SimpleMKL as SimpleMKL
    from bayesmkl.baselines.softmargin import SoftMarginMKL as SoftMarginMKL

_MODULES = {
    "AverageMKL": "average",
    "BestSingleKernelSVM": "average",
    "SimpleMKL": "simplemkl",
    "LpMKL": "lpmkl",
    "SoftMarginMKL": "softmargin",
    "SGMKL": "sgmkl",
    "MLMKLSum": "mlmkl",
    "MLMKLSA": "mlmkl",
    "MKMMC": "mkmmc",
    "BEMKL": "bemkl",
    "M3K": "m3k",
    "OBSCURE": "obscure",
    "BM3KLMAP": "map",
}

__all__ = sorted(_MODULES)


def __getattr__(name):
    if name in _MODULES:
        import importlib

        return getattr(importlib.import_module(f"bayesmkl.baselines.{_MODULES[name]}"), name)
    raise AttributeError(f"module 'bayesmkl.baselines' has no attribute {name!r}")
