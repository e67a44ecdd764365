"""What ``schedule(unique=..., start_before=..., tags=...)`` adds to a record, checked before
anything is written (no I/O): the unique key (given, or hashed from params), the debounced run
time and its cap, the window, the start deadline and the tags. The scheduling clients call
:func:`shape` from ``ClientBase._new_job`` (:mod:`dogs_core.runtime.client.scheduling`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, cast

from dogs_core.domain.definitions import EventJobDefinition
from dogs_core.domain.schedules import ensure_utc, parse_duration
from dogs_core.domain.tags import validate_tags
from dogs_core.domain.uniqueness import Unique, UniqueError, params_key
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError, InvalidScheduleError

__all__ = ["MAX_UNIQUE_KEY_LENGTH", "Shape", "check_unique", "scoped_key", "shape"]

#: The longest unique key stored (``uniqueIdentifier``), scope prefix included.
MAX_UNIQUE_KEY_LENGTH: Final = 1024


@dataclass(frozen=True, slots=True)
class Shape:
    """The record fields of one call's options (see :func:`shape`)."""

    next_run_at: datetime
    unique_identifier: str | None
    tags: tuple[str, ...] = ()
    start_before: datetime | None = None
    unique_window: timedelta | None = None
    debounce_until: datetime | None = None


def check_unique(unique: object, unique_key: object) -> Unique | None:
    """``unique=`` is a :class:`Unique` or ``None``, and not given with ``unique_key=``."""
    if unique is None:
        return None
    if not isinstance(unique, Unique):
        raise UniqueError("unique", unique, "must be a Unique(...) or None")
    if unique_key is not None:
        raise UniqueError(
            "unique", unique, "conflicting options unique_key and unique: give one of them"
        )
    return unique


def scoped_key(definition: EventJobDefinition, unique: Unique, key: str) -> str:
    """``key`` as stored: prefixed by the job name when scoped per job."""
    scope = unique.scope or definition.unique_scope
    identifier = f"{definition.name}:{key}" if scope == "job" else key
    if len(identifier) > MAX_UNIQUE_KEY_LENGTH:
        raise UniqueError(
            "unique.key", key, f"must be at most {MAX_UNIQUE_KEY_LENGTH} characters as stored"
        )
    return identifier


def shape(
    definition: EventJobDefinition,
    *,
    now: datetime,
    run_at: datetime,
    explicit_time: bool,
    params: Mapping[str, Any] | None,
    unique: Unique | None,
    start_before: object,
    tags: object,
) -> Shape:
    """The fields of one call: ``run_at`` is the run time asked for (``explicit_time``: given
    by ``run_in`` or ``run_at``, which a debounce refuses: it decides the run time itself)."""
    checked_tags = validate_tags(tags)
    identifier = None
    window = debounce_until = None
    if unique is not None:
        key = unique.key if unique.key is not None else params_key(unique.by or (), params)
        identifier = scoped_key(definition, unique, key)
        window = unique.window
        if unique.on_conflict == "debounce":
            if explicit_time:
                raise UniqueError(
                    "unique.on_conflict",
                    "debounce",
                    "a debounce sets the run time itself (now + delay): give no run_in or run_at",
                )
            assert unique.delay is not None  # checked by Unique
            run_at = now + unique.delay
            debounce_until = None if unique.max_wait is None else now + unique.max_wait
    deadline = _deadline(start_before, now, run_at)
    return Shape(run_at, identifier, checked_tags, deadline, window, debounce_until)


def _deadline(start_before: object, now: datetime, run_at: datetime) -> datetime | None:
    """``start_before``: a duration from now, or a datetime; it must leave the job time to
    start (after its run time)."""
    if start_before is None:
        return None
    if isinstance(start_before, datetime):
        deadline = ensure_utc(start_before, field="start_before")
    else:
        if isinstance(start_before, bool):
            raise InvalidOptionError("start_before", start_before, "must be a duration or datetime")
        duration = parse_duration(
            cast(DurationLike, start_before), field="start_before", error=InvalidScheduleError
        )
        if duration <= timedelta(0):
            raise InvalidScheduleError("start_before", start_before, "must be a positive duration")
        deadline = now + duration
    if deadline <= run_at:
        raise InvalidScheduleError(
            "start_before",
            start_before,
            f"the deadline {deadline.isoformat()} is not after the run time "
            f"{run_at.isoformat()}: the job could never start",
        )
    return deadline
