"""Multiple-kernel maximum margin criterion (MKMMC, Gu & Zhou; spec ``baselines.md`` paper C).

Supervised dimensionality reduction: find ``m`` directions ``𝒜 = [α_1 … α_m]: (N, m)`` with
``𝒜ᵀ𝒜 = I`` and kernel weights ``θ`` on the simplex maximising the kernel maximum margin criterion

    J(𝒜, θ) = Σ_ij W_ij ‖𝒜ᵀ K_θ[:, i] − 𝒜ᵀ K_θ[:, j]‖² = tr(𝒜ᵀ L_θ 𝒜) = θᵀ L_𝒜 θ,

with ``K_θ = Σ_t θ_t K_t``, the graph weights ``W_ij = 1/N − 2/N_k`` when ``y_i = y_j = k`` and
``1/N`` otherwise, and the Laplacian ``M = D − W``, ``D = diag(W 1)`` (here ``D = −I``, so
``M = 2 Σ_k 1_k 1_kᵀ / N_k − I − 11ᵀ/N``: +1 on the C − 1 between-class directions, −1 within
classes). Then

* ``L_θ = 2 K_θ M K_θ``  (N, N), and
* ``L_𝒜[t, u] = 2 tr(𝒜ᵀ K_t M K_u 𝒜)``  (P, P).

Alternating maximisation, from ``θ = 1/P``:

(a) 𝒜-step: the top ``m`` eigenvectors of ``L_θ`` (global maximiser of ``tr(𝒜ᵀL_θ𝒜)``);
(b) θ-step: ``max_{θ ∈ simplex} θᵀ L_𝒜 θ`` — a non-convex QP when ``L_𝒜`` is indefinite (``M`` has
    negative eigenvalues), see :func:`maximize_quadratic_on_simplex`. The current θ is one of the
    candidates, so the step never lowers J. When ``L_𝒜 ⪰ 0`` (common once the between-class part
    dominates) the maximum is a vertex: θ selects a single kernel.

The objective is therefore non-decreasing; iterations stop when its relative change falls below
``tol``. New points are embedded as ``z(x) = 𝒜ᵀ k_θ(x)`` and classified by 1-NN among the embedded
training points.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from scipy.linalg import eigh
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayesmkl._validation import Interval, check_choice, check_int, check_param, validate_labels
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._svm import combine
from bayesmkl.kernels.input import KernelInput

__all__ = [
    "MKMMC",
    "mmc_laplacian",
    "theta_matrix",
    "maximize_quadratic_on_simplex",
]


def mmc_laplacian(codes: np.ndarray) -> np.ndarray:
    """``M = D − W`` of the maximum margin criterion graph for integer class codes ``(N,)``.

    Returns
    -------
    ndarray (N, N)
        ``M = 2 Σ_k 1_k 1_kᵀ / N_k − I − 11ᵀ/N``; ``Σ_ij W_ij ‖z_i − z_j‖² = 2 tr(Zᵀ M Z)``.
    """
    codes = np.asarray(codes)
    N = codes.shape[0]
    same = codes[:, None] == codes[None, :]
    counts = np.bincount(codes)
    M = np.where(same, 2.0 / counts[codes][:, None], 0.0)
    M -= 1.0 / N
    M[np.diag_indices(N)] -= 1.0
    return M


def theta_matrix(K: np.ndarray, A: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``L_𝒜[t, u] = 2 tr(𝒜ᵀ K_t M K_u 𝒜)`` for ``K: (P, N, N)``, ``A: (N, m)``, ``M: (N, N)``.

    Returns
    -------
    ndarray (P, P), symmetric; ``θᵀ L_𝒜 θ = tr(𝒜ᵀ L_θ 𝒜)``.
    """
    P, N, _ = K.shape
    B = (K.reshape(P * N, N) @ A).reshape(P, N, -1)  # K_t 𝒜
    MB = np.einsum("ij,tjk->tik", M, B)
    L = 2.0 * np.einsum("tik,uik->tu", B, MB)
    return 0.5 * (L + L.T)


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


