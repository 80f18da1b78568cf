"""ArviZ ``DataTree`` building for BM3KL fits, classifier and regressor (pure functions from
arrays and names).

Groups and dimensions (``chain``, ``draw`` lead every posterior and sample-stat variable):

========================  ======================  ==========================================
group                     variable                dims
========================  ======================  ==========================================
posterior                 ``w``, ``e``            (chain, draw, kernel); ``kernel`` = kernel
                                                  names
posterior                 ``a``, ``lam``,         (chain, draw, class, obs)
                          ``nu``, ``varsigma``
posterior                 ``b``                   (chain, draw, class)
sample_stats              ``acceptance_rate``,    (chain, draw)  (no ``energy``: see below)
                          ``diverging``, ``lp``,
                          ``step_size``
observed_data             ``y``                   (obs,)
log_likelihood            ``y``                   (chain, draw, obs)  (when given: log
                                                  probability of each training label per
                                                  draw, for ``az.loo``)
``posterior_predictive``  ``y``                   (chain, draw, obs)  (only from
                                                  :func:`add_posterior_predictive`)
predictions               ``proba``               (chain, draw, obs, class)  (only from
                                                  :func:`add_predictions`)
========================  ======================  ==========================================

A regression's tree (``classes=None``) has no ``class`` dimension: its ``a``, ``lam_plus``,
``lam_minus``, ``nu``, ``varsigma`` are ``(chain, draw, obs)``, ``b``, ``c``, ``eps`` and
``eps_standardised`` ``(chain, draw)``, and ``observed_data.y`` holds the targets. All are on
the standardised scale of y (root attributes ``y_mean``, ``y_scale``) except ``eps``, the tube's
half-width in units of y, whose posterior mean is ``epsilon_``; ``eps_standardised`` holds the
sampler's draws of it (each variable's attribute ``description`` says which).

The ``obs`` coordinate labels the training rows: the index of a pandas ``DataFrame`` passed to
``fit`` (``train_index_``), else 0 … N−1.

``lp`` is ``-potential_energy`` of the augmented model (the log joint up to a constant).

One dimension, ``class`` (:data:`CLASS_DIM`), indexes classes in every group: in the posterior
its coordinate names the one-vs-all problems by their class (all class labels, or, for the
single binary classifier of docs/math.md §1.2, the positive class only), in ``predictions`` the
classes the probabilities are of. The coordinate keeps the labels' type, so
``.sel({"class": 1})`` works for integer labels in both (``class`` is a Python keyword, hence
the dict); labels netCDF cannot hold (Python objects) become strings.

No ``energy`` (:data:`NO_ENERGY`, also the ``sample_stats`` attribute ``energy``), so
``arviz.plot_energy`` and ``arviz.bfmi`` refuse these trees: E-BFMI judges the momentum
resampling of an HMC chain from its Hamiltonian's energy distribution, and no move of this
sampler is an HMC transition of the posterior. The HMC step of the ``"collapsed"`` and
``"exact"`` moves is one block of a Gibbs sweep, on the conditional of the kernel weights given
the other blocks (λ, ν and all or, collapsed, part of a, b), which those change every sweep;
its potential is defined up to a constant that changes with them, so energies of different
sweeps are not on one scale. (The sampler state does not carry that Hamiltonian either:
``potential_energy`` is −log p of the whole augmented model after the sweep.) ``"gibbs"`` has no
momentum, ``"rmala"`` is a Metropolis-adjusted Langevin move, ``"paper"``/``"stable"`` are not
exact. Use R-hat and ESS of the weights and decision values (``run_report_``) and the
``diverging`` flags instead.

PSIS-LOO (:func:`loo`, or ``BM3KLClassifier.loo``) refuses, with the reason and what to do, a
log-likelihood it cannot use (:func:`loo_problem`), where ``arviz.loo`` fails with "All tail
values are the same": with ``calibration=None`` the raw rule gives most training points
probability 1 to machine precision in every draw, so their log-likelihood is exactly 0
everywhere and the importance ratios have no tail to fit. The group records such a problem in
its attribute ``psis_loo``.

``posterior_predictive.y`` holds replicated training labels, one per draw, drawn from that draw's
predictive probabilities; with ``observed_data.y`` it makes ArviZ's posterior predictive checks
work, e.g. ``arviz_plots.plot_ppc_pava`` (calibration; labels 0/1, or 0..K−1 with
``data_type="categorical"``) and ``arviz_plots.plot_ppc_rootogram`` (class counts).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from arviz_base import from_dict

from bayesmkl.posterior.loo import KHAT_BAD, KHAT_SHARE_WARN, MIN_PSIS_DRAWS

__all__ = [
    "CLASS_DIM",
    "MIN_PSIS_DRAWS",
    "NO_ENERGY",
    "POSTERIOR_DIMS",
    "SQUEEZED",
    "add_posterior_predictive",
    "add_predictions",
    "build_datatree",
    "classifier_labels",
    "loo",
    "loo_problem",
    "obs_coordinate",
    "regression_posterior_from_tree",
    "regression_tree_posterior",
    "row_labels",
    "sample_stats_to_arviz",
    "unsqueeze_posterior",
]

#: The class dimension of every group. Why "class": its values are class labels wherever it
#: appears (a posterior row belongs to the one-vs-all problem of that class; a prediction is the
#: probability of that class), so one name lets the same ``.sel`` work on the posterior and on
#: the predictions, and it is the name predictions already had. "classifier" (the posterior's
#: earlier name) misnames the probabilities of the two classes of a single binary classifier,
#: and "label" is taken: ArviZ stacks variables into a "label" dimension (``az.summary``,
#: ``arviz_base.dataset_to_dataarray``).
CLASS_DIM = "class"

#: Dimension names (after ``chain, draw``) of each posterior site.
POSTERIOR_DIMS = {
    "w": ["kernel"],
    "e": ["kernel"],
    "a": [CLASS_DIM, "obs"],
    "b": [CLASS_DIM],
    "lam": [CLASS_DIM, "obs"],
    "lam_plus": [CLASS_DIM, "obs"],
    "lam_minus": [CLASS_DIM, "obs"],
    "nu": [CLASS_DIM, "obs"],
    "varsigma": [CLASS_DIM, "obs"],
}

#: The sites with one entry per landmark in a landmark fit (docs/math.md §16).
LANDMARK_SITES = ("a", "nu", "varsigma")

#: A regression's sites stored with a classifier axis of length 1 (the classifier's layout),
#: which its DataTree drops: ``(chain, draw, 1[, obs])`` in ``posterior_``, ``(chain, draw[,
#: obs])`` in the tree.
SQUEEZED = ("a", "b", "lam_plus", "lam_minus", "nu", "varsigma")


def classifier_labels(classes, n_classifiers: int) -> list:
    """Names of the one-vs-all problems: ``[classes[1]]`` for one binary classifier.

    Parameters
    ----------
    classes : array (K,)
        Class labels; their type is kept (Python objects become strings).
    n_classifiers : int
        C, the number of rows of ``a``.
    """
    classes = _storable(np.asarray(classes)).tolist()
    if n_classifiers == 1:
        return [classes[1]]
    return classes[:n_classifiers]


#: Why ``sample_stats`` has no ``energy`` (its attribute ``energy``; see the module docstring).
NO_ENERGY = (
    "not recorded: no move of this sampler is an HMC transition of the posterior, so E-BFMI "
    "(arviz plot_energy, bfmi) has no Hamiltonian to judge. The HMC step of the 'collapsed' and "
    "'exact' moves acts on the conditional of the kernel weights given the other blocks of the "
    "Gibbs sweep, which change every sweep, so its energies are not on one scale. Use R-hat and "
    "ESS (run_report_) and the diverging flags."
)
_LOO_ADVICE = (
    " Compare fits by K-fold ELPD instead: bayesmkl.compare_kfold({'A': model_a, 'B': model_b}, "
    "X, y) refits each model per fold, whatever its calibration (or, for a fit calibrated with "
    "calibration='cv', clf.loo_kfold() reuses its calibration refits)."
)

#: ``sample_stats_`` name of each NumPyro extra field the sampler collects.
_FROM_EXTRA = {
    "accept_prob": "acceptance_rate",
    "diverging": "diverging",
    "potential_energy": "potential_energy",
    "step_size": "step_size",
}


def sample_stats_from_extra(extra: dict) -> dict:
    """The estimator's ``sample_stats_`` from NumPyro's extra fields (``(chain, draw)`` each)."""
    return {ours: np.asarray(extra[theirs]) for theirs, ours in _FROM_EXTRA.items()}


def extra_from_sample_stats(stats: dict) -> dict:
    """Inverse of :func:`sample_stats_from_extra` (to continue a run in NumPyro's names)."""
    return {theirs: stats[ours] for theirs, ours in _FROM_EXTRA.items()}


def sample_stats_from_arviz(stats) -> dict:
    """Inverse of :func:`sample_stats_to_arviz` for a read ``sample_stats`` group (mapping of
    name → array-like): the estimator's ``sample_stats_``."""
    return {
        "acceptance_rate": np.asarray(stats["acceptance_rate"]),
        "diverging": np.asarray(stats["diverging"]).astype(bool),
        "potential_energy": -np.asarray(stats["lp"]),
        "step_size": np.asarray(stats["step_size"]),
    }


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
    classes=None,
    y=None,
    log_likelihood=None,
    attrs: dict | None = None,
    landmarks=None,
    obs=None,
    var_attrs: dict | None = None,
) -> xr.DataTree:
    """Build the ArviZ ``DataTree`` of a BM3KL fit, classifier or regressor.

    Parameters
    ----------
    posterior : dict of str → array
        Draws with a leading chain axis: ``w, e: (chains, draws, P)``,
        ``a, lam, nu, varsigma: (chains, draws, C, N)``, ``b: (chains, draws, C)``; a
        regression's ``lam_plus, lam_minus`` like ``lam`` and ``c, eps: (chains, draws)``. Sites
        not present are skipped; unknown sites get ArviZ's default dimension names.
    sample_stats : dict of str → array (chains, draws)
        NumPyro names (``accept_prob``, ``diverging``, ``step_size``, ``potential_energy``) or
        ArviZ names (see :func:`sample_stats_to_arviz`).
    kernel_names : sequence of str, length P
    classes : array (K,), optional
        Class labels (the ``class`` coordinate: the classes of the C one-vs-all problems).
        ``None`` for a regression: its one function's axis of length C = 1 is dropped
        (:data:`SQUEEZED`), so ``a`` has dims ``(chain, draw, obs)``.
    y : array (N,), optional
        Training labels or targets, stored in ``observed_data`` (a regression's as floats).
    log_likelihood : array (chains, draws, N), optional
        Pointwise log-likelihood of the training labels (group ``log_likelihood``, variable
        ``y``), which ``arviz.loo`` and ``arviz.compare`` read; its attribute ``psis_loo`` says
        why PSIS cannot use it, where it cannot (:func:`loo_problem`).
    attrs : dict, optional
        Root attributes.
    landmarks : array (M,), optional
        A landmark fit's ``landmark`` coordinate (docs/math.md §16; the landmarks' training
        rows): ``a``, ``nu``, ``varsigma`` then have the dimension ``landmark`` in place of
        ``obs``, which stays the N training points of ``lam`` and ``y``.
    obs : array (N,), optional
        Coordinate of the ``obs`` dimension: the labels of the training rows (the index of a
        pandas ``DataFrame``; labels netCDF cannot hold become strings). Default 0 … N−1.
    var_attrs : dict of str → dict, optional
        Attributes of posterior variables (e.g. the scale a variable is on).

    Returns
    -------
    xarray.DataTree
        Groups ``posterior``, ``sample_stats``, (with ``y``) ``observed_data`` and (with
        ``log_likelihood``) ``log_likelihood``.
    """
    posterior = {k: np.asarray(v) for k, v in posterior.items()}
    if classes is None:  # a regression: one function, its classifier axis dropped
        posterior = {k: v[:, :, 0] if k in SQUEEZED else v for k, v in posterior.items()}
        site_dims = {k: [d for d in v if d != CLASS_DIM] for k, v in POSTERIOR_DIMS.items()}
        N = len(y) if y is not None else 0
        coords = {"kernel": [str(n) for n in kernel_names], "obs": obs_coordinate(obs, N)}
    else:
        site_dims = POSTERIOR_DIMS
        C = (
            posterior["a"].shape[2]
            if "a" in posterior
            else (posterior["b"].shape[2] if "b" in posterior else 1)
        )
        # the training points (a landmark fit's a has M columns; its lam, if stored, N)
        site = "a" if landmarks is None else "lam"
        N = posterior[site].shape[3] if site in posterior else (len(y) if y is not None else 0)
        coords = {
            "kernel": [str(n) for n in kernel_names],
            CLASS_DIM: classifier_labels(classes, C),
            "obs": obs_coordinate(obs, N),
        }
    if landmarks is not None:
        coords["landmark"] = np.asarray(landmarks)
        site_dims = {k: ["landmark" if (d == "obs" and k in LANDMARK_SITES) else d for d in v]
                     for k, v in site_dims.items()}  # fmt: skip
    dims = {k: v for k, v in site_dims.items() if k in posterior}
    data = {
        "posterior": posterior,
        "sample_stats": sample_stats_to_arviz(sample_stats),
    }
    if y is not None:
        y = np.asarray(y, dtype=float) if classes is None else _storable(np.asarray(y))
        data["observed_data"] = {"y": y}
        dims["y"] = ["obs"]
    group_attrs = {"sample_stats": {"energy": NO_ENERGY}}
    if log_likelihood is not None:
        data["log_likelihood"] = {"y": np.asarray(log_likelihood, dtype=float)}
        dims["y"] = ["obs"]
        problem = loo_problem(data["log_likelihood"]["y"])
        if problem is not None:
            group_attrs["log_likelihood"] = {"psis_loo": problem}
    if attrs:
        group_attrs["/"] = dict(attrs)
    tree = from_dict(data, coords=coords, dims=dims, attrs=group_attrs, check_conventions=False)
    for name, var in (var_attrs or {}).items():
        tree["posterior"][name].attrs.update(var)
    return tree


