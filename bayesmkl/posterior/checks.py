"""Checks that turn silent numerical failures into clear errors or warnings.

* :func:`check_draws` — after sampling: an inner loop of the sampler that stopped at its
  iteration cap, or non-finite draws, raise :class:`SamplerDivergenceError` (naming the loop, or
  the chain, the first bad draw/sweep and the sites), and a share of sweeps flagged
  ``diverging`` above a threshold warns with :class:`SamplerDivergenceWarning`. What the
  messages suggest depends on the sampler settings (:func:`remedies`).
* :func:`check_predictions` — before returning decision values or probabilities: anything
  non-finite raises :class:`NonFinitePredictionError` (so no NaN, and no label derived from a
  NaN, is ever returned); :func:`check_decision_scale` warns with
  :class:`ExtremeDecisionWarning` about decision values so large (|f| above
  :data:`DECISION_WARN_LIMIT`, the margin being at |f| = 1) that every draw's probability is
  saturated: a test kernel or feature far outside the training range.
* :func:`check_label_types` — labels mixing numbers and strings raise a ``ValueError`` that says
  so (instead of numpy's ``TypeError`` from sorting).
* :func:`check_kernel_scale` — precomputed kernels whose mean diagonal is far from the unit
  diagonal that BM3KL's prior is scaled for warn with :class:`KernelScaleWarning`.
* :func:`check_degenerate_posterior` — after a fit: a posterior whose function at the training
  points does not use the data (a common shift of every point dominates, or it is flat, or a
  regression fits no better than the mean of y) warns with :class:`DegeneratePosteriorWarning`,
  naming the hyper-parameters farthest from the default prior (:func:`degenerate_posterior`).
* :func:`scaled_sd` — the standard deviation that standardisation divides by, without the
  underflow that made a feature (or target) measured at a scale like 1e-200 look constant.

The exception classes derive from the built-in ones a caller would expect
(``FloatingPointError``, ``RuntimeWarning``), so ``except FloatingPointError`` catches them.
"""

from __future__ import annotations

import numbers
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from bayesmkl.exceptions import (
    DegeneratePosteriorWarning,
    ExtremeDecisionWarning,
    KernelScaleWarning,
    NonFinitePredictionError,
    SamplerDivergenceError,
    SamplerDivergenceWarning,
)

__all__ = [
    "DECISION_WARN_LIMIT",
    "DIVERGING_WARN_FRACTION",
    "DrawReport",
    "KERNEL_SCALE_RANGE",
    "check_decision_scale",
    "check_degenerate_posterior",
    "degenerate_posterior",
    "check_draws",
    "check_kernel_scale",
    "check_label_types",
    "check_predictions",
    "extreme_rows",
    "nonfinite_draws",
    "remedies",
    "scaled_sd",
    "warn_extreme_rows",
    "warn_far_rows",
]

#: The package's directory: warnings that point at the first caller outside it skip its files.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: :func:`check_draws` warns when more than this share of a chain's kept sweeps is flagged
#: ``diverging`` (an energy error above 1000 in an exact move, or a non-finite state).
DIVERGING_WARN_FRACTION = 0.0


#: :func:`check_kernel_scale` warns when a precomputed kernel's mean diagonal is outside this
#: range. Measured on breast cancer (70/30 split, bsvm16 kernels multiplied by s, 2 chains of
#: 200 + 300 sweeps; s = 1: accuracy 0.953, log-loss 0.116, R-hat 1.08): s = 0.1 gave 0.936,
#: 0.124, R-hat 1.41; s = 0.01 0.947, 0.142, 2.41; s = 1e-4 0.889, 0.578, 2.07; s = 10 … 1e4
#: matched s = 1 (log-loss 0.108–0.116); s = 1e8 gave log-loss 0.693 (probabilities near ½).
#: ``benchmarks/kernel_scale.py`` reproduces these.
KERNEL_SCALE_RANGE = (0.1, 1e4)


