"""Multiple-kernel maximum margin criterion (MKMMC, Gu & Zhou; docs/baselines_math.md paper C).

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

import numpy as np
from scipy.linalg import eigh
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.neighbors import KNeighborsClassifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayesmkl.baselines._base import KERNEL_NAMES, KERNELS, ParamsMixin, fit_kernel_input
from bayesmkl.baselines._budget import Budget
from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.baselines._simplex_qp import maximize_quadratic_on_simplex
from bayesmkl.baselines._svm import combine
from bayesmkl.estimators._validation import (
    MAX_TIME,
    NO_VALIDATION,
    Interval,
    Options,
    check_param,
    validate_labels,
)

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


def _top_eigvecs(L: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    N = L.shape[0]
    w, V = eigh(0.5 * (L + L.T), subset_by_index=[N - m, N - 1])
    return w[::-1], V[:, ::-1]


@shared_doc
class MKMMC(ParamsMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
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
    {{kernel_names}}

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

    _parameter_constraints = {
        "kernels": KERNELS,
        "n_components": [None, Interval("int", 1, None, closed="left")],  # ≤ N: checked in fit
        "max_iter": [Interval("int", 1, None, closed="left")],
        "tol": [Interval("real", 0, None, closed="left")],
        "theta_solver": [Options("auto", "enumerate", "multistart")],
        "n_restarts": [Interval("int", 0, None, closed="left")],
        "random_state": NO_VALIDATION,  # check_random_state
        "n_vertex_starts": [None, Interval("int", 0, None)],
        "max_time": MAX_TIME,
        "kernel_names": KERNEL_NAMES,
    }

    def __init__(
        self, kernels="simplemkl", *, n_components=None, max_iter=50, tol=1e-6, theta_solver="auto",
        n_restarts=10, random_state=None, n_vertex_starts=10, max_time=None, kernel_names=None,
    ):  # fmt: skip
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

    @shared_doc
    def fit(self, X, y, sample_weight=None):
        """Fit the embedding and the 1-NN classifier.

        Parameters
        ----------
        {{fit_X_y_unweighted}}

        Returns
        -------
        self

        Raises
        ------
        NotImplementedError
            For any ``sample_weight``. MKMMC has no per-point loss to weight: its criterion is a
            pairwise graph over the training points, whose kernel columns are also the
            embedding's coordinates, and 1-NN prediction has no weighted form equal to repeating
            a row.
        """
        if sample_weight is not None:
            raise NotImplementedError(
                "MKMMC does not support sample_weight: its maximum-margin-criterion graph and "
                "1-NN rule have no per-sample loss to weight (see MKMMC.fit)"
            )
        self._validate_params()
        nv = self.n_vertex_starts
        budget = Budget("MKMMC", self.max_iter, self.max_time, unit="alternations")
        K = fit_kernel_input(self, X)
        P, N, _ = K.shape
        self.classes_, codes = validate_labels(y, N)
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
