"""``BM3KLClassifier``: a scikit-learn classifier around the BM3KL Gibbs sampler.

The estimator is a thin shell over :class:`~bayesmkl.estimators._base.BM3KLBase`, which runs
the chains: :class:`~bayesmkl.kernels.input.KernelInput` builds the training kernels
``K: (P, N, N)``, :func:`~bayesmkl.model.classification.signed_targets` the ±1 targets
``delta: (C, N)``, :class:`~bayesmkl.sampler.sampler.BM3KL` draws ``(e, w, a, b, λ, ν, ς)``,
and the pure functions of :mod:`bayesmkl.posterior` turn draws and kernels into decision values
(computed once per fit at the training points), the calibration map, probabilities and the
ArviZ DataTree. Figures live in :mod:`bayesmkl.plots`, files in :mod:`bayesmkl.io`.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from bayesmkl._docs import fill_doc
from bayesmkl.config import with_x64
from bayesmkl.estimators import _resume
from bayesmkl.estimators._base import SAMPLING_SHARE, BM3KLBase, in_block, join_blocks
from bayesmkl.estimators._fitting import (
    EXTRA_FIELDS,
    MAX_MONITORED_POINTS,
    describe_quantity,
    enable_compilation_cache,
    make_rng_key,
    resolve_hyper,
    unconverged_message,
    validate_fit_input,
)
from bayesmkl.estimators._params import CLASSIFIER_CONSTRAINTS, LANDMARK_DOCS
from bayesmkl.estimators._validation import validate_labels
from bayesmkl.estimators._weights import MAX_SAMPLE_WEIGHT, effective_sample_weight
from bayesmkl.exceptions import DegeneratePosteriorWarning
from bayesmkl.model.classification import PRIORS, signed_targets
from bayesmkl.posterior import calibration as _calibration
from bayesmkl.posterior import classification as _post
from bayesmkl.posterior import diagnostics
from bayesmkl.posterior import loo as _loo
from bayesmkl.posterior.checks import (
    DECISION_WARN_LIMIT,
    check_decision_scale,
    check_degenerate_posterior,
    check_predictions,
    extreme_rows,
    warn_extreme_rows,
)
from bayesmkl.posterior.predictive import mean_decision, posterior_decision_values
from bayesmkl.sampler.sampler import BM3KL
from bayesmkl.sampler.state import capped_loops

__all__ = ["BM3KLClassifier", "EXTRA_FIELDS", "enable_compilation_cache", "make_rng_key"]


@fill_doc(LANDMARK_DOCS)
class BM3KLClassifier(ClassifierMixin, BM3KLBase):
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
        γ₀ = 100). The chains mix far faster under the default prior than under the paper's,
        at the same test accuracy (docs: design decisions). ``fit`` refuses values outside the
        ranges of
        :mod:`bayesmkl.model.bounds`, where the sampler's arithmetic stays finite.
    eta : float or array (P,), default=None
        η, Dirichlet concentration of w (default prior: 2; paper: 1); above 1 it keeps w off
        the simplex's edges, where neighbouring widths form a slow ridge. Allowed: [0.02, 1e6].
    alpha_a : float, default=None
        α_a, first TPBN shape of the sample weights (both priors: 1, which uses the fast exact
        inverse-Gaussian update). Allowed: [0.02, 1e6].
    beta_a : float, default=None
        β_a, second TPBN shape; smaller gives sparser sample weights (default prior: 1; paper:
        0.1 in Table 2, CV over {1, 2, 3} in Table 3). Allowed: [0.02, 10].
    kappa : float, default=None
        κ, rate of the TPBN global Gamma prior (default prior: 1; paper: 1e-10, a near
        spike-and-slab over the support vectors). Allowed: [1e-200, 1e10].
    bias_prior_var : float, default=None
        τ, prior **variance** of each bias b_c (default prior: 1; paper: 1e-4, a variance by
        docs/math.md A2: biases ≈ 0, so near-constant kernels act as the bias). Allowed:
        [1e-100, 1e10].
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
        sweep).
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
        Budget of post-warm-up sweeps per chain for ``num_samples="auto"``.
    max_time : float or None, default=None
        Wall-clock budget in seconds of the whole :meth:`fit`: kernels, compilation, warm-up,
        sampling and calibration (the cross-fitted refits share the main run's budget). A run
        whose budget ends during warm-up keeps warm-up draws; it says so
        (``run_report_.stopped_in == "warmup"``) and its predictions warn.
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
        (:func:`bayesmkl.posterior.loo.loo_calibrator`), which under the default prior is close
        to the 3-fold map; it warns when more than 30% of the points
        have Pareto k̂ > 0.7, and under ``prior="paper"``. ``"cv"`` (3 folds) or an int
        k ≥ 2: out-of-fold draws of k refits (cost: k extra fits on (k−1)/k of the data; see
        :mod:`bayesmkl.posterior.calibration`); needed by :meth:`loo_kfold`.
        ``None``: the paper's raw rule softmax(ψ(f)) (docs/math.md §6), which is nearly 0/1 at
        γ0 = 100. Applied at prediction time: ``set_params(calibration=None)`` on a calibrated
        fit gives the raw rule without refitting.
    {{n_landmarks}}
    {{landmark_method}}
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
        (chains, draws, C, N)`` (a landmark fit's ``a, nu, varsigma``: ``(chains, draws, C,
        M)``, and no ``lam``), ``b: (chains, draws, C)``. C = 1 for two classes with
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
    {{landmark_attributes}}
    train_index_ : ndarray (N,)
        Labels of the training rows: the index of ``X`` when it was a pandas ``DataFrame``
        (labels netCDF cannot hold as strings), else 0 … N−1; the DataTree's ``obs``
        coordinate.
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

    _parameter_constraints = CLASSIFIER_CONSTRAINTS
    _inference_library = "bayesmkl (BM3KL Gibbs sampler in NumPyro)"
    _saved_as = "BM3KLClassifier"

    def __init__(
        self, kernels="bsvm16", *, prior="default", eta=None, alpha_a=None, beta_a=None,
        kappa=None, bias_prior_var=None, gamma0=None, sampler="collapsed_log", step_size=0.01,
        n_leapfrog=10, nu_update="gibbs", num_warmup=300, num_samples="auto", num_chains=4,
        chain_method="vectorized", rhat_target=1.01, ess_target=400, max_samples=5000,
        max_time=None, binary_mode="single", decision="proba", calibration="loo",
        n_landmarks="auto", landmark_method="kmeans++", kernel_dtype="float64", random_state=None,
        progress_bar=True, class_weight=None, kernel_names=None, warm_start=False,
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
        self.n_landmarks = n_landmarks
        self.landmark_method = landmark_method
        self.kernel_dtype = kernel_dtype
        self.random_state = random_state
        self.progress_bar = progress_bar
        self.class_weight = class_weight
        self.kernel_names = kernel_names
        self.warm_start = warm_start

    # validation ---------------------------------------------------------------------------

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
        started = time.perf_counter()  # max_time counts from here
        self._validate_params()
        kin, K, classes, codes, y = self._validate_fit_input(X, y)
        sw = effective_sample_weight(
            y, sample_weight, self.class_weight, max_weight=MAX_SAMPLE_WEIGHT
        )
        delta = signed_targets(codes, len(classes), self.binary_mode)
        data = (K, delta) if sw is None else (K, delta, sw)
        fingerprint = _resume.data_fingerprint(K, delta, np.asarray(y), sw)
        prev = _resume.previous(self, fingerprint) if self.warm_start else None

        def make_kernel():
            return BM3KL(
                *resolve_hyper(self), move=self.sampler, step_size=self.step_size,
                n_leapfrog=int(self.n_leapfrog), nu_update=self.nu_update,
                adapt_sweeps=int(self.num_warmup), landmarks=kin.n_landmarks is not None,
            )  # fmt: skip

        run = self._sample(
            make_kernel, data, K, hold=(K.shape, delta.shape, str(K.dtype), sw is None),
            prev=prev, started=started,
        )  # fmt: skip
        self._resume = _resume.new_point(self, run.last_state, fingerprint, run.seed)
        self._finish(run, kernel_input=kin, classes=classes, y_train=y,
                     train_index_=diagnostics.row_labels(X, len(y)))  # fmt: skip
        reuse = prev is not None and prev.calibration == self.calibration
        # the calibration refits share what is left of the budget
        deadline = self._deadline(started, share=SAMPLING_SHARE)
        self._fit_calibration(K, y, sw, reuse_map=reuse, deadline=deadline)
        return self

    def _sampling_share(self) -> float:
        """The part of ``max_time`` for the main chains: with cross-fitted calibration its K
        refits run as many sweeps on (K − 1)/K of the points, about (K − 1)²/K times the main
        run's cost, and share the budget with it."""
        if self.calibration in (None, "loo"):
            return SAMPLING_SHARE
        k = _calibration.DEFAULT_FOLDS if self.calibration == "cv" else int(self.calibration)
        return SAMPLING_SHARE / (1.0 + (k - 1) ** 2 / k)

    def _capped_loops(self, bits) -> list:
        return capped_loops(bits)

    def _draw_entries(self, P: int, C: int, N: int, M: int | None = None) -> int:
        """e and w (P each); a, ν, ς (C × M each, M = N but for landmark fits) and λ (C × N;
        not stored by a landmark fit); b (C); the extra fields; the monitored decision values
        (at most ``MAX_MONITORED_POINTS`` points × C)."""
        M = N if M is None else M
        monitored = min(N, MAX_MONITORED_POINTS) * C
        lam = C * N if M == N else 0
        return 2 * P + 3 * C * M + lam + C + len(EXTRA_FIELDS) + monitored

    def _after_fit_entries(self, C: int, N: int, S: int) -> int:
        """Per draw: the decision values of the points held at once (all N, or the
        calibration map's subset and blocks of as many,
        :func:`~bayesmkl.posterior.classification.map_points`) and their copy for the map
        (2 × C each), the (log-)probabilities and their temporaries there (3 × K each), and
        the log-likelihood and LOO weights at all N points (2 N). A cross-fitted map
        (``calibration="cv"`` or an int) holds its folds' held-out draws at all N points."""
        n_classes = 2 if C == 1 else C
        held = _post.map_size(N, S * C) if self.calibration in (None, "loo") else N
        return S * ((2 * C + 3 * n_classes) * held + 2 * N)

    def _unconverged_message(self, report, points) -> str:
        n_classifiers = self.posterior_["b"].shape[-1]
        worst = describe_quantity(
            report.worst, self.kernel_names_, self.classes_, points, n_classifiers
        )
        return unconverged_message(report, worst, self.rhat_target, self.ess_target)

    def _set_fitted(self, *, classes, **fitted):
        """Set the fitted attributes (both :meth:`fit` and :meth:`load` use it): ``classes_``
        and ``gamma0_`` (the γ0 the draws were made with, which the raw prediction rule uses),
        then those of :meth:`BM3KLBase._set_fitted
        <bayesmkl.estimators._base.BM3KLBase._set_fitted>`."""
        self.gamma0_ = float(resolve_hyper(self).gamma0)
        self.classes_ = np.asarray(classes)
        return super()._set_fitted(**fitted)

    def _fit_calibration(self, K, y, sample_weight=None, reuse_map=False, deadline=None):
        """Calibration map and training log-likelihood (called once, at the end of :meth:`fit`).

        The decision values of every draw at the training points are computed once, here, and
        serve both; when they would number more than
        :data:`~bayesmkl.posterior.classification.AFTER_FIT_ENTRIES`, the ``"loo"`` map is
        fitted on a random subset of the points
        (:func:`~bayesmkl.posterior.classification.map_points`, fixed by the fit's seed) and
        what is kept at every point is computed a block of points at a time. Sets
        ``calibrator_`` (``None`` for ``calibration=None``),
        ``oof_log_predictive_`` (the calibrated held-out log predictive of each training point)
        and ``log_likelihood_`` ``(chains, draws, N)``: per draw, the log probability of each
        training label under the fitted rule. ``K`` are the training kernels ``(P, N, N)``;
        ``sample_weight`` the effective weights of :meth:`fit` (or ``None``): the fold refits
        use them and the map minimises the weighted held-out log-loss. ``reuse_map``: keep
        ``calibrator_`` and ``oof_log_predictive_`` of the fit that a ``warm_start`` fit
        continued (only ``log_likelihood_`` is recomputed).
        """
        _, codes = validate_labels(y, len(y))
        N, C = len(codes), self.posterior_["b"].shape[-1]
        draws_shape = self.posterior_["w"].shape[:2]
        per_point = int(np.prod(draws_shape)) * C
        delta = signed_targets(codes, len(self.classes_), self.binary_mode)
        sw = None if sample_weight is None else np.asarray(sample_weight)

        def decisions(rows):  # (S, n, C) at the training points ``rows``
            return np.asarray(posterior_decision_values(self.posterior_, K[:, rows]))

        # the map's points: all of them, or a subset when their draws are too many (then
        # what is kept at every point is computed again in blocks below)
        fit_rows = _post.map_points(N, per_point, seed=self.random_seed_)
        blocks = _post.training_blocks(N, per_point)
        rows = slice(None) if fit_rows is None else fit_rows
        F = decisions(rows)  # (S, n, C), once
        check_decision_scale(F, training=True)  # drifted draws: that warning says it all
        degenerate = not np.max(np.abs(F)) > DECISION_WARN_LIMIT and check_degenerate_posterior(
            F, who="BM3KLClassifier", hyper=resolve_hyper(self)._asdict(),
            defaults=PRIORS["default"]._asdict(),
        )  # fmt: skip
        # what the main fit has warned about is not warned again for its calibration refits
        report = getattr(self, "run_report_", None)
        already = ((DegeneratePosteriorWarning,) if degenerate else ()) + (
            (ConvergenceWarning,) if report is not None and not report.converged else ()
        )
        if not reuse_map:
            self.calibrator_ = None
            self.oof_log_predictive_ = None
        log_w = None
        if self.calibration == "loo" and not reuse_map:
            self.calibrator_, log_w = _post.loo_map(
                F, codes[rows], delta[:, rows], gamma0=self.gamma0_,
                sample_weight=None if sw is None else sw[rows],
                always_warn=self.prior == "paper",
            )  # fmt: skip
        elif self.calibration is not None and not reuse_map:
            n_folds = _calibration.DEFAULT_FOLDS if self.calibration == "cv" else self.calibration
            draws, index = _calibration.crossfit_decision_draws(
                self, K, y, n_folds=int(n_folds), seed=self.random_seed_, deadline=deadline,
                sample_weight=sample_weight, already=already,
                n_landmarks=self.kernel_input_.n_landmarks,
            )  # fmt: skip
            self.calibrator_, self.oof_log_predictive_ = _post.crossfit_calibration(
                draws, index, codes, gamma0=self.gamma0_, sample_weight=sample_weight
            )
        # what is kept at every training point: from F when it holds them all, else a block
        # of points at a time
        loo = log_w is not None
        if loo:
            self.oof_log_predictive_ = np.empty(N)
        log_lik = np.empty((int(np.prod(draws_shape)), N))
        for block in [slice(None)] if fit_rows is None else blocks:
            if fit_rows is not None:
                F = decisions(block)
                if loo:
                    log_w = _post.loo_weights(
                        F, delta[:, block], gamma0=self.gamma0_,
                        sample_weight=None if sw is None else sw[block],
                    )[0]  # fmt: skip
            if loo:
                self.oof_log_predictive_[block] = _post.loo_predictive(
                    F, codes[block], log_w, self.calibrator_
                )
            log_lik[:, block] = _post.label_log_likelihood(
                F, codes[block], (-1,), gamma0=self.gamma0_, calibrator=self._calibrator()
            )  # fmt: skip
        self.log_likelihood_ = log_lik.reshape(*draws_shape, N)

    # ------------------------------------------------------------------------------------
    # prediction
    # ------------------------------------------------------------------------------------

    @with_x64
    def decision_draws(self, X) -> np.ndarray:
        """Per-draw decision values f.

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``

        Returns
        -------
        ndarray (S, M, C)
            S = chains · draws, chain-major.

        Raises ``NonFinitePredictionError`` for non-finite values and warns
        (``ExtremeDecisionWarning``) for rows whose ``|f|`` exceeds 1e8 (the margin is at 1), and
        for rows whose features or test kernels lie far outside the training data
        (:meth:`~bayesmkl.kernels.input.KernelInput.far_rows`).
        """
        return self._predict_rows(X, lambda F: F, axis=1)

    def _prediction_width(self) -> int:
        """max(C, K): decision values have C columns, probabilities K."""
        return max(self.posterior_["b"].shape[-1], len(self.classes_))

    def _block_decisions(self, Xv, rows: slice | None = None) -> np.ndarray:
        """Checked decision values ``(S, m, C)`` of the rows ``rows`` of validated new data."""
        F = posterior_decision_values(self.posterior_, self._block_kernels(Xv, rows))
        return check_predictions(F, "decision values", posterior=self.posterior_, block=rows)

    def _predict_rows(self, X, reduce, axis: int):
        """``reduce(F)`` of the decision values ``F: (S, m, C)`` of new data ``X``, computed a
        block of test rows at a time (:meth:`_row_blocks`) and joined along ``axis`` (the rows'
        axis of what ``reduce`` returns). One block (the usual case) runs the arithmetic of a
        single pass; warns about far rows and extreme decision values once, numbering the rows of
        the whole input."""
        Xv, far = self._test_input(X)
        blocks = self._row_blocks(Xv)
        if len(blocks) == 1:
            F = self._block_decisions(Xv)
            self._warn_far_rows(far)
            rows, peak = extreme_rows(F)
            warn_extreme_rows(rows, peak)
            return reduce(F)
        outs, big, peak = [], [], 0.0
        for rows in blocks:
            F = self._block_decisions(Xv, rows)
            r, p = extreme_rows(F)
            big.append(r + rows.start)
            peak = max(peak, p)
            outs.append(in_block(reduce, F, rows))
            del F
        self._warn_far_rows(far)
        warn_extreme_rows(np.concatenate(big), peak)
        return join_blocks(outs, axis)

    def _calibrator(self):
        """The calibration map in use: ``None`` with ``calibration=None`` (the raw rule), else
        ``calibrator_`` (refused when the fit has none)."""
        if self.calibration is None:
            return None
        cal = getattr(self, "calibrator_", None)
        if cal is None:
            raise ValueError(
                f"calibration={self.calibration!r} but this classifier was fitted without a "
                "calibration map; refit it, or set_params(calibration=None) for the raw rule"
            )
        return cal

    def _proba_draws_of(self, F) -> np.ndarray:
        """Per-draw probabilities ``(S, M, K)`` of decision draws ``F: (S, M, C)`` (checked)."""
        return _post.proba_draws(F, gamma0=self.gamma0_, calibrator=self._calibrator())

    @with_x64
    def proba_draws(self, X) -> np.ndarray:
        """Per-draw predictive probabilities ``(S, M, K)`` (each row sums to 1).

        Calibrated (see ``calibration``), or with ``calibration=None`` the raw σ(ψ(f)) /
        softmax(ψ(f)) of docs/math.md §6.
        """
        return self._predict_rows(X, self._proba_draws_of, axis=1)

    @with_x64
    def predict_proba(self, X, return_mcse: bool = False):
        """Posterior predictive class probabilities (docs/math.md §6, P1).

        Parameters
        ----------
        X : array (M, d), or array (P, M, N) with ``kernels="precomputed"``
        return_mcse : bool, default False
            Also return the Monte Carlo standard error of each probability: the error of the
            posterior mean that comes from using finitely many, autocorrelated draws
            (sd / √ESS with ArviZ's ESS of the mean over the chains; Vehtari et al. 2021). A
            decision that turns on a difference smaller than a few MCSE needs a longer run.

        Returns
        -------
        proba : ndarray (M, K)
            Mean over draws of the per-draw probabilities (:meth:`proba_draws`: calibrated, or
            the normalised pseudo-likelihood with ``calibration=None``); rows sum to 1.
        mcse : ndarray (M, K)
            Only with ``return_mcse=True``. 0 where a probability does not vary over draws;
            nan with a single draw per chain.
        """

        def reduce(F):
            P = self._proba_draws_of(F)
            proba = P.mean(axis=0)
            if not return_mcse:
                return proba
            return proba, _post.probability_mcse(P, self.posterior_["w"].shape[0])

        return self._predict_rows(X, reduce, axis=0)

    @with_x64
    def predict_log_proba(self, X) -> np.ndarray:
        """Log of :meth:`predict_proba`, by log-sum-exp over draws (finite, no log of 0).

        Returns
        -------
        ndarray (M, K)
        """

        def reduce(F):
            lp = _post.log_proba_draws(F, gamma0=self.gamma0_, calibrator=self._calibrator())
            return _calibration.log_predictive(lp, axis=0)

        return self._predict_rows(X, reduce, axis=0)

    @with_x64
    def decision_function(self, X) -> np.ndarray:
        """Posterior-mean decision values.

        Returns
        -------
        ndarray (M,) for the single binary classifier (positive = ``classes_[1]``), else
        (M, C).
        """
        F = self._predict_rows(X, lambda F: np.asarray(mean_decision(F)), axis=0)
        return F[:, 0] if F.shape[1] == 1 else F

    @with_x64
    def predict(self, X) -> np.ndarray:
        """Predicted labels ``(M,)``.

        ``decision="proba"``: ``classes_[argmax predict_proba(X)]`` (docs/math.md P2);
        ``decision="mean_f"``: argmax of the mean decision value (sign for one binary
        classifier).
        """
        if self.decision == "mean_f":
            F = self.decision_function(X)
            idx = (F > 0).astype(int) if F.ndim == 1 else np.argmax(F, axis=1)
        else:
            idx = np.argmax(self.predict_proba(X), axis=1)
        return self.classes_[idx]

    # ------------------------------------------------------------------------------------
    # ArviZ
    # ------------------------------------------------------------------------------------

    def to_datatree(self, posterior_predictive: bool = False, *, X=None, random_state=0):
        """The fit as an ArviZ ``xarray.DataTree`` (see :mod:`bayesmkl.posterior.diagnostics`).

        Parameters
        ----------
        posterior_predictive : bool, default False
            Add ``posterior_predictive.y``: per draw, replicated training labels drawn from
            that draw's predictive probabilities at the training points (those of
            :meth:`proba_draws`: calibrated unless ``calibration=None``; for ArviZ's posterior
            predictive checks, e.g. ``arviz_plots.plot_ppc_pava``, ``plot_ppc_rootogram``).
            Costs one prediction of the N training points (the training kernels are rebuilt
            from the pool).
        X : array (N, d), or array (P, N, N) with ``kernels="precomputed"``, optional
            The training data, needed with precomputed kernels (the fit keeps no kernels);
            with a pool the stored training points are used when ``X`` is None.
        random_state : int, numpy Generator or None, default 0
            Seed of the replicated labels.

        Returns
        -------
        xarray.DataTree
            ``posterior`` (w, e with a ``kernel`` dimension; a, b, lam, nu, varsigma with
            ``class``/``obs``; a landmark fit stores no lam), ``sample_stats``
            (acceptance_rate, diverging, lp, step_size), ``observed_data`` (y),
            ``log_likelihood`` (y: per draw, the log probability of each training label under
            the fitted rule, calibrated unless ``calibration=None`` at fit time), so
            ``arviz.loo`` and ``arviz.compare`` run on it,
            and optionally ``posterior_predictive`` (y). ArviZ's PSIS treats the
            ``log_likelihood`` values as the posterior's own likelihood factors; the sampler's
            posterior holds the pseudo-likelihood instead, and the estimate is optimistic (see
            :meth:`loo_kfold`). With ``calibration=None`` ``arviz.loo`` usually fails ("All
            tail values are the same"); :meth:`loo` says why (the group's attribute
            ``psis_loo`` too). ``sample_stats`` has no ``energy`` (see
            :mod:`bayesmkl.posterior.diagnostics`), so ``arviz.plot_energy`` does not apply.
        """
        check_is_fitted(self, "posterior_")
        tree = diagnostics.build_datatree(
            self.posterior_,
            self.sample_stats_,
            kernel_names=self.kernel_names_,
            classes=self.classes_,
            y=self.y_train_,
            log_likelihood=getattr(self, "log_likelihood_", None),
            attrs={"inference_library": self._inference_library, "sampler": str(self.sampler)},
            landmarks=self._landmark_coords(),
            obs=getattr(self, "train_index_", None),
        )
        if not posterior_predictive:
            return tree
        return diagnostics.add_posterior_predictive(
            tree, self._train_proba_draws(X), self.classes_, random_state=random_state
        )

    @with_x64
    def _train_proba_draws(self, X=None) -> np.ndarray:
        """Per-draw probabilities of the training points, ``(chains, draws, N, K)``."""
        pool = self.kernel_input_.pool
        if X is not None:
            P = self.proba_draws(X)
        elif pool is not None:
            F = check_predictions(
                posterior_decision_values(self.posterior_, pool.train_kernels()),
                "decision values",
                posterior=self.posterior_,
            )
            P = self._proba_draws_of(F)
        else:
            raise ValueError(
                "with kernels='precomputed' the fit keeps no training kernels: pass them, "
                "to_datatree(posterior_predictive=True, X=K_train) with K_train (P, N, N)"
            )
        if P.shape[1] != self.kernel_input_.n_train:
            raise ValueError(
                f"X has {P.shape[1]} points but the model was trained on "
                f"{self.kernel_input_.n_train}: posterior predictive checks need the training data"
            )
        chains, draws = self.posterior_["w"].shape[:2]
        return P.reshape((chains, draws) + P.shape[1:])

    def loo(self, **kwargs):
        """PSIS-LOO of the training labels, ``arviz.loo(clf.to_datatree())``, or a refusal.

        Refuses (``ValueError``, with the reason and what to do) where PSIS cannot use the
        log-likelihood and ``arviz.loo`` itself fails with "All tail values are the same": with
        ``calibration=None`` most training points have probability 1 to machine precision in
        every draw (see :func:`bayesmkl.posterior.diagnostics.loo_problem`). Where it runs it is
        optimistic for BM3KL; prefer :meth:`loo_kfold`. ``kwargs`` go to ``arviz.loo``.

        Returns
        -------
        arviz_stats.ELPDData
        """
        return super().loo(**kwargs)

    def loo_kfold(self):
        """K-fold cross-validated ELPD of the training labels, as an ArviZ result.

        Reuses the cross-fitting of ``calibration`` (no new fits): ``elpd_i`` is the calibrated
        log predictive of training point i under the fold fit that held it out. Pass several
        to ``arviz.compare({"pool A": clf_a.loo_kfold(), "pool B": clf_b.loo_kfold()})`` to
        compare kernel pools or hyper-parameters.

        Prefer it to ``arviz.loo(clf.to_datatree())``, which runs but is optimistic for BM3KL:
        under the paper's prior PSIS reweights posterior draws in which every training point
        is fitted at margin ≈ 1, so it barely moves (on Heart: PSIS elpd/N = −0.06, k-fold
        −0.42, test log-loss 0.40; see :mod:`bayesmkl.posterior.calibration`).

        Returns
        -------
        arviz_stats.ELPDDataLOOKFold
        """
        check_is_fitted(self, "posterior_")
        if getattr(self, "oof_log_predictive_", None) is None or self.calibrator_.n_folds < 2:
            raise ValueError(
                "loo_kfold needs a fit calibrated by cross-fitting (calibration='cv' or an int); "
                "with calibration='loo' the PSIS-LOO log predictives are in oof_log_predictive_"
            )
        return _loo.kfold_elpd(
            self.oof_log_predictive_, self.log_likelihood_, self.calibrator_.n_folds
        )

    @with_x64
    def predict_datatree(self, X):
        """:meth:`to_datatree` plus a ``predictions`` group: per-draw probabilities of ``X``.

        Returns
        -------
        xarray.DataTree
            ``predictions.proba`` has dims ``(chain, draw, obs, class)``; ``obs`` is the index
            of ``X`` when it is a pandas ``DataFrame``.
        """
        P = self.proba_draws(X)
        chains, draws = self.posterior_["w"].shape[:2]
        P = P.reshape((chains, draws) + P.shape[1:])
        obs = diagnostics.row_labels(X, P.shape[2])  # a DataFrame's index
        return diagnostics.add_predictions(self.to_datatree(), P, self.classes_, obs)
