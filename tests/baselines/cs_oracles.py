"""Test-only cvxpy oracles for the Crammer–Singer MKL baselines (M3K, OBSCURE).

Both estimators solve (docs/baselines_math.md §(d), §(e)) the convex problem

    min_{μ ≥ 0, ‖μ‖_q ≤ 1}  min_f  ½ Σ_m ‖w_m‖²/μ_m + C Σ_i s_i ℓ_i
      = max_β  Σ_i β_{i,y_i} − ‖(H_1(β), …, H_P(β))‖_{q*},   H_m = ½ Σ_c ‖L_mᵀ β_c‖²,

with ``Σ_c β_ic = 0``, ``β_ic ≤ C s_i [c = y_i]`` and ``K_m = L_m L_mᵀ`` (an eigen-factorisation,
:func:`oracles._factors`). M3K with ``q`` has ``q* = q/(q − 1)``; OBSCURE with the (2, p) norm is
the same problem with ``q = p/(2 − p)``, i.e. ``q* = p/(2(p − 1))``. The oracle solves the dual as
a generic convex program (Clarabel, gap tolerance 1e-8) and returns its optimal value, the
optimal ``β`` and the weights ``μ`` the solution implies: the multipliers of ``t_m ≥ H_m``, i.e.
``μ = ∇‖t‖_{q*}`` at ``t = H(β)`` (unique for ``1 < q*``; for ``q* = ∞`` the multipliers).
"""

from __future__ import annotations

import functools

import cvxpy as cp
import numpy as np
from oracles import _factors, _solve, make_problem


def cs_mkl_oracle(K, codes, C, q_star, sample_weight=None):
    """Optimal value, ``β: (N, n)`` and ``μ: (P,)`` of the Crammer–Singer MKL dual above."""
    codes = np.asarray(codes)
    N, n = codes.size, int(codes.max()) + 1
    s = np.ones(N) if sample_weight is None else np.asarray(sample_weight, float)
    upper = np.zeros((N, n))
    upper[np.arange(N), codes] = C * s
    onehot = (codes[:, None] == np.arange(n)[None, :]).astype(float)
    beta = cp.Variable((N, n))
    t = cp.Variable(K.shape[0])
    Ls = _factors(K)
    cons = [cp.sum(beta, axis=1) == 0, beta <= upper]
    cons += [
        t[m] >= 0.5 * sum(cp.sum_squares(L.T @ beta[:, c]) for c in range(n))
        for m, L in enumerate(Ls)
    ]
    value = _solve(
        cp.Problem(cp.Maximize(cp.sum(cp.multiply(onehot, beta)) - cp.norm(t, q_star)), cons)
    )
    mu = np.array([float(np.squeeze(c.dual_value)) for c in cons[2:]])
    return value, beta.value, mu


@functools.cache
def cs_problem(n_train: int = 30, n_kernels: int = 3, seed: int = 0):
    """``(K, y, Kt, yt)``: 3 classes, Gaussian kernels on features 0, 1 (informative) and 2
    (noise) of :func:`oracles.make_problem`."""
    K, y, Kt, yt = make_problem(n_train=n_train, n_test=20, n_classes=3, seed=seed)
    return K[:n_kernels], y, Kt[:n_kernels], yt


def cs_decision(Kt, mu, beta):
    """``F: (M, n)``, ``F_c = Σ_m μ_m Kt_m β_c`` from oracle (or fitted) weights and duals."""
    return np.einsum("m,mij,jc->ic", mu, Kt, beta)