#: The attributes of a regression tree's ``eps`` and ``eps_standardised``
#: (:func:`regression_tree_posterior`).
EPS_ATTRS = {
    "eps": {
        "description": "half-width of the epsilon-insensitive tube in units of y "
        "(eps_standardised * y_scale); its posterior mean is BM3KLRegressor.epsilon_",
    },
    "eps_standardised": {
        "description": "the sampler's draws of the tube's half-width, on the standardised scale "
        "of y (y - y_mean) / y_scale, like a, b and c",
    },
}


def regression_tree_posterior(posterior: dict, y_scale: float) -> dict:
    """A regressor's draws as its DataTree holds them: ``eps`` in units of y (what ``epsilon_``
    averages) and the sampler's standardised draws as ``eps_standardised``, which
    :func:`regression_posterior_from_tree` reads back bit for bit (the other sites unchanged,
    on the standardised scale)."""
    out = {k: v for k, v in posterior.items() if k != "eps"}
    if "eps" in posterior:
        eps = np.asarray(posterior["eps"])
        out["eps"] = eps * float(y_scale)
        out["eps_standardised"] = eps
    return out


def regression_posterior_from_tree(posterior: dict) -> dict:
    """Inverse of :func:`regression_tree_posterior` and of the tree's layout
    (:func:`unsqueeze_posterior`): the draws as ``BM3KLRegressor.posterior_`` holds them. A tree
    without ``eps_standardised`` (files saved before it existed) holds ``eps`` standardised."""
    posterior = dict(posterior)
    if "eps_standardised" in posterior:
        posterior["eps"] = posterior.pop("eps_standardised")
    return unsqueeze_posterior(posterior)


