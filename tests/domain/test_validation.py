"""The shared field checks (dogs_core.domain.validation): each returns the normalized value or
raises InvalidOptionError naming the field and showing the value."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain import validation as v
from dogs_core.errors import InvalidOptionError, InvalidScheduleError, ValidationError


def _refused(check: v.Check, value: object, field: str = "opt") -> InvalidOptionError:
    with pytest.raises(InvalidOptionError) as raised:
        check(field, value)
    error = raised.value
    assert error.field == field
    assert error.value is value or error.value == value
    assert str(error).startswith(f"{field}=")
    return error


@given(st.integers(min_value=1))
def test_positive_int_accepts_every_int_from_one(value: int) -> None:
    assert v.positive_int("n", value) == value


@given(st.one_of(st.integers(max_value=0), st.booleans(), st.floats(), st.text()))
def test_positive_int_refuses_the_rest(value: object) -> None:
    _refused(v.positive_int, value)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_duration_takes_seconds(seconds: float) -> None:
    assert v.duration("d", seconds) == timedelta(seconds=seconds)


@given(st.timedeltas(min_value=timedelta(microseconds=1)))
def test_positive_duration_keeps_a_positive_timedelta(value: timedelta) -> None:
    assert v.positive_duration("d", value) is value


@pytest.mark.parametrize(
    ("text", "seconds"), [("2m", 120), ("90s", 90), ("10", 10), ("1h30m", 5400)]
)
def test_duration_parses_strings(text: str, seconds: int) -> None:
    assert v.duration("d", text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, "negative"),
        (timedelta(seconds=-1), "negative"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        ("soon", "cannot parse"),
        (True, "not a bool"),
        ([5], "not list"),
    ],
)
def test_duration_refuses_bad_values(value: object, reason: str) -> None:
    assert reason in str(_refused(v.duration, value))


@pytest.mark.parametrize("value", [0, 0.0, "0s", timedelta(0)])
def test_positive_duration_refuses_zero(value: object) -> None:
    assert "greater than zero" in str(_refused(v.positive_duration, value))


def test_duration_checks_raise_the_error_type_asked_for() -> None:
    with pytest.raises(InvalidScheduleError):
        v.positive_duration("run_every", 0, error=InvalidScheduleError)


def test_every_check_raises_a_dogs_validation_error_that_is_a_value_error() -> None:
    error = _refused(v.positive_int, "x", "mode")
    assert isinstance(error, ValidationError)
    assert isinstance(error, ValueError)


def test_a_validation_error_formats_field_value_and_reason_unless_given_a_message() -> None:
    error = ValidationError("limit", -1, "must be at least 0")
    assert str(error) == "limit=-1: must be at least 0"
    custom = ValidationError("params", 1, "keys must be strings", message="params key 1: no")
    assert str(custom) == "params key 1: no"
    assert custom.args == ("params key 1: no",)
    assert (custom.field, custom.value, custom.reason) == ("params", 1, "keys must be strings")


def test_the_other_checks() -> None:
    assert v.boolean("b", False) is False
    _refused(v.boolean, 1)
    assert v.choice("c", "a", ("a", "b")) == "a"
    assert "must be one of a, b" in str(_refused(lambda f, x: v.choice(f, x, ("a", "b")), "z"))
    assert v.optional_text("t", None) is None
    assert v.text("t", "x") == "x"
    _refused(v.optional_text, "  ")
    _refused(v.text, 3)
    assert v.callable_value("f", len) is len
    _refused(v.callable_value, "len")
    assert v.str_mapping("m", None, what="things") == {}
    assert v.str_mapping("m", {"a": 1}, what="things") == {"a": 1}
    refused = _refused(lambda f, x: v.str_mapping(f, x, what="things"), {1: 2})
    assert "mapping of things" in str(refused)
    assert v.integer("i", 0, minimum=0) == 0
    assert "at least 2" in str(_refused(lambda f, x: v.integer(f, x, minimum=2), 1))


@given(st.one_of(st.none(), st.integers(min_value=1)))
def test_optional_lets_none_through(value: int | None) -> None:
    assert v.optional(v.positive_int)("n", value) == value


def test_optional_still_checks_a_value() -> None:
    _refused(v.optional(v.positive_int), 0)
