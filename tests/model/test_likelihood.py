"""The pseudo-likelihood identities of :mod:`bayesmkl.model.likelihood` (docs/math.md §1.3–§1.6, §6,
V1).

Integrals over λ use scipy ``quad`` in t = log λ (integrand exp(g(e^t) + t − c), with c the
log of the integrand's maximum, so nothing under- or overflows), with the GIG mode as a break
point. Tolerances are relative errors of the integral, 1e-9 (the quadrature reaches ~1e-12).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize

import bayesmkl  # noqa: F401  (enables x64)
from bayesmkl.model.likelihood import (
    log_augmented_likelihood,
    log_pseudo_likelihood,
    margin_slack,
    psi,
    s_of,
)

ZETAS = [-3.0, -1.0, -0.2, 0.0, 0.4, 1.0, 3.0]
RTOL = 1e-9


def _log_integral(logf, mode):
    """log ∫_0^∞ exp(logf(λ)) dλ, integrated in t = log λ over [t0 − 80, t0 + 12] around the
    mode t0 (outside, the integrand is below e^{−40} of its peak in every case used here)."""
    t0 = np.log(mode)
    c = logf(mode) + t0

    def g(t):
        return np.exp(logf(np.exp(t)) + t - c)

    lo, _ = integrate.quad(g, t0 - 80.0, t0, epsabs=0, epsrel=1e-13, limit=400)
    hi, _ = integrate.quad(g, t0, t0 + 12.0, epsabs=0, epsrel=1e-13, limit=400)
    return c + np.log(lo + hi)


_aug = jax.jit(lambda f, d, lam: log_augmented_likelihood(f, d, lam))


def _log_aug_scalar(zeta, delta):
    f = (1.0 - zeta) * delta  # ζ = 1 − δ f with δ = ±1
    F, D = jnp.array([[f]]), jnp.array([[delta]])
    assert abs(float(margin_slack(F, D)[0, 0]) - zeta) < 1e-14
    return lambda lam: float(_aug(F, D, jnp.array([[lam]])))


@pytest.mark.parametrize("a,b", [(1.0, 0.0), (1.0, 2.0), (0.5, -3.0), (4.0, 0.7)])
def test_andrews_mallows(a, b):
    """(3): ∫ a/√(2πλ) exp{−a²λ/2 − b²/(2λ)} dλ = e^{−|ab|}."""

    def logf(lam):
        return np.log(a) - 0.5 * np.log(2 * np.pi * lam) - a * a * lam / 2 - b * b / (2 * lam)

    mode = (np.sqrt(0.25 + a * a * b * b) - 0.5) / (a * a) if b else 0.5 / (a * a)
    np.testing.assert_allclose(_log_integral(logf, max(mode, 1e-3)), -abs(a * b), atol=RTOL)


@pytest.mark.parametrize("delta", [1.0, -1.0])
@pytest.mark.parametrize("zeta", ZETAS)
def test_polson_scott_flat_prior(zeta, delta):
    """(4): ∫ L(y, λ | Θ) dλ = L(y | Θ) = exp{−2 max(ζ, 0)} (γ0 = 0, flat prior on λ)."""
    logf = _log_aug_scalar(zeta, delta)
    mode = max(abs(zeta), 1e-3)
    F = jnp.array([[(1.0 - zeta) * delta]])
    expected = float(log_pseudo_likelihood(F, jnp.array([[delta]]), 0.0))
    assert expected == pytest.approx(-2 * max(zeta, 0.0), abs=1e-15)
    np.testing.assert_allclose(_log_integral(logf, mode), expected, atol=RTOL)


@pytest.mark.parametrize("gamma0", [0.5, 3.0, 100.0])
@pytest.mark.parametrize("zeta", ZETAS)
def test_exponential_prior_gives_l_prime(zeta, gamma0):
    """(L'): ∫ γ0 e^{−γ0 λ} L(y, λ | Θ) dλ = (γ0/s) exp{−ζ − s|ζ|}, s = √(1 + 2γ0)."""
    base = _log_aug_scalar(zeta, 1.0)

    def logf(lam):
        return np.log(gamma0) - gamma0 * lam + base(lam)

    s = float(s_of(gamma0))
    mode = max(abs(zeta) / s, 1e-3 / s**2)
    F = jnp.array([[1.0 - zeta]])
    expected = float(log_pseudo_likelihood(F, jnp.ones((1, 1)), gamma0))
    np.testing.assert_allclose(expected, np.log(gamma0 / s) - zeta - s * abs(zeta), rtol=1e-14)
    np.testing.assert_allclose(_log_integral(logf, mode), expected, atol=RTOL)


def test_l_prime_tends_to_l_as_gamma0_vanishes():
    """As γ0 → 0, L' → L up to the constant (γ0/s) per (c, i)."""
    rng = np.random.default_rng(0)
    f = jnp.asarray(rng.normal(scale=2.0, size=(3, 6)))
    delta = jnp.asarray(np.where(rng.uniform(size=(3, 6)) < 0.5, 1.0, -1.0))
    for g0 in (1e-6, 1e-9):
        s = float(s_of(g0))
        lp = float(log_pseudo_likelihood(f, delta, g0)) - 18 * np.log(g0 / s)
        np.testing.assert_allclose(lp, float(log_pseudo_likelihood(f, delta, 0.0)),
                                   atol=10 * g0 * float(jnp.abs(f).sum() + 18))  # fmt: skip


def test_sums_over_all_entries():
    rng = np.random.default_rng(1)
    f = rng.normal(size=(2, 5))
    delta = np.where(rng.uniform(size=(2, 5)) < 0.5, 1.0, -1.0)
    lam = rng.gamma(1.0, size=(2, 5))
    zeta = 1 - delta * f
    np.testing.assert_allclose(log_pseudo_likelihood(f, delta, 0.0),
                               -2 * np.maximum(zeta, 0).sum(), rtol=1e-14)  # fmt: skip
    np.testing.assert_allclose(
        log_augmented_likelihood(f, delta, lam),
        np.sum(-0.5 * np.log(2 * np.pi * lam) - (lam + zeta) ** 2 / (2 * lam)),
        rtol=1e-14,
    )


# --------------------------------------------------------------------------------------------
# ψ and the normalised predictive ratio (§6)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma0", [0.0, 0.5, 3.0, 100.0])
def test_psi_strictly_increasing(gamma0):
    f = np.linspace(-6, 6, 4001)
    p = np.asarray(psi(jnp.asarray(f), gamma0))
    assert np.all(np.diff(p) > 0)


def test_psi_l_piecewise():
    f = np.linspace(-4, 4, 801)
    ref = 2 * (np.maximum(1 + f, 0) - np.maximum(1 - f, 0))
    np.testing.assert_allclose(psi(jnp.asarray(f), 0.0), ref, atol=1e-14)
    np.testing.assert_allclose(
        ref, np.where(f >= 1, 2 * (1 + f), np.where(f <= -1, 2 * (f - 1), 4 * f)), atol=1e-14
    )


@pytest.mark.parametrize("gamma0", [0.0, 0.5, 3.0, 100.0])
def test_multiclass_ratio_is_softmax_of_psi(gamma0):
    """C = 3: L(y=c|Θ)/Σ_c' L(y=c'|Θ), each from log L' of the one-vs-all targets of class c,
    equals softmax(ψ(f)) (the γ0/s constants and the classes' common terms cancel)."""
    rng = np.random.default_rng(2)
    C = 3
    for _ in range(20):
        f = rng.normal(scale=1.5, size=C)
        F = jnp.asarray(f[:, None])
        D = np.where(np.eye(C) == 1, 1.0, -1.0)  # row c: the one-vs-all targets if y = c
        logL = np.array(
            [float(log_pseudo_likelihood(F, jnp.asarray(D[c][:, None]), gamma0)) for c in range(C)]
        )
        ratio = np.exp(logL - logL.max())
        ratio /= ratio.sum()
        np.testing.assert_allclose(ratio, jax.nn.softmax(psi(jnp.asarray(f), gamma0)), rtol=1e-12)
        assert np.argmax(ratio) == np.argmax(f)


@pytest.mark.parametrize("gamma0", [0.0, 100.0])
def test_binary_ratio_is_sigmoid_of_psi(gamma0):
    """Single classifier: L(y=+1)/(L(+1) + L(−1)) = σ(ψ(f))."""
    for f in np.linspace(-3, 3, 25):
        F = jnp.array([[f]])
        lp = float(log_pseudo_likelihood(F, jnp.ones((1, 1)), gamma0))
        lm = float(log_pseudo_likelihood(F, -jnp.ones((1, 1)), gamma0))
        np.testing.assert_allclose(1 / (1 + np.exp(lm - lp)),
                                   jax.nn.sigmoid(psi(F, gamma0))[0, 0], rtol=1e-12)  # fmt: skip


def test_gamma0_large_s_value():
    """s = √(1 + 2γ0); the exponent slopes are −(1 + s) for ζ > 0 and (s − 1) for ζ < 0."""
    assert float(s_of(100.0)) == pytest.approx(np.sqrt(201.0))
    g = lambda z: float(log_pseudo_likelihood(jnp.array([[1.0 - z]]), jnp.ones((1, 1)), 100.0))
    s = np.sqrt(201.0)
    assert optimize.approx_fprime([0.5], lambda z: g(z[0]), 1e-7)[0] == pytest.approx(
        -(1 + s), rel=1e-6
    )
    assert optimize.approx_fprime([-0.5], lambda z: g(z[0]), 1e-7)[0] == pytest.approx(
        s - 1, rel=1e-6
    )
