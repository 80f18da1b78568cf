"""Issue 22: inputs of an outside audit that hung or gave silently wrong results.

Each test failed on the code before the fix (a hang shows up as a subprocess timeout or an
alarm, never as a hung test run). Fits are avoided where a cheaper route shows the same
thing: the prediction and file tests use a classifier assembled from kernel-ridge weights
(:func:`_assembled`, no sampling); one tiny fit (N = 30, 2 kernels, 2 + 2 sweeps) checks that
a capped loop of the sampler reaches the user as an error.
"""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesmkl
from bayesmkl import BM3KLClassifier
from bayesmkl.cli import main
from bayesmkl.config import x64_scope
from bayesmkl.exceptions import SamplerDivergenceError
from bayesmkl.kernels.input import KernelInput
from bayesmkl.posterior.checks import check_draws

#: The checkout whose ``bayesmkl`` is under test (the subprocesses import the same one).
ROOT = Path(bayesmkl.__file__).resolve().parent.parent


def _run_python(code: str, timeout: float = 150.0) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter on this checkout; a hang fails the test."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {timeout:.0f} s (the hang of issue 22)")


@contextlib.contextmanager
def _alarm(seconds: int):
    """Fail a pure-Python loop that runs longer than ``seconds`` (instead of hanging)."""

    def handler(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (the hang of issue 22)")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _assembled(X, y, kernels="bsvm16", draws=4):
    """A fitted BM3KLClassifier without sampling: kernel-ridge sample weights on the average
    kernel, repeated as ``draws`` identical draws (raw probability rule)."""
    kin, K = KernelInput.fit(kernels, X)
    P, N, _ = K.shape
    classes = np.unique(y)
    delta = np.where(y == classes[1], 1.0, -1.0)
    w = np.full(P, 1.0 / P)
    a = np.linalg.solve(np.tensordot(w, K, axes=1) + np.eye(N), delta)
    rep = lambda x: np.broadcast_to(x, (1, draws) + np.shape(x)).copy()  # noqa: E731
    ones = np.ones((1, N))
    posterior = {"w": rep(w), "e": rep(w), "a": rep(a[None]), "b": rep(np.zeros(1)),
                 "lam": rep(ones), "nu": rep(ones), "varsigma": rep(ones)}  # fmt: skip
    zeros = np.zeros((1, draws))
    stats = {"acceptance_rate": zeros + 1, "diverging": zeros.astype(bool),
             "potential_energy": zeros, "step_size": zeros + 1}  # fmt: skip
    extra = {} if kin.pool is None else {"n_features_in_": X.shape[1]}
    clf = BM3KLClassifier(kernels=kernels, calibration=None, progress_bar=False)
    return clf._set_fitted(
        kernel_input=kin, classes=classes, y_train=y, posterior=posterior, sample_stats=stats,
        n_iter=draws, random_seed=0, **extra,
    )  # fmt: skip


def _write_csv(path, X, labels=None):
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        for i, row in enumerate(X):
            wr.writerow([repr(float(v)) for v in row] + ([labels[i]] if labels is not None else []))


# --------------------------------------------------------------------------------------------
# 1 (a): every loop ends; a capped loop ends in an error
# --------------------------------------------------------------------------------------------


def test_slice_segment_with_nan_returns_nan_at_once():
    """``_slice_segment(key, 0.3, nan, lambda x: -x)`` looped forever."""
    out = _run_python("""
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from bayesmkl.sampler.simplex import _slice_segment
        print("x =", float(_slice_segment(jax.random.key(0), 0.3, np.nan, lambda x: -x)))
    """)
    assert out.returncode == 0, out.stderr
    assert "x = nan" in out.stdout


def test_sampler_with_tiny_eta_ends():
    """The BM3KL kernel itself (no estimator validation) with η = 1e-6: 3 + 3 sweeps hung
    (the scale draw underflows, the state becomes NaN and the slice sampler looped on it)."""
    out = _run_python("""
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from numpyro.infer import MCMC
        from bayesmkl.model.classification import Hyper
        from bayesmkl.sampler.sampler import BM3KL
        rng = np.random.default_rng(0)
        X = rng.normal(size=(30, 2))
        K = np.stack([X @ X.T, np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))])
        delta = np.where(X[:, :1].T > 0, 1.0, -1.0)
        mcmc = MCMC(BM3KL(*Hyper.paper(eta=1e-6), move="gibbs"), num_warmup=3, num_samples=3,
                    progress_bar=False, jit_model_args=True)
        mcmc.run(jax.random.key(0), K, delta)
        w = np.asarray(mcmc.get_samples()["w"])
        print("finite:", bool(np.isfinite(w).all()))
    """)
    assert out.returncode == 0, out.stderr
    assert "finite: False" in out.stdout  # ended, with NaN that check_draws refuses


def test_slice_segment_cap_gives_nan_and_flag(monkeypatch):
    from bayesmkl.sampler import simplex

    monkeypatch.setattr(simplex, "SLICE_MAX_STEPS", 1)
    with x64_scope():
        x, capped = simplex._slice_segment(
            jax.random.key(3), 0.3, 1.0, lambda x: -1e6 * (x - 0.3) ** 2, return_capped=True
        )
    assert bool(capped) and np.isnan(float(x))


def test_truncated_normal_cap_gives_nan_and_flag(monkeypatch):
    from bayesmkl.sampler import simplex

    monkeypatch.setattr(simplex, "REJECT_MAX_ROUNDS", 0)
    with x64_scope():  # a narrow interval: the uniform-rejection route
        x, capped = simplex.truncated_normal(
            jax.random.key(0), 0.0, 1.0, 0.5, 0.501, return_capped=True
        )
    assert bool(capped) and np.isnan(float(x))


def test_nu_slice_cap_keeps_x0_only_when_the_bracket_collapsed():
    """The ν slice sampler's cap: a bracket of rounding width (a conditional too peaked for
    float64) keeps x0 unflagged; NaN input gives NaN."""
    from bayesmkl.sampler.tpbn import slice_stepping_out

    with x64_scope():
        peaked = lambda th: 1e20 - (th - 1.5) ** 2  # noqa: E731  log y rounds to log π(x0)
        x, capped = slice_stepping_out(jax.random.key(0), 1.5, peaked, return_capped=True)
        assert float(x) == 1.5 and not bool(capped)
        x, capped = slice_stepping_out(
            jax.random.key(0), 1.5, lambda th: jnp.nan * th, return_capped=True
        )
        assert np.isnan(float(x)) and not bool(capped)


def test_capped_loop_reaches_the_user_as_an_error(monkeypatch):
    """A sweep whose w slice sampler stops at its cap: fit raises SamplerDivergenceError
    naming the loop (the flag travels in BM3KLState.capped)."""
    from bayesmkl.sampler import simplex

    monkeypatch.setattr(simplex, "SLICE_MAX_STEPS", 1)
    X, y = _data(30)
    K = np.stack([X @ X.T, np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))])
    clf = BM3KLClassifier(
        kernels="precomputed", eta=0.5, sampler="gibbs", num_warmup=2, num_samples=2,
        num_chains=1, calibration=None, progress_bar=False, random_state=0,
    )  # fmt: skip
    with pytest.raises(SamplerDivergenceError, match="slice sampler of the kernel weights w"):
        clf.fit(K, y)


