"""BEMKL's variational Bayes machinery (model, mean-field updates, ELBO; Gönen, ICML 2012).

The estimator is :class:`bayesmkl.baselines.bemkl.BEMKL`; this module holds the model and the
coordinate-ascent updates it runs.

Model (docs/math.md §9; learnt from the public MATLAB code, re-derived and re-implemented
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
from scipy.special import digamma, gammaln, log_ndtr

__all__ = ["elbo", "truncated_normal_moments"]

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
