"""Iteration and wall-clock budgets of the iterative baselines.

Every iterative solver stops at whichever comes first: its convergence test, ``max_iter``
iterations or ``max_time`` seconds (``None``: no time limit). Stopping on a budget keeps the last
iterate (each solver's iterates are valid weights) and issues scikit-learn's
:class:`~sklearn.exceptions.ConvergenceWarning`, whose message says which limit was hit, after how
many iterations and seconds, and what did not converge.
"""

from __future__ import annotations

import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from bayesmkl.estimators._validation import check_max_time

__all__ = ["Budget", "check_max_time"]


class Budget:
    """A solver's iteration and time budget, started at construction.

    Parameters
    ----------
    name : str
        Solver name used in the warning.
    max_iter : int or None
        Most iterations.
    max_time : float or None
        Most seconds of wall-clock time (checked between iterations, so one iteration may run
        past it; at least one iteration is always made).
    unit : str
        What one iteration is, for the message (e.g. ``"weight updates"``).
    """

    def __init__(self, name: str, max_iter=None, max_time=None, unit: str = "iterations"):
        self.name = name
        self.max_iter = None if max_iter is None else int(max_iter)
        self.max_time = check_max_time(max_time)
        self.unit = unit
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def out_of_time(self) -> bool:
        return self.max_time is not None and self.elapsed >= self.max_time

    def exhausted(self, n_iter: int) -> bool:
        """True when ``n_iter`` iterations reach ``max_iter``, or the time is up after at least
        one iteration (so every fit makes one iteration, however small ``max_time`` is)."""
        if self.max_iter is not None and n_iter >= self.max_iter:
            return True
        return n_iter >= 1 and self.out_of_time()

    def warn(self, n_iter: int, criterion: str, stacklevel: int = 3) -> None:
        """Warn that the solver stopped on its budget before ``criterion`` reached tol."""
        if self.max_iter is not None and n_iter >= self.max_iter:
            msg = (
                f"{self.name} stopped after max_iter={self.max_iter} {self.unit} before its "
                f"{criterion} reached tol; increase max_iter or tol"
            )
        else:
            msg = (
                f"{self.name} stopped after max_time={self.max_time:g} s ({n_iter} {self.unit} "
                f"in {self.elapsed:.1f} s) before its {criterion} reached tol; the result is the "
                "last iterate: increase max_time, or tol"
            )
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)
