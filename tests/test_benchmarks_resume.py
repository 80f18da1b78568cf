"""Issue 22: the benchmarks are resumable (``benchmarks/_resume.py``).

Each script runs a tiny configuration (the synthetic ``tiny`` data set, the cheapest methods) in
a subprocess that stops after k finished units (``BAYESMKL_BENCH_STOP_AFTER``, as a kill at
that point would), then again without the stop: the units of the first run must be kept
untouched (same process id and time stamp: not redone), the others computed by the second run,
and the results complete, every unit with the package commit and the load average.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))


def _run(script, args, out_dir, stop_after=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    # the compilation cache of the test suite: a restarted BM3KL run loads its program
    env["BAYESMKL_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / "bayesmkl-test-jax-cache")
    env.pop("BAYESMKL_BENCH_STOP_AFTER", None)
    if stop_after is not None:
        env["BAYESMKL_BENCH_STOP_AFTER"] = str(stop_after)
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
        timeout=timeout, env=env, cwd=out_dir,
    )  # fmt: skip
    return proc


def _interrupt_and_resume(script, args, tmp_path, stop_after, expected_units):
    from _resume import STOPPED

    out = tmp_path / "res"
    args = [*args, "--out", str(out)]
    first = _run(script, args, tmp_path, stop_after=stop_after)
    assert first.returncode == STOPPED, first.stdout + first.stderr
    path = out.with_suffix(".json")
    partial = json.loads(path.read_text())
    assert len(partial["units"]) == stop_after
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic writes

    second = _run(script, args, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{stop_after} unit(s) already done" in second.stdout
    final = json.loads(path.read_text())
    assert sorted(final["units"]) == sorted(expected_units)
    for key, record in partial["units"].items():  # kept, not redone
        assert final["units"][key] == record
    new = [final["units"][k] for k in final["units"] if k not in partial["units"]]
    assert new and all(r["pid"] != next(iter(partial["units"].values()))["pid"] for r in new)
    for record in final["units"].values():
        assert record["commit"] == "unknown" or len(record["commit"]) == 40
        assert record["loadavg"] is None or len(record["loadavg"]) == 3
    assert out.with_suffix(".md").is_file()
    return final


def test_xu_table1_resumes(tmp_path):
    final = _interrupt_and_resume(
        "xu_table1.py",
        ["--quick", "--datasets", "tiny", "--methods", "AveKernel,L2MKL", "--n-jobs", "1"],
        tmp_path, stop_after=3,
        expected_units=[f"tiny | split {k} | {m}" for k in (0, 1) for m in ("AveKernel", "L2MKL")],
    )  # fmt: skip
    res = final["results"]["tiny"]
    assert len(res["AveKernel"]["accs"]) == 2 and len(res["L2MKL"]["accs"]) == 2


def test_calibration_resumes(tmp_path):
    final = _interrupt_and_resume(
        "calibration.py",
        ["--datasets", "tiny", "--splits", "2", "--methods", "SVC,BEMKL"],
        tmp_path, stop_after=1,
        expected_units=[f"tiny | split {k} | {m}" for k in (0, 1) for m in ("SVC", "BEMKL")],
    )  # fmt: skip
    summary = final["datasets"]["tiny"]
    assert summary["SVC"]["n_splits"] == 2 and summary["BEMKL"]["n_splits"] == 2


def test_regression_resumes(tmp_path):
    """Two cheap baselines on diabetes (bundled with scikit-learn), two splits."""
    final = _interrupt_and_resume(
        "regression.py",
        ["--datasets", "diabetes", "--splits", "2", "--methods", "KRR,GPR"],
        tmp_path, stop_after=1,
        expected_units=[f"diabetes | split {k} | {m}" for k in (0, 1) for m in ("KRR", "GPR")],
    )  # fmt: skip
    summary = final["datasets"]["diabetes"]
    assert summary["KRR"]["n_splits"] == 2 and summary["GPR"]["n_splits"] == 2
    assert {"rmse", "lpd", "coverage90", "crps", "fit_s"} <= set(summary["GPR"])


def test_stress_resumes(tmp_path):
    """Two tiny BM3KL fits (γ0 = 1 and 100); the first is kept across the restart."""
    final = _interrupt_and_resume(
        "stress.py", ["--tiny"], tmp_path, stop_after=1,
        expected_units=["tiny | gamma0=1", "tiny | gamma0=100"],
    )  # fmt: skip
    assert final["runs"] == 4 and len(final["rows"]) == 4  # 2 fits × 2 chains


def test_other_configuration_is_refused(tmp_path):
    out = tmp_path / "res"
    args = ["--quick", "--datasets", "tiny", "--methods", "AveKernel", "--n-jobs", "1"]
    first = _run("xu_table1.py", [*args, "--splits", "1", "--out", str(out)], tmp_path)
    assert first.returncode == 0, first.stderr
    other = _run("xu_table1.py", [*args, "--splits", "1", "--folds", "2", "--out", str(out)],
                 tmp_path)  # fmt: skip
    assert other.returncode != 0 and "another configuration" in other.stderr
    fresh = _run("xu_table1.py", [*args, "--splits", "1", "--folds", "2", "--fresh", "--out",
                                  str(out)], tmp_path)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr


@pytest.mark.parametrize("bad", ["", "{not json", '{"benchmark": "written before issue 22"}'])
def test_unreadable_or_old_results_start_over(tmp_path, bad):
    from _resume import UnitStore

    path = tmp_path / "r.json"
    path.write_text(bad)
    store = UnitStore(path, {"a": 1})
    assert store.units == {}
    store.add("u", {"x": 1})
    assert json.loads(path.read_text())["units"]["u"]["result"] == {"x": 1}
