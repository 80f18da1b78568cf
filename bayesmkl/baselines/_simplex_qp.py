"""Maximise a possibly indefinite quadratic form θᵀQθ over the probability simplex.

MKMMC's θ-step (:mod:`bayesmkl.baselines.mkmmc`, docs/baselines_math.md paper C): the problem is a
non-convex QP when Q is indefinite. :func:`maximize_quadratic_on_simplex` returns the global
maximum by KKT enumeration over supports for small P and otherwise the best of projected-gradient
ascents from several starts (the current θ among them, so a step never lowers the objective).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["maximize_quadratic_on_simplex"]


def _enumerate_supports(Q: np.ndarray) -> tuple[np.ndarray, float]:
    """Global maximiser of ``θᵀQθ`` on the simplex by KKT enumeration over all supports.

    The maximum is attained in the relative interior of some face F (a vertex included). There θ
    is a stationary point of the quadratic on the affine hull of F: ``Q_FF θ_F = μ 1``,
    ``1ᵀθ_F = 1``. If that system is singular with a consistent solution set, the quadratic is
    constant along the null direction inside F, so the same value is also attained on a smaller
    face; if it is inconsistent, F holds no stationary point. Solving the nonsingular systems of
    all ``2^P − 1`` supports and keeping feasible (θ_F ≥ 0) solutions therefore finds the global
    maximum.
    """
    P = Q.shape[0]
    best_val, best = -np.inf, None
    for r in range(1, P + 1):
        for S in itertools.combinations(range(P), r):
            idx = list(S)
            A = np.zeros((r + 1, r + 1))
            A[:r, :r] = Q[np.ix_(idx, idx)]
            A[:r, r] = -1.0
            A[r, :r] = 1.0
            rhs = np.zeros(r + 1)
            rhs[r] = 1.0
            try:
                sol = np.linalg.solve(A, rhs)
            except np.linalg.LinAlgError:
                continue
            th = sol[:r]
            if not np.all(np.isfinite(th)) or th.min() < -1e-12:
                continue
            theta = np.zeros(P)
            theta[idx] = np.clip(th, 0.0, None)
            theta /= theta.sum()
            val = float(theta @ Q @ theta)
            if val > best_val:
                best_val, best = val, theta
    return best, best_val


def _project_rows(X: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``X: (S, P)`` onto the probability simplex (Duchi et
    al. 2008, sort-based; the batched form of :func:`~._simplex.project_simplex`)."""
    S, P = X.shape
    U = -np.sort(-X, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    positive = U - css / np.arange(1, P + 1) > 0  # True on a prefix; rho = its last index
    rho = P - 1 - np.argmax(positive[:, ::-1], axis=1)
    tau = css[np.arange(S), rho] / (rho + 1.0)
    return np.maximum(X - tau[:, None], 0.0)


def _projected_ascent(
    Q: np.ndarray,
    starts: np.ndarray,
    max_iter: int,
    tol: float,
    deadline: float | None = None,
    ftol: float = 1e-12,
    patience: int = 25,
) -> tuple[np.ndarray, np.ndarray]:
    """Monotone spectral projected-gradient ascent of ``θᵀQθ`` from every row of ``starts``.

    All rows ``(S, P)`` advance together (one ``(S, P) × (P, P)`` product per step, or two thin
    ones through the eigenvectors when ``Q`` has rank ≤ P/4, eigenvalues below 1e-14·‖Q‖₂
    dropped; the returned values use ``Q`` itself). Step: with
    ``g = 2Qθ`` and a Barzilai–Borwein length ``α`` (``sᵀs/|sᵀy|``, clipped to
    ``[1, 1e6] / (2‖Q‖₂)``; the first step is ``1/(2‖Q‖₂)``), the direction is
    ``d = Π(θ + αg) − θ`` (Π the simplex projection), and ``θ ← θ + t d`` with the ``t ∈ [0, 1]``
    that maximises the quadratic along ``d`` exactly. Since ``gᵀd ≥ ‖d‖²/α > 0`` for ``d ≠ 0``,
    every accepted step increases the value and stays in the simplex. A row stops when
    ``max|d| < tol`` or its relative gain falls to ``ftol``; all stop when the best value has
    gained less than ``ftol`` (relative) over ``patience`` steps, after ``max_iter`` steps, or at
    ``deadline`` (a ``time.perf_counter()`` value).

    Returns
    -------
    thetas : ndarray (S, P)
    values : ndarray (S,)
        ``θᵀQθ`` of each row, at least the start's value.
    """
    Th = np.array(starts, dtype=np.float64, ndmin=2)
    ev, U = np.linalg.eigh(Q)
    lip = 2.0 * float(np.max(np.abs(ev))) if Q.size else 0.0
    keep = np.abs(ev) > 1e-14 * lip
    if keep.sum() <= Q.shape[0] // 4:  # low rank (MKMMC: rank ≤ N·m): products through U Λ Uᵀ
        Uk, ek = U[:, keep], ev[keep]

        def times_q(X):
            return ((X @ Uk) * ek) @ Uk.T
    else:

        def times_q(X):
            return X @ Q

    G = 2.0 * times_q(Th)
    val = 0.5 * np.einsum("sp,sp->s", Th, G)
    if lip == 0:
        return Th, val
    alpha = np.full(Th.shape[0], 1.0 / lip)
    active = np.ones(Th.shape[0], dtype=bool)
    best = [float(val.max())]
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0 or (deadline is not None and time.perf_counter() > deadline):
            break
        if len(best) > patience and best[-1] - best[-1 - patience] <= ftol * abs(best[-1]):
            break
        T, g = Th[idx], G[idx]
        D = _project_rows(T + alpha[idx, None] * g) - T
        QD = times_q(D)
        gd = np.einsum("sp,sp->s", g, D)
        dqd = np.einsum("sp,sp->s", D, QD)
        concave = dqd < 0
        t = np.ones(idx.size)
        t[concave] = np.clip(-gd[concave] / (2.0 * dqd[concave]), 0.0, 1.0)
        gain = t * gd + t * t * dqd
        up = gain > 0  # rounding aside, always true for d != 0
        rows = idx[up]
        Th[rows] = T[up] + t[up, None] * D[up]
        G[rows] = g[up] + 2.0 * t[up, None] * QD[up]
        val[rows] += gain[up]
        ss = np.einsum("sp,sp->s", D, D)[up]
        sy = 2.0 * dqd[up]  # sᵀy / t² with s = t d, y = 2Qs
        bb = np.where(sy != 0, ss / np.maximum(np.abs(sy), 1e-300), 1e6 / lip)
        alpha[rows] = np.clip(bb, 1.0 / lip, 1e6 / lip)
        done = (np.max(np.abs(D), axis=1) < tol) | ~up
        done |= gain <= ftol * np.maximum(np.abs(val[idx]), 1e-300)
        active[idx[done]] = False
        best.append(float(val.max()))
    return Th, np.einsum("sp,sp->s", Th @ Q, Th)


def maximize_quadratic_on_simplex(
    Q: np.ndarray,
    theta0: np.ndarray | None = None,
    method: str = "auto",
    n_restarts: int = 10,
    max_iter: int = 500,
    tol: float = 1e-10,
    random_state=None,
    n_vertex_starts: int | None = 10,
    deadline: float | None = None,
) -> tuple[np.ndarray, float]:
    """Maximise ``θᵀQθ`` over the probability simplex (``Q`` symmetric, possibly indefinite).

    Parameters
    ----------
    Q : ndarray (P, P)
    theta0 : ndarray (P,) or None
        Current point; always a candidate, so the answer is never worse than it.
    method : {"auto", "enumerate", "multistart"}
        ``"enumerate"``: exact — KKT systems of every support (``2^P − 1`` small solves), then a
        polish by projected ascent. ``"multistart"``: every vertex is a candidate (its value is
        ``Q_tt``), and monotone projected-gradient ascent (:func:`_projected_ascent`) runs, all
        starts batched, from the ``n_vertex_starts`` best vertices, the barycentre, ``theta0``
        and ``n_restarts`` random Dirichlet(1) points; the best point is kept (local, not
        certified global). ``"auto"``: ``"enumerate"`` for ``P ≤ 12``, else ``"multistart"``.
    n_restarts : int
        Random starts of ``"multistart"``.
    max_iter, tol
        Projected-ascent iterations and the stopping threshold on ``max|Δθ|``.
    random_state : int, RandomState or None
    n_vertex_starts : int or None
        Vertices (highest ``Q_tt`` first) that ascent starts from; ``None`` starts from every
        vertex (``P`` runs: slow for hundreds of kernels). The other vertices are still compared
        by value.
    deadline : float or None
        ``time.perf_counter()`` value at which the ascent stops (the best point so far is kept).

    Returns
    -------
    theta : ndarray (P,)
    value : float
        ``θᵀQθ``.
    """
    Q = np.asarray(Q, dtype=np.float64)
    Q = 0.5 * (Q + Q.T)
    P = Q.shape[0]
    if method == "auto":
        method = "enumerate" if P <= 12 else "multistart"
    if method not in ("enumerate", "multistart"):
        raise ValueError(f"method must be 'auto', 'enumerate' or 'multistart'; got {method!r}")
    candidates = []
    if theta0 is not None:
        t0 = np.asarray(theta0, dtype=np.float64)
        candidates.append((t0, float(t0 @ Q @ t0)))
    if method == "enumerate":
        th, _ = _enumerate_supports(Q)
        starts = th[None, :]
    else:
        diag = np.diag(Q)
        best_vertex = int(np.argmax(diag))
        candidates.append((np.eye(P)[best_vertex], float(diag[best_vertex])))
        n_v = P if n_vertex_starts is None else min(P, int(n_vertex_starts))
        top = np.argsort(-diag, kind="stable")[:n_v]
        rng = check_random_state(random_state)
        rows = [np.eye(P)[top], np.full((1, P), 1.0 / P)]
        if theta0 is not None:
            rows.append(np.asarray(theta0, dtype=np.float64)[None, :])
        rows.append(rng.dirichlet(np.ones(P), size=int(n_restarts)))
        starts = np.concatenate(rows)
    Th, vals = _projected_ascent(Q, starts, max_iter, tol, deadline)
    k = int(np.argmax(vals))
    candidates.append((Th[k], float(vals[k])))
    theta, val = max(candidates, key=lambda c: c[1])
    return theta, val
