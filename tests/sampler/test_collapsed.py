"""The collapsed kernel-weight target of :mod:`bayesmkl.sampler.collapsed`.

Oracle: the density the module claims to compute, written out densely in numpy. With
pseudo-observations T = δ(1 + λ), V = λ, the active set A_c = the ``n_active`` largest ν_ci and
I_c the rest,

    T_c ~ N(K_w a_{I,c},  diag V_c + K_w[:, A_c] diag(ν_{A_c}) K_w[:, A_c]ᵀ + τ 1 1ᵀ),

independently over classes c, K_w = Σ_m w_m K_m. Its log density is evaluated by a dense
Cholesky factorisation (no Woodbury, no determinant lemma). ``collapsed_log_lik`` is specified
up to a w-free constant, so the tests compare differences between values of w (and, for the
potential, between values of e); they do so to 1e-9 relative, far above rounding (~1e-13) and
far below any modelling error (a wrong covariance term changes the differences at O(1)).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import cho_solve, cholesky

from bayesmkl.sampler.collapsed import (
    MAX_GATHERED,
    collapsed_log_lik,
    collapsed_potential_and_grad,
    collapsed_setup,
    n_active_for,
)
from tests.sampler.helpers import make_problem

TAU = 0.3


def _problem(seed, N, C, P=4, stiff=False):
    """Kernels, sample weights and augmentation variables of a random problem (numpy).

    ``stiff``: every third ν is 1e-10 (pruned points) and λ spans 1e-6…1, as in late sampling.
    """
    pb = make_problem(seed=seed, N=N, C=C, P=P)
    K, a, nu, lam, delta = (pb[k].copy() for k in ("K", "a", "nu", "lam", "delta"))
    if stiff:
        nu[:, ::3] = 1e-10
        lam = lam * np.geomspace(1e-6, 1.0, N)[np.random.default_rng(seed).permutation(N)]
    return dict(K=K, a=a, nu=nu, T=delta * (1.0 + lam), V=lam, P=P, N=N, C=C)


def _active_sets(nu, s):
    """Indices of the s largest ν per class (ties are absent in these random problems)."""
    return [np.argsort(-row)[:s] for row in nu]


def brute_log_lik(w, pr, s):
    """Σ_c log N(T_c; K_w a_{I,c}, diag V_c + K_w[:, A] diag ν_A K_w[:, A]ᵀ + τ11ᵀ), dense."""
    K, a, nu, T, V, N = (pr[k] for k in ("K", "a", "nu", "T", "V", "N"))
    Kw = np.tensordot(w, K, axes=1)
    out = 0.0
    for c, A in enumerate(_active_sets(nu, s)):
        inactive = np.setdiff1d(np.arange(N), A)
        y = T[c] - Kw[:, inactive] @ a[c, inactive]
        KA = Kw[:, A]
        S = np.diag(V[c]) + (KA * nu[c, A]) @ KA.T + TAU * np.ones((N, N))
        L = cholesky(S, lower=True)
        out += (
            -0.5 * y @ cho_solve((L, True), y)
            - np.sum(np.log(np.diag(L)))
            - 0.5 * N * np.log(2.0 * np.pi)
        )
    return out


def _data(pr, s):
    K, a, nu = (jnp.asarray(pr[k]) for k in ("K", "a", "nu"))
    Phi = jnp.einsum("mij,cj->mci", K, a)  # A K_m, K_m symmetric
    return collapsed_setup(K, a, nu, Phi, s)


def _jax_log_lik(w, pr, s):
    f = jax.jit(collapsed_log_lik)
    data = _data(pr, s)
    return np.array([float(f(jnp.asarray(wi), data, pr["T"], pr["V"], TAU)) for wi in w])


def _weights(P, seed=0):
    """Five points of the simplex: four random ones and one near a vertex."""
    W = np.random.default_rng(seed).dirichlet(np.ones(P), size=4)
    vertex = np.full(P, 0.01)
    vertex[0] = 1.0 - 0.01 * (P - 1)
    return np.vstack([W, vertex])


# (N, C, n_active, stiff)
CASES = {
    "C1-all-active": (10, 1, 10, False),
    "C1-partial": (10, 1, 4, False),
    "C3-all-active": (10, 3, 10, False),
    "C3-partial": (10, 3, 3, False),
    "C3-one-active": (10, 3, 1, False),
    "C3-partial-stiff": (12, 3, 5, True),
    "C3-all-active-stiff": (12, 3, 12, True),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_log_lik_matches_dense_gaussian(case):
    """Differences of collapsed_log_lik between five values of w equal those of the dense
    Gaussian log density to 1e-9 relative."""
    N, C, s, stiff = CASES[case]
    pr = _problem(seed=list(CASES).index(case), N=N, C=C, stiff=stiff)
    W = _weights(pr["P"])
    got = _jax_log_lik(W, pr, s)
    ref = np.array([brute_log_lik(w, pr, s) for w in W])
    assert np.all(np.isfinite(got))
    d_ref = ref[1:] - ref[0]
    assert np.abs(d_ref).min() > 1e-3  # the w's are far enough apart for the check to bite
    np.testing.assert_allclose(got[1:] - got[0], d_ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())


def test_all_active_does_not_depend_on_the_sample_weights():
    """n_active = N integrates all of a out: the value for a and for a fresh a agree (1e-10);
    with n_active < N it changes (the mean K_w a_I moves)."""
    pr = _problem(seed=11, N=9, C=2)
    w = _weights(pr["P"])[:1]
    full1, part1 = _jax_log_lik(w, pr, 9)[0], _jax_log_lik(w, pr, 4)[0]
    pr["a"] = 3.0 * np.random.default_rng(5).normal(size=pr["a"].shape)
    full2, part2 = _jax_log_lik(w, pr, 9)[0], _jax_log_lik(w, pr, 4)[0]
    np.testing.assert_allclose(full1, full2, rtol=1e-10)
    assert abs(part1 - part2) > 1e-2


def test_setup_gathers_the_top_nu_columns():
    """K_A holds the kernel columns of the s largest ν per class, √ν_A their √ν, and
    Phi_I = Σ_{i ∉ A_c} K_m[:, i] a_ci."""
    pr = _problem(seed=2, N=11, C=3)
    s = 4
    data = _data(pr, s)
    K, a, nu = pr["K"], pr["a"], pr["nu"]
    assert data.K_A.shape == (pr["P"], 3, 11, s) and data.sqrt_nu_A.shape == (3, s)
    for c, A in enumerate(_active_sets(nu, s)):
        order = np.argsort(-np.asarray(data.sqrt_nu_A[c]))  # compare as sets, sorted by ν
        np.testing.assert_allclose(np.asarray(data.sqrt_nu_A[c])[order] ** 2, nu[c, A], rtol=1e-14)
        np.testing.assert_array_equal(np.asarray(data.K_A[:, c])[:, :, order], K[:, :, A])
        inactive = np.setdiff1d(np.arange(11), A)
        np.testing.assert_allclose(
            data.Phi_I[:, c], K[:, :, inactive] @ a[c, inactive], rtol=1e-12, atol=1e-12
        )


def test_setup_stores_the_gradient_layouts():
    """K_A_t and Phi_I_t are K_A and Phi_I with the kernel axis moved last, entry for entry."""
    pr = _problem(seed=4, N=9, C=2, P=5)
    data = _data(pr, 3)
    assert data.K_A_t.shape == (2, 9, 3, 5) and data.Phi_I_t.shape == (2, 9, 5)
    np.testing.assert_array_equal(data.K_A_t, np.moveaxis(np.asarray(data.K_A), 0, -1))
    np.testing.assert_array_equal(data.Phi_I_t, np.moveaxis(np.asarray(data.Phi_I), 0, -1))


def test_log_lik_gradient_equals_that_of_the_plain_einsums(monkeypatch):
    """The w-contractions' custom gradient (read from the transposed copies) equals automatic
    differentiation of the same log-likelihood written with plain einsums over K_A and Phi_I
    (1e-13 relative); the values are identical."""
    import bayesmkl.sampler.collapsed as coll

    pr = _problem(seed=8, N=10, C=3, P=6)
    data = _data(pr, 4)
    ws = [jnp.asarray(w) for w in _weights(6)]

    def values_and_grads(d):
        f = jax.jit(jax.value_and_grad(lambda w: collapsed_log_lik(w, d, pr["T"], pr["V"], TAU)))
        return [tuple(np.asarray(x) for x in f(w)) for w in ws]

    new = values_and_grads(data)
    monkeypatch.setattr(coll, "_w_contract", lambda sub, w, X, X_t: jnp.einsum(sub, w, X))
    # the plain einsums must not need the transposed copies: zero them
    ref = values_and_grads(
        data._replace(K_A_t=jnp.zeros_like(data.K_A_t), Phi_I_t=jnp.zeros_like(data.Phi_I_t))
    )
    for (v_new, g_new), (v_ref, g_ref) in zip(new, ref, strict=True):
        assert v_new == v_ref
        assert np.abs(g_ref).max() > 1e-3
        np.testing.assert_allclose(g_new, g_ref, rtol=1e-13, atol=1e-13 * np.abs(g_ref).max())


# --------------------------------------------------------------------------------------------
# The potential in e and its gradient
# --------------------------------------------------------------------------------------------

ETA = np.array([0.7, 1.0, 1.6, 2.2])


def brute_potential(e, pr, s):
    """U(e) = Σ_m [e_m − (η_m − 1) log e_m] − log p(T | w = e/Σe, …) (dense oracle)."""
    return np.sum(e - (ETA - 1.0) * np.log(e)) - brute_log_lik(e / e.sum(), pr, s)


@pytest.mark.parametrize("s", [10, 3], ids=["all-active", "partial"])
def test_potential_and_gradient(s):
    """collapsed_potential_and_grad: U differences match the dense oracle (1e-9 relative); ∇U
    matches central finite differences of the dense oracle (1e-6 relative, step 1e-5·e_m, whose
    truncation error is ~1e-10); and e·∇U = Σe − Σ(η − 1) (the likelihood depends on e only
    through w = e/Σe), to 1e-10."""
    pr = _problem(seed=7, N=10, C=2)
    pg = jax.jit(collapsed_potential_and_grad(_data(pr, s), pr["T"], pr["V"], TAU, ETA))
    rng = np.random.default_rng(3)
    E = rng.gamma(2.0, size=(3, 4))
    U = np.array([float(pg(jnp.asarray(e))[0]) for e in E])
    U_ref = np.array([brute_potential(e, pr, s) for e in E])
    np.testing.assert_allclose(U[1:] - U[0], U_ref[1:] - U_ref[0], rtol=1e-9)
    for e in E:
        grad = np.asarray(pg(jnp.asarray(e))[1])
        fd = np.empty(4)
        for m in range(4):
            h = 1e-5 * e[m]
            up, down = e.copy(), e.copy()
            up[m] += h
            down[m] -= h
            fd[m] = (brute_potential(up, pr, s) - brute_potential(down, pr, s)) / (2.0 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())
        np.testing.assert_allclose(e @ grad, e.sum() - np.sum(ETA - 1.0), rtol=1e-10)


# --------------------------------------------------------------------------------------------
# n_active_for
# --------------------------------------------------------------------------------------------


def test_n_active_for_caps():
    """min(requested, N), shrunk so that P·C·N·s ≤ MAX_GATHERED; 0 turns the move off."""
    assert n_active_for(3, 2, 50, 20) == 20
    assert n_active_for(3, 2, 50, 500) == 50  # capped by N
    assert n_active_for(3, 2, 50, 0) == 0
    P, C, N = 100, 10, 5000  # P·C·N = 5e6: at most 6 columns fit in 2^25
    assert MAX_GATHERED // (P * C * N) == 6
    assert n_active_for(P, C, N, 1000) == 6
    assert n_active_for(P, C, N, 4) == 4
    assert n_active_for(2, 1, MAX_GATHERED, 10) == 0  # one column would not fit
    for P, C, N, req in [(16, 3, 683, 200), (45, 1, 4000, 300), (8, 10, 20000, 50), (1, 1, 7, 7)]:
        s = n_active_for(P, C, N, req)
        assert 0 <= s <= min(req, N) and P * C * N * s <= MAX_GATHERED
        assert s == min(req, N) or P * C * N * (s + 1) > MAX_GATHERED  # the largest that fits
