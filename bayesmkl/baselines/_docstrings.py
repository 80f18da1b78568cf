"""Docstring entries shared by the baselines (parameters and attributes they document alike).

A line ``{{name}}`` in the docstring of a class decorated with :func:`shared_doc` is replaced by
``SHARED_DOCS[name]`` (see :mod:`bayesmkl._docs`).
"""

from __future__ import annotations

from bayesmkl._docs import fill_doc

__all__ = ["SHARED_DOCS", "shared_doc"]

#: Parameter and attribute descriptions shared by the SVM-MKL estimators; ``{{name}}`` on a line
#: of a docstring decorated with :func:`shared_doc` is replaced by the entry, indented like it.
SHARED_DOCS = {
    "kernels": """\
kernels : str or KernelPool, default="simplemkl"
    Kernel specification (see :mod:`bayesmkl.kernels.input`).""",
    "C": """\
C : float, default=1.0
    SVM box constraint.""",
    "svc_tol": """\
svc_tol : float, default=1e-6
    libsvm stopping tolerance.""",
    "max_time": """\
max_time : float or None, default=None
    Wall-clock budget in seconds; stopping on it (or on ``max_iter``) keeps the last
    weights and issues a ``ConvergenceWarning`` that names the limit.""",
    "class_weight": """\
class_weight : None, "balanced" or dict, default=None
    Class weights, multiplied into ``fit``'s ``sample_weight`` (scikit-learn semantics;
    ``"balanced"``: ``N / (n_classes · count(class))``); each scales the points' ``C``.""",
    "kernel_names": """\
kernel_names : sequence of str, optional
    Names of the kernels with ``kernels="precomputed"`` (default ``K0, K1, ...``); an error
    with a pool, which names its kernels itself.""",
    "mlmkl_attributes": """\
dual_coef_ : ndarray (m, N)
    Signed duals ``v_k = α_k ∘ y^k`` of the final per-task SVMs on ``K(p)``.
intercept_ : ndarray (m,)
class_objectives_ : ndarray (m,)
    ``H_k(p)``, the per-task SVM dual objectives at the final weights.
worst_class_objective_ : float
    ``max_k H_k(p)``, paper B's objective (3).
minimax_lower_bound_ : float
    :func:`minimax_lower_bound` from the final SVMs: ``≤ min_p max_k H_k(p)``.
classes_ : ndarray
    Class labels, or ``arange(L)`` for a multi-label ``y``.
multilabel_ : bool
kernel_names_ : list of str""",
    "normalized_weights_": """\
normalized_weights_ : ndarray (P,)
    ``kernel_weights_ / kernel_weights_.sum()``.""",
    "svm_attributes": """\
dual_coef_ : ndarray (C, N)
    Signed dual coefficients ``α_c ∘ y_c`` (``C = 1`` for binary problems).
intercept_ : ndarray (C,)""",
    "gap_attributes": """\
n_iter_ : int
duality_gap_ : float
    Relative duality gap at stop.
kernel_names_ : list of str
classes_ : ndarray""",
}


SHARED_DOCS["fit_X"] = """\
X : array (N, d), or (P, N, N) with ``kernels="precomputed"``"""
SHARED_DOCS["fit_X_y"] = """\
X : array (N, d), or (P, N, N) with ``kernels="precomputed"``
y : array (N,)
    Class labels (at least two classes)."""
#: ``fit``'s parameters for an estimator that refuses sample weights (its Raises section says why).
SHARED_DOCS["fit_X_y_unweighted"] = (
    SHARED_DOCS["fit_X_y"]
    + """
sample_weight : None
    Not supported: raises ``NotImplementedError`` (see below)."""
)

#: Runs of entries that stand together.
SHARED_DOCS["fit_params"] = SHARED_DOCS["class_weight"] + "\n" + SHARED_DOCS["kernel_names"]
SHARED_DOCS["mlmkl_fit_params"] = """\
class_weight : None, "balanced" or dict, default=None
    Class weights for a 1-D ``y``, multiplied into ``fit``'s ``sample_weight``
    (scikit-learn semantics); not defined for a multi-label ``y``.
""" + SHARED_DOCS["kernel_names"]
SHARED_DOCS["solver_params"] = "\n".join(
    SHARED_DOCS[k] for k in ("svc_tol", "max_time", "class_weight", "kernel_names")
)
#: The end of ``_solvers.ITERATIVE_PARAMS`` (``max_iter`` and the solver options), documented once
#: for the estimators that take it as it is.
SHARED_DOCS["iterative_tail"] = (
    "max_iter : int, default=500\n    Maximal number of weight updates.\n"
    + SHARED_DOCS["solver_params"]
)


#: Decorator: replace each ``{{name}}`` line of a docstring by ``SHARED_DOCS[name]``.
shared_doc = fill_doc(SHARED_DOCS)
