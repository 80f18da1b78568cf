"""BM3KLMAP: the ECM estimate of the BM3KL posterior mode."""

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from bayesmkl.baselines.map import BM3KLMAP, _log_joint_a_grid, tpbn_grid
from bayesmkl.model.classification import PRIORS, Hyper

#: The paper's hyper-parameters, given explicitly: the tests below were written against them
#: (``BM3KLMAP()``'s defaults were the paper's before they became the default prior's).
PAPER = Hyper.paper()._asdict()


def _problem(n=40, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] > 0).astype(int) if n_classes == 2 else np.digitize(X[:, 0], [-0.5, 0.5])
    widths = [0.3, 1.0, 3.0]
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    z = rng.normal(size=(n, 1))
    d2_noise = (z - z.T) ** 2  # a kernel on a feature unrelated to y
    K = np.stack([np.exp(-d2 / (2 * s * s)) for s in widths] + [np.exp(-d2_noise / 2)])
    return K, y


@pytest.fixture(scope="module")
def fitted():
    K, y = _problem()
    return BM3KLMAP(kernels="precomputed", max_iter=300, tol=1e-10, **PAPER).fit(K, y), K, y


def test_defaults_are_the_default_prior_and_the_paper_is_a_preset():
    """``BM3KLMAP()``'s hyper-parameters are ``Hyper()``, the prior ``BM3KLClassifier()``
    samples by default; ``Hyper.paper()`` gives the paper's."""
    from bayesmkl import BM3KLClassifier

    params = BM3KLMAP().get_params()
    assert Hyper(**{name: params[name] for name in Hyper._fields}) == Hyper()
    assert Hyper() == PRIORS[BM3KLClassifier().prior]
    paper = BM3KLMAP(**PAPER).get_params()
    assert Hyper(**{name: paper[name] for name in Hyper._fields}) == PRIORS["paper"]


def test_objective_never_decreases(fitted):
    m, _, _ = fitted
    obj = np.asarray(m.objective_)
    assert len(obj) > 3
    # ECM is monotone for the discretised model; allow only floating-point noise
    assert np.diff(obj).min() >= -1e-9 * np.abs(obj).max()


def test_fits_training_data_and_probabilities(fitted):
    m, K, y = fitted
    assert m.score(K, y) >= 0.9
    p = m.predict_proba(K)
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-12)
    assert np.array_equal(m.predict(K), m.classes_[np.argmax(p, axis=1)])
    assert np.isclose(m.kernel_weights_.sum(), 1.0) and np.all(m.kernel_weights_ >= 0)


def test_w_step_matches_a_generic_solver(fitted):
    """The exponentiated-gradient w-step reaches the simplex minimum found by SLSQP."""
    m, K, _ = fitted
    rng = np.random.default_rng(1)
    P = K.shape[0]
    Phi = rng.normal(size=(P, 1, K.shape[1]))
    b = np.zeros(1)
    delta = m.delta_
    rho = rng.uniform(0.5, 5.0, size=delta.shape)

    def J(w):
        f = np.tensordot(w, Phi, axes=1) + b[:, None]
        zeta = 1 - delta * f
        return np.sum(zeta + 0.5 * rho * zeta**2)

    w_eg = m._w_step(np.full(P, 1 / P), Phi, b, delta, rho, n_steps=2000)
    res = optimize.minimize(
        J, np.full(P, 1 / P), method="SLSQP", bounds=[(0, 1)] * P,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}], options={"ftol": 1e-14},
    )  # fmt: skip
    assert J(w_eg) <= res.fun + 1e-6 * abs(res.fun)


@pytest.mark.parametrize("a", [1e-3, 0.1, 2.0])
def test_tpbn_grid_marginal_matches_quadrature(a):
    """log p(a) on the ν grid equals the TPBN marginal by adaptive quadrature (α=1, β=0.5, κ=1)."""
    alpha, beta, kappa = 1.0, 0.5, 1.0
    nu, log_q = tpbn_grid(alpha, beta, kappa, n_grid=2000)
    from scipy.special import logsumexp

    grid_val = logsumexp(_log_joint_a_grid(np.array(a), nu, log_q))

    def dens(u):  # integrand in u = log t, where it is smooth
        t = np.exp(u)
        return stats.norm.pdf(a, 0, np.sqrt(kappa * t)) * stats.betaprime.pdf(t, alpha, beta) * t

    edges = np.linspace(np.log(1e-30), np.log(1e60), 19)
    pieces = zip(edges[:-1], edges[1:], strict=True)
    exact = sum(integrate.quad(dens, lo, hi, limit=200)[0] for lo, hi in pieces)
    # the grid truncates t > 1e40 (prior mass 1e-20 for β = 0.5) and integrates a smooth
    # function of log t; 1e-3 relative is far above both errors and far below a wrong prior
    assert abs(grid_val - np.log(exact)) < 1e-3


def test_multiclass_and_validation():
    K, y = _problem(n=45, n_classes=3)
    m = BM3KLMAP(kernels="precomputed", max_iter=50, **PAPER).fit(K, np.array(["a", "b", "c"])[y])
    assert m.dual_coef_.shape == (3, 45)
    assert set(m.predict(K)) <= {"a", "b", "c"}
    assert m.score(K, np.array(["a", "b", "c"])[y]) > 0.8
    with pytest.raises(ValueError, match="eta must be >= 1"):
        BM3KLMAP(kernels="precomputed", eta=0.5).fit(K, y)
