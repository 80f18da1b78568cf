"""Vectorised BM3KL chains run in compiled chunks that are compiled once.

:class:`ChainRunner` is the part of :class:`numpyro.infer.MCMC`'s interface that
:func:`~bayesmkl.sampler.runlength.sample_until_converged` uses (``num_samples``, ``run``,
``get_samples``, ``get_extra_fields``, ``post_warmup_state``, ``last_state``), for the default
``chain_method="vectorized"``. Why not ``MCMC`` itself: every ``MCMC.run`` call compiles its
collection loop anew, so a run cut into chunks — which the time budget and the progress bar
need — would pay a compile per chunk. Here one chunk is a pure function

    ``chunk(state, K, targets, weight, margin, points, sweeps) -> (state, draws)``: a loop of
    ``sweeps`` vmapped sweeps of :func:`~bayesmkl.sampler.sweep.build_sweep`, their draws
    written into buffers of the chunk's length (the loop ``lax.scan`` builds, with its bound
    given at run time, so a shorter chunk runs the same program),

jitted once per (likelihood, sweep configuration, warm-up length, chunk length, collected
fields) and kept in a small module-level cache, so every chunk of a run and every later fit
with the same configuration reuse it (a new data shape compiles again, or loads from JAX's
persistent cache). The chains, their keys and their draws are those of
``MCMC(..., chain_method="vectorized")``: the same
:meth:`BM3KLKernel.init <bayesmkl.sampler.kernel.BM3KLKernel.init>` on the same split keys,
then the same sweeps.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.config import x64_enabled
from bayesmkl.sampler.kernel import BM3KLKernel, unpack_args
from bayesmkl.sampler.state import ChainState
from bayesmkl.sampler.sweep import build_sweep

__all__ = ["CHAIN_GROUPS_ENV", "ChainRunner", "MAX_HELD_SHAPES", "MIN_GROUP_KERNEL_ENTRIES",
           "blas_limit", "chain_groups_for", "clear_chunk_cache", "hold_programs_for",
           "release_compiled_programs"]  # fmt: skip

#: Compiled chunk functions kept (least recently used dropped first, with their programs).
CHUNK_CACHE_SIZE = 4
_CHUNKS: OrderedDict = OrderedDict()
#: Data shapes whose compiled programs a process keeps in memory (:func:`hold_programs_for`).
MAX_HELD_SHAPES = 4
_HELD_SHAPES: list = []


def clear_chunk_cache() -> None:
    """Drop every cached chunk function (and so, once unreferenced, its compiled programs)."""
    _CHUNKS.clear()


#: glibc's mallopt parameter number of M_MMAP_THRESHOLD, and the threshold set (bytes).
_M_MMAP_THRESHOLD, MMAP_THRESHOLD = -3, 1 << 20


def release_compiled_programs() -> None:
    """Free the compiled programs held in this process: the chunk functions and JAX's
    in-memory caches (:func:`jax.clear_caches`; programs are compiled again, or loaded from
    the persistent compilation cache, when next needed), then hand the freed heap back to the
    operating system.

    On glibc it also fixes ``M_MMAP_THRESHOLD`` at 1 MiB (once; glibc otherwise raises it as
    large blocks are freed), so that later arrays of 1 MiB or more are mapped and unmapped
    on their own instead of fragmenting the heap. Only a process that fits more than
    :data:`MAX_HELD_SHAPES` data shapes gets here.
    """
    clear_chunk_cache()
    jax.clear_caches()
    _HELD_SHAPES.clear()
    gc.collect()
    _glibc_release()


def _glibc_release() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to hand back this way
        pass


def hold_programs_for(shape) -> bool:
    """Note that a fit of data ``shape`` (any hashable key) starts; returns whether the
    programs of earlier shapes were released for it.

    A jitted function keeps one compiled program per input shape for the life of the process,
    and each program of the sweep holds about 1,300 memory mappings and 70–90 MB: a process
    that fits many data sizes (cross-validation, a hold-out loop) would reach Linux's limit of
    65,530 mappings after about 45 fits and die in LLVM with "Cannot allocate memory". So the
    programs of at most :data:`MAX_HELD_SHAPES` shapes are held: a new shape beyond them
    releases them all (:func:`release_compiled_programs`) before its own are compiled. Shapes
    seen recently (the folds of a grid search, say) keep theirs.
    """
    if shape in _HELD_SHAPES:
        _HELD_SHAPES.remove(shape)
        _HELD_SHAPES.append(shape)
        return False
    released = len(_HELD_SHAPES) >= MAX_HELD_SHAPES
    if released:
        release_compiled_programs()
    _HELD_SHAPES.append(shape)
    return released


def _chunk_fn(likelihood, config, num_warmup: int, length: int, fields: tuple, monitors: bool,
              dropped: tuple = ()):  # fmt: skip
    key = (likelihood, config, int(num_warmup), int(length), tuple(fields), bool(monitors),
           tuple(dropped))  # fmt: skip
    fn = _CHUNKS.pop(key, None)
    if fn is None:
        sweep = build_sweep(likelihood, config, num_warmup)

        def one(chain_state, K, targets, weight, margin):
            return ChainState.join(*sweep(chain_state.state, K, targets, weight, margin))

        vsweep = jax.vmap(one, in_axes=(0, None, None, None, None))

        def run(state, K, targets, weight, margin, points, sweeps):
            def draws(s):  # what a chunk returns of each sweep's state
                # the monitored points, point-major: (chains, n·C), as run_monitor orders them
                f_mon = jnp.swapaxes(jnp.take(s.f, points, axis=2), 1, 2).reshape(s.f.shape[0], -1)
                z = {k: v for k, v in s.z._asdict().items() if k not in dropped} if dropped else s.z
                return z, tuple(getattr(s, n) for n in fields), f_mon if monitors else ()

            # ``sweeps`` ≤ ``length`` sweeps, their draws in buffers of ``length`` (the loop
            # lax.scan would build, with a bound given at run time); the buffers' shapes are
            # those of the state's own draws, so the sweep is traced once
            shapes = jax.eval_shape(draws, state)
            bufs = jax.tree.map(lambda a: jnp.zeros((length, *a.shape), a.dtype), shapes)

            def body(i, carry):
                s = vsweep(carry[0], K, targets, weight, margin)  # s.f: (chains, C, N)
                put = partial(jax.lax.dynamic_update_index_in_dim, index=i, axis=0)
                return s, jax.tree.map(put, carry[1], draws(s))

            return jax.lax.fori_loop(0, sweeps, body, (state, bufs))

        fn = jax.jit(run)
    _CHUNKS[key] = fn
    while len(_CHUNKS) > CHUNK_CACHE_SIZE:
        _CHUNKS.popitem(last=False)
    return fn


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Environment variable that sets the number of chain groups ``"auto"`` gives (an integer).
CHAIN_GROUPS_ENV = "BAYESMKL_CHAIN_GROUPS"
#: Fewest kernel entries (P·N·N, or P·N·M with landmarks) for which ``"auto"`` splits the
#: chains: below it a sweep takes well under a millisecond, and the split (threads, and two
#: small programs per data shape) costs more than it gains.
MIN_GROUP_KERNEL_ENTRIES = 2**20


def chain_groups_for(num_chains: int, groups="auto", kernel_entries: int | None = None) -> int:
    """How many groups of vectorised chains :class:`ChainRunner` runs at once, each in its own
    thread: ``groups`` itself when an int (it must divide ``num_chains``); ``"auto"``: the
    value of ``$BAYESMKL_CHAIN_GROUPS`` when set, else 1 for kernels of fewer than
    :data:`MIN_GROUP_KERNEL_ENTRIES` entries (``kernel_entries``, when given) or on an
    accelerator (one runs one program best), else the largest divisor of ``num_chains`` that
    is at most the number of cores this process may use."""
    num_chains = int(num_chains)
    if groups == "auto" and os.environ.get(CHAIN_GROUPS_ENV, "").strip():
        groups = os.environ[CHAIN_GROUPS_ENV].strip()
        if not groups.isdigit():
            raise ValueError(f"${CHAIN_GROUPS_ENV} must be a positive integer; got {groups!r}")
    if groups != "auto":
        g = int(groups)
        if g < 1 or num_chains % g:
            raise ValueError(f"chain groups must divide num_chains={num_chains}; got {groups}")
        return g
    small = kernel_entries is not None and kernel_entries < MIN_GROUP_KERNEL_ENTRIES
    if small or jax.default_backend() != "cpu":
        return 1
    cores = _usable_cores()
    return max(g for g in range(1, num_chains + 1) if num_chains % g == 0 and g <= cores)


def blas_limit():
    """A context in which the BLAS libraries (NumPy's and SciPy's OpenBLAS; jaxlib's CPU
    Cholesky and triangular solves call SciPy's) run one thread each while chains sample; a
    no-op where they already do (``OPENBLAS_NUM_THREADS=1``).

    The sweep's factorisations are small and many (33 × 33 in each leapfrog step, N × N once a
    sweep), so BLAS threads gain nothing there; OpenBLAS starts one per core by default, and
    they then wait for the cores that the chain groups hold (docs/benchmarks.md, "Speed and
    scaling": about half the sampling time on two cores).
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    now = max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)
    return contextlib.nullcontext() if now <= 1 else threadpool_limits(limits=1, user_api="blas")


