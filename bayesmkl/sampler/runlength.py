"""Run length chosen by the data: sample in chunks until R-hat and bulk ESS meet their targets.

:func:`sample_until_converged` drives a :class:`numpyro.infer.MCMC` whose ``num_samples`` is
the chunk length. After warm-up it keeps sampling chunk after chunk (``post_warmup_state``),
and after each chunk computes the rank-normalised split R-hat and the bulk ESS (Vehtari et
al. 2021; ArviZ's statistics, vectorised in :mod:`bayesmkl.sampler.convergence`) of every
monitored quantity over all draws so far. It stops as soon as every quantity has R-hat ≤
``rhat_target`` and bulk ESS ≥ ``ess_target``, or when the sweep or time budget is spent; the
:class:`RunReport` says which.

Memory stays bounded on long runs: once more than ``max_kept`` draws per chain are stored, all
stored draws (and the monitors) are thinned by two, and later chunks by the same factor. The
diagnostics are computed on the thinned draws, so they are those of what is returned.

A run can be resumed (``resume=``, used by ``BM3KLClassifier(warm_start=True)``): its chains
continue from the MCMC state where an earlier run stopped, its draws are appended to the earlier
ones at the earlier thinning, and the diagnostics are those of all draws together.

Quantities with no spread (sd below ``CONSTANT_SD``, e.g. a probability stuck at 1) have no
R-hat or ESS and are skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bayesmkl.sampler.convergence import rhat_and_ess_bulk

CONSTANT_SD = 1e-10
#: Sweeps of the first chunk of a run with a time budget, when the runner runs chunks of any
#: length with one program (:class:`~bayesmkl.sampler.runner.ChainRunner`): the pace of a
#: sweep is measured on them before a longer chunk is started.
FIRST_TIMED_SWEEPS = 5


class RunReport(NamedTuple):
    """What a data-driven run did.

    Attributes
    ----------
    converged : bool
        Every monitored quantity met both targets.
    stopped_by : str
        ``"targets"``, ``"max_samples"`` or ``"max_time"``.
    num_samples : int
        Post-warm-up sweeps per chain.
    thinning : int
        Factor by which the returned draws are thinned.
    rhat_max : float
        Largest R-hat over the monitored quantities (nan if none varies).
    ess_bulk_min : float
        Smallest bulk ESS over the monitored quantities.
    worst : str
        The monitored quantity with the largest R-hat (or smallest ESS when all R-hats pass).
    seconds : float
        Wall time of warm-up and sampling, compilation included.
    compile_seconds : float
        The part of ``seconds`` JAX spent tracing and compiling (or loading compiled programs
        from the persistent cache): :func:`compile_clock` over the run.
    stopped_in : str
        ``"sampling"``, or ``"warmup"`` when the budget ran out before the warm-up ended: the
        draws returned are then warm-up sweeps (``num_samples`` is 0), not a posterior sample.
    warmup_sweeps : int
        Warm-up sweeps per chain that actually ran (fewer than asked when ``stopped_in`` is
        ``"warmup"``).
    """

    converged: bool
    stopped_by: str
    num_samples: int
    thinning: int
    rhat_max: float
    ess_bulk_min: float
    worst: str
    seconds: float
    compile_seconds: float = 0.0
    stopped_in: str = "sampling"
    warmup_sweeps: int = 0


class Resume(NamedTuple):
    """An earlier run that :func:`sample_until_converged` continues.

    Attributes
    ----------
    samples, extra : dict of arrays (chains, draws, ...)
        Its stored draws and extra fields (thinned by ``thinning``).
    thinning : int
    num_samples : int
        Its post-warm-up sweeps per chain.
    seconds : float
        Its wall time.
    """

    samples: dict
    extra: dict
    thinning: int
    num_samples: int
    seconds: float


#: JAX's duration events of tracing, lowering and compiling a program (the backend event also
#: covers a load from the persistent compilation cache).
_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)
_compile_total = [0.0]
_listening = [False]


def _on_duration(event: str, duration: float, **_) -> None:
    if event in _COMPILE_EVENTS:
        _compile_total[0] += float(duration)


def compile_clock() -> float:
    """Seconds JAX has spent compiling in this process since the first call (a running total;
    the difference of two readings is the compile time between them)."""
    if not _listening[0]:
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        _listening[0] = True
    return _compile_total[0]


def convergence_stats(monitors: dict) -> tuple[float, float, str, str]:
    """``(rhat_max, ess_bulk_min, worst_rhat, worst_ess)`` over ``{name: (chains, draws, ...)}``.

    Constant quantities are skipped; with no varying quantity, R-hat is nan and ESS inf.
    """
    rhat_max, ess_min = -np.inf, np.inf
    worst_r = worst_e = ""
    for name, x in monitors.items():
        x = np.asarray(x, dtype=float)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        varying = np.std(x, axis=(0, 1)) > CONSTANT_SD
        if not varying.any():
            continue
        x = np.moveaxis(x[..., varying], -1, 0)  # (k, chains, draws)
        r, e = rhat_and_ess_bulk(x)
        r = np.where(np.isfinite(r), r, np.inf)  # a nan R-hat is no evidence of convergence
        e = np.where(np.isfinite(e), e, 0.0)
        idx = np.flatnonzero(varying)
        if r.max() > rhat_max:
            rhat_max, worst_r = float(r.max()), f"{name}[{int(idx[np.argmax(r)])}]"
        if e.min() < ess_min:
            ess_min, worst_e = float(e.min()), f"{name}[{int(idx[np.argmin(e)])}]"
    return (np.nan if rhat_max == -np.inf else rhat_max), ess_min, worst_r, worst_e


def judge(monitors: dict, rhat_target: float, ess_target: float, **fields) -> RunReport:
    """The :class:`RunReport` of ``monitors`` against the targets; ``fields`` fill the rest
    (``stopped_by``, ``num_samples``, ``thinning``, ``seconds``). A nan R-hat (nothing varies)
    passes."""
    rhat_max, ess_min, worst_r, worst_e = convergence_stats(monitors)
    ok_r = not (rhat_max > rhat_target)
    converged = bool(ok_r and ess_min >= ess_target)
    worst = worst_e if ok_r else worst_r
    return RunReport(converged=converged, rhat_max=rhat_max, ess_bulk_min=ess_min, worst=worst,
                     **fields)  # fmt: skip


def next_check_gap(done: int, ess_min: float, ess_target: float, low: int, high: int) -> int:
    """Sweeps until the next convergence check: the projected sweeps still needed for the ESS
    target, ``done·(ess_target/ess_min − 1)`` (ESS grows about linearly with the run),
    clipped to ``[low, high]`` (a check failed on R-hat alone comes after ``low``)."""
    if not np.isfinite(ess_min) or ess_min <= 0:
        return int(high)
    need = done * (ess_target / ess_min - 1.0)
    return int(np.clip(np.ceil(need), low, high))


def _concat(parts: list[dict]) -> dict:
    return {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]}


def _thin(d: dict, step: int) -> dict:
    return {k: v[:, ::step] for k, v in d.items()}


def _latest(parts: list, n: int) -> list:
    """The last ``n`` sweeps of chunk parts ``(draws, extra, monitored or None)``, each a dict
    of ``(chains, sweeps, ...)`` arrays."""
    keep, total = [], 0
    for part in reversed(parts):
        if total >= n:
            break
        keep.insert(0, part)
        total += next(iter(part[0].values())).shape[1]
    if total > n:  # the oldest kept part loses its first sweeps
        keep[0] = tuple(None if d is None else {k: v[:, total - n :] for k, v in d.items()}
                        for d in keep[0])  # fmt: skip
    return keep


def _stop_for_time(samples, extra, mons, warm_kept, warm_left, done, done0, thin, t0, c0,
                   seconds0, rhat_target, ess_target, bar, warmup_total, monitor=None):  # fmt: skip
    """The result of a run whose time budget ends before its next chunk: during warm-up, the
    latest warm-up draws (``warm_kept``, :func:`_latest`) with ``stopped_in="warmup"``; after
    it, the draws so far."""
    if warm_left == 0:
        return _finish(samples, extra, mons, "max_time", done0 + done, thin, t0, c0, seconds0,
                       rhat_target, ess_target, bar, warmup_sweeps=warmup_total)  # fmt: skip
    s, x = (_concat([p[i] for p in warm_kept]) for i in (0, 1))
    m = monitor(s) if warm_kept[0][2] is None else _concat([p[2] for p in warm_kept])
    return _finish([s], [x], [m], "max_time", done0, thin, t0, c0, seconds0, rhat_target,
                   ess_target, bar, stopped_in="warmup",
                   warmup_sweeps=warmup_total - warm_left)  # fmt: skip


def sample_until_converged(
    mcmc,
    rng_key,
    model_args: tuple,
    monitor: Callable[[dict], dict],
    *,
    num_warmup: int = 0,
    extra_fields: tuple = (),
    rhat_target: float = 1.01,
    ess_target: float = 400.0,
    max_samples: int = 10_000,
    max_time: float | None = None,
    deadline: float | None = None,
    max_kept: int = 1_000,
    resume: Resume | None = None,
    check_every: int | None = None,
    fixed: bool = False,
    progress: bool = False,
) -> tuple[dict, dict, RunReport]:
    """Sample chunks of ``mcmc.num_samples`` sweeps until converged or out of budget.

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
        Built with ``num_samples`` = the chunk length. Its own ``num_warmup`` runs before the
        first chunk, as NumPyro does; a kernel that adapts by itself (``BM3KL(adapt_sweeps=W)``)
        is better run with ``MCMC(num_warmup=0)`` and ``num_warmup=W`` here, so that the warm-up
        too runs in chunks that the time budget can stop.
    rng_key : PRNG key
    model_args : tuple
        Positional arguments of ``mcmc.run`` after the key.
    monitor : callable
        ``monitor(samples) -> {name: array (chains, draws, ...)}``: the quantities whose R-hat
        and ESS decide, computed from one chunk of draws (grouped by chain). Not called for the
        chunks of a runner whose ``get_monitored()`` returns them already (a
        :class:`~bayesmkl.sampler.runner.ChainRunner` with ``monitor_points``).
    num_warmup : int, default 0
        Leading sweeps (counted in chunks) whose draws are discarded.
    extra_fields : tuple of str
        Passed to ``mcmc.run``.
    rhat_target, ess_target : float
        Stop when every monitored quantity has R-hat ≤ ``rhat_target`` and bulk ESS ≥
        ``ess_target``.
    max_samples : int
        Post-warm-up sweeps per chain after which the run stops regardless (with ``fixed``,
        the run length).
    max_time : float or None
        Wall-clock budget in seconds (warm-up and compilation included). Before each chunk the
        run stops if that chunk, at the pace of the last one, would end past the budget; the
        first chunk always runs (it predicts nothing: it includes compilation). With a runner
        that has a ``capacity`` (a :class:`~bayesmkl.sampler.runner.ChainRunner`, which runs
        chunks of any length up to it with one program), the first chunk is
        :data:`FIRST_TIMED_SWEEPS` sweeps and each later one is cut to the sweeps that fit in
        what is left of the budget, so the run ends within about a sweep of it. A budget spent
        during warm-up returns the last warm-up sweeps (at most a chunk's) with
        ``num_samples = 0`` and ``stopped_in="warmup"``.
    deadline : float or None
        The same budget as an absolute :func:`time.perf_counter` reading, for a caller whose
        budget started before this call (an estimator counts its validation and kernels too);
        the earlier of the two applies.
    max_kept : int
        Stored draws per chain above which everything stored is thinned by two.
    resume : Resume, optional
        An earlier run whose chains ``mcmc`` continues (its ``post_warmup_state`` set to the
        earlier last state, ``rng_key`` the keys stored in that state; no warm-up is run): the
        earlier draws come first, the new chunks are thinned as the earlier ones, and
        ``num_samples``/``seconds`` of the report count both runs; ``max_samples`` and
        ``max_time`` budget this call only.
    check_every : int, optional
        Most post-warm-up sweeps between two convergence checks (default: every chunk). After
        a failed check the next comes sooner when the draws so far project the ESS target to
        be met sooner: after ``done·(ess_target/ess_min − 1)`` more sweeps (ESS grows about
        linearly in the run length), at least one chunk and at most ``check_every`` later; a
        check ranks all draws of every monitored quantity, so checking every chunk would add
        its cost to each, and checking only every ``check_every`` sweeps would run on past the
        targets by half that on average.
    fixed : bool, default False
        Run exactly ``max_samples`` post-warm-up sweeps (``stopped_by="num_samples"``); the
        report still judges the targets.
    progress : bool, default False
        One progress bar over the whole run: ``compiling`` and the elapsed seconds while the
        first chunk compiles, then the sweeps, its total the warm-up plus the sweeps up to the
        next convergence check (growing after each failed check; warm-up plus ``max_samples``
        for a fixed run), with the latest worst R-hat and smallest bulk ESS in its postfix.

    Returns
    -------
    samples, extra : dict of arrays (chains, draws, ...)
        Draws and extra fields, thinned by ``report.thinning``.
    report : RunReport
    """
    from bayesmkl.sampler.runner import ChainRunner  # JAX only when a run starts

    chunk = int(mcmc.num_samples)
    check_every = chunk if check_every is None else max(int(check_every), chunk)
    t0, c0 = time.perf_counter(), compile_clock()
    ends = [t for t in (deadline, None if max_time is None else t0 + max_time) if t is not None]
    end = min(ends) if ends else None
    samples, extra, mons = [], [], []
    thin, done, done0, seconds0 = 1, 0, 0, 0.0
    warm_left = int(num_warmup)
    if resume is not None:
        samples, extra = [dict(resume.samples)], [dict(resume.extra)]
        mons = [{k: np.asarray(v) for k, v in monitor(resume.samples).items()}]
        thin, done0, seconds0 = int(resume.thinning), int(resume.num_samples), resume.seconds
        warm_left = 0
    warmup_total = warm_left
    # a runner of chunks of any length with one program: the sweeps are fitted to the budget
    fitted = end is not None and hasattr(mcmc, "capacity") and not fixed
    warm_kept = []  # the latest warm-up draws (at most a chunk's), for a stop in warm-up
    key, pace, next_check = rng_key, None, check_every
    sweep_pace = 0.0  # seconds a sweep, compilation excluded
    check_cost = 0.0  # seconds of the last convergence check; the final report costs as much
    bar = _progress_bar(
        progress, warm_left + (max_samples if fixed else min(next_check, max_samples))
    )
    try:
        while True:
            # the last call runs only the sweeps left (a NumPyro MCMC compiles once more)
            n_run = min(chunk, warm_left + max_samples - done)
            if fitted and pace is None:
                n_run = min(n_run, FIRST_TIMED_SWEEPS)
            elif fitted:  # as many sweeps as end by the deadline, the checks' time kept
                n_run = min(n_run, int((end - time.perf_counter() - 2 * check_cost) / sweep_pace))
                if n_run < 1:
                    return _stop_for_time(samples, extra, mons, warm_kept, warm_left, done,
                                          done0, thin, t0, c0, seconds0, rhat_target,
                                          ess_target, bar, warmup_total, monitor)  # fmt: skip
            mcmc.num_samples = n_run
            t_chunk, c_chunk = time.perf_counter(), compile_clock()
            with _compiling(bar, first=pace is None):
                mcmc.run(key, *model_args, extra_fields=extra_fields)
            s = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
            x = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
            # a runner that returns the monitored quantities itself spares the monitor's work
            m = mcmc.get_monitored() if isinstance(mcmc, ChainRunner) else None
            mcmc.post_warmup_state = mcmc.last_state
            key = mcmc.post_warmup_state.rng_key
            pace = (time.perf_counter() - t_chunk) - (compile_clock() - c_chunk)
            sweep_pace = max(pace, 1e-9) / n_run
            skip = min(warm_left, n_run)
            warm_left -= skip
            if bar is not None:
                bar.update(n_run)
            if skip == n_run:  # a warm-up chunk: nothing kept
                warm_kept = _latest([*warm_kept, (s, x, m)], chunk)
                if not fitted and end is not None and time.perf_counter() + pace > end:
                    return _stop_for_time(samples, extra, mons, warm_kept, warm_left, done,
                                          done0, thin, t0, c0, seconds0, rhat_target,
                                          ess_target, bar, warmup_total, monitor)  # fmt: skip
                continue
            s = {k: v[:, skip:] for k, v in s.items()}
            x = {k: v[:, skip:] for k, v in x.items()}
            m = monitor(s) if m is None else {k: v[:, skip:] for k, v in m.items()}
            m = {k: np.asarray(v) for k, v in m.items()}
            samples.append(_thin(s, thin))
            extra.append(_thin(x, thin))
            mons.append(_thin(m, thin))
            done += n_run - skip

            stopped_by = None
            if fixed and done >= max_samples:
                stopped_by = "num_samples"
            elif not fixed and done >= next_check:
                t_check = time.perf_counter()
                report = judge(_concat(mons), rhat_target, ess_target, stopped_by="targets",
                               num_samples=done0 + done, thinning=thin, seconds=0.0)  # fmt: skip
                check_cost = time.perf_counter() - t_check
                if bar is not None:
                    r, e = report.rhat_max, report.ess_bulk_min
                    bar.set_postfix_str(f"R-hat {r:.3f}, ESS {e:.0f}")
                if report.converged:
                    stopped_by = "targets"
                next_check = done + next_check_gap(done, report.ess_bulk_min, ess_target,
                                                   chunk, check_every)  # fmt: skip
                if bar is not None and stopped_by is None:  # the bar runs to the next check
                    bar.total = warmup_total + min(next_check, max_samples)
                    bar.refresh()
            if stopped_by is None and not fixed and done >= max_samples:
                stopped_by = "max_samples"
            # the next chunk, a check after it and the final report must end by the deadline
            # (a runner fitted to the budget cuts the next chunk instead)
            ahead = pace + (check_cost if done + n_run >= next_check else 0.0) + check_cost
            late = end is not None and time.perf_counter() + ahead > end
            if stopped_by is None and not fitted and late:
                stopped_by = "max_time"
            if stopped_by is not None:
                return _finish(samples, extra, mons, stopped_by, done0 + done, thin, t0, c0,
                               seconds0, rhat_target, ess_target, bar,
                               warmup_sweeps=warmup_total)  # fmt: skip

            kept = sum(next(iter(p.values())).shape[1] for p in samples)
            if kept > max_kept:
                samples, extra, mons = (
                    [_thin(_concat(parts), 2)] for parts in (samples, extra, mons)
                )
                thin *= 2
    finally:
        if bar is not None:
            bar.close()


def _progress_bar(show: bool, total: int):
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=int(total), unit="sweep", desc="BM3KL", dynamic_ncols=True)


class _compiling:
    """While the first chunk runs (it compiles, or loads, the sweep's program), the bar says
    ``compiling`` and a timer thread refreshes it each second so that its elapsed time moves."""

    def __init__(self, bar, first: bool):
        self.bar = bar if first else None
        self._stop = None

    def __enter__(self):
        if self.bar is None:
            return self
        import threading

        self.bar.set_postfix_str("compiling", refresh=True)
        self._stop = threading.Event()

        def tick():
            while not self._stop.wait(1.0):
                self.bar.refresh()

        threading.Thread(target=tick, daemon=True).start()
        return self

    def __exit__(self, *exc):
        if self._stop is not None:
            self._stop.set()
            self.bar.set_postfix_str("", refresh=True)
        return False


def _finish(samples, extra, mons, stopped_by, num_samples, thin, t0, c0, seconds0, rhat_target,
            ess_target, bar, **fields):  # fmt: skip
    """The concatenated draws and the final :class:`RunReport` (``fields``: ``stopped_in``,
    ``warmup_sweeps``)."""
    if bar is not None:
        bar.total = bar.n
        bar.refresh()
    report = judge(
        _concat(mons), rhat_target, ess_target, stopped_by=stopped_by, num_samples=num_samples,
        thinning=thin, seconds=seconds0 + time.perf_counter() - t0,
        compile_seconds=compile_clock() - c0, **fields,
    )  # fmt: skip
    return _concat(samples), _concat(extra), report