def obs_coordinate(obs, n: int) -> np.ndarray:
    """The ``obs`` coordinate of ``n`` training rows: ``obs`` as netCDF can hold it (numbers and
    booleans as they are, other labels, e.g. dates or tuples of a ``MultiIndex``, as strings),
    or 0 … n−1 when ``obs`` is ``None``."""
    if obs is None:
        return np.arange(n)
    obs = _storable(np.asarray(obs).reshape(-1))
    if obs.shape != (n,):
        raise ValueError(f"got {obs.size} obs labels for {n} training rows")
    return obs


def row_labels(X, n: int) -> np.ndarray:
    """The labels of the ``n`` rows of ``X``: a pandas ``DataFrame``'s (or ``Series``'s) index
    (:func:`obs_coordinate`), else 0 … n−1 (arrays, lists, precomputed kernel stacks)."""
    index = getattr(X, "index", None)
    if index is None or not hasattr(X, "iloc") or len(index) != n:
        return np.arange(n)
    return obs_coordinate(np.asarray(index), n)


def unsqueeze_posterior(posterior: dict) -> dict:
    """Inverse of a regression tree's layout (:data:`SQUEEZED`): the posterior draws as
    ``BM3KLRegressor.posterior_`` holds them."""
    return {k: (np.asarray(v)[:, :, None] if k in SQUEEZED else np.asarray(v))
            for k, v in posterior.items()}  # fmt: skip


