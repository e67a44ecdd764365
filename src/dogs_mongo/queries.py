"""Pure builders of every MongoDB document the adapters send: filters, sorts, updates,
projections, explain commands and index specs, plus the mapping between the records of
:mod:`dogs_core.domain.records` and the camelCase documents of @orion-js/dogs.

Nothing here does I/O: both :class:`~dogs_mongo.AsyncMongoJobStore` and the generated
:class:`~dogs_mongo.MongoJobStore` build their commands from these functions, and the unit
tests check them against ``reference/dogs-schema.json`` (the commands Dogs 4.6.8 sends).

Stored types follow Dogs exactly: ``_id`` is a UUIDv7 string, ``priority``, ``partition``,
``tries`` and ``duration`` are BSON ints (Python ``int``, never ``float``), times are BSON dates
(timezone-aware UTC ``datetime``, truncated to the millisecond), ``params`` is ``null`` when a
job has none. Field order of inserted documents is the order Dogs uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from pymongo import IndexModel

from dogs_core.domain.records import (
    ClaimedJob,
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    NewJob,
    to_millis,
)

__all__ = [
    "CLAIM_CANDIDATE_PROJECTION",
    "CLAIM_MANY_UPDATE_HINT",
    "CLAIM_SORT",
    "DEFAULT_HISTORY_COLLECTION",
    "DEFAULT_RECORDS_COLLECTION",
    "HINTS",
    "HINT_BY_JOB_NAME",
    "HINT_GLOBAL_PRIORITY",
    "HISTORY_INDEXES",
    "LOCK_ID_INDEX_NAME",
    "MAX_BATCH_SIZE",
    "MAX_BSON_DOCUMENT_SIZE",
    "PROBE_MAX_TIME_MS",
    "RECONCILE_PROJECTION",
    "RECORD_INDEXES",
    "CandidateQuery",
    "ClaimCommand",
    "IndexSpec",
    "backfill_retention_filter",
    "backfill_retention_update",
    "batches",
    "claim_candidates_query",
    "claim_from_before_image",
    "claim_from_read_back",
    "claim_many_updates",
    "claim_update",
    "claim_update_pipeline",
    "claims_from_read_back",
    "complete_filter",
    "complete_many_filter",
    "demote_stale_update",
    "document_from_new_job",
    "document_from_record",
    "eligible_filter",
    "ensure_recurrent_filter",
    "ensure_recurrent_update",
    "extend_lock_update",
    "fenced_filter",
    "find_jobs_filter",
    "find_jobs_sort",
    "find_one_and_update_claim",
    "get_executions_sort",
    "hint_spec",
    "history_filter",
    "history_from_document",
    "history_many_updates",
    "history_update",
    "ids_filter",
    "lock_id_filter",
    "lock_ids_filter",
    "mark_max_tries_filter",
    "mark_max_tries_update",
    "partition_needs_repair",
    "probe_execution_millis",
    "probe_explain_command",
    "reconcile_cas_filter",
    "reconcile_select_filter",
    "reconcile_update",
    "record_from_document",
    "release_lock_update",
    "reschedule_update",
    "sorted_update_one_claim",
    "status_counts_pipeline",
    "unique_identifier_filter",
    "unlock_all_filter",
    "unlock_all_update",
    "upsert_unique_update",
]

DEFAULT_RECORDS_COLLECTION: Final = "orionjs.jobs_dogs_records"
DEFAULT_HISTORY_COLLECTION: Final = "orionjs.jobs_dogs_history"

#: The largest document a MongoDB server accepts (``hello.maxBsonObjectSize``).
MAX_BSON_DOCUMENT_SIZE: Final = 16 * 1024 * 1024

#: Most items per command of a batch method (``complete_many``, ``write_history_many``): larger
#: inputs are sent as several commands.
MAX_BATCH_SIZE: Final = 1000

#: ``maxTimeMS`` of an explain probe (Dogs 4.6.2+).
PROBE_MAX_TIME_MS: Final = 1000

#: The claim order: priority descending, then next run ascending (Dogs §3.1).
CLAIM_SORT: Final[Mapping[str, int]] = {"priority": -1, "nextRunAt": 1}

LOCK_ID_INDEX_NAME: Final = "jobs_dogs_records_lock_id"

_LOCK_FIELDS_UNSET: Final[Mapping[str, str]] = {
    "lockId": "",
    "lockedUntil": "",
    "claimWasStale": "",
}


# --------------------------------------------------------------------------------------------
# Index specs (exactly as `listIndexes` shows them for Dogs 4.6.8, in creation order)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: its name, its ordered key pattern and its options."""

    name: str
    keys: tuple[tuple[str, int], ...]
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key_document(self) -> dict[str, int]:
        return dict(self.keys)

    def as_index_model(self) -> IndexModel:
        """The ``IndexModel`` that ``create_indexes`` takes."""
        return IndexModel(list(self.keys), name=self.name, **dict(self.options))

    def create_options(self) -> dict[str, Any]:
        """Keyword arguments of ``create_index`` besides the keys."""
        return {"name": self.name, **dict(self.options)}

    def as_list_indexes_entry(self) -> dict[str, Any]:
        """What ``listIndexes`` returns for this index on MongoDB 6 to 8."""
        return {"v": 2, "key": self.key_document, "name": self.name, **dict(self.options)}

    def matches(self, info: Mapping[str, Any]) -> bool:
        """Whether an ``index_information()`` entry (or a ``listIndexes`` entry) is this index
        with the same key pattern and options."""
        raw_keys = info.get("key")
        if isinstance(raw_keys, Mapping):
            keys = tuple((str(k), _normalize_direction(v)) for k, v in raw_keys.items())
        elif raw_keys is None:
            return False
        else:
            keys = tuple((str(k), _normalize_direction(v)) for k, v in raw_keys)
        if keys != self.keys:
            return False
        ignored = {"v", "key", "name", "ns", "background"}
        present = {k: v for k, v in info.items() if k not in ignored}
        return _normalize_options(present) == _normalize_options(dict(self.options))


