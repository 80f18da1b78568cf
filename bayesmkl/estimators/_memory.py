"""Memory a fit keeps and a prediction holds, estimated before the work starts.

``fit`` checks, before any sweep, the draws it will keep and the sampler's working memory
(:func:`check_fit_memory`, :class:`~bayesmkl.exceptions.FitMemoryError`); a prediction
cuts its test rows into blocks whose arrays fit (:func:`row_blocks`). The limit is the kernels'
(:func:`~bayesmkl.kernels._checks.kernel_memory_limit`: the available memory, the room left
under ``ulimit -v``, or ``$BAYESMKL_MEMORY_LIMIT_GB``).

An outside audit found both: 1,000 classes for 1,200 rows passed the kernel check (184 MB) and
asked XLA for 69.6 GB 35 s into the run, and ``predict_proba`` on 500,000 rows asked for
64 draws × rows × N at once (10.5 GB).
"""

from __future__ import annotations

import math

from bayesmkl.kernels._checks import FitMemoryError, check_memory, kernel_memory_limit
from bayesmkl.sampler.collapsed import n_active_for
from bayesmkl.sampler.state import SweepConfig

__all__ = [
    "AUTO_MAX_KEPT",
    "COLLAPSED_COPIES",
    "PREDICT_MEMORY_SHARE",
    "PREDICTION_COPIES",
    "SWEEP_SYSTEM_COPIES",
    "check_fit_memory",
    "fit_memory",
    "row_blocks",
]

#: Stored draws per chain above which a ``num_samples="auto"`` run thins everything it stored
#: by two (:func:`~bayesmkl.sampler.runlength.sample_until_converged`'s ``max_kept``).
AUTO_MAX_KEPT = 1_000
#: ``(C, N, N)`` float64 arrays the Gaussian (a, b) step holds per chain (M, its Jacobi-scaled
#: copy and the Cholesky factor; the audit's 1,000 classes × 1,200 rows asked XLA for 3.02 times
#: chains × C × N² × 8 bytes).
SWEEP_SYSTEM_COPIES = 3
#: Copies of the collapsed kernel-weight move's gathered kernel columns, (P + 1)·C·N·s float64
#: values (the active points' columns of every kernel and their combination), that one chain's
#: sweep holds at its peak: two layouts of the columns and the temporaries of the gather and of
#: the gradient. XLA's own memory analysis of the compiled sweep: 4.0 copies of P·C·N·s per
#: chain at (P, C, N, M, s) = (16, 10, 7694, 300, 27) (penbased's landmark fit: 1.07 GB a
#: chain), 4.5 at (8, 4, 3000, 100, 32).
COLLAPSED_COPIES = 4
#: Share of the memory limit that one block of test rows may take.
PREDICT_MEMORY_SHARE = 0.5
#: Arrays of (draws × rows × classes) float64 values a prediction of one block holds at once
#: (decision values, their copy and checks, the probabilities and their temporaries).
PREDICTION_COPIES = 8


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def _kept_per_chain(est, run_chunk: int, earlier: int) -> tuple[int, float]:
    """``(draws kept per chain at most, peak factor)``. A fixed length keeps every draw (with
    ``earlier`` ones of a ``warm_start``); ``"auto"`` thins once more than
    :data:`AUTO_MAX_KEPT` are stored, so it keeps at most that plus a chunk. The peak factor
    counts the copy that joins the chunks at the end (2), and for a thinning run also the
    chunks stored after the last thinning, held beside the thinned array (2.5)."""
    if est.num_samples == "auto":
        kept = min(earlier + int(est.max_samples), AUTO_MAX_KEPT + run_chunk)
        return kept, (2.5 if kept > AUTO_MAX_KEPT else 2.0)
    return earlier + int(est.num_samples), 2.0


def _chains_at_once(est) -> int:
    """Chains whose sweeps run (and hold their working memory) at the same time."""
    chains = int(est.num_chains)
    if chains == 1 or est.chain_method == "sequential":
        return 1
    if est.chain_method == "parallel":
        import jax

        return max(1, min(chains, jax.local_device_count()))
    return chains  # vectorized


