"""OBSCURE (bayesmkl/baselines/obscure.py): the stochastic iterate against a cvxpy oracle.

OBSCURE with the (2, p) norm solves M3K's problem with ``‖μ‖_r ≤ 1``, ``r = p/(2 − p)``
(docs/baselines_math.md §(e)), so :func:`cs_oracles.cs_mkl_oracle` with ``q* = p/(2(p − 1))``
gives its optimal value ``F*`` and weights. Tolerances:

* objective: the fit stops when its certified relative gap ``(F(w) − D(β))/F(w)`` is ``≤ 1e-3``,
  and ``D(β) ≤ F* ≤ F(w)``, so ``0 ≤ (F(w) − F*)/F* ≤ ~1e-3`` must hold whatever the random order
  (the oracle's own error, ~1e-8, is allowed below 0);
* weights and decision values are pinned only through strong convexity
  (``F(w) − F* ≥ ((p − 1)/2)‖w − w*‖²_{2,p}``), a loose bound at this gap; over ten random orders
  the measured differences are ≤ 3.5e-3 (weights) and ≤ 6e-3 (decision values, |f| ≈ 0.8),
  checked at ``ATOL = 0.02``, while the weights lie more than 0.1 from uniform.

Problem: N = 30, three Gaussian kernels, three classes (:func:`cs_oracles.cs_problem`); C is
small (0.1–0.3) so that ~100–300 epochs (< 0.3 s) reach the gap.
"""

import functools
import warnings

import numpy as np
import pytest
from cs_oracles import cs_decision, cs_mkl_oracle, cs_problem
from oracles import rel
from sklearn.exceptions import ConvergenceWarning

from bayesmkl.baselines import M3K, OBSCURE
from bayesmkl.baselines._crammer_singer import box_upper, multiclass_hinge
from bayesmkl.baselines._svm import combine
from bayesmkl.baselines.obscure import link_weights

GAP = 1e-3
ATOL = 0.02
CASES = [(1.2, 0.3), (1.5, 0.1)]  # (p, C)


@functools.cache
def fitted(p, C, seed=0):
    K, y, _, _ = cs_problem()
    return OBSCURE(kernels="precomputed", p=p, C=C, tol=GAP, max_iter=5000, random_state=seed).fit(
        K, y
    )


@functools.cache
def oracle(p, C):
    K, y, _, _ = cs_problem()
    q_star = 1.0 if p == 2 else p / (2 * (p - 1))
    return cs_mkl_oracle(K, y, C, q_star)


@pytest.mark.parametrize("p, C", CASES)
def test_objective_reaches_the_oracle(p, C):
    m = fitted(p, C)
    value, _, _ = oracle(p, C)
    excess = (m.objective_[-1] - value) / value
    assert -1e-7 <= excess <= 1.1 * GAP
    assert m.duality_gap_ <= GAP and excess <= m.duality_gap_ * m.objective_[-1] / value + 1e-7
    assert m.n_iter_ >= 10  # it did need the batch phase: the online pass alone is far off
    assert m.gaps_[0] > 0.1


@pytest.mark.parametrize("p, C", CASES)
def test_weights_and_decisions_match_the_oracle(p, C):
    _, _, Kt, _ = cs_problem()
    m = fitted(p, C)
    _, beta, mu = oracle(p, C)
    r = p / (2 - p)
    assert np.sum(m.kernel_weights_**r) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(m.kernel_weights_, mu, atol=ATOL)
    assert np.max(np.abs(mu - 3 ** (-1 / r))) > 0.1
    np.testing.assert_allclose(m.decision_function(Kt), cs_decision(Kt, mu, beta), atol=ATOL)


def test_same_problem_as_m3k_with_q_equal_p_over_2_minus_p():
    K, y, Kt, _ = cs_problem()
    p, C = CASES[0]
    m = fitted(p, C)
    ref = M3K(kernels="precomputed", q=p / (2 - p), C=C, tol=1e-8, cs_tol=1e-9).fit(K, y)
    assert 0 <= (m.objective_[-1] - ref.objective_[-1]) / ref.objective_[-1] <= 1.1 * GAP
    np.testing.assert_allclose(m.kernel_weights_, ref.kernel_weights_, atol=ATOL)
    assert np.mean(m.predict(Kt) == ref.predict(Kt)) >= 0.95


def test_p2_is_the_crammer_singer_svm_on_the_kernel_sum():
    K, y, _, _ = cs_problem()
    m = OBSCURE(kernels="precomputed", p=2.0, C=0.1, tol=GAP, random_state=0).fit(K, y)
    value, _, _ = cs_mkl_oracle(K.sum(0)[None], y, 0.1, 1.0)
    np.testing.assert_array_equal(m.kernel_weights_, np.ones(3))
    assert -1e-7 <= (m.objective_[-1] - value) / value <= 1.1 * GAP