def _normalize_direction(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"unexpected index direction {value!r}")
    if isinstance(value, int | float):
        return int(value)
    raise TypeError(f"unexpected index direction {value!r}")


def _normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in options.items():
        if key in ("unique", "sparse") and not value:
            continue  # `unique: false` is the same index as no `unique`
        if key == "expireAfterSeconds":
            value = int(value)
        result[key] = value
    return result


RECORD_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec(
        "jobs_dogs_records_partition_priority_next_run",
        (("partition", 1), ("priority", -1), ("nextRunAt", 1)),
    ),
    IndexSpec(
        "jobs_dogs_records_partition_job_name_priority_next_run",
        (("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
    ),
    IndexSpec("uniqueIdentifier_1", (("uniqueIdentifier", 1),), {"unique": True, "sparse": True}),
    IndexSpec("jobs_dogs_records_expires_at_ttl", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
    IndexSpec(LOCK_ID_INDEX_NAME, (("lockId", 1),), {"sparse": True}),
    IndexSpec(
        "jobName_1",
        (("jobName", 1),),
        {"unique": True, "partialFilterExpression": {"type": "recurrent"}},
    ),
)

HISTORY_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("executionId_1", (("executionId", 1),)),
    IndexSpec("jobName_1_startedAt_1", (("jobName", 1), ("startedAt", 1))),
    IndexSpec("expiresAt_1", (("expiresAt", 1),), {"expireAfterSeconds": 0}),
)

# --------------------------------------------------------------------------------------------
# Hints
# --------------------------------------------------------------------------------------------

HINT_BY_JOB_NAME: Final = "byJobName"
HINT_GLOBAL_PRIORITY: Final = "globalPriority"

#: The two acquisition hints of Dogs (§3.11), as the key documents Dogs sends.
HINTS: Final[Mapping[str, Mapping[str, int]]] = {
    HINT_BY_JOB_NAME: RECORD_INDEXES[1].key_document,
    HINT_GLOBAL_PRIORITY: RECORD_INDEXES[0].key_document,
}
_HINT_ALIASES: Final[Mapping[str, str]] = {
    RECORD_INDEXES[1].name: HINT_BY_JOB_NAME,
    RECORD_INDEXES[0].name: HINT_GLOBAL_PRIORITY,
    "by_job_name": HINT_BY_JOB_NAME,
    "global_priority": HINT_GLOBAL_PRIORITY,
}


def hint_spec(hint: str) -> dict[str, int]:
    """The index key document for a hint name (``"byJobName"`` or ``"globalPriority"``; the
    index names and snake_case spellings are accepted too)."""
    name = _HINT_ALIASES.get(hint, hint)
    try:
        return dict(HINTS[name])
    except KeyError:
        known = ", ".join(sorted([*HINTS, *_HINT_ALIASES]))
        raise ValueError(f"unknown acquisition hint {hint!r}; expected one of: {known}") from None


# --------------------------------------------------------------------------------------------
# Eligibility (§3.1)
# --------------------------------------------------------------------------------------------


def _lock_free(now: datetime) -> dict[str, Any]:
    now = to_millis(now)
    return {"$or": [{"lockedUntil": {"$exists": False}}, {"lockedUntil": {"$lte": now}}]}


def _not_terminal() -> dict[str, Any]:
    return {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]}


