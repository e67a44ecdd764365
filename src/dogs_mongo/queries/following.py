"""The following role on MongoDB: the record's additive ``progress`` field, the log lines'
collection (its documents, reads, indexes), and the two feeds' pipelines.

``progress`` (on a record, and on a history row) is one subdocument::

    {fraction: <double|null>, message: <string|null>, data: <document|null>,
     updatedAt: <date>, executionId: <string>}

A Node Dogs worker never reads it, and its claims and updates leave it alone; a record shows it
only while ``progress.executionId`` is its ``lockId`` (:func:`progress_of_record`).

A log line is one document of the logs collection (ours; Dogs has none)::

    {_id: "<ms>-<executionId>-<seq>", executionId, jobId, jobName, seq: <int>, time: <date>,
     level: <int>, message, exception?, traceId?, expiresAt: <date>}

read by ``{jobId: 1, _id: 1}`` and ``{executionId: 1, _id: 1}`` (a reader's ``$or`` of the two is
one merge of two index scans in ``_id`` order) and dropped by the TTL index on ``expiresAt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from pymongo.write_concern import WriteConcern

from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import to_millis
from dogs_mongo.queries.common import _optional_str
from dogs_mongo.queries.indexes import IndexSpec

__all__ = [
    "LOGS_SUFFIX",
    "LOG_INDEXES",
    "changed_id",
    "log_line_document",
    "log_line_from_document",
    "log_lines_changes_pipeline",
    "log_lines_filter",
    "logs_collection_name",
    "progress_changes_pipeline",
    "progress_document",
    "progress_from_document",
    "progress_of_record",
    "write_progress_update",
]

#: The logs collection of a history collection named ``<x>_history`` is ``<x>_logs``
#: (``orionjs.jobs_dogs_logs`` by default); of another name, that name plus ``_logs``.
LOGS_SUFFIX: Final = "_logs"

LOG_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("jobId_1__id_1", (("jobId", 1), ("_id", 1))),
    IndexSpec("executionId_1__id_1", (("executionId", 1), ("_id", 1))),
    IndexSpec("expiresAt_1", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
)


def logs_collection_name(history_collection: str) -> str:
    """The default logs collection beside ``history_collection``."""
    stem = history_collection.removesuffix("_history")
    return f"{stem}{LOGS_SUFFIX}"


# -- progress ------------------------------------------------------------------------------------


def progress_document(progress: Progress) -> dict[str, Any]:
    """The ``progress`` subdocument (see the module)."""
    return {
        "fraction": progress.fraction,
        "message": progress.message,
        "data": None if progress.data is None else dict(progress.data),
        "updatedAt": to_millis(progress.updated_at),
        "executionId": progress.execution_id,
    }


def write_progress_update(progress: Progress, locked_until: datetime | None) -> dict[str, Any]:
    """The fenced update of ``write_progress``: the progress, and the lock when given."""
    fields: dict[str, Any] = {"progress": progress_document(progress)}
    if locked_until is not None:
        fields["lockedUntil"] = to_millis(locked_until)
    return {"$set": fields}


def progress_from_document(value: object) -> Progress | None:
    """A stored ``progress`` subdocument (``None`` when absent or not one of ours)."""
    if not isinstance(value, Mapping):
        return None
    updated_at = value.get("updatedAt")
    execution_id = value.get("executionId")
    if not isinstance(updated_at, datetime) or not isinstance(execution_id, str):
        return None
    fraction = value.get("fraction")
    data = value.get("data")
    return Progress(
        fraction=float(fraction) if isinstance(fraction, int | float) else None,
        message=_optional_str(value.get("message")),
        data=dict(data) if isinstance(data, Mapping) else None,
        updated_at=updated_at,
        execution_id=execution_id,
    )


def progress_of_record(doc: Mapping[str, Any]) -> Progress | None:
    """A record's progress, only while the execution that wrote it holds the lock."""
    stored = doc.get("progress")
    if stored is None:
        return None
    progress = progress_from_document(stored)
    if progress is None or progress.execution_id != doc.get("lockId"):
        return None
    return progress


# -- log lines -----------------------------------------------------------------------------------


def log_line_document(line: LogLine) -> dict[str, Any]:
    """One line's document (see the module)."""
    document: dict[str, Any] = {
        "_id": line.id,
        "executionId": line.execution_id,
        "jobId": line.job_id,
        "jobName": line.job_name,
        "seq": int(line.seq),
        "time": to_millis(line.time),
        "level": int(line.level),
        "message": line.message,
    }
    if line.exception is not None:
        document["exception"] = line.exception
    if line.trace_id is not None:
        document["traceId"] = line.trace_id
    document["expiresAt"] = to_millis(line.expires_at)
    return document


def log_line_from_document(doc: Mapping[str, Any]) -> LogLine:
    return LogLine(
        id=str(doc["_id"]),
        execution_id=str(doc["executionId"]),
        job_id=str(doc["jobId"]),
        job_name=str(doc.get("jobName", "")),
        seq=int(doc.get("seq", 0)),
        time=doc["time"],
        level=int(doc.get("level", 0)),
        message=str(doc.get("message", "")),
        expires_at=doc["expiresAt"],
        exception=_optional_str(doc.get("exception")),
        trace_id=_optional_str(doc.get("traceId")),
    )


def log_lines_filter(owner_id: str, after: str | None) -> dict[str, Any]:
    """The lines of job or execution ``owner_id`` after the id ``after``."""
    filter_: dict[str, Any] = {"$or": [{"jobId": owner_id}, {"executionId": owner_id}]}
    if after is not None:
        filter_["_id"] = {"$gt": after}
    return filter_


# -- feeds ---------------------------------------------------------------------------------------


def log_lines_changes_pipeline(owner_id: str) -> list[dict[str, Any]]:
    """The inserts of lines of job or execution ``owner_id``; the events keep the line's id."""
    return [
        {
            "$match": {
                "operationType": "insert",
                "$or": [
                    {"fullDocument.jobId": owner_id},
                    {"fullDocument.executionId": owner_id},
                ],
            }
        },
        {"$project": {"documentKey": 1}},
    ]


def progress_changes_pipeline(job_id: str) -> list[dict[str, Any]]:
    """Every change of the record ``job_id``; the events keep its id only."""
    return [
        {"$match": {"documentKey._id": job_id}},
        {"$project": {"documentKey": 1}},
    ]


def changed_id(event: Mapping[str, Any]) -> str | None:
    """The ``_id`` a change event is about."""
    key = event.get("documentKey")
    if not isinstance(key, Mapping) or "_id" not in key:
        return None
    return str(key["_id"])


LINES_WRITE_CONCERN = WriteConcern(w=1)