#: :func:`check_decision_scale` warns above this |f|. The likelihood puts the training margins
#: at |f| = 1; |f| = 1e8 needs test kernel values about 1e8 times the training ones, and every
#: draw's probability is then 0 or 1 (with the calibrated map as with the raw rule).
DECISION_WARN_LIMIT = 1e8


@dataclass
class DrawReport:
    """What :func:`check_draws` found.

    Attributes
    ----------
    n_chains, n_draws : int
        Shape of the draws checked.
    nonfinite : dict of str → list of (chain, first_draw)
        Per site, the chains with a non-finite value and the first such draw (0-based, among
        the kept draws).
    diverging : ndarray (chains,)
        Share of kept sweeps flagged ``diverging`` per chain.
    first_sweep : int or None
        1-based sweep number of the earliest non-finite draw (when ``num_warmup`` was given).
    """

    n_chains: int
    n_draws: int
    nonfinite: dict = field(default_factory=dict)
    diverging: np.ndarray = field(default_factory=lambda: np.zeros(0))
    first_sweep: int | None = None

    @property
    def ok(self) -> bool:
        """True when every draw is finite."""
        return not self.nonfinite

    def describe(self) -> str:
        """One-line description of the non-finite draws ('' when there are none)."""
        if not self.nonfinite:
            return ""
        per_chain: dict[int, tuple[int, list[str]]] = {}
        for site, hits in self.nonfinite.items():
            for c, d in hits:
                first, sites = per_chain.get(c, (d, []))
                per_chain[c] = (min(first, d), sites + [site])
        parts = [
            f"chain {c} from kept draw {d} ({', '.join(sorted(set(s)))})"
            for c, (d, s) in sorted(per_chain.items())
        ]
        where = (
            ""
            if self.first_sweep is None
            else f"; the first non-finite kept draw is sweep {self.first_sweep} (warm-up sweeps "
            "are not kept, so it may have started earlier)"
        )
        return (
            f"non-finite draws in {len(per_chain)} of {self.n_chains} chain(s): "
            + "; ".join(parts)
            + where
        )


def _first_bad(x: np.ndarray) -> list[tuple[int, int]]:
    """``[(chain, first draw)]`` of the non-finite entries of ``x: (chains, draws, ...)``."""
    bad = ~np.isfinite(x.reshape(x.shape[0], x.shape[1], -1)).all(axis=2)
    return [(int(c), int(np.argmax(bad[c]))) for c in np.flatnonzero(bad.any(axis=1))]


def nonfinite_draws(posterior: dict) -> DrawReport:
    """A :class:`DrawReport` of the non-finite draws of ``posterior`` (no diverging info)."""
    report = DrawReport(n_chains=0, n_draws=0)
    for name, x in posterior.items():
        x = np.asarray(x)
        if x.ndim >= 2 and np.issubdtype(x.dtype, np.number):
            report.n_chains, report.n_draws = int(x.shape[0]), int(x.shape[1])
            hits = _first_bad(x.astype(np.float64, copy=False))
            if hits:
                report.nonfinite[name] = hits
    return report


#: Kernel-weight moves with a step size tuned during warm-up, and the biased SGRHMC moves.
_ADAPTED_MOVES = ("collapsed_log", "collapsed", "exact", "rmala")
_SGRHMC_MOVES = ("paper", "stable")


def remedies(settings: dict | None = None) -> str:
    """What to try after a divergence, for the sampler ``settings`` of the fit.

    ``settings`` may hold ``sampler``, ``step_size`` and ``num_warmup`` (the estimator's
    parameters); a suggestion is only made when it changes something: no ``sampler='exact'``
    to a fit that uses it, no step size to the ``"gibbs"`` move, which has none.
    """
    st = dict(settings or {})
    move = st.get("sampler")
    tips = []
    if move in _SGRHMC_MOVES:
        tips.append(
            f"an exact sampler, sampler='collapsed_log' (the default) or 'exact' ('{move}' is the "
            "paper's biased SGRHMC step)"
        )
        if st.get("step_size") is not None:
            tips.append(f"a smaller step_size (now {st['step_size']:g})")
    elif move in _ADAPTED_MOVES:
        tips.append(
            f"sampler='gibbs' (exact pairwise Gibbs updates of w, no step size; now '{move}')"
        )
        if st.get("num_warmup") is not None:
            tips.append(
                f"a longer num_warmup (now {st['num_warmup']}) for the step-size adaptation"
            )
    elif move is None:
        tips += ["sampler='exact'", "a smaller step_size"]
    tips.append("hyper-parameters closer to the defaults")
    return "try " + "; ".join(tips) + "; and check the data for extreme or duplicated rows"


