"""A sparse variational GP classifier in GPJax: the large-N peer of ``benchmarks/large_n.py``.

Runs in a separate interpreter that has GPJax (a benchmark-only peer, never a dependency of
bayesmkl): ``python svgp_gpjax.py DATA.npz OUT.json SEED [INDUCING ITERS]``. ``DATA.npz`` holds
``Xtr``, ``ytr`` (labels 0/1) and ``Xte``; ``OUT.json`` receives the test probabilities
``proba`` (n_test × 2), ``fit_s`` and the process's ``peak_rss_gb``.

Model: standardised features, zero mean, RBF kernel with one length scale per feature, a
Bernoulli (probit) likelihood, INDUCING points (default 200) seeded by k-means++ on the training
rows, a whitened variational Gaussian q(u), the ELBO maximised by Adam (learning rate 0.01,
ITERS mini-batch steps of 512 rows, default 1,500): GPJax's documented SVGP recipe. (With 398
inducing points one step took about 0.45 s on this machine under load, hence the defaults.)
"""

import json
import resource
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import gpjax as gpx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import numpy as np  # noqa: E402
import optax as ox  # noqa: E402
from sklearn.cluster import kmeans_plusplus  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

BATCH = 512


def main(data_path: str, out_path: str, seed: int, num_inducing: int = 200, num_iters: int = 1500):
    d = np.load(data_path)
    scaler = StandardScaler().fit(d["Xtr"])
    Xtr, Xte = scaler.transform(d["Xtr"]), scaler.transform(d["Xte"])
    ytr = d["ytr"].astype(np.float64)[:, None]
    t0 = time.perf_counter()
    n, dim = Xtr.shape
    z, _ = kmeans_plusplus(Xtr, min(num_inducing, n), random_state=seed)
    data = gpx.Dataset(X=jnp.asarray(Xtr), y=jnp.asarray(ytr))
    kernel = gpx.kernels.RBF(lengthscale=jnp.ones(dim))
    prior = gpx.gps.Prior(mean_function=gpx.mean_functions.Zero(), kernel=kernel)
    posterior = prior * gpx.likelihoods.Bernoulli()
    q = gpx.variational_families.WhitenedVariationalGaussian(
        model=posterior, inducing_inputs=jnp.asarray(z)
    )
    q, _ = gpx.fit(
        model=q,
        objective=lambda m, b: -gpx.objectives.elbo(m, b),
        train_data=data,
        optim=ox.adam(0.01),
        num_iters=num_iters,
        batch_size=min(BATCH, n),
        key=jr.key(seed),
        verbose=False,
    )
    jax.block_until_ready(eqx.filter(q, eqx.is_array))  # dispatch is asynchronous
    fit_s = time.perf_counter() - t0
    p1 = []
    for i in range(0, len(Xte), 1000):
        latent = q(jnp.asarray(Xte[i : i + 1000]))
        p1.append(np.asarray(q.model.likelihood.predict(latent).probs).ravel())
    p1 = np.clip(np.concatenate(p1), 0.0, 1.0)
    out = {
        "proba": np.column_stack([1.0 - p1, p1]).tolist(),
        "fit_s": fit_s,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "num_inducing": int(len(z)),
        "num_iters": num_iters,
    }
    with open(out_path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