def test_too_few_draws_for_psis_warn_instead_of_crashing():
    """``num_samples=1`` (or 2) on 2 chains ended the default fit in an IndexError from
    ArviZ's Pareto smoothing (an empty tail); now the LOO map says why it is unreliable."""
    X, y = _data(30)
    clf = BM3KLClassifier(
        num_warmup=2, num_samples=1, num_chains=2, progress_bar=False, random_state=0
    )
    with pytest.warns(UserWarning, match=r"posterior draws are too few for Pareto smoothing"):
        clf.fit(X, y)
    p = clf.predict_proba(X)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1.0)


def test_check_draws_names_the_capped_loop_and_chain():
    post = {"w": np.full((2, 3, 2), 0.5)}
    with pytest.raises(SamplerDivergenceError, match=r"rejection sampler.* in chain\(s\) 1"):
        check_draws(post, capped={0: [], 1: ["the rejection sampler of x"]})


def test_map_line_search_with_nan_raises():
    """BM3KLMAP's backtracking line search looped forever on a NaN gradient."""
    from bayesmkl.baselines import BM3KLMAP

    Phi = np.full((3, 1, 5), np.nan)
    delta = np.ones((1, 5))
    with _alarm(30), pytest.raises(FloatingPointError, match="not finite"):
        BM3KLMAP()._w_step(np.full(3, 1 / 3), Phi, np.zeros(1), delta, np.ones((1, 5)))