@pytest.mark.parametrize("p, C", CASES)
def test_certificate_recomputed_from_fitted_attributes(p, C):
    """β = dual_coef_ is feasible, μ is the p-norm link of β, and F(w) − D(β) is the gap."""
    K, y, _, _ = cs_problem()
    m = fitted(p, C)
    beta, mu, q = m.dual_coef_.T, m.kernel_weights_, p / (p - 1)
    np.testing.assert_allclose(beta.sum(axis=1), 0.0, atol=1e-12)
    assert np.all(beta <= box_upper(y, 3, C) + 1e-12)
    sq = np.array([np.sum(beta * (Km @ beta)) for Km in K])  # ‖θ_m‖²
    np.testing.assert_allclose(mu, (np.sqrt(sq) / np.sum(sq ** (q / 2)) ** (1 / q)) ** (q - 2))
    F = combine(K, mu) @ beta
    primal = 0.5 * np.sum((mu * np.sqrt(sq)) ** p) ** (2 / p) + C * multiclass_hinge(F, y).sum()
    dual = beta[np.arange(y.size), y].sum() - 0.5 * np.sum(sq ** (q / 2)) ** (2 / q)
    assert primal == pytest.approx(m.objective_[-1], rel=1e-10)
    assert (primal - dual) / primal == pytest.approx(m.duality_gap_, rel=1e-8)


def test_link_weights_are_the_gradient_of_the_dual_norm():
    """∇_m ½‖θ‖²_{2,q} = c_m θ_m, checked by finite differences of ½(Σ_m ‖θ_m‖^q)^{2/q}."""
    rng = np.random.default_rng(0)
    theta = [rng.normal(size=4) for _ in range(3)]
    q = 3.0

    def half_sq(th):
        return 0.5 * np.sum([np.linalg.norm(t) ** q for t in th]) ** (2 / q)

    c = link_weights(np.array([t @ t for t in theta]), q)
    for m in range(3):
        for k in range(4):
            e = [np.zeros(4) for _ in range(3)]
            e[m][k] = 1e-6
            up = half_sq([t + d for t, d in zip(theta, e, strict=True)])
            down = half_sq([t - d for t, d in zip(theta, e, strict=True)])
            assert (up - down) / 2e-6 == pytest.approx(c[m] * theta[m][k], rel=1e-6)
    np.testing.assert_array_equal(link_weights(np.array([1.0, 4.0]), 2.0), [1.0, 1.0])


def _literal_obscure(Xs, codes, n, C, p, epochs, seed, sample_weight):
    """The algorithm of docs/baselines_math.md §(e) written out in the primal, with explicit
    feature blocks ``θ_m: (d_m, n)`` (linear kernels), the same orders of the points."""
    rng = np.random.RandomState(seed)
    N, q = codes.size, p / (p - 1)
    lam = 1.0 / (C * N)
    theta = [np.zeros((X.shape[1], n)) for X in Xs]
    t = 0

    def weights():
        norms = np.array([np.linalg.norm(th) for th in theta])
        total = np.sum(norms**q) ** (1 / q)
        if total == 0:  # w = 0 before the first update
            return [np.zeros_like(th) for th in theta]
        return [
            (nm / total) ** (q - 2) * th / (lam * t) for nm, th in zip(norms, theta, strict=True)
        ]

    for _ in range(epochs):
        for i in rng.permutation(N):
            w = weights()
            f = sum(X[i] @ wm for X, wm in zip(Xs, w, strict=True))
            t += 1
            others = [c for c in range(n) if c != codes[i]]
            c_hat = max(others, key=lambda c: f[c])  # first of the largest, as argmax
            if sample_weight[i] > 0 and 1 + f[c_hat] - f[codes[i]] > 0:
                for X, th in zip(Xs, theta, strict=True):
                    th[:, codes[i]] += sample_weight[i] * X[i]
                    th[:, c_hat] -= sample_weight[i] * X[i]
    return weights()


def test_steps_are_the_literal_primal_algorithm():
    """Five epochs on explicit features (linear kernels, sample weights 0, 1 and 2) give the
    iterate of a literal primal implementation: the dual bookkeeping (one count matrix, K_m A,
    running norms) changes nothing."""
    rng = np.random.default_rng(4)
    N, n, p, C = 24, 3, 1.3, 0.5
    Xs = [rng.normal(size=(N + 6, d)) for d in (2, 3, 1)]
    codes = np.argmax(Xs[0][:N, :2] @ rng.normal(size=(2, n)), axis=1)
    sw = rng.integers(0, 3, size=N).astype(float)
    K = np.stack([X[:N] @ X[:N].T for X in Xs])
    Kt = np.stack([X[N:] @ X[:N].T for X in Xs])
    est = OBSCURE(kernels="precomputed", p=p, C=C, tol=1e-12, max_iter=4, random_state=7)
    with pytest.warns(ConvergenceWarning, match="max_iter=4 batch epochs"):
        est.fit(K, codes, sample_weight=sw)
    w = _literal_obscure([X[:N] for X in Xs], codes, n, C, p, 5, 7, sw)
    F = sum(X[N:] @ wm for X, wm in zip(Xs, w, strict=True))
    np.testing.assert_allclose(est.decision_function(Kt), F, rtol=1e-9, atol=1e-9)
    norms = np.array([np.linalg.norm(wm) for wm in w])
    np.testing.assert_allclose(
        est.kernel_weights_, norms ** (2 - p) / np.sum(norms**p) ** ((2 - p) / p)
    )


