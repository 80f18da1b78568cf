"""Memory under the outside audit's sizes (issue 46; reproducers many_classes_oom.sh,
precomputed_huge_no_estimate.sh and predict_large_M_oom.sh in ../shared/repro/audit-turn4/).

Each refusal is checked under a small ``$BAYESMKL_MEMORY_LIMIT_GB``, with a spy that fails the
test if the work it must prevent starts (sampling, converting a precomputed stack), so nothing
large is allocated and nothing waits; blocked prediction is compared with the one-pass result."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

import bayesmkl.estimators._base as base_module
import bayesmkl.estimators._fitting as fitting_module
import bayesmkl.kernels.precomputed as precomputed_module
from bayesmkl import BM3KLClassifier, BM3KLRegressor, KernelPool
from bayesmkl.estimators._fitting import EXTRA_FIELDS, MAX_MONITORED_POINTS, RUN_CHUNK
from bayesmkl.estimators._memory import AUTO_MAX_KEPT, fit_memory, row_blocks
from bayesmkl.exceptions import ExtremeDecisionWarning, FitMemoryError
from bayesmkl.kernels._checks import KernelMemoryError, check_kernel_memory
from bayesmkl.kernels.precomputed import validate_precomputed

FAST = dict(num_warmup=20, num_samples=20, num_chains=2, progress_bar=False, random_state=0)
GiB = 2**30


def _limit(monkeypatch, nbytes: float) -> None:
    monkeypatch.setenv("BAYESMKL_MEMORY_LIMIT_GB", repr(nbytes / GiB))


def _no_sampling(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the chains started: the fit was not refused before sampling")

    monkeypatch.setattr(base_module, "sample_until_converged", fail)


# --------------------------------------------------------------------------------------------
# the draws a fit keeps (many_classes_oom.sh)
# --------------------------------------------------------------------------------------------


def test_many_classes_refused_before_sampling(monkeypatch):
    """many_classes_oom.sh: 1,000 classes for 1,200 rows passed the kernel check and asked XLA
    for 69.6 GB 35 s into the run. Here 40 classes of 2 rows under a 50 MiB limit that the
    kernels (2 × 80 × 80) fit in: refused before the chains start, with the size, the limit and
    what to change."""
    _no_sampling(monkeypatch)
    _limit(monkeypatch, 50 * 2**20)
    X = np.random.default_rng(0).normal(size=(80, 3))
    y = np.arange(80) % 40
    pool = KernelPool.bsvm16(gauss_widths=(1.0,), poly_degrees=(1,))
    check_kernel_memory(2, 80, 80, np.float64)  # the kernels fit
    est = BM3KLClassifier(pool, num_warmup=10, num_samples=1000, num_chains=2, progress_bar=False)
    with pytest.raises(FitMemoryError) as exc:
        est.fit(X, y)
    assert isinstance(exc.value, MemoryError) and isinstance(exc.value, ValueError)
    assert not isinstance(exc.value, KernelMemoryError)
    msg = str(exc.value)
    need = fit_memory(est, P=2, C=40, N=80, run_chunk=RUN_CHUNK)["need"]
    assert f"needs {need / GiB:.3g} GiB but only {50 / 1024:.3g} GiB are available" in msg
    assert "2 chains × 1000 draws kept" in msg and "BAYESMKL_MEMORY_LIMIT_GB" in msg
    assert "fewer classes (40 one-vs-all problems of 80 training points each)" in msg
    assert "40 system(s) of 80 × 80 per chain" in msg
    assert "fewer num_samples (now 1000)" in msg and "fewer chains (num_chains=2)" in msg
    # num_samples="auto" keeps at most AUTO_MAX_KEPT + a chunk per chain: the hint says so
    with pytest.raises(FitMemoryError, match="a smaller max_samples .*thins to at most 1000"):
        est.set_params(num_samples="auto").fit(X, y)
    # a landmark fit's systems are (M + 1)² with an N × (M + 1) design, not N × N
    with pytest.raises(FitMemoryError, match=r"40 system\(s\) of \(11\)² with a design of 80 × 11"):
        est.set_params(num_samples=1000, n_landmarks=10).fit(X, y)


def test_regressor_refused_before_sampling(monkeypatch):
    """The regressor shares the run (``BM3KLBase._sample``): a million draws per chain of 80
    points under a 50 MiB limit are refused before the chains start."""
    _no_sampling(monkeypatch)
    _limit(monkeypatch, 50 * 2**20)
    X, y = load_diabetes(return_X_y=True)
    est = BM3KLRegressor(num_warmup=10, num_samples=1_000_000, num_chains=2, progress_bar=False)
    with pytest.raises(FitMemoryError, match=r"BM3KLRegressor.fit \(2 chains × 1000000 draws"):
        est.fit(X[:80], y[:80])


def test_fit_memory_counts():
    """The estimate's parts: a fixed length keeps every draw, "auto" at most AUTO_MAX_KEPT and a
    chunk (or max_samples when smaller), a warm_start fit its stored draws too; the sampler's
    systems count the chains that run at once."""
    est = BM3KLClassifier(num_samples="auto", max_samples=5000, num_chains=4)
    m = fit_memory(est, P=16, C=1000, N=1200, run_chunk=RUN_CHUNK)
    per_draw = 2 * 16 + 4 * 1000 * 1200 + 1000 + len(EXTRA_FIELDS) + 500 * 1000
    assert m["per_draw"] == per_draw and m["kept"] == AUTO_MAX_KEPT + RUN_CHUNK
    assert m["draws"] == 8 * 4 * (AUTO_MAX_KEPT + RUN_CHUNK) * per_draw
    assert m["systems"] == 8 * 3 * 4 * 1000 * 1200**2
    assert fit_memory(est.set_params(max_samples=300), P=16, C=3, N=50, run_chunk=50)["kept"] == 300
    est.set_params(num_samples=200, chain_method="sequential")
    m = fit_memory(est, P=16, C=3, N=50, run_chunk=50, earlier=100)
    assert m["kept"] == 300 and m["at_once"] == 1
    # the audit's case (2 chains, 50 + 50 sweeps) needs more than the 69.6 GB XLA asked for
    audit = BM3KLClassifier(num_warmup=50, num_samples=50, num_chains=2)
    assert fit_memory(audit, P=16, C=1000, N=1200, run_chunk=RUN_CHUNK)["need"] > 69.6e9


# --------------------------------------------------------------------------------------------
# precomputed stacks (precomputed_huge_no_estimate.sh)
# --------------------------------------------------------------------------------------------


def _no_conversion(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the precomputed stack was converted or checked before the estimate")

    monkeypatch.setattr(fitting_module, "check_array", fail)
    monkeypatch.setattr(precomputed_module, "check_gram", fail)


@pytest.mark.parametrize("est", [BM3KLClassifier, BM3KLRegressor])
def test_precomputed_broadcast_view_refused_before_conversion(monkeypatch, est):
    """precomputed_huge_no_estimate.sh: a (1, 200000, 200000) broadcast view got no memory
    estimate and failed 30 s later allocating np.isfinite's 37 GiB mask. Here (1, 20000, 20000)
    under 1 GiB: refused with the kernels' wording before anything converts it."""
    _no_conversion(monkeypatch)
    _limit(monkeypatch, GiB)
    K = np.broadcast_to(np.float64(1.0), (1, 20_000, 20_000))
    with pytest.raises(KernelMemoryError) as exc:
        est(kernels="precomputed").fit(K, np.arange(20_000) % 2)
    msg = str(exc.value)
    assert "precomputed kernel stack (1 kernels × 20000 × 20000, float64" in msg
    need = (20_000**2 * 8 + 3 * 20_000**2 * 8) / GiB
    assert f"needs {need:.3g} GiB but only 1 GiB are available" in msg
    assert "float32 kernels" in msg and "fewer rows" in msg


