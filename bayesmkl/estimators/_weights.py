"""Per-sample weights with scikit-learn's semantics, shared by every classifier of the package.

``sample_weight`` (a ``fit`` argument) and ``class_weight`` (an estimator parameter) combine as in
scikit-learn: the effective weight of training point i is
``sample_weight[i] * class_weight[y[i]]``, with ``class_weight="balanced"`` meaning
``N / (n_classes * count(y[i]))`` computed from the *unweighted* class counts (as
:func:`sklearn.utils.class_weight.compute_sample_weight` does). A weight multiplies point i's
loss (likelihood) term; for a C-SVC it scales the box constraint of that point, ``C_i = C·s_i``,
so an integer weight is the same as repeating the row and a zero weight the same as dropping it.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
from sklearn.utils import check_array
from sklearn.utils.class_weight import compute_sample_weight

__all__ = ["check_class_weight", "check_sample_weight", "effective_sample_weight"]


def check_sample_weight(sample_weight, n: int, *, max_weight: float | None = None) -> np.ndarray:
    """``sample_weight`` as a float64 array ``(n,)`` of finite, non-negative weights.

    ``None`` gives ones and a scalar is broadcast (the semantics of scikit-learn's private
    ``_check_sample_weight``, which the package does not import). ``max_weight``: the largest
    weight allowed (``ValueError`` naming the weight above it).
    """
    if sample_weight is None:
        sw = np.ones(n, dtype=np.float64)
    elif isinstance(sample_weight, numbers.Number) and not isinstance(sample_weight, bool):
        sw = np.full(n, sample_weight, dtype=np.float64)
    else:
        # check_array first: it converts array-likes (np.ndim would not accept them all)
        sw = check_array(
            sample_weight, ensure_2d=False, allow_nd=True, dtype=np.float64,
            input_name="sample_weight", ensure_min_samples=0, ensure_all_finite=False,
        )  # fmt: skip
        if sw.ndim != 1:
            raise ValueError(
                f"Sample weights must be 1D array or scalar, got {sw.ndim}D array. Expected "
                f"either a scalar value or a 1D array of length {n}."
            )
        if sw.shape != (n,):
            raise ValueError(f"sample_weight.shape == {sw.shape}, expected {(n,)}!")
    if not np.all(np.isfinite(sw)):
        raise ValueError("Input sample_weight contains NaN or infinity.")
    if np.any(sw < 0):
        raise ValueError("Negative values in data passed to `sample_weight`")
    if max_weight is not None and np.any(sw > max_weight):
        i = int(np.argmax(sw))
        raise ValueError(
            f"sample_weight[{i}] = {sw[i]:.3g} is above {max_weight:g}, where the weighted "
            "likelihood overflows the sampler's arithmetic; only the weights' ratios and their "
            "scale against 1 (one row's worth) matter, so divide them by a common factor"
        )
    return sw


#: The largest effective sample weight BM3KL accepts: a point's weight multiplies its likelihood
#: term, and beyond about this the sampler's augmentation variables overflow (the audit: 1e10
#: and 1e30 diverged on every sweep, 1e300 ended in a SamplerDivergenceError after a full run).
MAX_SAMPLE_WEIGHT = 1e6


def check_class_weight(class_weight) -> None:
    """Raise ``ValueError`` unless ``class_weight`` is ``None``, ``"balanced"`` or a mapping.

    Only the form is checked here; that every class has a weight and that the weights are
    non-negative and finite is checked against the labels by :func:`effective_sample_weight`.
    """
    if class_weight is None or isinstance(class_weight, Mapping):
        return
    if isinstance(class_weight, str) and class_weight == "balanced":
        return
    raise ValueError(
        "class_weight must be None, 'balanced' or a dict {class label: weight}; got "
        f"{class_weight!r}"
    )


def effective_sample_weight(
    y, sample_weight=None, class_weight=None, *, max_weight: float | None = None
) -> np.ndarray | None:
    """Validated per-sample weights ``sample_weight * class_weight[y]``, or ``None``.

    Parameters
    ----------
    y : array (N,)
        Class labels (any type).
    sample_weight : None, float or array (N,)
        Non-negative finite weights (a scalar is broadcast); validated by
        :func:`check_sample_weight`.
    class_weight : None, "balanced" or dict
        As in scikit-learn (see the module docstring). A dict must give a weight to every class
        present in ``y`` (scikit-learn gives missing classes weight 1, which silently ignores a
        misspelt label; here it is an error).
    max_weight : float, optional
        The largest effective weight allowed (the sampler's bound,
        :data:`MAX_SAMPLE_WEIGHT`); larger ones are refused with a ``ValueError`` naming them.

    Returns
    -------
    ndarray (N,) of float64, or None
        ``None`` when both ``sample_weight`` and ``class_weight`` are ``None`` (the caller then
        runs its unweighted code path, bit-for-bit unchanged).

    Raises
    ------
    ValueError
        For negative, NaN or infinite weights, a length mismatch, a ``class_weight`` of the
        wrong form or missing a class, all weights zero, or a class whose points all have zero
        weight (it could not be learnt).
    """
    check_class_weight(class_weight)
    if sample_weight is None and class_weight is None:
        return None
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional to apply sample weights; got {y.shape}")
    sw = check_sample_weight(sample_weight, y.shape[0])
    if class_weight is not None:
        classes = np.unique(y)
        if isinstance(class_weight, Mapping):
            missing = [c for c in classes.tolist() if c not in class_weight]
            if missing:
                unknown = [k for k in class_weight if k not in set(classes.tolist())]
                hint = f" (its keys {unknown} are not classes of y)" if unknown else ""
                raise ValueError(
                    f"class_weight has no weight for the classes {missing}{hint}; give every "
                    f"class in y ({classes.tolist()}) a weight"
                )
            bad = {k: v for k, v in class_weight.items() if not (np.isfinite(v) and v >= 0)}
            if bad:
                raise ValueError(f"class weights must be finite and >= 0; got {bad}")
        sw = sw * compute_sample_weight(class_weight, y)
    if max_weight is not None:
        check_sample_weight(sw, y.shape[0], max_weight=max_weight)
    labels, codes = np.unique(y, return_inverse=True)
    per_class = np.bincount(codes, weights=sw, minlength=labels.size)
    if np.any(per_class <= 0):
        empty = labels[per_class <= 0].tolist()
        raise ValueError(
            f"the classes {empty} have zero total sample weight: a classifier cannot learn a "
            "class none of whose points count"
        )
    return sw
