"""``BM3KLClassifier``: probabilities, prediction rules, reproducibility, validation, accuracy.

Runtime: JAX compiles the sampler once per data shape and configuration, so every fit here
that can share a program does (same N = 100 training points, 16 kernels, one binary
classifier, 40 + 10 sweeps); the persistent compilation cache turns the later fits into loads.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split

from bayesmkl import BM3KLClassifier
from bayesmkl.datasets import load_demo
from bayesmkl.estimators._fitting import make_rng_key

#: The shared small configuration (same compiled program in every test module).
SMALL = dict(num_warmup=40, num_samples=10, num_chains=2, progress_bar=False)


#: A tiny configuration for tests of the output (names, DataTree, plots, warnings): 40 points,
#: 2 features, 3 kernels, 2 chains of 30 draws, raw probabilities (no calibration refits).
TINY = dict(num_warmup=20, num_samples=30, num_chains=2, calibration=None, progress_bar=False,
            random_state=0)  # fmt: skip


def tiny_pool():
    """One Gaussian per feature and a linear kernel on all: P = d + 1."""
    from bayesmkl import KernelPool
    from bayesmkl.kernels import KernelSpec

    return KernelPool([KernelSpec("gauss", 1.0, "each"), KernelSpec("poly", 1)])


def tiny_data(n=40, seed=3):
    """``(X (n, 2), y (n,))``: two overlapping classes (so some training points are misfit)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] + 0.8 * rng.normal(size=n) > 0).astype(int)


def small_data():
    """100 training and 40 test points of the breast-cancer data (both classes present)."""
    X, y, _ = load_demo()
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))[:140]
    return X[idx[:100]], y[idx[:100]], X[idx[100:]], y[idx[100:]]


@pytest.fixture(scope="module")
def data():
    return small_data()


@pytest.fixture(scope="module")
def fitted(data):
    Xtr, ytr, _, _ = data
    return BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr)


def _psi(f, gamma0):
    s = np.sqrt(1.0 + 2.0 * gamma0)
    return 2.0 * f + 2.0 * s * np.clip(f, -1.0, 1.0)


# --------------------------------------------------------------------------------------------
# probabilities and decision rules
# --------------------------------------------------------------------------------------------


