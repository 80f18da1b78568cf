"""The benchmarks are resumable (``benchmarks/_common.py``).

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

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))


def _run(script, args, out_dir, stop_after=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    # the compilation cache of the test suite, every program in it (tests/conftest.py): a
    # restarted BM3KL run loads its programs
    env["BAYESMKL_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / "bayesmkl-test-jax-cache")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env.pop("BAYESMKL_BENCH_STOP_AFTER", None)
    if stop_after is not None:
        env["BAYESMKL_BENCH_STOP_AFTER"] = str(stop_after)
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
        timeout=timeout, env=env, cwd=out_dir,
    )  # fmt: skip
    return proc


def _interrupt_and_resume(script, args, tmp_path, stop_after, expected_units, timeout=120):
    from _common import STOPPED

    out = tmp_path / "res"
    args = [*args, "--out", str(out)]
    first = _run(script, args, tmp_path, stop_after=stop_after, timeout=timeout)
    assert first.returncode == STOPPED, first.stdout + first.stderr
    path = out.with_suffix(".json")
    partial = json.loads(path.read_text())
    assert len(partial["units"]) == stop_after
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic writes

    second = _run(script, args, tmp_path, timeout=timeout)
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
    assert final["splits_done"] == {"tiny": 2}
    assert "**Partial**" not in (tmp_path / "res.md").read_text()


def test_xu_table1_publishes_finished_splits(tmp_path):
    """A run stopped in its second split has already written the first split's table, marked
    partial; ``--summary-only`` rewrites it from the JSON without computing a unit."""
    from _common import STOPPED

    out = tmp_path / "res"
    args = ["--quick", "--datasets", "tiny", "--methods", "AveKernel,L2MKL", "--n-jobs", "1",
            "--out", str(out)]  # fmt: skip
    first = _run("xu_table1.py", args, tmp_path, stop_after=3)
    assert first.returncode == STOPPED, first.stderr
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["splits_done"] == {"tiny": 1} and len(saved["units"]) == 3
    assert len(saved["results"]["tiny"]["AveKernel"]["accs"]) == 1
    md = out.with_suffix(".md")
    assert "**Partial**: tiny 1 of 2 splits finished" in md.read_text()
    md.unlink()
    again = _run("xu_table1.py", [*args, "--summary-only"], tmp_path, stop_after=1)
    assert again.returncode == 0, again.stderr  # stop_after=1: it would stop had it computed
    after = json.loads(out.with_suffix(".json").read_text())
    assert after["units"] == saved["units"] and after["splits_done"] == {"tiny": 1}
    assert "**Partial**: tiny 1 of 2 splits finished" in md.read_text()


def test_calibration_resumes(tmp_path):
    final = _interrupt_and_resume(
        "calibration.py",
        ["--datasets", "tiny", "--splits", "2", "--methods", "SVC,BEMKL"],
        tmp_path, stop_after=1,
        expected_units=[f"tiny | split {k} | {m}" for k in (0, 1) for m in ("SVC", "BEMKL")],
    )  # fmt: skip
    summary = final["datasets"]["tiny"]
    assert summary["SVC"]["n_splits"] == 2 and summary["BEMKL"]["n_splits"] == 2


def test_large_n_resumes_and_says_why_a_method_was_not_run(tmp_path):
    final = _interrupt_and_resume(
        "large_n.py",
        ["--datasets", "tiny", "--methods", "SVC,GPC,SVGP,BM3KL exact", "--gpc-max-n", "10",
         "--exact-max-n", "10", "--peers-python", str(tmp_path / "no-such-python")],
        tmp_path, stop_after=1,
        expected_units=[f"tiny | {m}" for m in ("SVC", "GPC", "SVGP", "BM3KL exact")],
    )  # fmt: skip
    res = final["results"]["tiny"]
    assert 0.5 < res["SVC"]["acc"] <= 1.0 and res["SVC"]["peak_rss_gb"] > 0
    assert set(res["SVC"]) >= {"acc", "logloss", "ece", "fit_s", "converged", "peak_rss_gb"}
    assert "--gpc-max-n 10" in res["GPC"]["skipped"]
    assert "--exact-max-n 10" in res["BM3KL exact"]["skipped"]
    assert "no peer interpreter" in res["SVGP"]["skipped"]


def test_calibration_eta_rows(tmp_path):
    """An η-study row of calibration.py fits BM3KL with the η and the budget in its name, is
    kept as its own unit, and is reported against the default row with its convergence."""
    from _common import eta_row
    from calibration import bm3kl_params

    row = "BM3KL eta=0.2 max_time=30"
    args = type("Args", (), dict(sampler=None, chains=2, num_warmup=None, num_samples=None,
                                 calibration=None, folds=3, paper_max_time=300.0))()  # fmt: skip
    params = bm3kl_params(args, 3, eta=eta_row(row))
    assert (params["eta"], params["max_time"], params["num_chains"]) == (0.2, 30.0, 2)
    assert "eta" not in bm3kl_params(args, 3) and "prior" not in bm3kl_params(args, 3)

    out = tmp_path / "res"
    proc = _run("calibration.py", ["--datasets", "tiny", "--splits", "1", "--chains", "2",
                                   "--num-warmup", "20", "--num-samples", "20",
                                   "--methods", f"BM3KL,{row}", "--out", str(out)],
                tmp_path, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = json.loads(out.with_suffix(".json").read_text())
    assert sorted(final["units"]) == ["tiny | split 0 | BM3KL", f"tiny | split 0 | {row}"]
    info = final["eta_info"]["tiny"][row]
    assert len(info) == 1 and info[0]["num_samples"] == 20
    per = final["per_split"]["tiny"]
    want = per[row][0]["logloss"] - per["BM3KL"][0]["logloss"]
    md = out.with_suffix(".md").read_text()
    assert "## η-study rows minus BM3KL" in md
    assert f"| tiny | {row} | {want:+.4f} |" in md


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
        expected_units=["tiny | default | gamma0=1", "tiny | default | gamma0=100"],
    )  # fmt: skip
    assert final["runs"] == 4 and len(final["rows"]) == 4  # 2 fits × 2 chains
    assert "partial" not in final["protocol"]


def test_stress_merges_a_part_run_by_another_process(tmp_path):
    """A second process fits one γ0 into its own file; ``--merge`` adds that fit to the main
    file and ``--summary-only`` publishes it (no fit run), marked partial for the γ0 left."""
    part, main = tmp_path / "part", tmp_path / "main"
    one = _run("stress.py", ["--tiny", "--gammas", "100", "--out", str(part)], tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    fitted = json.loads(part.with_suffix(".json").read_text())["units"]
    args = ["--tiny", "--out", str(main), "--merge", str(part.with_suffix(".json"))]
    merged = _run("stress.py", [*args, "--summary-only"], tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "merged 1 unit(s)" in merged.stdout and "started" not in merged.stdout
    final = json.loads(main.with_suffix(".json").read_text())
    assert final["units"] == fitted and list(fitted) == ["tiny | default | gamma0=100"]
    assert final["runs"] == 2 and final["protocol"]["partial"].startswith("1 of 2 fits")


def test_stress_summary_is_written_after_every_fit(tmp_path):
    """A run stopped after its first fit leaves the summary of that fit, marked partial."""
    from _common import STOPPED

    out = tmp_path / "res"
    first = _run("stress.py", ["--tiny", "--out", str(out)], tmp_path, stop_after=1)
    assert first.returncode == STOPPED, first.stdout + first.stderr
    partial = json.loads(out.with_suffix(".json").read_text())
    assert partial["runs"] == 2 and partial["hangs"] == 0 and len(partial["rows"]) == 2
    assert partial["protocol"]["partial"] == "1 of 2 fits finished; the run resumes"
    assert "1 of 2 fits finished" in out.with_suffix(".md").read_text()
    # --summary-only rewrites the summary from the fits there and runs none
    path = out.with_suffix(".json")
    kept = json.loads(path.read_text())
    path.write_text(json.dumps({"unit_config": kept["unit_config"], "units": kept["units"]}))
    again = _run("stress.py", ["--tiny", "--out", str(out), "--summary-only"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    redone = json.loads(path.read_text())
    assert redone["units"] == kept["units"] and redone["runs"] == 2
    assert redone["protocol"]["partial"] == "1 of 2 fits finished; the run resumes"


def test_sbc_resumes(tmp_path):
    """Three tiny SBC replications (N = 12, P = 2, the default sampler); the first is kept."""
    final = _interrupt_and_resume(
        "sbc.py", ["--tiny", "--reps", "3", "--wrong-reps", "0", "--problems", "binary"],
        tmp_path, stop_after=1,
        expected_units=[f"binary | correct | rep {r}" for r in range(3)], timeout=600,
    )  # fmt: skip
    assert final["replications"] == {"binary | correct": 3}
    assert 0.0 <= final["min_p"] <= 1.0
    ranks = [u["result"]["ranks"] for u in final["units"].values()]
    assert all(0 <= r <= final["settings"]["L"] for rk in ranks for r in rk.values())
    assert (tmp_path / "res_ranks.png").is_file()


_SBC_PATCH_CHECK = """
import sbc
from bayesmkl.sampler import conditionals, moves
lam, log_pos = conditionals.sample_lam, moves.POSITIONS["log"]
ab = conditionals.sample_ab_weight_space
for variant in sbc.VARIANTS[1:]:
    with sbc.variant_patch(variant):
        changed = (conditionals.sample_lam is not lam, moves.POSITIONS["log"] is not log_pos,
                   conditionals.sample_ab_weight_space is not ab)
        assert changed == (variant == "lam_ignores_margin", variant == "no_log_jacobian",
                           variant == "ab_half_nu")
    assert conditionals.sample_lam is lam and moves.POSITIONS["log"] is log_pos
    assert conditionals.sample_ab_weight_space is ab
