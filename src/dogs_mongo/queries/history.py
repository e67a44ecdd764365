"""History rows: the upserts of ``write_history_many`` and the mapping back to records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType, to_millis
from dogs_mongo.queries.common import _int, _job_type, _optional_str, _params, _require_int

# --------------------------------------------------------------------------------------------
# History (§2.3, §3.14)
# --------------------------------------------------------------------------------------------


def history_filter(execution_id: str) -> dict[str, Any]:
    return {"executionId": execution_id}


def history_update(record: HistoryRecord, record_id: str) -> dict[str, Any]:
    """Upsert by ``executionId``: ``status`` (and ``_id``) only on insert, so the first status
    written for an execution wins; everything else in ``$set``."""
    to_set: dict[str, Any] = {
        "jobId": record.job_id,
        "executionId": record.execution_id,
        "jobName": record.job_name,
        "type": JobType(record.type).value,
        "priority": _require_int("priority", record.priority),
        "tries": _require_int("tries", record.tries),
    }
    if record.unique_identifier is not None:
        to_set["uniqueIdentifier"] = record.unique_identifier
    to_set["startedAt"] = to_millis(record.started_at)
    to_set["endedAt"] = to_millis(record.ended_at)
    to_set["duration"] = _duration_ms(record)
    to_set["expiresAt"] = to_millis(record.expires_at)
    to_set["errorMessage"] = record.error_message
    if record.params is not None:
        to_set["params"] = dict(record.params)
    to_set["result"] = record.result
    return {
        "$setOnInsert": {"_id": record_id, "status": HistoryStatus(record.status).value},
        "$set": to_set,
    }


def history_many_updates(
    records: Sequence[HistoryRecord], new_id: Callable[[], str]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``(filter, update)`` upserts of ``write_history_many``, one per execution id, in
    order of first appearance. Records of one execution id are merged into one upsert with the
    result of writing them one after the other: ``$setOnInsert`` (the status) of the first,
    ``$set`` of the later ones over the earlier ones. (The operations of an unordered
    ``bulkWrite`` may run in any order, and ``executionId`` is not a unique index: two upserts of
    one new execution in one batch could insert two rows.) ``new_id`` gives the ``_id`` of each
    upsert. Every update is built before anything is sent: an invalid record raises here."""
    merged: dict[str, dict[str, Any]] = {}
    for record in records:
        update = history_update(record, new_id())
        previous = merged.get(record.execution_id)
        if previous is None:
            merged[record.execution_id] = update
        else:
            previous["$set"] = {**previous["$set"], **update["$set"]}
    return [(history_filter(execution_id), update) for execution_id, update in merged.items()]


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
    )