def check_draws(
    posterior: dict,
    sample_stats: dict | None = None,
    *,
    num_warmup: int | None = None,
    warn_fraction: float = DIVERGING_WARN_FRACTION,
    stacklevel: int = 4,
    capped: dict | None = None,
    settings: dict | None = None,
) -> DrawReport:
    """Check sampler output; raise on non-finite draws, warn on diverging sweeps.

    Parameters
    ----------
    posterior : dict of str → array (chains, draws, ...)
        Draws (``BM3KLClassifier.posterior_``).
    sample_stats : dict of str → array (chains, draws), optional
        ``diverging`` (bool) and ``potential_energy`` are used when present.
    num_warmup : int, optional
        Sweeps before the first kept draw; only used to report the sweep number.
    warn_fraction : float
        Warn when the share of a chain's kept sweeps flagged ``diverging`` exceeds this.
    stacklevel : int
        Passed to :func:`warnings.warn`; the default 4 points at the caller of ``fit``
        (check_draws ← ``fit`` ← its :func:`bayesmkl.config.with_x64` wrapper ← caller).
    capped : dict of int → list of str, optional
        Per chain, the inner loops of the sampler that stopped at their iteration cap
        (``BM3KLState.capped``, :func:`bayesmkl.sampler.state.capped_loops`).
    settings : dict, optional
        The sampler settings, for the suggestions of the messages (:func:`remedies`).

    Returns
    -------
    DrawReport

    Raises
    ------
    SamplerDivergenceError
        When an inner loop hit its cap (the message names it and the chains), or any draw of
        any site (or the potential energy) is NaN or infinite (the message names the chains,
        the first bad draw and the sites).
    """
    if not posterior:
        raise ValueError("no posterior draws to check")
    hit = {int(c): list(names) for c, names in (capped or {}).items() if names}
    if hit:
        loops = sorted({n for names in hit.values() for n in names})
        raise SamplerDivergenceError(
            f"the sampler broke down: {'; '.join(loops)} stopped at its iteration cap "
            f"without an answer in chain(s) {', '.join(map(str, sorted(hit)))}, so the draws "
            "from there on are NaN and the fit is unusable. The arithmetic fails at these "
            f"settings (extreme hyper-parameters or kernel values); {remedies(settings)}."
        )
    stats = {} if sample_stats is None else dict(sample_stats)
    extra = {"potential_energy": stats["potential_energy"]} if "potential_energy" in stats else {}
    report = nonfinite_draws({**posterior, **extra})
    if report.nonfinite and num_warmup is not None:
        first = min(d for hits in report.nonfinite.values() for _, d in hits)
        report.first_sweep = int(num_warmup) + first + 1
    if "diverging" in stats:
        div = np.asarray(stats["diverging"], dtype=bool)
        report.diverging = div.reshape(div.shape[0], -1).mean(axis=1)
    if not report.ok:
        raise SamplerDivergenceError(
            f"the sampler diverged: {report.describe()}. The fit is unusable; {remedies(settings)}."
        )
    if report.diverging.size and np.any(report.diverging > warn_fraction):
        worst = int(np.argmax(report.diverging))
        warnings.warn(
            f"{np.mean(report.diverging):.1%} of the kept sweeps were flagged diverging "
            f"(worst: chain {worst}, {report.diverging[worst]:.1%}); the kernel-weight move "
            "had an energy error above 1000 or a non-finite state there, so treat the draws "
            f"with caution ({remedies(settings)}).",
            SamplerDivergenceWarning,
            stacklevel=stacklevel,
        )
    return report


