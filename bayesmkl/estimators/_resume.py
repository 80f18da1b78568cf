"""Resumable fits: what ``BM3KLClassifier(warm_start=True)`` keeps and checks to continue chains.

A fit stores a :class:`ResumePoint`: the final MCMC state of every chain (the sampler state
after the last sweep, its PRNG key, and the frozen step size / mass matrix of the exact moves),
a fingerprint of the data the chains targeted (training kernels, ±1 targets, sample weights)
and the parameters that define the posterior or the Markov chain. A warm-started fit continues
from that state only when all of them are unchanged; anything else raises ``ValueError``,
because the old draws would then belong to another posterior (or another chain).

The state continues the key stream too: NumPyro's continuation (``post_warmup_state``) runs
the next sweep with the key stored in the state, which is the key the next sweep of one
longer run would use. A fixed-length continuation therefore reproduces the draws of one longer
run with the same seed exactly (tested).
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesmkl.estimators._params import RESUME_PARAMS
from bayesmkl.posterior import diagnostics
from bayesmkl.sampler.runlength import Resume

__all__ = [
    "CHAIN_PARAMS",
    "POSTERIOR_PARAMS",
    "ResumePoint",
    "data_fingerprint",
    "earlier_run",
    "previous",
]

#: Parameters that define the posterior (with the data).
POSTERIOR_PARAMS = RESUME_PARAMS["posterior"]
#: Parameters that define the Markov chain whose state is continued.
CHAIN_PARAMS = RESUME_PARAMS["chain"]


class ResumePoint(NamedTuple):
    """Where a fit stopped (stored by ``fit`` as ``BM3KLClassifier._resume``).

    Attributes
    ----------
    state : ChainState with NumPy leaves
        Last MCMC state, with a leading chain axis; ``rng_key`` holds the raw key data.
    key_impl : object
        PRNG implementation of the keys (``jax.random.key_impl``).
    fingerprint : str
        :func:`data_fingerprint` of the training data.
    params : dict
        The values of ``POSTERIOR_PARAMS + CHAIN_PARAMS`` at fit time.
    calibration : object
        ``calibration`` at fit time (the calibration map is re-used while it is unchanged).
    seed : int
        The seed of the original fit.
    """

    state: object
    key_impl: object
    fingerprint: str
    params: dict
    calibration: object
    seed: int

    @classmethod
    def from_state(cls, last_state, **fields):
        key = last_state.rng_key
        raw = last_state._replace(rng_key=jax.random.key_data(key))
        return cls(state=jax.tree.map(np.asarray, raw), key_impl=jax.random.key_impl(key),
                   **fields)  # fmt: skip

    def mcmc_state(self):
        """The stored state as JAX arrays with typed keys (for ``MCMC.post_warmup_state``)."""
        s = jax.tree.map(jnp.asarray, self.state)
        return s._replace(rng_key=jax.random.wrap_key_data(s.rng_key, impl=self.key_impl))


def data_fingerprint(*arrays) -> str:
    """BLAKE2b digest of the dtypes, shapes and bytes of ``arrays`` (``None`` entries count)."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        if a is None:
            h.update(b"none;")
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
    return h.hexdigest()


def _param_values(est) -> dict:
    params = est.get_params(deep=False)
    out = {}
    for name in POSTERIOR_PARAMS + CHAIN_PARAMS:
        v = params[name]
        if name == "kernels" and not isinstance(v, str):
            v = repr(v)  # a KernelPool: its spec (the fitted kernels are in the fingerprint)
        out[name] = v
    return out


def _same(a, b) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # noqa: BLE001 - objects without an array form
        return a == b


def previous(est, fingerprint: str):
    """The :class:`ResumePoint` a ``warm_start`` fit of ``est`` continues, or ``None``.

    ``None`` when ``est`` was never fitted (a warm start then fits from scratch, as in
    scikit-learn). Raises ``ValueError`` when it was fitted but cannot be continued: no stored
    state (a classifier read by ``BM3KLClassifier.load``), other data, or changed parameters.
    """
    if not hasattr(est, "posterior_"):
        return None
    point = getattr(est, "_resume", None)
    if point is None:
        raise ValueError(
            "warm_start=True: this classifier holds draws but not the sampler's final state "
            "(a model read by load() keeps the draws only; the file format has no MCMC "
            "state), so its chains cannot be continued; fit with warm_start=False"
        )
    problems = []
    if point.fingerprint != fingerprint:
        problems.append("the training data (X, y or sample weights) differ")
    now = _param_values(est)
    changed = [k for k in now if not _same(now[k], point.params[k])]
    problems += [f"{k}: {point.params[k]!r} -> {now[k]!r}" for k in changed]
    if problems:
        raise ValueError(
            "warm_start=True can only continue the previous fit's chains on the same data with "
            "the same model and sampler parameters; changed: "
            + "; ".join(problems)
            + ". Set warm_start=False to start new chains."
        )
    return point


def new_point(est, last_state, fingerprint: str, seed: int) -> ResumePoint:
    """The :class:`ResumePoint` of a fit of ``est`` that ended in ``last_state``."""
    return ResumePoint.from_state(
        last_state, fingerprint=fingerprint, params=_param_values(est),
        calibration=est.calibration, seed=int(seed),
    )  # fmt: skip


def append(old: dict, new: dict, thinning: int) -> dict:
    """``old`` draws then ``new`` ones thinned by ``thinning``, along the draw axis (1)."""
    return {k: np.concatenate([np.asarray(old[k]), np.asarray(new[k])[:, ::thinning]], axis=1)
            for k in old}  # fmt: skip


def earlier_run(est):
    """The stored draws and run report of a fitted ``est`` as a
    :class:`~bayesmkl.sampler.runlength.Resume` (sample stats in NumPyro's names)."""
    extra = diagnostics.extra_from_sample_stats(est.sample_stats_)
    r = est.run_report_
    return Resume(dict(est.posterior_), extra, r.thinning, r.num_samples, r.seconds)