def eligible_filter(job_names: Sequence[str], partition: int, now: datetime) -> dict[str, Any]:
    """The selector of every claim and probe, key for key what Dogs sends. ``now`` is truncated
    to the millisecond as BSON stores it (stored dates are whole milliseconds, so eligibility is
    the same)."""
    return {
        "partition": partition,
        "jobName": {"$in": list(job_names)},
        "nextRunAt": {"$lte": to_millis(now)},
        "$and": [_lock_free(now), _not_terminal()],
    }


# --------------------------------------------------------------------------------------------
# Claims (§3.2)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimCommand:
    """The arguments of one claim write (either path)."""

    filter: dict[str, Any]
    update: dict[str, Any] | list[dict[str, Any]]
    sort: dict[str, int]
    hint: dict[str, int]


def claim_update_pipeline(request: ClaimRequest) -> list[dict[str, Any]]:
    """The pipeline update of the MongoDB 8 sorted ``updateOne`` claim.

    One ``$set`` stage: its expressions all read the document as it was before the stage, so
    ``claimWasStale`` sees the previous ``lockedUntil``.
    """
    return [
        {
            "$set": {
                "lockId": {"$literal": request.lock_id},
                "lockedUntil": to_millis(request.locked_until),
                "lastRunAt": to_millis(request.now),
                "tries": {"$add": [{"$ifNull": ["$tries", 0]}, 1]},
                "claimWasStale": {"$eq": [{"$type": "$lockedUntil"}, "date"]},
            }
        }
    ]


def claim_update(request: ClaimRequest) -> dict[str, Any]:
    """The classic update of the ``findOneAndUpdate`` claim (returnDocument: before)."""
    return {
        "$set": {
            "lockId": request.lock_id,
            "lockedUntil": to_millis(request.locked_until),
            "lastRunAt": to_millis(request.now),
        },
        "$inc": {"tries": 1},
    }


def sorted_update_one_claim(request: ClaimRequest) -> ClaimCommand:
    """``updateOne(filter, pipeline, {sort, hint})``: MongoDB 8 (wire version >= 25)."""
    return ClaimCommand(
        filter=eligible_filter(request.job_names, request.partition, request.now),
        update=claim_update_pipeline(request),
        sort=dict(CLAIM_SORT),
        hint=hint_spec(request.hint),
    )