def check_predictions(values, what: str = "predictions", posterior=None, block=None) -> np.ndarray:
    """Return ``values`` as an array, or raise when any entry is NaN or infinite.

    Parameters
    ----------
    values : array (S, M, ...) or (M, ...)
        Decision values or probabilities; axis −2 (or 0 for 1-D/2-D) indexes the test rows.
    what : str
        Named in the message.
    posterior : dict of str → array (chains, draws, ...), optional
        The draws the values came from; when they are themselves non-finite (a diverged fit,
        or a file saved before draws were checked) the message says so.
    block : slice, optional
        The test rows that ``values`` hold, when a prediction is computed a block of rows at a
        time: the message numbers the rows of the whole input and names the block.

    Raises
    ------
    NonFinitePredictionError
    """
    arr = np.asarray(values)
    finite = np.isfinite(arr)
    if finite.all():
        return arr
    if posterior is not None:
        report = nonfinite_draws(posterior)
        if not report.ok:
            raise NonFinitePredictionError(
                f"cannot compute {what}: the fitted model has {report.describe()}; refit it"
            )
    rows_axis = arr.ndim - 2 if arr.ndim >= 3 else 0
    bad = ~finite
    other = tuple(a for a in range(arr.ndim) if a != rows_axis)
    rows = np.flatnonzero(bad.any(axis=other) if other else bad)
    where = ""
    if block is not None:
        rows = rows + block.start
        where = f" among the test rows {block.start} to {block.stop - 1} (computed first)"
    raise NonFinitePredictionError(
        f"{what} are not finite for {rows.size} test row(s){where} (first rows "
        f"{rows[:10].tolist()}); no prediction is returned. Check these rows for extreme values."
    )


def extreme_rows(F, limit: float = DECISION_WARN_LIMIT) -> tuple[np.ndarray, float]:
    """``(rows, peak)``: the test rows whose decision values ``F: (S, M, C)`` exceed ``limit``
    in magnitude in some draw, and the largest abs(f) (0 when none exceeds it)."""
    F = np.asarray(F)
    big = np.abs(F) > limit
    if not big.any():
        return np.zeros(0, dtype=int), 0.0
    rows = np.flatnonzero(big.reshape(F.shape[0], F.shape[1], -1).any(axis=(0, 2)))
    return rows, float(np.max(np.abs(F)))


def _extreme_rows_message(rows, peak: float, limit: float) -> str:
    return (
        f"decision values of {rows.size} test row(s) (first rows {rows[:10].tolist()}) "
        f"reach |f| = {peak:.3g}, beyond {limit:g} (training margins are at "
        "|f| = 1): their kernel values are far outside the training range, and each draw's "
        "probability for them is 0 or 1, so their predictions say nothing. Check these rows "
        "(test kernels or features) for extreme values."
    )


def warn_extreme_rows(rows, peak: float, limit: float = DECISION_WARN_LIMIT) -> None:
    """Warn (:class:`ExtremeDecisionWarning`, pointing at the first caller outside the package)
    that the decision values of test ``rows`` (:func:`extreme_rows`, numbered in the whole
    input) reach ``peak``; nothing when ``rows`` is empty."""
    rows = np.asarray(rows)
    if rows.size == 0:
        return
    warnings.warn(
        _extreme_rows_message(rows, peak, limit),
        ExtremeDecisionWarning,
        skip_file_prefixes=(PACKAGE_DIR,),
    )


