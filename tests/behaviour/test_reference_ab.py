"""A/B behaviour check: today's code draws exactly what the reference commit draws.

A refactor must not change a single draw. Stored draws cannot guard that: XLA compiles the
sampler for the host's instruction set and NumPy picks its vector loops by processor, so draws
recorded on one machine differ in their last bits on another, and an accept/reject step turns a
last-bit difference into a different chain. This test therefore runs both sides on the machine it
runs on: it exports the package of :data:`REFERENCE_COMMIT` from git into a temporary directory,
runs the same case script (:mod:`cases`, public API, every behaviour-selecting parameter written
out) once against that package and once against the package under test, each in a fresh
process with the same environment, and compares every array **bit for bit**. Both run the chains
as one vectorised program (``BAYESMKL_CHAIN_GROUPS=1``), as the reference does; the chain groups
of :class:`~bayesmkl.sampler.runner.ChainRunner` are checked against that in
``tests/sampler/test_runner.py``.

:data:`REFERENCE_COMMIT` moves only with a deliberate change of behaviour (a new default, a fixed
conditional, a change of arithmetic that has passed SBC, the NUTS agreement and the
conditional-vs-joint tests), in its own commit that says why; never to make a refactor pass.

The reference run is cached under ``$XDG_CACHE_HOME/bayesmkl/ab`` keyed by the commit, the case
script, the processor's model and flags, the library versions and the environment variables that
change arithmetic; ``BAYESMKL_AB_CACHE=off`` recomputes it.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from tests.behaviour.cases import CASES

#: the behaviour every refactor must keep: the draws of main before the redesign (e60277c),
#: with the calibration map's arithmetic of 9f199f4 (its last bits)
REFERENCE_COMMIT = "9f199f4a2191a5f9e39b0c858ae9285375fd9baf"

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().with_name("cases.py")
_ARITHMETIC_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "XLA_FLAGS", "OMP_NUM_THREADS")
_LIBRARIES = ("jax", "jaxlib", "numpy", "scipy", "scikit-learn", "numpyro")


def _cpu_fingerprint() -> str:
    """The processor's model name and flag set (what XLA and NumPy dispatch on)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith(("model name", "flags", "Features", "CPU part"))
    ]
    return "\n".join(sorted(set(keep)))


def _cache_key(reference: str) -> str:
    parts = [reference, SCRIPT.read_text(), _cpu_fingerprint(), platform.machine()]
    parts += [f"{name}={metadata.version(name)}" for name in _LIBRARIES]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _ARITHMETIC_ENV]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _resolve(commit: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(
            f"the reference commit {commit} is not in this checkout's git history ({exc}); the "
            "A/B behaviour check needs a clone with history (not a shallow one or an sdist)"
        )
    return out.stdout.strip()


def _export_package(commit: str, dest: Path) -> Path:
    """``bayesmkl/`` as it was at ``commit``, written under ``dest``."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "bayesmkl"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _start(package_root: Path, out: Path) -> subprocess.Popen:
    # one program for all chains, as the reference runs them: chain groups in threads
    # (bayesmkl.sampler.runner) compile narrower programs whose rounding may differ
    env = dict(os.environ, PYTHONPATH=str(package_root), BAYESMKL_CHAIN_GROUPS="1")
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out)],
        env=env, cwd=str(out.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen, what: str) -> None:
    output, _ = proc.communicate(timeout=1800)
    if proc.returncode:
        pytest.fail(f"the behaviour cases failed on {what} (exit {proc.returncode}):\n{output}")


@pytest.fixture(scope="module")
def draws(tmp_path_factory):
    """``(reference, today)``: the arrays of every case from both packages, on this machine."""
    reference = _resolve(REFERENCE_COMMIT)
    work = tmp_path_factory.mktemp("ab")
    cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bayesmkl/ab"
    cached = cache_dir / f"{_cache_key(reference)}.npz"
    use_cache = os.environ.get("BAYESMKL_AB_CACHE", "on") != "off"

    today = _start(ROOT, work / "today.npz")
    if use_cache and cached.exists():
        ref_file = cached
    else:
        ref_file = work / "reference.npz"
        ref = _start(_export_package(reference, work / "reference"), ref_file)
        _finish(ref, f"the reference commit {reference[:12]}")
    _finish(today, "the package under test")
    if use_cache and ref_file != cached:
        cache_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ref_file, cached)
    with np.load(ref_file) as a, np.load(work / "today.npz") as b:
        return dict(a), dict(b)


@pytest.mark.parametrize("case", CASES)
def test_same_draws_as_the_reference_commit(draws, case):
    reference, today = draws
    prefix = f"{case}/"
    want = {k: v for k, v in reference.items() if k.startswith(prefix)}
    got = {k: v for k, v in today.items() if k.startswith(prefix)}
    assert want, f"the reference run has no arrays for {case!r}"
    assert sorted(got) == sorted(want), f"{case}: arrays added or missing"
    for key, value in want.items():
        np.testing.assert_array_equal(got[key], value, err_msg=f"{key} changed")


def test_the_cases_exercise_the_sampler(draws):
    """The compared runs move: a check of constant arrays could not catch a changed draw."""
    reference, _ = draws
    for case in CASES:
        w = reference.get(f"{case}/posterior/w")
        if w is not None:  # (chains, draws, ...) kernel weights, all distinct
            assert np.unique(w.reshape(-1, w.shape[-1]), axis=0).shape[0] == w[..., 0].size, case
            assert np.all(np.isfinite(w)), case
