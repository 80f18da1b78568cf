"""The chunked chain runner: NumPyro's vectorised chains, compiled once."""

import jax
import numpy as np
import pytest
from numpyro.infer import MCMC

from bayesmkl.estimators._fitting import run_monitor
from bayesmkl.sampler import runner
from bayesmkl.sampler.regression import BM3KLReg
from bayesmkl.sampler.runlength import compile_clock
from bayesmkl.sampler.runner import ChainRunner
from bayesmkl.sampler.sampler import BM3KL, CLASSIFICATION
from tests.sampler.helpers import make_problem


def _problem():
    p = make_problem(seed=3, N=12, C=1, P=3)
    return np.asarray(p["K"]), np.sign(np.asarray(p["delta"]))


def test_chunks_give_numpyros_vectorized_draws_and_compile_once():
    K, delta = _problem()
    kw = dict(
        eta=1.0,
        gamma0=1.0,
        kappa=1.0,
        beta_a=1.0,
        bias_prior_var=1.0,
        adapt_sweeps=4,
        move="collapsed",
    )
    mcmc = MCMC(BM3KL(**kw), num_warmup=4, num_samples=6, num_chains=3,
                chain_method="vectorized", progress_bar=False, jit_model_args=True)  # fmt: skip
    mcmc.run(jax.random.key(5), K, delta, extra_fields=("diverging",))
    ref = mcmc.get_samples(group_by_chain=True)

    run = ChainRunner(BM3KL(**kw), num_chains=3, num_samples=5)
    run.run(jax.random.key(5), K, delta, extra_fields=("diverging",))
    first = run.get_samples()
    run.post_warmup_state = run.last_state
    c0 = compile_clock()
    run.run(run.last_state.rng_key, K, delta, extra_fields=("diverging",))
    assert compile_clock() == c0  # the second chunk reuses the compiled program
    second = run.get_samples()
    for site in ("e", "a", "b", "lam", "nu", "w"):
        both = np.concatenate([first[site], second[site]], axis=1)[:, 4:]  # drop warm-up
        np.testing.assert_allclose(both, np.asarray(ref[site]), rtol=1e-9, atol=1e-12)
    assert run.get_extra_fields()["diverging"].shape == (3, 5)


def test_a_shorter_chunk_reuses_the_program_and_continues_the_same_chains():
    """Chunks of 2, 1 and 3 sweeps after one of 4 run the 4-sweep program (no compile) and give
    the draws, extra fields and last state of one 10-sweep chunk, bit for bit."""
    K, delta = _problem()
    whole = ChainRunner(BM3KL(adapt_sweeps=3), num_chains=2, num_samples=10)
    whole.run(jax.random.key(7), K, delta, extra_fields=("diverging",))
    parts = ChainRunner(BM3KL(adapt_sweeps=3), num_chains=2, num_samples=4)
    draws, extra = [], []
    c0 = None
    for n in (4, 2, 1, 3):
        parts.num_samples = n
        key = jax.random.key(7) if parts.last_state is None else parts.last_state.rng_key
        parts.run(key, K, delta, extra_fields=("diverging",))
        parts.post_warmup_state = parts.last_state
        if c0 is None:
            c0 = compile_clock()  # the first chunk compiles; the shorter ones must not
        draws.append(parts.get_samples())
        extra.append(parts.get_extra_fields())
        assert draws[-1]["a"].shape[1] == n and parts.capacity == 4
    assert compile_clock() == c0
    for site, v in whole.get_samples().items():
        np.testing.assert_array_equal(np.concatenate([d[site] for d in draws], axis=1), v)
    np.testing.assert_array_equal(
        np.concatenate([x["diverging"] for x in extra], axis=1),
        whole.get_extra_fields()["diverging"],
    )
    leaves = zip(jax.tree.leaves(parts.last_state), jax.tree.leaves(whole.last_state), strict=True)
    for got, want in leaves:
        if jax.dtypes.issubdtype(got.dtype, jax.dtypes.prng_key):
            got, want = jax.random.key_data(got), jax.random.key_data(want)
        np.testing.assert_array_equal(got, want)


