"""The pair updates of w without the P × P matrix M (:func:`bayesmkl.sampler.simplex.
pairwise_gibbs_residual`, issue 47).

* the edge conditional the residual route computes (curvature q and slope g_j − g_k from the
  carried residual r) is the model's: log p(x) − log p(e(x), rest) is constant along the edge,
  with p NumPyro's density of the augmented model (as ``test_conditionals.py`` checks the other
  conditionals), after 40 updates have moved w and r;
* the carried residual stays the residual of the current w;
* the edge directions gathered ahead of the loop in blocks give the same draws for any block
  size (blocks of 1, 3 and 7 pairs with a remainder, and all pairs at once);
* with the same key it gives the same w as the M route (:func:`pairwise_gibbs`) to rounding,
  both draw routes (η ≡ 1 and slice), P = 5…50, C = 1 and 3;
* the routing: ``path`` / :data:`PAIR_PATH` / :data:`RESIDUAL_MIN_P`, down to the sweep.

The exactness tests of the kernel-weight step (P = 2 exact draws, P = 3 quadrature) run with
this route forced in ``test_simplex.py``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesmkl.model.classification import Hyper
from bayesmkl.sampler import SweepConfig, build_sweep, init_state, simplex
from bayesmkl.sampler import conditionals as cond
from bayesmkl.sampler.sampler import CLASSIFICATION
from tests.sampler.helpers import make_problem
from tests.sampler.test_conditionals import _logp

ETA6 = (0.6, 1.0, 2.5, 1.3, 0.8, 1.7)


def _tv(pb):
    return pb["delta"] * (1.0 + pb["lam"]), pb["lam"]


@pytest.mark.parametrize("n_before", [0, 40], ids=["fresh", "after-40-updates"])
def test_residual_edge_conditional_matches_joint(n_before):
    """For several edges (j, k) the log density the residual route draws x = w_j from,
    ``_edge_logpdf`` with (q, g_j − g_k) from ``_residual_edge``, differs from the model's log
    joint at e = S·w(x) (S = Σe fixed, w_k = c − x) by a constant in x: to 1e-9 over x across
    (0, c), with asymmetric η so that the Dirichlet factor is checked too."""
    h = Hyper(eta=ETA6, beta_a=0.7, kappa=0.2, bias_prior_var=0.5, gamma0=3.0)
    pb = make_problem(seed=11, N=8, C=2, P=6, hyper=h)
    eta = jnp.asarray(ETA6)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    T, V = _tv(pb)
    S = pb["e"].sum()
    w = jnp.asarray(pb["e"] / S)
    D, r = simplex._scaled_residual(w, Phi, jnp.asarray(pb["b"]), T, V)
    if n_before:
        w, r, capped = simplex._residual_sweep(
            jax.random.key(5), w, D, r, eta, n_before, eta_is_one=False
        )
        assert int(capped) == 0
        assert float(jnp.max(jnp.abs(w - pb["e"] / S))) > 1e-3  # the updates moved w
    w = np.asarray(w)
    for j, k in ((0, 1), (4, 2), (5, 3)):
        _, q, dg = simplex._residual_edge(D, r, j, k)
        c = w[j] + w[k]
        logpdf = simplex._edge_logpdf(w[j], dg, q, eta[j], eta[k], c)
        diffs = []
        for frac in (0.03, 0.2, 0.5, 0.77, 0.99):
            x = frac * c
            wx = w.copy()
            wx[j], wx[k] = x, c - x
            diffs.append(float(logpdf(x)) - _logp(pb, e=S * wx))
        diffs = np.asarray(diffs)
        assert np.ptp(diffs) < 1e-9, (j, k, diffs - diffs[0])


def test_carried_residual_is_the_residual_of_w():
    """After 200 updates the carried r equals (T − b − Σ w_m Φ_m)/√V of the returned w (to
    1e-12 of its scale), so the conditionals of later updates are those of the current w."""
    pb = make_problem(seed=12, N=9, C=3, P=7)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    T, V = _tv(pb)
    b = jnp.asarray(pb["b"])
    w0 = jnp.asarray(pb["e"] / pb["e"].sum())
    D, r0 = simplex._scaled_residual(w0, Phi, b, T, V)
    w, r, _ = simplex._residual_sweep(jax.random.key(2), w0, D, r0, jnp.ones(7), 200, True)
    _, fresh = simplex._scaled_residual(w, Phi, b, T, V)
    assert float(jnp.max(jnp.abs(r - r0))) > 1e-3
    np.testing.assert_allclose(r, fresh, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(fresh))))


@pytest.mark.parametrize("eta_is_one", [True, False], ids=["truncnorm", "slice"])
def test_blocked_edge_gather_gives_the_same_draws(monkeypatch, eta_is_one):
    """The pairs' directions are gathered in blocks of ``_EDGE_BLOCK_BYTES``: with blocks of
    1, 3 and 7 updates (23 updates: full blocks then a remainder) the returned w, r and capped
    bits equal those of one block holding all 23 (a block read at the wrong offset would update
    with another pair's direction)."""
    pb = make_problem(seed=5, N=9, C=3, P=7)
    Phi = cond.per_kernel_decisions(jnp.asarray(pb["K"]), jnp.asarray(pb["a"]))
    T, V = _tv(pb)
    w0 = jnp.asarray(pb["e"] / pb["e"].sum())
    D, r0 = simplex._scaled_residual(w0, Phi, jnp.asarray(pb["b"]), T, V)
    eta = jnp.asarray(ETA6 + (1.1,))
    row = D[0].size * D.dtype.itemsize

    def run(block):
        monkeypatch.setattr(simplex, "_EDGE_BLOCK_BYTES", block * row)
        return simplex._residual_sweep(jax.random.key(4), w0, D, r0, eta, 23, eta_is_one)

    w_all, r_all, cap_all = run(23)
    assert float(jnp.max(jnp.abs(w_all - w0))) > 1e-3
    for block in (1, 3, 7):
        w, r, cap = run(block)
        np.testing.assert_allclose(w, w_all, rtol=0, atol=1e-14)
        np.testing.assert_allclose(r, r_all, rtol=0, atol=1e-12)
        assert int(cap) == int(cap_all)


def _random_problem(seed, P, C, N):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    d2 = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    widths = np.geomspace(0.2, 5.0, P)
    K = np.exp(-d2[None] / (2.0 * widths[:, None, None] ** 2))
    a = rng.normal(size=(C, N))
    Phi = np.einsum("pij,cj->pci", K, a)
    lam = rng.gamma(1.0, size=(C, N))
    delta = np.where(rng.integers(0, 2, size=(C, N)) == 1, 1.0, -1.0)
    e = rng.gamma(1.0, size=P)
    eta = rng.uniform(0.5, 3.0, size=P)
    return e, Phi, rng.normal(size=C), delta * (1.0 + lam), lam, eta


@pytest.mark.parametrize("eta_is_one", [True, False], ids=["truncnorm", "slice"])
@pytest.mark.parametrize("P,C", [(5, 1), (12, 3), (31, 1), (50, 3)])
def test_residual_route_gives_the_m_route_draws(P, C, eta_is_one):
    """Same key, same problem: ``sample_w_exact`` with ``path="residual"`` and ``"gram"``
    return the same e to rtol 1e-10 after 4P pair updates (the same pairs and uniforms; only
    the arithmetic of q and g_j − g_k differs), with no cap hit; and the updates did move w."""
    e, Phi, b, T, V, eta = _random_problem(100 * P + C, P, C, N=13)
    if eta_is_one:
        eta = np.ones(P)
    args = [jnp.asarray(x) for x in (e, Phi, b, T, V, eta)]

    def run(path):
        f = jax.jit(
            lambda k, *a: simplex.sample_w_exact(
                k, *a, 4 * P, eta_is_one=eta_is_one, return_capped=True, path=path
            )
        )
        return f(jax.random.key(P + C), *args)

    e_m, cap_m = run("gram")
    e_r, cap_r = run("residual")
    assert int(cap_m) == 0 and int(cap_r) == 0
    w0 = e / e.sum()
    w_m = np.asarray(e_m) / float(jnp.sum(e_m))
    assert np.max(np.abs(w_m - w0)) > 1e-3
    np.testing.assert_allclose(e_r, e_m, rtol=1e-10, atol=0)


def test_routing():
    """``uses_residual_path``: "gram" never, "residual" always, "auto" from RESIDUAL_MIN_P on,
    None reads PAIR_PATH; an unknown route is an error."""
    m = simplex.RESIDUAL_MIN_P
    assert simplex.PAIR_PATH == "auto"
    assert not simplex.uses_residual_path(m - 1) and simplex.uses_residual_path(m)
    assert simplex.uses_residual_path(3, "residual") and not simplex.uses_residual_path(m, "gram")
    with pytest.raises(ValueError, match="pair path"):
        simplex.uses_residual_path(10, "fast")


@pytest.mark.parametrize("forced", ["residual", "gram", "auto"])
def test_the_sweep_takes_the_forced_route(monkeypatch, forced):
    """The default sweep (P = 3 kernels) runs the residual pair updates iff PAIR_PATH says so
    when it is traced: spies on both routes count the calls while tracing one sweep."""
    calls = {"residual": 0, "gram": 0}
    real_r, real_m = simplex.pairwise_gibbs_residual, simplex.pairwise_gibbs

    def spy_r(*a, **kw):
        calls["residual"] += 1
        return real_r(*a, **kw)

    def spy_m(*a, **kw):
        calls["gram"] += 1
        return real_m(*a, **kw)

    monkeypatch.setattr(simplex, "pairwise_gibbs_residual", spy_r)
    monkeypatch.setattr(simplex, "pairwise_gibbs", spy_m)
    monkeypatch.setattr(simplex, "PAIR_PATH", forced)
    pb = make_problem(seed=3, N=6, C=1, P=3)
    K, delta = jnp.asarray(pb["K"]), jnp.asarray(pb["delta"])
    config = SweepConfig().validate()
    state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, config).state
    jax.make_jaxpr(build_sweep(CLASSIFICATION, config, 0))(state, K, delta)
    want = "residual" if forced == "residual" else "gram"
    assert calls[want] == 1 and sum(calls.values()) == 1, calls