def test_precomputed_list_refused_before_stacking(monkeypatch):
    """A list of Gram matrices counts as the stack it becomes (validate_precomputed, which the
    MKL baselines and KernelInput use, checks before stacking or checking a matrix)."""
    _no_conversion(monkeypatch)
    _limit(monkeypatch, GiB)
    mats = [np.broadcast_to(np.float32(1.0), (12_000, 12_000))] * 3
    with pytest.raises(KernelMemoryError, match=r"3 kernels × 12000 × 12000, float32"):
        validate_precomputed(mats)
    with pytest.raises(KernelMemoryError, match=r"3 kernels × 12000 × 12000, float32"):
        BM3KLClassifier(kernels="precomputed").fit(mats, np.arange(12_000) % 2)


# --------------------------------------------------------------------------------------------
# prediction in blocks of rows (predict_large_M_oom.sh)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    X, y = load_breast_cancer(return_X_y=True)
    Xr, yr = load_diabetes(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = BM3KLClassifier(**FAST).fit(X[:40], y[:40])
        reg = BM3KLRegressor(**FAST).fit(Xr[:40], yr[:40])
    return clf, X[40:100], reg, Xr[40:100]


class _Spy:
    """Records the rows of every call of ``KernelPool.cross_kernels`` and the ``M`` of every
    kernel-memory check."""

    def __init__(self, monkeypatch):
        import bayesmkl.kernels._compute as compute

        self.rows, self.checked = [], []
        real_cross, real_check = KernelPool.cross_kernels, compute.check_kernel_memory

        def cross(pool, Xnew):
            self.rows.append(len(Xnew))
            return real_cross(pool, Xnew)

        def check(P, M, N, dtype, what="kernel tensor"):
            self.checked.append(M)
            return real_check(P, M, N, dtype, what)

        monkeypatch.setattr(KernelPool, "cross_kernels", cross)
        monkeypatch.setattr(compute, "check_kernel_memory", check)


def _block_limit(monkeypatch, est, rows: int) -> None:
    """A memory limit under which a prediction computes ``rows`` test rows at a time."""
    _limit(monkeypatch, 2 * rows * est._bytes_per_test_row())


def test_classifier_predicts_in_row_blocks(fitted, monkeypatch):
    """predict_large_M_oom.sh: predict_proba on 500,000 rows asked XLA for 64 draws × rows × N at
    once. Under a limit that holds 25 rows, 60 rows are computed in 3 blocks (kernels and their
    memory check included), with the predictions of one pass."""
    clf, X, _, _ = fitted
    one = {
        "proba": clf.predict_proba(X, return_mcse=True),
        "log": clf.predict_log_proba(X),
        "f": clf.decision_function(X),
        "label": clf.predict(X),
        "F": clf.decision_draws(X),
        "P": clf.proba_draws(X),
    }
    spy = _Spy(monkeypatch)
    _block_limit(monkeypatch, clf, 25)
    assert row_blocks(60, clf._bytes_per_test_row()) == [slice(0, 25), slice(25, 50), slice(50, 60)]
    blocked = {
        "proba": clf.predict_proba(X, return_mcse=True),
        "log": clf.predict_log_proba(X),
        "f": clf.decision_function(X),
        "label": clf.predict(X),
        "F": clf.decision_draws(X),
        "P": clf.proba_draws(X),
    }
    assert spy.rows == [25, 25, 10] * 6 and spy.checked == spy.rows
    for key in ("log", "f", "F", "P"):
        np.testing.assert_allclose(blocked[key], one[key], rtol=1e-12, atol=0, err_msg=key)
    for got, want in zip(blocked["proba"], one["proba"], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(blocked["label"], one["label"])


def test_regressor_predicts_in_row_blocks(fitted, monkeypatch):
    """The regressor's predictive mean, sd, quantiles, intervals and function draws, 3 blocks of
    rows against one pass."""
    _, _, reg, X = fitted
    one = [reg.predict(X, return_std=True), reg.predict_quantiles(X), reg.predict_interval(X),
           reg.function_draws(X)]  # fmt: skip
    spy = _Spy(monkeypatch)
    _block_limit(monkeypatch, reg, 25)
    blocked = [reg.predict(X, return_std=True), reg.predict_quantiles(X),
               reg.predict_interval(X), reg.function_draws(X)]  # fmt: skip
    assert spy.rows == [25, 25, 10] * 4
    for got, want in zip(blocked, one, strict=True):
        for g, w in zip(*(np.atleast_1d(v) if isinstance(v, tuple) else (v,) for v in (got, want)),
                        strict=True):  # fmt: skip
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)


def test_blocked_prediction_numbers_rows_of_the_whole_input(fitted, monkeypatch):
    """Warnings about extreme decision values are given once, for the rows of the whole input,
    as by one pass; a non-finite row is named by its row in the whole input."""
    clf, X, _, _ = fitted
    X = X.copy()
    X[[7, 41], 0] = 1e8  # far outside the training range: extreme kernel values
    with pytest.warns(ExtremeDecisionWarning) as rec_one:
        one = clf.predict_proba(X)
    _block_limit(monkeypatch, clf, 25)
    with pytest.warns(ExtremeDecisionWarning) as rec_blocked:
        blocked = clf.predict_proba(X)
    assert sorted(str(w.message) for w in rec_blocked) == sorted(str(w.message) for w in rec_one)
    assert any("[7, 41]" in str(w.message) for w in rec_blocked)
    np.testing.assert_allclose(blocked, one, rtol=1e-12, atol=0)
    Xbad = X.copy()
    Xbad[[7, 41], 0] = 0.0
    Xbad[41, 1] = 1e200  # the polynomial kernels overflow on this row
    with pytest.raises(ValueError, match=r"not finite") as exc:
        clf.predict_proba(Xbad)
    assert "(first: row 16," in str(exc.value)  # 41 - 25
    assert str(exc.value).endswith("(rows numbered from the first row of the block of test rows "
                                   "25 to 49)")  # fmt: skip
    monkeypatch.delenv("BAYESMKL_MEMORY_LIMIT_GB")
    with pytest.raises(ValueError, match=r"not finite.*\(first: row 41,"):
        clf.predict_proba(Xbad)


def test_draw_entries_count_what_a_fit_stores(fitted):
    """The estimate's values per draw are those a fit stores: its posterior sites, the extra
    fields and the monitored decision values (so a new site cannot escape the estimate)."""
    clf, _, reg, _ = fitted
    for est in (clf, reg):
        P, C, N = est.posterior_["w"].shape[-1], est.posterior_["b"].shape[-1], est.y_train_.size
        if est is reg:
            C = 1
        stored = sum(int(np.prod(v.shape[2:])) for v in est.posterior_.values())
        monitored = min(N, MAX_MONITORED_POINTS) * C
        assert est._draw_entries(P, C, N) == stored + len(EXTRA_FIELDS) + monitored
        assert len(est.sample_stats_) == len(EXTRA_FIELDS)


def test_draw_entries_of_a_landmark_fit_count_its_landmark_columns():
    """A landmark fit stores a, ν, ς over its M landmarks and no λ (one value per point): the
    estimate counts them so, and its sampler systems are (M + 1)² with N × (M + 1) designs, not
    N²."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    clf = BM3KLClassifier(n_landmarks=12, num_warmup=10, num_samples=6, num_chains=2,
                          calibration=None, random_state=0, progress_bar=False)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    P, C, N, M = len(clf.kernel_names_), clf.posterior_["b"].shape[-1], len(y), 12
    assert clf.posterior_["a"].shape[-1] == M and "lam" not in clf.posterior_
    stored = sum(int(np.prod(v.shape[2:])) for v in clf.posterior_.values())
    monitored = min(N, MAX_MONITORED_POINTS) * C
    assert clf._draw_entries(P, C, N, M) == stored + len(EXTRA_FIELDS) + monitored
    exact = fit_memory(clf, P=P, C=C, N=N, run_chunk=RUN_CHUNK)
    landmark = fit_memory(clf, P=P, C=C, N=N, M=M, run_chunk=RUN_CHUNK)
    assert landmark["systems"] == 8.0 * 2 * C * (3 * (M + 1) ** 2 + N * (M + 1))
    assert landmark["systems"] < exact["systems"] and landmark["draws"] < exact["draws"]


def test_sweep_memory_estimate_follows_the_compiled_sweep():
    """The estimate of one sweep's working memory (the (a, b) systems and the collapsed move's
    gathered kernel columns, for the chains that run at once) is within 25% of what XLA plans
    for the compiled sweep of the default move, at a landmark shape with several problems
    (8 kernels, 4 problems, 3,000 points, 100 landmarks, 2 vectorised chains). Without the
    gathered columns the estimate was a tenth of XLA's plan."""
    import jax
    import jax.numpy as jnp

    from bayesmkl.config import x64_scope
    from bayesmkl.sampler.sampler import BM3KL
    from bayesmkl.sampler.state import ChainState
    from bayesmkl.sampler.sweep import build_sweep

    P, C, N, M, chains = 8, 4, 3000, 100, 2
    est = BM3KLClassifier(num_chains=chains, num_samples=50)
    m = fit_memory(est, P=P, C=C, N=N, M=M, run_chunk=RUN_CHUNK)
    assert m["at_once"] == chains and m["n_active"] == 32 and m["collapsed"] > m["systems"]
    rng = np.random.default_rng(0)
    with x64_scope():
        K = jnp.asarray(rng.random((P, N, M)))
        delta = jnp.asarray(np.where(rng.random((C, N)) < 0.5, -1.0, 1.0))
        kernel = BM3KL(landmarks=True)
        state = kernel.init(jax.random.split(jax.random.key(0), chains), 10, None, (K, delta), {})
        sweep = build_sweep(kernel.likelihood, kernel.config, 10)
        vsweep = jax.vmap(lambda cs, K, t: ChainState.join(*sweep(cs.state, K, t)),
                          in_axes=(0, None, None))  # fmt: skip
        plan = jax.jit(vsweep).lower(state, K, delta).compile().memory_analysis()
    ratio = plan.temp_size_in_bytes / (m["systems"] + m["collapsed"])
    assert 0.8 < ratio < 1.25, ratio


def test_after_fit_memory_holds_the_map_subset_unless_the_map_is_cross_fitted():
    """After sampling a LOO-calibrated fit holds the decision values of at most
    ``AFTER_FIT_ENTRIES`` (or ``MIN_MAP_POINTS`` points'), plus the log-likelihood and LOO
    weights at every point; a cross-fitted map holds its folds' draws at every point."""
    from bayesmkl.posterior.classification import AFTER_FIT_ENTRIES, MIN_MAP_POINTS

    S, C, N = 4_200, 10, 7_694  # penbased's 7,694 training rows, 4 × 1,050 draws
    loo = BM3KLClassifier()._after_fit_entries(C, N, S)
    held = AFTER_FIT_ENTRIES // (S * C)
    assert MIN_MAP_POINTS < held < N
    assert loo == S * ((2 * C + 3 * C) * held + 2 * N)
    assert BM3KLClassifier(calibration="cv")._after_fit_entries(C, N, S) == S * (5 * C + 2) * N
    small = BM3KLClassifier()._after_fit_entries(1, 398, S)  # every point, as before
    assert small == S * ((2 + 3 * 2) * 398 + 2 * 398)