def check_decision_scale(
    F, limit: float = DECISION_WARN_LIMIT, stacklevel: int = 5, *, training: bool = False
) -> None:
    """Warn (:class:`ExtremeDecisionWarning`) when decision values ``F: (S, M, C)`` exceed
    ``limit`` in magnitude; the message names the test rows and the largest |f|.

    ``training=True``: ``F`` are the posterior's decision values at the training points, which
    the pseudo-likelihood pins at margins of 1; values far beyond mean the draws drifted (a
    prior too weak for the data, or diverging moves), not that the rows are unusual, and the
    message says so."""
    F = np.asarray(F)
    big = np.abs(F) > limit
    if not big.any():
        return
    if training:
        share = float(big.reshape(F.shape[0], -1).any(axis=1).mean())
        msg = (
            f"the posterior's decision values at the training points reach |f| = "
            f"{np.max(np.abs(F)):.3g} in {share:.0%} of the draws, beyond {limit:g}, although the "
            "pseudo-likelihood pins the training margins at |f| = 1: the draws have drifted, "
            "typically under a prior too weak for the data (a large kappa or bias_prior_var, a "
            "small beta_a) or with diverging kernel-weight moves, and this fit's probabilities "
            "are 0 or 1 per draw. Refit with the default prior's values, or see the "
            "SamplerDivergenceWarning."
        )
    else:
        rows = np.flatnonzero(big.reshape(F.shape[0], F.shape[1], -1).any(axis=(0, 2)))
        msg = _extreme_rows_message(rows, float(np.max(np.abs(F))), limit)
    warnings.warn(msg, ExtremeDecisionWarning, stacklevel=stacklevel)


def warn_far_rows(rows, precomputed: bool, factor: float) -> None:
    """Warn (:class:`ExtremeDecisionWarning`, pointing at the first caller outside the package)
    that test ``rows`` lie far outside the training data (:meth:`KernelInput.far_rows
    <bayesmkl.kernels.input.KernelInput.far_rows>`); nothing when ``rows`` is empty."""
    rows = np.asarray(rows)
    if rows.size == 0:
        return
    what = (
        f"kernel values above {factor:g} times the training kernel's largest diagonal"
        if precomputed
        else f"a feature beyond the training range by more than {factor:g} times that range"
    )
    warnings.warn(
        f"{rows.size} test row(s) (first rows {rows[:10].tolist()}) lie far outside the "
        f"training data ({what}): their predictions extrapolate and say nothing about them. "
        "Check these rows (features or test kernels) for extreme values or wrong units.",
        ExtremeDecisionWarning,
        skip_file_prefixes=(PACKAGE_DIR,),
    )


def check_label_types(y) -> None:
    """Raise a ``ValueError`` when the labels mix numbers and strings (or other types).

    NumPy would turn ``[1, "a"]`` into the strings ``"1", "a"`` silently (merging ``1`` with
    ``"1"``) and an object array of both into a ``TypeError`` while sorting; both are refused
    here with a message that names the types.

    Parameters
    ----------
    y : array-like (N,)
    """
    try:
        if np.asarray(y).dtype.kind in "biufc":  # numbers (or bools) only
            return
        values = np.asarray(y, dtype=object).ravel()
    except (TypeError, ValueError):  # ragged input: left to the caller's own validation
        return
    kinds: dict[str, object] = {}
    for v in values:
        if isinstance(v, bool | np.bool_):
            kind = "bool"
        elif isinstance(v, numbers.Number | np.number):
            kind = "number"
        elif isinstance(v, str | np.str_ | bytes):
            kind = "str"
        else:
            kind = type(v).__name__
        kinds.setdefault(kind, v)
    if len(kinds) > 1:
        ex = ", ".join(f"{k} (e.g. {v!r})" for k, v in kinds.items())
        raise ValueError(
            f"y mixes label types: {ex}. Use one type for every label, e.g. y.astype(str)."
        )


#: Below this standard deviation the squared deviations approach float64's underflow (about
#: 1e-308), and :func:`scaled_sd` recomputes the column from scaled deviations.
UNDERFLOW_SD = 1e-140


