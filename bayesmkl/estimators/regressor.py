"""``BM3KLRegressor``: Bayesian max-margin multiple-kernel regression (docs/math.md §15).

A thin scikit-learn shell over :class:`~bayesmkl.estimators._base.BM3KLBase`, like
:class:`~bayesmkl.BM3KLClassifier`: the kernel pool builds ``K: (P, N, N)``, ``y`` is
standardised, :class:`~bayesmkl.sampler.regression.BM3KLReg` draws
``(e, w, a, b, λ⁺, λ⁻, ν, ς, c, ε)`` in the base's run of the chains, and the pure functions of
:mod:`bayesmkl.posterior.regression` turn the draws into predictive means, intervals, densities
and the training log-likelihood; :func:`bayesmkl.posterior.diagnostics.build_datatree` builds
the ArviZ DataTree.
"""

from __future__ import annotations

import numbers
import time

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from bayesmkl._docs import fill_doc
from bayesmkl.config import with_x64
from bayesmkl.estimators._base import BM3KLBase, in_block, join_blocks
from bayesmkl.estimators._fitting import (
    EXTRA_FIELDS,
    MAX_MONITORED_POINTS,
    check_landmark_params,
    check_precomputed_stack,
    describe_quantity,
    fit_kernel_input,
    run_monitor,
    unconverged_message,
)
from bayesmkl.estimators._params import LANDMARK_DOCS, REGRESSOR_CONSTRAINTS
from bayesmkl.model.regression import REG_PRIORS, RegHyper, unit_variance_kappa
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior import regression as _post
from bayesmkl.posterior.checks import check_degenerate_posterior, check_predictions, scaled_sd
from bayesmkl.sampler.regression import REG_CAPPED_LOOPS, BM3KLReg

__all__ = ["BM3KLRegressor"]

#: Largest fixed ε in standard deviations of y: 1e100 fits (measured), 1e300 overflows.
MAX_STD_EPSILON = 1e100


