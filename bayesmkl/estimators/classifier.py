"""``BM3KLClassifier``: a scikit-learn classifier around the BM3KL Gibbs sampler.

The estimator is a thin shell: :class:`~bayesmkl.kernels.input.KernelInput` builds the training
kernels ``K: (P, N, N)``, :func:`~bayesmkl.model.classification.signed_targets` the ±1 targets
``delta: (C, N)``,
:class:`~bayesmkl.sampler.sampler.BM3KL` (run by NumPyro's ``MCMC``) draws
``(e, w, a, b, λ, ν, ς)``, and :mod:`bayesmkl.posterior.predictive` turns draws and test kernels
``(P, M, N)``
into decision values and probabilities. Prediction, the calibration map and the DataTree are
:class:`~bayesmkl.posterior.classification.PosteriorMixin`; seeds, the compilation cache, validation
and the
run-length monitor :mod:`bayesmkl.estimators._fitting`. ArviZ output lives in
:mod:`bayesmkl.posterior.diagnostics`,
figures in :mod:`bayesmkl.plots`, files in :mod:`bayesmkl.io`.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpyro.infer import MCMC
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning

from bayesmkl import io
from bayesmkl.config import with_x64
from bayesmkl.estimators._fitting import (
    AUTO_CHUNK,
    EXTRA_FIELDS,
    RUN_CHUNK,
    describe_quantity,
    enable_compilation_cache,
    make_rng_key,
    resolve_hyper,
    run_monitor,
    set_fitted_attributes,
    unconverged_message,
    validate_fit_input,
    validate_params,
)
from bayesmkl.estimators._params import BM3KL_PARAMS
from bayesmkl.estimators._weights import MAX_SAMPLE_WEIGHT, effective_sample_weight
from bayesmkl.model.classification import signed_targets
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior.checks import check_draws
from bayesmkl.posterior.classification import PosteriorMixin
from bayesmkl.sampler import resume as _resume
from bayesmkl.sampler.chains import resolve_chain_method
from bayesmkl.sampler.runlength import sample_until_converged
from bayesmkl.sampler.runner import ChainRunner, hold_programs_for
from bayesmkl.sampler.sampler import BM3KL
from bayesmkl.sampler.state import capped_loops

__all__ = ["BM3KLClassifier", "EXTRA_FIELDS", "enable_compilation_cache", "make_rng_key"]


class BM3KLClassifier(PosteriorMixin, ClassifierMixin, BaseEstimator):
    """Bayesian maximum-margin multiple kernel learning (BM³KL; Du et al., ECML PKDD 2016).

    Learns a posterior over kernel weights ``w`` on the simplex (shared by all one-vs-all
    problems), sparse sample weights ``a`` and biases ``b`` with a Gibbs sampler whose
    kernel-weight move leaves the posterior exactly invariant (NumPyro MCMC kernel
    :class:`~bayesmkl.sampler.sampler.BM3KL`). Predictions average the (calibrated) predictive
    probabilities over the retained draws (docs/math.md §6).

    The default prior is not the paper's (``prior`` says why; the paper's is one argument
    away), nor is the default run: 4 chains sample until every kernel weight and every held-in
    decision value has R-hat ≤ 1.01 and bulk ESS ≥ 400 (or a budget is spent, which ``fit``
    reports). For the paper's literal run use ``prior="paper", sampler="paper",
    num_warmup=180, num_samples=20, num_chains=1`` (biased; docs/math.md §4.2).

    Parameters
    ----------
    kernels : {"bsvm16", "simplemkl", "precomputed"} or KernelPool, default="bsvm16"
        Base kernels. ``"bsvm16"``: 13 Gaussians σ ∈ {2^-6 … 2^6} and polynomials of degree 1–3 on
        all (standardised) features (paper Table 2). ``"simplemkl"``: Gaussians σ ∈ {2^-3 … 2^6}
        and polynomials 1–3 on all features and on each single feature, 13 (d + 1) kernels (paper
        Table 3). With three or more classes and the default prior, ``"bsvm16"`` is centred in
        feature space (``KernelPool(center=True)``): uncentred, its near-constant wide Gaussians
        carry the offsets and the fit underfits (``KernelPool.bsvm16()`` keeps it uncentred). A
        :class:`~bayesmkl.KernelPool` is copied and fitted as given. ``"precomputed"``:
        ``fit(K, y)`` takes Gram matrices ``(P, N, N)`` and ``predict(K_test)`` takes ``(P, M, N)``.
    prior : {"default", "paper"}, default="default"
        The named set of hyper-parameters (:data:`bayesmkl.model.classification.PRIORS`) from which
        every
        hyper-parameter left at ``None`` below is taken: ``"default"`` (η = 2, α_a = 1, β_a = 1,
        κ = 1, τ = 1, γ₀ = 1) or ``"paper"`` (η = 1, α_a = 1, β_a = 0.1, κ = 1e-10, τ = 1e-4,
        γ₀ = 100). On breast cancer, 4 chains of 300 + 500 sweeps reach a smallest bulk ESS
        (over the weights and held-in decision values) of 6.5 and R-hat 1.65 under the paper's
        prior, 253 and 1.025 under the default, at the same test accuracy
        (``benchmarks/results/prior_study.md``). ``fit`` refuses values outside the ranges of
        :mod:`bayesmkl.model.bounds`, where the sampler's arithmetic stays finite.
    eta : float or array (P,), default=None
        η, Dirichlet concentration of w (default prior: 2; paper: 1); above 1 it keeps w off
        the simplex's edges, where neighbouring widths form a slow ridge. Allowed: [0.02, 1e6].
    alpha_a : float, default=None
        α_a, first TPBN shape of the sample weights (both priors: 1, which uses the fast exact
        inverse-Gaussian update). Allowed: [0.02, 1e6].
    beta_a : float, default=None
        β_a, second TPBN shape; smaller gives sparser sample weights (default prior: 1; paper:
        0.1 in Table 2, CV over {1, 2, 3} in Table 3). Allowed: [0.02, 1e6].
    kappa : float, default=None
        κ, rate of the TPBN global Gamma prior (default prior: 1; paper: 1e-10, a near
        spike-and-slab over the support vectors). Allowed: [1e-200, 1e10].
    bias_prior_var : float, default=None
        τ, prior **variance** of each bias b_c (default prior: 1; paper: 1e-4, a variance by
        docs/math.md A2: biases ≈ 0, so near-constant kernels act as the bias). Allowed:
        [1e-100, 1e20].
    gamma0 : float, default=None
        γ₀, rate of the Exp(γ₀) prior on the augmentation variables λ (default prior: 1; paper:
        100 in Table 2, 500 and 10000 elsewhere); 0 gives the flat prior and the hinge
        likelihood. With λ integrated out, every training margin is pulled to 1 by a Laplace
        of scale 1/(1 + √(1 + 2γ₀)): 0.37 at γ₀ = 1, 0.07 at γ₀ = 100. Allowed: [0, 1e8].
    sampler : str, default="collapsed_log"
        Kernel-weight move (:mod:`bayesmkl.sampler.moves`; docs/math.md §4). Exact:
        ``"collapsed_log"`` (pairwise Gibbs on w, then HMC in log e on w with most sample
        weights and the biases integrated out), ``"collapsed"`` (its HMC in u = 2√e, whose wall
        at e = 0 made 0.1–0.35% of trajectories diverge), ``"gibbs"``, ``"exact"``,
        ``"rmala"``. Biased, for reproduction: ``"paper"`` (eqs. (7)–(8)) and ``"stable"``.
    step_size : float, default=0.01
        ε of the SGRHMC moves (paper: 0.01; 0.1 for Sonar in Table 2); initial value for the
        exact moves, which tune it during warm-up.
    n_leapfrog : int, default=10
        L, inner steps of the e move per Gibbs sweep (not stated in the paper; docs/math.md A6).
    nu_update : {"gibbs", "collapsed"}, default="gibbs"
        Update of the TPBN scales ν. ``"gibbs"``: ν | a, ς then ς | ν (docs/math.md §3.3).
        ``"collapsed"``: each ν_ci | w, λ, ν_{−ci} with a, b, ς integrated out
        (:mod:`bayesmkl.sampler.tpbn`; exact, ν truncated at 1e8; about twice the cost per
        sweep; measured under the paper's prior in benchmarks/results/nu_collapsed.md).
    num_warmup : int, default=300
        Gibbs sweeps discarded, during which the exact moves tune step size and mass matrix
        (paper: 200 − 20).
    num_samples : int or "auto", default="auto"
        Sweeps kept per chain (paper: 20). ``"auto"``: sample, checking after 250 sweeps
        and then whenever the ESS so far projects the target, until ``rhat_target`` and
        ``ess_target`` are met on the kernel weights and on the held-in decision values (for
        two classes these have the same rank-normalised R-hat and ESS as the calibrated
        probabilities, a monotone map of them), or until ``max_samples`` or ``max_time`` is
        reached, which ``fit`` reports with a ``ConvergenceWarning``.
    num_chains : int, default=4
        Independent chains (paper: 1). R-hat needs at least 2.
    chain_method : {"sequential", "parallel", "vectorized"}, default="vectorized"
        How the chains run. ``"vectorized"``: one program for all chains (the fastest on few
        cores). ``"sequential"``: one after the other. ``"parallel"``: chain i on JAX device
        i mod D (:class:`~bayesmkl.sampler.chains.DeviceChains`), with the draws of
        ``"sequential"`` up to rounding; host CPU devices need ``XLA_FLAGS=
        --xla_force_host_platform_device_count=D`` set before JAX is imported, and with one
        device it runs sequentially and warns. ``"vectorized"`` draws differ from the other
        two (batched arithmetic rounds differently; the chains are the same in distribution).
    rhat_target : float, default=1.01
        Largest rank-normalised split R-hat accepted by ``num_samples="auto"``.
    ess_target : float, default=400
        Smallest bulk ESS (all chains together) accepted by ``num_samples="auto"``.
    max_samples : int, default=5000
        Budget of post-warm-up sweeps per chain for ``num_samples="auto"`` (measured: ≤ 1,500
        on 7 data sets, 4,450 on glass; ``benchmarks/results/convergence.md``).
    max_time : float or None, default=None
        Wall-clock budget in seconds for ``num_samples="auto"`` (warm-up included, calibration
        refits excluded; each refit runs as many sweeps as the main fit used).
    binary_mode : {"single", "ova"}, default="single"
        Two-class encoding (docs/math.md A3): one classifier (C = 1) or two one-vs-all classifiers.
    decision : {"proba", "mean_f"}, default="proba"
        Rule of :meth:`predict`: argmax of the posterior predictive probability
        (docs/math.md A4 (a)) or argmax of the posterior-mean decision value (A4 (c)).
    calibration : {"loo", "cv", None} or int, default="loo"
        Probabilities: per draw, softmax of calibrated logits — ``(0, T·f)`` for the single
        binary classifier, ``T_c·f_c + β_c`` (a temperature and an intercept per class)
        otherwise — with the map fitted at the end of :meth:`fit` on held-out decision draws.
        ``"loo"``: PSIS-LOO-weighted draws of the one posterior, no refit
        (:func:`bayesmkl.posterior.loo.loo_calibrator`); under the default prior its test log-loss
        matched the 3-fold map's within 0.013 on 7 data sets
        (``benchmarks/results/calibration_loo.md``); it warns when more than 30% of the points
        have Pareto k̂ > 0.7, and under ``prior="paper"``. ``"cv"`` (3 folds) or an int
        k ≥ 2: out-of-fold draws of k refits (cost: k extra fits on (k−1)/k of the data; see
        :mod:`bayesmkl.posterior.calibration`); needed by :meth:`loo_kfold`.
        ``None``: the paper's raw rule softmax(ψ(f)) (docs/math.md §6), which is nearly 0/1 at
        γ0 = 100. Applied at prediction time: ``set_params(calibration=None)`` on a calibrated
        fit gives the raw rule without refitting.
    kernel_dtype : {"float64", "float32"} or None, default="float64"
        Storage dtype of the kernels (float32 halves memory; the sampler computes in float64).
        ``None`` keeps a user pool's own dtype.
    random_state : None, int, RandomState or Generator, default=None
        Seed of the sampler; the same int gives identical draws.
    progress_bar : bool, default=True
        Show one progress bar over warm-up and sampling, with the latest worst R-hat and
        smallest bulk ESS.
    class_weight : None, "balanced" or dict, default=None
        Class weights with scikit-learn's semantics (``"balanced"``: ``N / (K · count(class))``),
        multiplied into ``fit``'s ``sample_weight`` by
        :func:`bayesmkl.estimators._weights.effective_sample_weight` (see :meth:`fit` for what a
        weight
        means in this model).
    kernel_names : sequence of str, optional
        Names of precomputed kernels (default ``K0, K1, ...``) for the DataTree and the plots;
        an error with a pool, which names its kernels itself.
    warm_start : bool, default=False
        Continue the previous fit's chains from their final state (no new warm-up, adaptation
        frozen, each chain's own key: 500 + 500 sweeps equal one run of 1000) and append
        ``num_samples`` sweeps per chain (``"auto"``: until the targets hold on all draws;
        ``max_samples``/``max_time`` budget this call). Fitted attributes cover the combined
        draws; the calibration map is re-used while ``calibration`` is unchanged. Needs the
        same data and posterior and chain parameters (else ``ValueError``); without a previous
        fit it fits afresh; a model read by :meth:`load` cannot be continued. See the user guide.

    Attributes
    ----------
    classes_ : ndarray (K,)
        Class labels.
    kernel_weights_ : ndarray (P,)
        Posterior mean of w.
    gamma0_ : float
        γ0 of the fit; the raw prediction rule uses it, so ``set_params(gamma0=...)`` after
        fitting changes nothing until the next ``fit``.
    kernel_names_ : list of str, length P
    n_features_in_ : int
        Number of features (not set with ``kernels="precomputed"``).
    feature_names_in_ : ndarray of str
        Set when ``X`` has string column names.
    posterior_ : dict of str → ndarray
        Draws with a chain axis: ``w, e: (chains, draws, P)``, ``a, lam, nu, varsigma:
        (chains, draws, C, N)``, ``b: (chains, draws, C)``. C = 1 for two classes with
        ``binary_mode="single"``, else C = K.
    sample_stats_ : dict of str → ndarray (chains, draws)
        ``acceptance_rate``, ``diverging``, ``potential_energy``, ``step_size``.
    n_iter_ : int
        Gibbs sweeps per chain (``num_warmup`` + the sampling sweeps actually run).
    run_report_ : bayesmkl.sampler.runlength.RunReport
        How the run ended: ``converged``, ``stopped_by`` (``"targets"``, ``"max_samples"``,
        ``"max_time"`` or ``"num_samples"`` for a fixed length), ``num_samples``,
        ``thinning`` of the stored draws, ``rhat_max``, ``ess_bulk_min``, the ``worst``
        monitored quantity and ``seconds``.
    random_seed_ : int
        The integer seed actually used (useful when ``random_state`` is None).
    y_train_ : ndarray (N,)
        Training labels (stored in the DataTree's ``observed_data``).
    kernel_input_ : KernelInput
        The fitted pool (or the precomputed shape) used to build test kernels.
    calibrator_ : bayesmkl.posterior.calibration.Calibrator or None
        The fitted map: a binary classifier's temperature T (β = 0 unless an older saved
        model had one); ``class_temperatures`` and ``class_intercepts`` for C ≥ 2 classifiers
        (empty in an older saved model: the shared T); ``None`` with ``calibration=None``.
    oof_log_predictive_ : ndarray (N,) or None
        Calibrated log predictive of each training label under the fold fit that held it out
        (see :meth:`loo_kfold`).
    log_likelihood_ : ndarray (chains, draws, N)
        Per draw, the log probability of each training label under the fitted rule (the
        DataTree's ``log_likelihood`` group).

    See Also
    --------
    bayesmkl.posterior.diagnostics.build_datatree, bayesmkl.plots, bayesmkl.io

    Examples
    --------
    >>> from bayesmkl import BM3KLClassifier
    >>> from bayesmkl.datasets import load_demo
    >>> X, y, _ = load_demo()
    >>> clf = BM3KLClassifier(random_state=0, progress_bar=False).fit(X[:200], y[:200])
    ... # doctest: +SKIP
    >>> clf.predict_proba(X[200:205]).shape  # doctest: +SKIP
    (5, 2)
    """

    _param_defaults = BM3KL_PARAMS

    def __init__(
        self, kernels="bsvm16", *, prior="default", eta=None, alpha_a=None, beta_a=None,
        kappa=None, bias_prior_var=None, gamma0=None, sampler="collapsed_log", step_size=0.01,
        n_leapfrog=10, nu_update="gibbs", num_warmup=300, num_samples="auto", num_chains=4,
        chain_method="vectorized", rhat_target=1.01, ess_target=400, max_samples=5000,
        max_time=None, binary_mode="single", decision="proba", calibration="loo",
        kernel_dtype="float64", random_state=None, progress_bar=True, class_weight=None,
        kernel_names=None, warm_start=False,
    ):  # fmt: skip
        self.kernels = kernels
        self.prior = prior
        self.eta = eta
        self.alpha_a = alpha_a
        self.beta_a = beta_a
        self.kappa = kappa
        self.bias_prior_var = bias_prior_var
        self.gamma0 = gamma0
        self.sampler = sampler
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.nu_update = nu_update
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.chain_method = chain_method
        self.rhat_target = rhat_target
        self.ess_target = ess_target
        self.max_samples = max_samples
        self.max_time = max_time
        self.binary_mode = binary_mode
        self.decision = decision
        self.calibration = calibration
        self.kernel_dtype = kernel_dtype
        self.random_state = random_state
        self.progress_bar = progress_bar
        self.class_weight = class_weight
        self.kernel_names = kernel_names
        self.warm_start = warm_start

    # validation ---------------------------------------------------------------------------

    def _validate_params(self):
        validate_params(self)

    def _validate_fit_input(self, X, y):
        """Validated ``(kernel input, K (P, N, N), classes, codes, y)``; sets ``n_features_in_``."""
        return validate_fit_input(self, X, y)

    # fit ----------------------------------------------------------------------------------

    @with_x64
    def fit(self, X, y, sample_weight=None):
        """Run the BM3KL Gibbs sampler.

        Parameters
        ----------
        X : array (N, d), or array (P, N, N) with ``kernels="precomputed"``
            Training features (raw; the pool standardises them) or Gram matrices.
        y : array (N,)
            Class labels of any type (at least two classes).
        sample_weight : array (N,) or float, optional
            Non-negative finite per-sample weights ϖ, multiplied by ``class_weight``. Point i's
            pseudo-likelihood factor is raised to the power ϖ_i (all its one-vs-all terms):
            the likelihood is tempered point by point, exactly, in every move (the data
            augmentation stays exact with the slack ζ replaced by ϖζ; see
            :mod:`bayesmkl.model.likelihood`). As in :class:`~bayesmkl.baselines.BM3KLMAP`, a zero
            weight removes the point's likelihood term but keeps its sample weight a_i and
            kernel column in the model, and an integer weight is *not* the same as repeating
            the row (a repeat would add a second a_i with its own prior). The weights also
            weight the cross-fitted calibration's log-loss; ``log_likelihood_`` stays the
            unweighted per-point predictive.

        Returns
        -------
        self
        """
        self._validate_params()
        kin, K, classes, codes, y = self._validate_fit_input(X, y)
        sw = effective_sample_weight(
            y, sample_weight, self.class_weight, max_weight=MAX_SAMPLE_WEIGHT
        )
        delta = signed_targets(codes, len(classes), self.binary_mode)
        data = (K, delta) if sw is None else (K, delta, sw)
        fingerprint = _resume.data_fingerprint(K, delta, np.asarray(y), sw)
        prev = _resume.previous(self, fingerprint) if self.warm_start else None
        if prev is None:
            key, seed = make_rng_key(self.random_state)
        else:  # continue the stored chains: their own keys, no new warm-up
            seed = prev.seed
        enable_compilation_cache()  # a no-op when on already, or off by $BAYESMKL_CACHE_DIR
        hold_programs_for((K.shape, delta.shape, str(K.dtype), sw is None))  # bounded memory
        warmup = 0 if prev is not None else int(self.num_warmup)
        hyper = resolve_hyper(self)
        kernel = BM3KL(
            *hyper, move=self.sampler, step_size=self.step_size, n_leapfrog=int(self.n_leapfrog),
            nu_update=self.nu_update, adapt_sweeps=int(self.num_warmup),
        )  # fmt: skip
        auto = self.num_samples == "auto"
        chain_method = resolve_chain_method(self.chain_method, int(self.num_chains))
        n_fixed = None if auto else int(self.num_samples)
        # chunks of RUN_CHUNK sweeps; the last never runs past the budget (sample_until_converged)
        budget = int(self.max_samples) if auto else n_fixed
        chunk = min(RUN_CHUNK, max(1, warmup + budget))
        monitor = run_monitor(K, seed)
        if chain_method == "vectorized":  # compiled once per configuration (inference/runner)
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
        draws, extra, report = sample_until_converged(
            mcmc, key, data, monitor, num_warmup=warmup, extra_fields=EXTRA_FIELDS,
            rhat_target=float(self.rhat_target), ess_target=float(self.ess_target),
            max_samples=budget,
            max_time=self.max_time, resume=earlier, check_every=AUTO_CHUNK, fixed=not auto,
            max_kept=1_000 if auto else 2**62,  # a fixed length keeps every draw, as asked
            progress=bool(self.progress_bar) and isinstance(chain_method, str),
        )  # fmt: skip
        self._resume = _resume.new_point(self, mcmc.last_state, fingerprint, seed)
        self._set_fitted(
            kernel_input=kin, classes=classes, y_train=y, posterior=draws,
            sample_stats=diagnostics.sample_stats_from_extra(extra),
            n_iter=int(self.num_warmup) + int(report.num_samples), random_seed=seed,
            run_report_=report,
        )  # fmt: skip
        bits = np.atleast_1d(np.asarray(mcmc.last_state.capped))
        check_draws(
            self.posterior_, self.sample_stats_, num_warmup=int(self.num_warmup),
            capped={c: capped_loops(b) for c, b in enumerate(bits)},
            settings={k: getattr(self, k) for k in ("sampler", "step_size", "num_warmup")},
        )  # fmt: skip
        if not report.converged:
            worst = describe_quantity(
                report.worst, self.kernel_names_, classes, monitor.points, delta.shape[0]
            )
            msg = unconverged_message(report, worst, self.rhat_target, self.ess_target)
            warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        reuse = prev is not None and prev.calibration == self.calibration
        self._fit_calibration(K, y, sw, reuse_map=reuse)
        return self

    def _set_fitted(
        self, *, kernel_input, classes, y_train, posterior, sample_stats, n_iter, random_seed,
        **attrs,
    ):  # fmt: skip
        """Set the fitted attributes; the one place both :meth:`fit` and :meth:`load` use.

        ``attrs`` are further fitted attributes set as given (names must end in ``_``: e.g.
        ``run_report_``, ``calibrator_``, ``n_features_in_``). ``kernel_names_``,
        ``kernel_weights_`` (the posterior mean of w) and ``gamma0_`` (the γ0 the draws were
        made with, which the raw prediction rule uses) are derived here.
        """
        self.gamma0_ = float(resolve_hyper(self).gamma0)
        self.kernel_input_ = kernel_input
        self.kernel_names_ = list(kernel_input.names)
        self.classes_ = np.asarray(classes)
        self.y_train_ = np.asarray(y_train)
        self.posterior_ = {k: np.asarray(v) for k, v in posterior.items()}
        self.sample_stats_ = {k: np.asarray(v) for k, v in sample_stats.items()}
        self.kernel_weights_ = self.posterior_["w"].mean(axis=(0, 1))
        self.n_iter_ = int(n_iter)
        self.random_seed_ = int(random_seed)
        set_fitted_attributes(self, attrs)
        return self

    def save(self, path) -> None:
        """Save the fitted classifier as one netCDF file (see :func:`bayesmkl.io.save`)."""
        io.save(self, path)

    @classmethod
    def load(cls, path, *, verify: bool = True) -> BM3KLClassifier:
        """Load a classifier written by :meth:`save`.

        Its predictions equal those of the saved classifier. The file's checksums, groups and
        draws are verified by :func:`bayesmkl.io.read`, which raises ``FileNotFoundError`` or
        a ``ValueError`` naming the file when it is missing, damaged (a format-2 file without
        its checksums included) or not a saved model; ``verify=False`` skips the checksums.
        """
        params, fitted = io.read(path, verify=verify, known_params=cls._get_param_names())
        return cls(**params)._set_fitted(**fitted)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
