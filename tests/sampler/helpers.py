"""Small synthetic BM3KL problems and exact oracles shared by the inference tests.

Everything here is deterministic given a seed and is plain numpy unless stated otherwise.

* :func:`make_problem` — unit-diagonal Gaussian kernels on random inputs plus values of every
  site (e, a, b, λ, ν, ς), for the conditional-density tests.
* :func:`p3_conditional` — the fixed P = 3, C = 1, N = 10 e-conditional used by the move tests
  (our stand-in for the spec's V3 case, whose data were not recorded).
* :func:`simplex_moments` — E[w] and sd(w) of that conditional by 2-D Gauss–Legendre quadrature
  on the simplex (the "P = 3 quadrature oracle").
* :func:`exact_w_draws` — exact draws of w from the same conditional by rejection from the
  Dirichlet prior (used to start chains in stationarity).
* :func:`run_e_chains` — many vmapped Markov chains on e alone, each iteration being one
  kernel-weight move followed (optionally) by the exact scale refresh, as in the sweep.
* :func:`pooled_mean_mcse` — pooled posterior mean and its Monte Carlo standard error
  sd/√ESS, with ESS from :func:`numpyro.diagnostics.effective_sample_size`.

The colleague writing whole-sampler tests may reuse :func:`make_problem`,
:func:`simplex_moments` and :func:`pooled_mean_mcse`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size

import bayesmkl  # noqa: F401  (enables x64)
from bayesmkl.model.classification import Hyper
from bayesmkl.sampler import conditionals as cond

# --------------------------------------------------------------------------------------------
# Synthetic problems
# --------------------------------------------------------------------------------------------


def gaussian_kernels(X, widths):
    """Unit-diagonal Gaussian kernels exp(−‖x−y‖²/(2σ²)): ``X: (N, d)`` → ``(P, N, N)``."""
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return np.stack([np.exp(-d2 / (2.0 * s**2)) for s in widths])


def make_problem(seed=0, N=8, C=2, P=3, hyper: Hyper | None = None):
    """A random problem with values for every site of the augmented model.

    Returns a dict with ``K (P, N, N)``, ``delta (C, N)``, ``hyper`` and the site values
    ``e (P,)``, ``a (C, N)``, ``b (C,)``, ``lam, nu, varsigma (C, N)`` (all float64 numpy).
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    widths = np.geomspace(0.3, 3.0, P)
    K = gaussian_kernels(X, widths)
    labels = rng.integers(0, C, size=N) if C > 1 else rng.integers(0, 2, size=N)
    if C == 1:
        delta = np.where(labels == 1, 1.0, -1.0)[None, :]
    else:
        delta = np.where(labels[None, :] == np.arange(C)[:, None], 1.0, -1.0)
    hyper = hyper or Hyper(eta=1.3, alpha_a=1.0, beta_a=0.7, kappa=0.2, bias_prior_var=0.5,
                           gamma0=3.0)  # fmt: skip
    return dict(
        K=K,
        delta=delta,
        hyper=hyper,
        e=rng.gamma(2.0, size=P),
        a=rng.normal(size=(C, N)),
        b=rng.normal(size=C),
        lam=rng.gamma(1.5, size=(C, N)),
        nu=rng.gamma(1.5, size=(C, N)),
        varsigma=rng.gamma(1.5, size=(C, N)),
    )


# --------------------------------------------------------------------------------------------
# The P = 3 e-conditional and its quadrature oracle
# --------------------------------------------------------------------------------------------

P3_ETA = 1.0