print("ok")
"""


def test_sbc_wrong_variants_are_patched_and_restored():
    """In a subprocess: importing the benchmarks switches JAX to 64 bits for the process."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{BENCH}", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SBC_PATCH_CHECK], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


_SBC_LANDMARK_CHECK = """
import numpy as np
import sbc
from bayesmkl.model.classification import PRIORS
h, cfg = PRIORS["default"], dict(sbc.TINY, points=3)
K0, d0, m0, z0 = sbc.simulate("3-class", 1, cfg, h)
K, d, m, z = sbc.simulate("3-class", 1, cfg, h, landmarks=5)
idx = sbc.landmark_rows("3-class", 1, 12, 5)
assert K0.shape == (2, 12, 12) and z0["a"].shape == (3, 12)
assert K.shape == (2, 12, 5) and z["a"].shape == z["nu"].shape == (3, 5)
assert z["lam"].shape == m.shape == (3, 12) and len(set(idx.tolist())) == 5
np.testing.assert_array_equal(K, K0[:, :, idx])  # Z = X[idx]: the landmarks are training rows
w = z["e"] / z["e"].sum()
f = np.einsum("p,pnj,cj->cn", w, K, z["a"]) + z["b"][:, None]  # f = A Psi_w^T + b, written out
np.testing.assert_allclose(np.asarray(sbc.true_decision_values(K, w, z["a"], z["b"], True)), f,
                           rtol=1e-12, atol=1e-12)
q = sbc.quantities(w, z["a"], z["b"], z["lam"], z["nu"], 0.0, K, [0, 1, 2], landmarks=True)
for c in range(3):
    for i in range(3):
        np.testing.assert_allclose(q[f"f[{c},{i}]"], f[c, i], rtol=1e-12, atol=1e-12)
print("ok")
"""


