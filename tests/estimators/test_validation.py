"""bayesmkl.estimators._validation: the one parameter vocabulary (constraints, messages) and label
checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bayesmkl.estimators._validation import (
    MAX_TIME,
    Interval,
    Options,
    check_choice,
    check_int,
    check_max_time,
    check_param,
    check_positive,
    is_int,
    validate_labels,
    validate_params,
)
from bayesmkl.model.classification import signed_targets

POSITIVE = Interval("real", 0, None, closed="neither")


@pytest.mark.parametrize(
    ("constraint", "good", "bad", "text"),
    [
        (POSITIVE, [1e-300, 2, np.float64(3.5)], [0, -1, math.inf, math.nan, True, "1", None],
         "a finite positive number"),
        (Interval("real", 0, None), [0, 0.0, 7], [-1e-300, math.inf],
         "a finite non-negative number"),
        (Interval("real", 0, None, closed="neither", allow_inf=True), [math.inf, 1], [0, -math.inf],
         "a positive number (inf allowed)"),
        (Interval("int", 2, None), [2, np.int64(9)], [1, 2.0, True, np.float64(3)],
         "an integer >= 2"),
        (Interval("real", 0, 1), [0, 0.5, 1], [-0.1, 1.1, math.nan], "a number in [0, 1]"),
        (Interval("real", 0, 1, closed="left"), [0, 0.99], [1], "a number in [0, 1)"),
        (Interval("real", 1, None, allow_inf=True), [1, math.inf], [0.5, -math.inf],
         "a number >= 1 (inf allowed)"),
        (Interval("int", None, 3, closed="neither"), [2, -5], [3], "an integer < 3"),
        (Options("single", "ova"), ["ova", np.str_("single")], ["OVA", 1, ["ova"], None],
         "one of ('single', 'ova')"),
    ],
)  # fmt: skip
def test_constraints_accept_refuse_and_describe(constraint, good, bad, text):
    assert str(constraint) == text
    for v in good:
        assert constraint.is_satisfied_by(v), v
    for v in bad:
        assert not constraint.is_satisfied_by(v), v


def test_check_param_message_names_parameter_constraints_and_value():
    assert check_param("C", 2.0, [POSITIVE]) == 2.0
    assert check_param("n", None, [None, POSITIVE]) is None
    with pytest.raises(ValueError, match=r"^C must be a finite positive number; got -1$"):
        check_param("C", -1, [POSITIVE])
    with pytest.raises(ValueError, match=r"^m must be None or one of \('a',\); got 'b'$"):
        check_param("m", "b", [None, Options("a")])
    described = Interval("real", 1, None, description=">= 1 for a MAP estimate to exist")
    with pytest.raises(ValueError, match=r"^eta must be >= 1 for a MAP estimate to exist; got 0.5"):
        check_param("eta", 0.5, [described])


def test_validate_params_checks_in_order():
    class Est:
        C, tol, max_time = -1.0, 0.0, "soon"

    with pytest.raises(ValueError, match="^C must"):
        validate_params(Est(), {"C": [POSITIVE], "tol": [POSITIVE], "max_time": MAX_TIME})
    Est.C = 1.0
    with pytest.raises(ValueError, match="^tol must"):
        validate_params(Est(), {"C": [POSITIVE], "tol": [POSITIVE], "max_time": MAX_TIME})
    Est.tol = 1e-3
    with pytest.raises(ValueError, match="^max_time must be None or a positive number of seconds"):
        validate_params(Est(), {"C": [POSITIVE], "tol": [POSITIVE], "max_time": MAX_TIME})


def test_helpers_return_converted_values():
    assert check_positive("x", 3) == 3.0 and isinstance(check_positive("x", 3), float)
    assert check_positive("x", 0, allow_zero=True) == 0.0
    assert check_positive("x", math.inf, allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="x must be a finite non-negative number"):
        check_positive("x", -1, allow_zero=True)
    assert check_int("k", np.int64(4)) == 4 and type(check_int("k", np.int64(4))) is int
    with pytest.raises(ValueError, match="k must be an integer >= 0; got -1"):
        check_int("k", -1, 0)
    assert is_int(3, 3) and not is_int(True, 0) and not is_int(3.0, 0)
    assert check_choice("d", "proba", ("proba", "mean_f")) == "proba"
    with pytest.raises(ValueError, match=r"d must be one of \('proba', 'mean_f'\); got 'vote'"):
        check_choice("d", "vote", ("proba", "mean_f"))
    assert check_max_time(None) is None and check_max_time(2) == 2.0
    with pytest.raises(ValueError, match="max_time must be None or a positive number of seconds"):
        check_max_time(math.inf)


def test_labels_and_signed_targets():
    classes, codes = validate_labels(["b", "a", "b", "c"], 4)
    assert classes.tolist() == ["a", "b", "c"] and codes.tolist() == [1, 0, 1, 2]
    np.testing.assert_array_equal(
        signed_targets(codes, 3),
        [[-1, 1, -1, -1], [1, -1, 1, -1], [-1, -1, -1, 1]],
    )
    np.testing.assert_array_equal(signed_targets(np.array([0, 1, 1]), 2), [[-1, 1, 1]])
    with pytest.raises(ValueError, match="single class"):
        validate_labels([1, 1, 1], 3)
    with pytest.raises(ValueError, match="different lengths"):
        validate_labels([0, 1], 3)
