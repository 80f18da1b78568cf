"""Every ```python block of the README and the docs runs as written.

Each Markdown file's blocks run in order in one namespace (a later block may use what an
earlier one defined, as a reader would), in a temporary working directory (snippets write
files such as ``fit.nc``), with matplotlib's Agg backend, and with 64-bit JAX restored
afterwards (the README's NumPyro snippet switches it on globally, as a user must).

**Skipping a block.** Put ``<!-- docs-test: skip REASON -->`` on the line right before the
opening fence. Use it only for code that cannot run here (network, user files), and give the
reason; the test fails on a skip marker without one.

**A block run as written.** ``<!-- docs-test: as-written -->`` on the line right before the
fence marks the README's first fit, which a new user pastes: besides running shrunk with the
rest of its file (later blocks use what it defines), it is run *unchanged*, alone, in a fresh
Python process with an empty JAX compilation cache (as a new user's first run), and must finish
in under 60 s with a sensible result (:func:`test_readme_first_fit_runs_as_written`).

**Shrunk run lengths.** The snippets show realistic fits (hundreds of sweeps, four chains,
cross-fitted calibration) that would take minutes. The test runs them unchanged but shrinks
the *run length only*, never the model or the data: every ``BM3KLClassifier.fit`` runs with
``num_warmup=20, num_samples=10``, at most 2 chains, ``max_time=None``, no progress bar and
``calibration=None`` (the 3 calibration refits would cost about a minute more and are tested
in ``tests/posterior/test_calibration.py``), every ``BM3KLRegressor.fit`` with the same warm-up and
15
draws per chain (PSIS-LOO needs 25 draws), and every ``numpyro.infer.MCMC`` with the same
warm-up and sample counts and at most 2 chains. The checks in ``CHECKS`` then assert on what
the snippets computed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The Markdown files whose code a user is told to run (benchmark result pages are reports).
DOC_FILES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *ROOT.glob("docs/*.md")]
    if p.exists()
)

_FENCE = re.compile(r"^```(\S*)\s*$")
_SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\b(.*?)-->\s*$")
_AS_WRITTEN = re.compile(r"^<!--\s*docs-test:\s*as-written\s*-->\s*$")

SHRINK = {"num_warmup": 20, "num_samples": 10, "max_chains": 2, "reg_samples": 15}


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(first line number, code, skip reason or None)`` of each ```python block."""
    return [block[:3] for block in _blocks(text)]


def as_written_blocks(text: str) -> list[tuple[int, str]]:
    """``(first line number, code)`` of each ```python block marked ``as-written``."""
    return [(line, code) for line, code, _, as_written in _blocks(text) if as_written]


def _blocks(text: str) -> list[tuple[int, str, str | None, bool]]:
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"unclosed code fence at line {i + 1}")
        if lang in ("python", "py"):
            skip = _SKIP.match(lines[i - 1]) if i > 0 else None
            reason = skip.group(1).strip() if skip else None
            if skip and not reason:
                raise ValueError(f"docs-test skip marker without a reason before line {i + 1}")
            as_written = i > 0 and bool(_AS_WRITTEN.match(lines[i - 1]))
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n", reason, as_written))
        i = j + 1
    return blocks


