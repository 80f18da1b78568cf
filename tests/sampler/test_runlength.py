"""The data-driven run length: diagnostics, stopping rules and bounded memory."""

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from bayesmkl.sampler.runlength import (
    Resume,
    convergence_stats,
    next_check_gap,
    sample_until_converged,
)


def _normal_model():
    numpyro.sample("x", dist.Normal(0.0, 1.0).expand([2]))


def _mcmc(chunk):
    return MCMC(
        NUTS(_normal_model), num_warmup=100, num_samples=chunk, num_chains=4,
        chain_method="vectorized", progress_bar=False,
    )  # fmt: skip


def _monitor(s):
    return {"x": s["x"]}


def test_convergence_stats_separates_mixed_from_stuck_chains():
    rng = np.random.default_rng(0)
    iid = rng.normal(size=(4, 500, 3))
    r, e, _, _ = convergence_stats({"iid": iid})
    assert r < 1.01 and e > 1000  # 2,000 independent draws
    stuck = iid + np.arange(4)[:, None, None]  # chains centred at 0, 1, 2, 3
    r, e, worst_r, _ = convergence_stats({"iid": iid, "stuck": stuck})
    assert r > 1.5 and worst_r.startswith("stuck[")
    # constant quantities carry no evidence either way and are skipped
    r, e, _, _ = convergence_stats({"c": np.ones((4, 50, 2))})
    assert np.isnan(r) and e == np.inf


def test_stops_at_the_targets_on_an_easy_target():
    samples, extra, rep = sample_until_converged(
        _mcmc(250), jax.random.key(0), (), _monitor, extra_fields=("diverging",),
        ess_target=400, max_samples=5000,
    )  # fmt: skip
    assert rep.converged and rep.stopped_by == "targets"
    assert rep.num_samples % 250 == 0 and rep.num_samples <= 1000
    assert samples["x"].shape == (4, rep.num_samples, 2)
    assert extra["diverging"].shape == (4, rep.num_samples)
    assert rep.rhat_max <= 1.01 and rep.ess_bulk_min >= 400


class _AR1Runner:
    """A runner of 4 AR(1) chains x_t = ρ x_{t−1} + √(1−ρ²) ε_t (stationary N(0, 1)), with the
    interface :func:`sample_until_converged` uses; its ESS per draw is about (1−ρ)/(1+ρ)."""

    def __init__(self, chunk, rho, seed=0):
        self.num_samples, self.rho = chunk, rho
        self.rng = np.random.default_rng(seed)
        self.x = self.rng.normal(size=4)
        self.post_warmup_state = self.last_state = None

    def run(self, key, extra_fields=()):
        out = np.empty((4, self.num_samples))
        for t in range(self.num_samples):
            eps = self.rng.normal(size=4)
            self.x = self.rho * self.x + np.sqrt(1 - self.rho**2) * eps
            out[:, t] = self.x
        self._draws = {"x": out}
        self.last_state = type("S", (), {"rng_key": key})()

    def get_samples(self, group_by_chain=True):
        return self._draws

    def get_extra_fields(self, group_by_chain=True):
        return {}


