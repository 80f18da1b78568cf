"""Geometry of the kernel-weight sets used by the SVM-based MKL baselines (pure numpy helpers).

Every baseline minimises ``J(μ) = Σ_c max_α [1ᵀα_c − μᵀh_c(α_c)]`` (plus, for SM2MKL, a ridge
term) over a convex set of weights ``μ: (P,)``. Two operations per set are needed:

``*_min_ratio(a, ...)``
    The analytic μ-step of the alternating (block-coordinate) solvers:
    ``argmin_{μ ∈ set} Σ_m a_m / μ_m`` for ``a_m = ½‖f_m‖² ≥ 0`` (terms with ``a_m = 0`` cost
    nothing).
``*_support(h, ...)``
    The support function ``max_{μ ∈ set} μᵀh`` for ``h ≥ 0``; with ``h = Σ_c h_c(α_c)`` it gives
    the dual bound ``Σ_c 1ᵀα_c − support(h)`` and hence the duality gap
    ``support(h) − μᵀh`` of a weight vector ``μ`` at its SVM solutions.

Sets
----
=========================  ===============================================  ==================
set                        definition                                       used by
=========================  ===============================================  ==================
simplex                    μ ≥ 0, Σμ = 1                                    SimpleMKL, SM2MKL
box-capped simplex         Σμ = 1, 0 ≤ μ ≤ θ   (θ ≥ 1/P)                    SM1MKL
Lp sphere / ball           μ ≥ 0, ‖μ‖_p ≤ 1    (p ≥ 1)                      LpMKL, square loss
elastic-net ball           μ ≥ 0, vΣμ + (1 − v)Σμ² ≤ 1   (0 ≤ v ≤ 1)        SGMKL
=========================  ===============================================  ==================
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

#: Most doublings of the bracket of :func:`elastic_net_support`'s root (2^1100 > float max).
_MAX_DOUBLINGS = 1100


def _as_nonnegative(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"expected a non-empty vector; got shape {a.shape}")
    return np.maximum(a, 0.0)


# ---------------------------------------------------------------------------------------------
# simplex
# ---------------------------------------------------------------------------------------------


def project_simplex(x) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al., ICML 2008, sort-based).

    Parameters
    ----------
    x : array_like, shape (P,)

    Returns
    -------
    ndarray, shape (P,)
        ``argmin_{μ ≥ 0, Σμ = 1} ‖μ − x‖₂``, in ``O(P log P)``.
    """
    x = np.asarray(x, dtype=np.float64)
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, x.size + 1)
    rho = np.nonzero(u - css / k > 0)[0][-1]
    tau = css[rho] / (rho + 1.0)
    return np.maximum(x - tau, 0.0)


# ---------------------------------------------------------------------------------------------
# box-capped simplex (SM1MKL, Xu et al. 2013, Lemma 8 / eq. 25)
# ---------------------------------------------------------------------------------------------


def box_simplex_min_ratio(a, theta: float) -> np.ndarray:
    """Closed-form ``argmin Σ_m a_m/μ_m`` over ``{Σμ = 1, 0 ≤ μ ≤ θ}`` (Lemma 8, eq. 25).

    With ``s = √a`` sorted decreasingly, ``ω`` is the first index with
    ``s_{ω+1}(1 − ωθ) ≤ θ Σ_{m>ω} s_m``; the ``ω`` largest weights sit on the cap ``θ`` and the rest
    share the remaining mass ``1 − ωθ`` in proportion to ``s``. (The paper's strict ``<`` is
    relaxed to ``≤``: on equality the first uncapped weight equals ``θ`` either way, and ``≤``
    keeps ``θ = 1/P`` well defined.) For ``θ ≥ 1`` this is ``μ ∝ √a``, the group-lasso /
    SimpleMKL analytic update.

    Parameters
    ----------
    a : array_like, shape (P,)
        Non-negative ``½‖f_m‖²``.
    theta : float
        Cap, ``θ ≥ 1/P``.

    Returns
    -------
    ndarray, shape (P,)
        The minimiser. ``θP ≤ 1 + 1e-12`` returns exactly ``1/P`` (the only feasible point);
        an all-zero ``a`` returns the uniform vector.
    """
    a = _as_nonnegative(a)
    P = a.size
    if theta * P < 1.0 - 1e-12:
        raise ValueError(f"the box-capped simplex is empty: theta={theta} < 1/P = {1.0 / P}")
    if theta * P <= 1.0 + 1e-12 or not np.any(a > 0):
        return np.full(P, 1.0 / P)
    s = np.sqrt(a)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    tail = np.cumsum(ss[::-1])[::-1]  # tail[w] = Σ_{m ≥ w} ss[m]  (0-based)
    budget = 1.0 - theta * np.arange(P)
    w = int(np.argmax(ss * budget <= theta * tail))  # the last index always qualifies (θP > 1)
    mu_sorted = np.empty(P)
    mu_sorted[:w] = theta
    if tail[w] > 0:
        mu_sorted[w:] = budget[w] * ss[w:] / tail[w]
    else:  # only zero-cost kernels remain: any split is optimal; share evenly (≤ θ since θP ≥ 1)
        mu_sorted[w:] = budget[w] / (P - w)
    mu = np.empty(P)
    mu[order] = mu_sorted
    return mu