def test_sbc_landmark_replications_draw_the_landmark_model():
    """``sbc.py --landmarks M``: K(X, Z) over M training rows, the prior's (a, ν) on M columns, and
    the ranked f at the training points are f = A Ψ_wᵀ + b (in a subprocess, as above)."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{BENCH}", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SBC_LANDMARK_CHECK], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


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


def test_units_of_a_second_process_merge(tmp_path):
    """Two processes split the data sets, each with its own file; ``--merge`` takes the other
    file's units (kept as they were, never redone) and the table covers both; a file of another
    configuration is refused."""
    args = ["--quick", "--methods", "AveKernel", "--n-jobs", "1", "--splits", "1"]
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run("xu_table1.py", [*args, "--datasets", "tiny", "--out", str(b)],
                tmp_path).returncode == 0  # fmt: skip
    other = json.loads(b.with_suffix(".json").read_text())["units"]
    merged = _run("xu_table1.py", [*args, "--datasets", "tiny", "--out", str(a), "--merge",
                                   str(b.with_suffix(".json"))], tmp_path)  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    assert "merged 1 unit(s)" in merged.stdout
    final = json.loads(a.with_suffix(".json").read_text())
    assert final["units"] == other  # taken over, not recomputed
    assert len(final["results"]["tiny"]["AveKernel"]["accs"]) == 1
    wrong = _run("xu_table1.py", [*args, "--folds", "2", "--datasets", "tiny", "--out",
                                  str(tmp_path / "c"), "--merge", str(b.with_suffix(".json"))],
                 tmp_path)  # fmt: skip
    assert wrong.returncode != 0 and "cannot merge" in wrong.stderr


def test_two_processes_share_the_splits_of_one_data_set(tmp_path):
    """``--only-splits``: each process computes only its own splits (the other's are not in its
    file), and merging gives the table over all of them; an index outside the run is refused."""
    args = ["--quick", "--methods", "AveKernel", "--n-jobs", "1", "--splits", "2",
            "--datasets", "tiny"]  # fmt: skip
    a, b = tmp_path / "a", tmp_path / "b"
    for out, share in ((a, "0"), (b, "1")):
        proc = _run("xu_table1.py", [*args, "--only-splits", share, "--out", str(out)], tmp_path)
        assert proc.returncode == 0, proc.stderr
        units = json.loads(out.with_suffix(".json").read_text())["units"]
        assert sorted(units) == [f"tiny | split {share} | AveKernel"]
    merged = _run("xu_table1.py", [*args, "--summary-only", "--out", str(a), "--merge",
                                   str(b.with_suffix(".json"))], tmp_path)  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    final = json.loads(a.with_suffix(".json").read_text())
    assert len(final["units"]) == 2
    assert len(final["results"]["tiny"]["AveKernel"]["accs"]) == 2
    bad = _run("xu_table1.py", [*args, "--only-splits", "2", "--out", str(a)], tmp_path)
    # the message, not the usage line (which names every option)
    assert bad.returncode != 0 and "indices in 0..1" in bad.stderr


def test_xu_table1_measures_the_gap_to_the_paper_in_published_sds():
    """Issue 22's criterion for Table I: every published method within 2 published SD."""
    from xu_table1 import PUBLISHED, published_check

    mean, sd = PUBLISHED["heart"]["SimpleMKL"]
    results = {"heart": {"SimpleMKL": {"acc_mean": mean + 1.5 * sd},
                         "BM3KL": {"acc_mean": 0.0}}}  # fmt: skip  # not published: ignored
    check = published_check(results)
    assert check["gap_sd"] == {"heart": {"SimpleMKL": 1.5}} and check["within"] is True
    results["heart"]["SimpleMKL"]["acc_mean"] = mean - 2.5 * sd
    assert published_check(results)["within"] is False
    assert published_check(results)["max_abs_gap_sd"] == 2.5
    assert published_check({"tiny": {"SimpleMKL": {"acc_mean": 90.0}}})["within"] is None


