"""BEMKL: Bayesian efficient multiple kernel learning by variational Bayes (Gönen, ICML 2012).

Model (spec ``bm3kl.md`` §9; learnt from the public MATLAB code, re-derived and re-implemented
here). Tasks c = 1..C (C = 1 for a binary problem, one-vs-rest for K ≥ 3 classes), training
points i = 1..N, kernels m = 1..P, ``K_m: (N, N)`` with columns ``k_{m,i}``. Gamma(α, β) uses
shape α and **scale** β (mean αβ), as the reference code does.

=========================================  ================================================
λ_{c,i} ~ Gamma(α_λ, β_λ)                   ARD precisions of the sample weights
a_c ~ N(0, diag(λ_c)⁻¹)                     sample weights, ``a: (C, N)``
g_{c,m,i} ~ N(a_cᵀ k_{m,i}, σ_g²)           per-kernel outputs, ``G: (C, P, N)``
γ_c ~ Gamma(α_γ, β_γ),  b_c ~ N(0, γ_c⁻¹)    biases
ω_m ~ Gamma(α_ω, β_ω),  e_m ~ N(0, ω_m⁻¹)    kernel weights, **shared by all tasks**; real-valued
f_{c,i} ~ N(b_c + eᵀ g_{c,i}, 1)            latent scores
y_{c,i} f_{c,i} > ν                         the labels (ν = ``margin``; a hard truncation)
=========================================  ================================================

Multiclass choice: the repository's multi-output (multilabel) variant applied to one-vs-rest
targets, i.e. per-task ``λ_c, a_c, G_c, γ_c, b_c, f_c`` and one shared ``(ω, e)``; ``q(b, e)`` is a
joint (C + P)-dimensional Gaussian. With C = 1 it is exactly the binary model.

Mean-field posterior ``q = q(λ) q(a) q(G) q(γ) q(ω) q(b, e) q(f)``: Gamma, Gaussian (``q(a_c)``
full covariance, ``q(g_{c,·,i})`` Gaussian with a covariance ``Σ_G = (I/σ_g² + E[eeᵀ])⁻¹`` shared by
all i and c), and truncated normals ``q(f_{c,i}) ∝ N(f; b_c + eᵀg_{c,i}, 1) 1(y_{c,i} f > ν)``.
Each update is the exact coordinate-ascent optimum of its factor (order λ, a, G, γ, ω, (b, e), f),
so the evidence lower bound (ELBO) can only increase; it is computed after every sweep
(:func:`elbo`; the terms are derived in ``_VB.elbo``) and stored in ``elbo_``.

ELBO = E_q[log p(λ, a, G, γ, b, ω, e, f, y)] + H[q], with ``log p(y | f) = 0`` on the support of
q(f). Differences from the reference code's bound: its p(G | a) term omits the ``1/σ_g²`` factors
and its q(f) entropy uses ``½(log 2π + Var f) + log Z`` instead of the truncated-normal entropy
``½ log(2πe) + log Z + α φ(α)/(2Z)``; both are corrected here (the corrected bound is monotone,
which is tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import digamma, expit, gammaln, log_ndtr
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayesmkl._validation import check_int, check_positive
from bayesmkl.baselines._base import MKLClassifierBase
from bayesmkl.baselines._budget import Budget, check_max_time

__all__ = ["BEMKL", "truncated_normal_moments", "elbo"]

_LOG2PI = float(np.log(2.0 * np.pi))


def truncated_normal_moments(o: np.ndarray, s: np.ndarray, margin: float):
    """Moments of ``f ~ N(o, 1)`` truncated to ``s f > margin`` (``s = ±1``), element-wise.

    Parameters
    ----------
    o : ndarray
        Means of the untruncated normal.
    s : ndarray
        Signs ±1 (labels), broadcastable to ``o``.
    margin : float
        ν.

    Returns
    -------
    mean, var, log_z, entropy : ndarrays of the shape of ``o``
        With ``t = s o − ν``, ``Z = Φ(t)`` and the inverse Mills ratio ``r = φ(t)/Φ(t)``:
        ``E f = o + s r``, ``Var f = 1 − r (r + t)``,
        ``H = ½ log(2πe) + log Z − t r / 2`` (computed in log space, stable for t ≪ 0).
    """
    t = s * o - margin
    log_z = log_ndtr(t)
    r = np.exp(-0.5 * t * t - 0.5 * _LOG2PI - log_z)
    mean = o + s * r
    var = np.maximum(1.0 - r * (r + t), 1e-300)
    entropy = 0.5 * (_LOG2PI + 1.0) + log_z - 0.5 * t * r
    return mean, var, log_z, entropy


@dataclass
class _Prior:
    alpha_lambda: float
    beta_lambda: float
    alpha_gamma: float
    beta_gamma: float
    alpha_omega: float
    beta_omega: float
    sigma_g: float
    margin: float


@dataclass
class _State:
    """Variational parameters (C tasks, N points, P kernels)."""

    lam_a: float  # shape of every q(λ_{c,i})
    lam_b: np.ndarray  # (C, N) scales
    a_mu: np.ndarray  # (C, N)
    a_sig: np.ndarray  # (C, N, N)
    a_logdet: np.ndarray  # (C,) log det Σ_a
    G_mu: np.ndarray  # (C, P, N)
    G_sig: np.ndarray  # (P, P)
    gam_a: float
    gam_b: np.ndarray  # (C,)
    om_a: float
    om_b: np.ndarray  # (P,)
    be_mu: np.ndarray  # (C + P,) = [b; e]
    be_sig: np.ndarray  # (C + P, C + P)
    f_mu: np.ndarray  # (C, N)
    f_var: np.ndarray  # (C, N)
    f_logz: np.ndarray  # (C, N)
    f_ent: np.ndarray  # (C, N)


def _gamma_expect_log_prior(a, b, a0, b0):
    """``E_q[log Gamma(x; a0, scale b0)]`` for ``q = Gamma(a, scale b)``."""
    elog = digamma(a) + np.log(b)
    return (a0 - 1.0) * elog - a * b / b0 - gammaln(a0) - a0 * np.log(b0)


def _gamma_entropy(a, b):
    return a + np.log(b) + gammaln(a) + (1.0 - a) * digamma(a)


def _gauss_logdet(S: np.ndarray) -> float:
    c, _ = cho_factor(S, lower=True)
    return float(2.0 * np.sum(np.log(np.diag(c))))


class _VB:
    """Coordinate-ascent variational Bayes for BEMKL; pure numpy, state in :class:`_State`."""

    def __init__(self, K: np.ndarray, Y: np.ndarray, prior: _Prior):
        P, N, _ = K.shape
        # Kf[j, m·N + i] = K_m[j, i]: every contraction below becomes one matrix product
        self.Kf = np.ascontiguousarray(K.transpose(1, 0, 2)).reshape(N, P * N)
        self.Y = Y  # (C, N) ±1
        self.pr = prior
        self.P, self.N, self.C = P, N, Y.shape[0]
        self.KK = self.Kf @ self.Kf.T  # Σ_m K_m K_mᵀ  (N, N)

    # -- helpers -------------------------------------------------------------------------------
    def _proj(self, a_mu: np.ndarray) -> np.ndarray:
        """``[c, m, i] = a_cᵀ k_{m,i}``: (C, P, N)."""
        return (a_mu @ self.Kf).reshape(self.C, self.P, self.N)

    def _KG(self, G_mu: np.ndarray) -> np.ndarray:
        """``Σ_m K_m g_{c,m,·}``: (C, N)."""
        return G_mu.reshape(self.C, self.P * self.N) @ self.Kf.T

    def _be_moments(self, s: _State):
        C = self.C
        Eb = s.be_mu[:C]
        Ee = s.be_mu[C:]
        Ebb = Eb**2 + np.diag(s.be_sig)[:C]  # (C,)
        Eee = np.outer(Ee, Ee) + s.be_sig[C:, C:]  # (P, P)
        Eeb = Ee[:, None] * Eb[None, :] + s.be_sig[C:, :C]  # (P, C)
        return Eb, Ee, Ebb, Eee, Eeb

    # -- initialisation (as in the reference code) ---------------------------------------------
    def init(self, rng) -> _State:
        C, N, P, pr = self.C, self.N, self.P, self.pr
        sgn = np.sign(self.Y)
        f_mu = (np.abs(rng.standard_normal((C, N))) + pr.margin) * sgn
        s = _State(
            lam_a=pr.alpha_lambda + 0.5,
            lam_b=np.full((C, N), pr.beta_lambda),
            a_mu=rng.standard_normal((C, N)),
            a_sig=np.broadcast_to(np.eye(N), (C, N, N)).copy(),
            a_logdet=np.zeros(C),
            G_mu=(np.abs(rng.standard_normal((C, P, N))) + pr.margin) * sgn[:, None, :],
            G_sig=np.eye(P),
            gam_a=pr.alpha_gamma + 0.5,
            gam_b=np.full(C, pr.beta_gamma),
            om_a=pr.alpha_omega + 0.5,
            om_b=np.full(P, pr.beta_omega),
            be_mu=np.concatenate([np.zeros(C), np.ones(P)]),
            be_sig=np.eye(C + P),
            f_mu=f_mu,
            f_var=np.ones((C, N)),
            f_logz=np.zeros((C, N)),
            f_ent=np.full((C, N), 0.5 * (_LOG2PI + 1.0)),
        )
        return s

    # -- coordinate updates --------------------------------------------------------------------
    def update_lambda(self, s: _State) -> None:
        Eaa = s.a_mu**2 + np.diagonal(s.a_sig, axis1=1, axis2=2)
        s.lam_b = 1.0 / (1.0 / self.pr.beta_lambda + 0.5 * Eaa)

    def update_a(self, s: _State) -> None:
        sg2 = self.pr.sigma_g**2
        KG = self._KG(s.G_mu)
        eye = np.eye(self.N)
        for c in range(self.C):
            prec = self.KK / sg2
            prec[np.diag_indices(self.N)] += s.lam_a * s.lam_b[c]
            cf = cho_factor(prec, lower=True)
            s.a_sig[c] = cho_solve(cf, eye)
            s.a_mu[c] = cho_solve(cf, KG[c] / sg2)
            s.a_logdet[c] = -2.0 * np.sum(np.log(np.diag(cf[0])))

    def update_G(self, s: _State) -> None:
        sg2 = self.pr.sigma_g**2
        _, Ee, _, Eee, Eeb = self._be_moments(s)
        prec = np.eye(self.P) / sg2 + Eee
        cf = cho_factor(prec, lower=True)
        s.G_sig = cho_solve(cf, np.eye(self.P))
        rhs = (
            self._proj(s.a_mu) / sg2 + Ee[None, :, None] * s.f_mu[:, None, :] - Eeb.T[:, :, None]
        )  # (C, P, N)
        s.G_mu = np.einsum("pq,cqn->cpn", s.G_sig, rhs)

    def update_gamma(self, s: _State) -> None:
        _, _, Ebb, _, _ = self._be_moments(s)
        s.gam_b = 1.0 / (1.0 / self.pr.beta_gamma + 0.5 * Ebb)

    def update_omega(self, s: _State) -> None:
        _, _, _, Eee, _ = self._be_moments(s)
        s.om_b = 1.0 / (1.0 / self.pr.beta_omega + 0.5 * np.diag(Eee))

    def update_be(self, s: _State) -> None:
        C, P, N = self.C, self.P, self.N
        prec = np.zeros((C + P, C + P))
        prec[:C, :C] = np.diag(s.gam_a * s.gam_b + N)
        Gsum = s.G_mu.sum(axis=2)  # (C, P)
        prec[:C, C:] = Gsum
        prec[C:, :C] = Gsum.T
        GG = np.einsum("cpn,cqn->pq", s.G_mu, s.G_mu) + C * N * s.G_sig
        prec[C:, C:] = GG + np.diag(s.om_a * s.om_b)
        rhs = np.concatenate([s.f_mu.sum(axis=1), np.einsum("cpn,cn->p", s.G_mu, s.f_mu)])
        cf = cho_factor(prec, lower=True)
        s.be_sig = cho_solve(cf, np.eye(C + P))
        s.be_mu = cho_solve(cf, rhs)

    def update_f(self, s: _State) -> None:
        Eb, Ee, _, _, _ = self._be_moments(s)
        out = Eb[:, None] + np.einsum("p,cpn->cn", Ee, s.G_mu)
        s.f_mu, s.f_var, s.f_logz, s.f_ent = truncated_normal_moments(out, self.Y, self.pr.margin)

    UPDATES = ("lambda", "a", "G", "gamma", "omega", "be", "f")

    def sweep(self, s: _State, callback=None) -> None:
        for name in self.UPDATES:
            getattr(self, f"update_{name}")(s)
            if callback is not None:
                callback(name, s)

    # -- the bound -----------------------------------------------------------------------------
    def elbo(self, s: _State) -> float:
        """``E_q[log p] + H[q]``, term by term.

        Gamma(a, scale b): ``E x = ab``, ``E log x = ψ(a) + log b``,
        ``H = a + log b + lnΓ(a) + (1 − a)ψ(a)``; the prior term of each λ_{c,i}, γ_c, ω_m is
        ``(α₀ − 1) E log x − E x / β₀ − lnΓ(α₀) − α₀ log β₀``.

        * ``E log p(a_c | λ_c) = −½ Σ_i E λ_ci E a_ci² + ½ Σ_i E log λ_ci − (N/2) log 2π``; the
          same form for ``b_c | γ_c`` and ``e_m | ω_m``.
        * ``E log p(G_c | a_c) = −(2σ_g²)⁻¹ [‖E G_c‖² + N tr Σ_G − 2 E a_cᵀ Σ_m K_m E g_{c,m,·}
          + tr(Σ_m K_m K_mᵀ E[a_c a_cᵀ])] − (NP/2) log(2π σ_g²)``.
        * ``E log p(f_c | b_c, e, G_c) = −½ Σ_i [E f² − 2 E f (E b_c + E eᵀ E g_ci) + E b_c²
          + 2 E[b_c e]ᵀ E g_ci + tr(E[eeᵀ] (E g_ci E g_ciᵀ + Σ_G))] − (N/2) log 2π``, with
          ``E f² = (E f)² + Var f``; ``log p(y | f) = 0`` on the support of q(f).
        * Gaussian entropies ``½ (d (1 + log 2π) + log det Σ)``: q(a_c) (d = N), each
          q(g_{c,·,i}) (d = P, C·N of them), q(b, e) (d = C + P).
        * Truncated-normal entropies of q(f): :func:`truncated_normal_moments`.
        """
        pr, C, N, P = self.pr, self.C, self.N, self.P
        sg2 = pr.sigma_g**2
        Eb, Ee, Ebb, Eee, Eeb = self._be_moments(s)
        lb = 0.0
        # λ and a | λ
        Elam = s.lam_a * s.lam_b
        Eloglam = digamma(s.lam_a) + np.log(s.lam_b)
        lb += np.sum(_gamma_expect_log_prior(s.lam_a, s.lam_b, pr.alpha_lambda, pr.beta_lambda))
        Eaa_diag = s.a_mu**2 + np.diagonal(s.a_sig, axis1=1, axis2=2)
        lb += np.sum(-0.5 * Elam * Eaa_diag + 0.5 * Eloglam) - 0.5 * C * N * _LOG2PI
        # G | a
        KG = self._KG(s.G_mu)  # (C, N)
        for c in range(C):
            EGG_tr = np.sum(s.G_mu[c] ** 2) + N * np.trace(s.G_sig)
            Eaa = np.outer(s.a_mu[c], s.a_mu[c]) + s.a_sig[c]
            quad = EGG_tr - 2.0 * s.a_mu[c] @ KG[c] + np.sum(self.KK * Eaa)
            lb += -0.5 * quad / sg2
        lb += -0.5 * C * N * P * (_LOG2PI + np.log(sg2))
        # γ, b | γ
        lb += np.sum(_gamma_expect_log_prior(s.gam_a, s.gam_b, pr.alpha_gamma, pr.beta_gamma))
        Eloggam = digamma(s.gam_a) + np.log(s.gam_b)
        lb += np.sum(-0.5 * s.gam_a * s.gam_b * Ebb + 0.5 * Eloggam) - 0.5 * C * _LOG2PI
        # ω, e | ω
        lb += np.sum(_gamma_expect_log_prior(s.om_a, s.om_b, pr.alpha_omega, pr.beta_omega))
        Elogom = digamma(s.om_a) + np.log(s.om_b)
        lb += np.sum(-0.5 * s.om_a * s.om_b * np.diag(Eee) + 0.5 * Elogom) - 0.5 * P * _LOG2PI
        # f | b, e, G
        for c in range(C):
            Gc = s.G_mu[c]  # (P, N)
            Eff = np.sum(s.f_mu[c] ** 2 + s.f_var[c])
            cross = np.sum(s.f_mu[c] * (Eb[c] + Ee @ Gc))
            EGGc = Gc @ Gc.T + N * s.G_sig
            quad = (
                Eff
                - 2.0 * cross
                + N * Ebb[c]
                + 2.0 * Eeb[:, c] @ Gc.sum(axis=1)
                + np.sum(Eee * EGGc)
            )
            lb += -0.5 * quad
        lb += -0.5 * C * N * _LOG2PI
        # entropies
        lb += np.sum(_gamma_entropy(s.lam_a, s.lam_b))
        lb += np.sum(0.5 * (N * (_LOG2PI + 1.0) + s.a_logdet))
        lb += 0.5 * C * N * (P * (_LOG2PI + 1.0) + _gauss_logdet(s.G_sig))
        lb += np.sum(_gamma_entropy(s.gam_a, s.gam_b))
        lb += np.sum(_gamma_entropy(s.om_a, s.om_b))
        lb += 0.5 * ((C + P) * (_LOG2PI + 1.0) + _gauss_logdet(s.be_sig))
        lb += np.sum(s.f_ent)
        return float(lb)


def elbo(K: np.ndarray, Y: np.ndarray, state: _State, prior: _Prior) -> float:
    """Evidence lower bound of a BEMKL variational state (see the module docstring).

    Parameters
    ----------
    K : ndarray (P, N, N)
    Y : ndarray (C, N) of ±1
    state : the fitted estimator's ``vb_state_``
    prior : the fitted estimator's ``vb_prior_``
    """
    return _VB(K, Y, prior).elbo(state)


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
    kernel_names : sequence of str, optional
        Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
        with a pool, which names its kernels itself.

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
    elbo_ : ndarray (n_iter_,)
        Evidence lower bound after every sweep (non-decreasing).
    n_iter_ : int
        Sweeps done (``n_iter`` unless ``max_time`` stopped the fit).
    vb_state_, vb_prior_
        The full variational posterior and hyper-parameters (for :func:`elbo`).
    classes_ : ndarray
    kernel_names_ : list of str
    """

    def __init__(
        self,
        kernels="simplemkl",
        sparse=False,
        n_iter=200,
        sigma_g=0.1,
        margin=1.0,
        alpha_lambda=1.0,
        beta_lambda=1.0,
        alpha_gamma=1.0,
        beta_gamma=1.0,
        alpha_omega=None,
        beta_omega=None,
        random_state=None,
        max_time=None,
        kernel_names=None,
    ):
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
        values = {name: check_positive(name, val) for name, val in values.items()}
        margin = check_positive("margin", self.margin, allow_zero=True)
        return _Prior(margin=margin, **values)

    def fit(self, X, y, sample_weight=None):
        """Fit the variational posterior.

        Parameters
        ----------
        X : array (N, d), or (P, N, N) with ``kernels="precomputed"``
        y : array (N,)
            Class labels (two or more classes).
        sample_weight : None
            Not supported: raises ``NotImplementedError`` (see below).

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
        check_int("n_iter", self.n_iter)
        check_max_time(self.max_time)
        self.vb_prior_ = self._prior()
        return super().fit(X, y)

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
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