def box_simplex_support(h, theta: float) -> float:
    """``max μᵀh`` over ``{Σμ = 1, 0 ≤ μ ≤ θ}``: the largest entries of ``h`` filled greedily.

    Parameters
    ----------
    h : array_like, shape (P,)
    theta : float
        Cap, ``θ ≥ 1/P``; ``θ ≥ 1`` gives ``max(h)`` (the simplex).

    Returns
    -------
    float
    """
    h = np.asarray(h, dtype=np.float64)
    if theta >= 1.0:
        return float(h.max())
    hs = np.sort(h)[::-1]
    w = np.clip(1.0 - theta * np.arange(h.size), 0.0, theta)
    return float(w @ hs)


def simplex_ridge_support(h, theta: float) -> float:
    """``max_{μ ∈ simplex} μᵀh − ‖μ‖²/(2θ)`` (SM2MKL's dual term), attained at ``Π(θh)``.

    Parameters
    ----------
    h : array_like, shape (P,)
    theta : float
        ``θ > 0``; ``θ = inf`` gives ``max(h)``.

    Returns
    -------
    float
    """
    h = np.asarray(h, dtype=np.float64)
    if np.isinf(theta):
        return float(h.max())
    mu = project_simplex(theta * h)
    return float(mu @ h - mu @ mu / (2.0 * theta))


# ---------------------------------------------------------------------------------------------
# Lp ball (Kloft et al. 2011)
# ---------------------------------------------------------------------------------------------


def lp_min_ratio(a, p: float) -> np.ndarray:
    """Kloft's analytic update: ``argmin Σ a_m/μ_m`` over ``{μ ≥ 0, ‖μ‖_p ≤ 1}``.

    ``μ_m = a_m^{1/(p+1)} / (Σ_k a_k^{p/(p+1)})^{1/p}``, i.e. with ``a_m = ½‖w_m‖²`` the formula
    ``μ_m = ‖w_m‖^{2/(p+1)} / (Σ_k ‖w_k‖^{2p/(p+1)})^{1/p}`` (the expression is invariant to scaling
    ``a``). ``p = 1`` gives ``μ ∝ √a`` (group lasso), ``p = inf`` gives all ones.

    Parameters
    ----------
    a : array_like, shape (P,)
        Non-negative ``½‖w_m‖²``.
    p : float
        ``p ≥ 1`` or ``np.inf``.

    Returns
    -------
    ndarray, shape (P,)
        A point of the unit Lp sphere (the uniform one, ``P^{-1/p}``, when ``a`` is all zero).
    """
    a = _as_nonnegative(a)
    P = a.size
    if np.isinf(p):
        return np.ones(P)
    if not np.any(a > 0):
        return np.full(P, P ** (-1.0 / p))
    mu = (a / a.max()) ** (1.0 / (p + 1.0))
    return mu / lp_norm(mu, p)


def lp_norm(x, p: float) -> float:
    """``‖x‖_p`` for ``p ∈ [1, inf]``, scaled to avoid overflow for large ``p``.

    Parameters
    ----------
    x : array_like, shape (P,)
    p : float

    Returns
    -------
    float
    """
    x = np.abs(np.asarray(x, dtype=np.float64))
    m = x.max()
    if m == 0 or np.isinf(p):
        return float(m)
    return float(m * np.sum((x / m) ** p) ** (1.0 / p))


def lp_support(h, p: float) -> float:
    """``max μᵀh`` over ``{μ ≥ 0, ‖μ‖_p ≤ 1}`` (``h ≥ 0``): the dual norm ``‖h‖_q``, 1/p + 1/q = 1.

    Parameters
    ----------
    h : array_like, shape (P,)
    p : float

    Returns
    -------
    float
    """
    h = _as_nonnegative(h)
    if p == 1:
        return float(h.max())
    q = 1.0 if np.isinf(p) else p / (p - 1.0)
    return lp_norm(h, q)


# ---------------------------------------------------------------------------------------------
# elastic-net ball (SGMKL, Yang et al. 2011)
# ---------------------------------------------------------------------------------------------


def _elastic_net_value(mu: np.ndarray, v: float) -> float:
    return float(v * mu.sum() + (1.0 - v) * (mu @ mu))