class _Clock:
    """A stand-in for the :mod:`time` module whose clock moves only when a runner sweeps."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class _TimedRunner(_AR1Runner):
    """An AR(1) runner with a ``capacity`` (chunks of any length), each sweep 1 s on ``clock``;
    it records the length of every chunk it runs."""

    def __init__(self, chunk, clock):
        super().__init__(chunk, 0.9)
        self.capacity, self.clock, self.lengths = chunk, clock, []

    def run(self, key, extra_fields=()):
        super().run(key, extra_fields)
        self.lengths.append(self.num_samples)
        self.clock.now += self.num_samples


def test_a_runner_with_a_capacity_fits_its_chunks_to_the_time_budget(monkeypatch):
    """A first chunk of FIRST_TIMED_SWEEPS sweeps gives the pace; later chunks are cut to the
    sweeps left in the budget, so the run ends at it instead of a chunk before or after."""
    from bayesmkl.sampler import runlength

    clock = _Clock()
    monkeypatch.setattr(runlength, "time", clock)
    first = runlength.FIRST_TIMED_SWEEPS
    mcmc = _TimedRunner(50, clock)
    _, _, rep = sample_until_converged(
        mcmc, jax.random.key(0), (), _monitor, num_warmup=20, ess_target=1e9, max_samples=5000,
        max_time=100.0,
    )  # fmt: skip
    assert mcmc.lengths == [first, 50, 100 - 50 - first]
    assert rep.stopped_by == "max_time" and rep.num_samples == 80 and rep.seconds == 100.0
    # a budget spent in warm-up keeps the latest warm-up sweeps, at most a chunk of them
    clock.now = 0.0
    mcmc = _TimedRunner(20, clock)
    samples, _, rep = sample_until_converged(
        mcmc, jax.random.key(0), (), _monitor, num_warmup=1000, ess_target=1e9,
        max_samples=5000, max_time=48.0,
    )  # fmt: skip
    assert mcmc.lengths == [first, 20, 20, 48 - 40 - first]
    assert rep.stopped_in == "warmup" and rep.warmup_sweeps == 48 and rep.num_samples == 0
    assert samples["x"].shape == (4, 20)
    np.testing.assert_array_equal(samples["x"][:, -3:], mcmc._draws["x"])
    # a runner without one (NumPyro's MCMC) runs whole chunks while the next fits
    clock.now = 0.0
    mcmc = _TimedRunner(50, clock)
    del mcmc.capacity
    sample_until_converged(mcmc, jax.random.key(0), (), _monitor, num_warmup=20,
                           ess_target=1e9, max_samples=5000, max_time=120.0)  # fmt: skip
    assert mcmc.lengths == [50, 50]


def test_next_check_comes_when_the_ess_projects_the_target():
    assert next_check_gap(250, 200.0, 400.0, 25, 250) == 250  # half way: as many again
    assert next_check_gap(250, 300.0, 400.0, 25, 250) == 84  # 250·(4/3 − 1), rounded up
    assert next_check_gap(250, 390.0, 400.0, 25, 250) == 25  # at least one chunk
    assert next_check_gap(250, 40.0, 400.0, 25, 250) == 250  # at most check_every
    assert next_check_gap(250, 500.0, 400.0, 25, 250) == 25  # failed on R-hat alone
    assert next_check_gap(250, 0.0, 400.0, 25, 250) == 250


def test_stops_soon_after_the_targets_are_met_not_at_the_next_multiple():
    """AR(1) chains with ESS per draw ≈ 1/3: 4 chains reach ESS 400 near 300 draws each, so
    the first check (at 250) fails and the next comes after about 84 more sweeps, not 250:
    the run stops between 275 and 450 (checking every 250 sweeps it would stop at 500)."""
    _, _, rep = sample_until_converged(
        _AR1Runner(25, 0.5), jax.random.key(0), (), _monitor, ess_target=400,
        max_samples=5000, check_every=250,
    )  # fmt: skip
    assert rep.converged and rep.stopped_by == "targets"
    assert 275 <= rep.num_samples <= 450 and rep.num_samples % 25 == 0, rep.num_samples


def test_budget_stop_reports_it_and_thins_to_bounded_memory():
    samples, _, rep = sample_until_converged(
        _mcmc(100), jax.random.key(1), (), _monitor, ess_target=1e9, max_samples=800,
        max_kept=250,
    )  # fmt: skip
    assert not rep.converged and rep.stopped_by == "max_samples"
    assert rep.num_samples == 800 and rep.thinning == 4
    # 800 sweeps thinned: stored draws stay within 2·max_kept per chain
    assert samples["x"].shape[1] == 200 <= 2 * 250
    assert rep.ess_bulk_min < 1e9


def test_time_budget_stops_the_run_but_one_chunk_always_runs():
    _, _, rep = sample_until_converged(
        _mcmc(100), jax.random.key(2), (), _monitor, ess_target=1e9, max_samples=10_000,
        max_time=1e-6,
    )  # fmt: skip
    assert rep.stopped_by == "max_time" and rep.num_samples == 100
    assert rep.seconds > 1e-6


def test_resumed_run_equals_one_longer_run_thinning_included():
    """400 sweeps, then 400 more from the stored state and draws (``resume=``), give the draws,
    thinning and report of one run of 800: the earlier draws are thinned with the new ones."""
    kw = dict(ess_target=1e9, max_kept=250, extra_fields=("diverging",))
    mcmc = _mcmc(100)
    s1, x1, r1 = sample_until_converged(mcmc, jax.random.key(3), (), _monitor, max_samples=400,
                                        **kw)  # fmt: skip
    assert r1.num_samples == 400 and r1.thinning == 2
    s2, x2, r2 = sample_until_converged(
        mcmc, mcmc.last_state.rng_key, (), _monitor, max_samples=400, **kw,
        resume=Resume(s1, x1, r1.thinning, r1.num_samples, r1.seconds),
    )  # fmt: skip
    s, x, r = sample_until_converged(_mcmc(100), jax.random.key(3), (), _monitor,
                                     max_samples=800, **kw)  # fmt: skip
    assert r2.num_samples == r.num_samples == 800 and r2.thinning == r.thinning == 4
    np.testing.assert_array_equal(s2["x"], s["x"])
    np.testing.assert_array_equal(x2["diverging"], x["diverging"])
    assert r2.ess_bulk_min == r.ess_bulk_min and r2.seconds >= r1.seconds


def test_time_budget_stops_during_warm_up_and_says_so():
    """With a warm-up far longer than the budget, the run stops between warm-up chunks: no
    post-warm-up sweep, the last warm-up chunk returned, stopped_by='max_time'."""
    samples, _, rep = sample_until_converged(
        _mcmc(50), jax.random.key(4), (), _monitor, num_warmup=1_000_000, max_time=2.0,
        ess_target=1e9,
    )  # fmt: skip
    assert rep.stopped_by == "max_time" and rep.num_samples == 0 and not rep.converged
    assert samples["x"].shape == (4, 50, 2)
    # the report says that these are warm-up draws, and how many warm-up sweeps ran
    assert rep.stopped_in == "warmup"
    assert 50 <= rep.warmup_sweeps < 1_000_000 and rep.warmup_sweeps % 50 == 0


def test_a_deadline_counts_time_spent_before_the_run():
    """``deadline`` is absolute: a caller's budget that began earlier (an estimator's kernels,
    its compilation) is spent already, so the run stops after its one obligatory chunk."""
    import time

    _, _, rep = sample_until_converged(
        _AR1Runner(25, 0.5), jax.random.key(0), (), _monitor, num_warmup=50, ess_target=1e9,
        max_samples=5000, deadline=time.perf_counter() - 1.0,
    )  # fmt: skip
    assert rep.stopped_by == "max_time" and rep.stopped_in == "warmup"
    assert rep.warmup_sweeps == 25 and rep.num_samples == 0
    _, _, rep = sample_until_converged(
        _AR1Runner(25, 0.5), jax.random.key(0), (), _monitor, num_warmup=50, ess_target=400,
        max_samples=5000, deadline=time.perf_counter() + 600,
    )  # fmt: skip
    assert rep.stopped_by == "targets" and rep.stopped_in == "sampling"
    assert rep.warmup_sweeps == 50


def test_one_progress_bar_with_the_diagnostics(capsys):
    sample_until_converged(
        _mcmc(100), jax.random.key(5), (), _monitor, num_warmup=100, max_samples=200,
        ess_target=1e9, progress=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("\rBM3KL:   0%")  # one bar for all
    assert "R-hat" in err and "ESS" in err and "300/300" in err
    assert "compiling" in err  # said while the first chunk runs


def test_the_progress_bar_runs_to_the_next_check_not_to_the_budget(capsys):
    """An automatic run's bar totals warm-up plus the sweeps to the next convergence check,
    and grows after a failed check, instead of promising the whole ``max_samples``."""
    _, _, rep = sample_until_converged(
        _AR1Runner(25, 0.5), jax.random.key(0), (), _monitor, num_warmup=50, ess_target=400,
        max_samples=5000, check_every=250, progress=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert rep.stopped_by == "targets"
    assert "/300 " in err  # 50 warm-up + the first check at 250
    assert "/5050" not in err and "/5000" not in err
    done = 50 + rep.num_samples
    assert f"{done}/{done} " in err  # ends full at the sweeps that ran