def test_fitted_attributes(fitted, data):
    P = 16
    assert fitted.classes_.tolist() == [0, 1]
    assert fitted.n_features_in_ == 30
    assert len(fitted.kernel_names_) == P and fitted.kernel_names_[-1] == "poly(d=3)[all]"
    post = fitted.posterior_
    assert post["w"].shape == (2, 10, P) and post["e"].shape == (2, 10, P)
    assert post["a"].shape == (2, 10, 1, 100) and post["b"].shape == (2, 10, 1)
    np.testing.assert_allclose(post["w"].sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(fitted.kernel_weights_, post["w"].mean(axis=(0, 1)))
    assert set(fitted.sample_stats_) == {
        "acceptance_rate",
        "diverging",
        "potential_energy",
        "step_size",
    }
    assert all(v.shape == (2, 10) for v in fitted.sample_stats_.values())
    assert fitted.n_iter_ == 50


def test_proba_rows_sum_to_one(fitted, data):
    _, _, Xte, _ = data
    p = fitted.predict_proba(Xte)
    assert p.shape == (40, 2)
    assert np.all((p >= 0) & (p <= 1))
    assert np.max(np.abs(p.sum(axis=1) - 1.0)) <= 1e-12


def test_predict_is_argmax_of_proba(fitted, data):
    _, _, Xte, yte = data
    p = fitted.predict_proba(Xte)
    np.testing.assert_array_equal(fitted.predict(Xte), fitted.classes_[np.argmax(p, axis=1)])
    assert fitted.score(Xte, yte) >= 0.8  # breast cancer is easy; a broken fit is near 0.6


def test_binary_proba_is_mean_sigmoid_psi(fitted, data):
    """Raw rule (calibration=None): p(class 1) = mean over draws of σ(ψ(f)), recomputed here
    with numpy from posterior_; the calibrated default uses σ(T·f + β) with the fitted map."""
    _, _, Xte, _ = data
    Kt = np.asarray(fitted.kernel_input_.pool.cross_kernels(Xte))  # (P, M, N)
    w = fitted.posterior_["w"].reshape(-1, Kt.shape[0])
    a = fitted.posterior_["a"].reshape(w.shape[0], -1)  # C = 1
    b = fitted.posterior_["b"].reshape(-1)
    f = np.stack([a[s] @ np.tensordot(w[s], Kt, axes=1).T + b[s] for s in range(len(w))])
    assert fitted.gamma0_ == 1.0  # the default prior's γ0
    p1 = np.mean(1.0 / (1.0 + np.exp(-_psi(f, 1.0))), axis=0)
    raw = copy.deepcopy(fitted).set_params(calibration=None)
    np.testing.assert_allclose(raw.predict_proba(Xte)[:, 1], p1, rtol=0, atol=1e-12)
    # the rule uses the fit's γ0 (gamma0_), not a parameter changed after fitting
    raw.set_params(gamma0=100.0)
    assert raw.gamma0_ == 1.0
    np.testing.assert_allclose(raw.predict_proba(Xte)[:, 1], p1, rtol=0, atol=1e-12)
    T, beta = fitted.calibrator_.temperature, fitted.calibrator_.intercept
    assert beta == 0.0  # the default map is a temperature alone (calibration_map.md)
    p1_cal = np.mean(1.0 / (1.0 + np.exp(-(T * f + beta))), axis=0)
    np.testing.assert_allclose(fitted.predict_proba(Xte)[:, 1], p1_cal, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fitted.decision_function(Xte), f.mean(axis=0), atol=1e-12)


def test_decision_function_and_mean_f_rule(fitted, data):
    _, _, Xte, _ = data
    F = fitted.decision_function(Xte)
    assert F.shape == (40,)
    clf = copy.deepcopy(fitted).set_params(decision="mean_f")
    np.testing.assert_array_equal(clf.predict(Xte), fitted.classes_[(F > 0).astype(int)])
    # per draw the two rules agree (ψ is increasing), so on an easy set they mostly agree
    assert np.mean(clf.predict(Xte) == fitted.predict(Xte)) >= 0.9


def test_draw_arrays(fitted, data):
    _, _, Xte, _ = data
    F = fitted.decision_draws(Xte)
    Pd = fitted.proba_draws(Xte)
    assert F.shape == (20, 40, 1) and Pd.shape == (20, 40, 2)
    np.testing.assert_allclose(Pd.mean(axis=0), fitted.predict_proba(Xte), atol=1e-15)


# --------------------------------------------------------------------------------------------
# reproducibility, label types, precomputed kernels
# --------------------------------------------------------------------------------------------


def test_same_seed_identical_draws_other_seed_differs(fitted, data):
    Xtr, ytr, _, _ = data
    again = BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, ytr)
    for k in fitted.posterior_:
        np.testing.assert_array_equal(again.posterior_[k], fitted.posterior_[k])
    other = BM3KLClassifier(random_state=1, **SMALL).fit(Xtr, ytr)
    assert not np.array_equal(other.posterior_["w"], fitted.posterior_["w"])
    assert again.random_seed_ == 0 and other.random_seed_ == 1


def test_random_state_kinds():
    k1, s1 = make_rng_key(np.random.RandomState(3))
    k2, s2 = make_rng_key(np.random.RandomState(3))
    assert s1 == s2
    g1 = make_rng_key(np.random.default_rng(5))[1]
    assert g1 == make_rng_key(np.random.default_rng(5))[1]
    assert make_rng_key(7)[1] == 7
    assert isinstance(make_rng_key(None)[1], int)
    with pytest.raises(ValueError, match="random_state"):
        make_rng_key("seed")


def test_string_labels(fitted, data):
    """Labels of any type: the same codes (classes sorted) give the same draws."""
    Xtr, ytr, Xte, _ = data
    names = np.array(["a-malignant", "b-benign"])  # sorted like 0, 1
    clf = BM3KLClassifier(random_state=0, **SMALL).fit(Xtr, names[ytr])
    assert clf.classes_.tolist() == ["a-malignant", "b-benign"]
    np.testing.assert_array_equal(clf.predict(Xte), names[fitted.predict(Xte)])


