"""The choice of landmarks for the landmark (reduced-support) model (docs/math.md §16).

A landmark fit places its M sample weights on M training rows z_j = x_{i_j} instead of all N,
so its kernels are ``K(X, Z)`` ``(P, N, M)``. :func:`choose_landmarks` picks the rows:

``"kmeans++"``
    k-means++ seeding (Arthur & Vassilvitskii 2007; scikit-learn's
    :func:`~sklearn.cluster.kmeans_plusplus`) on the standardised features: rows spread over
    the data, each next row drawn with probability proportional to its squared distance to the
    rows already chosen. Cost O(N·M·d).
``"stratified"``
    A uniform random subset of the rows, stratified by class (each class gets its share of the
    M rows, at least one where M allows); a plain uniform subset without classes (regression).
"""

from __future__ import annotations

import numpy as np

from bayesmkl.kernels._compute import standardise

__all__ = ["LANDMARK_METHODS", "choose_landmarks", "landmark_rng"]

#: The rules of :func:`choose_landmarks`.
LANDMARK_METHODS = ("kmeans++", "stratified")


def landmark_rng(random_state) -> np.random.Generator:
    """The generator of a fit's landmarks from an estimator's ``random_state``: an int seeds it
    (so the same int gives the same landmarks), ``None`` draws fresh entropy, and a NumPy
    ``RandomState`` or ``Generator`` is drawn from (advancing it)."""
    if isinstance(random_state, np.random.Generator):
        return np.random.default_rng(int(random_state.integers(0, 2**63 - 1)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(random_state.randint(0, 2**31 - 1)))
    if random_state is None:
        return np.random.default_rng()
    return np.random.default_rng(int(random_state))


def choose_landmarks(X, n_landmarks: int, method: str = "kmeans++", *, codes=None,
                     rng=None, standardize: bool = True) -> np.ndarray:  # fmt: skip
    """Distinct row indices ``(M,)`` (sorted) of ``X (N, d)`` to serve as landmarks.

    Parameters
    ----------
    X : array (N, d)
        Training features (raw; standardised here for ``"kmeans++"`` when ``standardize``).
    n_landmarks : int
        M, with 1 ≤ M ≤ N.
    method : {"kmeans++", "stratified"}
        The rule (see the module docstring).
    codes : array of int (N,), optional
        Class codes, for ``"stratified"``; without them the subset is uniform.
    rng : numpy Generator, optional
        The randomness (:func:`landmark_rng`).
    standardize : bool, default True
        Z-score the features before the k-means++ distances.

    Returns
    -------
    ndarray of int64, shape (M,)
    """
    X = np.asarray(X, dtype=np.float64)
    N = X.shape[0]
    M = int(n_landmarks)
    if not 1 <= M <= N:
        raise ValueError(f"n_landmarks must be in [1, {N}] (the training rows); got {M}")
    if method not in LANDMARK_METHODS:
        raise ValueError(f"landmark_method must be one of {LANDMARK_METHODS}; got {method!r}")
    rng = np.random.default_rng() if rng is None else rng
    if M == N:
        return np.arange(N, dtype=np.int64)
    if method == "kmeans++":
        from sklearn.cluster import kmeans_plusplus

        Xs = standardise(X)[2] if standardize else X
        _, idx = kmeans_plusplus(Xs, M, random_state=int(rng.integers(0, 2**31 - 1)))
        idx = np.unique(idx)
        if idx.size < M:  # repeated rows ran out of distinct points: fill uniformly
            rest = np.setdiff1d(np.arange(N), idx)
            idx = np.concatenate([idx, rng.choice(rest, M - idx.size, replace=False)])
        return np.sort(idx).astype(np.int64)
    if codes is None:
        return np.sort(rng.choice(N, M, replace=False)).astype(np.int64)
    return _stratified(np.asarray(codes), M, rng)


def _stratified(codes: np.ndarray, M: int, rng: np.random.Generator) -> np.ndarray:
    """M rows, each class's share by largest remainders, at least one per class when M is at
    least the number of classes."""
    classes, counts = np.unique(codes, return_counts=True)
    N = codes.size
    share = M * counts / N
    take = np.floor(share).astype(int)
    if M >= classes.size:
        take = np.maximum(take, 1)
    while take.sum() > M:  # the floor of one per class overshot: trim the most over-served
        over = np.where(take > 1, take - share, -np.inf)
        take[np.argmax(over)] -= 1
    order = np.argsort(-(share - take), kind="stable")
    for j in order[: M - take.sum()]:
        take[j] += 1
    take = np.minimum(take, counts)
    while take.sum() < M:  # a class ran out of rows: give the rest to those with rows left
        j = np.argmax(counts - take)
        take[j] += 1
    rows = [rng.choice(np.flatnonzero(codes == c), t, replace=False)
            for c, t in zip(classes, take, strict=True) if t > 0]  # fmt: skip
    return np.sort(np.concatenate(rows)).astype(np.int64)