def test_online_phase_alone_warns_and_the_batch_phase_improves_it():
    K, y, _, _ = cs_problem()
    with pytest.warns(ConvergenceWarning, match="OBSCURE stopped after max_iter=0 batch epochs"):
        online = OBSCURE(kernels="precomputed", C=0.1, max_iter=0, random_state=0).fit(K, y)
    assert online.n_iter_ == 0 and online.n_steps_ == y.size and online.objective_.shape == (1,)
    full = fitted(*CASES[1])
    assert full.n_steps_ == (full.n_iter_ + 1) * y.size
    assert full.objective_[0] == pytest.approx(online.objective_[0], rel=1e-12)  # same first pass
    assert full.gaps_[-1] < 0.02 * full.gaps_[0]
    # the gap is checked after the online pass, every epoch up to 10, then every epochs // 10
    e = full.checked_epochs_
    assert e[0] == 0 and e[-1] == full.n_iter_ and len(e) == len(full.objective_)
    np.testing.assert_array_equal(np.diff(e), np.maximum(1, e[:-1] // 10))


def test_max_time_stops_after_one_batch_epoch_and_warns():
    K, y, Kt, yt = cs_problem()
    est = OBSCURE(kernels="precomputed", tol=1e-12, max_time=1e-9, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"stopped after max_time=1e-09 s \(1 batch epochs"):
        est.fit(K, y)
    assert est.n_iter_ == 1 and np.mean(est.predict(Kt) == yt) > 0.6


def test_random_state_fixes_the_order():
    K, y, _, _ = cs_problem()
    a, b = (OBSCURE(kernels="precomputed", max_iter=5, tol=1e-9, random_state=1) for _ in "ab")
    c = OBSCURE(kernels="precomputed", max_iter=5, tol=1e-9, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = [e.fit(K, y) for e in (a, b, c)]
    np.testing.assert_array_equal(fits[0].dual_coef_, fits[1].dual_coef_)
    assert not np.array_equal(fits[0].dual_coef_, fits[2].dual_coef_)


def test_sample_weights_change_the_problem_as_repeated_rows_do():
    """Integer weights and repeated rows are the same convex problem (different random runs):
    their certified objectives agree within the two gaps; zero weights give zero dual rows."""
    K, y, Kt, _ = cs_problem()
    sw = np.random.default_rng(1).integers(0, 3, size=y.size).astype(float)
    rep = np.repeat(np.arange(y.size), sw.astype(int))
    kw = dict(kernels="precomputed", p=1.5, C=0.1, tol=GAP, random_state=0)
    a = OBSCURE(**kw).fit(K, y, sample_weight=sw)
    b = OBSCURE(**kw).fit(K[:, rep][:, :, rep], y[rep])
    Fa, Fb = a.objective_[-1], b.objective_[-1]
    assert abs(Fa - Fb) <= a.duality_gap_ * Fa + b.duality_gap_ * Fb
    np.testing.assert_array_equal(a.dual_coef_[:, sw == 0], 0.0)
    assert rel(Fa, fitted(1.5, 0.1).objective_[-1]) > 0.05  # the weights matter


def test_two_classes_give_one_decision_column():
    K, y, Kt, _ = cs_problem()
    keep = y != 1
    m = OBSCURE(kernels="precomputed", C=0.1, random_state=0).fit(K[:, keep][:, :, keep], y[keep])
    F = m.decision_function(Kt[:, :, keep])
    assert F.shape == (Kt.shape[1],)
    np.testing.assert_array_equal(m.predict(Kt[:, :, keep]), np.where(F > 0, 2, 0))
    train = m.predict(K[:, keep][:, :, keep])
    assert np.mean(train == y[keep]) > 0.8  # the sign convention: positive is classes_[1]


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(p=1.0), r"^p must be a number in \(1, 2\]; got 1.0$"),
        (dict(p=2.5), r"^p must be a number in \(1, 2\]; got 2.5$"),
        (dict(C=0.0), "^C must be"),
        (dict(tol=0.0), "^tol must be"),
        (dict(max_iter=-1), "^max_iter must be an integer >= 0"),
        (dict(random_state="x"), "random_state|cannot be used to seed"),
    ],
)
def test_invalid_parameters_raise(kw, match):
    K, y, _, _ = cs_problem()
    with pytest.raises(ValueError, match=match):
        OBSCURE(kernels="precomputed", **kw).fit(K, y)
