"""Field checks shared by every options object: one rule, one message, one place.

Each check is called as ``check(field, value)`` and returns the value normalized (a duration
becomes a :class:`~datetime.timedelta`) or raises :class:`~dogs_core.errors.InvalidOptionError`
naming ``field`` and the value, so the message alone tells the user what to fix. The settings of
the workers (:mod:`dogs_core.runtime.plumbing.settings`), the job definitions, the container's
configuration and the ``dogs`` command all validate through this module.

Durations are accepted as a ``timedelta``, a number of **seconds** or a string parsed by
``pytimeparse2`` (``"90s"``, ``"1m"``, ``"1h30m"``, ``"1d"``; a bare ``"10"`` is seconds); bools,
negative, NaN, infinite, out-of-range and unparseable values are rejected. The duration checks
take ``error=`` for the callers whose contract is another :class:`ValidationError` subclass (a
schedule's ``run_every`` raises :class:`~dogs_core.errors.InvalidScheduleError`).

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeAlias, TypeVar

import pytimeparse2

from dogs_core.errors import InvalidOptionError, ValidationError

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_SAFE_INTEGER",
    "MIN_SAFE_INTEGER",
    "NODE_SAFE_INT_RANGE",
    "Check",
    "DurationLike",
    "boolean",
    "callable_value",
    "choice",
    "duration",
    "integer",
    "is_node_safe_int",
    "optional",
    "optional_text",
    "positive_duration",
    "positive_int",
    "priority",
    "str_mapping",
    "text",
]

T = TypeVar("T")

DurationLike: TypeAlias = timedelta | int | float | str
"""A duration as accepted at the API edge: a timedelta, a number of seconds, or a string."""

Check: TypeAlias = Callable[[str, Any], Any]
"""``check(field, value) -> normalized value``; raises :class:`InvalidOptionError`."""

_ErrorType: TypeAlias = type[ValidationError]


def duration(field: str, value: object, *, error: _ErrorType = InvalidOptionError) -> timedelta:
    """``value`` as a non-negative timedelta (``int``/``float`` are seconds, strings such as
    ``"1m"`` are parsed); raises ``error`` naming ``field`` and the value otherwise."""
    if isinstance(value, bool):
        raise error(field, value, "expected a duration (timedelta, seconds or '1m'), not a bool")
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise error(field, value, "a duration cannot be negative")
        return value
    seconds = _seconds(field, value, error)
    if math.isnan(seconds) or math.isinf(seconds):
        raise error(field, value, "a duration must be a finite number of seconds")
    if seconds < 0:
        raise error(field, value, "a duration cannot be negative")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise error(field, value, "the duration is too large") from None


def _seconds(field: str, value: object, error: _ErrorType) -> float:
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        parsed = pytimeparse2.parse(value.strip()) if value.strip() else None
        if not isinstance(parsed, int | float):
            raise error(
                field, value, "cannot parse the duration; use e.g. '90s', '1m', '1h30m', '1d'"
            )
        return parsed
    raise error(
        field,
        value,
        f"expected a timedelta, a number of seconds or a duration string, "
        f"not {type(value).__name__}",
    )


def positive_duration(
    field: str, value: object, *, error: _ErrorType = InvalidOptionError
) -> timedelta:
    """Like :func:`duration`, and the result must be strictly positive."""
    result = duration(field, value, error=error)
    if result <= timedelta(0):
        raise error(field, value, "must be greater than zero")
    return result


def integer(field: str, value: object, *, minimum: int) -> int:
    """An ``int`` (not a ``bool``) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(field, value, f"must be an integer >= {minimum}")
    if value < minimum:
        raise InvalidOptionError(field, value, f"must be at least {minimum}")
    return value


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: The largest integer a JavaScript number (an IEEE double) holds exactly: JavaScript's
#: ``Number.MAX_SAFE_INTEGER``, 2**53 - 1. A Node Dogs worker reads a larger BSON int64 as a
#: ``Long`` object, not a number, and its history write then fails (measured with Dogs 4.6.8).
MAX_SAFE_INTEGER = 2**53 - 1
#: ``Number.MIN_SAFE_INTEGER``: -(2**53 - 1).
MIN_SAFE_INTEGER = -MAX_SAFE_INTEGER
#: The integers a Node worker reads as exact numbers: the priorities Dogs for Python accepts,
#: and the ints it stores in params unless told otherwise (see :mod:`dogs_core.domain.params`).
NODE_SAFE_INT_RANGE = range(MIN_SAFE_INTEGER, MAX_SAFE_INTEGER + 1)

_SAFE_RANGE_TEXT = "-(2**53 - 1) .. 2**53 - 1 (Number.MAX_SAFE_INTEGER = 9007199254740991)"


def is_node_safe_int(value: int) -> bool:
    """Whether a Node worker reads ``value`` as the same number (it is in
    :data:`NODE_SAFE_INT_RANGE`)."""
    return MIN_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def priority(field: str, value: object) -> int:
    """A job priority: an ``int`` (not a ``bool``) that a JavaScript number holds exactly, so
    that a Node worker sharing the collection reads it as a number (see
    :data:`NODE_SAFE_INT_RANGE`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(field, value, "must be an int (higher runs first)")
    if not is_node_safe_int(value):
        raise InvalidOptionError(
            field,
            value,
            f"must be within {_SAFE_RANGE_TEXT}: a Node Dogs worker cannot read a larger "
            "priority as a number and fails to write the job's history",
        )
    return int(value)


def positive_int(field: str, value: object) -> int:
    """An ``int`` (not a ``bool``) of at least 1."""
    return integer(field, value, minimum=1)


def non_negative_int(field: str, value: object) -> int:
    """An ``int`` (not a ``bool``) of at least 0."""
    return integer(field, value, minimum=0)


def boolean(field: str, value: object) -> bool:
    """``True`` or ``False`` (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise InvalidOptionError(field, value, "must be True or False")
    return value


def choice(field: str, value: object, choices: tuple[str, ...]) -> str:
    """One of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidOptionError(field, value, f"must be one of {', '.join(choices)}")
    return value


def text(field: str, value: object) -> str:
    """A string that is not empty or blank."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(field, value, "must be a non-empty string")
    return value


def optional_text(field: str, value: object) -> str | None:
    """``None``, or a string that is not empty or blank."""
    return None if value is None else text(field, value)


def callable_value(field: str, value: object) -> Callable[..., Any]:
    """Something callable."""
    if not callable(value):
        raise InvalidOptionError(field, value, "must be callable")
    return value


def str_mapping(field: str, value: object, *, what: str) -> dict[str, Any]:
    """A plain copy of a mapping whose keys are strings (``None`` counts as empty); ``what``
    says what the mapping holds, for the message."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidOptionError(field, value, f"must be a mapping of {what}")
    return dict(value)


def optional(check: Callable[[str, Any], T]) -> Callable[[str, Any], T | None]:
    """``check`` that lets ``None`` through (meaning: not set)."""

    def check_optional(field: str, value: object) -> T | None:
        return None if value is None else check(field, value)

    check_optional.__name__ = f"optional_{getattr(check, '__name__', 'check')}"
    return check_optional
