"""What :meth:`BM3KLClassifier.fit <bayesmkl.BM3KLClassifier.fit>` needs around the sampler.

Seeds (:func:`make_rng_key`), JAX's persistent compilation cache
(:func:`enable_compilation_cache`), validation of the estimator's parameters and of ``fit``'s
input (:func:`validate_params`, :func:`validate_fit_input`) and the quantities whose R-hat and
ESS decide the run length (:func:`run_monitor`).
"""

from __future__ import annotations

import numbers

import jax
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_array,
    column_or_1d,
    validate_data,
)

from bayesmkl._checks import check_label_types
from bayesmkl._validation import (
    HYPER_BOUNDS,
    Interval,
    Options,
    check_hyper,
    check_param,
    validate_labels,
)
from bayesmkl._validation import check_choice as _choice
from bayesmkl._validation import check_int as _integer
from bayesmkl._validation import check_positive as _positive
from bayesmkl._weights import check_class_weight
from bayesmkl.inference.moves import MOVES
from bayesmkl.inference.state import NU_UPDATES
from bayesmkl.kernels.input import NAMED_POOLS, KernelInput
from bayesmkl.kernels.pool import KernelPool
from bayesmkl.predict import (
    draw_decision_values,
)

__all__ = [
    "AUTO_CHUNK",
    "EXTRA_FIELDS",
    "enable_compilation_cache",
    "make_rng_key",
    "run_monitor",
    "validate_fit_input",
    "validate_params",
]

#: Sweeps per chunk of a ``num_samples="auto"`` run.
AUTO_CHUNK = 250
#: Most training points whose decision values the run-length rule monitors (a fixed random
#: subset above this; R-hat/ESS of every point of a large set would cost more than the sweeps).
MAX_MONITORED_POINTS = 500

#: NumPyro extra fields collected during sampling (become ``sample_stats_``).
EXTRA_FIELDS = ("accept_prob", "diverging", "step_size", "potential_energy")
_CHAIN_METHODS = ("sequential", "parallel", "vectorized")
#: Constraints (:mod:`bayesmkl._validation`) of the parameters that are not a plain choice.
_CALIBRATION = [Options("cv"), None, Interval("int", 2, None, closed="left")]
_RHAT_TARGET = [
    Interval("real", 1, None, closed="neither", allow_inf=True, description="a number > 1")
]


def enable_compilation_cache(cache_dir=None, *, min_compile_time_secs: float = 1.0):
    """Switch on JAX's persistent compilation cache (a directory of compiled programs).

    One BM3KL sweep takes seconds to compile, once per data shape and sampler configuration
    (move, step size, L, run length). The model hyper-parameters (η, α_a, β_a, κ, τ, γ0) travel
    in the sampler state, so they do not change the program: with the cache, later fits of the
    same shape and configuration — a grid search over ``beta_a`` or ``gamma0`` included — load
    the compiled program instead, in this process or another. Call it before fitting.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Directory; default ``$BAYESMKL_CACHE_DIR`` or ``~/.cache/bayesmkl/jax``.
    min_compile_time_secs : float, default 1.0
        Only programs that took at least this long to compile are stored.

    Returns
    -------
    str or None
        The directory in use, or ``None`` when it cannot be created.
    """
    import os
    from pathlib import Path

    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir
    if cache_dir is None:
        cache_dir = os.environ.get("BAYESMKL_CACHE_DIR") or (
            Path.home() / ".cache" / "bayesmkl" / "jax"
        )
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    try:  # JAX decides once per process whether the cache is used; let it decide again
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except Exception:  # pragma: no cover - private API moved
        pass
    return str(cache_dir)


def make_rng_key(random_state):
    """A JAX PRNG key and the integer seed it came from.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        An int is used as the seed; ``None`` draws a seed from NumPy's global generator; a
        ``RandomState``/``Generator`` draws the seed from that generator (advancing it).

    Returns
    -------
    key : jax.Array
        ``jax.random.key(seed)``.
    seed : int
    """
    if isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(0, 2**31 - 1))
    elif isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        seed = int(random_state)
        if seed < 0:
            raise ValueError(f"random_state must be a non-negative integer; got {seed}")
    elif random_state is None or isinstance(random_state, np.random.RandomState):
        seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    else:
        raise ValueError(
            "random_state must be None, an int, a numpy RandomState or a numpy Generator; got "
            f"{random_state!r}"
        )
    return jax.random.key(seed), seed