def test_precomputed_matches_features(fitted, data):
    Xtr, ytr, Xte, _ = data
    pool = fitted.kernel_input_.pool
    K = pool.train_kernels()
    clf = BM3KLClassifier(kernels="precomputed", random_state=0, **SMALL).fit(K, ytr)
    np.testing.assert_array_equal(clf.posterior_["w"], fitted.posterior_["w"])
    Kt = pool.cross_kernels(Xte)
    np.testing.assert_allclose(clf.predict_proba(Kt), fitted.predict_proba(Xte), atol=1e-12)
    assert clf.kernel_names_ == [f"K{m}" for m in range(16)]
    assert not hasattr(clf, "n_features_in_")
    with pytest.raises(ValueError, match=r"\(P, M, N\)"):
        clf.predict(Kt[:, :, :50])
    with pytest.raises(ValueError, match=r"\(P, M, N\)"):
        clf.predict(Kt[:3])
    with pytest.raises(ValueError, match=r"\(P, M, N\)"):
        clf.predict(Kt[0])


# --------------------------------------------------------------------------------------------
# validation (no sampling happens in these)
# --------------------------------------------------------------------------------------------


@pytest.fixture()
def tiny():
    rng = np.random.default_rng(1)
    return rng.normal(size=(12, 3)), np.array([0, 1] * 6)


def test_nan_and_inf_in_X(tiny):
    X, y = tiny
    X = X.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        BM3KLClassifier().fit(X, y)
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        BM3KLClassifier().fit(X, y)


def test_one_class(tiny):
    X, _ = tiny
    with pytest.raises(ValueError, match="single class"):
        BM3KLClassifier().fit(X, np.zeros(12))


def test_length_mismatch(tiny):
    X, y = tiny
    with pytest.raises(ValueError, match="different lengths"):
        BM3KLClassifier().fit(X, y[:-1])


def test_predict_before_fit(tiny):
    X, _ = tiny
    for method in ("predict", "predict_proba", "decision_function", "to_datatree"):
        with pytest.raises(NotFittedError, match="not fitted"):
            getattr(BM3KLClassifier(), method)(*(() if method == "to_datatree" else (X,)))


def test_wrong_precomputed_shapes(tiny):
    _, y = tiny
    with pytest.raises(ValueError, match=r"\(P, N, N\)"):
        BM3KLClassifier(kernels="precomputed").fit(np.zeros((2, 12, 11)), y)
    with pytest.raises(ValueError, match=r"\(P, N, N\)"):
        BM3KLClassifier(kernels="precomputed").fit(np.eye(12), y)
    with pytest.raises(ValueError, match="different lengths"):
        BM3KLClassifier(kernels="precomputed").fit(np.stack([np.eye(10)] * 2), y)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        (dict(sampler="nuts"), "unknown sampler='nuts'"),
        (dict(kernels="rbf"), "kernels='rbf' is not understood"),
        (dict(kernels=3), "kernels=3 is not understood"),
        (dict(num_samples=0), r"num_samples must be an integer in \[1, 1000000\]"),
        (dict(num_warmup=-1), r"num_warmup must be an integer in \[0, 100000\]"),
        (dict(num_chains=0), r"num_chains must be an integer in \[1, 256\]"),
        (dict(gamma0=-1.0), "gamma0 must be a number in"),
        (dict(beta_a=0.0), "beta_a must be a number in"),
        (dict(eta=[1.0, -1.0]), "every entry of eta must be a number in"),
        (dict(binary_mode="ovo"), "binary_mode must be one of"),
        (dict(decision="vote"), "decision must be one of"),
        (dict(chain_method="threads"), "chain_method must be one of"),
        (dict(kernel_dtype="float16"), "kernel_dtype must be one of"),
    ],
)
def test_bad_parameters(tiny, params, match):
    X, y = tiny
    with pytest.raises(ValueError, match=match):
        BM3KLClassifier(**params).fit(X, y)


