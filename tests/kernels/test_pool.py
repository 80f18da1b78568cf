"""KernelPool: sizes, names, preprocessing invariants, validation, copies and precomputed input."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from sklearn.metrics.pairwise import polynomial_kernel as sk_poly
from sklearn.metrics.pairwise import rbf_kernel

import bayesmkl  # noqa: F401  (enables float64 in JAX)
from bayesmkl.kernels import KernelPool, KernelSpec, _compute, validate_precomputed
from bayesmkl.kernels.input import KernelInput, resolve_kernels
from bayesmkl.kernels.pool import NotFittedError

N_TRAIN, N_TEST, D = 24, 9, 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N_TRAIN + N_TEST, D)) * [1, 2, 0.5, 3, 1] + [0, 1, -2, 5, 0]
    return X[:N_TRAIN], X[N_TRAIN:]


@pytest.fixture(scope="module")
def simplemkl_fitted(data):
    Xtr, Xte = data
    pool = KernelPool.simplemkl().fit(Xtr)
    return pool, pool.train_kernels(), pool.cross_kernels(Xte)


def _min_rel_eig(K):
    ev = np.linalg.eigvalsh(K.astype(np.float64))
    return (ev[:, 0] / np.abs(ev).max(axis=1)).min()


# ------------------------------------------------------------------------------------------
# sizes and names
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 6, 60])
def test_simplemkl_size_is_13_d_plus_1(d):
    X = np.random.default_rng(d).normal(size=(8, d))
    pool = KernelPool.simplemkl().fit(X)
    assert len(pool) == 13 * (d + 1) == len(pool.names) == len(pool.specs)
    assert len(set(pool.names)) == len(pool)


def test_recipe_length_unknown_before_fit():
    pool = KernelPool.simplemkl()
    assert pool.is_recipe and bool(pool)
    with pytest.raises(NotFittedError, match="expanded .*at fit"):
        len(pool)
    with pytest.raises(NotFittedError, match="expanded .*at fit"):
        _ = pool.names
    assert "expanded at fit" in repr(pool)


def test_explicit_pools_know_their_length():
    pool = KernelPool.bsvm16()
    assert len(pool) == 16
    assert pool.names[0] == "gauss(s=0.015625)[all]" and pool.names[12] == "gauss(s=64)[all]"
    assert pool.names[13:] == ["poly(d=1)[all]", "poly(d=2)[all]", "poly(d=3)[all]"]
    custom = KernelPool(
        [KernelSpec("gauss", 0.25, 7), ("poly", 2, "all"), ("linear", None, (1, 3))]
    )
    assert custom.names == ["gauss(s=0.25)[x7]", "poly(d=2)[all]", "linear[x1,x3]"]
    assert KernelPool.from_specs(custom.specs).names == custom.names


def test_spec_names():
    assert KernelSpec("gauss", 2, slice(0, 240)).name == "gauss(s=2)[x0:240]"
    assert KernelSpec("gauss", 2, range(0, 240), label="pix").name == "gauss(s=2)[pix]"
    assert KernelSpec("poly", 3.0, "each").name == "poly(d=3)[each]"
    assert KernelSpec("poly", 3.0).param == 3 and isinstance(KernelSpec("poly", 3.0).param, int)


def test_simplemkl_order(simplemkl_fitted):
    pool, _, _ = simplemkl_fitted
    names = pool.names
    assert names[:13] == [s.name for s in KernelPool.simplemkl(normalize=False).recipe[:13]]
    assert names[13 : 13 + D] == [f"gauss(s=0.125)[x{j}]" for j in range(D)]
    assert names[-1] == f"poly(d=3)[x{D - 1}]"


def test_views_pool_on_synthetic_blocks():
    X = np.random.default_rng(3).normal(size=(20, 9))
    pool = KernelPool.views([3, 2, 4], names=["a", "b", "c"], gauss_widths=[1, 2], poly_degrees=[2])
    assert len(pool) == 9
    assert pool.names[:3] == ["gauss(s=1)[a]", "gauss(s=2)[a]", "poly(d=2)[a]"]
    assert pool.specs[3].features == (3, 4)
    K = pool.fit(X).train_kernels()
    ref = rbf_kernel((X[:, 3:5] - X[:, 3:5].mean(0)) / X[:, 3:5].std(0), gamma=1 / 2)
    np.testing.assert_allclose(K[3], ref, atol=1e-10)
    assert len(KernelPool.views([slice(0, 3), [5, 7]])) == 26
    assert KernelPool.views([slice(0, 3), [5, 7]]).names[13] == "gauss(s=0.125)[x5,x7]"
    with pytest.raises(ValueError, match="expects 9 features.*has 8"):
        pool.fit(X[:, :8])
    with pytest.raises(ValueError, match="feature index 12.*only 9 features"):
        KernelPool.views([slice(0, 3), slice(10, 13)]).fit(X)


@pytest.mark.shared_data
def test_pool_sizes_on_real_data(uci_dir):
    from bayesmkl.datasets import load_mfeat, load_uci

    X, _ = load_uci("sonar", uci_dir)
    assert len(KernelPool.simplemkl().fit(X)) == 793
    X, _ = load_uci("liver", uci_dir)
    pool = KernelPool.simplemkl().fit(X[:40])
    assert len(pool) == 91
    assert pool.train_kernels().shape == (91, 40, 40)
    Xs, _ = load_mfeat(data_dir=uci_dir)
    pool = KernelPool.views([x.shape[1] for x in Xs], names=["fou", "fac", "kar", "pix"])
    assert len(pool) == 4 * 13 == 52
    assert pool.fit(np.hstack(Xs)).n_features_in_ == 76 + 216 + 64 + 240
    assert KernelPool.bsvm16().fit(np.hstack(Xs)).names[-1] == "poly(d=3)[all]"


# ------------------------------------------------------------------------------------------
# values and invariants
# ------------------------------------------------------------------------------------------


def test_raw_pool_values_match_sklearn(data):
    """Mixed explicit specs, irregular per-feature grid, duplicates; no preprocessing."""
    Xtr, Xte = data
    specs = [
        KernelSpec("gauss", 0.5, 2),
        KernelSpec("poly", 2, (0, 3)),
        KernelSpec("gauss", 2.0),
        KernelSpec("linear", None, 4),
        KernelSpec("gauss", 0.5, 0),
        KernelSpec("gauss", 3.0, 2),
        KernelSpec("poly", 3, 1),
        KernelSpec("gauss", 2.0),
        KernelSpec("poly", 1),
        KernelSpec("gauss", 1.5, (4, 1)),
    ]
    pool = KernelPool(specs, standardize=False, normalize=False, poly_offset=0.5).fit(Xtr)
    K = pool.cross_kernels(Xte[:4])
    assert K.shape == (10, 4, N_TRAIN)
    for m, s in enumerate(specs):
        cols = list(range(D)) if s.features == "all" else list(s.features)
        for got, A in ((K[m], Xte[:4]),):
            if s.kind == "gauss":
                ref = rbf_kernel(A[:, cols], Xtr[:, cols], gamma=1 / (2 * s.param**2))
            elif s.kind == "poly":
                ref = sk_poly(A[:, cols], Xtr[:, cols], degree=s.param, gamma=1, coef0=0.5)
            else:
                ref = A[:, cols] @ Xtr[:, cols].T
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10, err_msg=s.name)


def test_standardize_and_normalize_use_training_statistics(data):
    Xtr, Xte = data
    pool = KernelPool([KernelSpec("poly", 2), KernelSpec("gauss", 1.0, 3)]).fit(Xtr)
    mu, sd = Xtr.mean(0), Xtr.std(0)
    A, B = (Xte - mu) / sd, (Xtr - mu) / sd
    raw = sk_poly(A, B, degree=2, gamma=1, coef0=1)
    ref = raw / np.sqrt(np.outer(((A**2).sum(1) + 1) ** 2, ((B**2).sum(1) + 1) ** 2))
    Kx = pool.cross_kernels(Xte)
    np.testing.assert_allclose(Kx[0], ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Kx[1], rbf_kernel(A[:, [3]], B[:, [3]], gamma=0.5), atol=1e-10)
    np.testing.assert_allclose(pool.mean_, mu)
    # a constant column gets sd 1 (no NaN)
    Xc = Xtr.copy()
    Xc[:, 2] = 4.0
    Kc = KernelPool.bsvm16().fit(Xc).train_kernels()
    assert np.all(np.isfinite(Kc))


def test_train_kernels_unit_diagonal_psd_and_cross_consistency(data, simplemkl_fitted):
    Xtr, _ = data
    pool, K, Kx = simplemkl_fitted
    P = len(pool)
    assert K.shape == (P, N_TRAIN, N_TRAIN) and Kx.shape == (P, N_TEST, N_TRAIN)
    assert K.dtype == np.float64
    np.testing.assert_allclose(np.diagonal(K, axis1=1, axis2=2), 1.0, atol=1e-12)
    assert np.array_equal(pool.cross_kernels(Xtr), K)
    assert np.array_equal(K, K.transpose(0, 2, 1))
    assert _min_rel_eig(K) >= -1e-8
    assert np.all(np.abs(Kx) <= 1 + 1e-12)


@pytest.fixture(scope="module")
def raw_simplemkl(data):
    Xtr, Xte = data
    pool = KernelPool.simplemkl(normalize=False).fit(Xtr)
    return pool.train_kernels(), pool.cross_kernels(Xte)


@pytest.mark.parametrize("normalize", [False, True])
def test_centering(data, raw_simplemkl, normalize):
    Xtr, Xte = data
    pool = KernelPool.simplemkl(center=True, normalize=normalize).fit(Xtr)
    K = pool.train_kernels()
    assert np.array_equal(pool.cross_kernels(Xtr), K)  # centring of new rows = centred train
    assert _min_rel_eig(K) >= -1e-8
    if normalize:
        # centring near-constant kernels (wide single-feature Gaussians) costs digits
        np.testing.assert_allclose(np.diagonal(K, axis1=1, axis2=2), 1.0, atol=1e-8)
        return
    scale = np.abs(K).max(axis=(1, 2), keepdims=True)
    assert np.abs(K.mean(axis=2, keepdims=True) / scale).max() < 1e-12
    # against H K H and the explicit new-row formula, from the uncentred pool
    K0, Kx0 = raw_simplemkl
    H = np.eye(N_TRAIN) - 1.0 / N_TRAIN
    np.testing.assert_allclose(K / scale, H @ K0 @ H / scale, rtol=0, atol=1e-12)
    r = K0.mean(axis=2)
    g = K0.mean(axis=(1, 2))
    ref = Kx0 - r[:, None, :] - Kx0.mean(axis=2, keepdims=True) + g[:, None, None]
    np.testing.assert_allclose(pool.cross_kernels(Xte) / scale, ref / scale, rtol=0, atol=1e-12)


def test_centring_a_kernel_on_constant_features_is_refused_by_name():
    """Centred, a kernel on a feature constant over the training rows is zero and its unit
    diagonal 0/0; that was reported as features 'too large for this kernel'."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[:, 1] = 5.0
    KernelPool.simplemkl().fit(X).train_kernels()  # uncentred: a constant kernel, no error
    with pytest.raises(ValueError, match=r"'gauss\(s=0.125\)\[x1\]' reads features that are "
                       "constant on the training rows"):  # fmt: skip
        KernelPool.simplemkl(center=True).fit(X).train_kernels()
    with pytest.raises(ValueError, match="constant on the training rows"):
        KernelPool.bsvm16(center=True).fit(np.ones((6, 3))).train_kernels()
    KernelPool.bsvm16(center=True).fit(X).train_kernels()  # the other features vary