def _top_eigvecs(L: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    N = L.shape[0]
    w, V = eigh(0.5 * (L + L.T), subset_by_index=[N - m, N - 1])
    return w[::-1], V[:, ::-1]


class MKMMC(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Multiple-kernel maximum margin criterion: supervised embedding + 1-NN classifier.

    Alternates the 𝒜-step (top ``n_components`` eigenvectors of ``L_θ = 2 K_θ (D − W) K_θ``) and the
    θ-step ``max θᵀ L_𝒜 θ`` on the simplex, starting from ``θ = 1/P``, until the relative change of
    the objective ``J = tr(𝒜ᵀ L_θ 𝒜)`` is below ``tol`` (module docstring has the formulas).

    θ-step method: the QP maximises a possibly indefinite quadratic, so it is non-convex. With
    ``theta_solver="auto"`` it is solved *exactly* for ``P ≤ 12`` by enumerating the KKT systems of
    all ``2^P − 1`` supports, and for larger P by batched projected-gradient ascent started from
    the ``n_vertex_starts`` best vertices, the barycentre, the current θ and ``n_restarts`` random
    points (every vertex is also compared by value; best point kept). The current θ is always a
    candidate, so J never decreases.

    Cost: one θ-step is one ``P × P`` eigenvalue problem (the step size) plus at most ``max_iter``
    batched ascent steps of ``(n_vertex_starts + n_restarts + 2) × P × P``; for the 793 kernels of
    Sonar's SimpleMKL pool a fit takes seconds (it took minutes when ascent ran from all 793
    vertices). ``max_time`` bounds the wall-clock time of a fit.

    Parameters
    ----------
    kernels : str or KernelPool, default="simplemkl"
        Kernel specification; ``"precomputed"`` takes ``fit(K (P, N, N), y)`` and
        ``transform/predict(K_test (P, M, N))``.
    n_components : int or None, default=None
        Embedding dimension m. ``None`` uses ``n_classes − 1``: ``D − W`` has exactly
        ``n_classes − 1`` positive eigenvalues, so ``L_θ`` has at most that many positive
        directions (further directions would lower J). Must be ``≤ N``.
    max_iter : int, default=50
        Maximum number of alternations; reaching it before ``tol`` warns
        (``ConvergenceWarning``).
    tol : float, default=1e-6
        Relative objective change for stopping.
    theta_solver : {"auto", "enumerate", "multistart"}, default="auto"
    n_restarts : int, default=10
        Random starts of the multistart θ-solver.
    random_state : int, RandomState or None
    n_vertex_starts : int or None, default=10
        Vertices the multistart θ-solver ascends from (``None``: all ``P``).
    max_time : float or None, default=None
        Wall-clock budget in seconds (also bounds a θ-step in progress); stopping on it keeps
        the last θ and 𝒜 and issues a ``ConvergenceWarning`` that names the limit.
    kernel_names : sequence of str, optional
        Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
        with a pool, which names its kernels itself.

    Attributes
    ----------
    kernel_weights_ : ndarray (P,)
        θ, on the simplex.
    components_ : ndarray (N, m)
        𝒜, orthonormal columns.
    objective_ : ndarray (n_evals,)
        J after the initial 𝒜-step and after every θ- and 𝒜-step (non-decreasing).
    eigenvalues_ : ndarray (m,)
        Top eigenvalues of ``L_θ`` at the final θ.
    embedding_ : ndarray (N, m)
        Embedded training points ``K_θ 𝒜``.
    classes_ : ndarray
    n_iter_ : int
    kernel_names_ : list of str
    """

    def __init__(
        self,
        kernels="simplemkl",
        n_components=None,
        max_iter=50,
        tol=1e-6,
        theta_solver="auto",
        n_restarts=10,
        random_state=None,
        n_vertex_starts=10,
        max_time=None,
        kernel_names=None,
    ):
        self.kernels = kernels
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.theta_solver = theta_solver
        self.n_restarts = n_restarts
        self.random_state = random_state
        self.n_vertex_starts = n_vertex_starts
        self.max_time = max_time
        self.kernel_names = kernel_names

    def fit(self, X, y, sample_weight=None):
        """Fit the embedding and the 1-NN classifier.

        Parameters
        ----------
        X : array (N, d), or (P, N, N) with ``kernels="precomputed"``
        y : array (N,)
            Class labels (at least two classes).
        sample_weight : None
            Not supported: any value raises ``NotImplementedError``. MKMMC has no per-point
            loss to weight: its criterion is a pairwise graph over the training points, whose
            kernel columns are also the embedding's coordinates, and 1-NN prediction has no
            weighted form equal to repeating a row.

        Returns
        -------
        self
        """
        if sample_weight is not None:
            raise NotImplementedError(
                "MKMMC does not support sample_weight: its maximum-margin-criterion graph and "
                "1-NN rule have no per-sample loss to weight (see MKMMC.fit)"
            )
        check_choice("theta_solver", self.theta_solver, ("auto", "enumerate", "multistart"))
        check_int("max_iter", self.max_iter)
        nv = check_param("n_vertex_starts", self.n_vertex_starts, [None, Interval("int", 0, None)])
        budget = Budget("MKMMC", self.max_iter, self.max_time, unit="alternations")
        self.kernel_input_, K = KernelInput.fit(self.kernels, X, kernel_names=self.kernel_names)
        K = np.asarray(K, dtype=np.float64)
        P, N, _ = K.shape
        self.classes_, codes = validate_labels(y, N)
        if self.kernel_input_.pool is not None:
            self.n_features_in_ = int(np.asarray(X).shape[1])
        self.kernel_names_ = list(self.kernel_input_.names)
        m = len(self.classes_) - 1 if self.n_components is None else self.n_components
        check_param(
            "n_components", m, [Interval("int", 1, N, description=f"an integer in [1, N={N}]")]
        )
        rng = check_random_state(self.random_state)
        M = mmc_laplacian(codes)

        theta = np.full(P, 1.0 / P)
        Kt = combine(K, theta)
        w, A = _top_eigvecs(2.0 * Kt @ M @ Kt, m)
        history = [float(w.sum())]
        n_iter = 0
        converged = False
        deadline = None if budget.max_time is None else budget.start + budget.max_time
        while not budget.exhausted(n_iter):
            n_iter += 1
            J_old = history[-1]
            Q = theta_matrix(K, A, M)
            theta, val = maximize_quadratic_on_simplex(
                Q,
                theta0=theta,
                method=self.theta_solver,
                n_restarts=self.n_restarts,
                random_state=rng,
                n_vertex_starts=nv,
                deadline=deadline,
            )
            history.append(val)
            Kt = combine(K, theta)
            w, A = _top_eigvecs(2.0 * Kt @ M @ Kt, m)
            history.append(float(w.sum()))
            if abs(history[-1] - J_old) <= self.tol * max(abs(J_old), 1e-300):
                converged = True
                break
        if not converged:
            budget.warn(n_iter, "objective J")
        self.n_iter_ = n_iter
        self.kernel_weights_ = theta
        self.components_ = A
        self.eigenvalues_ = w
        self.objective_ = np.asarray(history)
        self.embedding_ = Kt @ A
        self._knn = KNeighborsClassifier(n_neighbors=1).fit(self.embedding_, codes)
        return self

    def transform(self, X):
        """Embed new points: ``z(x) = 𝒜ᵀ k_θ(x)``.

        Parameters
        ----------
        X : array (M, d), or (P, M, N) with ``kernels="precomputed"``

        Returns
        -------
        ndarray (M, m)
        """
        check_is_fitted(self, "components_")
        Kt = np.asarray(self.kernel_input_.cross(X), dtype=np.float64)
        return combine(Kt, self.kernel_weights_) @ self.components_

    def predict(self, X):
        """Labels ``(M,)`` of the nearest embedded training point."""
        check_is_fitted(self, "components_")
        return self.classes_[self._knn.predict(self.transform(X))]

    def selected_kernels(self, rel_threshold: float = 1e-3) -> int:
        """Number of kernels with ``θ_t > rel_threshold · max θ``."""
        check_is_fitted(self, "kernel_weights_")
        th = self.kernel_weights_
        return int(np.sum(th > rel_threshold * th.max()))