def test_simplemkl_step_path_with_nan_raises():
    """SimpleMKL's maximal-step path looped forever when the weights were NaN."""
    from bayesmkl.baselines.simplemkl import _maximal_step_path

    mu = np.array([np.nan, 0.5, 0.5])
    D = np.array([-1.0, -1.0, 2.0])
    with _alarm(30), pytest.raises(FloatingPointError, match="maximal-step path"):
        _maximal_step_path(mu, D, 2)


# --------------------------------------------------------------------------------------------
# 1 (b): hyper-parameters are bounded to where the arithmetic stays finite
# --------------------------------------------------------------------------------------------

OUT_OF_RANGE = [
    ("eta", 1e-6), ("eta", 1e-4), ("eta", 1e7), ("eta", [1.0, 1e-6]),
    ("alpha_a", 0.005), ("alpha_a", 1e300), ("beta_a", 1e-9), ("beta_a", 1e12),
    ("kappa", 1e-300), ("kappa", 1e12), ("kappa", 1e300), ("gamma0", 1e300), ("gamma0", 1e9),
    ("bias_prior_var", 1e-300), ("bias_prior_var", 1e30), ("gamma0", -1.0),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value"), OUT_OF_RANGE)
def test_hyper_parameters_out_of_range_are_refused(name, value):
    clf = BM3KLClassifier(**{name: value})
    with pytest.raises(ValueError, match=rf"^(every entry of )?{name} must be .*; got "):
        clf._validate_params()


def test_hyper_parameter_bounds_are_accepted():
    from bayesmkl.estimators._validation import HYPER_BOUNDS

    for name, (lo, hi) in HYPER_BOUNDS.items():
        for v in (lo, hi):
            BM3KLClassifier(**{name: v})._validate_params()


def test_hyper_parameter_bounds_are_documented():
    """Each hyper-parameter's docstring entry states the range that fit enforces."""
    import re

    from bayesmkl.estimators._validation import HYPER_BOUNDS

    doc = BM3KLClassifier.__doc__
    for name, (lo, hi) in HYPER_BOUNDS.items():
        entry = doc.split(f"\n    {name} : ")[1].split("\n    ")[0:6]
        found = re.search(r"Allowed:\s+\[([^,\]]+),\s+([^\]]+)\]", " ".join(entry))
        assert found and (float(found[1]), float(found[2])) == (lo, hi), name


def test_cli_refuses_out_of_range_hyper_parameters_before_fitting(tmp_path):
    """``bayesmkl fit --eta 1e-6 --max-time 20`` printed nothing and never exited."""
    X, y = _data(40)
    _write_csv(tmp_path / "d.csv", X, y)
    out = _run_python(f"""
        from bayesmkl.cli import main
        for flag, v in [("--eta", "1e-6"), ("--kappa", "1e300"), ("--gamma0", "1e300")]:
            rc = main(["fit", {str(tmp_path / "d.csv")!r}, flag, v, "--max-time", "20",
                       "--out", {str(tmp_path / "out")!r}, "--no-progress"])
            print("rc", rc)
    """)
    assert out.stdout.split().count("rc") == 3 and "rc 0" not in out.stdout, out.stdout
    assert out.stdout.count("rc 2") == 3
    errors = [line for line in out.stderr.splitlines() if line.startswith("bayesmkl: error:")]
    assert [e.split(":")[2].split()[0] for e in errors] == ["--eta", "--kappa", "--gamma0"]
    assert "--eta must be a number in [0.02, 1e+06]" in errors[0]


# --------------------------------------------------------------------------------------------
# 2: predict --has-label compares labels as the estimator does
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    X, y = _data()
    path = tmp_path_factory.mktemp("model") / "model.nc"
    _assembled(X[:80], y[:80]).save(path)
    return path, X[80:], y[80:]


def test_cli_accuracy_with_float_labels(model_file, tmp_path, capsys):
    """A model fitted on labels 1/0 scored on 1.0/0.0 reported accuracy 0.0000."""
    path, X, y = model_file
    truth = float(np.mean(BM3KLClassifier.load(path).predict(X) == y))
    assert truth > 0.8
    _write_csv(tmp_path / "t.csv", X, [f"{v:.1f}" for v in y])
    assert main(["predict", str(path), str(tmp_path / "t.csv"), "--has-label",
                 "--out", str(tmp_path / "p.csv")]) == 0  # fmt: skip
    assert f"accuracy on the labelled rows: {truth:.4f}" in capsys.readouterr().err


def test_cli_unknown_label_is_an_error_that_names_it(model_file, tmp_path, capsys):
    path, X, y = model_file
    labels = [str(v) for v in y]
    labels[3] = "7"
    _write_csv(tmp_path / "t.csv", X, labels)
    assert main(["predict", str(path), str(tmp_path / "t.csv"), "--has-label"]) == 2
    err = capsys.readouterr().err
    assert "not among the fitted classes [0, 1]: '7' (1 row)" in err


# --------------------------------------------------------------------------------------------
# 3: a format-2 file without its checksums is refused
# --------------------------------------------------------------------------------------------


def test_format2_file_without_checksums_is_refused(model_file, tmp_path):
    path, X, _ = model_file
    bad = tmp_path / "edited.nc"
    bad.write_bytes(path.read_bytes())
    with h5py.File(bad, "r+") as f:
        assert np.ravel(f.attrs["bayesmkl_format"])[0] == 2
        del f.attrs["bayesmkl_sha256"]
        f["posterior/a"][...] = -f["posterior/a"][...]  # edited draws
    with pytest.raises(ValueError, match=r"edited\.nc .*format-2 .*checksum record .*missing"):
        BM3KLClassifier.load(bad)
    clf = BM3KLClassifier.load(bad, verify=False)  # the caller's explicit choice
    ref = BM3KLClassifier.load(path)
    np.testing.assert_allclose(clf.decision_function(X), -ref.decision_function(X))


# --------------------------------------------------------------------------------------------
# 4: smaller cases
# --------------------------------------------------------------------------------------------


def test_extreme_test_kernel_value_warns():
    """One 1e300 entry in a precomputed test kernel gave p = 0.67 (f = 1.6e299) silently."""
    import warnings

    X, y = _data(60)
    K = np.stack([X @ X.T, np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))])
    clf = _assembled(K[:, :40, :40], y[:40], kernels="precomputed")
    Kt = K[:, 40:, :40].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict_proba(Kt)  # no warning on ordinary rows
    Kt[0, 3, 5] = 1e300
    with pytest.warns(RuntimeWarning, match=r"1 test row\(s\) \(first rows \[3\]\)") as rec:
        clf.predict_proba(Kt)
    assert rec[0].category.__name__ == "ExtremeDecisionWarning"
    Kt[0, 3, 5] = np.inf
    with pytest.raises(ValueError, match="infinity|NaN or inf"):
        clf.predict_proba(Kt)


