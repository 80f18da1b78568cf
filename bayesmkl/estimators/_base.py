"""What :class:`~bayesmkl.BM3KLClassifier` and :class:`~bayesmkl.BM3KLRegressor` share: the
skeleton of ``fit`` around the sampler, the fitted state, save/load and tags.

``fit`` of either model validates its parameters (the class's ``_parameter_constraints``
table) and its data, builds the training kernels and its targets, and hands a kernel factory
and the sampler's data to :meth:`BM3KLBase._sample`, which seeds the run (or continues the
previous fit's chains, ``warm_start``), switches on the compilation cache, bounds the memory of
compiled programs, runs the chains (:class:`~bayesmkl.sampler.runner.ChainRunner` for
``chain_method="vectorized"``, NumPyro's ``MCMC`` otherwise) in chunks until the run-length
rule stops them (:func:`~bayesmkl.sampler.runlength.sample_until_converged`).
:meth:`BM3KLBase._finish` then sets the fitted attributes, checks the draws and warns when the
targets were not met.

Hooks a subclass provides: ``_capped_loops(bits)`` (the capped loops a chain's bit field
names), ``_unconverged_message(report, points)`` (the ``ConvergenceWarning`` text),
``_run_monitor(K, seed)`` (the quantities the run-length rule watches; default the kernel
weights and held-in decision values), ``_set_fitted`` extended with its own fitted state, and
the class attributes ``_parameter_constraints`` and ``_inference_library``.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
from numpyro.infer import MCMC
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from bayesmkl import io
from bayesmkl.estimators import _resume
from bayesmkl.estimators._fitting import (
    AUTO_CHUNK,
    EXTRA_FIELDS,
    RUN_CHUNK,
    check_kernel_list_shapes,
    check_run_length,
    enable_compilation_cache,
    make_rng_key,
    run_monitor,
    set_fitted_attributes,
)
from bayesmkl.estimators._memory import (
    AUTO_MAX_KEPT,
    PREDICTION_COPIES,
    check_fit_memory,
    row_blocks,
)
from bayesmkl.estimators._validation import validate_params
from bayesmkl.exceptions import NonFinitePredictionError
from bayesmkl.kernels._checks import check_precomputed_memory
from bayesmkl.kernels.input import FAR_RANGE_FACTOR
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior.checks import PACKAGE_DIR, check_draws, warn_far_rows
from bayesmkl.posterior.predictive import DECISION_BATCH, flat_draws
from bayesmkl.sampler.chains import resolve_chain_method
from bayesmkl.sampler.runlength import sample_until_converged
from bayesmkl.sampler.runner import ChainRunner, blas_limit, hold_programs_for

__all__ = ["BM3KLBase", "SampledRun", "in_block", "join_blocks"]


def join_blocks(outs: list, axis: int):
    """The outputs of the blocks of test rows joined along their rows ``axis`` (an output may
    be a tuple of arrays: each is joined)."""
    if len(outs) == 1:
        return outs[0]
    if isinstance(outs[0], tuple):
        return tuple(np.concatenate(parts, axis=axis) for parts in zip(*outs, strict=True))
    return np.concatenate(outs, axis=axis)


def in_block(reduce, values, rows: slice):
    """``reduce(values)`` of one block of test rows; a ``NonFinitePredictionError`` it raises
    (its rows numbered within the block) names the block."""
    try:
        return reduce(values)
    except NonFinitePredictionError as exc:
        raise NonFinitePredictionError(f"{exc}{_block_note(rows)}") from None


def _block_note(rows: slice) -> str:
    return (
        f" (rows numbered from the first row of the block of test rows {rows.start} to "
        f"{rows.stop - 1})"
    )


class SampledRun(NamedTuple):
    """What :meth:`BM3KLBase._sample` returns.

    Attributes
    ----------
    draws : dict of str → ndarray (chains, draws, ...)
    extra : dict of str → ndarray (chains, draws)
        NumPyro's extra fields (:data:`~bayesmkl.estimators._fitting.EXTRA_FIELDS`).
    report : bayesmkl.sampler.runlength.RunReport
    last_state : object
        The chains' final MCMC state (leading chain axis).
    seed : int
        The seed of the run (the original fit's when chains were continued).
    points : ndarray of int
        The training points whose decision values the run-length rule monitored.
    """

    draws: dict
    extra: dict
    report: object
    last_state: object
    seed: int
    points: np.ndarray


#: The part of ``max_time`` the chains may use when nothing else after them takes long (the
#: draw checks, the LOO calibration map and the log-likelihood of a fit took under 5% of it).
SAMPLING_SHARE = 0.95


class BM3KLBase(BaseEstimator):
    """Base class of the BM3KL estimators: ``fit``'s run of the chains, fitted state,
    save/load and tags (see the module docstring for the hooks)."""

    #: ``{parameter: [constraints]}``, checked by :meth:`_validate_params`; set by each subclass.
    _parameter_constraints: dict = {}
    #: The DataTree's root attribute ``inference_library``.
    _inference_library = "bayesmkl"

    # validation ---------------------------------------------------------------------------

    def _validate_params(self):
        """Check every constructor parameter against ``_parameter_constraints`` (``ValueError``
        with the shared wording of :mod:`bayesmkl.estimators._validation`)."""
        validate_params(self, self._parameter_constraints)
        check_run_length(self)

    # the run ------------------------------------------------------------------------------

    def _run_monitor(self, K, seed):
        """What the run-length rule watches: kernel weights and held-in decision values."""
        return run_monitor(K, seed)

    def _deadline(self, started: float | None, share: float | None = None) -> float | None:
        """The :func:`time.perf_counter` reading by which the chains must stop: ``max_time``
        counted from ``started`` (the start of ``fit``, so validation, kernels and compilation
        count), times ``share`` (default :meth:`_sampling_share`); ``None`` without a
        ``max_time``."""
        if self.max_time is None:
            return None
        t0 = time.perf_counter() if started is None else started
        share = self._sampling_share() if share is None else share
        return t0 + float(self.max_time) * share

    def _sampling_share(self) -> float:
        """The part of ``max_time`` the chains may use; the rest is for what ``fit`` does after
        them (draw checks, calibration, the log-likelihood)."""
        return SAMPLING_SHARE

    def _sample(self, make_kernel, data: tuple, K, *, hold, prev=None, started=None) -> SampledRun:
        """Run the chains of one fit.

        Parameters
        ----------
        make_kernel : callable () → MCMC kernel
            Builds the sampler's kernel (called once the programs' memory is bounded).
        data : tuple
            The kernel's model arguments (``(K, targets[, weights])``).
        K : array (P, N, N)
            The training kernels (for the monitored decision values).
        hold : tuple
            The key of :func:`~bayesmkl.sampler.runner.hold_programs_for` (the compiled
            programs of other shapes are released).
        prev : bayesmkl.estimators._resume.ResumePoint, optional
            The previous fit's state: its chains are continued (no warm-up, their own keys)
            and the new draws appended to the stored ones.
        started : float, optional
            :func:`time.perf_counter` at the start of ``fit``: ``max_time`` counts from there.

        Raises ``FitMemoryError`` (a ``MemoryError`` and a ``ValueError``) before any sweep when
        the draws the run keeps and the sampler's working memory would not fit
        (:func:`~bayesmkl.estimators._memory.check_fit_memory`).
        """
        stored = 0 if prev is None else int(self.posterior_["w"].shape[1])  # warm_start keeps them
        check_fit_memory(self, P=int(K.shape[0]), C=int(data[1].shape[0]), N=int(K.shape[1]),
                         M=int(K.shape[-1]), run_chunk=RUN_CHUNK, earlier=stored)  # fmt: skip
        if prev is None:
            key, seed = make_rng_key(self.random_state)
        else:  # continue the stored chains: their own keys, no new warm-up
            seed = prev.seed
        enable_compilation_cache()  # a no-op when on already, or off by $BAYESMKL_CACHE_DIR
        hold_programs_for(hold)  # bounded memory
        warmup = 0 if prev is not None else int(self.num_warmup)
        kernel = make_kernel()
        auto = self.num_samples == "auto"
        chain_method = resolve_chain_method(self.chain_method, int(self.num_chains))
        # chunks of RUN_CHUNK sweeps; the last never runs past the budget (sample_until_converged)
        budget = int(self.max_samples) if auto else int(self.num_samples)
        chunk = min(RUN_CHUNK, max(1, warmup + budget))
        monitor = self._run_monitor(K, seed)
        if chain_method == "vectorized":  # compiled once per configuration (sampler.runner)
            points = monitor.points if prev is None else None  # earlier draws: monitor them all
            mcmc = ChainRunner(kernel, int(self.num_chains), chunk, monitor_points=points)
        else:
            mcmc = MCMC(
                kernel, num_warmup=0, num_samples=chunk, num_chains=int(self.num_chains),
                chain_method=chain_method, jit_model_args=True, progress_bar=False,
            )  # fmt: skip
        earlier = None
        if prev is not None:
            mcmc.post_warmup_state = prev.mcmc_state()
            key = mcmc.post_warmup_state.rng_key
            earlier = _resume.earlier_run(self)
        # a landmark fit keeps no draws of the N augmentation variables (its other sites have
        # M columns): NumPyro's "~z.<site>", which ChainRunner reads too
        dropped = kernel.point_sites if kernel.config.landmarks else ()
        fields = EXTRA_FIELDS + tuple(f"~z.{site}" for site in dropped)
        with blas_limit():  # NumPyro's chain methods too (ChainRunner limits its own chunks)
            draws, extra, report = sample_until_converged(
                mcmc, key, data, monitor, num_warmup=warmup, extra_fields=fields,
                rhat_target=float(self.rhat_target), ess_target=float(self.ess_target),
                max_samples=budget, deadline=self._deadline(started), resume=earlier,
                check_every=AUTO_CHUNK,
                fixed=not auto,
                max_kept=AUTO_MAX_KEPT if auto else 2**62,  # a fixed length keeps every draw
                progress=bool(self.progress_bar) and isinstance(chain_method, str),
            )  # fmt: skip
        return SampledRun(draws, extra, report, mcmc.last_state, seed, monitor.points)

    def _finish(self, run: SampledRun, **fitted) -> None:
        """Set the fitted attributes of ``run`` (``fitted``: the model's own, for
        :meth:`_set_fitted`), check the draws, and warn (``ConvergenceWarning``) when the
        run-length targets were not met."""
        self._set_fitted(
            posterior=run.draws, sample_stats=diagnostics.sample_stats_from_extra(run.extra),
            n_iter=int(self.num_warmup) + int(run.report.num_samples), random_seed=run.seed,
            run_report_=run.report, **fitted,
        )  # fmt: skip
        bits = np.atleast_1d(np.asarray(run.last_state.capped))
        check_draws(
            self.posterior_, self.sample_stats_, num_warmup=int(self.num_warmup),
            capped={c: self._capped_loops(b) for c, b in enumerate(bits)},
            settings={k: getattr(self, k) for k in ("sampler", "step_size", "num_warmup")},
            stacklevel=5,  # check_draws, _finish, fit, with_x64, the caller
        )  # fmt: skip
        if not run.report.converged:
            msg = self._unconverged_message(run.report, run.points)
            warnings.warn(msg, ConvergenceWarning, stacklevel=4)  # _finish, fit, with_x64

    def _warn_if_warmup_only(self) -> None:
        """Warn (``ConvergenceWarning``, pointing at the caller) when the fit's budget ran out
        before its warm-up ended: its draws are warm-up sweeps, not a posterior sample."""
        report = getattr(self, "run_report_", None)
        if report is None or report.stopped_in != "warmup":
            return
        warnings.warn(
            f"{type(self).__name__} stopped during warm-up ({report.stopped_by}, after "
            f"{report.warmup_sweeps} of {self.num_warmup} warm-up sweeps per chain): these "
            "predictions come from warm-up draws, not from the posterior. Refit with a larger "
            "max_time.",
            ConvergenceWarning,
            skip_file_prefixes=(PACKAGE_DIR,),
        )

    def _capped_loops(self, bits) -> list:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def _draw_entries(  # pragma: no cover - every subclass has its own
        self, P: int, C: int, N: int, M: int | None = None
    ) -> int:
        """Values one draw of one chain stores (sites, extra fields, monitored values; ``M``
        landmarks, default N: the sample weights' length), for the
        memory estimate of :func:`~bayesmkl.estimators._memory.check_fit_memory`."""
        raise NotImplementedError

    def _after_fit_entries(self, C: int, N: int, S: int) -> int:  # pragma: no cover
        """Values that ``fit`` holds at once while it computes, from ``S`` draws, what it keeps
        at the training points after the chains."""
        raise NotImplementedError

    def _unconverged_message(self, report, points) -> str:  # pragma: no cover
        raise NotImplementedError

    # fitted state -------------------------------------------------------------------------

    def _set_fitted(
        self, *, kernel_input, y_train, posterior, sample_stats, n_iter, random_seed, **attrs
    ):
        """Set the fitted attributes; the one place both ``fit`` and :meth:`load` use.

        ``attrs`` are further fitted attributes set as given (names must end in ``_``: e.g.
        ``run_report_``, ``calibrator_``, ``n_features_in_``); ``kernel_names_`` and
        ``kernel_weights_`` (the posterior mean of w) are derived here. A subclass takes its
        own state first and passes the rest on.
        """
        self.kernel_input_ = kernel_input
        self.kernel_names_ = list(kernel_input.names)
        for attr in ("landmarks_", "landmark_indices_"):  # a landmark fit's only
            self.__dict__.pop(attr, None)
        self.n_landmarks_ = kernel_input.n_landmarks
        if kernel_input.n_landmarks is not None:
            pool = kernel_input.pool
            self.landmark_indices_ = None if pool is None else np.asarray(pool.landmarks_)
            self.landmarks_ = None if pool is None else pool.landmark_points()
        self.y_train_ = np.asarray(y_train)
        self.posterior_ = {k: np.asarray(v) for k, v in posterior.items()}
        self.sample_stats_ = {k: np.asarray(v) for k, v in sample_stats.items()}
        self.kernel_weights_ = self.posterior_["w"].mean(axis=(0, 1))
        self.n_iter_ = int(n_iter)
        self.random_seed_ = int(random_seed)
        set_fitted_attributes(self, attrs)
        return self

    def _block_kernels(self, Xv, rows: slice | None = None):
        """Test kernels ``(P, m, N)`` of the rows ``rows`` (all when ``None``) of new data
        validated by :meth:`_test_input`: computed by the pool, or the precomputed stack's rows."""
        if self.kernel_input_.pool is None:
            return Xv if rows is None else Xv[:, rows]
        if rows is None:
            return self.kernel_input_.cross(Xv)
        try:
            return self.kernel_input_.cross(Xv[rows])
        except ValueError as exc:  # a non-finite kernel row, numbered within the block
            raise type(exc)(f"{exc}{_block_note(rows)}") from None

    def _prediction_width(self) -> int:
        """Values per draw and test row of the widest array a prediction computes."""
        return 1

    def _bytes_per_test_row(self) -> float:
        """Bytes a prediction holds per test row: the row's test kernels ``(P, N)``, its part of
        the weighted kernels of a batch of draws (``DECISION_BATCH × N``, in the storage dtype
        and float64), and :data:`~bayesmkl.estimators._memory.PREDICTION_COPIES` arrays of
        draws × :meth:`_prediction_width` values."""
        P, N = self.kernel_input_.n_kernels, self.kernel_input_.n_columns  # landmarks: M
        S = int(np.prod(self.posterior_["w"].shape[:2]))
        values = PREDICTION_COPIES * S * self._prediction_width()
        return 8.0 * (P * N + 2 * DECISION_BATCH * N + values)

    def _row_blocks(self, Xv) -> list:
        """The blocks of test rows (slices) of validated new data ``Xv`` that a prediction
        computes one at a time: one block (all rows, the arithmetic of a single pass) unless
        their arrays would take more than
        :data:`~bayesmkl.estimators._memory.PREDICT_MEMORY_SHARE` of the memory limit
        (:func:`~bayesmkl.estimators._memory.row_blocks`)."""
        n_rows = Xv.shape[1] if self.kernel_input_.pool is None else Xv.shape[0]
        return row_blocks(n_rows, self._bytes_per_test_row())

    def _warn_far_rows(self, far) -> None:
        """Warn about the rows ``far`` of :meth:`_test_input` (none: no warning). Called once the
        predictions are checked, so a row refused as non-finite is not also warned about."""
        warn_far_rows(far, self.kernel_input_.pool is None, FAR_RANGE_FACTOR)

    def _test_input(self, X):
        """``(new data validated, far rows)``: the test kernel stack ``(P, M, N)`` for precomputed
        kernels, else the features ``(M, d)``, and the indices of the rows far outside the
        training data (:meth:`~bayesmkl.kernels.input.KernelInput.far_rows`). Every prediction
        passes here, so a fit whose draws are warm-up sweeps warns here
        (:meth:`_warn_if_warmup_only`)."""
        check_is_fitted(self, "posterior_")
        self._warn_if_warmup_only()
        if self.kernel_input_.pool is None:
            check_kernel_list_shapes(X, "precomputed test kernels")
            check_precomputed_memory(X, "precomputed test kernel stack", training=False)
            Kt = check_array(
                X,
                allow_nd=True,
                ensure_2d=False,
                dtype=(np.float64, np.float32),
                input_name="K_test",
            )
            Kt = self.kernel_input_.cross(Kt)
            return Kt, self.kernel_input_.far_rows(Kt)
        Xv = validate_data(self, X, dtype=np.float64, reset=False)
        return Xv, self.kernel_input_.far_rows(Xv)

    def _landmark_coords(self):
        """The DataTree's ``landmark`` coordinate of a landmark fit (the landmarks' training
        rows, or 0..M−1 for precomputed blocks), ``None`` for the exact model."""
        kin = self.kernel_input_
        if kin.n_landmarks is None:
            return None
        idx = getattr(self, "landmark_indices_", None)
        return np.arange(kin.n_landmarks) if idx is None else np.asarray(idx)

    def _flat_draws(self):
        """``w (S, P), a (S, C, N), b (S, C)`` with chains and draws merged (S = chains·draws)."""
        return flat_draws(self.posterior_)

    def loo(self, **kwargs):
        """PSIS-LOO of the training labels or targets, ``arviz.loo(est.to_datatree())``, or a
        refusal with the reason and what to do where PSIS cannot use the log-likelihood
        (:func:`bayesmkl.posterior.diagnostics.loo`). ``kwargs`` go to ``arviz.loo``.

        Returns
        -------
        arviz_stats.ELPDData
        """
        check_is_fitted(self, "posterior_")
        return diagnostics.loo(self.to_datatree(), **kwargs)

    # files --------------------------------------------------------------------------------

    def save(self, path) -> None:
        """Save the fitted estimator as one netCDF file (see :func:`bayesmkl.io.save`)."""
        io.save(self, path)

    @classmethod
    def load(cls, path, *, verify: bool = True):
        """Load an estimator written by :meth:`save`; its predictions equal the saved one's.

        :func:`bayesmkl.io.read` verifies the file's checksums, groups and draws and raises
        ``FileNotFoundError`` or a ``ValueError`` naming the file when it is missing, damaged
        (a file without its checksums, unless ``verify=False``), not a saved model, holds another
        estimator, or was written by a newer version with parameters this one does not know;
        ``verify=False`` skips the checksums. A loaded model keeps the draws, not
        the sampler's state, so ``warm_start`` cannot continue it.
        """
        params, fitted = io.read(
            path, verify=verify, estimator=cls._saved_as, known_params=cls._get_param_names()
        )
        return cls(**params)._set_fitted(**fitted)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