# --------------------------------------------------------------------------------------------
# The other large-P forms: the collapsed target's contractions, the identity mass
# --------------------------------------------------------------------------------------------


def test_fast_contractions_give_the_collapsed_target_and_its_gradient():
    """``fast=True`` (the large-P forms of :mod:`bayesmkl.sampler.collapsed`) and the autodiff
    forms give the same gathered columns, Φ_I (to 1e-12), potential and gradient (to 1e-10),
    C = 1 and 3."""
    from bayesmkl.sampler import collapsed as coll

    for C in (1, 3):
        pb = make_problem(seed=20 + C, N=9, C=C, P=6)
        K, a, nu = (jnp.asarray(pb[k]) for k in ("K", "a", "nu"))
        Phi = cond.per_kernel_decisions(K, a)
        T, V = _tv(pb)
        eta = jnp.full(6, 1.7)
        out = {}
        for fast in (False, True):
            data = coll.collapsed_setup(K, a, nu, Phi, 4, fast=fast)
            pg = coll.collapsed_potential_and_grad(data, T, V, 0.5, eta, fast=fast)
            out[fast] = (data, *jax.jit(pg)(jnp.asarray(pb["e"])))
        (d0, U0, g0), (d1, U1, g1) = out[False], out[True]
        np.testing.assert_array_equal(d1.K_A, d0.K_A)
        np.testing.assert_allclose(d1.Phi_I, d0.Phi_I, rtol=0, atol=1e-12)
        np.testing.assert_allclose(U1, U0, rtol=1e-12)
        assert float(jnp.max(jnp.abs(g0))) > 1e-2  # a non-trivial gradient
        np.testing.assert_allclose(g1, g0, rtol=1e-10, atol=1e-12)