def test_a_dropped_site_leaves_the_draws_and_omits_only_that_site():
    """``"~z.lam"`` (NumPyro's convention) leaves λ out of the draws; the chains are the same:
    every other site and extra field equals the run that keeps λ, bit for bit."""
    K, delta = _problem()
    out = {}
    for fields in (("diverging",), ("diverging", "~z.lam")):
        run = ChainRunner(BM3KL(adapt_sweeps=3), num_chains=2, num_samples=6)
        run.run(jax.random.key(2), K, delta, extra_fields=fields)
        out[fields] = (run.get_samples(), run.get_extra_fields(), run.last_state)
    (kept, x_kept, last_kept), (dropped, x_dropped, last_dropped) = out.values()
    assert "lam" in kept and "lam" not in dropped and set(kept) - set(dropped) == {"lam"}
    for site, v in dropped.items():
        np.testing.assert_array_equal(v, kept[site], err_msg=site)
    np.testing.assert_array_equal(x_dropped["diverging"], x_kept["diverging"])
    assert set(x_dropped) == {"diverging"}
    # the chains' state still carries λ, so a continuation is unchanged
    np.testing.assert_array_equal(last_dropped.z.lam, last_kept.z.lam)


def test_cache_is_bounded_and_keyed_by_configuration():
    """Chunk functions are built (not compiled: compilation waits for the first call) per key;
    the least recently used beyond CHUNK_CACHE_SIZE are dropped."""
    runner.clear_chunk_cache()
    lik, config = CLASSIFICATION, BM3KL().config
    n_max = runner.CHUNK_CACHE_SIZE + 2
    fns = [runner._chunk_fn(lik, config, 0, n, (), False) for n in range(1, n_max + 1)]
    assert len(runner._CHUNKS) == runner.CHUNK_CACHE_SIZE
    assert runner._chunk_fn(lik, config, 0, n_max, (), False) is fns[-1]
    assert runner._chunk_fn(lik, config, 0, 1, (), False) is not fns[0]  # dropped, so built anew
    assert runner._chunk_fn(lik, BM3KL(gamma0=5.0).config, 0, 1, (), False) is not fns[0]
    reg = BM3KLReg()
    assert runner._chunk_fn(reg.likelihood, reg.config, 0, 1, (), False) is not fns[0]