def _cubic_root(c: np.ndarray, v: float) -> np.ndarray:
    """Positive root ``μ`` of ``2(1 − v)μ³ + vμ² = c`` (``0 < v < 1``, ``c ≥ 0``), vectorised.

    The left side is increasing and convex on ``μ > 0``, so Newton's method started above the
    root (at the smaller of the one-term solutions ``√(c/v)`` and ``(c/(2(1−v)))^{1/3}``)
    decreases monotonically to it.
    """
    mu = np.minimum(np.sqrt(c / v), np.cbrt(c / (2.0 * (1.0 - v))))
    for _ in range(200):
        f = 2.0 * (1.0 - v) * mu**3 + v * mu**2 - c
        df = 6.0 * (1.0 - v) * mu**2 + 2.0 * v * mu
        step = np.divide(f, df, out=np.zeros_like(mu), where=df > 0)
        mu = np.maximum(mu - step, 0.0)
        if np.all(np.abs(step) <= 1e-15 * np.maximum(mu, 1e-300)):
            break
    return mu


def elastic_net_min_ratio(a, v: float) -> np.ndarray:
    """``argmin Σ a_m/μ_m`` over ``{μ ≥ 0, vΣμ + (1 − v)Σμ² ≤ 1}`` (SGMKL's μ-step).

    Derivation: the constraint is active at the optimum (the objective decreases in every
    ``μ_m`` with ``a_m > 0``). Stationarity of the Lagrangian gives, for each ``m`` with
    ``a_m > 0``, ``a_m/μ_m² = λ(v + 2(1 − v)μ_m)``, i.e. ``μ_m`` is the unique positive root of
    ``2(1 − v)μ³ + vμ² = t·a_m`` with ``t = 1/λ``. Each root increases with ``t``, so the active
    constraint ``g(t) = vΣμ(t) + (1 − v)Σμ(t)² = 1`` is a monotone 1-D equation, solved by
    bracketing and Brent's method; the inner cubic is solved by Newton's method.
    ``v = 1`` (L1) gives ``μ ∝ √a`` and ``v = 0`` (L2) gives ``μ ∝ a^{1/3}``, both in closed form.

    Parameters
    ----------
    a : array_like, shape (P,)
        Non-negative ``½‖f_m‖²``.
    v : float
        Mixing parameter in ``[0, 1]``.

    Returns
    -------
    ndarray, shape (P,)
        A point on the boundary of the elastic-net ball (the uniform boundary point when ``a``
        is all zero).
    """
    a = _as_nonnegative(a)
    P = a.size
    if not np.any(a > 0):
        a = np.ones(P)
    a = a / a.max()
    if v >= 1.0:
        s = np.sqrt(a)
        return s / s.sum()
    if v <= 0.0:
        return lp_min_ratio(a, 2.0)

    def g(log_t):
        return _elastic_net_value(_cubic_root(np.exp(log_t) * a, v), v) - 1.0

    # bracket on log t (g increases with log t), then Brent
    lo, hi = -1.0, 1.0
    for _ in range(200):
        if g(hi) >= 0:
            break
        lo, hi = hi, hi + 2.0
    for _ in range(200):
        if g(lo) <= 0:
            break
        lo, hi = lo - 2.0, lo
    log_t = brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    return _cubic_root(np.exp(log_t) * a, v)


def elastic_net_support(h, v: float) -> float:
    """``max μᵀh`` over ``{μ ≥ 0, vΣμ + (1 − v)Σμ² ≤ 1}`` for ``h ≥ 0``.

    KKT: ``μ_m = (s·h_m − v)₊ / (2(1 − v))`` with ``s = 1/λ`` chosen so the constraint is active
    (monotone 1-D root, Brent). ``v = 1`` gives ``max(h)``, ``v = 0`` gives ``‖h‖₂``.

    Parameters
    ----------
    h : array_like, shape (P,)
    v : float
        Mixing parameter in ``[0, 1]``.

    Returns
    -------
    float
    """
    h = _as_nonnegative(h)
    hmax = h.max()
    if hmax == 0:
        return 0.0
    if v >= 1.0:
        return float(hmax)
    if v <= 0.0:
        return float(np.linalg.norm(h))
    hn = h / hmax

    def mu_of(s):
        return np.maximum(s * hn - v, 0.0) / (2.0 * (1.0 - v))

    def g(s):
        return _elastic_net_value(mu_of(s), v) - 1.0

    lo = v  # g(lo) = −1: every μ_m is zero
    hi = 2.0 * v + 1.0
    # g grows without bound, so doubling brackets its root; 1100 doublings pass float max
    for _ in range(_MAX_DOUBLINGS):
        if not g(hi) < 0:
            break
        lo, hi = hi, 2.0 * hi
    else:
        raise FloatingPointError(
            f"elastic-net support: no bracket of the root after {_MAX_DOUBLINGS} doublings "
            f"(h has non-finite or extreme values: max {hmax:.3g})"
        )
    s = brentq(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(hmax * (mu_of(s) @ hn))