def test_large_p_forms_switch_at_large_p():
    """The collapsed target's fast forms and the residual route share the threshold LARGE_P."""
    from bayesmkl.sampler import collapsed as coll

    m = simplex.LARGE_P
    assert simplex.RESIDUAL_MIN_P == coll.FAST_CONTRACTION_MIN_P == m
    assert not coll.uses_fast_contraction(m - 1) and coll.uses_fast_contraction(m)
    assert coll.uses_fast_contraction(3, True) and not coll.uses_fast_contraction(m, False)


def _shapes(jaxpr):
    """Shapes of every value an equation of ``jaxpr`` (and its sub-programs) produces."""
    out = []
    for eqn in jaxpr.eqns:
        out += [tuple(getattr(v.aval, "shape", ())) for v in eqn.outvars]
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                if hasattr(sub, "eqns"):
                    out += _shapes(sub)
                elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    out += _shapes(sub.jaxpr)
    return out


@pytest.mark.parametrize("path", ["auto", "gram"])
def test_default_sweep_at_large_p_forms_no_p_by_p_array(monkeypatch, path):
    """The default sweep with P = LARGE_P kernels computes no P × P array (issue 47: the
    kernel-weight step is linear in P): no equation of its program outputs shape (P, P).
    Forcing the M route (``"gram"``) does form one, so the check can fail."""
    monkeypatch.setattr(simplex, "PAIR_PATH", path)
    P, N = simplex.LARGE_P, 6
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    d2 = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    K = jnp.asarray(np.exp(-d2[None] / np.geomspace(0.1, 10.0, P)[:, None, None]))
    delta = jnp.asarray(np.where(np.arange(N) % 2 == 0, 1.0, -1.0)[None])
    config = SweepConfig().validate()
    state = init_state(CLASSIFICATION, jax.random.key(0), K, delta, config).state
    jaxpr = jax.make_jaxpr(build_sweep(CLASSIFICATION, config, 10))(state, K, delta).jaxpr
    has_pp = (P, P) in _shapes(jaxpr)
    assert has_pp == (path == "gram")