def find_one_and_update_claim(request: ClaimRequest) -> ClaimCommand:
    """``findOneAndUpdate(filter, update, {sort, hint, returnDocument: before})``."""
    return ClaimCommand(
        filter=eligible_filter(request.job_names, request.partition, request.now),
        update=claim_update(request),
        sort=dict(CLAIM_SORT),
        hint=hint_spec(request.hint),
    )


def lock_id_filter(lock_id: str) -> dict[str, Any]:
    """The read-back of a sorted claim, served by the sparse ``lockId`` index."""
    return {"lockId": lock_id}


def claim_from_read_back(request: ClaimRequest, doc: Mapping[str, Any]) -> ClaimedJob:
    """The claimed job from the document read back by ``lockId`` (sorted path)."""
    return ClaimedJob(
        job_id=str(doc["_id"]),
        execution_id=request.lock_id,
        job_name=str(doc["jobName"]),
        type=_job_type(doc.get("type")),
        params=_params(doc),
        tries=_int(doc.get("tries"), 1),
        priority=_int(doc.get("priority"), 0),
        locked_until=to_millis(request.locked_until),
        partition=_optional_int(doc.get("partition")),
        unique_identifier=_optional_str(doc.get("uniqueIdentifier")),
        was_stale=bool(doc.get("claimWasStale", False)),
        last_run_at=to_millis(request.now),
        next_run_at=doc.get("nextRunAt"),
    )


def claim_from_before_image(request: ClaimRequest, before: Mapping[str, Any]) -> ClaimedJob:
    """The claimed job from the image ``findOneAndUpdate`` returned (before the update):
    ``tries`` is the old value plus one, ``was_stale`` whether the record was locked before."""
    return ClaimedJob(
        job_id=str(before["_id"]),
        execution_id=request.lock_id,
        job_name=str(before["jobName"]),
        type=_job_type(before.get("type")),
        params=_params(before),
        tries=_int(before.get("tries"), 0) + 1,
        priority=_int(before.get("priority"), 0),
        locked_until=to_millis(request.locked_until),
        partition=_optional_int(before.get("partition")),
        unique_identifier=_optional_str(before.get("uniqueIdentifier")),
        was_stale=before.get("lockedUntil") is not None,
        last_run_at=to_millis(request.now),
        next_run_at=before.get("nextRunAt"),
    )


# --------------------------------------------------------------------------------------------
# Batch claims (``claim_many``)
# --------------------------------------------------------------------------------------------

#: The projection of the candidate scan of ``claim_many``: ids only.
CLAIM_CANDIDATE_PROJECTION: Final[Mapping[str, int]] = {"_id": 1}

#: The index of each per-candidate update of ``claim_many``: its filter names one ``_id``, so
#: the ``_id`` index finds the one document at once (never a scan of the partition's index).
CLAIM_MANY_UPDATE_HINT: Final[Mapping[str, int]] = {"_id": 1}


@dataclass(frozen=True, slots=True)
class CandidateQuery:
    """The candidate scan of ``claim_many``: ``find(filter, projection).sort(sort).hint(hint)
    .limit(limit)``, on the primary."""

    filter: dict[str, Any]
    projection: dict[str, int]
    sort: list[tuple[str, int]]
    hint: dict[str, int]
    limit: int


def claim_candidates_query(request: ClaimRequest, limit: int) -> CandidateQuery:
    """The ids of the ``limit`` best eligible records of ``request``'s partition, in claim
    order, through the request's hint (the same filter, sort and hint as a single claim)."""
    if limit < 1:
        raise ValueError(f"limit={limit!r}: must be at least 1")
    return CandidateQuery(
        filter=eligible_filter(request.job_names, request.partition, request.now),
        projection=dict(CLAIM_CANDIDATE_PROJECTION),
        sort=list(CLAIM_SORT.items()),
        hint=hint_spec(request.hint),
        limit=limit,
    )


