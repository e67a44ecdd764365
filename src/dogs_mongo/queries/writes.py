"""Writes: fenced updates, inserted documents and upserts, the reconciler and retention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from dogs_core.domain.outcome import Defer, DemoteStale, MarkTerminal, Release, Reschedule
from dogs_core.domain.records import JobRecord, JobStatus, JobType, NewJob, to_millis
from dogs_core.domain.settle import Settlement
from dogs_core.domain.steering import JobChange
from dogs_mongo.queries.claims import _lock_free, _not_terminal
from dogs_mongo.queries.common import (
    _LOCK_FIELDS_UNSET,
    HELD_FIELD,
    MAX_BATCH_SIZE,
    _owner_document,
    _require_int,
    hold_document,
)
from dogs_mongo.queries.shaping import shaping_fields
from dogs_mongo.queries.states import not_failed_filter, not_locked_after
from dogs_mongo.queries.steps import SLEEPING_FIELD, STEPS_FIELD, step_document

# --------------------------------------------------------------------------------------------
# Fenced writes (docs/concepts.md#locks-and-lockid-fencing) and their updates
# --------------------------------------------------------------------------------------------


def fenced_filter(job_id: str, lock_id: str) -> dict[str, Any]:
    """Every write made on behalf of an execution matches the record id and its lock id."""
    return {"_id": job_id, "lockId": lock_id}


def complete_filter(job_id: str, lock_id: str) -> dict[str, Any]:
    """The fenced delete of a finished event job (recurrent records are never deleted)."""
    return {"_id": job_id, "type": "event", "lockId": lock_id}


def complete_many_filter(claims: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The fenced delete of many finished event jobs, as one ``deleteMany`` filter.

    Matching ``_id`` and ``lockId`` with two ``$in`` lists is the same as the ``$or`` of one
    :func:`complete_filter` per pair, because lock ids are unique per claim: a lock id is only
    ever written to the one record it claimed, so no record can carry the lock id of another
    pair. (Pairs that cross their ids and lock ids on purpose would break this; the runtime
    only passes the pairs of its own claims.)
    """
    return {
        "_id": {"$in": [job_id for job_id, _ in claims]},
        "type": "event",
        "lockId": {"$in": [lock_id for _, lock_id in claims]},
    }


def ids_filter(ids: Sequence[str]) -> dict[str, Any]:
    """Records by id (with the projection ``{"_id": 1}``: which of them still exist)."""
    return {"_id": {"$in": list(ids)}}


_T = TypeVar("_T")


def batches(items: Sequence[_T], size: int = MAX_BATCH_SIZE) -> list[Sequence[_T]]:
    """``items`` cut into consecutive slices of at most ``size`` (none for no item)."""
    if size < 1:
        raise ValueError(f"size={size!r}: must be at least 1")
    return [items[start : start + size] for start in range(0, len(items), size)]


def settle_update(settlement: Settlement) -> tuple[dict[str, Any], dict[str, Any]]:
    """The filter and update of one settlement that updates its record (every command but
    ``Delete``, which :func:`complete_many_filter` sends for a whole batch): fenced by the lock
    id, and a ``MarkTerminal`` only of an event record (:mod:`dogs_core.domain.settle`)."""
    job_id, lock_id, command = settlement.job_id, settlement.lock_id, settlement.command
    if isinstance(command, Reschedule):
        update = reschedule_update(
            next_run_at=command.next_run_at,
            priority=command.priority,
            reset_tries=command.reset_tries,
            tries=command.tries,
        )
    elif isinstance(command, Defer):
        update = reschedule_update(
            next_run_at=command.next_run_at, priority=None, reset_tries=False, tries=command.tries
        )
        if command.hold is not None:
            update["$set"][HELD_FIELD] = hold_document(command.hold)
    elif isinstance(command, MarkTerminal):
        update = mark_max_tries_update(now=command.now, expires_at=command.expires_at)
        return mark_max_tries_filter(job_id, lock_id), update
    elif isinstance(command, Release):
        update = release_lock_update(command.now)
    elif isinstance(command, DemoteStale):
        update = demote_stale_update()
    else:
        raise TypeError(f"settle_update: {command!r} is not an update")
    return fenced_filter(job_id, lock_id), update


def extend_lock_update(locked_until: datetime) -> dict[str, Any]:
    return {"$set": {"lockedUntil": to_millis(locked_until)}}


def reschedule_update(
    *, next_run_at: datetime, priority: int | None, reset_tries: bool, tries: int | None = None
) -> dict[str, Any]:
    """Set the next run (and priority, and ``tries``: the given count, else 0 when
    ``reset_tries``) and end the lock: Dogs' three lock fields and our additive ones. A reset
    of the tries starts a new run: the durable steps of the one that ended go too."""
    to_set: dict[str, Any] = {"nextRunAt": to_millis(next_run_at)}
    to_unset = dict(_LOCK_FIELDS_UNSET)
    if priority is not None:
        to_set["priority"] = _require_int("priority", priority)
    if tries is not None:
        to_set["tries"] = _require_int("tries", tries)
    elif reset_tries:
        to_set["tries"] = 0
        to_unset[STEPS_FIELD] = ""
    return {"$set": to_set, "$unset": to_unset}


