r"""Random variate generators for the BM3KL Gibbs sampler.

Pure functions of an explicit JAX PRNG key (old-style ``jax.random.PRNGKey`` or new-style
``jax.random.key``).  Every function works under :func:`jax.jit` (``sample_shape`` and ``dtype``
must be static) and :func:`jax.vmap`, broadcasts its parameters, and returns an array of shape
``sample_shape + broadcast_shape(parameters)`` in float32 or float64.

Parameterisations (those of docs/math.md §0)
--------------------------------------------

=============  ======================================  ==========================================
law            density, x > 0                          scipy.stats equivalent
=============  ======================================  ==========================================
IG(μ, ℓ)       √(ℓ/(2πx³)) exp{−ℓ(x − μ)²/(2μ²x)}      ``invgauss(mu=μ/ℓ, scale=ℓ)``
IG(∞, ℓ)       √(ℓ/(2πx³)) exp{−ℓ/(2x)}  (Lévy)        ``levy(scale=ℓ)``
Gamma(k, 1)    x^(k−1) e^(−x) / Γ(k)                   ``gamma(k)``
GIG(p, a, b)   ∝ x^(p−1) exp{−(a x + b/x)/2}           ``geninvgauss(p, b=√(ab), scale=√(b/a))``
GIG(p, a, 0)   Gamma(p, rate a/2), needs p > 0         ``gamma(p, scale=2/a)``
GIG(p, 0, b)   inverse gamma, needs p < 0              ``invgamma(-p, scale=b/2)``
=============  ======================================  ==========================================

``IG(μ, ℓ)`` has mean μ and variance μ³/ℓ; numpy's ``Generator.wald(mean=μ, scale=ℓ)`` and TFP's
``InverseGaussian(loc=μ, concentration=ℓ)`` are the same law.  ``GIG(1/2, ϱ, χ)`` has
``1/X ~ IG(√(ϱ/χ), ϱ)`` (the paper's footnote 1), which is how the λ and ν conditionals of the
sampler are drawn (docs/math.md §3.1, §3.3).

Invalid parameters (outside the supports in the table, or NaN) give NaN draws: nothing is
raised, so the functions stay traceable.  No gradients with respect to the parameters are
offered (``gig`` is a rejection sampler).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["gamma", "inverse_gaussian", "gig"]

# Safety cap on the rejection loop of `gig`.  Devroye's hat accepts with probability >= 0.77 on
# a grid lam, omega in {0, 1e-12, ..., 1e6} (computed by quadrature while writing this module), so
# more than 1000 rounds has probability below 0.23**1000.  The cap only guarantees termination;
# an element that hits it becomes NaN.
_MAX_ROUNDS = 1000


def _as_shape(sample_shape):
    """``sample_shape`` as a tuple of Python ints (hashable, static under jit)."""
    if isinstance(sample_shape, int):
        return (sample_shape,)
    return tuple(int(d) for d in sample_shape)


def _resolve_dtype(dtype, *params):
    """Output dtype: the given one, else the floating type the parameters promote to."""
    if dtype is None:
        # (lists are allowed as parameters; jnp.result_type does not take them)
        params = [jnp.asarray(v) if isinstance(v, (list, tuple)) else v for v in params]
        dtype = jnp.result_type(*params, float)
    dtype = jax.dtypes.canonicalize_dtype(dtype)  # a numpy dtype: hashable, static
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating type, got {dtype}")
    return dtype


# --------------------------------------------------------------------------------------------
# Gamma
# --------------------------------------------------------------------------------------------


def gamma(key, shape, sample_shape=(), dtype=None):
    r"""Draw from Gamma(k, 1) (shape k, unit rate); divide by a rate for Gamma(k, rate).

    Marsaglia & Tsang (2000) squeeze-free rejection, d = k − 1/3, c = 1/√(9d): propose
    v = (1 + c z)³ with z ~ N(0, 1), accept when log u < z²/2 + d − d v + d log v. Shapes k < 1
    use the boost Gamma(k) = Gamma(k + 1) · U^(1/k), computed in log space. The loop is a single
    ``lax.while_loop`` over the whole array (each element keeps its first accepted proposal;
    acceptance is ≥ 0.95 per round for k ≥ 1), which compiles several times faster than
    ``jax.random.gamma`` — the sampler's sweep compiles once per data shape, so this matters.

    Parameters
    ----------
    key : jax PRNG key
    shape : array_like
        k > 0.
    sample_shape : tuple of int, optional
    dtype : dtype, optional

    Returns
    -------
    x : jax.Array, shape ``sample_shape + shape.shape``
        Positive draws (NaN where k <= 0 or k is NaN).
    """
    dtype = _resolve_dtype(dtype, shape)
    return _gamma(key, shape, _as_shape(sample_shape), dtype)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _gamma(key, shape, sample_shape, dtype):
    k = jnp.broadcast_to(jnp.asarray(shape, dtype), sample_shape + jnp.shape(shape))
    valid = k > 0
    k_safe = jnp.where(valid, k, 1.0)
    boost = k_safe < 1.0
    kb = jnp.where(boost, k_safe + 1.0, k_safe)
    d = kb - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    tiny = jnp.finfo(dtype).tiny
    size = max(math.prod(k.shape), 1)

    def body(carry):
        key, x, done, rounds = carry
        key, sub = jax.random.split(key)
        uu = jax.random.uniform(sub, (2 * size,), dtype, minval=-1.0, maxval=1.0)
        uu = uu.reshape((2,) + k.shape)
        z = math.sqrt(2.0) * lax.erf_inv(uu[0])
        u = jnp.maximum(0.5 * (uu[1] + 1.0), tiny)
        v = (1.0 + c * z) ** 3
        ok = (v > 0) & (jnp.log(u) < 0.5 * z * z + d - d * v + d * jnp.log(jnp.maximum(v, tiny)))
        new = ok & ~done
        return key, jnp.where(new, d * v, x), done | ok, rounds + 1

    def cond(carry):
        return ~jnp.all(carry[2]) & (carry[3] < _MAX_ROUNDS)

    key_loop, key_boost = jax.random.split(key)
    init = (key_loop, jnp.full(k.shape, jnp.nan, dtype), jnp.zeros(k.shape, bool), 0)
    _, x, _, _ = lax.while_loop(cond, body, init)
    u = jax.random.uniform(key_boost, k.shape, dtype, minval=tiny, maxval=1.0)
    log_x = jnp.log(x) + jnp.where(boost, jnp.log(u) / k_safe, 0.0)
    return jnp.where(valid, jnp.maximum(jnp.exp(log_x), tiny), jnp.nan).astype(dtype)


# --------------------------------------------------------------------------------------------
# Inverse Gaussian
# --------------------------------------------------------------------------------------------


def inverse_gaussian(key, mean, shape, sample_shape=(), dtype=None):
    r"""Draw from the inverse Gaussian (Wald) law IG(μ, ℓ).

    The density is √(ℓ / (2π x³)) exp{−ℓ (x − μ)² / (2 μ² x)}, x > 0, with mean μ and variance
    μ³/ℓ; scipy's ``invgauss(mu=μ/ℓ, scale=ℓ)``.

    The method is Michael, Schucany & Haas (1976) in a cancellation-free form: with z ~ N(0, 1),
    y = z², q = (μ/ℓ) y / 2 and d = 1 + q + √q √(q + 2), the candidate x₁ = μ/d is returned with
    probability d / (d + 1) (= μ / (μ + x₁)), otherwise μ d (= μ²/x₁).  Neither branch subtracts
    nearly equal numbers, squares q, or forms μ², so in float32 there are no spurious zeros or
    infinities (tested for mean/shape from 1e-20 to 1e20; the draw itself must of course be
    representable).

    ``mean = +inf`` is allowed and gives the ζ = 0 limit of docs/math.md §3.1: IG(μ, ℓ) tends to the
    Lévy law with scale ℓ as μ → ∞, i.e. x = ℓ / y (scipy ``levy(scale=ℓ)``), which is what is
    returned (with an infinite draw only in the probability-zero event z = 0).

    Parameters
    ----------
    key : jax PRNG key
        Old-style uint32 key or new-style typed key.
    mean : array_like
        μ > 0 (``+inf`` allowed), any shape broadcastable with ``shape``.
    shape : array_like
        ℓ > 0 (finite).
    sample_shape : tuple of int, optional
        Leading dimensions of independent draws (static under jit).
    dtype : dtype, optional
        float32 or float64; default: the floating type that ``mean`` and ``shape`` promote to
        (float64 for Python scalars when x64 is on, as inside bayesmkl's entry points).

    Returns
    -------
    x : jax.Array, shape ``sample_shape + broadcast_shapes(mean.shape, shape.shape)``
        Positive draws; NaN where ``mean <= 0``, ``shape <= 0``, ``shape`` is infinite or a
        parameter is NaN.
    """
    dtype = _resolve_dtype(dtype, mean, shape)
    return _inverse_gaussian(key, mean, shape, _as_shape(sample_shape), dtype)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _inverse_gaussian(key, mean, shape, sample_shape, dtype):
    mu = jnp.asarray(mean, dtype)
    ell = jnp.asarray(shape, dtype)
    out_shape = sample_shape + jnp.broadcast_shapes(mu.shape, ell.shape)
    # One flat stream of uniforms on (-1, 1) gives both the normal z (by the inverse error
    # function, as jax.random.normal does) and the uniform of the acceptance step.  One PRNG call
    # on a 1-d shape compiles several times faster than separate calls on an n-d shape.
    lo = jnp.nextafter(jnp.array(-1.0, dtype), jnp.array(0.0, dtype))
    size = math.prod(out_shape)
    uu = jax.random.uniform(key, (2 * size,), dtype, minval=lo, maxval=1.0)
    uu = uu.reshape((2,) + out_shape)
    z = math.sqrt(2.0) * lax.erf_inv(uu[0])
    u = 0.5 * (uu[1] + 1.0)  # uniform on (0, 1)

    tiny = jnp.finfo(dtype).tiny
    y = jnp.maximum(z * z, tiny)  # y = 0 (z = 0 exactly) would give inf/inf for mean = inf
    q = (mu / ell) * (0.5 * y)
    d = 1.0 + q + jnp.sqrt(q) * jnp.sqrt(q + 2.0)  # d >= 1; never q², so no float32 overflow
    # Small candidate x1 = mu / d. For q > 1 use the equal form (2ℓ/y) / (1 + 1/q + √(1 + 2/q)),
    # which is finite for mean = inf (q = inf) and then gives the Lévy draw ℓ/y.
    inv_q = 1.0 / jnp.where(q > 1.0, q, 1.0)
    x_small = jnp.where(
        q > 1.0,
        (2.0 * ell / y) / (1.0 + inv_q + jnp.sqrt(1.0 + 2.0 * inv_q)),
        mu / d,
    )
    # Accept x1 with probability mu / (mu + x1) = d / (d + 1) = 1 / (1 + 1/d); else mu² / x1 = mu d.
    take_small = u * (1.0 + 1.0 / d) <= 1.0
    x = jnp.where(take_small, x_small, mu * d)
    valid = (mu > 0) & (ell > 0) & jnp.isfinite(ell)
    return jnp.where(valid, x, jnp.nan).astype(dtype)


# --------------------------------------------------------------------------------------------
# Generalized inverse Gaussian: Devroye (2014)
# --------------------------------------------------------------------------------------------
#
# For lam >= 0 and omega = sqrt(ab) > 0, write X = m * exp(T) with m the mode of
# x^lam exp{-(omega/2)(x + 1/x)} in the two-parameter form.  T has the log-concave density
# exp(psi(T)) with
#     psi(u) = -alpha (cosh u - 1) - lam (exp(u) - u - 1),   alpha = sqrt(lam² + omega²) - lam,
# maximal at u = 0 (psi(0) = 0).  Devroye's hat is flat (= 1) on [-s', t'] and follows the
# tangents of psi at t > 0 and at -s < 0 outside it; by concavity it dominates exp(psi) for any
# t, s > 0, and his choice of t, s keeps the acceptance rate bounded away from 0 uniformly in
# (lam, omega).  alpha and the scale are written so that omega -> 0 (b = 0 with lam > 0) is the
# log-gamma density exactly.


def _cosh_m1(x, sqrt_alpha):
    """alpha * (cosh x - 1) = 2 (sqrt(alpha) sinh(x/2))², without overflow for tiny alpha.

    Exactly 0 for alpha = 0 (the Gamma limit), also where sinh overflows.
    """
    h = sqrt_alpha * jnp.sinh(0.5 * x)
    return jnp.where(sqrt_alpha > 0, 2.0 * h * h, 0.0)


def _exp_m1_m(x):
    """exp(x) - 1 - x without cancellation near 0 (series for |x| < 1/2)."""
    x2 = x * x
    # sinh x - x = x³/3! (1 + x²/(4·5) (1 + x²/(6·7) (1 + ...))), Horner form, 6 terms: relative
    # truncation error about 1e-15 of (sinh x - x) at |x| = 1/2, 2e-16 of the result.
    series = jnp.ones_like(x)
    for den in (12.0 * 13.0, 10.0 * 11.0, 8.0 * 9.0, 6.0 * 7.0, 4.0 * 5.0):
        series = 1.0 + x2 / den * series
    series = series * (x2 * x / 6.0)
    sh = jnp.sinh(0.5 * x)
    small = 2.0 * sh * sh + series  # (cosh x - 1) + (sinh x - x)
    return jnp.where(jnp.abs(x) < 0.5, small, jnp.expm1(x) - x)


def _psi(x, lam, alpha, sqrt_alpha):
    return -_cosh_m1(x, sqrt_alpha) - lam * _exp_m1_m(x)


def _dpsi(x, lam, sqrt_alpha):
    # alpha sinh x = 2 (sqrt(alpha) sinh(x/2)) (sqrt(alpha) cosh(x/2)), 0 for alpha = 0.
    h = 2.0 * (sqrt_alpha * jnp.sinh(0.5 * x)) * (sqrt_alpha * jnp.cosh(0.5 * x))
    return -jnp.where(sqrt_alpha > 0, h, 0.0) - lam * jnp.expm1(x)


def _devroye_setup(lam, alpha):
    """Hat parameters for lam >= 0, alpha >= 0 (not both 0); elementwise."""
    sqrt_alpha = jnp.sqrt(alpha)
    cosh1 = math.cosh(1.0)
    # t: right anchor.  -psi(1) = alpha (cosh 1 - 1) + lam (e - 2).
    f1 = alpha * (cosh1 - 1.0) + lam * (math.e - 2.0)
    t = jnp.where(
        (f1 >= 0.5) & (f1 <= 2.0),
        1.0,
        jnp.where(
            f1 > 2.0, jnp.sqrt(2.0 / (alpha + lam)), math.log(4.0) - jnp.log(alpha + 2.0 * lam)
        ),
    )
    # s: left anchor.  -psi(-1) = alpha (cosh 1 - 1) + lam / e.
    fm1 = alpha * (cosh1 - 1.0) + lam / math.e
    # acosh(1 + 1/alpha) = log(1 + 1/alpha + sqrt(1/alpha² + 2/alpha)), written without 1/alpha².
    acosh_term = jnp.log(alpha + 1.0 + jnp.sqrt(1.0 + 2.0 * alpha)) - jnp.log(alpha)
    s = jnp.where(
        (fm1 >= 0.5) & (fm1 <= 2.0),
        1.0,
        jnp.where(
            fm1 > 2.0,
            jnp.sqrt(4.0 / (alpha * cosh1 + lam)),
            jnp.minimum(1.0 / lam, acosh_term),
        ),
    )
    # psi and psi' at t and at -s, evaluated in one stacked call (one copy of the code to compile).
    anchors = jnp.stack([t, -s])
    psi_a = _psi(anchors, lam, alpha, sqrt_alpha)
    dpsi_a = _dpsi(anchors, lam, sqrt_alpha)
    eta, theta = -psi_a[0], -psi_a[1]
    zeta, xi = -dpsi_a[0], dpsi_a[1]
    p_left = 1.0 / xi  # mass of the left exponential piece
    r_right = 1.0 / zeta  # mass of the right exponential piece
    t_flat = t - r_right * eta  # flat part is [-s_flat, t_flat], both >= 0 by concavity
    s_flat = s - p_left * theta
    return dict(
        lam=lam,
        alpha=alpha,
        sqrt_alpha=sqrt_alpha,
        t=t,
        s=s,
        eta=eta,
        zeta=zeta,
        theta=theta,
        xi=xi,
        p_left=p_left,
        r_right=r_right,
        t_flat=t_flat,
        s_flat=s_flat,
    )


def _devroye_draw(key, hp, valid):
    """One log-scale draw T (scalar) by rejection; NaN when invalid or the cap is hit."""
    dtype = hp["t"].dtype
    q_flat = hp["t_flat"] + hp["s_flat"]
    total = hp["p_left"] + q_flat + hp["r_right"]

    def cond(state):
        i, _, done = state
        return (~done) & (i < _MAX_ROUNDS)

    def body(state):
        i, _, _ = state
        uvw = jax.random.uniform(jax.random.fold_in(key, i), (3,), dtype)  # round i's uniforms
        u = uvw[0] * total
        log_v = jnp.log1p(-uvw[1])  # log of 1 - v, a uniform on (0, 1]: finite
        log_w = jnp.log1p(-uvw[2])
        x = jnp.where(
            u < q_flat,
            -hp["s_flat"] + q_flat * uvw[1],
            jnp.where(
                u < q_flat + hp["r_right"],
                hp["t_flat"] - hp["r_right"] * log_v,
                -hp["s_flat"] + hp["p_left"] * log_v,
            ),
        )
        log_hat = jnp.where(
            x > hp["t_flat"],
            -hp["eta"] - hp["zeta"] * (x - hp["t"]),
            jnp.where(x < -hp["s_flat"], -hp["theta"] + hp["xi"] * (x + hp["s"]), 0.0),
        )
        log_f = _psi(x, hp["lam"], hp["alpha"], hp["sqrt_alpha"])
        return i + 1, x, log_w + log_hat <= log_f

    init = (jnp.int32(0), jnp.zeros((), dtype), ~valid)
    _, x, done = lax.while_loop(cond, body, init)
    return jnp.where(done & valid, x, jnp.nan)


def gig(key, p, a, b, sample_shape=(), dtype=None):
    r"""Draw from the generalized inverse Gaussian law GIG(p, a, b).

    The density is ∝ x^(p−1) exp{−(a x + b/x)/2}, x > 0, for real p, a > 0, b > 0; scipy's
    ``geninvgauss(p, b=√(ab), scale=√(b/a))``.  The boundary cases ``b = 0`` with ``p > 0``
    (Gamma(p, rate a/2)) and ``a = 0`` with ``p < 0`` (inverse gamma with shape −p and scale
    b/2) are exact limits of the same code path.

    Algorithm: Devroye (2014), "Random variate generation for the generalized inverse Gaussian
    distribution", Stat. Comput. 24:239–246.  For p ≥ 0 the logarithm of X/mode is drawn by
    rejection from a three-piece hat (flat centre, exponential tails) of its log-concave
    density; the acceptance rate is bounded away from 0 uniformly over all parameters (at least
    0.77 on a grid from 0 to 1e6 in p and √(ab); about 1.2 rounds on average).  p < 0 uses
    X ~ GIG(p, a, b) ⇔ 1/X ~ GIG(−p, b, a).  Every element runs its own ``lax.while_loop``
    with its own key (``jax.random.split(key, size)``; round i uses ``fold_in(key_j, i)``),
    vectorised with ``vmap``; a vmapped loop runs until its slowest element is accepted (5–7
    rounds for 10⁴ elements).  Everything is in log space, so a draw overflows only when its
    true value is not representable.

    Parameters
    ----------
    key : jax PRNG key
        Old-style uint32 key or new-style typed key.
    p : array_like
        Real index, broadcastable with ``a`` and ``b``.
    a : array_like
        a ≥ 0 (the coefficient of x); a = 0 only with p < 0.
    b : array_like
        b ≥ 0 (the coefficient of 1/x); b = 0 only with p > 0.
    sample_shape : tuple of int, optional
        Leading dimensions of independent draws (static under jit).
    dtype : dtype, optional
        float32 or float64; default: the floating type the parameters promote to.

    Returns
    -------
    x : jax.Array, shape ``sample_shape + broadcast_shapes(p.shape, a.shape, b.shape)``
        Positive draws; NaN where the parameters are invalid (improper density or NaN).
    """
    dtype = _resolve_dtype(dtype, p, a, b)
    return _gig(key, p, a, b, _as_shape(sample_shape), dtype)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _gig(key, p, a, b, sample_shape, dtype):
    p = jnp.asarray(p, dtype)
    a = jnp.asarray(a, dtype)
    b = jnp.asarray(b, dtype)
    out_shape = sample_shape + jnp.broadcast_shapes(p.shape, a.shape, b.shape)
    p, a, b = (jnp.broadcast_to(v, out_shape).reshape(-1) for v in (p, a, b))

    invert = p < 0
    lam = jnp.abs(p)
    a1 = jnp.where(invert, b, a)  # coefficient of x for the p >= 0 draw
    b1 = jnp.where(invert, a, b)
    valid = (
        jnp.isfinite(lam)
        & (a1 > 0)
        & (b1 >= 0)
        & jnp.isfinite(a1)
        & jnp.isfinite(b1)
        & ((b1 > 0) | (lam > 0))
    )
    omega = jnp.sqrt(a1) * jnp.sqrt(b1)
    root = jnp.hypot(lam, omega)
    # alpha = root - lam = omega² / (root + lam), evaluated without cancellation or omega².
    alpha = omega * (omega / jnp.where(valid, root + lam, 1.0))
    # Mode-shift scale (lam + root)/a1 = sqrt(b1/a1) * mode; finite as b1 -> 0.
    log_scale = jnp.log(lam + root) - jnp.log(a1)
    # Dummy but harmless values where invalid, so that the setup produces no NaN warnings.
    lam_s = jnp.where(valid, lam, 1.0)
    alpha_s = jnp.where(valid, alpha, 1.0)
    hp = _devroye_setup(lam_s, alpha_s)

    n = lam.shape[0]
    keys = jax.random.split(key, n)
    t_draw = jax.vmap(_devroye_draw)(keys, hp, valid)
    log_x = log_scale + t_draw
    x = jnp.exp(jnp.where(invert, -log_x, log_x))
    return x.astype(dtype).reshape(out_shape)
