"""MKMMC (bayesmkl/baselines/mkmmc.py): monotone alternation, θ-step optimality, 1-NN embedding."""

import numpy as np
import pytest
from sklearn.base import clone

from bayesmkl.baselines import MKMMC
from bayesmkl.baselines._svm import combine
from bayesmkl.baselines.mkmmc import maximize_quadratic_on_simplex, mmc_laplacian, theta_matrix


def gram(A, B, gamma=0.5):
    d2 = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2.0 * A @ B.T
    return np.exp(-gamma * np.maximum(d2, 0.0))


def three_class(seed=0, n=90, n_noise=4):
    """Kernel 0 sees the class structure (three separated 2-D clusters); kernels 1.. see noise."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    blocks = [rng.normal(size=(n, 2)) + centers[y]]
    blocks += [rng.normal(size=(n, 2)) for _ in range(n_noise)]
    tr, te = np.arange(n)[::2], np.arange(n)[1::2]
    K = np.stack([gram(B[tr], B[tr]) for B in blocks])
    Kt = np.stack([gram(B[te], B[tr]) for B in blocks])
    return K, y[tr], Kt, y[te]


@pytest.fixture(scope="module")
def problem():
    return three_class()


@pytest.fixture(scope="module")
def model(problem):
    K, y, _, _ = problem
    return MKMMC(kernels="precomputed", random_state=0).fit(K, y)


def test_objective_non_decreasing_and_consistent(model, problem):
    K, y, _, _ = problem
    J = model.objective_
    assert len(J) == 2 * model.n_iter_ + 1
    assert np.all(np.diff(J) >= -1e-10 * np.abs(J).max())
    assert J[-1] > J[0]  # learning θ improved on the uniform start
    # the final value is tr(𝒜ᵀ L_θ 𝒜) = θᵀ L_𝒜 θ, recomputed from the fitted attributes
    M = mmc_laplacian(y)
    Kth = combine(K, model.kernel_weights_)
    A = model.components_
    assert np.trace(A.T @ (2 * Kth @ M @ Kth) @ A) == pytest.approx(J[-1], rel=1e-9)
    th = model.kernel_weights_
    assert th @ theta_matrix(K, A, M) @ th == pytest.approx(J[-1], rel=1e-9)
    # ... and the criterion's definition Σ_ij W_ij ‖z_i − z_j‖², W = D − M with D = −I
    Z = model.embedding_
    W = -np.eye(len(y)) - M
    d2 = np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=-1)
    assert np.sum(W * d2) == pytest.approx(J[-1], rel=1e-9)


def test_theta_on_simplex_and_on_the_informative_kernel(model):
    th = model.kernel_weights_
    assert th.shape == (5,) and np.all(th >= 0) and th.sum() == pytest.approx(1.0, abs=1e-12)
    assert th[0] > 0.9


def test_embedding_and_nearest_neighbour_accuracy(model, problem):
    _, _, Kt, yt = problem
    A = model.components_
    assert A.shape == (45, 2)  # default n_components = n_classes − 1
    np.testing.assert_allclose(A.T @ A, np.eye(2), atol=1e-10)
    Z = model.transform(Kt)
    assert Z.shape == (45, 2)
    assert model.score(Kt, yt) > 0.7  # chance 1/3


def test_fit_transform_is_the_training_embedding(problem):
    K, y, _, _ = problem
    m = MKMMC(kernels="precomputed", n_components=3)
    Z = m.fit_transform(K, y)
    np.testing.assert_allclose(Z, m.embedding_, atol=1e-12)
    assert Z.shape == (45, 3)


def _grid_max(Q, steps=200):
    g = np.linspace(0.0, 1.0, steps + 1)
    a, b = np.meshgrid(g, g, indexing="ij")
    keep = a + b <= 1.0 + 1e-12
    T = np.stack([a[keep], b[keep], np.clip(1.0 - a[keep] - b[keep], 0.0, None)], axis=1)
    return float(np.max(np.einsum("ni,ij,nj->n", T, Q, T)))


def _theta_step_matrices(problem):
    K, y, _, _ = problem
    K3 = K[:3]
    M = mmc_laplacian(y)
    rng = np.random.default_rng(1)
    fitted = MKMMC(kernels="precomputed").fit(K3, y).components_
    random_A = np.linalg.qr(rng.normal(size=(K3.shape[1], 2)))[0]
    Qs = [theta_matrix(K3, fitted, M), theta_matrix(K3, random_A, M)]
    for _ in range(6):  # generic indefinite quadratics
        B = rng.normal(size=(3, 3))
        Qs.append(B + B.T)
    return Qs


@pytest.mark.parametrize("method", ["enumerate", "multistart"])
def test_theta_step_beats_brute_force_grid(problem, method):
    for Q in _theta_step_matrices(problem):
        th, val = maximize_quadratic_on_simplex(Q, method=method, random_state=0)
        assert np.all(th >= 0) and th.sum() == pytest.approx(1.0, abs=1e-12)
        assert val == pytest.approx(th @ Q @ th, rel=1e-12, abs=1e-12)
        grid = _grid_max(Q)
        assert val >= grid - 1e-12 * max(1.0, abs(grid))


def test_enumeration_is_exact_and_multistart_finds_it():
    rng = np.random.default_rng(2)
    for _ in range(10):
        B = rng.normal(size=(6, 6))
        Q = B + B.T - 1.5 * np.eye(6)
        th_e, v_e = maximize_quadratic_on_simplex(Q, method="enumerate")
        th_m, v_m = maximize_quadratic_on_simplex(Q, method="multistart", random_state=0)
        S = rng.dirichlet(np.full(6, 0.3), size=20000)
        sampled = np.max(np.einsum("ni,ij,nj->n", S, Q, S))
        assert v_e >= sampled - 1e-12 and v_e >= v_m - 1e-10
        assert v_m >= v_e - 1e-6 * abs(v_e)  # vertices + restarts reach the global maximum here


def test_theta_step_never_below_the_current_point():
    Q = -np.eye(4)  # the maximum is the barycentre; any current θ is a candidate
    th0 = np.array([0.25, 0.25, 0.25, 0.25])
    th, v = maximize_quadratic_on_simplex(Q, theta0=th0, method="multistart", random_state=0)
    assert v >= th0 @ Q @ th0 - 1e-15
    np.testing.assert_allclose(th, th0, atol=1e-8)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 100}, "n_components"),
        ({"theta_solver": "cvx"}, "theta_solver"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_parameters(problem, params, match):
    K, y, _, _ = problem
    with pytest.raises(ValueError, match=match):
        MKMMC(kernels="precomputed", **params).fit(K, y)


def test_single_class_and_bad_test_kernels(problem, model):
    K, y, _, _ = problem
    with pytest.raises(ValueError, match="single class"):
        MKMMC(kernels="precomputed").fit(K, np.zeros_like(y))
    with pytest.raises(ValueError, match="precomputed"):
        model.transform(K[:3])


def test_params_verbatim_and_clone():
    m = MKMMC()
    assert m.kernels == "simplemkl" and m.n_components is None
    assert clone(MKMMC(n_components=4)).get_params()["n_components"] == 4


def test_feature_input_with_bsvm16_pool():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 30)
    X = rng.normal(size=(90, 3)) + 2.5 * np.eye(3)[y]
    idx = rng.permutation(90)
    tr, te = idx[:60], idx[60:]
    m = MKMMC(kernels="bsvm16", random_state=0).fit(X[tr], y[tr])  # P = 16 → multistart θ-step
    assert m.kernel_weights_.shape == (16,) and m.n_features_in_ == 3
    assert np.all(np.diff(m.objective_) >= -1e-10 * np.abs(m.objective_).max())
    assert m.transform(X[te]).shape == (30, 2)
    assert m.score(X[te], y[te]) > 0.7