def mark_max_tries_filter(job_id: str, lock_id: str) -> dict[str, Any]:
    """Fenced, and only event records can become terminal."""
    return {"_id": job_id, "lockId": lock_id, "type": "event"}


def mark_max_tries_update(*, now: datetime, expires_at: datetime | None) -> dict[str, Any]:
    to_set: dict[str, Any] = {
        "status": JobStatus.MAX_TRIES_REACHED.value,
        "maxTriesReachedAt": to_millis(now),
    }
    to_unset = dict(_LOCK_FIELDS_UNSET)
    if expires_at is None:
        to_unset["expiresAt"] = ""
    else:
        to_set["expiresAt"] = to_millis(expires_at)
    return {"$set": to_set, "$unset": to_unset}


def demote_stale_update() -> dict[str, Any]:
    return {"$set": {"priority": 0}}


def release_lock_update(now: datetime) -> dict[str, Any]:
    """``lockedUntil = lockReleasedAt = now``: claimable at once, and released rather than
    stale (:func:`~dogs_mongo.queries.claims.released_expression`). ``lockId`` and
    ``lockOwner`` are kept, so late writes still fail their fence once another claim took it."""
    now = to_millis(now)
    return {"$set": {"lockedUntil": now, "lockReleasedAt": now}}


def unlock_all_filter() -> dict[str, Any]:
    return {"$or": [{"lockedUntil": {"$exists": True}}, {"lockId": {"$exists": True}}]}


def unlock_all_update() -> dict[str, Any]:
    return {"$unset": dict(_LOCK_FIELDS_UNSET)}


# --------------------------------------------------------------------------------------------
# Operators' writes (``modify_job``, ``delete_job``): not fenced, compare-and-set on the lock
# --------------------------------------------------------------------------------------------


def modify_job_filter(job_id: str, now: datetime) -> dict[str, Any]:
    """Record ``job_id`` unless it is running at ``now``."""
    return {"_id": job_id, **not_locked_after(now)}


def modify_job_update(change: JobChange) -> dict[str, Any]:
    """The ``$set`` (and, to revive a failed record, the ``$unset``) of ``change``; an empty
    document when it changes nothing. The lock fields are left alone."""
    to_set: dict[str, Any] = {}
    if change.next_run_at is not None:
        to_set["nextRunAt"] = to_millis(change.next_run_at)
    if change.priority is not None:
        to_set["priority"] = _require_int("priority", change.priority)
    if change.tries is not None:
        to_set["tries"] = _require_int("tries", change.tries)
    update: dict[str, Any] = {}
    if to_set:
        update["$set"] = to_set
    if change.revive:
        update["$unset"] = {"status": "", "maxTriesReachedAt": "", "expiresAt": ""}
    return update


def delete_job_filter(
    job_id: str, *, unless_running_at: datetime | None, unless_failed: bool
) -> dict[str, Any]:
    """Record ``job_id``, unless its lock is live at ``unless_running_at`` or (with
    ``unless_failed``) it is failed."""
    filter_: dict[str, Any] = {"_id": job_id}
    if unless_running_at is not None:
        filter_.update(not_locked_after(unless_running_at))
    if unless_failed:
        filter_.update(not_failed_filter())
    return filter_


# --------------------------------------------------------------------------------------------
# Scheduling (docs/concepts.md#uniqueness-keys), recurrent bootstrap (docs/differences.md#startup)
# --------------------------------------------------------------------------------------------


def document_from_new_job(job: NewJob) -> dict[str, Any]:
    """The record document Dogs inserts for ``schedule`` (same field order); ``_id`` is the id
    the caller chose, so a retried insert is recognisable."""
    doc: dict[str, Any] = {
        "_id": job.id,
        "jobName": job.job_name,
        "type": JobType(job.type).value,
        "priority": _require_int("priority", job.priority),
    }
    if job.unique_identifier is not None:
        doc["uniqueIdentifier"] = job.unique_identifier
    doc["nextRunAt"] = to_millis(job.next_run_at)
    doc["partition"] = _require_int("partition", job.partition)
    doc["params"] = dict(job.params) if job.params is not None else None
    if job.trace_context:
        doc["traceContext"] = dict(job.trace_context)
    if job.workflow:
        doc["workflow"] = dict(job.workflow)
    doc.update(shaping_fields(job))  # additive, only when used (tags, deadline, windows...)
    return doc