def loo_problem(log_likelihood) -> str | None:
    """Why PSIS-LOO cannot use this log-likelihood, or ``None`` when it can.

    Parameters
    ----------
    log_likelihood : array (chains, draws, N)
        Per-draw log probability of each training label.

    Returns
    -------
    str or None
        A message saying why and what to do: fewer than :data:`MIN_PSIS_DRAWS` draws, a
        non-finite value, or a training point whose log-likelihood is the same in every draw
        (its importance ratios are then constant, and ArviZ's Pareto fit fails with "All tail
        values are the same"; the raw rule of ``calibration=None`` does this, since it gives
        most training points probability 1 to machine precision).
    """
    ll = np.asarray(log_likelihood, dtype=float)
    n_draws, n = int(np.prod(ll.shape[:-1])), ll.shape[-1]
    flat = ll.reshape(n_draws, n)
    if n_draws < MIN_PSIS_DRAWS:
        return (
            f"PSIS-LOO needs at least {MIN_PSIS_DRAWS} posterior draws (ArviZ fits a Pareto tail "
            f"to a fifth of them, at least 5 draws); this fit has {n_draws}. Sample more "
            "(num_samples, num_chains)."
        )
    if not np.all(np.isfinite(flat)):
        bad = int(np.sum(~np.all(np.isfinite(flat), axis=0)))
        return f"PSIS-LOO cannot be computed: the log-likelihood of {bad} of {n} training " + (
            "points is not finite." + _LOO_ADVICE
        )
    constant = np.ptp(flat, axis=0) == 0
    if np.any(constant):
        values = np.unique(flat[0, constant])
        return (
            f"PSIS-LOO cannot be computed: the log-likelihood of {int(constant.sum())} of {n} "
            f"training points is the same in every draw (log p = {values[0]:g}"
            + (" for all of them" if values.size == 1 else ", ...")
            + "), so their leave-one-out importance ratios are constant and ArviZ's Pareto "
            "smoothing has no tail to fit ('All tail values are the same'). This is the raw "
            "rule of calibration=None: it gives most training points probability 1 to machine "
            "precision." + _LOO_ADVICE
        )
    return None