def claim_many_updates(
    candidate_ids: Sequence[Any], requests: Sequence[ClaimRequest]
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The ``(filter, pipeline update)`` of each candidate, candidate ``i`` locked for
    ``requests[i]`` (``len(candidate_ids) <= len(requests)``; the requests agree on everything
    but their lock id). Each filter repeats the eligibility selector next to the ``_id``, so a
    candidate another claimer took since the scan is simply not matched; the update is the
    pipeline of the sorted claim (``tries`` +1, ``claimWasStale`` from the previous lock), which
    every server since MongoDB 4.2 accepts."""
    if len(candidate_ids) > len(requests):
        raise ValueError(f"{len(candidate_ids)} candidates for {len(requests)} requests")
    if not candidate_ids:
        return []
    first = requests[0]
    eligible = eligible_filter(first.job_names, first.partition, first.now)
    return [
        ({**eligible, "_id": candidate_id}, claim_update_pipeline(request))
        for candidate_id, request in zip(candidate_ids, requests, strict=False)
    ]


def lock_ids_filter(lock_ids: Sequence[str]) -> dict[str, Any]:
    """The read-back of a batch claim, served by the sparse ``lockId`` index."""
    return {"lockId": {"$in": list(lock_ids)}}


def claims_from_read_back(
    requests: Sequence[ClaimRequest], documents: Sequence[Mapping[str, Any]]
) -> list[ClaimedJob]:
    """The claimed jobs of a batch claim, from the documents read back by their lock ids: one
    per request whose lock id a document carries, in the order of ``requests`` (the candidate
    order). A request whose lock id no document carries claimed nothing."""
    by_lock_id = {str(doc["lockId"]): doc for doc in documents if doc.get("lockId") is not None}
    return [
        claim_from_read_back(request, by_lock_id[request.lock_id])
        for request in requests
        if request.lock_id in by_lock_id
    ]


# --------------------------------------------------------------------------------------------
# Fenced writes (§3.16) and their updates
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


def extend_lock_update(locked_until: datetime) -> dict[str, Any]:
    return {"$set": {"lockedUntil": to_millis(locked_until)}}


def reschedule_update(
    *, next_run_at: datetime, priority: int | None, reset_tries: bool
) -> dict[str, Any]:
    """Set the next run (and priority, and ``tries = 0``) and release the lock."""
    to_set: dict[str, Any] = {"nextRunAt": to_millis(next_run_at)}
    if priority is not None:
        to_set["priority"] = _require_int("priority", priority)
    if reset_tries:
        to_set["tries"] = 0
    return {"$set": to_set, "$unset": dict(_LOCK_FIELDS_UNSET)}


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
    """``lockedUntil = now``; ``lockId`` is kept so late writes still fail their fence."""
    return {"$set": {"lockedUntil": to_millis(now)}}


def unlock_all_filter() -> dict[str, Any]:
    return {"$or": [{"lockedUntil": {"$exists": True}}, {"lockId": {"$exists": True}}]}


def unlock_all_update() -> dict[str, Any]:
    return {"$unset": dict(_LOCK_FIELDS_UNSET)}


# --------------------------------------------------------------------------------------------
# Scheduling (§1.4, §3.13) and recurrent bootstrap (§3.8)
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
    return doc


def document_from_record(record: JobRecord) -> dict[str, Any]:
    """The stored document of a whole record (tests and migrations seed raw records with it):
    Dogs' field names, fields that are ``None`` left out (``params`` is stored as ``null``)."""
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
    ]
    for name, value in optional:
        if value is not None or name == "params":
            doc[name] = value
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
# Probe (§3.11)
# --------------------------------------------------------------------------------------------


def probe_explain_command(
    collection: str, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
) -> dict[str, Any]:
    """``explain`` of ``find(selector).sort(claim order).hint(h).limit(1)`` with executionStats
    and ``maxTimeMS`` 1000, as Dogs sends it."""
    return {
        "explain": {
            "find": collection,
            "filter": eligible_filter(job_names, partition, now),
            "sort": dict(CLAIM_SORT),
            "hint": hint_spec(hint),
            "limit": 1,
            "maxTimeMS": PROBE_MAX_TIME_MS,
        },
        "verbosity": "executionStats",
    }


