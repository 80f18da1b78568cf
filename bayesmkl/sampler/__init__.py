"""BM3KL inference: pure conditional samplers, kernel-weight moves and the MCMC kernel."""

from bayesmkl.sampler.moves import MOVES
from bayesmkl.sampler.sampler import BM3KL, BM3KLConfig, BM3KLState, init_state, sweep

__all__ = ["BM3KL", "BM3KLConfig", "BM3KLState", "MOVES", "init_state", "sweep"]
from bayesmkl.sampler.reference import (
    make_gibbs_fn,
    marginal_model,
    reference_kernel,
    run_marginal_nuts,
)

__all__ += ["make_gibbs_fn", "marginal_model", "reference_kernel", "run_marginal_nuts"]
