"""Seeds, loop bounds, weights, scales, baselines' constant kernels, the compilation cache and
packaging under the outside audit's inputs (issue 46, items 2 and 6-8; the reproducers in
../shared/repro/audit-turn4/)."""

import ast
import os
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
import sklearn.exceptions
from sklearn.datasets import load_breast_cancer, load_diabetes

import bayesmkl.baselines as BL
from bayesmkl import BM3KLClassifier, BM3KLRegressor, NonFinitePredictionError
from bayesmkl.cli import main
from bayesmkl.estimators._fitting import (
    drop_corrupt_cache_entries,
    enable_compilation_cache,
    make_rng_key,
    unsafe_cache_dir,
)
from bayesmkl.estimators._params import LOOP_BOUNDS

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(num_warmup=10, num_samples=10, num_chains=2, progress_bar=False, random_state=0)
ESTIMATORS = [BM3KLClassifier, BM3KLRegressor]


@pytest.fixture(scope="module")
def bc40():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:40], y[:40]


@pytest.fixture(scope="module")
def diabetes40():
    X, y = load_diabetes(return_X_y=True)
    return X[:40], y[:40]


# --------------------------------------------------------------------------------------------
# seeds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [2**63, 2**64 + 7, 10**40, np.uint64(2**63 + 5)])
def test_random_state_of_any_size_is_reduced(seed):
    """random_state_overflow.sh: seeds >= 2**63 ended in JAX's OverflowError."""
    key, used = make_rng_key(seed)
    assert 0 <= used < 2**63
    assert make_rng_key(seed)[1] == used  # deterministic
    assert make_rng_key(2**62)[1] == 2**62  # seeds JAX takes are used as they are


def test_cli_seed_refused_clearly(tmp_path, capsys):
    """random_state_overflow.sh: `--seed 1e20` / a huge seed ended in an internal error."""
    csv = tmp_path / "d.csv"
    X, y = load_breast_cancer(return_X_y=True)
    np.savetxt(csv, np.c_[X[:20], y[:20]], delimiter=",")
    with pytest.raises(SystemExit) as info:
        main(["fit", str(csv), "--seed", "1e20", "--out", str(tmp_path / "o")])
    assert info.value.code == 2
    assert "--seed: must be a non-negative integer written in digits" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# loop bounds and one chain
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("name", sorted(LOOP_BOUNDS))
def test_loop_parameters_have_upper_bounds(cls, name, bc40):
    """n_leapfrog_huge_hang.sh: n_leapfrog=10**9 passed validation and ran one compiled loop for
    hours; every run-length parameter is now bounded, in both estimators, before any work."""
    X, y = bc40
    est = cls(**{**FAST, name: LOOP_BOUNDS[name] + 1})
    with pytest.raises(ValueError, match=rf"{name}"):
        est.fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_one_chain_with_auto_run_length_is_refused(cls, bc40):
    """num_chains_1_auto_unreachable.py: one chain has no R-hat, so "auto" ran to max_samples."""
    X, y = bc40
    est = cls(**{**FAST, "num_chains": 1, "num_samples": "auto", "max_samples": 300})
    with pytest.raises(ValueError, match=r"num_chains=1 cannot be used with num_samples=\"auto\""):
        est.fit(X, y)


# --------------------------------------------------------------------------------------------
# weights and scales the arithmetic cannot take
# --------------------------------------------------------------------------------------------


def test_huge_sample_weight_refused_before_sampling(bc40):
    """sample_weight_1e300.py: a weight of 1e300 ran the sampler and then blamed it."""
    X, y = bc40
    sw = np.ones(40)
    sw[2] = 1e300
    with pytest.raises(ValueError, match=r"sample_weight\[2\] = 1e\+300 is above 1e\+06"):
        BM3KLClassifier(**FAST, calibration=None).fit(X, y, sample_weight=sw)