def document_from_record(record: JobRecord) -> dict[str, Any]:
    """The stored document of a whole record (tests and migrations seed raw records with it):
    Dogs' field names, then our additive ``lockOwner`` and ``lockReleasedAt``; fields that are
    ``None`` left out (``params`` is stored as ``null``)."""
    doc: dict[str, Any] = {
        "_id": record.id,
        "jobName": record.job_name,
        "type": JobType(record.type).value,
        "priority": _require_int("priority", record.priority),
    }
    optional: list[tuple[str, Any]] = [
        ("uniqueIdentifier", record.unique_identifier),
        ("nextRunAt", to_millis(record.next_run_at)),
        ("partition", None if record.partition is None else _require_int("p", record.partition)),
        ("params", dict(record.params) if record.params is not None else None),
        ("lastRunAt", _optional_millis(record.last_run_at)),
        ("lockedUntil", _optional_millis(record.locked_until)),
        ("lockId", record.lock_id),
        ("claimWasStale", record.claim_was_stale),
        ("tries", None if record.tries is None else _require_int("tries", record.tries)),
        ("status", None if record.status is None else JobStatus(record.status).value),
        ("maxTriesReachedAt", _optional_millis(record.max_tries_reached_at)),
        ("expiresAt", _optional_millis(record.expires_at)),
        ("lockOwner", _owner_document(record.lock_owner, lock_id=record.lock_id)),
        ("lockReleasedAt", _optional_millis(record.lock_released_at)),
        ("traceContext", dict(record.trace_context) if record.trace_context else None),
        ("workflow", dict(record.workflow) if record.workflow else None),
        (HELD_FIELD, None if record.held is None else hold_document(record.held)),
        (STEPS_FIELD, [step_document(step) for step in record.steps] or None),
        (SLEEPING_FIELD, _optional_millis(record.sleeping_until)),
    ]
    for name, value in optional:
        if value is not None or name == "params":
            doc[name] = value
    doc.update(shaping_fields(record))
    return doc


def _optional_millis(moment: datetime | None) -> datetime | None:
    return None if moment is None else to_millis(moment)


def unique_identifier_filter(unique_identifier: str) -> dict[str, Any]:
    return {"uniqueIdentifier": unique_identifier}


def upsert_unique_update(document: Mapping[str, Any]) -> dict[str, Any]:
    """Bulk scheduling of an item with an identifier: every field in ``$setOnInsert``, so an
    existing record is never modified."""
    return {"$setOnInsert": dict(document)}


def ensure_recurrent_filter(job_name: str) -> dict[str, Any]:
    """The one record of a recurrent job (the partial unique index on ``jobName``)."""
    return {"jobName": job_name, "type": JobType.RECURRENT.value}


def ensure_recurrent_update(
    *, record_id: str, priority: int, partition: int, now: datetime
) -> dict[str, Any]:
    return {
        "$set": {"type": JobType.RECURRENT.value, "priority": _require_int("priority", priority)},
        "$unset": {"status": ""},
        "$setOnInsert": {
            "_id": record_id,
            "nextRunAt": to_millis(now),
            "partition": _require_int("partition", partition),
        },
    }


# --------------------------------------------------------------------------------------------
# Partition reconciler (docs/concepts.md#partitions-and-the-rotation)
# --------------------------------------------------------------------------------------------


def partition_needs_repair(n_partitions: int) -> dict[str, Any]:
    return {
        "$or": [
            {"partition": {"$exists": False}},
            {"partition": {"$lt": 0}},
            {"partition": {"$gte": n_partitions}},
        ]
    }


def reconcile_select_filter(
    *, job_names: Sequence[str], n_partitions: int, now: datetime
) -> dict[str, Any]:
    """Records of these names with a missing or out-of-range partition, unlocked, not terminal."""
    return {
        "jobName": {"$in": list(job_names)},
        "$and": [partition_needs_repair(n_partitions), _lock_free(now), _not_terminal()],
    }


def reconcile_cas_filter(record_id: Any, *, n_partitions: int, now: datetime) -> dict[str, Any]:
    """The per-record compare-and-set: repeats every condition of the scan, so a record claimed
    (or repaired) since the scan is left alone."""
    return {
        "_id": record_id,
        "$and": [partition_needs_repair(n_partitions), _lock_free(now), _not_terminal()],
    }


def reconcile_update(partition: int) -> dict[str, Any]:
    return {"$set": {"partition": _require_int("partition", partition)}}


RECONCILE_PROJECTION: Final[Mapping[str, int]] = {"_id": 1}

# --------------------------------------------------------------------------------------------
# Retention of terminal event jobs (docs/concepts.md#attempt-limits-and-maxtriesreached)
# --------------------------------------------------------------------------------------------


def backfill_retention_filter() -> dict[str, Any]:
    return {"type": JobType.EVENT.value, "status": JobStatus.MAX_TRIES_REACHED.value}


def backfill_retention_update(
    *, retention: timedelta | None, now: datetime
) -> dict[str, Any] | list[dict[str, Any]]:
    """With a retention: the pipeline update Dogs sends (``maxTriesReachedAt`` backfilled from
    ``lastRunAt`` or ``now``; ``expiresAt = maxTriesReachedAt + retention``). Without one: unset
    ``expiresAt`` (kept forever)."""
    if retention is None:
        return {"$unset": {"expiresAt": ""}}
    retention_ms = retention // timedelta(milliseconds=1)
    if retention_ms < 0:
        raise ValueError(f"retention must not be negative, got {retention!r}")
    anchor = {"$ifNull": ["$maxTriesReachedAt", {"$ifNull": ["$lastRunAt", to_millis(now)]}]}
    return [{"$set": {"maxTriesReachedAt": anchor, "expiresAt": {"$add": [anchor, retention_ms]}}}]