def test_xu_table1_eta_rows_carry_their_settings_in_the_name():
    """An η-study row fits BM3KL with the η and budget its name gives, without a grid; other
    names are not η rows (and stay refused by the method check)."""
    from xu_table1 import eta_row, make_estimator, method_grid, no_grid

    name = "BM3KL eta=0.1 max_time=1200"
    assert eta_row(name) == (0.1, 1200.0)
    est = make_estimator(name, {}, P=5, cfg={"split_seed": 7})
    assert (est.eta, est.max_time, est.random_state, est.calibration) == (0.1, 1200.0, 7, None)
    assert no_grid(name) and method_grid(name, {"C": [1.0, 10.0]}, 5) == [{}]
    for other in ("BM3KL", "BM3KL eta=0.1", "BM3KL eta=abc max_time=1", "xBM3KL eta=1 max_time=1"):
        assert eta_row(other) is None
    assert not no_grid("SimpleMKL") and no_grid("BM3KL")


def test_xu_table1_pairs_each_method_with_bm3kl_over_splits():
    """The paired table gives mean and standard error of (method − BM3KL) split by split."""
    from xu_table1 import _paired_table

    results = {"heart": {"BM3KL": {"accs": [80.0, 82.0, 90.0]},
                         "SimpleMKL": {"accs": [81.0, 85.0, 90.0]}}}  # fmt: skip
    lines = _paired_table(results, ["SimpleMKL", "BM3KL"])
    d = np.array([1.0, 3.0, 0.0])  # mean 4/3; SE = sd / √3
    assert lines[-1] == f"| Heart | +1.33 ({d.std(ddof=1) / np.sqrt(3):.2f}) |"
    assert "SimpleMKL" in lines[-3] and "BM3KL |" not in lines[-3]  # BM3KL is the reference
    assert _paired_table(results, ["SimpleMKL"]) == []  # no reference
    one = {"heart": {m: {"accs": r["accs"][:1]} for m, r in results["heart"].items()}}
    assert _paired_table(one, ["SimpleMKL", "BM3KL"]) == []  # one split: no SE


@pytest.mark.parametrize("bad", ["", "{not json", '{"benchmark": "written before issue 22"}'])
def test_unreadable_or_old_results_start_over(tmp_path, bad):
    from _common import UnitStore

    path = tmp_path / "r.json"
    path.write_text(bad)
    store = UnitStore(path, {"a": 1})
    assert store.units == {}
    store.add("u", {"x": 1})
    assert json.loads(path.read_text())["units"]["u"]["result"] == {"x": 1}


