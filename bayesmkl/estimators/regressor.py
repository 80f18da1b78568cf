"""``BM3KLRegressor``: Bayesian max-margin multiple-kernel regression (docs/math.md §15).

A thin scikit-learn shell like :class:`~bayesmkl.BM3KLClassifier`: the kernel pool builds
``K: (P, N, N)``, ``y`` is standardised, :class:`~bayesmkl.sampler.regression.BM3KLReg` draws
``(e, w, a, b, λ⁺, λ⁻, ν, ς, c, ε)`` in chunks until the run-length targets hold
(:func:`~bayesmkl.sampler.runlength.sample_until_converged`), and
:class:`~bayesmkl.posterior.regression.RegressionPosteriorMixin` turns the draws into
predictive means, intervals, densities and the ArviZ DataTree.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpyro.infer import MCMC
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from bayesmkl import io
from bayesmkl.config import with_x64
from bayesmkl.estimators._fitting import (
    AUTO_CHUNK,
    EXTRA_FIELDS,
    RUN_CHUNK,
    check_loop_bounds,
    check_precomputed_stack,
    describe_quantity,
    enable_compilation_cache,
    fit_kernel_input,
    make_rng_key,
    run_monitor,
    set_fitted_attributes,
    unconverged_message,
)
from bayesmkl.estimators._params import BM3KL_REG_PARAMS
from bayesmkl.estimators._validation import (
    Interval,
    Options,
    check_choice,
    check_hyper,
    check_param,
    check_positive,
)
from bayesmkl.kernels.input import NAMED_POOLS
from bayesmkl.kernels.pool import KernelPool
from bayesmkl.model.regression import REG_PRIORS, RegHyper, unit_variance_kappa
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior.checks import check_draws, scaled_sd
from bayesmkl.posterior.regression import RegressionPosteriorMixin
from bayesmkl.sampler.chains import resolve_chain_method
from bayesmkl.sampler.moves import EXACT_MOVES
from bayesmkl.sampler.regression import REG_CAPPED_LOOPS, BM3KLReg
from bayesmkl.sampler.runlength import sample_until_converged
from bayesmkl.sampler.runner import ChainRunner, hold_programs_for

__all__ = ["BM3KLRegressor"]

_EPSILON = [Options("auto"), Interval("real", 0, None, closed="left")]
_NOISE_PRIOR = [Interval("real", 0, 1e6, closed="right", description="a number in (0, 1e6]")]
#: Largest fixed ε in standard deviations of y: 1e100 fits (measured), 1e300 overflows.
MAX_STD_EPSILON = 1e100
_RHAT_TARGET = [Interval("real", 1, None, closed="neither", allow_inf=True)]


class BM3KLRegressor(RegressionPosteriorMixin, RegressorMixin, BaseEstimator):
    """Bayesian max-margin multiple-kernel regression: BM³KL with the ε-insensitive loss.

    The model (docs/math.md §15) keeps the classifier's prior and kernel-weight moves:
    f(x) = Σ_i a_i K_w(x, x_i) + b with kernel weights w ~ Dirichlet(η), TPBN-shrunk sample
    weights a and a Gaussian bias b. Its likelihood is the normalised ε-insensitive
    density p(y | f) = exp{−2c·max(abs(y − f) − ε, 0)} / (2ε + 1/c), SVR's loss made a proper
    noise law; the scale c and the tube's half-width ε are learnt, so that predictive
    intervals have the right width. ``y`` is standardised inside ``fit``; c and ε (and a, b)
    live on that scale, and every prediction is on the scale of ``y``.

    Every sweep is exact: the two hinges of the loss each have the Polson–Scott scale
    mixture of the classifier (augmentation variables λ⁺, λ⁻), so f is Gaussian given them;
    (c, ε) are drawn by slice sampling with λ integrated out. The run length is the
    classifier's rule: 4 chains until every kernel weight, held-in function value, c and ε
    has R-hat ≤ 1.01 and bulk ESS ≥ 400, or a budget is spent (``fit`` warns).

    Parameters
    ----------
    kernels : {"bsvm16", "simplemkl", "precomputed"} or KernelPool, default="bsvm16"
        Base kernels, as for :class:`~bayesmkl.BM3KLClassifier` (``"precomputed"``:
        ``fit(K, y)`` with Gram matrices ``(P, N, N)``, ``predict(K_test)`` with ``(P, M, N)``).
    prior : {"default", "paper"}, default="default"
        Named prior of w, a and b (:data:`bayesmkl.model.regression.REG_PRIORS`: the
        classifier's presets): each of ``eta`` … ``bias_prior_var`` left at ``None`` is taken
        from it (default: η = 2, α_a = 1, β_a = 1, τ = 1 and κ scaled to the data, see
        ``kappa``; paper: η = 1, α_a = 1, β_a = 0.1, κ = 1e-10, τ = 1e-4).
    eta : float or array (P,), default=None
        η, Dirichlet concentration of the kernel weights. Allowed: [0.02, 1e6].
    alpha_a : float, default=None
        α_a, first TPBN shape of the sample weights. Allowed: [0.02, 1e6].
    beta_a : float, default=None
        β_a, second TPBN shape. Allowed: [0.02, 1e6].
    kappa : float, default=None
        κ, rate of the TPBN global Gamma prior: the prior scale of the sample weights' variances.
        ``None``: under ``prior="default"`` κ = N/‖K̄‖²_F for the mean training kernel K̄
        (:func:`~bayesmkl.model.regression.unit_variance_kappa`: a typical prior function then
        has the variance of the standardised y; about 3/N for the 16-kernel pool), under
        ``"paper"`` 1e-10. Allowed: [1e-200, 1e10].
    bias_prior_var : float, default=None
        τ, prior variance of the bias (on the standardised scale). Allowed: [1e-100, 1e20].
    epsilon : "auto" or float, default="auto"
        Half-width ε of the insensitive tube. ``"auto"``: learnt, with the prior
        Gamma(``eps_shape``, ``eps_rate``) on the standardised scale. A number ≥ 0 fixes it,
        in the units of ``y`` (0: a Laplace likelihood).
    c_shape : float, default=2.0
        Shape of the Gamma prior of the loss scale c on the standardised scale (the noise sd
        is 1/(√2 c) at ε = 0: with the default rate the prior's central 90% covers sds from
        about 0.07 to 1). Allowed: (0, 1e6].
    c_rate : float, default=0.5
        Rate of that Gamma prior. Allowed: (0, 1e6].
    eps_shape : float, default=1.0
        Shape of the Gamma prior of ε on the standardised scale when ``epsilon="auto"``
        (with the default rate an exponential of mean 0.5). Allowed: (0, 1e6].
    eps_rate : float, default=2.0
        Rate of that Gamma prior. Allowed: (0, 1e6].
    sampler : str, default="collapsed_log"
        Kernel-weight move (exact moves only): ``"collapsed_log"``, ``"collapsed"``,
        ``"gibbs"``, ``"exact"`` or ``"rmala"`` (:mod:`bayesmkl.sampler.moves`).
    step_size : float, default=0.01
        Initial step size of the HMC moves (tuned during warm-up).
    n_leapfrog : int, default=10
        Leapfrog steps of the kernel-weight move per sweep.
    num_warmup : int, default=300
        Sweeps discarded, during which the moves adapt.
    num_samples : int or "auto", default="auto"
        Sweeps kept per chain; ``"auto"``: until ``rhat_target`` and ``ess_target`` hold on
        the kernel weights, the held-in function values, c and ε, or a budget is spent.
    num_chains : int, default=4
        Independent chains.
    chain_method : {"sequential", "parallel", "vectorized"}, default="vectorized"
        How the chains run (as for the classifier).
    rhat_target : float, default=1.01
        Largest rank-normalised split R-hat accepted by ``num_samples="auto"``.
    ess_target : float, default=400
        Smallest bulk ESS accepted by ``num_samples="auto"``.
    max_samples : int, default=5000
        Budget of post-warm-up sweeps per chain for ``num_samples="auto"``.
    max_time : float or None, default=None
        Wall-clock budget in seconds for ``num_samples="auto"`` (warm-up included).
    kernel_dtype : {"float64", "float32"} or None, default="float64"
        Storage dtype of the kernels (the sampler computes in float64).
    random_state : None, int, RandomState or Generator, default=None
        Seed of the sampler; the same int gives identical draws.
    progress_bar : bool, default=True
        One progress bar over warm-up and sampling.
    kernel_names : sequence of str, optional
        Names of precomputed kernels.

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Posterior mean of w.
    kappa_ : float
        The κ of the fit (see ``kappa``).
    kernel_names_ : list of str
    epsilon_ : float
        Posterior mean of ε, in the units of ``y``.
    noise_sd_ : float
        Posterior mean of the noise law's standard deviation, in the units of ``y``.
    y_mean_, y_scale_ : float
        The standardisation of ``y`` (mean and standard deviation of the training targets).
    posterior_ : dict of str → ndarray
        Draws on the standardised scale, with a chain axis: ``w, e: (chains, draws, P)``,
        ``a, lam_plus, lam_minus, nu, varsigma: (chains, draws, 1, N)``,
        ``b: (chains, draws, 1)``, ``c, eps: (chains, draws)``.
    sample_stats_ : dict of str → ndarray (chains, draws)
    log_likelihood_ : ndarray (chains, draws, N)
        log p(y_i | f_i, c, ε) of each training target per draw, in the units of ``y``
        (the DataTree's ``log_likelihood`` group, for ``arviz.loo``).
    run_report_ : bayesmkl.sampler.runlength.RunReport
    n_iter_ : int
    random_seed_ : int
    y_train_ : ndarray (N,)
    kernel_input_ : KernelInput
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from bayesmkl import BM3KLRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = BM3KLRegressor(random_state=0, progress_bar=False).fit(X[:300], y[:300])
    ... # doctest: +SKIP
    >>> reg.predict_interval(X[300:305], coverage=0.9).shape  # doctest: +SKIP
    (5, 2)
    """

    _param_defaults = BM3KL_REG_PARAMS

    def __init__(
        self, kernels="bsvm16", *, prior="default", eta=None, alpha_a=None, beta_a=None,
        kappa=None, bias_prior_var=None, epsilon="auto", c_shape=2.0, c_rate=0.5,
        eps_shape=1.0, eps_rate=2.0, sampler="collapsed_log", step_size=0.01, n_leapfrog=10,
        num_warmup=300, num_samples="auto", num_chains=4, chain_method="vectorized",
        rhat_target=1.01, ess_target=400, max_samples=5000, max_time=None,
        kernel_dtype="float64", random_state=None, progress_bar=True, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.prior = prior
        self.eta = eta
        self.alpha_a = alpha_a
        self.beta_a = beta_a
        self.kappa = kappa
        self.bias_prior_var = bias_prior_var
        self.epsilon = epsilon
        self.c_shape = c_shape
        self.c_rate = c_rate
        self.eps_shape = eps_shape
        self.eps_rate = eps_rate
        self.sampler = sampler
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.chain_method = chain_method
        self.rhat_target = rhat_target
        self.ess_target = ess_target
        self.max_samples = max_samples
        self.max_time = max_time
        self.kernel_dtype = kernel_dtype
        self.random_state = random_state
        self.progress_bar = progress_bar
        self.kernel_names = kernel_names

    # validation ---------------------------------------------------------------------------

    def _validate_params(self):
        k = self.kernels
        named = isinstance(k, str) and k in NAMED_POOLS + ("precomputed",)
        if not (isinstance(k, KernelPool) or named):
            raise ValueError(
                f"kernels={k!r} is not understood: use one of "
                f"{NAMED_POOLS + ('precomputed',)} or a bayesmkl.KernelPool"
            )
        check_choice("prior", self.prior, tuple(REG_PRIORS))
        for name in RegHyper._fields[:5]:
            if getattr(self, name) is not None:
                check_hyper(name, getattr(self, name))
        check_param("epsilon", self.epsilon, _EPSILON)
        for name in RegHyper._fields[5:]:
            check_param(name, getattr(self, name), _NOISE_PRIOR)
        check_choice("sampler", self.sampler, EXACT_MOVES)
        check_positive("step_size", self.step_size)
        check_loop_bounds(self)
        check_choice("chain_method", self.chain_method, ("sequential", "parallel", "vectorized"))
        check_param("rhat_target", self.rhat_target, _RHAT_TARGET)
        check_positive("ess_target", self.ess_target)
        if self.max_time is not None:
            check_positive("max_time", self.max_time)
        if self.kernel_dtype is not None:
            check_choice("kernel_dtype", str(np.dtype(self.kernel_dtype)), ("float64", "float32"))

    def _hyper(self, K) -> RegHyper:
        """The fit's hyper-parameters: the named prior's, with the estimator's own on top; under
        ``prior="default"`` an unset κ is :func:`~bayesmkl.model.regression.unit_variance_kappa`
        of the training kernels ``K``."""
        own = {k: getattr(self, k) for k in RegHyper._fields}
        if self.kappa is None and self.prior == "default":
            own["kappa"] = unit_variance_kappa(K)
        return REG_PRIORS[self.prior]._replace(**{k: v for k, v in own.items() if v is not None})

    def _validate_fit_input(self, X, y):
        """``(kernel input, K (P, N, N), y (N,) float64)``; refuses non-finite or constant y."""
        if self.kernels == "precomputed":
            Xk = check_precomputed_stack(X)
            if y is None:
                raise ValueError("BM3KLRegressor requires y to be passed, but the target y is None")
            y = check_array(column_or_1d(y, warn=True), ensure_2d=False, dtype=np.float64,
                            input_name="y")  # fmt: skip
            if y.shape[0] != Xk.shape[1]:
                raise ValueError(f"y has {y.shape[0]} values but the kernels {Xk.shape[1]} points")
        else:
            Xk, y = validate_data(
                self, X, y, dtype=np.float64, y_numeric=True, ensure_min_samples=2
            )
        y = np.asarray(y, dtype=np.float64)
        if not np.ptp(y) > 0:
            raise ValueError(
                f"y is constant (every target equals {y[0]!r}): there is nothing to regress and "
                "no scale to standardise it by"
            )
        kin, K = fit_kernel_input(self, Xk)
        zero = [name for name, k in zip(kin.names, K, strict=True) if not np.any(k)]
        if zero:  # checked before sampling: the automatic kappa divided by zero, then diverged
            raise ValueError(
                f"the kernel(s) {zero[:10]} are zero everywhere: they carry no information "
                "about y (and an all-zero stack leaves no scale for the prior's kappa); remove "
                "them"
            )
        return kin, K, y

    def _standardise(self, y):
        """``(mean, sd, ε / sd or None)`` of the targets; refuses a y whose variance overflows
        float64 (one value like 1e300 would make every prediction NaN) and a fixed ε beyond
        :data:`MAX_STD_EPSILON` standard deviations of y, where the likelihood's normaliser
        overflows."""
        with np.errstate(over="ignore", invalid="ignore"):  # the check below says it
            y_mean, y_scale = float(np.mean(y)), float(scaled_sd(y))  # no underflow at 1e-200
        if not (np.isfinite(y_mean) and np.isfinite(y_scale)):
            r = int(np.argmax(np.abs(y)))
            raise ValueError(
                f"y cannot be standardised: its value {y[r]:.3g} (row {r}) makes the mean or "
                "variance overflow float64. Rescale y (e.g. divide it by its largest absolute "
                "value, or take a logarithm) or remove the outlying rows."
            )
        eps = None if self.epsilon == "auto" else float(self.epsilon) / y_scale
        if eps is not None and eps > MAX_STD_EPSILON:
            raise ValueError(
                f"epsilon={self.epsilon!r} is {eps:.3g} standard deviations of y; at most "
                f"{MAX_STD_EPSILON:g} keep the sampler's arithmetic finite (and an epsilon wider "
                "than the range of y puts every target inside the tube)"
            )
        return y_mean, y_scale, eps

    # fit ----------------------------------------------------------------------------------

    @with_x64
    def fit(self, X, y):
        """Run the Gibbs sampler.

        Parameters
        ----------
        X : array (N, d), or array (P, N, N) with ``kernels="precomputed"``
            Training features (the pool standardises them) or Gram matrices.
        y : array (N,)
            Real targets, finite and not all equal.

        Returns
        -------
        self
        """
        self._validate_params()
        kin, K, y = self._validate_fit_input(X, y)
        y_mean, y_scale, eps = self._standardise(y)
        ys = ((y - y_mean) / y_scale)[None, :]
        key, seed = make_rng_key(self.random_state)
        enable_compilation_cache()
        hold_programs_for((K.shape, ys.shape, str(K.dtype), "regression"))
        hyper = self._hyper(K)
        kernel = BM3KLReg(
            *hyper, epsilon=eps, move=self.sampler,
            step_size=self.step_size, n_leapfrog=int(self.n_leapfrog),
            adapt_sweeps=int(self.num_warmup),
        )  # fmt: skip
        auto = self.num_samples == "auto"
        chain_method = resolve_chain_method(self.chain_method, int(self.num_chains))
        budget = int(self.max_samples) if auto else int(self.num_samples)
        warmup = int(self.num_warmup)
        chunk = min(RUN_CHUNK, max(1, warmup + budget))
        monitor = _noise_monitor(run_monitor(K, seed))
        if chain_method == "vectorized":
            mcmc = ChainRunner(kernel, int(self.num_chains), chunk, monitor_points=monitor.points)
        else:
            mcmc = MCMC(
                kernel, num_warmup=0, num_samples=chunk, num_chains=int(self.num_chains),
                chain_method=chain_method, jit_model_args=True, progress_bar=False,
            )  # fmt: skip
        draws, extra, report = sample_until_converged(
            mcmc, key, (K, ys), monitor, num_warmup=warmup, extra_fields=EXTRA_FIELDS,
            rhat_target=float(self.rhat_target), ess_target=float(self.ess_target),
            max_samples=budget, max_time=self.max_time, check_every=AUTO_CHUNK,
            fixed=not auto, max_kept=1_000 if auto else 2**62,
            progress=bool(self.progress_bar) and isinstance(chain_method, str),
        )  # fmt: skip
        self._set_fitted(
            kernel_input=kin, y_train=y, y_mean=y_mean, y_scale=y_scale, posterior=draws,
            sample_stats=diagnostics.sample_stats_from_extra(extra),
            n_iter=warmup + int(report.num_samples), random_seed=seed, run_report_=report,
        )  # fmt: skip
        self.kappa_ = float(hyper.kappa)
        bits = np.atleast_1d(np.asarray(mcmc.last_state.capped))
        check_draws(
            self.posterior_, self.sample_stats_, num_warmup=warmup,
            capped={c: [t for b_, t in REG_CAPPED_LOOPS.items() if int(b) & b_]
                    for c, b in enumerate(bits)},
            settings={k: getattr(self, k) for k in ("sampler", "step_size", "num_warmup")},
        )  # fmt: skip
        if not report.converged:
            warnings.warn(self._unconverged_message(report, monitor.points), ConvergenceWarning,
                          stacklevel=3)  # fmt: skip
        self.log_likelihood_ = self._train_log_likelihood(K)
        return self

    def _set_fitted(self, *, kernel_input, y_train, y_mean, y_scale, posterior, sample_stats,
                    n_iter, random_seed, **attrs):  # fmt: skip
        """Set the fitted attributes (both :meth:`fit` and :meth:`load` use it); ``attrs`` are
        further fitted attributes set as given (``run_report_``, ``kappa_``, ...)."""
        self.kernel_input_ = kernel_input
        self.kernel_names_ = list(kernel_input.names)
        self.y_train_ = np.asarray(y_train)
        self.y_mean_, self.y_scale_ = float(y_mean), float(y_scale)
        self.posterior_ = {k: np.asarray(v) for k, v in posterior.items()}
        self.sample_stats_ = {k: np.asarray(v) for k, v in sample_stats.items()}
        self.kernel_weights_ = self.posterior_["w"].mean(axis=(0, 1))
        self.epsilon_ = float(self.posterior_["eps"].mean()) * self.y_scale_
        self.noise_sd_ = float(np.mean(np.sqrt(self._noise_var_draws()))) * self.y_scale_
        self.n_iter_ = int(n_iter)
        self.random_seed_ = int(random_seed)
        set_fitted_attributes(self, attrs)
        return self

    def save(self, path) -> None:
        """Save the fitted regressor as one netCDF file (see :func:`bayesmkl.io.save`)."""
        io.save(self, path)

    @classmethod
    def load(cls, path, *, verify: bool = True) -> BM3KLRegressor:
        """Load a regressor written by :meth:`save`; its predictions equal the saved one's.

        :func:`bayesmkl.io.read` verifies the file's checksums, groups and draws and raises
        ``FileNotFoundError`` or a ``ValueError`` naming the file when it is missing, damaged,
        or holds another estimator; ``verify=False`` skips the checksums.
        """
        params, fitted = io.read(
            path, verify=verify, estimator="BM3KLRegressor", known_params=cls._get_param_names()
        )
        return cls(**params)._set_fitted(**fitted)

    def _unconverged_message(self, report, points) -> str:
        names = {"c[0]": "the loss scale c", "eps[0]": "the tube half-width epsilon"}
        worst = names.get(report.worst) or describe_quantity(
            report.worst, self.kernel_names_, np.array(["y"]), points, 1
        ).replace("decision value", "function value")
        return unconverged_message(
            report, worst, self.rhat_target, self.ess_target, who="BM3KLRegressor",
            watched="kernel weight, training function value, c and epsilon",
        )  # fmt: skip

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


def _noise_monitor(base):
    """``base`` (:func:`bayesmkl.estimators._fitting.run_monitor`) plus the draws of c and ε, in the
    layout
    of :meth:`ChainRunner.get_monitored <bayesmkl.sampler.runner.ChainRunner.get_monitored>`."""

    def monitor(draws):
        return {**base(draws), **{k: np.asarray(draws[k]) for k in ("c", "eps")}}

    monitor.points = base.points
    return monitor