def fit_memory(
    est, *, P: int, C: int, N: int, run_chunk: int, earlier: int = 0, M: int | None = None
) -> dict:
    """What a fit of ``est`` on ``P`` kernels, ``C`` one-vs-all problems and ``N`` points keeps
    and works with, in bytes (float64 values): ``draws`` (chains × draws kept ×
    ``est._draw_entries(P, C, N, M)``), ``chunk`` (one compiled call's draws), ``systems`` (the
    Gaussian step's ``C`` systems of ``N × N`` per chain running at once; for a landmark fit,
    ``M`` landmarks, ``C`` systems of ``(M + 1)²`` and their whitened designs of ``N × (M + 1)``),
    ``collapsed`` (the collapsed kernel-weight move's gathered kernel columns of its ``n_active``
    points per problem, :data:`COLLAPSED_COPIES` copies per chain running at once; 0 for the
    moves that do not collapse), ``after`` (what ``fit`` computes from the draws at the
    training points, ``est._after_fit_entries(C, N, S)`` for the S = chains × kept draws),
    ``need`` (the largest of:
    during sampling, at the join, after), and the counts they come from."""
    chains = int(est.num_chains)
    kept, peak = _kept_per_chain(est, run_chunk, earlier)
    M = N if M is None else int(M)
    per_draw = int(est._draw_entries(P, C, N, M))
    draws = 8.0 * chains * kept * per_draw
    chunk = 8.0 * chains * min(run_chunk, kept + int(est.num_warmup)) * per_draw
    at_once = _chains_at_once(est)
    if M == N:
        systems = 8.0 * SWEEP_SYSTEM_COPIES * at_once * C * N * N
    else:  # weight space (docs/math.md §16.2)
        systems = 8.0 * at_once * C * (SWEEP_SYSTEM_COPIES * (M + 1) ** 2 + N * (M + 1))
    config = SweepConfig(move=est.sampler)
    s = n_active_for(P, C, N, config.n_active, M) if config.spec.collapsed else 0
    collapsed = 8.0 * COLLAPSED_COPIES * at_once * (P + 1) * C * N * s
    after = 8.0 * int(est._after_fit_entries(C, N, chains * kept))
    need = max(draws + chunk + systems + collapsed, peak * draws, draws + after)
    return dict(need=need, draws=draws, chunk=chunk, systems=systems, collapsed=collapsed,
                after=after, kept=kept, peak=peak, per_draw=per_draw, chains=chains,
                at_once=at_once, n_active=s)  # fmt: skip


def check_fit_memory(
    est, *, P: int, C: int, N: int, run_chunk: int, earlier: int = 0, M: int | None = None
) -> dict:
    """Refuse (:class:`~bayesmkl.exceptions.FitMemoryError`) a fit whose
    :func:`fit_memory` exceeds the limit, with the parts, the limit and what to change; returns
    :func:`fit_memory` otherwise."""
    m = fit_memory(est, P=P, C=C, N=N, run_chunk=run_chunk, earlier=earlier, M=M)
    limit = kernel_memory_limit()
    if limit is None or m["need"] <= limit:
        return m
    name = type(est).__name__
    M = N if M is None else int(M)
    systems = f"{N} × {N}" if M == N else f"({M + 1})² with a design of {N} × {M + 1}"
    what = (
        f"{name}.fit ({m['chains']} chains × {m['kept']} draws kept × {m['per_draw']:,} values "
        f"per draw: {_gib(m['draws'])}, {m['peak']:g} times that while they are joined; the "
        f"sampler's {C} system(s) of {systems} per chain, {m['at_once']} chain(s) at once: "
        f"{_gib(m['systems'])}; the kernel-weight move's columns of {m['n_active']} active "
        f"point(s) per problem in {P} kernels: {_gib(m['collapsed'])}; the values computed "
        f"at the {N} training points after sampling: "
        f"{_gib(m['after'])})"
    )
    hints = []
    if C > 1:
        hints.append(f"fewer classes ({C} one-vs-all problems of {N} training points each)")
    if est.num_samples == "auto":
        hints.append(f"a smaller max_samples (now {est.max_samples}; 'auto' thins to at most "
                     f"{AUTO_MAX_KEPT} stored draws per chain)")  # fmt: skip
    else:
        hints.append(f"fewer num_samples (now {est.num_samples})")
        if int(est.num_samples) > AUTO_MAX_KEPT:
            hints.append(f"num_samples='auto' (it thins to at most {AUTO_MAX_KEPT} stored draws "
                         "per chain)")  # fmt: skip
    hints.append(f"fewer chains (num_chains={est.num_chains})")
    if m["at_once"] > 1 and m["systems"] + m["collapsed"] > m["draws"]:
        hints.append("chain_method='sequential' (one chain's systems at a time)")
    hints.append("fewer rows")
    check_memory(m["need"], what, hints, error=FitMemoryError)
    return m  # pragma: no cover - check_memory raised


def row_blocks(n_rows: int, bytes_per_row: float, share: float = PREDICT_MEMORY_SHARE,
               limit: float | None = None) -> list:  # fmt: skip
    """Slices of ``range(n_rows)`` whose arrays, ``bytes_per_row`` each row, take at most
    ``share`` of the memory limit (``limit`` bytes, default
    :func:`~bayesmkl.kernels._checks.kernel_memory_limit`); one slice (all rows) when they fit
    or no limit is known.

    Examples
    --------
    >>> row_blocks(10, 100.0, share=0.5, limit=1000)
    [slice(0, 5, None), slice(5, 10, None)]
    >>> row_blocks(4, 100.0, share=0.5, limit=1000)
    [slice(0, 4, None)]
    """
    n_rows = int(n_rows)
    limit = kernel_memory_limit() if limit is None else float(limit)
    if limit is None or n_rows * bytes_per_row <= share * limit:
        return [slice(0, n_rows)]
    step = max(1, math.floor(share * limit / max(bytes_per_row, 1.0)))
    return [slice(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]