def test_monitored_decision_values_are_the_monitors():
    """The decision values a chunk returns for the monitored points are what
    ``run_monitor`` computes from the draws (same points, same point-major order, C = 3)."""
    p = make_problem(seed=4, N=12, C=3, P=3)
    K, delta = np.asarray(p["K"]), np.sign(np.asarray(p["delta"]))
    points = np.array([1, 5, 6, 11])  # a strict subset
    kw = dict(
        eta=1.0,
        gamma0=1.0,
        kappa=1.0,
        beta_a=1.0,
        bias_prior_var=1.0,
        adapt_sweeps=2,
        move="collapsed",
    )
    run = ChainRunner(BM3KL(**kw), num_chains=2, num_samples=4, monitor_points=points)
    run.run(jax.random.key(1), K, delta)
    got = run.get_monitored()
    draws = run.get_samples()
    w, a, b = (np.asarray(draws[k]) for k in ("w", "a", "b"))
    Kw = np.einsum("cdp,pij->cdij", w, K)[..., points, :]  # (chains, draws, n, N)
    want = (np.einsum("cdij,cdkj->cdik", Kw, a) + b[:, :, None, :]).reshape(2, 4, -1)
    np.testing.assert_allclose(got["f"], want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(got["w"], w)
    full = ChainRunner(BM3KL(**kw), num_chains=2, num_samples=4, monitor_points=np.arange(12))
    full.run(jax.random.key(1), K, delta)
    np.testing.assert_allclose(
        full.get_monitored()["f"], run_monitor(K, 0)(full.get_samples())["f"], rtol=1e-9, atol=1e-12
    )
    assert ChainRunner(BM3KL(**kw), 2, 4).get_monitored() is None


def test_programs_of_at_most_max_held_shapes_are_kept(monkeypatch):
    """A fit of a new data shape beyond MAX_HELD_SHAPES releases the programs of the earlier
    ones (chunk functions and JAX's caches); a shape seen recently keeps them."""
    runner.release_compiled_programs()
    calls = []
    monkeypatch.setattr(runner.jax, "clear_caches", lambda: calls.append("cleared"))
    shapes = [("shape", i) for i in range(runner.MAX_HELD_SHAPES)]
    assert not any(runner.hold_programs_for(s) for s in shapes)
    runner._chunk_fn(CLASSIFICATION, BM3KL().config, 0, 1, (), False)  # a held chunk function
    assert not runner.hold_programs_for(shapes[0])  # seen: kept, now the most recent
    assert runner.hold_programs_for(("shape", "new")) and calls == ["cleared"]
    assert not runner._CHUNKS and runner._HELD_SHAPES == [("shape", "new")]


def test_release_frees_the_programs_of_jitted_functions():
    """What the release relies on: jax.clear_caches empties a jitted function's programs."""
    f = jax.jit(lambda x: x + 1.0)
    f(np.ones(3))
    f(np.ones(4))
    assert f._cache_size() == 2
    runner.release_compiled_programs()
    assert f._cache_size() == 0


def test_chain_groups_in_threads_give_the_one_program_draws():
    """Four chains run as two groups of two, each group in its own thread, give every chain the
    draws, extra fields, monitored values and last state of one program of four chains, over
    two chunks, to rounding (the program of two chains may vectorise differently: 1e-13 here);
    a chain given another's state or key would differ at the first draw."""
    K, delta = _problem()
    kernel = BM3KL(adapt_sweeps=3)
    runs = {}
    for groups in (1, 2):
        run = ChainRunner(kernel, num_chains=4, num_samples=4, monitor_points=np.array([2, 7]),
                          chain_groups=groups)  # fmt: skip
        assert run.chain_groups == groups
        run.run(jax.random.key(8), K, delta, extra_fields=("accept_prob",))
        run.post_warmup_state = run.last_state
        run.run(run.last_state.rng_key, K, delta, extra_fields=("accept_prob",))
        runs[groups] = run
    one, two = runs[1], runs[2]
    same = dict(rtol=1e-9, atol=1e-12)
    for site in ("e", "a", "b", "lam", "nu", "w"):
        np.testing.assert_allclose(two.get_samples()[site], one.get_samples()[site], **same)
    np.testing.assert_allclose(two.get_extra_fields()["accept_prob"],
                               one.get_extra_fields()["accept_prob"], **same)  # fmt: skip
    np.testing.assert_allclose(two.get_monitored()["f"], one.get_monitored()["f"], **same)
    for x, y in zip(
        jax.tree.leaves(two.last_state.z), jax.tree.leaves(one.last_state.z), strict=True
    ):
        np.testing.assert_allclose(x, y, **same)
    assert two.get_samples()["e"].shape[:2] == (4, 4)


def test_chain_groups_auto_uses_the_cores_and_divides_the_chains(monkeypatch):
    """``"auto"``: the largest divisor of the number of chains not above the usable cores (on
    CPU) unless the kernels are small, or ``$BAYESMKL_CHAIN_GROUPS``; an explicit number must
    divide the chains."""
    monkeypatch.setattr(runner, "_usable_cores", lambda: 2)
    assert [runner.chain_groups_for(c) for c in (1, 2, 3, 4, 6)] == [1, 2, 1, 2, 2]
    monkeypatch.setattr(runner, "_usable_cores", lambda: 8)
    assert [runner.chain_groups_for(c) for c in (4, 6, 12)] == [4, 6, 6]
    assert runner.chain_groups_for(4, 4) == 4
    small, large = runner.MIN_GROUP_KERNEL_ENTRIES - 1, runner.MIN_GROUP_KERNEL_ENTRIES
    assert [runner.chain_groups_for(4, kernel_entries=n) for n in (small, large)] == [1, 4]
    assert runner.chain_groups_for(4, 2, kernel_entries=small) == 2  # asked for: kept
    monkeypatch.setenv(runner.CHAIN_GROUPS_ENV, "1")
    assert runner.chain_groups_for(4) == 1
    monkeypatch.setenv(runner.CHAIN_GROUPS_ENV, "two")
    with pytest.raises(ValueError, match="BAYESMKL_CHAIN_GROUPS"):
        runner.chain_groups_for(4)
    for bad in (3, 0, 5):
        with pytest.raises(ValueError, match="must divide"):
            runner.chain_groups_for(4, bad)


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.mark.parametrize("groups", [1, 2])
def test_chains_sample_with_one_blas_thread(monkeypatch, groups):
    """While chains sample (one program, or two chain groups in threads), the BLAS libraries
    (jaxlib's CPU Cholesky and triangular solves call SciPy's OpenBLAS) run one thread each,
    then get their setting back."""
    from threadpoolctl import threadpool_limits

    K, delta = _problem()
    run = ChainRunner(BM3KL(), num_chains=4, num_samples=2, chain_groups=groups)
    seen = []
    real_fn = runner._chunk_fn

    def spy(*a, **k):
        fn = real_fn(*a, **k)

        def recorded(*args):
            seen.append(_blas_threads())
            return fn(*args)

        return recorded

    monkeypatch.setattr(runner, "_chunk_fn", spy)
    with threadpool_limits(limits=2, user_api="blas"):  # one thread per core, as by default
        run.run(jax.random.key(0), K, delta)
        assert seen == [1] * groups
        assert _blas_threads() == 2