def scaled_sd(x):
    """Population standard deviation (``ddof=0``) of ``x`` along axis 0, without underflow.

    ``np.std`` of a column at a scale of 1e-200 is 0 (its squared deviations are below the
    smallest float64), which made standardisation treat it as constant and drop the feature
    silently. A column whose ``np.std`` is below :data:`UNDERFLOW_SD` is recomputed from its
    deviations divided by their largest magnitude; every other column keeps ``np.std``'s value
    bit for bit (so fits on ordinary data do not change). An overflowing column stays
    infinite (or NaN), for the caller to refuse.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        sd = np.std(x, axis=0)
        low = sd < UNDERFLOW_SD
        if not np.any(low):
            return sd
        dev = x - np.mean(x, axis=0)
        peak = np.max(np.abs(dev), axis=0)
        scaled = peak * np.sqrt(np.mean((dev / np.where(peak > 0, peak, 1.0)) ** 2, axis=0))
    return np.where(low, scaled, sd)


def check_kernel_scale(K, names) -> None:
    """Warn (:class:`KernelScaleWarning`) about precomputed training kernels ``K (P, N, N)``
    whose mean diagonal is outside :data:`KERNEL_SCALE_RANGE`.

    BM3KL's prior (κ, τ, and γ0 in the likelihood) is set for kernels of unit diagonal, which
    is what its pools build; the model is not invariant to the scale of a kernel. Far smaller
    kernels leave f = K a near its prior (slow mixing, probabilities near the base rates: a
    kernel at 1e-200 of the usual scale fitted nothing, without a word); far larger ones
    saturate the probabilities. The warning points at the first caller outside the package.
    """
    diag = np.einsum("pii->pi", np.asarray(K)).astype(np.float64).mean(axis=1)  # no copy of K
    lo, hi = KERNEL_SCALE_RANGE
    bad = [f"{n} ({d:.3g})" for n, d in zip(names, diag, strict=True) if not lo <= d <= hi]
    if bad:
        warnings.warn(
            f"precomputed kernel(s) with a mean diagonal outside [{lo:g}, {hi:g}]: "
            f"{', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}. BM3KL's prior is scaled "
            "for kernels of unit diagonal (as its pools build them): far smaller kernels mix "
            "slowly and predict little better than the class frequencies, far larger ones "
            "saturate the probabilities. Normalise each kernel: K[i, j] / sqrt(K[i, i] K[j, j]) "
            "for training rows and k(x, x_j) / sqrt(k(x, x) K[j, j]) for test rows (or divide "
            "it by its mean diagonal, training and test alike).",
            KernelScaleWarning,
            skip_file_prefixes=(PACKAGE_DIR,),
        )


#: :func:`degenerate_posterior`'s limits. SHIFT_RATIO: the spread over draws of the mean training
#: function value (a shift common to every point: the bias) against the median spread across the
#: training points within a draw. FLAT: that within-draw spread, in units of the margin (the
#: classifier pins training margins at 1) or of the sd of y (a regressor's standardised scale).
#: regression_sd: the median posterior sd of a regressor's training function values, in sds of
#: y. regression_rmse: the training RMSE of its posterior mean function, in sds of y (above 0.99
#: it explains under 2% of the training targets' variance, where a kernel fit of pure noise
#: explains far more). Measured (40 rows of breast cancer and of diabetes, 2 chains × 100 + 100
#: sweeps, seeds 0 and 1): ordinary fits have shift ratio 0.08, within-draw spread 0.7-2.4, sd
#: 0.3-0.5 and RMSE 0.5; the degenerate fits of the audit (bias_prior_var=1e20, beta_a=1e6,
#: the upper corner) have shift ratio 75-800, spread 0.0008, or a training RMSE of 1.05-3.8 sds
#: of y with sd 15-50.
DEGENERATE_LIMITS = {
    "shift_ratio": 10.0,
    "flat": 0.01,
    "regression_sd": 10.0,
    "regression_rmse": 0.99,
}


def degenerate_posterior(F, ys=None) -> str | None:
    """What makes a fit's posterior degenerate, in words, or ``None`` for a posterior that uses
    the data.

    Parameters
    ----------
    F : array (S, N, C) or (S, N)
        Per-draw function values at the N training points: a classifier's decision values (one
        column per one-vs-all problem; margins at 1) or a regressor's on the standardised scale.
    ys : array (N,), optional
        A regressor's standardised training targets (mean 0, sd 1): then also degenerate where
        the posterior mean function fits them about as well as their mean (RMSE above
        ``DEGENERATE_LIMITS["regression_rmse"]``) or its posterior sd at the training points
        exceeds ``DEGENERATE_LIMITS["regression_sd"]``.

    Notes
    -----
    Degenerate (:data:`DEGENERATE_LIMITS`): the spread over draws of the mean training value
    exceeds ``shift_ratio`` times the median spread across the training points within a draw
    (every draw shifts the whole function: the posterior predictive is the same at every
    point), or that within-draw spread is below ``flat`` (the function is constant).
    """
    F = np.asarray(F, dtype=float)
    F = F.reshape(F.shape[0], F.shape[1], -1)  # (S, N, C)
    if F.shape[0] < 2 or F.shape[1] < 2 or not np.all(np.isfinite(F)):
        return None
    lim = DEGENERATE_LIMITS
    within = np.median(F.std(axis=1), axis=0)  # (C,): spread across points, per draw
    shift = F.mean(axis=1).std(axis=0)  # (C,): spread over draws of the common level
    unit = "sd of y" if ys is not None else "the margin"
    for c in range(F.shape[2]):
        if shift[c] > lim["shift_ratio"] * within[c]:
            return (
                "every draw shifts the whole function: the spread over draws of its mean at the "
                f"training points ({shift[c]:.3g}) is {shift[c] / max(within[c], 1e-300):.3g} "
                f"times its spread across the points ({within[c]:.3g}), so the posterior "
                "predictive is "
                "about the same at every point"
            )
        if within[c] < lim["flat"]:
            return (
                f"the function is flat: its spread across the training points is {within[c]:.2g} "
                f"of {unit} (every sample weight shrunk to zero), so the fit predicts a constant"
            )
    if ys is not None:
        f = F[:, :, 0]
        ys = np.asarray(ys, dtype=float).reshape(-1)
        rmse = float(np.sqrt(np.mean((f.mean(axis=0) - ys) ** 2)))
        sd = float(np.median(f.std(axis=0)))
        if sd > lim["regression_sd"]:
            return (
                f"the posterior sd of the function at the training points is {sd:.3g} sds of y "
                f"(the targets' own spread is 1), and its mean misses them by {rmse:.3g} sds"
            )
        if rmse > lim["regression_rmse"]:
            return (
                f"the posterior mean function misses the training targets by {rmse:.3g} sds of y "
                f"(RMSE; {1 - rmse**2:.1%} of their variance explained), about as well as their "
                "mean (RMSE 1)"
            )
    return None


def check_degenerate_posterior(
    F, *, who: str, hyper: dict, defaults: dict, ys=None, stacklevel: int = 5
) -> bool:
    """Warn (:class:`DegeneratePosteriorWarning`) when :func:`degenerate_posterior` finds the
    fit's posterior degenerate; the message says how, and names the hyper-parameters of
    ``hyper`` that lie 1000 times or more from their ``defaults`` (the likely cause).

    Parameters
    ----------
    F, ys
        As for :func:`degenerate_posterior`.
    who : str
        The estimator, for the message.
    hyper, defaults : dict of str → float
        The fit's hyper-parameters and the default prior's.

    Returns
    -------
    bool
        Whether it warned.
    """
    what = degenerate_posterior(F, ys)
    if what is None:
        return False
    far = []
    for name, value in hyper.items():
        ref = defaults.get(name)
        v = np.asarray(value, dtype=float)
        if ref is None or not np.all(v > 0) or not ref > 0:
            continue
        ratio = float(np.max(np.abs(np.log10(v / float(ref)))))
        if ratio >= 3:
            shown = f"{float(v.max()):g}" if v.ndim else f"{float(v):g}"
            far.append((ratio, f"{name}={shown} (default {float(ref):g})"))
    far.sort(reverse=True)
    cause = (
        "Likely cause: " + ", ".join(t for _, t in far) + ", far from the default prior"
        if far
        else "Likely cause: the hyper-parameters or the data's scale"
    )
    warnings.warn(
        f"{who}'s posterior is degenerate and its predictions do not use the data: {what}. "
        f"{cause}. Refit with values nearer the defaults (prior='default').",
        DegeneratePosteriorWarning,
        stacklevel=stacklevel,
    )
    return True