def probe_execution_millis(explain_result: Mapping[str, Any]) -> float:
    """``executionStats.executionTimeMillis`` of an explain result; ``ValueError`` when it is
    missing or not a finite number."""
    stats = explain_result.get("executionStats")
    value = stats.get("executionTimeMillis") if isinstance(stats, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"explain returned no executionStats.executionTimeMillis ({value!r})")
    millis = float(value)
    if not math.isfinite(millis) or millis < 0:
        raise ValueError(f"explain returned a non-finite executionTimeMillis ({value!r})")
    return millis


# --------------------------------------------------------------------------------------------
# Partition reconciler (§3.5)
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
# Retention of terminal event jobs (§3.15)
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


# --------------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------------


def find_jobs_filter(job_name: str | None) -> dict[str, Any]:
    return {} if job_name is None else {"jobName": job_name}


def find_jobs_sort() -> list[tuple[str, int]]:
    """Claim order, then ``_id`` (UUIDv7: insertion order) so that ties are deterministic."""
    return [("priority", -1), ("nextRunAt", 1), ("_id", 1)]


def get_executions_sort() -> list[tuple[str, int]]:
    """Newest first, served by the ``{jobName: 1, startedAt: 1}`` index read backwards."""
    return [("startedAt", -1)]


def status_counts_pipeline(now: datetime) -> list[dict[str, Any]]:
    """One aggregation giving, per job name: due, scheduled later, running (lock held), stale
    (lock expired, not yet reclaimed), terminal, and the oldest due ``nextRunAt``.

    Each record counts once: terminal first, then running, then stale, then due or later.
    """
    terminal = {
        "$and": [
            {"$eq": ["$type", JobType.EVENT.value]},
            {"$eq": ["$status", JobStatus.MAX_TRIES_REACHED.value]},
        ]
    }
    has_lock = {"$eq": [{"$type": "$lockedUntil"}, "date"]}
    running = {"$and": [has_lock, {"$gt": ["$lockedUntil", now]}]}
    due = {"$lte": ["$nextRunAt", now]}
    state = {
        "$switch": {
            "branches": [
                {"case": terminal, "then": "terminal"},
                {"case": running, "then": "running"},
                {"case": has_lock, "then": "stale"},
                {"case": due, "then": "due"},
            ],
            "default": "later",
        }
    }

    def count(name: str) -> dict[str, Any]:
        return {"$sum": {"$cond": [{"$eq": ["$state", name]}, 1, 0]}}

    return [
        {"$project": {"jobName": 1, "nextRunAt": 1, "state": state}},
        {
            "$group": {
                "_id": "$jobName",
                "due": count("due"),
                "later": count("later"),
                "running": count("running"),
                "stale": count("stale"),
                "terminal": count("terminal"),
                "oldestDueAt": {
                    "$min": {"$cond": [{"$eq": ["$state", "due"]}, "$nextRunAt", None]}
                },
            }
        },
        {"$sort": {"_id": 1}},
    ]


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


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def record_from_document(doc: Mapping[str, Any]) -> JobRecord:
    """A stored record (from Dogs or from us) as a :class:`JobRecord`. Numbers stored as BSON
    doubles by other writers are read as ``int``; a missing ``status`` is pending (``None``)."""
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
    )


# --------------------------------------------------------------------------------------------
# Small coercions
# --------------------------------------------------------------------------------------------


def _job_type(value: Any) -> JobType:
    if value is None:
        return JobType.EVENT
    return JobType(value)


def _params(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    params = doc.get("params")
    return params if isinstance(params, Mapping) else None


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    return int(value)


def _optional_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _require_int(name: str, value: int) -> int:
    """BSON int, never double: integral floats are converted, anything else is refused."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"{name} must be an int, got {value!r}")
