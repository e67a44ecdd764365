"""The additive record fields of issue 27's options, written and read: ``tags``,
``startBefore``, ``uniqueWindowMs``, ``debounceUntil``, ``behindUntil``,
``parkedAt``/``parkedRunAt`` and a runtime schedule's ``schedule`` (docs/differences.md says
what a Node worker does with each).

A field is written only when the option is used, so a record scheduled without them has the
exact shape Dogs 4.6.8 writes. Reading tolerates any shape another writer left: a value of the
wrong type is read as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from dogs_core.domain.misfire import MISFIRE_MODES
from dogs_core.domain.records import JobRecord, NewJob, to_millis
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_mongo.queries.common import _optional_datetime, _require_int
from dogs_mongo.queries.steps import SLEEPING_FIELD, STEPS_FIELD, steps_from_document

__all__ = [
    "SCHEDULE_FIELD",
    "claimed_extras",
    "millis",
    "record_extras",
    "schedule_document",
    "shaping_fields",
    "spec_from_document",
]

#: The additive field of a runtime schedule's recurrent record.
SCHEDULE_FIELD: Final = "schedule"
_MS: Final = timedelta(milliseconds=1)


def millis(duration: timedelta) -> int:
    """A duration as a BSON int of milliseconds (a number a Node worker reads as is)."""
    return _require_int("duration", duration // _MS)


def shaping_fields(job: NewJob | JobRecord) -> dict[str, Any]:
    """The additive fields of ``job``'s document (empty when it uses none)."""
    doc: dict[str, Any] = {}
    if job.tags:
        doc["tags"] = list(job.tags)
    if job.start_before is not None:
        doc["startBefore"] = to_millis(job.start_before)
    if job.unique_window is not None:
        doc["uniqueWindowMs"] = millis(job.unique_window)
    if job.debounce_until is not None:
        doc["debounceUntil"] = to_millis(job.debounce_until)
    if job.behind_until is not None:
        doc["behindUntil"] = to_millis(job.behind_until)
    if job.parked_at is not None:
        doc["parkedAt"] = to_millis(job.parked_at)
        if job.parked_run_at is not None:
            doc["parkedRunAt"] = to_millis(job.parked_run_at)
    if job.schedule is not None:
        doc[SCHEDULE_FIELD] = schedule_document(job.schedule)
    return doc


def schedule_document(spec: ScheduleSpec) -> dict[str, Any]:
    """The stored ``schedule`` field: ``job``, ``cron`` + ``timezone`` or ``everyMs``,
    ``misfire`` (with ``misfireGraceMs``, ``maxCatchUp`` when given), ``paused``,
    ``updatedAt``."""
    doc: dict[str, Any] = {"job": spec.job}
    if spec.every is not None:
        doc["everyMs"] = millis(spec.every)
    else:
        doc["cron"] = spec.cron
        doc["timezone"] = spec.timezone
    doc["misfire"] = spec.misfire
    if spec.misfire_grace is not None:
        doc["misfireGraceMs"] = millis(spec.misfire_grace)
    if spec.max_catch_up is not None:
        doc["maxCatchUp"] = _require_int("maxCatchUp", spec.max_catch_up)
    doc["paused"] = spec.paused
    if spec.updated_at is not None:
        doc["updatedAt"] = to_millis(spec.updated_at)
    return doc


def spec_from_document(value: Any) -> ScheduleSpec | None:
    """The :class:`ScheduleSpec` of a stored ``schedule`` field, or ``None`` when it is missing
    or not one (a shape this version cannot run is read as no schedule)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("job"), str):
        return None
    every = _duration(value.get("everyMs"))
    cron, zone = value.get("cron"), value.get("timezone")
    if every is None and not (isinstance(cron, str) and isinstance(zone, str)):
        return None
    misfire = value.get("misfire", "run_once")
    catch_up = value.get("maxCatchUp")
    return ScheduleSpec(
        job=value["job"],
        cron=None if every is not None else cron,
        timezone=None if every is not None else zone,
        every=every,
        misfire=misfire if misfire in MISFIRE_MODES else "run_once",
        misfire_grace=_duration(value.get("misfireGraceMs"), zero=True),
        max_catch_up=catch_up if isinstance(catch_up, int) and catch_up >= 1 else None,
        paused=value.get("paused") is True,
        updated_at=_optional_datetime(value.get("updatedAt")),
    )


def _duration(value: Any, *, zero: bool = False) -> timedelta | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0 or (value == 0 and not zero):
        return None
    return timedelta(milliseconds=value)


def _tags(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(tag for tag in value if isinstance(tag, str))


def claimed_extras(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The additive fields a :class:`~dogs_core.domain.records.ClaimedJob` carries, as keyword
    arguments (empty for a record that has none: the common case costs five lookups)."""
    extras: dict[str, Any] = {}
    tags = doc.get("tags")
    if tags is not None:
        extras["tags"] = _tags(tags)
    start_before = doc.get("startBefore")
    if isinstance(start_before, datetime):
        extras["start_before"] = start_before
    window = doc.get("uniqueWindowMs")
    if window is not None:
        extras["unique_window"] = _duration(window)
    schedule = doc.get(SCHEDULE_FIELD)
    if schedule is not None:
        extras["schedule"] = spec_from_document(schedule)
    steps = doc.get(STEPS_FIELD)
    if steps is not None:
        extras["steps"] = steps_from_document(steps)
    return extras


def record_extras(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The additive fields a :class:`~dogs_core.domain.records.JobRecord` carries, as keyword
    arguments."""
    extras = claimed_extras(doc)
    for field, name in (
        ("debounceUntil", "debounce_until"),
        ("behindUntil", "behind_until"),
        ("parkedAt", "parked_at"),
        ("parkedRunAt", "parked_run_at"),
        (SLEEPING_FIELD, "sleeping_until"),
    ):
        moment = _optional_datetime(doc.get(field))
        if moment is not None:
            extras[name] = moment
    return extras