def validate_params(est) -> None:
    """Check the constructor parameters of a :class:`~bayesmkl.BM3KLClassifier` (ValueError)."""
    k = est.kernels
    if not (
        isinstance(k, KernelPool) or (isinstance(k, str) and k in NAMED_POOLS + ("precomputed",))
    ):
        raise ValueError(
            f"kernels={k!r} is not understood: use one of "
            f"{NAMED_POOLS + ('precomputed',)} or a bayesmkl.KernelPool"
        )
    if est.sampler not in MOVES:
        raise ValueError(f"unknown sampler={est.sampler!r}; choose one of {MOVES}")
    _choice("chain_method", est.chain_method, _CHAIN_METHODS)
    _choice("nu_update", est.nu_update, NU_UPDATES)
    _choice("binary_mode", est.binary_mode, ("single", "ova"))
    _choice("decision", est.decision, ("proba", "mean_f"))
    check_param("calibration", est.calibration, _CALIBRATION)
    if est.kernel_dtype is not None:
        _choice("kernel_dtype", str(np.dtype(est.kernel_dtype)), ("float64", "float32"))
    for name in HYPER_BOUNDS:  # the ranges where the arithmetic stays finite (issue 22)
        check_hyper(name, getattr(est, name))
    _positive("step_size", est.step_size)
    _integer("n_leapfrog", est.n_leapfrog, 1)
    _integer("num_warmup", est.num_warmup, 0)
    if est.num_samples != "auto":
        _integer("num_samples", est.num_samples, 1)
    check_param("rhat_target", est.rhat_target, _RHAT_TARGET)
    _positive("ess_target", est.ess_target)
    _integer("max_samples", est.max_samples, 1)
    if est.max_time is not None:
        _positive("max_time", est.max_time)
    _integer("num_chains", est.num_chains, 1)
    if not isinstance(est.warm_start, bool | np.bool_):
        raise ValueError(f"warm_start must be True or False; got {est.warm_start!r}")
    check_class_weight(est.class_weight)


def validate_fit_input(est, X, y):
    """Validated ``(kernel input, K (P, N, N), classes, codes, y)`` of ``est.fit``; sets
    ``est.n_features_in_`` (and the feature names) for feature input."""
    if est.kernels == "precomputed":
        Xk = check_array(
            X, allow_nd=True, ensure_2d=False, dtype=(np.float64, np.float32), input_name="K"
        )
        if Xk.ndim != 3 or Xk.shape[1] != Xk.shape[2]:
            raise ValueError(
                "with kernels='precomputed', fit expects a kernel stack of shape (P, N, N); "
                f"got shape {Xk.shape}"
            )
        n = Xk.shape[1]
    else:
        Xk = validate_data(est, X, dtype=np.float64, ensure_min_samples=2)
        n = Xk.shape[0]
    check_label_types(y)
    y = column_or_1d(y, warn=True)
    check_classification_targets(y)
    classes, codes = validate_labels(y, n)
    dtype = None if est.kernel_dtype is None else str(np.dtype(est.kernel_dtype))
    kin, K = KernelInput.fit(est.kernels, Xk, dtype=dtype, kernel_names=est.kernel_names)
    return kin, K, classes, codes, y


def run_monitor(K, seed):
    """``monitor(draws) -> {"w": (chains, draws, P), "f": (chains, draws, n·C)}``: what the
    run-length rule checks. ``f`` are held-in decision values of at most
    ``MAX_MONITORED_POINTS`` training points (a subset fixed by ``seed``)."""
    N = K.shape[-1]
    idx = np.arange(N)
    if N > MAX_MONITORED_POINTS:
        rng = np.random.default_rng(seed)
        idx = np.sort(rng.choice(N, MAX_MONITORED_POINTS, replace=False))
    K_sub = np.asarray(K)[:, idx, :]

    def monitor(draws):
        w, a, b = (np.asarray(draws[k]) for k in ("w", "a", "b"))
        chains, n_draws = w.shape[:2]
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        F = np.asarray(draw_decision_values(flat(w), flat(a), flat(b), K_sub))
        return {"w": w, "f": F.reshape(chains, n_draws, -1)}

    return monitor