def test_drifted_training_decision_values_warn_with_their_cause():
    """κ = 1e10 on the repro data (tests of the stress benchmark): training |f| reached 4.9e28
    and every test point was predicted as the minority class; the only decision-value warning
    blamed the test rows. The fit's own check names the drift of the posterior instead."""
    import warnings

    X, y = _data(60)
    K = np.stack([X @ X.T, np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))])
    clf = _assembled(K[:, :40, :40], y[:40], kernels="precomputed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf._fit_calibration(K[:, :40, :40], y[:40])  # ordinary draws: no warning
    clf.posterior_["a"][:, 1] *= 1e12  # one of the 4 draws drifts
    with pytest.warns(RuntimeWarning, match=r"training points reach \|f\| = .* in 25% of the "
                                            "draws.*prior too weak") as rec:  # fmt: skip
        clf._fit_calibration(K[:, :40, :40], y[:40])
    assert rec[0].category.__name__ == "ExtremeDecisionWarning"


def test_calibration_fold_reduction_warns():
    """calibration='cv' with a class of 2 points silently dropped to 2 folds."""
    from sklearn.base import BaseEstimator

    from bayesmkl.posterior.calibration import crossfit_decision_draws

    class Stub(BaseEstimator):
        def __init__(self, kernels="precomputed", calibration=None, kernel_dtype=None,
                     progress_bar=False, random_state=None, class_weight=None):  # fmt: skip
            self.kernels, self.calibration, self.kernel_dtype = kernels, calibration, kernel_dtype
            self.progress_bar, self.random_state = progress_bar, random_state
            self.class_weight = class_weight

        def fit(self, K, y, sample_weight=None):
            return self

        def decision_draws(self, K):
            return np.zeros((1, K.shape[1], 1))

    y = np.array([0] * 10 + [1] * 2)
    K = np.eye(12)[None]
    with pytest.warns(UserWarning, match=r"2 folds instead of the 3 asked for.*only 2 training"):
        draws, _ = crossfit_decision_draws(Stub(), K, y, n_folds=3, seed=0)
    assert len(draws) == 2


def test_divergence_suggestions_depend_on_the_settings():
    post = {"w": np.full((1, 3, 2), np.nan)}
    msgs = {}
    for sampler in ("exact", "gibbs", "paper"):
        settings = {"sampler": sampler, "step_size": 0.01, "num_warmup": 300}
        with pytest.raises(SamplerDivergenceError) as exc:
            check_draws(post, settings=settings)
        msgs[sampler] = str(exc.value)
    assert "sampler='exact'" not in msgs["exact"] and "sampler='gibbs'" in msgs["exact"]
    assert "step_size" not in msgs["gibbs"] and "sampler='gibbs'" not in msgs["gibbs"]
    assert "sampler='collapsed_log'" in msgs["paper"] and "smaller step_size" in msgs["paper"]


def test_memory_limit_respects_ulimit_v(monkeypatch):
    """The kernel-memory check ignored ``ulimit -v`` (RLIMIT_AS): with 256 MiB of address
    space left, a 1 GiB kernel tensor is refused before allocating, whatever the free memory."""
    import resource

    from bayesmkl.kernels._checks import KernelMemoryError, check_kernel_memory, kernel_memory_limit

    monkeypatch.delenv("BAYESMKL_MEMORY_LIMIT_GB", raising=False)
    status = Path("/proc/self/status")
    used = int(status.read_text().split("VmSize:")[1].split()[0]) * 1024 if status.exists() else 0
    real = resource.getrlimit
    room = 2**28
    monkeypatch.setattr(
        resource,
        "getrlimit",
        lambda which: (
            (used + room, resource.RLIM_INFINITY) if which == resource.RLIMIT_AS else real(which)
        ),
    )
    assert kernel_memory_limit() <= room * 1.05  # VmSize may have grown a little since
    with pytest.raises(KernelMemoryError, match="ulimit -v"):
        check_kernel_memory(1, 2**14, 2**13, np.float64)  # 1 GiB
