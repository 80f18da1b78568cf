"""The ε-insensitive likelihood of BM³KL regression, written once (docs/math.md §15).

Every other module of the regressor (the NumPyro model, the Gibbs conditionals, prediction and
the tests) uses these functions. Shapes: ``y, f, lam_plus, lam_minus`` broadcast together
(``(1, N)`` in the sampler, ``(S, M)`` in prediction); ``c > 0`` and ``eps ≥ 0`` are scalars or
broadcast with them.

==============================  ===============================================================
formula                         meaning
==============================  ===============================================================
L_ε(r) = max(|r| − ε, 0)        ε-insensitive loss of the residual r = y − f
Z(c, ε) = 2ε + 1/c              normaliser of exp{−2c L_ε(r)} over r ∈ ℝ
log p(y | f, c, ε)              −2c L_ε(y − f) − log Z(c, ε)
ζ⁺ = c(y − f − ε)               slack of the upper hinge: 2c max(r − ε, 0) = 2 max(ζ⁺, 0)
ζ⁻ = c(f − y − ε)               slack of the lower hinge: 2c max(−r − ε, 0) = 2 max(ζ⁻, 0)
T = y + ε(λ⁺ − λ⁻)/(λ⁺ + λ⁻)    pseudo-target of f given λ⁺, λ⁻ (Gaussian in f)
V = λ⁺λ⁻ / (c²(λ⁺ + λ⁻))        its noise variance
==============================  ===============================================================

The density in r is flat on [−ε, ε] and falls off as e^{−2c(|r| − ε)} outside, so its mass is
2ε/Z inside the tube and 1/(2cZ) in each tail; the module's noise functions (variance, CDF,
quantile, log density, draws) are those of this law. They take NumPy or JAX arrays; the
prediction helpers at the end are NumPy.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = [
    "eps_loss",
    "log_augmented_likelihood",
    "log_likelihood_terms",
    "log_normaliser",
    "noise_cdf",
    "noise_logpdf",
    "noise_quantile",
    "noise_sample",
    "noise_variance",
    "pseudo_observations",
    "slacks",
]


def eps_loss(r, eps):
    """L_ε(r) = max(0, r − ε) + max(0, −r − ε) = max(|r| − ε, 0) (for ε ≥ 0)."""
    return jnp.maximum(jnp.abs(r) - eps, 0.0)


def log_normaliser(c, eps):
    """log Z(c, ε) = log(2ε + 1/c), the normaliser of exp{−2c L_ε(r)} over r ∈ ℝ.

    Written as −log c + log1p(2εc), accurate for εc small and large.
    """
    return -jnp.log(c) + jnp.log1p(2.0 * eps * c)


def log_likelihood_terms(y, f, c, eps):
    """log p(y | f, c, ε) = −2c L_ε(y − f) − log(2ε + 1/c), elementwise (a proper density in y)."""
    return -2.0 * c * eps_loss(y - f, eps) - log_normaliser(c, eps)


def slacks(y, f, c, eps):
    """``(ζ⁺, ζ⁻) = (c(y − f − ε), c(f − y − ε))``: exp{−2c L_ε(y − f)} = e^{−2max(ζ⁺,0)}
    e^{−2max(ζ⁻,0)}, each factor a hinge with the scale mixture of docs/math.md (4)."""
    r = y - f
    return c * (r - eps), c * (-r - eps)


def pseudo_observations(y, lam_plus, lam_minus, c, eps):
    """Pseudo-targets and noise variances ``(T, V)`` of f given the augmentation variables.

    With ζ^± from :func:`slacks`, (λ⁺ + ζ⁺)²/λ⁺ + (λ⁻ + ζ⁻)²/λ⁻ = (f − T)²/V + (λ⁺ + λ⁻ − 2cε)² /
    (λ⁺ + λ⁻) (docs/math.md §15.3), with T = y + ε(λ⁺ − λ⁻)/(λ⁺ + λ⁻) and
    V = λ⁺λ⁻ / (c²(λ⁺ + λ⁻)): given λ the augmented likelihood is a Gaussian regression of T
    on f with noise variances V, and every Gaussian step of the sampler takes it in this form.
    """
    s = lam_plus + lam_minus
    T = y + eps * (lam_plus - lam_minus) / s
    V = lam_plus * lam_minus / (c**2 * s)
    return T, V


def log_augmented_likelihood(y, f, lam_plus, lam_minus, c, eps):
    """Σ_i Σ_± [−½ log(2πλ^±_i) − (λ^±_i + ζ^±_i)²/(2λ^±_i)] − N log Z(c, ε), summed over all.

    Integrated over λ⁺, λ⁻ ∈ (0, ∞) (flat prior) each term gives back
    :func:`log_likelihood_terms` (docs/math.md (4) for each hinge).
    """
    zp, zm = slacks(y, f, c, eps)
    n = jnp.size(jnp.broadcast_to(y, jnp.broadcast_shapes(jnp.shape(y), jnp.shape(f))))
    hinge = sum(
        jnp.sum(-0.5 * jnp.log(2.0 * jnp.pi * lam) - (lam + z) ** 2 / (2.0 * lam))
        for lam, z in ((lam_plus, zp), (lam_minus, zm))
    )
    return hinge - n * log_normaliser(c, eps)


# --------------------------------------------------------------------------------------------
# the noise law p(r) = exp{−2c L_ε(r)} / Z(c, ε)
# --------------------------------------------------------------------------------------------
def noise_variance(c, eps):
    """Var(r) = [2ε³/3 + ε²/c + ε/c² + 1/(2c³)] / (2ε + 1/c); 1/(2c²) at ε = 0 (a Laplace)."""
    num = 2.0 * eps**3 / 3.0 + eps**2 / c + eps / c**2 + 0.5 / c**3
    return num / (2.0 * eps + 1.0 / c)


def noise_logpdf(r, c, eps):
    """log p(r) of the noise law (the same as :func:`log_likelihood_terms` at y − f = r)."""
    return -2.0 * c * np.maximum(np.abs(r) - eps, 0.0) - (-np.log(c) + np.log1p(2.0 * eps * c))


def noise_cdf(r, c, eps):
    """P(noise ≤ r), NumPy, elementwise over broadcast ``r, c, eps``.

    e^{2c(r + ε)} / (2cZ) for r < −ε; (1/(2c) + r + ε)/Z on [−ε, ε]; 1 − e^{−2c(r − ε)}/(2cZ)
    for r > ε.
    """
    r, c, eps = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (r, c, eps)))
    Z = 2.0 * eps + 1.0 / c
    tail = 1.0 / (2.0 * c * Z)  # mass of each tail
    lower = tail * np.exp(2.0 * c * np.minimum(r + eps, 0.0))
    upper = 1.0 - tail * np.exp(-2.0 * c * np.maximum(r - eps, 0.0))
    middle = (0.5 / c + r + eps) / Z
    return np.where(r < -eps, lower, np.where(r > eps, upper, middle))


def noise_quantile(q, c, eps):
    """The q-quantile of the noise law (inverse of :func:`noise_cdf`), NumPy, elementwise."""
    q, c, eps = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (q, c, eps)))
    Z = 2.0 * eps + 1.0 / c
    tail = 1.0 / (2.0 * c * Z)
    with np.errstate(divide="ignore"):
        lower = -eps + np.log(np.maximum(q, 1e-300) / tail) / (2.0 * c)
        upper = eps - np.log(np.maximum(1.0 - q, 1e-300) / tail) / (2.0 * c)
    middle = q * Z - 0.5 / c - eps
    return np.where(q < tail, lower, np.where(q > 1.0 - tail, upper, middle))


def noise_sample(rng, c, eps):
    """One draw of the noise law per element of the broadcast ``c, eps`` (NumPy ``rng``):
    uniform on [−ε, ε] with probability 2ε/Z, else ±(ε + Exp(rate 2c)) with equal signs."""
    c, eps = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(eps, dtype=float))
    return noise_quantile(rng.uniform(size=c.shape), c, eps)
