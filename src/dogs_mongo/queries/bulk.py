"""Bulk actions by filter on MongoDB (:mod:`dogs_core.domain.bulk`): the read of one chunk of a
selection, the newest error type of its records, the dry run's count, and the per-record fence
of every bulk write.

A chunk is one ``find`` sorted by ``_id`` from the cursor, through the index of the selection's
state (:func:`~dogs_mongo.queries.states.state_hint`); a creation-time range bounds ``_id``
itself (record ids are UUIDv7: their first 48 bits are the creation time). The error type of a
record's newest execution comes from one aggregation over the history's
``{jobId: 1, startedAt: -1}`` index (``$group`` taking each job's first row), for the chunk's
ids only; a count with an error type walks the selection the same way. Every write of a chunk
is one ``updateOne``/``deleteOne`` per record, fenced by :func:`bulk_fence`, in one unordered
``bulkWrite``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dogs_core.domain.bulk import BulkSelection, RecordKind, TimeField, created_id_bound
from dogs_core.domain.records import JobRecord, to_millis
from dogs_mongo.queries.indexes import TAGS_INDEX_KEYS
from dogs_mongo.queries.states import not_locked_after, state_filter, state_hint

__all__ = [
    "BulkQuery",
    "bulk_fence",
    "bulk_query",
    "error_types_pipeline",
    "finished_since",
    "kinds_filter",
]

_TIME_FIELDS: Mapping[TimeField, str] = {
    TimeField.NEXT_RUN: "nextRunAt",
    TimeField.LAST_RUN: "lastRunAt",
    TimeField.FAILED: "maxTriesReachedAt",
}


class BulkQuery:
    """``find(filter).sort(_id).hint(hint).limit(limit)`` of one chunk (or the count)."""

    __slots__ = ("filter", "hint")

    def __init__(self, filter_: dict[str, Any], hint: dict[str, int]) -> None:
        self.filter = filter_
        self.hint = hint


def kinds_filter(kinds: frozenset[RecordKind]) -> list[dict[str, Any]]:
    """The conditions that leave out the kinds not in ``kinds``
    (:func:`~dogs_core.domain.bulk.record_kind`: a step has ``workflow``, a runtime schedule
    ``schedule``; a plain job neither). ``null`` matches a missing field: Node Dogs writes
    neither."""
    conditions: list[dict[str, Any]] = []
    if RecordKind.STEP not in kinds:
        conditions.append({"workflow": None})
    if RecordKind.SCHEDULE not in kinds:
        conditions.append(
            {"schedule": None}
            if RecordKind.STEP not in kinds
            else {"$or": [{"schedule": None}, {"workflow": {"$ne": None}}]}
        )
    if RecordKind.JOB not in kinds:
        conditions.append({"$or": [{"schedule": {"$ne": None}}, {"workflow": {"$ne": None}}]})
    return conditions


def bulk_query(selection: BulkSelection, *, now: datetime, after: str | None) -> BulkQuery:
    """Every filter of ``selection`` but the error type, at ``now``, ids after ``after``."""
    conditions: list[dict[str, Any]] = kinds_filter(selection.taken_kinds)
    if selection.state is not None:
        conditions += state_filter(selection.state, now)
    id_range: dict[str, Any] = {}
    if after is not None:
        id_range["$gt"] = after
    if selection.has_time_range:
        if selection.time_field is TimeField.CREATED:
            if selection.since is not None:
                low = created_id_bound(selection.since)
                id_range["$gte"] = max(low, id_range.get("$gte", low))
            if selection.until is not None:
                id_range["$lt"] = created_id_bound(selection.until)
        else:
            bounds: dict[str, Any] = {}
            if selection.since is not None:
                bounds["$gte"] = to_millis(selection.since)
            if selection.until is not None:
                bounds["$lt"] = to_millis(selection.until)
            conditions.append({_TIME_FIELDS[selection.time_field]: bounds})
    filter_: dict[str, Any] = {}
    if selection.job_name is not None:
        filter_["jobName"] = selection.job_name
    if selection.tags:
        filter_["tags"] = {"$all": list(selection.tags)}
    if id_range:
        filter_["_id"] = id_range
    if conditions:
        filter_["$and"] = conditions
    if selection.tags:  # the narrowest filter given, as find_jobs(tags=...) reads it
        return BulkQuery(filter_, dict(TAGS_INDEX_KEYS))
    return BulkQuery(filter_, state_hint(selection.state))


def error_types_pipeline(job_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The error type of the newest history row of each of ``job_ids`` (``_id``: the job id),
    walking ``{jobId: 1, startedAt: -1}``."""
    return [
        {"$match": {"jobId": {"$in": list(job_ids)}}},
        {"$sort": {"jobId": 1, "startedAt": -1}},
        {"$group": {"_id": "$jobId", "errorType": {"$first": "$errorType"}}},
    ]


def bulk_fence(snapshot: JobRecord, *, unless_running_at: datetime | None) -> dict[str, Any]:
    """Record ``snapshot.id`` while it is unchanged since the snapshot (lock id and deadline,
    tries, status, next run, priority: a missing field still missing), and, with
    ``unless_running_at``, its lock not live then."""
    fence: dict[str, Any] = {
        "_id": snapshot.id,
        "lockId": snapshot.lock_id,
        "lockedUntil": None if snapshot.locked_until is None else to_millis(snapshot.locked_until),
        "tries": snapshot.tries,
        "status": None if snapshot.status is None else snapshot.status.value,
        "nextRunAt": to_millis(snapshot.next_run_at),
        "priority": snapshot.priority,
    }
    if unless_running_at is not None:
        not_live = not_locked_after(unless_running_at)["lockedUntil"]
        fence["lockedUntil"] = {"$eq": fence["lockedUntil"], **not_live}
    return fence


def finished_since(
    documents: Sequence[Mapping[str, Any]], snapshots: Mapping[str, JobRecord]
) -> set[str]:
    """Of the history rows ``documents`` (``jobId``, ``executionId``, ``startedAt``), the jobs
    a worker finished after their snapshot was read: a row of the execution the snapshot saw
    running, or of an execution started after the snapshot's last run."""
    finished: set[str] = set()
    for document in documents:
        job_id = str(document.get("jobId"))
        snapshot = snapshots.get(job_id)
        if snapshot is None:
            continue
        if snapshot.lock_id is not None and document.get("executionId") == snapshot.lock_id:
            finished.add(job_id)
            continue
        started = document.get("startedAt")
        last = snapshot.last_run_at
        if isinstance(started, datetime) and (last is None or started > to_millis(last)):
            finished.add(job_id)
    return finished
