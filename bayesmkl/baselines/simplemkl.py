"""SimpleMKL: L1-MKL by reduced gradient descent on the simplex (Rakotomamonjy et al., JMLR 2008).

Problem: ``min_{μ ∈ simplex} J(μ)``, ``J(μ) = Σ_c max_{α_c} [1ᵀα_c − Σ_m μ_m h_{c,m}(α_c)]``, the
sum of the one-vs-rest C-SVC duals with shared weights (C = 1 for a binary problem). ``J`` is
convex with gradient ``−H``, ``H_m = Σ_c ½ v_cᵀK_m v_c``. The dual of the MKL problem is
``max_α Σ_c 1ᵀα_c − max_m H_m(α)`` (the QCQP ``max τ s.t. S_m(α) ≥ τ``), so the duality gap at
``μ`` and its SVM solutions is ``max_m H_m − μᵀH ≥ 0``.

One iteration (Rakotomamonjy et al., Algorithm 1):

1. ``u = argmax_m μ_m``; reduced-gradient descent direction ``D_m = H_m − H_u`` (``m ≠ u``), set to
   0 where ``μ_m = 0`` and ``D_m < 0``, and ``D_u = −Σ_{m≠u} D_m`` (so ``ΣD = 0``).
2. Take the maximal step (the one that zeroes a component), drop that component from ``D``, and
   repeat along the updated direction while ``J`` decreases. The path of maximal steps depends
   only on ``μ`` and ``D``, so it is computed first and the breakpoint where ``J`` stops
   decreasing is found by exponential + binary search with objective-only SVM solves
   (the same breakpoint as SimpleMKL's sequential scan when ``J`` is unimodal along the path,
   but ``O(log n)`` solves instead of ``n``).
3. Line search on ``J`` over the following segment ``[0, γ_max]``. The directional derivative
   ``φ'(γ) = −Dᵀ H(μ + γD)`` comes free with every SVM solve, so the search is a safeguarded
   false-position (regula falsi) root search on ``φ'`` (``φ`` is convex) rather than a golden
   section on ``φ``; the best point evaluated is kept.

Stop when the relative duality gap ``(max_m H_m − μᵀH)/J`` is ``≤ tol``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._solvers import (
    IterativeMKLClassifier,
    MKLFit,
    SolverOptions,
    WeightedSVMs,
    relative_gap,
    solve_at_weights,
    with_gradient,
)

Evaluate = Callable[[np.ndarray, bool], WeightedSVMs]


def _descent_direction(mu: np.ndarray, H: np.ndarray, u: int) -> np.ndarray:
    """Reduced-gradient descent direction on the simplex w.r.t. the largest weight ``u``."""
    D = H - H[u]
    D[(mu <= 0) & (D < 0)] = 0.0
    D[u] = 0.0
    D[u] = -D.sum()
    return D


def _on_simplex(mu: np.ndarray) -> np.ndarray:
    """Clip to ``μ ≥ 0``, snap weights below ``1e-12 · max μ`` to exactly 0, renormalise.

    Rounding in ``μ + γD`` leaves ~1e-17 remnants of weights that should be zero; kept, they
    would make the next maximal step negligible. (A snapped kernel can re-enter: the descent
    direction lets zero weights grow when their ``H_m`` exceeds ``H_u``.)
    """
    mu = np.maximum(mu, 0.0)
    mu[mu < 1e-12 * mu.max()] = 0.0
    return mu / mu.sum()


def _line_search(
    s0: WeightedSVMs,
    start: np.ndarray,
    D: np.ndarray,
    gmax: float,
    s1: WeightedSVMs,
    evaluate: Evaluate,
    max_evals: int = 12,
) -> WeightedSVMs:
    """Minimise ``φ(γ) = J(start + γD)`` on ``[0, γ_max]`` given the end states ``s0``, ``s1``.

    Safeguarded false position on ``φ'(γ) = −DᵀH(γ)``; stops when ``|φ'| ≤ 0.01 |φ'(0)|``,
    the bracket collapses or ``max_evals`` SVM solves were spent. Returns the best state seen.
    """
    d0 = -D @ s0.H
    best = s0 if s0.J <= s1.J else s1
    if d0 >= 0:
        return best
    lo, dlo, hi, dhi = 0.0, d0, gmax, -D @ s1.H
    for _ in range(max_evals):
        width = hi - lo
        if width <= 1e-12 * gmax:
            break
        g = lo - dlo * width / (dhi - dlo) if dhi > dlo else lo + 0.5 * width
        g = min(max(g, lo + 0.05 * width), hi - 0.05 * width)
        st = evaluate(_on_simplex(start + g * D), True)
        d = -D @ st.H
        if st.J < best.J:
            best = st
        if abs(d) <= 1e-2 * abs(d0):
            break
        if d < 0:
            lo, dlo = g, d
        else:
            hi, dhi = g, d
    return best


def _maximal_step_path(mu: np.ndarray, D: np.ndarray, u: int):
    """SimpleMKL's sequence of maximal steps from ``μ`` along ``D`` (pure geometry, no SVM).

    Each step goes as far as the first weight that reaches 0, zeroes it, drops it from ``D`` and
    re-balances ``D_u``; the path ends when the reference weight ``u`` vanishes or no weight
    decreases any more. Negligible steps (``γ·max|D| ≤ 1e-12``, a vanishing remnant) are merged.

    Returns
    -------
    segments : list of (start (P,), direction (P,), length float)
    end : ndarray (P,)
        The last breakpoint.
    """
    segments = []
    cur, D = mu.copy(), D.copy()
    # each step zeroes one more weight (and its direction), so at most P steps: the cap only
    # catches arithmetic that went non-finite
    for _ in range(mu.size + 1):
        neg = np.flatnonzero(D < 0)
        if neg.size == 0:
            break
        ratios = cur[neg] / -D[neg]
        k = int(neg[np.argmin(ratios)])
        gmax = float(ratios.min())
        nxt = cur + gmax * D
        nxt[k] = 0.0
        nxt = _on_simplex(nxt)
        if gmax * np.max(np.abs(D)) > 1e-12:
            segments.append((cur, D.copy(), gmax))
        cur = nxt
        if k == u:
            break
        D[(cur <= 0) & (D < 0)] = 0.0
        D[u] = 0.0
        D[u] = -D.sum()
    else:
        raise FloatingPointError(
            f"SimpleMKL: the maximal-step path did not end after {mu.size + 1} steps (the "
            "weights or the descent direction are not finite)"
        )
    return segments, cur


def reduced_gradient_step(
    s: WeightedSVMs, evaluate: Evaluate, complete: Callable[[WeightedSVMs], WeightedSVMs]
) -> WeightedSVMs:
    """One SimpleMKL iteration from ``s``; returns a state (with ``H``) with ``J ≤ s.J``.

    SimpleMKL scans the breakpoints of the maximal-step path one SVM solve at a time until ``J``
    stops decreasing, then line-searches the next segment. Here the breakpoint where ``J``
    first stops decreasing is located by exponential + binary search over the breakpoints
    (objective-only solves) — the same point when ``J`` is unimodal along the path, with
    ``O(log n)`` instead of ``n`` SVM solves for a path of ``n`` breakpoints (early iterations on
    large pools zero hundreds of weights).

    Parameters
    ----------
    s : WeightedSVMs
        Current weights (on the simplex) and their SVM solutions, with ``H``.
    evaluate : callable
        ``(μ: (P,), gradient: bool) → WeightedSVMs``.
    complete : callable
        Fills in ``H`` of a state evaluated with ``gradient=False``.

    Returns
    -------
    WeightedSVMs
    """
    u = int(np.argmax(s.mu))
    D = _descent_direction(s.mu, s.H, u)
    if np.max(np.abs(D)) <= 1e-14 * max(np.max(np.abs(s.H)), 1e-300):
        return s
    segments, end = _maximal_step_path(s.mu, D, u)
    n = len(segments)
    if n == 0:
        return s
    points = [seg[0] for seg in segments] + [end]
    states = {0: s}

    def J(i):
        if i not in states:
            states[i] = evaluate(points[i], False)
        return states[i].J

    lo, i, hi = 0, 1, None
    while True:  # exponential search for a breakpoint where J stops decreasing
        if J(i) < J(lo):
            lo = i
            if i == n:
                break
            i = min(2 * i, n)
        else:
            hi = i
            break
    while hi is not None and hi - lo > 1:  # then bisection down to one segment
        mid = (lo + hi) // 2
        if J(mid) < J(lo):
            lo = mid
        else:
            hi = mid
    if hi is None:  # J decreased all along the path
        return complete(states[lo])
    start, direction, gmax = segments[lo]
    return _line_search(
        complete(states[lo]), start, direction, gmax, complete(states[hi]), evaluate
    )


def solve_simplemkl(
    K: np.ndarray,
    Y: np.ndarray,
    opts: SolverOptions,
    *,
    mu0: np.ndarray | None = None,
    name: str = "SimpleMKL",
) -> MKLFit:
    """Run SimpleMKL until the relative duality gap is ``≤ tol`` (or ``max_iter`` iterations).

    Parameters
    ----------
    K : ndarray (P, N, N)
    Y : ndarray (C, N)
        ±1 one-vs-rest targets.
    opts : SolverOptions
        ``C``, ``tol`` (on the relative duality gap), ``max_iter``, ``svc_tol``, ``max_time``
        (checked between iterations) and ``sample_weight``.
    mu0 : ndarray (P,), optional
        Initial weights on the simplex (default uniform).
    name : str
        Used in warnings.

    Returns
    -------
    MKLFit
    """
    C, tol, max_iter, svc_tol, max_time, sample_weight = opts
    budget = Budget(name, max_iter, max_time, unit="weight updates")
    P = K.shape[0]

    def evaluate(mu, gradient=True):
        return solve_at_weights(
            K, Y, mu, C, svc_tol, gradient=gradient, sample_weight=sample_weight
        )

    def complete(state):
        return with_gradient(K, state)

    def gap_of(state):
        return relative_gap(state.H.max() - state.mu @ state.H, state.J)

    s = evaluate(np.full(P, 1.0 / P) if mu0 is None else _on_simplex(np.asarray(mu0, float)))
    step = lambda s: reduced_gradient_step(s, evaluate, complete)  # noqa: E731
    return descend(s, step, gap_of, tol, budget, name, "the SVM tolerance svc_tol")


def descend(s, step, gap_of, tol: float, budget: Budget, name: str, inner: str) -> MKLFit:
    """Apply ``step`` from ``s`` until ``gap_of`` is at most ``tol`` or the budget is spent.

    A step that returns its input unchanged (no descent along the reduced gradient) ends the
    run with a ``ConvergenceWarning`` naming ``inner``, the solver tolerance that may be too
    loose; a spent budget with the gap still above ``tol`` warns through ``budget``.
    """
    history = [s.J]
    n_iter = 0
    while gap_of(s) > tol and not budget.exhausted(n_iter):
        new = step(s)
        n_iter += 1
        if new is s:
            warnings.warn(
                f"{name}: no descent along the reduced gradient (relative duality gap "
                f"{gap_of(s):.3g} > tol={tol}); {inner} may be too loose",
                ConvergenceWarning,
                stacklevel=3,
            )
            break
        s = new
        history.append(s.J)
    else:
        if gap_of(s) > tol:
            budget.warn(n_iter, "duality gap")
    return MKLFit(s, np.array(history), n_iter, gap_of(s))


@shared_doc
class SimpleMKL(IterativeMKLClassifier):
    """L1-MKL (weights on the simplex) by SimpleMKL's reduced gradient (Rakotomamonjy et al. 2008).

    Multiclass problems are one-vs-rest with shared weights; the objective is then the sum of
    the binary SVM duals and the gradient is summed likewise.

    Parameters
    ----------
    {{kernels}}
    {{C}}
    tol : float, default=1e-3
        Relative duality gap ``(max_m H_m − μᵀH) / J`` at which to stop.
    max_iter : int, default=500
        Maximal number of reduced-gradient iterations.
    svc_tol : float, default=1e-6
        libsvm stopping tolerance (the gradient comes from the SVM solution, so keep it tight).
    {{max_time}}
    {{fit_params}}

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        Weights on the simplex (typically sparse).
    {{svm_attributes}}
    objective_ : ndarray ``(n_iter_ + 1,)``
        ``J(μ)`` after each iteration (decreasing).
    {{gap_attributes}}
    """

    def _fit_kernels(self, K: np.ndarray, Y: np.ndarray, sample_weight=None) -> None:
        self._store(solve_simplemkl(K, Y, self._solver_options(sample_weight)))