def loo(tree: xr.DataTree, **kwargs):
    """``arviz.loo`` of a BM3KL DataTree, refused with a reason where PSIS cannot run.

    Parameters
    ----------
    tree : xarray.DataTree
        With a ``log_likelihood`` group (``BM3KLClassifier.to_datatree()``).
    **kwargs
        Passed to :func:`arviz_stats.loo` (e.g. ``pointwise=True``).

    Returns
    -------
    arviz_stats.ELPDData

    Raises
    ------
    ValueError
        When :func:`loo_problem` finds the log-likelihood unusable, or ArviZ's Pareto fit fails
        on it anyway; the message says why and what to do instead.

    Warns
    -----
    UserWarning
        When more than :data:`~bayesmkl.posterior.loo.KHAT_SHARE_WARN` of the training points
        have Pareto k̂ > 0.7: the estimate is then unreliable, and the warning names the share
        and :func:`bayesmkl.compare_kfold`, which compares fits by refitting.
    """
    import warnings

    from arviz_stats import loo as arviz_loo

    if "log_likelihood" not in tree.children:
        raise ValueError(
            "the tree has no log_likelihood group; use the tree of a fitted classifier "
            "(clf.to_datatree())"
        )
    problem = loo_problem(tree["log_likelihood"]["y"].values)
    if problem is not None:
        raise ValueError(problem)
    try:
        with warnings.catch_warnings():  # ArviZ's own k̂ warning is replaced by the one below
            warnings.filterwarnings("ignore", message=".*[Pp]areto.*")
            result = arviz_loo(tree, **{"pointwise": True, **kwargs})
    except ValueError as exc:
        if "tail" not in str(exc):
            raise
        raise ValueError(
            f"PSIS-LOO failed in ArviZ ({exc}): the largest importance ratios of some training "
            "points are all equal (their log-likelihood barely varies between draws)." + _LOO_ADVICE
        ) from exc
    khat = np.asarray(result.pareto_k)
    share = float(np.mean(~(khat <= KHAT_BAD)))
    if share > KHAT_SHARE_WARN:
        warnings.warn(
            f"PSIS-LOO is unreliable for this fit: {share:.0%} of the training points "
            f"({int(round(share * khat.size))} of {khat.size}) have Pareto k-hat > {KHAT_BAD} "
            "(BM3KL has a sample weight per training point, so leaving one out moves the "
            "posterior)." + _LOO_ADVICE,
            UserWarning,
            stacklevel=3,
        )
    return result


