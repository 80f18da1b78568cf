"""Common scikit-learn plumbing for the MKL baselines.

Every SVM-based baseline learns kernel weights ``mu: (P,)`` shared by all one-vs-rest problems and,
per problem c, signed dual coefficients ``v_c: (N,)`` and an intercept ``b_c``. Subclasses implement
:meth:`_fit_kernels`, which receives the training kernels and the ±1 target matrix, and sets
``kernel_weights_``, ``dual_coef_`` (C, N) and ``intercept_`` (C,). Everything else (kernel
resolution, label encoding, validation, sample weights, decision values, prediction) is here,
once.

Sample weights: ``fit(X, y, sample_weight=None)`` combines ``sample_weight`` with the estimator's
``class_weight`` parameter (where it has one) by
:func:`bayesmkl.estimators._weights.effective_sample_weight`
and passes the result (or ``None``) to ``_fit_kernels(K, Y, sample_weight)``. SVM-based solvers
scale each point's box constraint, ``C_i = C·s_i``; the pool's standardisation and centring
statistics stay unweighted (as a ``StandardScaler`` in a pipeline without weight routing).

Binary problems use one classifier (C = 1, +1 = ``classes_[1]``); K ≥ 3 classes use one-vs-rest with
shared weights (C = K).

Parameters: every baseline declares its parameters once, in the class attribute
``_parameter_constraints`` (``{name: [constraint, ...]}`` in signature order, with the vocabulary
of :mod:`bayesmkl.estimators._constraints`; groups that several baselines share are spliced in
with ``**``), and writes its ``__init__`` out with the same names and order (checked by
:func:`bayesmkl.estimators._params.signature_problems`). ``fit`` checks every parameter against
the table first (:meth:`ParamsMixin._validate_params`), before it looks at the data; only the
checks that need the data (a cap that depends on the number of kernels or points) stay in the
solvers.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from bayesmkl.baselines._docstrings import shared_doc
from bayesmkl.config import with_x64
from bayesmkl.estimators._validation import (
    NO_VALIDATION,
    ClassWeight,
    Interval,
    KernelsParam,
    validate_labels,
    validate_params,
)
from bayesmkl.estimators._weights import effective_sample_weight
from bayesmkl.kernels.input import NAMED_POOLS, KernelInput
from bayesmkl.model.classification import signed_targets

__all__ = [
    "CLASS_WEIGHT",
    "KERNELS",
    "KERNEL_NAMES",
    "MKLClassifierBase",
    "POSITIVE",
    "ParamsMixin",
    "fit_kernel_input",
    "signed_targets",
    "validate_labels",
]

#: ``kernels``: a named pool, ``"precomputed"`` or a :class:`~bayesmkl.KernelPool`.
KERNELS = [KernelsParam(*NAMED_POOLS, "precomputed")]
#: ``kernel_names`` is checked against the kernels where they are built (:class:`KernelInput`).
KERNEL_NAMES = NO_VALIDATION
#: ``class_weight``: ``None``, ``"balanced"`` or a dict (its weights are checked against ``y``).
CLASS_WEIGHT = [None, ClassWeight()]
#: A finite number ``> 0``.
POSITIVE = [Interval("real", 0, None, closed="neither")]


def fit_kernel_input(estimator, X) -> np.ndarray:
    """Fit ``estimator.kernels`` on the training input ``X``; the training kernels ``(P, N, N)``.

    Sets ``kernel_input_`` (what builds the test kernels), ``kernel_names_`` and, for feature
    input (a pool rather than ``kernels="precomputed"``), ``n_features_in_``.
    """
    estimator.kernel_input_, K = KernelInput.fit(
        estimator.kernels, X, kernel_names=getattr(estimator, "kernel_names", None)
    )
    if estimator.kernel_input_.pool is not None:
        estimator.n_features_in_ = int(np.asarray(X).shape[1])
    estimator.kernel_names_ = list(estimator.kernel_input_.names)
    K = np.asarray(K, dtype=np.float64)
    _check_constant_kernels(estimator, K)
    return K


def _check_constant_kernels(estimator, K) -> None:
    """Refuse training kernels that are constant (all zero included): they separate nothing,
    and every baseline turned them into NaN decision values (M3K), weights [0, 0] with a
    division warning (OBSCURE) or a one-class predictor, silently. A precomputed stack with one
    is refused; a pool is refused when every kernel is constant, and warns naming the constant
    ones otherwise (a pool's kernel on a constant feature)."""
    names = estimator.kernel_names_
    flat = K.reshape(K.shape[0], -1)
    scale = np.max(np.abs(flat), axis=1)
    const = [n for n, f, s in zip(names, flat, scale, strict=True) if np.ptp(f) <= 1e-12 * s]
    if not const:
        return
    who = type(estimator).__name__
    shown = f"{const[:10]}{' ...' if len(const) > 10 else ''}"
    if estimator.kernel_input_.pool is None or len(const) == len(names):
        raise ValueError(
            f"{who}: the training kernel(s) {shown} are constant (every entry "
            f"{flat[names.index(const[0])][0]:.3g}): a constant kernel separates no points, so "
            "nothing can be learnt from it; remove it (or check how the kernels were computed)"
        )
    warnings.warn(
        f"{who}: the pool's kernel(s) {shown} are constant on the training data (a constant "
        "feature?); they carry no information",
        UserWarning,
        stacklevel=4,
    )


class ParamsMixin:
    """Validation of a baseline's parameters against its one table ``_parameter_constraints``."""

    #: ``{parameter: [constraint, ...]}`` in signature order; set by each estimator class.
    _parameter_constraints: dict = {}

    def _validate_params(self) -> None:
        """Check every constructor parameter against ``_parameter_constraints`` (``ValueError``
        in the shared wording ``"<name> must be ...; got <value>"``)."""
        validate_params(self, self._parameter_constraints)


class MKLClassifierBase(ParamsMixin, ClassifierMixin, BaseEstimator):
    """Base class: subclasses define ``__init__`` (with a ``kernels`` parameter), the table
    ``_parameter_constraints`` and ``_fit_kernels(K, Y, sample_weight)``."""

    def _n_samples(self, X) -> int:
        if isinstance(X, list | tuple) or (hasattr(X, "ndim") and X.ndim == 3):
            return int(np.asarray(X[0]).shape[0])
        return int(np.asarray(X).shape[0]) if hasattr(X, "shape") else len(X)

    @with_x64
    @shared_doc
    def fit(self, X, y, sample_weight=None):
        """Fit on features ``X: (N, d)`` (or a precomputed stack ``(P, N, N)``) and labels ``y``.

        Parameters
        ----------
        {{fit_X_y}}
        sample_weight : array (N,), optional
            Non-negative finite per-sample weights, multiplied by ``class_weight`` (where the
            estimator has that parameter). For the SVM-based solvers a weight scales the point's
            box constraint: an integer weight equals repeating the row, zero equals dropping it.

        Returns
        -------
        self
        """
        self._validate_params()
        return self._fit_data(X, y, sample_weight)

    def _fit_data(self, X, y, sample_weight=None):
        """``fit`` once the parameters are checked: kernels, labels, weights, then the solver."""
        K = fit_kernel_input(self, X)
        self.classes_, codes = validate_labels(y, K.shape[1])
        sw = effective_sample_weight(y, sample_weight, getattr(self, "class_weight", None))
        Y = signed_targets(codes, len(self.classes_))
        self._fit_kernels(K, Y, sw)
        return self

    def _fit_kernels(self, K, Y, sample_weight=None) -> None:  # pragma: no cover
        raise NotImplementedError

    def _test_kernels(self, X) -> np.ndarray:
        check_is_fitted(self, "kernel_input_")
        return np.asarray(self.kernel_input_.cross(X), dtype=np.float64)

    def decision_function(self, X):
        """Decision values: ``(M,)`` for binary problems, ``(M, n_classes)`` otherwise."""
        Kt = self._test_kernels(X)
        P, M, N = Kt.shape
        Kmu = (np.asarray(self.kernel_weights_) @ Kt.reshape(P, -1)).reshape(M, N)
        F = Kmu @ self.dual_coef_.T + self.intercept_[None, :]  # (M, C)
        return F[:, 0] if F.shape[1] == 1 else F

    def predict(self, X):
        """Class labels: sign of the binary decision value, or one-vs-rest argmax."""
        F = self.decision_function(X)
        idx = (F > 0).astype(int) if F.ndim == 1 else np.argmax(F, axis=1)
        return self.classes_[idx]

    def selected_kernels(self, rel_threshold: float = 1e-3) -> int:
        """Number of kernels with weight above ``rel_threshold · max(weight)`` (paper A's MNK)."""
        mu = np.asarray(self.kernel_weights_)
        return int(np.sum(mu > rel_threshold * mu.max()))
