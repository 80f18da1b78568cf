"""BM3KL inference: pure conditional samplers and steps, one sweep for both models, its NumPyro
kernel adapter, the chunked chain runner and the NUTS reference samplers."""

from bayesmkl.sampler.kernel import BM3KLKernel
from bayesmkl.sampler.moves import MOVES
from bayesmkl.sampler.regression import BM3KLReg, Regression
from bayesmkl.sampler.sampler import BM3KL, Classification
from bayesmkl.sampler.state import ChainState, Info, State, SweepConfig, init_state
from bayesmkl.sampler.sweep import build_sweep

__all__ = [
    "BM3KL",
    "BM3KLKernel",
    "BM3KLReg",
    "MOVES",
    "ChainState",
    "Classification",
    "Info",
    "Regression",
    "State",
    "SweepConfig",
    "build_sweep",
    "init_state",
]
from bayesmkl.sampler.reference import (
    make_gibbs_fn,
    marginal_model,
    reference_kernel,
    run_marginal_nuts,
)

__all__ += ["make_gibbs_fn", "marginal_model", "reference_kernel", "run_marginal_nuts"]
