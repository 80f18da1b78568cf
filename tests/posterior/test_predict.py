"""Prediction (:mod:`bayesmkl.posterior.predictive`, docs/math.md §6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesmkl  # noqa: F401  (enables x64)
from bayesmkl.model.likelihood import psi
from bayesmkl.posterior.predictive import (
    draw_decision_values,
    draw_log_probabilities,
    draw_probabilities,
    mean_decision,
    predictive_proba,
)


def _draws(seed, S=70, P=4, C=3, M=5, N=7):
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(P), size=S)
    a = rng.normal(size=(S, C, N))
    b = rng.normal(size=(S, C))
    K_test = rng.uniform(size=(P, M, N))
    return w, a, b, K_test


def _naive(w, a, b, K_test):
    S, C, N = a.shape
    M = K_test.shape[1]
    F = np.zeros((S, M, C))
    for s in range(S):
        for m in range(M):
            k = sum(w[s, p] * K_test[p, m] for p in range(K_test.shape[0]))  # (N,)
            for c in range(C):
                F[s, m, c] = a[s, c] @ k + b[s, c]
    return F


@pytest.mark.parametrize("batch_size", [64, 16, 1, 128])
def test_draw_decision_values_equals_loop(batch_size):
    """S = 70 draws: padding of the last batch (70 is not a multiple of 64/16/128) is removed."""
    w, a, b, K_test = _draws(0)
    F = draw_decision_values(jnp.asarray(w), jnp.asarray(a), jnp.asarray(b),
                             jnp.asarray(K_test), batch_size=batch_size)  # fmt: skip
    assert F.shape == (70, 5, 3)
    np.testing.assert_allclose(F, _naive(w, a, b, K_test), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("C", [1, 3])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("batch_size", [64, 16, 1])
def test_large_blocks_give_the_same_values(monkeypatch, batch_size, dtype, C):
    """Above MAX_WEIGHTED_KERNEL_ENTRIES (forced to 0 here) the decision values go through the
    per-kernel contributions K_m a (C = 1) or the weighted kernels one draw at a time (C = 3,
    above MAX_PER_KERNEL_CLASSIFIERS): the same values as the loop (padding removed too)."""
    import bayesmkl.posterior.predictive as predictive

    monkeypatch.setattr(predictive, "MAX_WEIGHTED_KERNEL_ENTRIES", 0)
    w, a, b, K_test = _draws(3, C=C)
    F = draw_decision_values(jnp.asarray(w), jnp.asarray(a), jnp.asarray(b),
                             jnp.asarray(K_test, dtype), batch_size=batch_size)  # fmt: skip
    assert F.shape == (70, 5, C) and F.dtype == jnp.float64
    tol = 1e-12 if dtype == jnp.float64 else 1e-5
    np.testing.assert_allclose(F, _naive(w, a, b, K_test), rtol=tol, atol=tol)


def test_draw_decision_values_float32_kernels():
    w, a, b, K_test = _draws(1, S=9, C=1)
    F = draw_decision_values(jnp.asarray(w), jnp.asarray(a), jnp.asarray(b),
                             jnp.asarray(K_test, jnp.float32))  # fmt: skip
    assert F.dtype == jnp.float64
    np.testing.assert_allclose(F, _naive(w, a, b, K_test), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
@pytest.mark.parametrize("C", [1, 3])
def test_predictive_proba(C, gamma0):
    rng = np.random.default_rng(2)
    F = jnp.asarray(rng.normal(scale=1.5, size=(30, 8, C)))
    P = np.asarray(predictive_proba(F, gamma0))
    K = 2 if C == 1 else C
    assert P.shape == (8, K)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-14)
    assert np.all(P >= 0)
    per = np.asarray(draw_probabilities(F, gamma0))
    if C == 1:  # single binary classifier: p(class 1) = σ(ψ(f)), column 1
        np.testing.assert_allclose(per[..., 1], jax.nn.sigmoid(psi(F[..., 0], gamma0)),
                                   rtol=1e-13)  # fmt: skip
        # per draw, class 1 wins exactly when f > 0
        np.testing.assert_array_equal(per.argmax(-1), (np.asarray(F[..., 0]) > 0).astype(int))
    else:
        ref = np.exp(psi(F, gamma0))
        np.testing.assert_allclose(per, ref / ref.sum(-1, keepdims=True), rtol=1e-12)
        np.testing.assert_array_equal(per.argmax(-1), np.asarray(F).argmax(-1))
    np.testing.assert_allclose(P, per.mean(0), rtol=1e-14)
    np.testing.assert_allclose(mean_decision(F), np.asarray(F).mean(0), rtol=1e-14)


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
@pytest.mark.parametrize("C", [1, 3])
def test_draw_log_probabilities(C, gamma0):
    """log σ(±ψ) / log_softmax(ψ), finite where draw_probabilities underflows to 0."""
    from scipy.special import log_expit, log_softmax

    rng = np.random.default_rng(3)
    F = rng.normal(scale=1.5, size=(10, 6, C))
    F[0, 0] = 40.0  # ψ ≈ 1200 at γ0 = 100: the other class has probability exp(−1200) = 0
    F[0, 1] = -40.0
    lp = np.asarray(draw_log_probabilities(jnp.asarray(F), gamma0))
    p = np.asarray(draw_probabilities(jnp.asarray(F), gamma0))
    assert lp.shape == p.shape and np.all(np.isfinite(lp))
    scores = np.asarray(psi(F, gamma0))
    if C == 1:
        ref = np.stack([log_expit(-scores[..., 0]), log_expit(scores[..., 0])], axis=-1)
        assert p[0, 0, 0] == 0.0 and lp[0, 0, 0] == pytest.approx(-scores[0, 0, 0], rel=1e-12)
    else:
        ref = log_softmax(scores, axis=-1)
    np.testing.assert_allclose(lp, ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.exp(lp), p, rtol=0, atol=1e-15)
