"""The mapping of stored record documents back to :class:`~dogs_core.domain.records.JobRecord`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dogs_core.domain.records import JobRecord, JobStatus
from dogs_mongo.queries.common import (
    HELD_FIELD,
    _hold,
    _int,
    _job_type,
    _optional_datetime,
    _optional_int,
    _optional_str,
    _owner,
    _params,
    _trace_context,
    _workflow,
)
from dogs_mongo.queries.following import progress_of_record
from dogs_mongo.queries.shaping import record_extras

# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def record_from_document(doc: Mapping[str, Any]) -> JobRecord:
    """A stored record (from Dogs or from us) as a :class:`JobRecord`. Numbers stored as BSON
    doubles by other writers are read as ``int``; a missing ``status`` is pending (``None``).
    Our additive ``lockOwner``, ``lockReleasedAt`` and ``progress`` (of the lock's holder only)
    are read when present (a record only Node
    workers touched has neither); ``staleAttempt`` is the claims' business, not the record's."""
    status = doc.get("status")
    return JobRecord(
        id=str(doc["_id"]),
        job_name=str(doc["jobName"]),
        type=_job_type(doc.get("type")),
        priority=_int(doc.get("priority"), 0),
        next_run_at=doc["nextRunAt"],
        partition=_optional_int(doc.get("partition")),
        params=_params(doc),
        unique_identifier=_optional_str(doc.get("uniqueIdentifier")),
        last_run_at=doc.get("lastRunAt"),
        locked_until=doc.get("lockedUntil"),
        lock_id=_optional_str(doc.get("lockId")),
        claim_was_stale=None if doc.get("claimWasStale") is None else bool(doc["claimWasStale"]),
        tries=_optional_int(doc.get("tries")),
        status=None if status is None else JobStatus(status),
        max_tries_reached_at=doc.get("maxTriesReachedAt"),
        expires_at=doc.get("expiresAt"),
        lock_owner=_owner(doc.get("lockOwner"), lock_id=doc.get("lockId")),
        lock_released_at=_optional_datetime(doc.get("lockReleasedAt")),
        trace_context=_trace_context(doc),
        progress=progress_of_record(doc),
        workflow=_workflow(doc),
        **record_extras(doc),
        held=_hold(doc.get(HELD_FIELD)),
    )