def add_predictions(tree: xr.DataTree, proba, classes, obs=None) -> xr.DataTree:
    """Return a copy of ``tree`` with a ``predictions`` group of per-draw probabilities.

    Parameters
    ----------
    tree : xarray.DataTree
    proba : array (chains, draws, M, K)
        Per-draw predictive probabilities of M new points (each row sums to 1).
    classes : array (K,)
        Class labels (coordinate ``class``, of the labels' type).
    obs : array (M,), optional
        Labels of the new rows (:func:`obs_coordinate`; default 0 … M−1).

    Returns
    -------
    xarray.DataTree
    """
    proba = np.asarray(proba)
    chains, draws, M, K = proba.shape
    ds = xr.Dataset(
        {"proba": (("chain", "draw", "obs", CLASS_DIM), proba)},
        coords={
            "chain": np.arange(chains),
            "draw": np.arange(draws),
            "obs": obs_coordinate(obs, M),
            CLASS_DIM: _storable(np.asarray(classes)),
        },
    )
    out = tree.copy()
    out["predictions"] = xr.DataTree(ds)
    return out


def add_posterior_predictive(
    tree: xr.DataTree, proba, classes, y=None, *, random_state=0
) -> xr.DataTree:
    """Return a copy of ``tree`` with replicated training labels in ``posterior_predictive``.

    For every draw (c, d) and training point i, ``y_rep[c, d, i]`` is drawn from the categorical
    distribution ``proba[c, d, i, :]`` (one draw of each point per posterior draw, so the groups
    have ArviZ's shapes), with NumPy's generator seeded by ``random_state``.

    Parameters
    ----------
    tree : xarray.DataTree
        A tree from :func:`build_datatree`.
    proba : array (chains, draws, N, K)
        Per-draw predictive probabilities of the N training points (rows sum to 1).
    classes : array (K,)
        Class labels; ``y_rep`` holds labels of the same type as ``observed_data.y``.
    y : array (N,), optional
        Observed labels; (re)written to ``observed_data`` when given.
    random_state : int, numpy Generator or None, default 0

    Returns
    -------
    xarray.DataTree
        With ``posterior_predictive.y`` (dims ``chain, draw, obs``) and ``observed_data.y``.
    """
    proba = np.asarray(proba, dtype=np.float64)
    chains, draws, N, K = proba.shape
    labels = _storable(np.asarray(classes))
    if labels.shape != (K,):
        raise ValueError(f"got {labels.size} classes for probabilities over {K} classes")
    rng = np.random.default_rng(random_state)
    cdf = np.cumsum(proba, axis=-1)
    u = rng.uniform(size=(chains, draws, N, 1)) * cdf[..., -1:]  # rows sum to 1 up to rounding
    codes = np.minimum(np.sum(cdf <= u, axis=-1), K - 1)  # inverse-CDF draw
    obs = _tree_obs(tree, N)
    coords = {"chain": np.arange(chains), "draw": np.arange(draws), "obs": obs}
    out = tree.copy()
    out["posterior_predictive"] = xr.DataTree(
        xr.Dataset({"y": (("chain", "draw", "obs"), labels[codes])}, coords=coords)
    )
    if y is not None:
        y = _storable(np.asarray(y))
        if y.shape != (N,):
            raise ValueError(f"y has shape {y.shape}; expected ({N},) like the probabilities")
        out["observed_data"] = xr.DataTree(xr.Dataset({"y": (("obs",), y)}, coords={"obs": obs}))
    return out


def _tree_obs(tree: xr.DataTree, n: int) -> np.ndarray:
    """The ``obs`` coordinate of ``tree`` (the training rows' labels) when it has ``n`` of them,
    else 0 … n−1."""
    for group in ("observed_data", "posterior"):
        if group in tree.children and "obs" in tree[group].coords:
            obs = np.asarray(tree[group].coords["obs"].values)
            if obs.shape == (n,):
                return obs
    return np.arange(n)


def _storable(y: np.ndarray) -> np.ndarray:
    """Labels netCDF can hold: numbers and booleans as they are, anything else as strings."""
    if y.dtype.kind in "biuf":
        return y
    return y.astype(str)
