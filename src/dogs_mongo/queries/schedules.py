"""The schedules role's filters and updates on the records collection: runtime schedules are
recurrent records with an additive ``schedule`` field (:mod:`dogs_mongo.queries.shaping`), found
through one additive partial index (:data:`SCHEDULES_INDEX_NAME`) that holds only them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dogs_core.domain.records import JobType, to_millis
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_mongo.queries.indexes import SCHEDULES_INDEX_NAME
from dogs_mongo.queries.shaping import SCHEDULE_FIELD, schedule_document

__all__ = [
    "SCHEDULES_INDEX_NAME",
    "due_schedules_filter",
    "recurrent_after_filter",
    "runtime_schedule_filter",
    "update_schedule_filter",
    "update_schedule_update",
]


Document = dict[str, Any]


def runtime_schedule_filter(schedule_id: str) -> Document:
    """The recurrent record of runtime schedule ``schedule_id`` (never a code-defined one)."""
    return {
        "jobName": schedule_id,
        "type": JobType.RECURRENT.value,
        f"{SCHEDULE_FIELD}.job": {"$exists": True},
    }


def recurrent_after_filter(after: str | None) -> Document:
    """Recurrent records (Dogs' partial unique index on ``jobName`` serves it, in name order)."""
    name: Document = {"$type": "string"} if after is None else {"$gt": after}
    return {"type": JobType.RECURRENT.value, "jobName": name}


def update_schedule_filter(record_id: str, expected: datetime | None) -> Document:
    updated = None if expected is None else to_millis(expected)
    return {
        "_id": record_id,
        "type": JobType.RECURRENT.value,
        f"{SCHEDULE_FIELD}.job": {"$exists": True},
        f"{SCHEDULE_FIELD}.updatedAt": updated,
    }


def update_schedule_update(
    spec: ScheduleSpec,
    params: Mapping[str, Any] | None,
    priority: int,
    next_run_at: datetime | None,
) -> Document:
    fields: Document = {
        SCHEDULE_FIELD: schedule_document(spec),
        "params": dict(params) if params is not None else None,
        "priority": int(priority),
    }
    if next_run_at is not None:
        fields["nextRunAt"] = to_millis(next_run_at)
    return {"$set": fields}


def due_schedules_filter(job_names: Sequence[str], until: datetime) -> Document:
    """Runtime schedules of ``job_names`` due by ``until``: the partial index's filter
    (``$exists``) is repeated so that the planner may use it."""
    return {
        f"{SCHEDULE_FIELD}.job": {"$exists": True, "$in": list(job_names)},
        "nextRunAt": {"$lte": to_millis(until)},
        "type": JobType.RECURRENT.value,
    }