def test_float32_storage(data, simplemkl_fitted):
    Xtr, Xte = data
    _, K64, Kx64 = simplemkl_fitted
    pool = KernelPool.simplemkl(dtype=np.float32).fit(Xtr)
    K32, Kx32 = pool.train_kernels(), pool.cross_kernels(Xte)
    assert K32.dtype == np.float32 and Kx32.dtype == np.float32
    np.testing.assert_allclose(K32, K64, atol=1e-6)
    np.testing.assert_allclose(Kx32, Kx64, atol=1e-6)


def test_chunked_computation_matches(data, simplemkl_fitted, raw_simplemkl, monkeypatch):
    """Small chunks split and pad every group; padding or index errors would move kernels.

    4 N^2 entries: 10 widths -> 4 + 4 + 4 (2 padded); 6 N^2 entries: the 3 polynomials on 5
    single features -> features 2 + 2 + 2 (1 padded).
    """
    Xtr, Xte = data
    pool, K, Kx = simplemkl_fitted
    monkeypatch.setattr(_compute, "_CHUNK_ENTRIES", 4 * N_TRAIN * N_TRAIN)
    np.testing.assert_allclose(pool.train_kernels(), K, rtol=1e-14, atol=1e-15)
    monkeypatch.setattr(_compute, "_CHUNK_ENTRIES", 6 * N_TRAIN * N_TRAIN)
    np.testing.assert_allclose(pool.train_kernels(), K, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(pool.cross_kernels(Xte), Kx, rtol=1e-14, atol=1e-15)
    raw = KernelPool.simplemkl(normalize=False, center=True).fit(Xtr)
    K0 = raw_simplemkl[0]
    np.testing.assert_allclose(raw.row_means_, K0.mean(axis=2), rtol=1e-12, atol=1e-12)


def test_deepcopy_and_pickle(data, simplemkl_fitted):
    _, Xte = data
    pool, _, Kx = simplemkl_fitted
    for clone in (copy.deepcopy(pool), pickle.loads(pickle.dumps(pool))):
        assert clone.names == pool.names
        assert np.array_equal(clone.cross_kernels(Xte), Kx)
    unfitted = pickle.loads(pickle.dumps(KernelPool.simplemkl(center=True, poly_offset=0.0)))
    assert unfitted.center is True and unfitted.poly_offset == 0.0 and not unfitted.is_fitted


def test_kernel_input_integration(data):
    Xtr, Xte = data
    user_pool = KernelPool.bsvm16()
    ki, K = KernelInput.fit(user_pool, Xtr, dtype=np.float32)
    assert K.shape == (16, N_TRAIN, N_TRAIN) and K.dtype == np.float32
    assert not user_pool.is_fitted  # the estimator works on a copy
    assert ki.cross(Xte).shape == (16, N_TEST, N_TRAIN)
    assert len(resolve_kernels("simplemkl").fit(Xtr)) == 13 * (D + 1)


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------


def test_bad_X(data):
    Xtr, Xte = data
    X = Xtr.copy()
    X[5, 3] = np.nan
    with pytest.raises(ValueError, match="NaN in column 3"):
        KernelPool.bsvm16().fit(X)
    X = Xtr.copy()
    X[2, 1] = np.inf
    with pytest.raises(ValueError, match="inf in column 1"):
        KernelPool.bsvm16().fit(X)
    pool = KernelPool.bsvm16().fit(Xtr)
    Xn = Xte.copy()
    Xn[0, 4] = -np.inf
    with pytest.raises(ValueError, match="column 4"):
        pool.cross_kernels(Xn)
    with pytest.raises(ValueError, match="has 4 features.*fitted with 5"):
        pool.cross_kernels(Xte[:, :4])
    with pytest.raises(ValueError, match="2-D"):
        KernelPool.bsvm16().fit(Xtr[:, 0])


def test_bad_specs():
    with pytest.raises(ValueError, match="width"):
        KernelSpec("gauss", 0.0)
    with pytest.raises(ValueError, match="width"):
        KernelSpec("gauss", -1.0, 2)
    with pytest.raises(ValueError, match="integer"):
        KernelSpec("poly", 2.5)
    with pytest.raises(ValueError, match="integer"):
        KernelSpec("poly", 0)
    with pytest.raises(ValueError, match="kind"):
        KernelSpec("rbf", 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        KernelSpec("gauss", 1.0, (-1,))
    with pytest.raises(ValueError, match="width"):
        KernelPool.simplemkl(gauss_widths=[1.0, 0.0])
    with pytest.raises(ValueError, match="at least one"):
        KernelPool([])


def test_feature_index_out_of_range(data):
    Xtr, _ = data
    with pytest.raises(ValueError, match="feature index 7.*only 5 features"):
        KernelPool([KernelSpec("gauss", 1.0, 7)]).fit(Xtr)


def test_not_fitted_and_stale_options(data):
    Xtr, _ = data
    pool = KernelPool.bsvm16()
    with pytest.raises(NotFittedError, match="fit"):
        pool.train_kernels()
    with pytest.raises(NotFittedError, match="fit"):
        pool.cross_kernels(Xtr)
    pool.fit(Xtr)
    pool.center = True
    with pytest.raises(NotFittedError, match="changed after fit"):
        pool.train_kernels()
    pool.dtype = np.int32
    with pytest.raises(ValueError, match="dtype"):
        pool.fit(Xtr)


# ------------------------------------------------------------------------------------------
# precomputed kernels
# ------------------------------------------------------------------------------------------


def test_validate_precomputed_accepts():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    G = A @ A.T
    K, names = validate_precomputed(G)
    assert K.shape == (1, 6, 6) and names == ["K0"]
    K, names = validate_precomputed([G, 2 * G, np.eye(6)])
    assert K.shape == (3, 6, 6) and names == ["K0", "K1", "K2"]
    K, names = validate_precomputed(np.stack([G, G]), names=["a", "b"])
    assert names == ["a", "b"]
    G2 = G.copy()
    G2[0, 1] += 1e-9 * np.abs(G).max()  # within tolerance
    validate_precomputed(G2)


def test_validate_precomputed_rejects():
    G = np.eye(5)
    with pytest.raises(ValueError, match="kernel 1 has shape \\(5, 4\\).*square"):
        validate_precomputed([G, np.ones((5, 4))])
    with pytest.raises(ValueError, match="square"):
        validate_precomputed(np.ones((2, 5, 4)))
    with pytest.raises(ValueError, match="differ in size"):
        validate_precomputed([G, np.eye(4)])
    bad = np.stack([G, G, G])
    bad[2, 0, 3] = 0.5
    with pytest.raises(ValueError, match="kernel 2 is not symmetric: max \\|K - K\\^T\\| = 0.5"):
        validate_precomputed(bad)
    bad = np.stack([G, G])
    bad[1, 2, 2] = np.nan
    with pytest.raises(ValueError, match="kernel 1 contains NaN"):
        validate_precomputed(bad)
    with pytest.raises(ValueError, match="2 names for 3"):
        validate_precomputed(np.stack([G, G, G]), names=["a", "b"])


def test_restore_fitted_reproduces_the_fitted_pool(data):
    """What io.pool_from_state does: a pool restored from the fitted arrays gives the same
    kernels without refitting, and refuses arrays it does not know or a missing X_fit_."""
    from bayesmkl.kernels.pool import FITTED_ARRAYS

    Xtr, Xte = data
    fitted = KernelPool.simplemkl(center=True).fit(Xtr)
    arrays = {name: getattr(fitted, name) for name in FITTED_ARRAYS}
    restored = KernelPool.simplemkl(center=True).restore_fitted(fitted.n_features_in_, **arrays)
    np.testing.assert_array_equal(restored.train_kernels(), fitted.train_kernels())
    np.testing.assert_array_equal(restored.cross_kernels(Xte), fitted.cross_kernels(Xte))
    with pytest.raises(ValueError, match="unknown fitted arrays"):
        KernelPool.bsvm16().restore_fitted(D, X_fit_=Xtr, colour_=1)
    with pytest.raises(ValueError, match="X_fit_"):
        KernelPool.bsvm16().restore_fitted(D, mean_=Xtr.mean(axis=0))


def test_dataframe_columns_name_the_kernels(data):
    """A DataFrame's string columns (or ``feature_names`` for an array) replace ``x<j>`` in the
    kernel names; the kernels themselves are those of the bare array (issue 23)."""
    pd = pytest.importorskip("pandas")
    Xtr, Xte = data
    cols = ["age", "income", "bmi", "dose", "score"]
    recipe = [
        KernelSpec("gauss", 1.0, "each"),
        KernelSpec("poly", 2, [0, 3]),
        KernelSpec("linear", None, "each", display_name="lin"),
        KernelSpec("poly", 1),
    ]
    by_frame = KernelPool(recipe).fit(pd.DataFrame(Xtr, columns=cols))
    assert by_frame.names == [*(f"gauss(s=1)[{c}]" for c in cols), "poly(d=2)[age,dose]",
                              *(f"lin[{c}]" for c in cols), "poly(d=1)[all]"]  # fmt: skip
    assert by_frame.feature_names_in_.tolist() == cols
    by_array = KernelPool(recipe).fit(Xtr, feature_names=cols)
    assert by_array.names == by_frame.names
    plain = KernelPool(recipe).fit(Xtr)
    assert plain.names[0] == "gauss(s=1)[x0]" and plain.feature_names_in_ is None
    # (a DataFrame's array is column-major, so sums may round differently)
    np.testing.assert_allclose(by_frame.train_kernels(), plain.train_kernels(), rtol=1e-12)
    np.testing.assert_allclose(by_frame.cross_kernels(Xte), plain.cross_kernels(Xte), rtol=1e-12)
    # names that cannot name kernels are not used: non-strings, repeats, a wrong count
    for bad in ([0, 1, 2, 3, 4], ["a", "a", "b", "c", "d"], ["a", "b"]):
        assert KernelPool(recipe).fit(Xtr, feature_names=bad).names == plain.names
    # a refit on an array forgets the names; restore_fitted takes them back
    assert KernelPool(recipe).fit(pd.DataFrame(Xtr, columns=cols)).fit(Xtr).names == plain.names
    arrays = {"X_fit_": by_frame.X_fit_, "mean_": by_frame.mean_, "scale_": by_frame.scale_}
    restored = KernelPool(recipe).restore_fitted(D, cols, **arrays)
    assert restored.names == by_frame.names
    # the shared kernel input passes an estimator's feature_names_in_ through
    kin, _ = KernelInput.fit(KernelPool(recipe), Xtr, feature_names=cols)
    assert kin.names == by_frame.names


def test_specs_select_dataframe_columns_by_name(tmp_path):
    """pandas-native pools: ``features`` may name a DataFrame's columns; they are found at fit,
    give the same kernels as the column indices, and travel through save and load."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(30, 4)), columns=["age", "income", "height", "weight"])
    by_name = KernelPool([("gauss", 1.0, ["income", "weight"]), ("poly", 2, "age")]).fit(X)
    by_index = KernelPool([("gauss", 1.0, [1, 3]), ("poly", 2, 0)]).fit(X)
    assert by_name.names == ["gauss(s=1)[income,weight]", "poly(d=2)[age]"]
    np.testing.assert_array_equal(by_name.train_kernels(), by_index.train_kernels())
    np.testing.assert_array_equal(by_name.cross_kernels(X[:5]), by_index.cross_kernels(X[:5]))

    from bayesmkl import BM3KLClassifier

    y = (X["income"] > 0).astype(int)
    clf = BM3KLClassifier(
        kernels=KernelPool([("gauss", 1.0, ["income", "weight"]), ("linear", None, "all")]),
        num_warmup=5, num_samples=5, num_chains=1, calibration=None, progress_bar=False,
        random_state=0,
    ).fit(X, y)  # fmt: skip
    clf.save(tmp_path / "named.nc")
    loaded = BM3KLClassifier.load(tmp_path / "named.nc")
    assert loaded.kernel_names_ == ["gauss(s=1)[income,weight]", "linear[all]"]
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]), clf.predict_proba(X[:5]))


def test_column_names_that_x_does_not_have_are_refused():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.zeros((5, 2)) + np.arange(5)[:, None], columns=["a", "b"])
    with pytest.raises(ValueError, match=r"selects column\(s\) \['c'\] that X does not have"):
        KernelPool([("gauss", 1.0, ["a", "c"])]).fit(X)
    with pytest.raises(ValueError, match="selects columns by name, but X has no column names"):
        KernelPool([("gauss", 1.0, "a")]).fit(X.to_numpy())
    with pytest.raises(ValueError, match="all column indices or all column names"):
        KernelPool([("gauss", 1.0, ["a", 1])])
    with pytest.raises(NotFittedError, match="selects columns by name"):
        _ = KernelPool([("gauss", 1.0, "a")]).specs
