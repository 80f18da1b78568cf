"""``KernelPool.fit(X, landmarks=...)``: kernels between the training points and the landmarks
(docs/math.md §16), their memory check, centring, and the refusal of bad landmark rows."""

from __future__ import annotations

import numpy as np
import pytest

from bayesmkl.kernels import KernelPool, KernelSpec, _compute


def _pool(**options):
    specs = [KernelSpec("gauss", 1.0), KernelSpec("gauss", 3.0), KernelSpec("poly", 2)]
    return KernelPool(specs, **options)


def _data(n=30, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 4)) * [1.0, 10.0, 0.1, 3.0]


def test_landmark_kernels_are_columns_of_the_exact_ones():
    X, idx = _data(), np.array([2, 7, 11, 20, 29])
    exact = _pool().fit(X)
    land = _pool().fit(X, landmarks=idx)
    np.testing.assert_array_equal(land.mean_, exact.mean_)  # statistics from all of X
    np.testing.assert_allclose(land.train_kernels(), exact.train_kernels()[:, :, idx],
                               rtol=1e-13, atol=1e-13)  # fmt: skip
    Xnew = _data(6, seed=1)
    np.testing.assert_allclose(land.cross_kernels(Xnew), exact.cross_kernels(Xnew)[:, :, idx],
                               rtol=1e-13, atol=1e-13)  # fmt: skip
    assert land.n_columns == 5 and exact.n_columns == 30
    np.testing.assert_allclose(land.landmark_points(), X[idx], rtol=1e-13, atol=1e-12)
    assert exact.landmark_points() is None


def test_landmark_kernels_pass_the_memory_check_with_their_own_size(monkeypatch):
    """The check sees P × N × M entries, not P × N × N."""
    seen = []
    real = _compute.check_kernel_memory

    def spy(P, M, N, dtype, what="kernel tensor"):
        seen.append((P, M, N))
        return real(P, M, N, dtype, what)

    monkeypatch.setattr(_compute, "check_kernel_memory", spy)
    _pool().fit(_data(), landmarks=np.arange(0, 30, 3)).train_kernels()
    assert seen == [(3, 30, 10)]


def test_centred_landmark_kernels_are_centred_at_the_landmarks():
    """``center=True``: the landmarks' own block H K_ZZ H has zero row means."""
    X, idx = _data(), np.arange(0, 30, 2)
    pool = _pool(center=True, normalize=False).fit(X, landmarks=idx)
    assert pool.row_means_.shape == (3, 15)
    K_zz = pool.cross_kernels(X[idx])
    np.testing.assert_allclose(K_zz.mean(axis=2), 0.0, atol=1e-10)
    np.testing.assert_allclose(K_zz, np.swapaxes(K_zz, 1, 2), atol=1e-10)


@pytest.mark.parametrize(
    "bad, match",
    [(np.array([1, 1, 2]), "distinct"), (np.array([0, 30]), r"\[0, 30\)"),
     (np.array([0.0, 1.0]), "row indices"), (np.array([], dtype=int), "non-empty")],
)  # fmt: skip
def test_bad_landmark_rows_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        _pool().fit(_data(), landmarks=bad)