def test_params_are_stored_verbatim():
    clf = BM3KLClassifier(sampler="bogus", num_samples=0)  # validated in fit, not __init__
    assert clf.get_params()["sampler"] == "bogus" and clf.num_samples == 0


# --------------------------------------------------------------------------------------------
# the paper's protocol on Sonar (shared data)
# --------------------------------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.slow
def test_sonar_accuracy(uci_dir):
    from bayesmkl.datasets import load_uci

    X, y = load_uci("sonar", data_dir=uci_dir)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    clf = BM3KLClassifier(  # the paper's run length (180 + 20 sweeps, one chain), exact move
        kernels="bsvm16", calibration=None, random_state=0, progress_bar=False,
        num_warmup=180, num_samples=20, num_chains=1,
    ).fit(Xtr, ytr)  # fmt: skip
    acc = clf.score(Xte, yte)
    print(f"sonar 70/30 (seed 0) test accuracy: {acc:.4f}")
    assert acc >= 0.80


# --------------------------------------------------------------------------------------------
# data-driven run length
# --------------------------------------------------------------------------------------------


def test_auto_run_length_reports_the_budget_it_hit(data):
    """An unreachable target stops at ``max_samples``, warns with the numbers, and the
    attributes say how many sweeps ran (the calibration refits reuse that length)."""
    from sklearn.exceptions import ConvergenceWarning

    Xtr, ytr, _, _ = data
    clf = BM3KLClassifier(
        random_state=0, num_warmup=40, num_samples="auto", num_chains=2, progress_bar=False,
        ess_target=1e9, max_samples=500, calibration=None,
    )  # fmt: skip
    with pytest.warns(ConvergenceWarning, match="max_samples budget after 500 sweeps"):
        clf.fit(Xtr, ytr)
    rep = clf.run_report_
    assert not rep.converged and rep.stopped_by == "max_samples" and rep.num_samples == 500
    assert clf.n_iter_ == 540
    assert clf.posterior_["w"].shape == (2, 500, 16)
    assert rep.worst.startswith(("w[", "f["))


def test_fixed_run_length_still_reports_diagnostics(fitted):
    rep = fitted.run_report_
    assert rep.stopped_by == "num_samples" and rep.num_samples == 10
    assert np.isfinite(rep.ess_bulk_min) and rep.converged == (
        rep.rhat_max <= 1.01 and rep.ess_bulk_min >= 400
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"num_samples": "forever"}, "num_samples"),
        ({"rhat_target": 1.0}, "rhat_target"),
        ({"ess_target": 0}, "ess_target"),
        ({"max_samples": 0}, "max_samples"),
        ({"max_time": -1.0}, "max_time"),
    ],
)
def test_run_length_parameters_are_validated(data, params, match):
    Xtr, ytr, _, _ = data
    with pytest.raises(ValueError, match=match):
        BM3KLClassifier(progress_bar=False, **params).fit(Xtr, ytr)


def test_dataframe_columns_name_the_kernels():
    """Per-feature kernels of a DataFrame fit are named by column, for BM3KL and a baseline, in
    ``kernel_names_`` and in the DataTree's ``kernel`` coordinate (issue 23)."""
    pd = pytest.importorskip("pandas")
    from bayesmkl.baselines import AverageMKL

    X, y = tiny_data()
    df = pd.DataFrame(X, columns=["age", "dose"])
    names = ["gauss(s=1)[age]", "gauss(s=1)[dose]", "poly(d=1)[all]"]
    clf = BM3KLClassifier(kernels=tiny_pool(), **TINY).fit(df, y)
    assert clf.kernel_names_ == names
    assert clf.to_datatree()["posterior"]["w"].coords["kernel"].values.tolist() == names
    assert AverageMKL(kernels=tiny_pool()).fit(df, y).kernel_names_ == names
    assert BM3KLClassifier(kernels=tiny_pool(), **TINY).fit(X, y).kernel_names_[0] == (
        "gauss(s=1)[x0]"
    )