def test_regressor_tiny_y_scale_keeps_its_sd(diabetes40):
    """regressor_tiny_scale_std_zero.py: y * 1e-200 predicted a standard deviation of exactly 0
    (s_y² underflowed); outside the squarable range the sd is now computed in standardised
    units, so it scales with y."""
    X, y = diabetes40
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = BM3KLRegressor(**FAST).fit(X, y).predict(X[:3], return_std=True)
        tiny = BM3KLRegressor(**FAST).fit(X, y * 1e-200).predict(X[:3], return_std=True)
    assert np.all(tiny[1] > 0)
    np.testing.assert_allclose(tiny[0] / 1e-200, ref[0], rtol=1e-6)
    np.testing.assert_allclose(tiny[1] / 1e-200, ref[1], rtol=1e-6)


def test_regressor_zero_kernel_refused_before_sampling(diabetes40):
    """regressor_zero_kernel_kappa_inf.py: an all-zero precomputed stack divided by zero in the
    automatic kappa and ended, after a full run, in SamplerDivergenceError."""
    _, y = diabetes40
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(ValueError, match=r"zero everywhere"):
            BM3KLRegressor(kernels="precomputed", **FAST).fit(np.zeros((2, 40, 40)), y)


def test_regressor_huge_test_kernel_is_an_error(diabetes40):
    """regressor_precomputed_test_1e300_inf_sd.py: a test kernel entry of 1e300 gave a mean of
    1e301 and an sd of inf with only numpy's overflow warning."""
    X, y = diabetes40
    Xs = (X - X.mean(0)) / X.std(0)
    K = np.stack([Xs @ Xs.T / 10, np.exp(-((Xs[:, None] - Xs[None]) ** 2).sum(-1) / 20)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = BM3KLRegressor(kernels="precomputed", **FAST).fit(K, y)
    Kt = K[:, :3, :].copy()
    np.testing.assert_array_equal(np.isfinite(reg.predict(Kt, return_std=True)[1]), True)
    Kt[0, 1, 2] = 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(NonFinitePredictionError, match=r"not finite for 1 test row"):
            reg.predict(Kt, return_std=True)


# --------------------------------------------------------------------------------------------
# baselines: constant kernels
# --------------------------------------------------------------------------------------------

_BASELINES = ["AverageMKL", "BestSingleKernelSVM", "SimpleMKL", "LpMKL", "SoftMarginMKL", "SGMKL",
              "MLMKLSum", "MLMKLSA", "MKMMC", "BEMKL", "OBSCURE", "M3K", "BM3KLMAP"]  # fmt: skip


@pytest.mark.parametrize("name", _BASELINES)
@pytest.mark.parametrize("value", [0.0, 1.0])
def test_baselines_refuse_constant_kernels(name, value, bc40):
    """baselines_m3k_zero_kernel_nan.py, baselines_zero_kernel_no_warning.py: an all-zero stack
    gave NaN decision values (M3K), weights [0, 0] (OBSCURE) or one class, silently."""
    _, y = bc40
    K = np.full((2, 40, 40), value)
    with pytest.raises(ValueError, match=rf"{name}: the training kernel\(s\) .* are constant"):
        getattr(BL, name)(kernels="precomputed").fit(K, y)
    K[1] = np.eye(40)  # one informative kernel beside a constant one: still refused
    with pytest.raises(ValueError, match=r"\['K0'\]|\[0\]|constant"):
        getattr(BL, name)(kernels="precomputed").fit(K, y)


# --------------------------------------------------------------------------------------------
# compilation cache
# --------------------------------------------------------------------------------------------


def _entry(path, payload=b"x" * 5000):
    from jax._src.compilation_cache import compress_executable

    path.write_bytes(compress_executable(payload))
    return path


def test_truncated_cache_entry_is_removed_once(tmp_path):
    """cache_truncated_entry_never_repaired.sh: a truncated entry made every later fit warn and
    recompile; it is now removed (one warning) so JAX stores it afresh."""
    good = _entry(tmp_path / "jit_run-aaa-cache")
    bad = _entry(tmp_path / "jit_run-bbb-cache")
    bad.write_bytes(bad.read_bytes()[: len(bad.read_bytes()) // 2])
    with pytest.warns(UserWarning, match=r"removed 1 damaged compilation-cache entry"):
        assert drop_corrupt_cache_entries(tmp_path) == [bad]
    assert good.exists() and not bad.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert drop_corrupt_cache_entries(tmp_path) == []  # once: nothing left to say


def test_world_writable_cache_dir_is_not_used(tmp_path, monkeypatch):
    """security_world_writable_cache_accepted.sh: a 0777 cache directory was used silently."""
    import jax

    d = tmp_path / "ww"
    d.mkdir()
    d.chmod(0o777)
    assert "every user can write to it (mode 0777)" in unsafe_cache_dir(d)
    d.chmod(0o755)
    assert unsafe_cache_dir(d) is None
    d.chmod(0o777)
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        with pytest.warns(UserWarning, match=r"not using the compilation cache .*ww"):
            assert enable_compilation_cache(d) is None
        assert not jax.config.jax_compilation_cache_dir
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_cache_keeps_jaxs_threshold_unless_given_one(tmp_path):
    """The smallest compile time stored is JAX's setting (1 s unless set, for instance by
    $JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS) unless ``min_compile_time_secs`` is given."""
    import jax
    from jax._src import compilation_cache

    before = (jax.config.jax_compilation_cache_dir,
              jax.config.jax_persistent_cache_min_compile_time_secs)  # fmt: skip
    try:
        for given, expected in ((None, 0.25), (2.0, 2.0)):
            jax.config.update("jax_compilation_cache_dir", None)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.25)
            assert enable_compilation_cache(tmp_path, min_compile_time_secs=given) == str(tmp_path)
            assert jax.config.jax_persistent_cache_min_compile_time_secs == expected
    finally:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before[1])
        compilation_cache.reset_cache()  # the suite's cache again from the next compile


# --------------------------------------------------------------------------------------------
# figures, warnings, packaging
# --------------------------------------------------------------------------------------------


def test_unwritable_figure_names_the_file(tmp_path, monkeypatch):
    """A figure that cannot be written (full disk) said "No space left on device" without the
    file's name."""
    import matplotlib.figure

    from bayesmkl import plots
    from bayesmkl.cli import report

    fig = matplotlib.figure.Figure()
    for name in ("plot_kernel_weights", "plot_trace", "plot_sample_weights"):
        monkeypatch.setattr(plots, name, lambda clf: fig)

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    with pytest.raises(OSError, match=r"could not write the figure .*kernel_weights\.png: No"):
        report.write_figures(object(), tmp_path)


def test_package_convergence_warnings_are_sklearns():
    """The package's ConvergenceWarning is scikit-learn's (filters users have catch it): every
    module that names one imports it from sklearn.exceptions, and none defines its own."""
    for path in (ROOT / "bayesmkl").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert node.name != "ConvergenceWarning", path
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "ConvergenceWarning":
                        assert node.module == "sklearn.exceptions", path
    import bayesmkl.estimators._base as base  # where both estimators' fits warn

    assert base.ConvergenceWarning is sklearn.exceptions.ConvergenceWarning


def test_no_private_sklearn_import():
    """_check_sample_weight, a private scikit-learn function, was imported with no upper pin."""
    offenders = []
    for path in (ROOT / "bayesmkl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sklearn"):
                names = [a.name for a in node.names if a.name.startswith("_")]
                if names:
                    offenders.append(f"{path.name}: from {node.module} import {names}")
    assert offenders == []


def test_packaging_notebooks_extra_and_py_typed():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = " ".join(meta["project"]["optional-dependencies"]["notebooks"])
    for need in ("nbconvert", "ipykernel", "nbclient", "jupyter-client"):
        assert need in extra
    assert (ROOT / "bayesmkl" / "py.typed").exists()
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["bayesmkl"]
    assert os.path.getsize(ROOT / "bayesmkl" / "py.typed") == 0