@fill_doc(LANDMARK_DOCS)
class BM3KLRegressor(RegressorMixin, BM3KLBase):
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
        β_a, second TPBN shape. Allowed: [0.02, 10].
    kappa : float, default=None
        κ, rate of the TPBN global Gamma prior: the prior scale of the sample weights' variances.
        ``None``: under ``prior="default"`` κ = N/‖K̄‖²_F for the mean training kernel K̄
        (:func:`~bayesmkl.model.regression.unit_variance_kappa`: a typical prior function then
        has the variance of the standardised y; about 3/N for the 16-kernel pool), under
        ``"paper"`` 1e-10. Allowed: [1e-200, 1e10].
    bias_prior_var : float, default=None
        τ, prior variance of the bias (on the standardised scale). Allowed: [1e-100, 1e10].
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
        Wall-clock budget in seconds of the whole :meth:`fit` (kernels, compilation, warm-up
        and sampling). A run whose budget ends during warm-up keeps warm-up draws; it says so
        (``run_report_.stopped_in == "warmup"``) and its predictions warn.
    {{n_landmarks}}
    {{landmark_method}}
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
        ``b: (chains, draws, 1)``, ``c, eps: (chains, draws)``; a landmark fit's a, ν, ς
        have M columns and its λ⁺, λ⁻ are not stored.
    sample_stats_ : dict of str → ndarray (chains, draws)
    log_likelihood_ : ndarray (chains, draws, N)
        log p(y_i | f_i, c, ε) of each training target per draw, in the units of ``y``
        (the DataTree's ``log_likelihood`` group, for ``arviz.loo``).
    run_report_ : bayesmkl.sampler.runlength.RunReport
    n_iter_ : int
    random_seed_ : int
    y_train_ : ndarray (N,)
    {{landmark_attributes}}
    train_index_ : ndarray (N,)
        Labels of the training rows: the index of ``X`` when it was a pandas ``DataFrame``
        (labels netCDF cannot hold as strings), else 0 … N−1; the DataTree's ``obs``
        coordinate.
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

    _parameter_constraints = REGRESSOR_CONSTRAINTS
    _inference_library = "bayesmkl (BM3KL regression Gibbs sampler in NumPyro)"
    _saved_as = "BM3KLRegressor"

    def __init__(
        self, kernels="bsvm16", *, prior="default", eta=None, alpha_a=None, beta_a=None,
        kappa=None, bias_prior_var=None, epsilon="auto", c_shape=2.0, c_rate=0.5,
        eps_shape=1.0, eps_rate=2.0, sampler="collapsed_log", step_size=0.01, n_leapfrog=10,
        num_warmup=300, num_samples="auto", num_chains=4, chain_method="vectorized",
        rhat_target=1.01, ess_target=400, max_samples=5000, max_time=None, n_landmarks="auto",
        landmark_method="kmeans++", kernel_dtype="float64", random_state=None, progress_bar=True,
        kernel_names=None,
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
        self.n_landmarks = n_landmarks
        self.landmark_method = landmark_method
        self.kernel_dtype = kernel_dtype
        self.random_state = random_state
        self.progress_bar = progress_bar
        self.kernel_names = kernel_names

    # validation ---------------------------------------------------------------------------

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
        check_landmark_params(self)
        if self.kernels == "precomputed":
            Xk = check_precomputed_stack(X, self.n_landmarks)
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
        started = time.perf_counter()  # max_time counts from here
        self._validate_params()
        kin, K, y = self._validate_fit_input(X, y)
        y_mean, y_scale, eps = self._standardise(y)
        ys = ((y - y_mean) / y_scale)[None, :]
        hyper = None

        def make_kernel():
            nonlocal hyper
            hyper = self._hyper(K)
            return BM3KLReg(
                *hyper, epsilon=eps, move=self.sampler,
                step_size=self.step_size, n_leapfrog=int(self.n_leapfrog),
                adapt_sweeps=int(self.num_warmup), landmarks=kin.n_landmarks is not None,
            )  # fmt: skip

        run = self._sample(make_kernel, (K, ys), K, hold=(K.shape, ys.shape, str(K.dtype),
                           "regression"), started=started)  # fmt: skip
        self._finish(run, kernel_input=kin, y_train=y, y_mean=y_mean, y_scale=y_scale,
                     kappa_=float(hyper.kappa),
                     train_index_=diagnostics.row_labels(X, len(y)))  # fmt: skip
        F = _post.function_values(self.posterior_, K)  # training function values, once
        default_kappa = unit_variance_kappa(K) if self.prior == "default" else hyper.kappa
        check_degenerate_posterior(
            F, who="BM3KLRegressor", ys=ys[0], hyper=hyper._asdict(),
            defaults={**REG_PRIORS["default"]._asdict(), "kappa": default_kappa}, stacklevel=4,
        )  # fmt: skip
        self.log_likelihood_ = _post.target_log_likelihood(
            F, self.posterior_, self.y_train_, self.y_mean_, self.y_scale_
        )
        return self

    def _run_monitor(self, K, seed):
        return _noise_monitor(run_monitor(K, seed))

    def _capped_loops(self, bits) -> list:
        return [t for b_, t in REG_CAPPED_LOOPS.items() if int(bits) & b_]

    def _draw_entries(self, P: int, C: int, N: int, M: int | None = None) -> int:
        """e and w (P each); a, ν, ς (C × M each, C = 1; M = N but for landmark fits) and
        λ⁺, λ⁻ (C × N each; not stored by a landmark fit); b, c, ε; the extra fields; the
        monitored function values (at most ``MAX_MONITORED_POINTS``)."""
        M = N if M is None else M
        monitored = min(N, MAX_MONITORED_POINTS) * C
        lam = 2 * C * N if M == N else 0
        return 2 * P + 3 * C * M + lam + C + 2 + len(EXTRA_FIELDS) + monitored

    def _after_fit_entries(self, C: int, N: int, S: int) -> int:
        """The function values, the log-likelihood and two temporaries of the noise law at the
        training points, per draw."""
        return 4 * C * N * S

    def _set_fitted(self, *, y_mean, y_scale, **fitted):
        """Set the fitted attributes (both :meth:`fit` and :meth:`load` use it): ``y_mean_``,
        ``y_scale_``, those of :meth:`BM3KLBase._set_fitted
        <bayesmkl.estimators._base.BM3KLBase._set_fitted>` (``kappa_`` among ``fitted``), and
        the derived ``epsilon_`` and ``noise_sd_``."""
        self.y_mean_, self.y_scale_ = float(y_mean), float(y_scale)
        super()._set_fitted(**fitted)
        self.epsilon_ = float(self.posterior_["eps"].mean()) * self.y_scale_
        noise_var = _post.noise_var_draws(self.posterior_)
        self.noise_sd_ = float(np.mean(np.sqrt(noise_var))) * self.y_scale_
        return self

    def _unconverged_message(self, report, points) -> str:
        names = {"c[0]": "the loss scale c", "eps[0]": "the tube half-width epsilon"}
        worst = names.get(report.worst) or describe_quantity(
            report.worst, self.kernel_names_, np.array(["y"]), points, 1
        ).replace("decision value", "function value")
        return unconverged_message(
            report, worst, self.rhat_target, self.ess_target, who="BM3KLRegressor",
            watched="kernel weight, training function value, c and epsilon",
        )  # fmt: skip

    # prediction ---------------------------------------------------------------------------

    @with_x64
    def function_draws(self, X) -> np.ndarray:
        """Per-draw function values f_s(x) in the units of y, ``(S, M)`` (S = chains·draws).

        Their mean is :meth:`predict`; their spread is the uncertainty of the regression
        function alone, without the noise.
        """
        return self._predict_rows(X, lambda mu: mu, axis=1)

    def _block_function_draws(self, Xv, rows: slice | None = None) -> np.ndarray:
        """Checked function draws ``(S, m)`` in the units of y of the rows ``rows`` of validated
        new data."""
        F = _post.function_values(self.posterior_, self._block_kernels(Xv, rows), block=rows)
        with np.errstate(over="ignore", invalid="ignore"):  # the check below says it
            mu = self.y_mean_ + self.y_scale_ * F
        return check_predictions(mu, "function values (in units of y)", block=rows)

    def _predict_rows(self, X, reduce, axis: int):
        """``reduce(mu)`` of the function draws ``mu: (S, m)`` (units of y) of new data ``X``,
        computed a block of test rows at a time (:meth:`_row_blocks`) and joined along ``axis``
        (the rows' axis of what ``reduce`` returns); one block (the usual case) runs the
        arithmetic of a single pass. Warns about the far rows once the values are checked (a row
        refused as non-finite is not also warned about)."""
        check_is_fitted(self, "posterior_")
        Xv, far = self._test_input(X)
        blocks = self._row_blocks(Xv)
        if len(blocks) == 1:
            out = reduce(self._block_function_draws(Xv))
        else:
            out = join_blocks(
                [in_block(reduce, self._block_function_draws(Xv, rows), rows) for rows in blocks],
                axis,
            )
        self._warn_far_rows(far)
        return out

    @with_x64
    def predict(self, X, return_std: bool = False):
        """Posterior predictive mean of y (the noise law is symmetric, so it is the mean of f).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        return_std : bool, default False
            Also return the posterior predictive standard deviation of y: the spread of f over
            draws and the noise together, √(Var_s f_s + mean_s s_y² Var(r | c_s, ε_s)).

        Returns
        -------
        mean : ndarray (M,)
        std : ndarray (M,)
            Only with ``return_std=True``.
        """
        return self._predict_rows(
            X,
            lambda mu: _post.predictive_mean_sd(mu, self.posterior_, self.y_scale_, return_std),
            axis=0,
        )

    @with_x64
    def predict_quantiles(self, X, quantiles=(0.05, 0.5, 0.95)) -> np.ndarray:
        """Quantiles of the posterior predictive of y: the mixture over draws of f_s(x) plus
        the ε-insensitive noise of that draw
        (:func:`~bayesmkl.posterior.regression.mixture_quantiles`).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        quantiles : float or sequence of float in (0, 1), default (0.05, 0.5, 0.95)

        Returns
        -------
        ndarray (M, Q), or (M,) for a single float
        """
        q = np.atleast_1d(np.asarray(quantiles, dtype=float))
        if q.ndim != 1 or not np.all((q > 0) & (q < 1)):
            raise ValueError(f"quantiles must be numbers in (0, 1); got {quantiles!r}")
        out = self._predict_rows(
            X, lambda mu: _post.predictive_quantiles(mu, self.posterior_, self.y_scale_, q), axis=0
        )
        return out[:, 0] if np.ndim(quantiles) == 0 else out

    def predict_interval(self, X, coverage: float = 0.9) -> np.ndarray:
        """Central posterior predictive interval of y with probability ``coverage``,
        ``(M, 2)`` (lower, upper): the (1 ∓ coverage)/2 quantiles of :meth:`predict_quantiles`."""
        real = isinstance(coverage, numbers.Real) and not isinstance(coverage, bool)
        if not (real and 0 < coverage < 1):
            raise ValueError(f"coverage must be a number in (0, 1); got {coverage!r}")
        lower, upper = (1 - coverage) / 2, (1 + coverage) / 2
        if not (0 < lower and upper < 1):  # within 1.1e-16 of 1, (1 + coverage)/2 rounds to 1.0
            raise ValueError(
                f"coverage={coverage!r} is too close to 1: the interval's quantiles "
                f"(1 - coverage)/2 = {lower!r} and (1 + coverage)/2 = {upper!r} must lie in "
                "(0, 1) in float64; use a coverage of at most 1 - 1e-15"
            )
        return self.predict_quantiles(X, [lower, upper])

    @with_x64
    def log_predictive_density(self, X, y) -> np.ndarray:
        """Pointwise log posterior predictive density of targets ``y`` at ``X``, ``(M,)``:
        log (1/S) Σ_s p(y | f_s(x), c_s, ε_s), in the units of y (mean it for a test set's
        mean log predictive density)."""
        mu = self.function_draws(X)
        y = np.asarray(y, dtype=float).reshape(-1)
        if y.shape[0] != mu.shape[1] or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be {mu.shape[1]} finite numbers; got shape {y.shape}")
        return _post.log_predictive_density(mu, self.posterior_, self.y_scale_, y)

    @with_x64
    def sample_predictive(self, X, random_state=0) -> np.ndarray:
        """One draw of y from the predictive per posterior draw, ``(S, M)`` (for CRPS,
        posterior predictive checks or custom summaries)."""
        mu = self.function_draws(X)
        rng = np.random.default_rng(random_state)
        return _post.sample_predictive(mu, self.posterior_, self.y_scale_, rng)

    # ArviZ --------------------------------------------------------------------------------

    def to_datatree(self):
        """The fit as an ArviZ ``xarray.DataTree``
        (:func:`~bayesmkl.posterior.diagnostics.build_datatree` without classes: ``posterior``
        with w, e on ``kernel``, a, lam_plus, lam_minus, nu, varsigma on ``obs`` (the index of a
        ``DataFrame`` X, ``train_index_``), b, c, eps, eps_standardised per draw;
        ``sample_stats``; ``observed_data``; and the ``log_likelihood`` group that
        ``arviz.loo`` and ``arviz.compare`` read, e.g. to compare kernel pools).

        ``eps``, the tube's half-width, is in units of y (its posterior mean is ``epsilon_``);
        every other posterior variable, and ``eps_standardised`` (the sampler's draws of ε), is
        on the standardised scale (y − y_mean) / y_scale, with ``y_mean`` and ``y_scale`` the
        root attributes. Each of the two ε variables says so in its attribute ``description``.
        """
        check_is_fitted(self, "posterior_")
        return diagnostics.build_datatree(
            diagnostics.regression_tree_posterior(self.posterior_, self.y_scale_),
            self.sample_stats_, kernel_names=self.kernel_names_,
            y=self.y_train_, log_likelihood=self.log_likelihood_,
            attrs={"inference_library": self._inference_library,
                   "sampler": str(self.sampler), "y_mean": self.y_mean_,
                   "y_scale": self.y_scale_},
            landmarks=self._landmark_coords(),
            obs=getattr(self, "train_index_", None), var_attrs=diagnostics.EPS_ATTRS,
        )  # fmt: skip


def _noise_monitor(base):
    """``base`` (:func:`bayesmkl.estimators._fitting.run_monitor`) plus the draws of c and ε, in the
    layout
    of :meth:`ChainRunner.get_monitored <bayesmkl.sampler.runner.ChainRunner.get_monitored>`."""

    def monitor(draws):
        return {**base(draws), **{k: np.asarray(draws[k]) for k in ("c", "eps")}}

    monitor.points = base.points
    return monitor
