"""History rows: the upserts of ``write_history_many`` (the first row of an execution wins
whole) and the mapping back to records."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType, to_millis
from dogs_mongo.queries.common import (
    _int,
    _job_type,
    _optional_str,
    _owner,
    _owner_document,
    _params,
    _require_int,
)
from dogs_mongo.queries.following import progress_document, progress_from_document

# --------------------------------------------------------------------------------------------
# History (docs/concepts.md#history)
# --------------------------------------------------------------------------------------------


def history_filter(execution_id: str) -> dict[str, Any]:
    return {"executionId": execution_id}


#: The namespace of :func:`history_row_id`'s name-based UUIDs.
_ROW_ID_NAMESPACE: Final = uuid.UUID("6d8c0f54-2f0b-4c53-9a43-5d0f3b1f2a77")


def history_row_id(execution_id: str) -> str:
    """The ``_id`` of the row an execution's upsert inserts: a UUID string (Dogs' type) named
    after the execution (version 5), not a random one. ``executionId`` is not a unique index,
    so two concurrent upserts of one new execution (its own row, and a claimer's ``stale`` row
    for it once an outage outlasted the lock) could both insert; with one ``_id`` the second
    fails on the ``_id`` index instead, and the first row wins whole as it should."""
    return str(uuid.uuid5(_ROW_ID_NAMESPACE, execution_id))


def supersede_update(record: HistoryRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(filter, update)`` of ``supersede_history``: the execution's ``stale`` row gets
    every field of ``record`` (its ``_id`` and ``supersededBy`` kept)."""
    document = history_update(record, "")["$setOnInsert"]
    del document["_id"]
    document.pop("supersededBy", None)
    return {"executionId": record.execution_id, "status": HistoryStatus.STALE.value}, {
        "$set": document
    }


def history_update(record: HistoryRecord, record_id: str) -> dict[str, Any]:
    """Upsert by ``executionId`` with every field in ``$setOnInsert``: the first row written
    for an execution wins whole, and a later one writes nothing. (Dogs puts only ``status`` and
    ``_id`` there and the rest in ``$set``; see docs/differences.md.) Dogs' fields in Dogs'
    order, then our additive ``wasStale``, ``errorType``, ``errorTraceback`` and ``owner``,
    ``progress`` when the execution reported some, for a workflow step's execution
    ``workflowId``, ``outcome`` (when known), ``ran`` (only ``false``, for a job cancelled
    before it ran) and ``supersededBy`` (when known)."""
    document: dict[str, Any] = {
        "_id": record_id,
        "status": HistoryStatus(record.status).value,
        "jobId": record.job_id,
        "executionId": record.execution_id,
        "jobName": record.job_name,
        "type": JobType(record.type).value,
        "priority": _require_int("priority", record.priority),
        "tries": _require_int("tries", record.tries),
    }
    if record.unique_identifier is not None:
        document["uniqueIdentifier"] = record.unique_identifier
    document["startedAt"] = to_millis(record.started_at)
    document["endedAt"] = to_millis(record.ended_at)
    document["duration"] = _duration_ms(record)
    document["expiresAt"] = to_millis(record.expires_at)
    document["errorMessage"] = record.error_message
    if record.params is not None:
        document["params"] = dict(record.params)
    document["result"] = record.result
    document["wasStale"] = bool(record.was_stale)
    document["errorType"] = record.error_type
    document["errorTraceback"] = record.error_traceback
    document["owner"] = _owner_document(record.owner)
    if record.progress is not None:
        document["progress"] = progress_document(record.progress)
    if record.workflow_id is not None:
        document["workflowId"] = record.workflow_id
    if record.outcome is not None:
        document["outcome"] = str(record.outcome)
    if not record.ran:
        document["ran"] = False
    if record.superseded_by is not None:
        document["supersededBy"] = str(record.superseded_by)
    return {"$setOnInsert": document}


def history_many_updates(
    records: Sequence[HistoryRecord], new_id: Callable[[str], str] = history_row_id
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``(filter, update)`` upserts of ``write_history_many``, one per execution id, in
    order of first appearance: the first record of an execution id is its upsert, and later
    ones are dropped (writing them after it would write nothing). (The operations of an
    unordered ``bulkWrite`` may run in any order, and ``executionId`` is not a unique index:
    two upserts of one new execution in one batch could insert two rows.) ``new_id`` gives the
    ``_id`` of each execution's upsert (:func:`history_row_id`). Every update is built before
    anything is sent: an invalid record, kept or dropped, raises here."""
    first: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.execution_id in first:
            history_update(record, "")  # checked all the same
            continue
        first[record.execution_id] = history_update(record, new_id(record.execution_id))
    return [(history_filter(execution_id), update) for execution_id, update in first.items()]


def _duration_ms(record: HistoryRecord) -> int:
    started = to_millis(record.started_at)
    ended = to_millis(record.ended_at)
    return max(0, (ended - started) // timedelta(milliseconds=1))


def history_from_document(doc: Mapping[str, Any]) -> HistoryRecord:
    return HistoryRecord(
        execution_id=str(doc["executionId"]),
        job_id=str(doc["jobId"]),
        job_name=str(doc["jobName"]),
        type=_job_type(doc.get("type")),
        priority=_int(doc.get("priority"), 0),
        tries=_int(doc.get("tries"), 0),
        started_at=doc["startedAt"],
        ended_at=doc["endedAt"],
        status=HistoryStatus(doc["status"]),
        expires_at=doc["expiresAt"],
        params=_params(doc),
        result=doc.get("result"),
        error_message=_optional_str(doc.get("errorMessage")),
        unique_identifier=_optional_str(doc.get("uniqueIdentifier")),
        was_stale=bool(doc.get("wasStale", False)),
        error_type=_optional_str(doc.get("errorType")),
        error_traceback=_optional_str(doc.get("errorTraceback")),
        owner=_owner(doc.get("owner")),
        progress=progress_from_document(doc.get("progress")),
        workflow_id=_optional_str(doc.get("workflowId")),
        outcome=_optional_str(doc.get("outcome")),
        ran=doc.get("ran") is not False,
        superseded_by=_optional_str(doc.get("supersededBy")),
    )