@partial(jax.jit, static_argnums=1)
def _split(state, groups: int):
    """``state`` cut into ``groups`` equal parts along its chain axis (one program)."""
    n = jax.tree.leaves(state)[0].shape[0] // groups
    return tuple(jax.tree.map(lambda x, i=i: x[i * n : (i + 1) * n], state) for i in range(groups))


@jax.jit
def _join(parts):
    """The inverse of :func:`_split`."""
    return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *parts)


def _by_chain(x, n: int):
    """The first ``n`` of ``(draws, chains, ...)`` → ``(chains, n, ...)`` as NumPy."""
    return np.swapaxes(np.asarray(x)[:n], 0, 1)


class ChainRunner:
    """``num_chains`` vectorised BM3KL chains, ``num_samples`` sweeps per :meth:`run`.

    Parameters
    ----------
    kernel : BM3KLKernel
        The sampler of either model (:class:`~bayesmkl.sampler.sampler.BM3KL`,
        :class:`~bayesmkl.sampler.regression.BM3KLReg`); its ``adapt_sweeps`` (default 0) is
        the warm-up length of the chains' step-size and mass adaptation. Every sweep is
        returned: discarding the warm-up is the caller's
        (:func:`~bayesmkl.sampler.runlength.sample_until_converged`'s ``num_warmup``).
    num_chains : int
    num_samples : int
        Sweeps per :meth:`run` (the chunk length); may be changed between calls. The compiled
        chunk runs any number of sweeps up to its length, :attr:`capacity` (``num_samples`` at
        construction, or the largest asked since): a shorter run reuses it, a longer one
        compiles once more.
    monitor_points : array of int, optional
        Training points whose held-in decision values each chunk also returns
        (:meth:`get_monitored`), taken from the sweep's :class:`~bayesmkl.sampler.state.Info`,
        which has them anyway: the run-length monitor then need not recompute ``K_w`` per
        draw.
    chain_groups : int or "auto", default="auto"
        The chains are split into this many equal groups, each run by the same compiled chunk
        (vectorised over its chains) in its own thread, so that the groups run on different
        cores at once (one XLA CPU program of vectorised chains keeps about one core busy).
        Each chain runs the same sweeps as in one group; the compiled program of a narrower
        batch may vectorise its arithmetic differently, so the draws can differ from the
        one-group run's in the last bits. ``"auto"``: :func:`chain_groups_for`, given the size
        of the kernels at each :meth:`run` (the number used is ``chain_groups`` after it).
    """

    def __init__(self, kernel: BM3KLKernel, num_chains: int, num_samples: int, monitor_points=None,
                 chain_groups="auto"):  # fmt: skip
        self.kernel = kernel
        self.num_chains = int(num_chains)
        self.num_samples = int(num_samples)
        self.capacity = self.num_samples
        self.monitor_points = monitor_points
        self._groups_asked = chain_groups
        self.chain_groups = chain_groups_for(self.num_chains, chain_groups)
        self.post_warmup_state = None
        self.last_state = None
        self._draws = self._extra = self._monitored = None

    def run(self, rng_key, *model_args, extra_fields=()):
        """Run one chunk: from ``post_warmup_state`` (its keys replaced by ``rng_key``) if set,
        else from :meth:`BM3KLKernel.init` on ``jax.random.split(rng_key, num_chains)``.

        ``extra_fields`` are fields of :class:`~bayesmkl.sampler.state.ChainState` to collect
        besides the draws of ``z``; as in :meth:`numpyro.infer.MCMC.run`, an entry
        ``"~z.<site>"`` leaves that site out of the draws instead."""
        K, targets, weight, margin = unpack_args(model_args, {})
        nw = int(self.kernel.adapt_sweeps or 0)
        if self.post_warmup_state is None:
            keys = jax.random.split(rng_key, self.num_chains)
            state = self.kernel.init(keys, nw, None, model_args, {})
        else:
            state = self.post_warmup_state._replace(rng_key=rng_key)
        fields = tuple(f for f in extra_fields if not f.startswith("~"))
        dropped = tuple(f[len("~z.") :] for f in extra_fields if f.startswith("~z."))
        monitors = self.monitor_points is not None
        points = jnp.asarray(self.monitor_points if monitors else [0], dtype=jnp.int32)
        kernel = self.kernel
        n = int(self.num_samples)
        self.capacity = max(self.capacity, n)
        fn = _chunk_fn(kernel.likelihood, kernel.config, nw, self.capacity, fields, monitors,
                       dropped)  # fmt: skip
        self.chain_groups = chain_groups_for(
            self.num_chains, self._groups_asked, int(np.prod(K.shape))
        )
        self.last_state, (z, extra, f_mon) = self._run_groups(
            fn, state, (K, targets, weight, margin, points, jnp.int32(n))
        )
        by_chain = partial(_by_chain, n=n)
        draws = {k: by_chain(v) for k, v in (z if isinstance(z, dict) else z._asdict()).items()}
        draws["w"] = draws["e"] / draws["e"].sum(axis=-1, keepdims=True)
        self._draws = draws
        self._extra = {f: by_chain(v) for f, v in zip(fields, extra, strict=True)}
        self._monitored = None
        if monitors:
            self._monitored = {"w": draws["w"], "f": by_chain(f_mon)}
            for site in kernel.monitored_sites:
                self._monitored[site] = draws[site]

    def _run_groups(self, fn, state, args):
        """``fn(state, *args)`` with the chains (axis 0 of ``state``; axis 1 of the draws)
        split into :attr:`chain_groups` groups run in threads, results joined in chain order
        (the draws as NumPy arrays)."""
        g = self.chain_groups
        if g == 1:
            with blas_limit():
                return jax.block_until_ready(fn(state, *args))
        x64 = x64_enabled()  # a thread-local setting: the workers take the caller's

        def work(part):
            with jax.enable_x64(x64):
                return jax.block_until_ready(fn(part, *args))

        with blas_limit(), ThreadPoolExecutor(max_workers=g) as pool:
            outs = list(pool.map(work, _split(state, g)))
        draws = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *(o[1] for o in outs))
        return _join(tuple(o[0] for o in outs)), draws

    def get_samples(self, group_by_chain: bool = True) -> dict:
        """Draws of the last :meth:`run`, ``(chains, draws, ...)`` (``w`` included)."""
        return self._draws if group_by_chain else _flatten(self._draws)

    def get_monitored(self) -> dict | None:
        """``{"w", "f"}`` (and the kernel's ``monitored_sites``) of the last :meth:`run`,
        ``(chains, draws, ...)``, in the layout of :func:`bayesmkl.estimators._fitting.run_monitor`
        (``None`` without ``monitor_points``)."""
        return self._monitored

    def get_extra_fields(self, group_by_chain: bool = True) -> dict:
        """Extra fields of the last :meth:`run`, ``(chains, draws)``."""
        return self._extra if group_by_chain else _flatten(self._extra)


def _flatten(d: dict) -> dict:
    return {k: jnp.reshape(v, (-1,) + v.shape[2:]) for k, v in d.items()}
