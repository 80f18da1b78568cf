"""What :meth:`BM3KLClassifier.fit <bayesmkl.BM3KLClassifier.fit>` needs around the sampler.

Seeds (:func:`make_rng_key`), JAX's persistent compilation cache
(:func:`enable_compilation_cache`), validation of the estimator's parameters and of ``fit``'s
input (:func:`validate_fit_input`; the parameters are checked against the class's
``_parameter_constraints``) and the quantities whose R-hat and
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

from bayesmkl.estimators import _params
from bayesmkl.estimators._validation import (
    validate_labels,
)
from bayesmkl.kernels._checks import check_precomputed_memory
from bayesmkl.kernels.input import KernelInput
from bayesmkl.model.classification import PRIORS, Hyper
from bayesmkl.posterior.checks import check_kernel_scale, check_label_types
from bayesmkl.posterior.predictive import draw_decision_values

__all__ = [
    "AUTO_CHUNK",
    "EXTRA_FIELDS",
    "RUN_CHUNK",
    "centres_pool",
    "check_landmark_params",
    "check_run_length",
    "enable_compilation_cache",
    "make_rng_key",
    "describe_quantity",
    "drop_corrupt_cache_entries",
    "landmark_rows",
    "resolve_n_landmarks",
    "unsafe_cache_dir",
    "resolve_hyper",
    "unconverged_message",
    "run_monitor",
    "validate_fit_input",
]

#: Post-warm-up sweeps between two convergence checks of a ``num_samples="auto"`` run.
AUTO_CHUNK = 250
#: Sweeps per call of the compiled loop: the time budget and the progress bar act between two
#: calls, so it is short; every call has the same length, so the loop is compiled once.
RUN_CHUNK = 50
#: Most training points whose decision values the run-length rule monitors (a fixed random
#: subset above this; R-hat/ESS of every point of a large set would cost more than the sweeps).
MAX_MONITORED_POINTS = 500


def check_run_length(est) -> None:
    """Refuse ``num_chains=1`` with ``num_samples="auto"`` (``ValueError``): the automatic run
    length stops when R-hat, which compares chains, reaches its target, which one chain never
    does (it ran the whole ``max_samples`` budget and reported R-hat inf). The bounds of each
    run-length parameter are in the estimators' tables (:data:`~bayesmkl.estimators._params.
    LOOP_BOUNDS`)."""
    if est.num_samples == "auto" and int(est.num_chains) == 1:
        raise ValueError(
            'num_chains=1 cannot be used with num_samples="auto": the automatic run length '
            "stops when R-hat, which compares chains, reaches rhat_target, and one chain has no "
            "R-hat, so the run would always use the whole max_samples budget. Use num_chains >= "
            "2, or a fixed num_samples"
        )


#: NumPyro extra fields collected during sampling (become ``sample_stats_``).
EXTRA_FIELDS = ("accept_prob", "diverging", "step_size", "potential_energy")


def enable_compilation_cache(cache_dir=None, *, min_compile_time_secs: float | None = None):
    """Switch on JAX's persistent compilation cache (a directory of compiled programs).

    One BM3KL sweep takes seconds to compile, once per data shape and sampler configuration
    (move, step size, L, run length). The model hyper-parameters (η, α_a, β_a, κ, τ, γ0) travel
    in the sampler state, so they do not change the program: with the cache, later fits of the
    same shape and configuration — a grid search over ``beta_a`` or ``gamma0`` included — load
    the compiled program instead, in this process or another. Call it before fitting.

    :meth:`BM3KLClassifier.fit <bayesmkl.BM3KLClassifier.fit>` calls it with the default
    directory, so the cache is on unless ``$BAYESMKL_CACHE_DIR`` is ``off``.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Directory; default ``$BAYESMKL_CACHE_DIR`` or ``$XDG_CACHE_HOME/bayesmkl/jax``
        (``~/.cache/bayesmkl/jax``).
    min_compile_time_secs : float, optional
        Only programs that took at least this long to compile are stored. Default: JAX's
        ``jax_persistent_cache_min_compile_time_secs``, 1 s unless set otherwise (for instance
        by ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``; 0 stores every program).

    Returns
    -------
    str or None
        The directory in use, or ``None`` when it cannot be created or is writable by other
        users (:func:`unsafe_cache_dir`; a ``UserWarning`` says so).

    Notes
    -----
    Entries that cannot be decompressed (a writer killed, a full disk) are removed first, with
    one warning (:func:`drop_corrupt_cache_entries`), so JAX compiles and stores them afresh
    instead of warning and recompiling on every later fit.
    """
    import os
    from pathlib import Path

    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir
    env = os.environ.get("BAYESMKL_CACHE_DIR")
    if cache_dir is None and env == "off":
        return None
    if cache_dir is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
        cache_dir = env or (Path(xdg) / "bayesmkl" / "jax")
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    problem = unsafe_cache_dir(cache_dir)
    if problem:
        import warnings

        warnings.warn(
            f"not using the compilation cache {cache_dir}: {problem}, so others could replace "
            "the compiled programs that fits load from it. Use a directory only you can write "
            "(chmod go-w, or set BAYESMKL_CACHE_DIR); fits compile from scratch meanwhile",
            UserWarning,
            stacklevel=2,
        )
        return None
    drop_corrupt_cache_entries(cache_dir)
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    if min_compile_time_secs is not None:
        seconds = float(min_compile_time_secs)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", seconds)
    try:  # JAX decides once per process whether the cache is used; let it decide again
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except Exception:  # pragma: no cover - private API moved
        pass
    return str(cache_dir)


def unsafe_cache_dir(cache_dir) -> str | None:
    """Why ``cache_dir`` is unsafe as a compilation cache, or ``None``: JAX loads compiled
    programs from it, so a directory that another user can write to (mode o+w, or owned by
    someone else) lets them replace the program a later fit runs."""
    import os
    import stat

    st = os.stat(cache_dir)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & stat.S_IWOTH:
        return f"every user can write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


#: Written in the cache directory when its entries have been checked (its mtime: the start of
#: that check), so each entry is decompressed once, not at every fit.
_CACHE_CHECKED = ".bayesmkl-checked"


def drop_corrupt_cache_entries(cache_dir) -> list:
    """Remove the entries of a JAX compilation cache that do not decompress (truncated by a
    killed writer or a full disk: JAX then warns "Error reading persistent compilation cache
    entry" and recompiles at every fit, but never replaces them); one ``UserWarning`` names
    them. Entries are checked once (those newer than the last check). Returns their paths."""
    import os
    import time
    import warnings
    from pathlib import Path

    try:
        from jax._src.compilation_cache import decompress_executable
    except ImportError:  # pragma: no cover - private API moved
        return []
    cache_dir = Path(cache_dir)
    marker = cache_dir / _CACHE_CHECKED
    start = time.time()
    try:
        since = marker.stat().st_mtime
    except OSError:
        since = -1.0
    bad = []
    for entry in sorted(cache_dir.glob("*-cache")):
        try:
            if entry.stat().st_mtime < since:
                continue
            decompress_executable(entry.read_bytes())
        except OSError:
            continue  # removed meanwhile, or unreadable: JAX says so itself
        except Exception:
            bad.append(entry)
    removed = []
    for entry in bad:
        try:
            entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    try:
        marker.touch()
        os.utime(marker, (start, start))
    except OSError:
        pass
    if removed:
        warnings.warn(
            f"removed {len(removed)} damaged compilation-cache entr"
            f"{'y' if len(removed) == 1 else 'ies'} from {cache_dir} ("
            f"{', '.join(e.name[:40] for e in removed[:3])}{' ...' if len(removed) > 3 else ''}"
            "; a truncated write, e.g. a full disk); the programs are compiled and stored again",
            UserWarning,
            stacklevel=3,
        )
    return removed


def make_rng_key(random_state):
    """A JAX PRNG key and the integer seed it came from.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        An int is used as the seed (one of 2**63 or more, which JAX's PRNG does not take, is
        reduced to [0, 2**63) by hashing all its bits with :class:`numpy.random.SeedSequence`,
        as NumPy seeds its own generators); ``None`` draws a seed from NumPy's global generator; a
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
        if seed >= 2**63:  # beyond JAX's key space: hash every bit into it, as NumPy does
            seed = int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0] >> 1)
    elif random_state is None or isinstance(random_state, np.random.RandomState):
        seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    else:
        raise ValueError(
            "random_state must be None, an int, a numpy RandomState or a numpy Generator; got "
            f"{random_state!r}"
        )
    return jax.random.key(seed), seed


def set_fitted_attributes(est, attrs: dict) -> None:
    """Set further fitted attributes on ``est`` as given (``_set_fitted``'s ``**attrs``); their
    names must end in ``_``."""
    for name, value in attrs.items():
        if not name.endswith("_"):
            raise ValueError(f"_set_fitted: {name!r} is not a fitted attribute name")
        setattr(est, name, value)


def unconverged_message(
    report,
    worst: str,
    rhat_target,
    ess_target,
    *,
    who: str = "BM3KL",
    watched: str = "kernel weight and training decision value",
) -> str:
    """The ``ConvergenceWarning`` text of an unconverged run (``worst``: the slowest quantity in
    words, :func:`describe_quantity`; ``who`` the estimator, ``watched`` the quantities the
    targets apply to)."""
    how = (
        "ran its fixed num_samples"
        if report.stopped_by == "num_samples"
        else f"stopped at its {report.stopped_by} budget"
    )
    if report.stopped_in == "warmup":
        compile_note = (
            f"; compiling took {report.compile_seconds:.0f} s of them"
            if report.compile_seconds > 0.5 * report.seconds
            else ""
        )
        return (
            f"{who} stopped at its {report.stopped_by} budget during warm-up, after "
            f"{report.warmup_sweeps} warm-up sweeps per chain ({report.seconds:.0f} s"
            f"{compile_note}): its draws are warm-up sweeps, not a posterior sample, and its "
            "predictions will say so. Raise max_time (a second fit of the same shape loads the "
            "compiled sampler from the cache)."
        )
    return (
        f"{who} {how} after {report.num_samples} sweeps per chain ({report.seconds:.0f} s) "
        f"without reaching R-hat <= {rhat_target} and bulk ESS >= {ess_target} on every "
        f"{watched}: max R-hat {report.rhat_max:.3f}, min bulk ESS "
        f"{report.ess_bulk_min:.0f}; the slowest is {worst} ({report.worst}). Raise "
        "num_samples/max_samples/max_time, or read the intervals as unconverged."
    )


def resolve_hyper(est) -> Hyper:
    """The model hyper-parameters of a fit: the named ``prior``'s, each replaced by the
    estimator's own parameter where that is not ``None`` (checked against the class's
    ``_parameter_constraints``)."""
    own = {k: getattr(est, k) for k in Hyper._fields}
    return PRIORS[est.prior]._replace(**{k: v for k, v in own.items() if v is not None})


def check_kernel_list_shapes(X, what: str = "precomputed kernels") -> None:
    """Refuse a list or tuple of kernel matrices of different shapes with a message that names
    them (NumPy's own "inhomogeneous shape" error, from stacking them, does not)."""
    if not isinstance(X, (list, tuple)) or len(X) < 2:
        return
    shapes = [np.shape(k) for k in X]
    if any(s != shapes[0] for s in shapes):
        listed = ", ".join(f"kernel {m}: {s}" for m, s in enumerate(shapes))
        raise ValueError(
            f"{what} differ in shape ({listed}); every matrix of the list must have the same shape"
        )


def check_precomputed_stack(X, n_landmarks=None):
    """``X`` as a checked kernel stack ``(P, N, N)`` for ``kernels="precomputed"`` (with
    ``n_landmarks=M``: the landmark block ``(P, N, M)``, docs/math.md §16; ``"auto"`` is the
    exact model's stack, so that a mis-shaped stack is never read as a landmark block); refused
    (``KernelMemoryError``) before any conversion when its handling would not fit in memory."""
    check_kernel_list_shapes(X)
    check_precomputed_memory(X)
    Xk = check_array(
        X, allow_nd=True, ensure_2d=False, dtype=(np.float64, np.float32), input_name="K"
    )
    if isinstance(n_landmarks, str):  # "auto" with precomputed kernels: the exact model
        n_landmarks = None
    if n_landmarks is not None:
        if Xk.ndim != 3 or Xk.shape[2] != int(n_landmarks):
            raise ValueError(
                f"with kernels='precomputed' and n_landmarks={n_landmarks}, fit expects the "
                "kernels between the training points and the landmarks, shape (P, N, "
                f"{n_landmarks}); got shape {Xk.shape}. The estimator cannot choose landmarks "
                "among precomputed kernels: compute K(X, Z) for landmarks Z of your choice"
            )
        return Xk
    if Xk.ndim != 3 or Xk.shape[1] != Xk.shape[2]:
        raise ValueError(
            "with kernels='precomputed', fit expects a kernel stack of shape (P, N, N); "
            f"got shape {Xk.shape}"
        )
    return Xk


def resolve_n_landmarks(est, Xk) -> int | None:
    """The landmarks M of ``est``'s fit on validated input ``Xk`` (``None``: the exact model).

    ``est.n_landmarks`` as set, but ``"auto"``: the exact model on at most
    :data:`~bayesmkl.estimators._params.AUTO_EXACT_MAX_N` training rows (or with
    ``nu_update="collapsed"``, which only the exact model has),
    :data:`~bayesmkl.estimators._params.AUTO_N_LANDMARKS` landmarks above; with precomputed
    kernels the exact model (the estimator cannot choose landmarks among them: a landmark
    block ``(P, N, M)`` needs ``n_landmarks=M``).
    """
    m = getattr(est, "n_landmarks", None)
    if not isinstance(m, str):
        return None if m is None else int(m)
    if isinstance(est.kernels, str) and est.kernels == "precomputed":
        return None
    if Xk.shape[0] <= _params.AUTO_EXACT_MAX_N or getattr(est, "nu_update", "") == "collapsed":
        return None
    return _params.AUTO_N_LANDMARKS


def fit_kernel_input(est, Xk, *, center=False, codes=None):
    """``(KernelInput, K (P, N, N))`` of ``est``'s kernels on validated input ``Xk``
    (``center``: centre a named pool). With landmarks (:func:`resolve_n_landmarks`), the
    landmark model's ``K (P, N, M)`` (docs/math.md §16): a pool's kernels between the training
    points and the landmarks that :func:`landmark_rows` picks (``codes``: class codes for
    ``landmark_method="stratified"``), or a precomputed block ``(P, N, M)`` as given."""
    dtype = None if est.kernel_dtype is None else str(np.dtype(est.kernel_dtype))
    landmarks, n_landmarks = None, resolve_n_landmarks(est, Xk)
    precomputed = isinstance(est.kernels, str) and est.kernels == "precomputed"
    if n_landmarks is not None and not precomputed:
        landmarks = landmark_rows(est, Xk, n_landmarks, codes)
    return KernelInput.fit(
        est.kernels, Xk, dtype=dtype, kernel_names=est.kernel_names,
        feature_names=getattr(est, "feature_names_in_", None), center=center,
        landmarks=landmarks, n_landmarks=n_landmarks if precomputed else None,
    )  # fmt: skip


def check_landmark_params(est) -> None:
    """Refuse settings the landmark model does not support (``ValueError``):
    ``nu_update="collapsed"`` (whose exact block is the square model's) with a number of
    landmarks (``"auto"`` then fits the exact model)."""
    if getattr(est, "n_landmarks", None) is None or isinstance(est.n_landmarks, str):
        return
    if getattr(est, "nu_update", "gibbs") == "collapsed":
        raise ValueError(
            "nu_update='collapsed' is for the exact model only; a landmark fit "
            f"(n_landmarks={est.n_landmarks}) updates nu by Gibbs: use nu_update='gibbs'"
        )


def landmark_rows(est, Xk, M: int, codes=None) -> np.ndarray:
    """The training rows ``(M,)`` that are the M landmarks of ``est``'s fit
    (:func:`bayesmkl.kernels.landmarks.choose_landmarks` with ``est.landmark_method``, seeded by
    ``est.random_state``; a ``warm_start`` fit keeps the previous fit's landmarks, so that its
    chains continue on the same model); ``ValueError`` when ``n_landmarks`` exceeds the N
    training rows."""
    from bayesmkl.kernels.landmarks import choose_landmarks, landmark_rng

    N = Xk.shape[0]
    if M > N:
        raise ValueError(
            f"n_landmarks={M} exceeds the {N} training rows; use at most {N} (n_landmarks=None "
            "fits the exact model, whose sample weights sit on every training point)"
        )
    prev = getattr(est, "landmark_indices_", None)
    if getattr(est, "warm_start", False) and prev is not None and prev.size == M and prev.max() < N:
        return prev  # a continuation keeps its chains' landmarks (even with random_state=None)
    return choose_landmarks(
        Xk, M, est.landmark_method, codes=codes, rng=landmark_rng(est.random_state)
    )


def centres_pool(est, n_classes: int) -> bool:
    """Whether ``fit`` centres the kernels in feature space: the named pool ``"bsvm16"`` under
    the default prior, with three or more classes (C ≥ 3 one-vs-all classifiers).

    Why (docs/math.md §7.2): under f = K_w a with a ~ N(0, ν), a kernel's prior variance of f
    at x is Σ_i K(x, x_i)², which for a nearly constant wide Gaussian is about N. One-vs-all
    classifiers of many classes need large offsets, which uncentred such a kernel carries (and
    the fit underfits); centred, the bias carries them. Two classes are not centred (in either
    ``binary_mode``: the two one-vs-all problems of ``"ova"`` are one problem mirrored), nor is
    the paper's preset, which reproduces the paper's set-up.
    """
    named = isinstance(est.kernels, str) and est.kernels == "bsvm16"
    return named and n_classes > 2 and est.prior == "default"


def validate_fit_input(est, X, y):
    """Validated ``(kernel input, K (P, N, N), classes, codes, y)`` of ``est.fit``; sets
    ``est.n_features_in_`` (and the feature names) for feature input."""
    check_landmark_params(est)
    if est.kernels == "precomputed":
        Xk = check_precomputed_stack(X, est.n_landmarks)
        n = Xk.shape[1]
    else:
        Xk = validate_data(est, X, dtype=np.float64, ensure_min_samples=2)
        n = Xk.shape[0]
    check_label_types(y)
    y = column_or_1d(y, warn=True)
    check_classification_targets(y)
    classes, codes = validate_labels(y, n)
    kin, K = fit_kernel_input(est, Xk, center=centres_pool(est, len(classes)), codes=codes)
    if est.kernels == "precomputed" and kin.n_landmarks is None:
        check_kernel_scale(K, kin.names)
    return kin, K, classes, codes, y


def run_monitor(K, seed):
    """``monitor(draws) -> {"w": (chains, draws, P), "f": (chains, draws, n·C)}``: what the
    run-length rule checks. ``f`` are held-in decision values of at most
    ``MAX_MONITORED_POINTS`` training points (a subset fixed by ``seed``)."""
    N = K.shape[1]  # the training points (a landmark fit's columns are its landmarks)
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

    monitor.points = idx
    return monitor


def describe_quantity(name: str, kernel_names, classes, points, n_classifiers: int) -> str:
    """A monitored quantity in words: ``"w[3]"`` → ``"the weight of kernel gauss(s=1)"``,
    ``"f[41]"`` → ``"the decision value of training point 20 (class 'b')"``.

    ``points`` are the monitored training points (``monitor.points`` of :func:`run_monitor`),
    ``n_classifiers`` the number C of one-vs-all problems (1 for a single binary classifier).
    """
    if "[" not in name:
        return name
    site, j = name[:-1].split("[")
    j = int(j)
    if site == "w":
        return f"the weight of kernel {kernel_names[j]}"
    if site == "f":
        i, c = divmod(j, int(n_classifiers))
        which = "" if n_classifiers == 1 else f" for class {classes[c].item()!r}"
        return f"the decision value of training point {int(points[i])}{which}"
    return name
