"""ArviZ ``DataTree`` building for BM3KL fits (pure functions from arrays and names).

Groups and dimensions (``chain``, ``draw`` lead every posterior and sample-stat variable):

================  ==========================  ==============================================
group             variable                    dims
================  ==========================  ==============================================
posterior         ``w``, ``e``                (chain, draw, kernel); ``kernel`` = kernel names
posterior         ``a``, ``lam``, ``nu``,     (chain, draw, classifier, obs)
                  ``varsigma``
posterior         ``b``                       (chain, draw, classifier)
sample_stats      ``acceptance_rate``,        (chain, draw)
                  ``diverging``, ``lp``,
                  ``step_size``
observed_data     ``y``                       (obs,)
log_likelihood    ``y``                       (chain, draw, obs)  (when given: log probability
                                              of each training label per draw, for ``az.loo``)
predictions       ``proba``                   (chain, draw, obs, class)  (only from
                                              :func:`add_predictions`)
================  ==========================  ==============================================

``lp`` is ``-potential_energy`` of the augmented model (the log joint up to a constant).
``classifier`` names the one-vs-all problems: the class labels, or, for the single binary
classifier (spec §1.2), the positive class only.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from arviz_base import from_dict

__all__ = [
    "POSTERIOR_DIMS",
    "add_predictions",
    "build_datatree",
    "classifier_labels",
    "sample_stats_to_arviz",
]

#: Dimension names (after ``chain, draw``) of each posterior site.
POSTERIOR_DIMS = {
    "w": ["kernel"],
    "e": ["kernel"],
    "a": ["classifier", "obs"],
    "b": ["classifier"],
    "lam": ["classifier", "obs"],
    "nu": ["classifier", "obs"],
    "varsigma": ["classifier", "obs"],
}


def classifier_labels(classes, n_classifiers: int) -> list[str]:
    """Names of the one-vs-all problems: ``[str(classes[1])]`` for one binary classifier.

    Parameters
    ----------
    classes : array (K,)
        Class labels.
    n_classifiers : int
        C, the number of rows of ``a``.
    """
    classes = [str(c) for c in np.asarray(classes).tolist()]
    if n_classifiers == 1:
        return [classes[1]]
    return classes[:n_classifiers]


def sample_stats_to_arviz(stats: dict) -> dict:
    """Rename NumPyro-style sampler statistics to ArviZ conventions.

    ``accept_prob``/``acceptance_rate`` → ``acceptance_rate``, ``potential_energy`` → ``lp``
    (negated), ``diverging`` and ``step_size`` unchanged. Arrays are ``(chain, draw)``.
    """
    out = {}
    for key, value in stats.items():
        value = np.asarray(value)
        if key in ("accept_prob", "acceptance_rate"):
            out["acceptance_rate"] = value
        elif key == "potential_energy":
            out["lp"] = -value
        elif key in ("diverging", "step_size", "lp"):
            out[key] = value
    return out


def build_datatree(
    posterior: dict,
    sample_stats: dict,
    *,
    kernel_names,
    classes,
    y=None,
    log_likelihood=None,
    attrs: dict | None = None,
) -> xr.DataTree:
    """Build the ArviZ ``DataTree`` of a BM3KL fit.

    Parameters
    ----------
    posterior : dict of str → array
        Draws with a leading chain axis: ``w, e: (chains, draws, P)``,
        ``a, lam, nu, varsigma: (chains, draws, C, N)``, ``b: (chains, draws, C)``. Sites not
        present are skipped; unknown sites get ArviZ's default dimension names.
    sample_stats : dict of str → array (chains, draws)
        NumPyro names (``accept_prob``, ``diverging``, ``step_size``, ``potential_energy``) or
        ArviZ names (see :func:`sample_stats_to_arviz`).
    kernel_names : sequence of str, length P
    classes : array (K,)
        Class labels (used for the ``classifier`` coordinate).
    y : array (N,), optional
        Training labels, stored in ``observed_data``.
    log_likelihood : array (chains, draws, N), optional
        Pointwise log-likelihood of the training labels (group ``log_likelihood``, variable
        ``y``), which ``arviz.loo`` and ``arviz.compare`` read.
    attrs : dict, optional
        Root attributes.

    Returns
    -------
    xarray.DataTree
        Groups ``posterior``, ``sample_stats``, (with ``y``) ``observed_data`` and (with
        ``log_likelihood``) ``log_likelihood``.
    """
    posterior = {k: np.asarray(v) for k, v in posterior.items()}
    C = (
        posterior["a"].shape[2]
        if "a" in posterior
        else (posterior["b"].shape[2] if "b" in posterior else 1)
    )
    N = posterior["a"].shape[3] if "a" in posterior else (len(y) if y is not None else 0)
    coords = {
        "kernel": [str(n) for n in kernel_names],
        "classifier": classifier_labels(classes, C),
        "obs": np.arange(N),
    }
    dims = {k: v for k, v in POSTERIOR_DIMS.items() if k in posterior}
    data = {
        "posterior": posterior,
        "sample_stats": sample_stats_to_arviz(sample_stats),
    }
    if y is not None:
        data["observed_data"] = {"y": _storable(np.asarray(y))}
        dims["y"] = ["obs"]
    if log_likelihood is not None:
        data["log_likelihood"] = {"y": np.asarray(log_likelihood, dtype=float)}
        dims["y"] = ["obs"]
    tree_attrs = {"/": dict(attrs)} if attrs else None
    return from_dict(data, coords=coords, dims=dims, attrs=tree_attrs, check_conventions=False)


def add_predictions(tree: xr.DataTree, proba, classes) -> xr.DataTree:
    """Return a copy of ``tree`` with a ``predictions`` group of per-draw probabilities.

    Parameters
    ----------
    tree : xarray.DataTree
    proba : array (chains, draws, M, K)
        Per-draw predictive probabilities of M new points (each row sums to 1).
    classes : array (K,)
        Class labels (coordinate ``class``, stored as strings).

    Returns
    -------
    xarray.DataTree
    """
    proba = np.asarray(proba)
    chains, draws, M, K = proba.shape
    ds = xr.Dataset(
        {"proba": (("chain", "draw", "obs", "class"), proba)},
        coords={
            "chain": np.arange(chains),
            "draw": np.arange(draws),
            "obs": np.arange(M),
            "class": [str(c) for c in np.asarray(classes).tolist()],
        },
    )
    out = tree.copy()
    out["predictions"] = xr.DataTree(ds)
    return out


def _storable(y: np.ndarray) -> np.ndarray:
    """Labels netCDF can hold: numbers and booleans as they are, anything else as strings."""
    if y.dtype.kind in "biuf":
        return y
    return y.astype(str)
