"""BM3KLMAP: the MAP estimate of the BM3KL posterior by expectation–conditional maximisation.

The Bayesian model's posterior mode, computed with the same model code as the sampler. The
augmentation variables λ and the whole TPBN hierarchy (ν, ς) are integrated out: they are the
"missing data" of an ECM algorithm (Meng & Rubin 1993). The estimate maximises

    log p(w, a, b | D) = log L'(f) + log Dir(w | η) + Σ log p(a_ci) + log N(b | 0, τ),

where log L' is :func:`bayesmkl.model.likelihood.log_pseudo_likelihood` and p(a) = ∫ N(a | 0, ν)
p(ν) dν
with ν = κ·t, t ~ BetaPrime(α_a, β_a) (the TPBN marginal of ν: Gamma(α_a, ς) mixed over
ς ~ Gamma(β_a, κ)). Keeping ς as a parameter instead would be ill-posed: for β_a < ½ (the
paper's 0.1) the joint density is unbounded as ς → 0.

The ν-integral is done on a fixed log-grid (``n_grid`` points spanning t ∈ [1e-12, 1e40]); the
estimate is exactly the MAP of the model whose ν prior is that discretisation, so the ECM
iterations are exactly monotone. Each iteration:

* E-step: ρ = E[1/λ | ζ] = s/|ζ| (λ | ζ ~ GIG(½, s², ζ²)); E[1/ν | a] on the grid;
* CM-step (a, b): a weighted ridge regression, solved in the same Λ-form as the sampler's
  Gaussian step (:func:`bayesmkl.sampler.conditionals.ab_mean_lambda_form`) with λ → 1/ρ and
  ν → 1/E[1/ν];
* CM-step w: minimise E[U_lik(w)] − (η − 1) Σ log w_m on the simplex by exponentiated gradient
  with backtracking (requires η ≥ 1: for η < 1 the posterior density is unbounded at the faces
  of the simplex and no MAP exists).

No step decreases the objective (the ECM property); ``objective_`` records it, and the tests
check it. With a flat Dirichlet (η = 1) the estimate is a hinge-like MKL solution with
shrinkage of the sample weights, the Bayesian analogue of L1-MKL (docs/baselines_math.md §(c)).

Sample weights (``fit(..., sample_weight)``, ``class_weight``) weight the likelihood terms:
``log L'`` becomes ``Σ_i s_i Σ_c log L'_ci``. The E-step is unchanged (the weighted bound
``s_i log ∫ p dλ ≥ s_i E_q[log p/q]`` is tight at the same q), the (a, b)-step is the ridge
regression with point i's pseudo-observation variance ``1/(s_i ρ_i)`` (rows scaled by ``√s_i``, so
a zero weight removes the observation) and the w-step's terms are weighted alike; ECM stays
monotone. Every training point keeps its sample weight ``a_i`` and its prior whatever ``s_i``, so
unlike for an SVM a repeated row is *not* the same as an integer weight (it would add a second
``a`` with its own prior), and a zero weight keeps the point as a basis function.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import betaln, logsumexp

from bayesmkl.baselines._base import (
    CLASS_WEIGHT,
    KERNEL_NAMES,
    KERNELS,
    POSITIVE,
    MKLClassifierBase,
)
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.config import with_x64
from bayesmkl.estimators._validation import MAX_TIME, Interval, Options
from bayesmkl.model.classification import signed_targets
from bayesmkl.model.likelihood import log_pseudo_likelihood
from bayesmkl.posterior.checks import check_kernel_scale
from bayesmkl.sampler.conditionals import ab_mean_lambda_form, per_kernel_decisions

ZETA_FLOOR = 1e-8
_ab_mean = jax.jit(ab_mean_lambda_form)


@jax.jit
def _ab_mean_weighted(Kw, delta, lam, nu, tau, sw):
    """:func:`ab_mean_lambda_form` for the weighted likelihood ``(C, N+1)``.

    Point i's pseudo-observation ``δ_ci(1 + λ_ci)`` of ``f_ci`` gets variance ``λ_ci / s_i``:
    the rows of the design ``X̃ = [K_w, 1]`` and the targets are scaled by ``√s_i`` (a zero
    weight gives a zero row, i.e. no observation), then the Λ-form
    ``D X̃ᵀ (X̃ D X̃ᵀ + Λ)⁻¹ t`` is solved as in the sampler.
    """
    N = Kw.shape[0]
    r = jnp.sqrt(sw)
    Xt = jnp.concatenate([Kw, jnp.ones((N, 1))], axis=1) * r[:, None]

    def one(delta_c, lam_c, nu_c):
        d = jnp.concatenate([nu_c, jnp.array([tau])])
        M = (Xt * d) @ Xt.T + jnp.diag(lam_c)
        return d * (Xt.T @ jnp.linalg.solve(M, r * delta_c * (1.0 + lam_c)))

    return jax.vmap(one)(delta, lam, nu)


def tpbn_grid(alpha_a, beta_a, kappa, n_grid=400):
    """Grid ``nu: (K,)`` and log prior masses ``log_q: (K,)`` of the TPBN marginal of ν.

    ν = κ t with t ~ BetaPrime(α_a, β_a); masses from the density on a uniform grid in log t
    (t from 1e-12 to 1e40), normalised to sum to 1.
    """
    log_t = np.linspace(np.log(1e-12), np.log(1e40), n_grid)
    log_q = (
        alpha_a * log_t - (alpha_a + beta_a) * np.logaddexp(0.0, log_t) - betaln(alpha_a, beta_a)
    )
    return kappa * np.exp(log_t), log_q - logsumexp(log_q)


def _log_joint_a_grid(a, nu, log_q):
    """log N(a | 0, ν_k) + log q_k for every entry of ``a`` and grid point: ``a.shape + (K,)``."""
    a2 = (a**2)[..., None]
    return -0.5 * np.log(2.0 * np.pi * nu) - a2 / (2.0 * nu) + log_q


@shared_doc
class BM3KLMAP(MKLClassifierBase):
    """MAP estimate of the BM3KL posterior (kernel weights, sample weights, biases).

    The hyper-parameters' defaults are the package's default prior, ``Hyper()``
    (:class:`bayesmkl.model.classification.Hyper`, the prior that
    :class:`~bayesmkl.BM3KLClassifier` samples by default); the paper's values are the preset
    ``Hyper.paper()``: ``BM3KLMAP(**Hyper.paper()._asdict())``.

    Parameters
    ----------
    kernels : str or KernelPool, default="bsvm16"
        As for :class:`bayesmkl.BM3KLClassifier`.
    eta : float, default=2.0
        Dirichlet concentration; must be ≥ 1 for the MAP to exist.
    alpha_a, beta_a, kappa : float, default=1.0
        TPBN hyper-parameters (α_a + β_a > 1 needed; the paper's α_a = 1 with any β_a > 0 works).
    bias_prior_var : float, default=1.0
        Prior variance τ of the biases.
    gamma0 : float, default=1.0
        Rate of λ's Exp(γ0) prior; selects L' (or L for 0).
    binary_mode : {"single", "ova"}, default="single"
        One classifier for two classes or one-vs-all with C = 2.
    max_iter : int, default=200
        ECM iterations.
    tol : float, default=1e-7
        Stop when the relative objective increase falls below ``tol``.
    n_grid : int, default=400
        Points of the log-grid on which the TPBN prior of ν is integrated out
        (:func:`tpbn_grid`).
    max_time : float or None, default=None
        Wall-clock budget in seconds. Stopping on it or on ``max_iter`` before ``tol`` keeps
        the last iterate and issues a ``ConvergenceWarning`` that names the limit.
    class_weight : None, "balanced" or dict, default=None
        Class weights, multiplied into ``fit``'s ``sample_weight`` (scikit-learn semantics); the
        weights multiply the likelihood terms (module docstring).
    {{kernel_names}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        MAP kernel weights w (on the simplex).
    a_ : ndarray (C, N)
        MAP sample weights. ``dual_coef_`` is the same array (decision values f = a K_w + b).
    intercept_ : ndarray (C,)
    objective_ : list of float
        log posterior (up to a constant) after every iteration; non-decreasing.
    n_iter_ : int
    """

    _parameter_constraints = {
        "kernels": KERNELS,
        "eta": [Interval("real", 1, None, description=">= 1 for a MAP estimate to exist")],
        "alpha_a": POSITIVE,
        "beta_a": POSITIVE,
        "kappa": POSITIVE,
        "bias_prior_var": POSITIVE,
        "gamma0": [Interval("real", 0, None)],
        "binary_mode": [Options("single", "ova")],
        "max_iter": [Interval("int", 1, None, closed="left")],
        "tol": [Interval("real", 0, None, closed="left")],
        "n_grid": [Interval("int", 2, None, closed="left")],
        "max_time": MAX_TIME,
        "class_weight": CLASS_WEIGHT,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="bsvm16", *, eta=2.0, alpha_a=1.0, beta_a=1.0, kappa=1.0,
        bias_prior_var=1.0, gamma0=1.0, binary_mode="single", max_iter=200, tol=1e-7,
        n_grid=400, max_time=None, class_weight=None, kernel_names=None,
    ):  # fmt: skip
        self.kernels = kernels
        self.eta = eta
        self.alpha_a = alpha_a
        self.beta_a = beta_a
        self.kappa = kappa
        self.bias_prior_var = bias_prior_var
        self.gamma0 = gamma0
        self.binary_mode = binary_mode
        self.max_iter = max_iter
        self.tol = tol
        self.n_grid = n_grid
        self.max_time = max_time
        self.class_weight = class_weight
        self.kernel_names = kernel_names

    def fit(self, X, y, sample_weight=None):
        """Compute the MAP estimate; ``sample_weight (N,)`` weights the likelihood terms."""
        return super().fit(X, y, sample_weight)

    def _log_lik(self, f, delta, sw):
        """``log L'`` summed over points, each point's terms (all c) weighted by ``s_i``."""
        if sw is None:
            return float(log_pseudo_likelihood(f, delta, self.gamma0))
        per_point = jax.vmap(lambda fi, di: log_pseudo_likelihood(fi, di, self.gamma0), in_axes=1)(
            f, delta
        )
        return float(sw @ np.asarray(per_point))

    def _objective(self, f, delta, w, a, b, grid, sw=None):
        lp = self._log_lik(f, delta, sw)
        lp += (self.eta - 1.0) * float(np.sum(np.log(w)))
        lp += float(np.sum(logsumexp(_log_joint_a_grid(a, *grid), axis=-1)))
        return lp - float(np.sum(b**2)) / (2.0 * self.bias_prior_var)

    def _fit_kernels(self, K, Y, sample_weight=None):
        if self.kernels == "precomputed":  # the prior is BM3KL's, scaled for unit diagonals
            check_kernel_scale(K, self.kernel_names_)
        # Y from the base class is one-vs-rest; rebuild Δ with the model's own binary convention
        codes = np.argmax(Y, axis=0) if Y.shape[0] > 1 else (Y[0] > 0).astype(int)
        delta = signed_targets(codes, len(self.classes_), self.binary_mode)
        P, N, _ = K.shape
        C = delta.shape[0]
        s = np.sqrt(1.0 + 2.0 * self.gamma0)
        tau = self.bias_prior_var
        w = np.full(P, 1.0 / P)
        grid = tpbn_grid(self.alpha_a, self.beta_a, self.kappa, self.n_grid)
        Kw = np.tensordot(w, K, axes=1)
        sw = sample_weight

        def ab_step(Kw, lam, nu):
            if sw is None:
                return np.asarray(_ab_mean(Kw, delta, lam, nu, tau))
            return np.asarray(_ab_mean_weighted(Kw, delta, lam, nu, tau, sw))

        # initial (a, b): ridge with unit prior variances and unit noise
        ab = ab_step(Kw, np.ones((C, N)), np.ones((C, N)))
        a, b = ab[:, :N], ab[:, N]
        self.objective_ = []
        budget = Budget("BM3KLMAP", self.max_iter, self.max_time, unit="ECM iterations")
        converged = False
        it = 0
        while not budget.exhausted(it):
            f = a @ Kw + b[:, None]
            rho = s / np.maximum(np.abs(1.0 - delta * f), ZETA_FLOOR)  # E[1/λ | ζ]
            log_post = _log_joint_a_grid(a, *grid)  # E[1/ν | a] on the grid
            post = np.exp(log_post - logsumexp(log_post, axis=-1, keepdims=True))
            e_inv_nu = post @ (1.0 / grid[0])
            ab = ab_step(Kw, 1.0 / rho, 1.0 / e_inv_nu)
            a, b = ab[:, :N], ab[:, N]
            Phi = np.asarray(per_kernel_decisions(K, a))  # (P, C, N)
            w = self._w_step(w, Phi, b, delta, rho, sw=sw)
            Kw = np.tensordot(w, K, axes=1)
            f = a @ Kw + b[:, None]
            self.objective_.append(self._objective(f, delta, w, a, b, grid, sw))
            it += 1
            if it > 1:
                prev, cur = self.objective_[-2], self.objective_[-1]
                if abs(cur - prev) <= self.tol * max(1.0, abs(cur)):
                    converged = True
                    break
        if not converged:
            budget.warn(it, "relative objective change")
        self.n_iter_ = it
        self.kernel_weights_ = w
        self.a_ = a
        self.dual_coef_ = a
        self.intercept_ = b
        self.delta_ = delta

    def _w_step(self, w, Phi, b, delta, rho, n_steps=100, sw=None):
        """Minimise J(w) = Σ s_i [ζ + ½ρζ²] − (η − 1) Σ log w on the simplex (s = 1 unweighted).

        Exponentiated gradient (mirror descent in the KL geometry) with backtracking.
        """
        s = 1.0 if sw is None else sw[None, :]

        def J_and_grad(w):
            f = np.tensordot(w, Phi, axes=1) + b[:, None]
            zeta = 1.0 - delta * f
            J = np.sum(s * (zeta + 0.5 * rho * zeta**2)) - (self.eta - 1.0) * np.sum(np.log(w))
            r = -s * delta * (1.0 + rho * zeta)  # dJ/df
            grad = np.tensordot(Phi, r, axes=([1, 2], [0, 1])) - (self.eta - 1.0) / w
            return J, grad

        J, g = J_and_grad(w)
        if not (np.isfinite(J) and np.all(np.isfinite(g))):
            raise FloatingPointError(
                "BM3KLMAP: the kernel-weight objective or its gradient is not finite "
                f"(objective {J:.3g}); check the kernels and hyper-parameters for extreme values"
            )
        step = 1.0 / max(np.abs(g).max(), 1e-12)
        for _ in range(n_steps):
            # the step starts at most at 1e12·2^n_steps and halves: below 1e-20 (where the
            # search stops) within _MAX_HALVINGS halvings, unless the arithmetic fails
            for _ in range(_MAX_HALVINGS):
                logits = np.log(w) - step * (g - g.max())
                w_new = np.exp(logits - logits.max())
                w_new = np.maximum(w_new / w_new.sum(), 1e-300)
                J_new, g_new = J_and_grad(w_new)
                # Armijo condition for the mirror step (KL geometry)
                if J_new <= J + g @ (w_new - w) + (1.0 / step) * _kl(w_new, w) or step < 1e-20:
                    break
                step *= 0.5
            else:
                raise FloatingPointError(
                    f"BM3KLMAP: the line search of the kernel weights did not end after "
                    f"{_MAX_HALVINGS} step halvings (objective {J_new:.3g}, step {step:.3g}); "
                    "the arithmetic is not finite: check the kernels and hyper-parameters"
                )
            converged = abs(J - J_new) <= 1e-12 * max(1.0, abs(J))
            w, J, g = w_new, J_new, g_new
            step *= 2.0
            if converged:
                break
        return w

    @with_x64
    def predict_proba(self, X):
        """Class probabilities of the MAP parameters: σ(ψ(f)) or softmax(ψ(f)) (docs/math.md §6).

        The pseudo-likelihood's raw rule at one point, neither averaged over a posterior nor
        calibrated: at the paper's γ0 = 100 nearly every probability is close to 0 or 1, and the
        test log-loss is poor against the default :class:`~bayesmkl.BM3KLClassifier`'s. For
        decisions use that estimator's ``predict_proba``, or wrap this one in
        ``CalibratedClassifierCV``.
        """
        from bayesmkl.posterior.predictive import draw_probabilities

        F = self.decision_function(X)
        F = F[:, None] if F.ndim == 1 else F
        return np.asarray(draw_probabilities(F[None], self.gamma0))[0]

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


#: Most step halvings of one line search of :meth:`BM3KLMAP._w_step` (see there).
_MAX_HALVINGS = 2000


def _kl(p, q):
    return float(np.sum(p * (np.log(p) - np.log(q))))
