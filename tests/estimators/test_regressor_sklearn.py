"""scikit-learn API compliance of ``BM3KLRegressor``.

``parametrize_with_checks`` runs scikit-learn's estimator checks with the fast settings of
``tests/estimators/test_sklearn_compat.py`` (5 warm-up sweeps, 3 draws, one chain, the 16-kernel
pool,
the exact ``"gibbs"`` move, which compiles fastest). The file is dominated by compilation:
one program per training-set shape, about a dozen shapes.
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayesmkl import BM3KLRegressor

FAST = dict(
    num_warmup=5,
    num_samples=3,
    num_chains=1,
    progress_bar=False,
    kernels="bsvm16",
    sampler="gibbs",
    random_state=0,
)


@parametrize_with_checks([BM3KLRegressor(**FAST)])
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)