def test_block_extraction():
    text = (
        "intro\n```python\nx = 1\n```\n```bash\nls\n```\n"
        "<!-- docs-test: skip needs a user file -->\n```python\nopen('mine.csv')\n```\n"
    )
    assert python_blocks(text) == [
        (3, "x = 1\n", None),
        (10, "open('mine.csv')\n", "needs a user file"),
    ]
    with pytest.raises(ValueError, match="without a reason"):
        python_blocks("<!-- docs-test: skip -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="unclosed"):
        python_blocks("```python\nx = 1\n")
    marked = "```python\na = 1\n```\n<!-- docs-test: as-written -->\n```python\nb = 2\n```\n"
    assert as_written_blocks(marked) == [(6, "b = 2\n")]
    assert len(python_blocks(marked)) == 2  # a marked block still runs with its file


def test_the_user_facing_docs_have_code():
    """The README and the user guide are scanned (a rename must not silently drop them)."""
    for name in ("README.md", "docs/user_guide.md"):
        assert name in DOC_FILES
        assert python_blocks((ROOT / name).read_text())


@pytest.fixture
def shrunk_runs(monkeypatch):
    """Shrink the run length of every BM3KL fit and NumPyro MCMC (see the module docstring)."""
    import numpyro.infer

    from bayesmkl import BM3KLClassifier, BM3KLRegressor

    fit = BM3KLClassifier.fit

    def short_fit(self, X, y, *args, **kwargs):
        self.set_params(
            num_warmup=SHRINK["num_warmup"],
            num_samples=SHRINK["num_samples"],
            num_chains=min(self.num_chains, SHRINK["max_chains"]),
            max_time=None,
            progress_bar=False,
            calibration=None,
        )
        return fit(self, X, y, *args, **kwargs)

    class ShortMCMC(numpyro.infer.MCMC):
        def __init__(self, sampler, *, num_warmup, num_samples, num_chains=1, **kwargs):
            kwargs["progress_bar"] = False
            super().__init__(
                sampler,
                num_warmup=min(num_warmup, SHRINK["num_warmup"]),
                num_samples=min(num_samples, SHRINK["num_samples"]),
                num_chains=min(num_chains, SHRINK["max_chains"]),
                **kwargs,
            )

    monkeypatch.setattr(BM3KLClassifier, "fit", short_fit)
    reg_fit = BM3KLRegressor.fit

    def short_reg_fit(self, X, y, *args, **kwargs):
        self.set_params(
            num_warmup=SHRINK["num_warmup"],
            num_samples=SHRINK["reg_samples"],
            num_chains=min(self.num_chains, SHRINK["max_chains"]),
            max_time=None,
            progress_bar=False,
        )
        return reg_fit(self, X, y, *args, **kwargs)

    monkeypatch.setattr(BM3KLRegressor, "fit", short_reg_fit)
    monkeypatch.setattr(numpyro.infer, "MCMC", ShortMCMC)


def _check_readme(ns):
    proba, mcse = ns["proba"], ns["mcse"]
    assert proba.shape == mcse.shape == (len(ns["X_te"]), 3)  # wine: 3 classes
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert ns["clf"].kernel_weights_.shape == (16,)
    assert ns["tree"]["posterior"]["w"].shape == (2, SHRINK["num_samples"], 16)
    assert ns["K"].shape == (16, len(ns["X_tr"]), len(ns["X_tr"]))
    assert ns["delta"].shape == (3, len(ns["X_tr"]))
    e = np.asarray(ns["e"])
    assert e.shape == (2 * SHRINK["num_samples"], 16) and np.all(e > 0)


def _check_user_guide(ns):
    clf, same, X_te = ns["clf"], ns["same"], ns["X_te"]
    np.testing.assert_array_equal(same.predict_proba(X_te), ns["proba"])  # "identical"
    assert Path("weights.png").stat().st_size > 0
    assert len(ns["pool"].recipe) == 5
    assert 0.0 <= clf.score(X_te, ns["y_te"]) <= 1.0
    # the baselines' Platt-scaled probabilities
    np.testing.assert_allclose(ns["proba_mkl"].sum(axis=1), 1.0, atol=1e-12)
    assert ns["proba_mkl"].shape == ns["proba"].shape
    # the regression section
    M = len(ns["Xd_te"])
    assert ns["interval"].shape == (M, 2) and ns["q"].shape == (M, 3)
    assert np.all(ns["interval"][:, 0] < ns["mean"]) and np.all(ns["mean"] < ns["interval"][:, 1])
    assert ns["lpd"].shape == (M,) and np.all(np.isfinite(ns["lpd"])) and ns["r2"] < 1.0
    assert np.isfinite(ns["loo"].elpd)
    np.testing.assert_array_equal(ns["reg_back"].predict(ns["Xd_te"]), ns["mean"])


#: Per file, assertions on the namespace its snippets leave behind.
CHECKS = {"README.md": _check_readme, "docs/user_guide.md": _check_user_guide}


#: Files whose snippets compile two different sweeps (about 30-60 s on 2 shared cores).
SLOW = {"README.md"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
        for n in DOC_FILES
        if python_blocks((ROOT / n).read_text())
    ],
)
def test_doc_snippets_run(name, shrunk_runs, tmp_path, monkeypatch):
    import jax
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    x64 = jax.config.jax_enable_x64
    ns: dict = {"__name__": f"docs_snippet_{Path(name).stem}"}
    try:
        for line, code, skip in python_blocks((ROOT / name).read_text()):
            if skip:
                continue
            # padded so that tracebacks give the Markdown file's own line numbers
            exec(compile("\n" * (line - 1) + code, name, "exec"), ns)
        if name in CHECKS:
            CHECKS[name](ns)
    finally:
        jax.config.update("jax_enable_x64", x64)
        plt.close("all")


# --------------------------------------------------------------------------------------------
# the README's first fit, exactly as written
# --------------------------------------------------------------------------------------------

#: Seconds after which the README's first fit counts as hung (its ``max_time`` is 30 s; how
#: long it takes is the benchmarks' to measure, not a test's: under load it takes longer).
FIRST_FIT_LIMIT = 180.0
#: Appended after the user's code, to report what it computed (inside the timed process; it
#: scores the fitted model once more, which takes milliseconds).
_REPORT = """
import json as _json
print("@@first-fit " + _json.dumps({
    "accuracy": float(clf.score(X_te, y_te)),
    "chance": float(max(np.mean(y_te == c) for c in np.unique(y_te))),
    "converged": bool(clf.run_report_.converged),
    "stopped_by": clf.run_report_.stopped_by,
    "sampling_seconds": clf.run_report_.seconds,
    "max_time": clf.max_time,
}))
"""


def test_the_readme_marks_one_block_as_written():
    blocks = as_written_blocks((ROOT / "README.md").read_text())
    assert len(blocks) == 1
    assert "BM3KLClassifier(" in blocks[0][1] and "max_time=" in blocks[0][1]


@pytest.mark.slow
def test_readme_first_fit_runs_as_written(tmp_path):
    """The README's first fit, unchanged, in a new process with an empty compilation cache:
    its chains keep to the ``max_time`` it sets, its accuracy is well above chance, and the run
    converged or says why not."""
    import json
    import os
    import subprocess
    import sys

    [(line, code)] = as_written_blocks((ROOT / "README.md").read_text())
    script = tmp_path / "first_fit.py"
    script.write_text("\n" * (line - 1) + code + "import numpy as np\n" + _REPORT)
    env = dict(os.environ, BAYESMKL_CACHE_DIR=str(tmp_path / "jax-cache"), MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=FIRST_FIT_LIMIT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(proc.stdout)  # shown with -s or on failure: what a user sees
    report = json.loads(proc.stdout.split("@@first-fit ", 1)[1])
    # the budget counts from the start of fit, so the chains alone stay within it
    assert report["max_time"] == 30 and report["sampling_seconds"] <= report["max_time"], report
    assert "test accuracy:" in proc.stdout and "converged:" in proc.stdout
    assert report["accuracy"] >= report["chance"] + 0.3, report
    if not report["converged"]:  # a budget ran out: the user must be told, in a warning
        assert report["stopped_by"] in ("max_time", "max_samples"), report
        assert "ConvergenceWarning" in proc.stderr, proc.stderr[-2000:]
