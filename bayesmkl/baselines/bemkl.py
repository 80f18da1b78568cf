"""BEMKL: Bayesian efficient multiple kernel learning by variational Bayes (Gönen, ICML 2012).

The estimator; the model, its mean-field updates and the evidence lower bound are in
:mod:`bayesmkl.baselines._bemkl_vb` (docs/math.md §9).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_ndtr
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayesmkl.baselines._base import KERNEL_NAMES, KERNELS, POSITIVE, MKLClassifierBase
from bayesmkl.baselines._bemkl_vb import _VB, _Prior, elbo, truncated_normal_moments
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.estimators._validation import MAX_TIME, NO_VALIDATION, Boolean, Interval

__all__ = ["BEMKL", "truncated_normal_moments", "elbo"]


@shared_doc
class BEMKL(MKLClassifierBase):
    """Bayesian efficient MKL (Gönen 2012), mean-field variational Bayes; ``sparse=True``: sBEMKL.

    Binary problems use the binary model (C = 1). For K ≥ 3 classes the multi-output model is
    fitted on the one-vs-rest ±1 targets: per-class sample weights, intermediate outputs and biases,
    **shared** kernel weights e (the repository's multilabel variant; the reference repository has
    no separate multiclass trainer). ``predict_proba`` then normalises the per-class probabilities
    ``p_c = pos_c / (pos_c + neg_c)`` over classes, and ``predict`` is its argmax.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification (see :mod:`bayesmkl.kernels.input`); ``"precomputed"`` takes
        ``fit(K (P, N, N), y)`` and ``predict(K_test (P, M, N))``.
    sparse : bool, default=False
        ``False``: (α_ω, β_ω) = (1, 1) (BEMKL). ``True``: (α_ω, β_ω) = (1e−10, 1e+10) (sBEMKL, the
        reference demo's sparsity setting). Ignored for a hyper-parameter given explicitly.
    n_iter : int, default=200
        Variational sweeps (fixed number, as in the reference code).
    sigma_g : float, default=0.1
        Standard deviation of the intermediate outputs ``g``.
    margin : float, default=1.0
        ν in the truncation ``y f > ν``.
    alpha_lambda, beta_lambda, alpha_gamma, beta_gamma : float, default=1.0
        Gamma (shape, scale) hyper-parameters of λ and γ.
    alpha_omega, beta_omega : float or None, default=None
        Of ω; ``None`` takes the value implied by ``sparse``.
    random_state : int, RandomState or None
        Seeds the random initialisation of ``a``, ``G`` and ``f`` (as in the reference code).
    max_time : float or None, default=None
        Wall-clock budget in seconds, checked between sweeps; stopping on it keeps the last
        variational posterior (``elbo_`` then has one entry per sweep done) and issues a
        ``ConvergenceWarning`` that names the limit.
    {{kernel_names}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Posterior mean ``E[e]``. Real-valued: weights may be negative (the prior on e is a
        zero-mean Gaussian), and they are not normalised.
    kernel_weights_cov_ : ndarray (P, P)
        Posterior covariance of e.
    dual_coef_ : ndarray (C, N)
        ``E[a_c]``; the latent score's mean is ``E[f_c(x)] = E[b_c] + Σ_m E[e_m] E[a_c]ᵀ k_m(x)``
        (:meth:`predictive_moments`). :meth:`decision_function` returns predictive log-odds
        instead, so that it ranks like :meth:`predict_proba`.
    intercept_ : ndarray (C,)
        ``E[b_c]``.
    elbo_ : ndarray ``(n_iter_,)``
        Evidence lower bound after every sweep (non-decreasing).
    n_iter_ : int
        Sweeps done (``n_iter`` unless ``max_time`` stopped the fit).
    vb_state_, vb_prior_
        The full variational posterior and hyper-parameters (for :func:`elbo`).
    classes_ : ndarray
    kernel_names_ : list of str
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "sparse": [Boolean()],
        "n_iter": [Interval("int", 1, None, closed="left")],
        "sigma_g": POSITIVE,
        "margin": [Interval("real", 0, None, closed="left")],
        "alpha_lambda": POSITIVE,
        "beta_lambda": POSITIVE,
        "alpha_gamma": POSITIVE,
        "beta_gamma": POSITIVE,
        "alpha_omega": [None, *POSITIVE],
        "beta_omega": [None, *POSITIVE],
        "random_state": NO_VALIDATION,  # check_random_state
        "max_time": MAX_TIME,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, sparse=False, n_iter=200, sigma_g=0.1, margin=1.0,
        alpha_lambda=1.0, beta_lambda=1.0, alpha_gamma=1.0, beta_gamma=1.0, alpha_omega=None,
        beta_omega=None, random_state=None, max_time=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.sparse = sparse
        self.n_iter = n_iter
        self.sigma_g = sigma_g
        self.margin = margin
        self.alpha_lambda = alpha_lambda
        self.beta_lambda = beta_lambda
        self.alpha_gamma = alpha_gamma
        self.beta_gamma = beta_gamma
        self.alpha_omega = alpha_omega
        self.beta_omega = beta_omega
        self.random_state = random_state
        self.max_time = max_time
        self.kernel_names = kernel_names

    def _prior(self) -> _Prior:
        a_om = self.alpha_omega
        b_om = self.beta_omega
        if a_om is None:
            a_om = 1e-10 if self.sparse else 1.0
        if b_om is None:
            b_om = 1e10 if self.sparse else 1.0
        values = {
            "alpha_lambda": self.alpha_lambda,
            "beta_lambda": self.beta_lambda,
            "alpha_gamma": self.alpha_gamma,
            "beta_gamma": self.beta_gamma,
            "alpha_omega": a_om,
            "beta_omega": b_om,
            "sigma_g": self.sigma_g,
        }
        values = {name: float(val) for name, val in values.items()}
        return _Prior(margin=float(self.margin), **values)

    @shared_doc
    def fit(self, X, y, sample_weight=None):
        """Fit the variational posterior.

        Parameters
        ----------
        {{fit_X_y_unweighted}}

        Returns
        -------
        self

        Raises
        ------
        NotImplementedError
            For any ``sample_weight``. BEMKL's likelihood is the hard truncation ``y f > ν`` of
            a latent Gaussian score, handled by conjugate truncated-normal factors; a weighted
            (powered) likelihood ``Φ(·)^{s_i}`` has no such factor, and weighting each point's
            whole local block (g_i, f_i) instead is a different model whose weights are not
            those of scikit-learn. Rather than silently ignoring weights, BEMKL refuses them.
        """
        if sample_weight is not None:
            raise NotImplementedError(
                "BEMKL does not support sample_weight: its truncated-normal variational "
                "updates have no exact weighted-likelihood form (see BEMKL.fit). Use BM3KLMAP "
                "or an SVM-based baseline (AverageMKL, SimpleMKL, LpMKL, ...) for weighted data"
            )
        return super().fit(X, y)

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        self.vb_prior_ = self._prior()
        vb = _VB(K, Y, self.vb_prior_)
        s = vb.init(check_random_state(self.random_state))
        budget = Budget("BEMKL", None, self.max_time, unit="sweeps")
        bounds = []
        for _ in range(self.n_iter):
            vb.sweep(s)
            bounds.append(vb.elbo(s))
            if len(bounds) < self.n_iter and budget.out_of_time():
                budget.warn(len(bounds), f"n_iter={self.n_iter} sweeps")
                break
        C = Y.shape[0]
        self.vb_state_ = s
        self.elbo_ = np.asarray(bounds)
        self.n_iter_ = len(bounds)
        self.kernel_weights_ = s.be_mu[C:].copy()
        self.kernel_weights_cov_ = s.be_sig[C:, C:].copy()
        self.dual_coef_ = s.a_mu.copy()
        self.intercept_ = s.be_mu[:C].copy()

    def selected_kernels(self, rel_threshold: float = 1e-3) -> int:
        """Number of kernels with ``|E[e_m]| > rel_threshold · max_m |E[e_m]|`` (e may be < 0)."""
        check_is_fitted(self, "kernel_weights_")
        a = np.abs(self.kernel_weights_)
        return int(np.sum(a > rel_threshold * a.max()))

    def predictive_moments(self, X):
        """Predictive mean and variance of the latent score ``f``.

        ``g_{c,m}(x) ~ N(E[a_c]ᵀ k_m(x), σ_g² + k_m(x)ᵀ Σ_{a_c} k_m(x))`` and, with (b_c, e)
        independent of g under q, the moments of ``f_c = b_c + eᵀg_c + ε`` are
        ``E f_c = [1, E g_c]ᵀ E[(b_c, e)]`` (the same as ``E[b_c] + Σ_m E[e_m] E[a_c]ᵀ k_m(x)``)
        and ``Var f_c = 1 + [1, E g_c]ᵀ Σ_{(b_c,e)} [1, E g_c] + Σ_m E[e_m²] Var g_{c,m}``. (The
        reference code omits the last term.)

        Parameters
        ----------
        X : array (M, d), or (P, M, N) with ``kernels="precomputed"``

        Returns
        -------
        mean, var : ndarray (M, C)
            ``C = 1`` for a binary problem, else one column per class (one-vs-rest).
        """
        check_is_fitted(self, "vb_state_")
        s = self.vb_state_
        Kt = self._test_kernels(X)  # (P, M, N)
        P, M, _ = Kt.shape
        C = s.a_mu.shape[0]
        Ee = s.be_mu[C:]
        Eee_diag = Ee**2 + np.diag(s.be_sig)[C:]
        mean = np.empty((M, C))
        var = np.empty((M, C))
        sg2 = self.vb_prior_.sigma_g**2
        for c in range(C):
            g_mu = Kt @ s.a_mu[c]  # (P, M)
            Kt2 = Kt.reshape(P * M, -1)
            g_var = sg2 + np.sum((Kt2 @ s.a_sig[c]) * Kt2, axis=1).reshape(P, M)
            idx = np.r_[c, C + np.arange(P)]
            S = s.be_sig[np.ix_(idx, idx)]
            H = np.vstack([np.ones((1, M)), g_mu])  # (1 + P, M)
            mean[:, c] = s.be_mu[idx] @ H
            var[:, c] = 1.0 + np.einsum("im,ij,jm->m", H, S, H) + Eee_diag @ g_var
        return mean, var

    def _log_pos_neg(self, X):
        """``log pos`` and ``log neg`` per task, ``(M, C)`` each."""
        mean, var = self.predictive_moments(X)
        sd = np.sqrt(var)
        nu = self.vb_prior_.margin
        return log_ndtr((mean - nu) / sd), log_ndtr((-nu - mean) / sd)

    def decision_function(self, X):
        """Predictive log-odds ``log(pos/neg)`` of the positive class of each task.

        ``(M,)`` for a binary problem (> 0 ⇔ ``predict`` gives ``classes_[1]``), ``(M, C)``
        otherwise (argmax = ``predict``). Rank-consistent with :meth:`predict_proba`; the
        posterior mean of the latent score itself is :meth:`predictive_moments`.
        """
        log_pos, log_neg = self._log_pos_neg(X)
        F = log_pos - log_neg
        return F[:, 0] if F.shape[1] == 1 else F

    def predict_proba(self, X):
        """Class probabilities ``(M, n_classes)``; rows lie in [0, 1] and sum to 1.

        Binary: ``[1 − p, p]`` with ``p = pos/(pos + neg)``, ``pos = 1 − Φ((ν − μ_f)/σ_f)``,
        ``neg = Φ((−ν − μ_f)/σ_f)`` (μ_f, σ_f² from :meth:`predictive_moments`; the reference
        code divides by the variance, here by the standard deviation). Multiclass: the
        one-vs-rest ``p_c`` normalised to sum to 1.
        """
        log_pos, log_neg = self._log_pos_neg(X)
        d = log_pos - log_neg
        if d.shape[1] == 1:  # both columns from the log-odds: no cancellation in 1 − p
            return np.hstack([expit(-d), expit(d)])
        p = expit(d)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Labels: ``argmax`` of :meth:`predict_proba` (for a binary problem: ``E f > 0``)."""
        check_is_fitted(self, "vb_state_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