def test_stress_watchdog_counts_a_fit_it_kills_as_a_hang(tmp_path):
    """A fit still running at the watchdog's limit is killed and counted, not waited for."""
    out = tmp_path / "res"
    proc = _run("stress.py", ["--tiny", "--gammas", "1", "--watchdog", "0.5", "--out", str(out)],
                tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = json.loads(out.with_suffix(".json").read_text())
    assert final["runs"] == 2 and final["hangs"] == 2  # both chains of the one killed fit
    assert final["nan_runs"] == 0 and final["converged_runs"] == 0
    assert "watchdog" in final["rows"][0]["error"]


def _import_stress():
    """``benchmarks/stress.py`` as a module, without leaking the 64-bit JAX that its import
    switches on (tests/test_config.py checks that the suite runs in float32)."""
    import jax

    before = jax.config.jax_enable_x64
    try:
        import stress
    finally:
        jax.config.update("jax_enable_x64", before)
    return stress


_BUSY_CHILD = """
import json, sys, time
def busy(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
for _ in range({n}):
    busy(0.25)
    {progress}
print({mark!r} + json.dumps([{{"chain": 0, "done": True}}]), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs")
@pytest.mark.parametrize("progress", [True, False])
def test_stress_watchdog_kills_only_a_fit_without_progress(progress, capsys):
    """A child that burns 2 CPU s but reports progress every 0.25 s outlives a 0.6 s watchdog;
    the same child silent is killed and counted as a hang. The file holding the child's
    progress is named on stdout and removed when the fit ends."""
    stress = _import_stress()
    say = "sys.stderr.write('.'); sys.stderr.flush()" if progress else "pass"
    code = _BUSY_CHILD.format(n=8, progress=say, mark=stress._MARK)
    spec = {"dataset": "x", "prior": "default", "params": {}, "chains": 1}
    rows = stress.run_watched(spec, 0.6, cmd=[sys.executable, "-c", code])
    if progress:
        assert rows[0].get("done") and rows[0]["cpu_s"] >= 1.9 and not rows[0].get("hang")
    else:
        assert rows[0]["hang"] and "no progress" in rows[0]["error"]
    printed = capsys.readouterr().out
    assert printed.startswith("x | default: started; progress: tail -f ")
    assert not Path(printed.split("tail -f ", 1)[1].strip()).exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs")
def test_stress_watchdog_clock_is_the_child_cpu_time():
    """The watchdog's clock is CPU time (a slow fit on a loaded machine is not a hang): it
    grows with work done, not with time slept."""
    import time

    _cpu_seconds = _import_stress()._cpu_seconds

    pid = os.getpid()
    c0 = _cpu_seconds(pid)
    time.sleep(0.3)
    c1 = _cpu_seconds(pid)
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    c2 = _cpu_seconds(pid)
    assert 0 < c0 <= c1 < c0 + 0.1  # sleeping costs no CPU
    assert c2 - c1 >= 0.25  # 0.3 s of work (clock ticks of 10 ms)


def test_load_dataset_subsamples_each_class_equally():
    """``"<set>@<n>"``: n // K rows of each class of the set, rows of the set in its order, the
    same rows on every call (seed 0)."""
    from _common import load_dataset, tiny_data

    X, y = tiny_data()
    Xs, ys = load_dataset("tiny@20")
    assert np.bincount(ys).tolist() == [10, 10]
    rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs]
    assert rows == sorted(rows) and len(set(rows)) == 20
    np.testing.assert_array_equal(y[rows], ys)
    np.testing.assert_array_equal(load_dataset("tiny@20")[0], Xs)
    np.testing.assert_array_equal(load_dataset("tiny")[0], X)
    with pytest.raises(ValueError, match="fewer rows than the 2 classes"):
        load_dataset("tiny@1")


def test_xu_table1_run_note_names_the_worst_quantity_of_an_unconverged_fit():
    from xu_table1 import _run_note

    ok = dict(converged=True, rhat_max=1.005, ess_bulk_min=450.0, num_samples=700, worst="w[1]")
    bad = dict(ok, converged=False, rhat_max=1.13, ess_bulk_min=21.0, num_samples=500, worst="w[7]")
    note = _run_note([ok, bad])
    assert "in 1 of 2 split(s)" in note and "R-hat 1.130 (on w[7])" in note
    assert "(on" not in _run_note([ok])  # converged: nothing to name
    assert "(on" not in _run_note([{k: v for k, v in bad.items() if k != "worst"}])  # older units