def p3_conditional(seed=3, N=10, a_scale=0.3):
    """The fixed P = 3, C = 1 conditional of e used by the move tests.

    Returns ``dict(Phi (3, 1, N), b (1,), delta (1, N), lam (1, N), eta)``. The posterior of
    w is E[w] ≈ (0.737, 0.229, 0.034), sd ≈ (0.074, 0.081, 0.030): one weight is small, which
    is where the paper scheme's O(ε) bias is largest (docs/math.md §4.2), and the λ are small enough
    (≈ 0.1) that the likelihood gradient is strong, so that bias is large against the Monte
    Carlo error.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 1))
    K = gaussian_kernels(X, (0.1, 0.7, 5.0))
    delta = np.where(X[:, 0] > 0, 1.0, -1.0)[None, :]
    a = a_scale * rng.normal(size=(1, N)) + 0.4 * delta
    Phi = np.einsum("cj,mji->mci", a, K)
    lam = 0.1 * rng.gamma(2.0, 0.5, size=(1, N))
    return dict(Phi=Phi, b=np.array([0.05]), delta=delta, lam=lam, eta=P3_ETA)


def u_lik_np(W, Phi, b, delta, lam):
    """U_lik(w) = Σ (λ + ζ)²/(2λ) for a batch ``W: (..., P)`` (numpy)."""
    f = np.einsum("...m,mcn->...cn", W, Phi) + b[:, None]
    zeta = 1.0 - delta * f
    return np.sum((lam + zeta) ** 2 / (2.0 * lam), axis=(-2, -1))


def simplex_moments(Phi, b, delta, lam, eta, n=160):
    """E[w] and sd(w) for P = 3 under p(w) ∝ Π w_m^{η−1} exp(−U_lik(w)) on the simplex.

    Gauss–Legendre product rule on the collapsed square (Duffy map) w = (x, (1−x)y,
    (1−x)(1−y)), Jacobian (1−x). The integrand is smooth for η = 1 (a Gaussian restricted to
    the triangle), so ``n = 160`` nodes per axis are exact to ~1e-12 (checked in the tests
    against scipy ``dblquad`` and against n = 80).
    """
    x, wx = np.polynomial.legendre.leggauss(n)
    x, wx = 0.5 * (x + 1.0), 0.5 * wx
    X, Y = np.meshgrid(x, x, indexing="ij")
    W = np.stack([X, (1 - X) * Y, (1 - X) * (1 - Y)], axis=-1)
    weight = np.outer(wx, wx) * (1 - X)
    logd = np.sum((eta - 1.0) * np.log(W), axis=-1) - u_lik_np(W, Phi, b, delta, lam)
    dens = weight * np.exp(logd - logd.max())
    Z = dens.sum()
    mean = np.einsum("ij,ijm->m", dens, W) / Z
    second = np.einsum("ij,ijm->m", dens, W**2) / Z
    return mean, np.sqrt(second - mean**2)


def exact_w_draws(rng, n, Phi, b, delta, lam, eta):
    """``n`` exact draws of w from the P = 3 conditional by rejection from Dir(η).

    Envelope: the acceptance probability is exp(−(U_lik(w) − U_min)) with U_min a lower bound
    of U_lik on the simplex (grid minimum minus a margin; the assertion checks the bound held
    for every proposal).
    """
    P = Phi.shape[0]
    g = np.linspace(0.0, 1.0, 401)
    G1, G2 = np.meshgrid(g, g, indexing="ij")
    keep = G1 + G2 <= 1.0
    grid = np.stack([G1[keep], G2[keep], 1.0 - G1[keep] - G2[keep]], axis=-1)
    u_min = u_lik_np(grid, Phi, b, delta, lam).min() - 0.05
    out = []
    while sum(len(o) for o in out) < n:
        W = rng.dirichlet(np.full(P, eta), size=4 * n)
        U = u_lik_np(W, Phi, b, delta, lam)
        assert np.all(U >= u_min), "rejection envelope violated"
        out.append(W[rng.uniform(size=len(W)) < np.exp(-(U - u_min))])
    return np.concatenate(out)[:n]


# --------------------------------------------------------------------------------------------
# Vmapped chains on e alone
# --------------------------------------------------------------------------------------------


@partial(jax.jit, static_argnames=("move", "n_iter", "n_leapfrog", "scale_refresh"))
def run_e_chains(
    key, e0, step_size, Phi, b, delta, lam, eta, *, move, n_iter, n_leapfrog=10,
    scale_refresh=True,
):  # fmt: skip
    """Run ``e0.shape[0]`` independent chains of ``n_iter`` iterations on e | rest.

    One iteration, as in :func:`bayesmkl.sampler.sampler.sweep`: r ~ N(0, I) (momentum
    refresh), ``move(key, e, r, step_size, pg, n_leapfrog=...)``, then the exact scale refresh
    e ← w·Gamma(Ση, 1) if ``scale_refresh``. ``step_size`` is traced, so runs that differ only
    in ε share one compilation.

    Returns ``w (chains, n_iter, P)``, ``accept_prob (chains, n_iter)`` and
    ``S (chains, n_iter)`` (the scale Σe after each iteration).
    """
    Phi, b, delta, lam = (jnp.asarray(x) for x in (Phi, b, delta, lam))

    def pg(e):
        return cond.e_potential_and_grad(e, Phi, b, delta, lam, eta)

    def one_chain(k, e):
        def it(e, k):
            k_r, k_m, k_s = jax.random.split(k, 3)
            r = jax.random.normal(k_r, e.shape)
            res = move(k_m, e, r, step_size, pg, n_leapfrog=n_leapfrog)
            e = res.e
            if scale_refresh:
                e = cond.sample_scale(k_s, e, eta)
            S = jnp.sum(e)
            return e, (e / S, res.accept_prob, S)

        _, out = jax.lax.scan(it, e, jax.random.split(k, n_iter))
        return out

    keys = jax.random.split(key, e0.shape[0])
    return jax.vmap(one_chain)(keys, e0)


def pooled_mean_mcse(x):
    """Pooled mean, sd and Monte Carlo standard error of ``x: (chains, draws, d)``.

    MCSE = sd/√ESS with ESS from :func:`numpyro.diagnostics.effective_sample_size` (the
    multi-chain Geyer estimator). Returns ``(mean, sd, mcse, ess)``, each of shape ``(d,)``.
    """
    x = np.asarray(x)
    ess = np.asarray(effective_sample_size(x))
    mean = x.mean(axis=(0, 1))
    sd = x.std(axis=(0, 1))
    return mean, sd, sd / np.sqrt(ess), ess


def chains_in_blocks(key, e0, step_size, cp, *, move, n_burn, n_keep, block=100, **kw):
    """Run chains in blocks of ``block`` iterations (one compilation for any run length).

    ``cp`` is a :func:`p3_conditional` dict. The first ``n_burn`` blocks are discarded; returns
    the kept ``w (chains, n_keep·block, P)`` and acceptance probabilities.
    """
    args = (cp["Phi"], cp["b"], cp["delta"], cp["lam"], cp["eta"])
    e, ws, accs = jnp.asarray(e0), [], []
    for i, k in enumerate(jax.random.split(key, n_burn + n_keep)):
        w, acc, S = run_e_chains(k, e, step_size, *args, move=move, n_iter=block, **kw)
        e = w[:, -1] * S[:, -1, None]
        if i >= n_burn:
            ws.append(np.asarray(w))
            accs.append(np.asarray(acc))
    return np.concatenate(ws, axis=1), np.concatenate(accs, axis=1)
