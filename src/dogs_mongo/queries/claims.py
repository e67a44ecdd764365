"""Claims: hints, the eligibility selector, single claims and ``claim_many``'s commands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.claimable import (
    CLAIMABLE,
    LOCK_FREE,
    NOT_FAILED,
    ClaimInput,
    Clause,
    Equals,
    NotAfter,
    NotAll,
    OneOf,
)
from dogs_core.domain.records import ClaimedJob, ClaimRequest, PreviousAttempt, to_millis
from dogs_mongo.queries.common import (
    CLAIM_SORT,
    HELD_FIELD,
    _hold,
    _int,
    _job_type,
    _optional_datetime,
    _optional_int,
    _optional_str,
    _owner,
    _owner_document,
    _params,
    _trace_context,
    _workflow,
)
from dogs_mongo.queries.indexes import RECORD_INDEXES
from dogs_mongo.queries.shaping import claimed_extras

# --------------------------------------------------------------------------------------------
# Claim paths
# --------------------------------------------------------------------------------------------

#: Let the store choose once: the sorted ``updateOne`` on MongoDB 8, ``findOneAndUpdate`` else.
CLAIM_PATH_AUTO: Final = "auto"
#: MongoDB 8's ``updateOne`` with ``sort``, then a read-back by lock id.
CLAIM_PATH_SORTED_UPDATE_ONE: Final = "sorted_update_one"
#: ``findOneAndUpdate`` returning the document before the update (every MongoDB version).
CLAIM_PATH_FIND_ONE_AND_UPDATE: Final = "find_one_and_update"
#: Every ``claim_path`` option of the Mongo stores and the container, ``"auto"`` first.
CLAIM_PATHS: Final = (CLAIM_PATH_AUTO, CLAIM_PATH_SORTED_UPDATE_ONE, CLAIM_PATH_FIND_ONE_AND_UPDATE)

# --------------------------------------------------------------------------------------------
# Hints
# --------------------------------------------------------------------------------------------

HINT_BY_JOB_NAME: Final = "byJobName"
HINT_GLOBAL_PRIORITY: Final = "globalPriority"

#: The two acquisition hints of Dogs, as the key documents Dogs sends
#: (docs/concepts.md#the-adaptive-index-hint).
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


#: The index name of each hint (what ``listIndexes`` shows).
HINT_INDEX_NAMES: Final[Mapping[str, str]] = {
    HINT_BY_JOB_NAME: RECORD_INDEXES[1].name,
    HINT_GLOBAL_PRIORITY: RECORD_INDEXES[0].name,
}


def available_hint(hint: str, missing: frozenset[str] | set[str]) -> str | None:
    """The hint a claim asking for ``hint`` carries when the indexes of the hints in
    ``missing`` do not exist: ``hint`` itself, else the other claim index, else none (the
    planner chooses; slower, still right)."""
    name = _HINT_ALIASES.get(hint, hint)
    if name not in HINTS:
        hint_spec(hint)  # raises the ValueError that names the known hints
    if name not in missing:
        return name
    other = HINT_GLOBAL_PRIORITY if name == HINT_BY_JOB_NAME else HINT_BY_JOB_NAME
    return None if other in missing else other


def missing_hints(ready_index_names: set[str] | frozenset[str]) -> set[str]:
    """The hints whose index is not among ``ready_index_names``."""
    return {hint for hint, index in HINT_INDEX_NAMES.items() if index not in ready_index_names}


# --------------------------------------------------------------------------------------------
# Eligibility (docs/concepts.md#the-claim): the claimable rule of the domain, in Dogs' words
# --------------------------------------------------------------------------------------------

#: The stored name (Dogs') of each record field the claimable rule reads.
_STORED_FIELDS: Final[Mapping[str, str]] = {
    "partition": "partition",
    "job_name": "jobName",
    "next_run_at": "nextRunAt",
    "locked_until": "lockedUntil",
    "type": "type",
    "status": "status",
}


def _condition(clause: Clause, given: Mapping[ClaimInput, Any]) -> tuple[str | None, Any]:
    """One clause of :data:`~dogs_core.domain.claimable.CLAIMABLE` as MongoDB says it, with the
    claim's inputs ``given``: a ``(field, condition)`` pair, or ``(None, expression)`` for a
    clause over more than one field or value (an ``$and`` member)."""
    match clause:
        case Equals(field=field, given=name):
            return _STORED_FIELDS[field], given[name]
        case OneOf(field=field, given=name):
            return _STORED_FIELDS[field], {"$in": list(given[name])}
        case NotAfter(field=field, given=name, or_missing=False):
            return _STORED_FIELDS[field], {"$lte": given[name]}
        case NotAfter(field=field, given=name, or_missing=True):
            stored = _STORED_FIELDS[field]
            moment = given[name]
            return None, {"$or": [{stored: {"$exists": False}}, {stored: {"$lte": moment}}]}
        case NotAll(clauses=clauses):
            # De Morgan: some field differs. A missing field differs too, so a record without
            # a ``type`` is never failed here, as Node Dogs sends it (the state filters read a
            # missing type as an event: dogs_mongo.queries.states.failed_filter).
            return None, {
                "$or": [{_STORED_FIELDS[c.field]: {"$ne": c.value.value}} for c in clauses]
            }
    raise AssertionError(f"no MongoDB form for the clause {clause!r}")  # pragma: no cover


def _clause_filter(clause: Clause, given: Mapping[ClaimInput, Any]) -> dict[str, Any]:
    """One clause as a filter document of its own."""
    field, condition = _condition(clause, given)
    return condition if field is None else {field: condition}


def _lock_free(now: datetime) -> dict[str, Any]:
    return _clause_filter(LOCK_FREE, {ClaimInput.NOW: to_millis(now)})


def _not_terminal() -> dict[str, Any]:
    return _clause_filter(NOT_FAILED, {})


def eligible_filter(job_names: Sequence[str], partition: int, now: datetime) -> dict[str, Any]:
    """The selector of every claim and probe: :data:`~dogs_core.domain.claimable.CLAIMABLE`
    translated clause by clause, which gives key for key what Dogs sends (the single-field
    clauses as top-level keys in the rule's order, then ``$and`` of the others). ``now`` is
    truncated to the millisecond as BSON stores it (stored dates are whole milliseconds, so
    eligibility is the same).

    Two shapes no writer of ours leaves are not what
    :func:`~dogs_core.domain.claimable.is_claimable` says of the record read back: a
    ``lockedUntil: null`` (neither missing nor a date) is never claimable, and a record without
    a ``type`` is claimable in status ``maxTriesReached``."""
    given = {
        ClaimInput.PARTITION: partition,
        ClaimInput.JOB_NAMES: job_names,
        ClaimInput.NOW: to_millis(now),
    }
    selector: dict[str, Any] = {}
    compound: list[Any] = []
    for clause in CLAIMABLE:
        field, condition = _condition(clause, given)
        if field is None:
            compound.append(condition)
        else:
            selector[field] = condition
    if compound:
        selector["$and"] = compound
    return selector


# --------------------------------------------------------------------------------------------
# Claims (docs/concepts.md#the-claim)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimCommand:
    """The arguments of one claim write (either path)."""

    filter: dict[str, Any]
    update: dict[str, Any] | list[dict[str, Any]]
    sort: dict[str, int]
    hint: dict[str, int] | None


def released_expression() -> dict[str, Any]:
    """The aggregation expression "the last lock was given back": ``lockReleasedAt`` is a date
    not before ``lockedUntil`` (:attr:`JobRecord.lock_released`). ``release_lock`` writes both
    to the same time; a later claim (ours or a Node worker's) moves ``lockedUntil`` past it."""
    return {
        "$and": [
            {"$eq": [{"$type": "$lockReleasedAt"}, "date"]},
            {"$gte": ["$lockReleasedAt", "$lockedUntil"]},
        ]
    }


def stale_lock_expression() -> dict[str, Any]:
    """The aggregation expression "a lock was left, not given back": ``lockedUntil`` is a date
    and the lock was not released. On an eligible record (its lock expired) it says whether a
    claim takes over a dead attempt (``claimWasStale``)."""
    return {
        "$and": [
            {"$eq": [{"$type": "$lockedUntil"}, "date"]},
            {"$not": [released_expression()]},
        ]
    }


def _stale_attempt_expression(stale: Mapping[str, Any]) -> dict[str, Any]:
    """``staleAttempt``: the lock a stale claim takes over, read from the document before the
    claim (missing fields are left out); removed when the claim is not stale."""
    attempt = {
        "executionId": "$lockId",
        "startedAt": "$lastRunAt",
        "lockedUntil": "$lockedUntil",
        "tries": {"$ifNull": ["$tries", 0]},
        "owner": "$lockOwner",
    }
    return {"$cond": [stale, attempt, "$$REMOVE"]}


def claim_update_pipeline(request: ClaimRequest) -> list[dict[str, Any]]:
    """The pipeline update of the pipeline claims (``claim_many`` and MongoDB 8's sorted
    ``updateOne``).

    One ``$set`` stage: its expressions all read the document as it was before the stage, so
    ``claimWasStale`` and ``staleAttempt`` see the previous lock. Besides Dogs' fields it writes
    ``lockOwner`` (removed when the request has no owner), removes ``lockReleasedAt``, and
    writes ``staleAttempt`` only when the claim takes over a lock that was not released.
    """
    owner = _owner_document(request.owner, lock_id=request.lock_id)
    stale = stale_lock_expression()
    return [
        {
            "$set": {
                "lockId": {"$literal": request.lock_id},
                "lockedUntil": to_millis(request.locked_until),
                "lastRunAt": to_millis(request.now),
                "tries": {"$add": [{"$ifNull": ["$tries", 0]}, 1]},
                "claimWasStale": stale,
                "staleAttempt": _stale_attempt_expression(stale),
                "lockOwner": "$$REMOVE" if owner is None else {"$literal": owner},
                "lockReleasedAt": "$$REMOVE",
            }
        }
    ]


def claim_update(request: ClaimRequest) -> dict[str, Any]:
    """The classic update of the ``findOneAndUpdate`` claim (returnDocument: before): Dogs'
    ``$set`` and ``$inc``, plus ``lockOwner``; the ``$unset`` removes ``lockReleasedAt`` (and
    ``lockOwner`` when the request has none, and the ``staleAttempt`` of an earlier pipeline
    claim: this path reads the previous attempt from its before-image)."""
    to_set: dict[str, Any] = {
        "lockId": request.lock_id,
        "lockedUntil": to_millis(request.locked_until),
        "lastRunAt": to_millis(request.now),
    }
    to_unset = {"lockReleasedAt": "", "staleAttempt": ""}
    owner = _owner_document(request.owner, lock_id=request.lock_id)
    if owner is None:
        to_unset["lockOwner"] = ""
    else:
        to_set["lockOwner"] = owner
    return {"$set": to_set, "$inc": {"tries": 1}, "$unset": to_unset}


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
    """The claimed job from the document read back by ``lockId`` (the pipeline claims):
    ``tries`` and ``was_stale`` as the claim wrote them, the previous attempt from the
    ``staleAttempt`` it wrote."""
    was_stale = bool(doc.get("claimWasStale", False))
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
        was_stale=was_stale,
        last_run_at=to_millis(request.now),
        next_run_at=doc.get("nextRunAt"),
        owner=request.owner,
        previous_attempt=_previous_attempt(doc.get("staleAttempt")) if was_stale else None,
        trace_context=_trace_context(doc),
        workflow=_workflow(doc),
        **claimed_extras(doc),
        held_since=held_since(doc),
    )


def claim_from_before_image(request: ClaimRequest, before: Mapping[str, Any]) -> ClaimedJob:
    """The claimed job from the image ``findOneAndUpdate`` returned (before the update):
    ``tries`` is the old value plus one; ``was_stale`` whether the record had a lock that was
    not released (:func:`was_stale_before`), and then its ``previous_attempt`` is that lock."""
    was_stale = was_stale_before(before)
    previous = None
    if was_stale:
        previous = _previous_attempt(
            {
                "executionId": before.get("lockId"),
                "startedAt": before.get("lastRunAt"),
                "lockedUntil": before.get("lockedUntil"),
                "tries": before.get("tries") or 0,
                "owner": before.get("lockOwner"),
            }
        )
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
        was_stale=was_stale,
        last_run_at=to_millis(request.now),
        next_run_at=before.get("nextRunAt"),
        owner=request.owner,
        previous_attempt=previous,
        trace_context=_trace_context(before),
        workflow=_workflow(before),
        **claimed_extras(before),
        held_since=held_since(before),
    )


def held_since(doc: Mapping[str, Any]) -> datetime | None:
    """The start of the record's hold when it was in force (``heldBack.until`` is the
    ``nextRunAt`` it was claimed at), else ``None``."""
    hold = _hold(doc.get(HELD_FIELD))
    return hold.since if hold is not None and hold.until == doc.get("nextRunAt") else None


def was_stale_before(before: Mapping[str, Any]) -> bool:
    """:func:`stale_lock_expression` on a document: a ``lockedUntil`` that was not released."""
    locked_until = _optional_datetime(before.get("lockedUntil"))
    if locked_until is None:
        return False
    released_at = _optional_datetime(before.get("lockReleasedAt"))
    return released_at is None or released_at < locked_until


def _previous_attempt(value: Any) -> PreviousAttempt | None:
    """The :class:`PreviousAttempt` of a ``staleAttempt`` document; ``None`` when it cannot say
    which execution held the lock (a lock without ``lockId``: a pre-4.6 Node worker's)."""
    if not isinstance(value, Mapping):
        return None
    execution_id = value.get("executionId")
    locked_until = _optional_datetime(value.get("lockedUntil"))
    if not isinstance(execution_id, str) or locked_until is None:
        return None
    return PreviousAttempt(
        execution_id=execution_id,
        started_at=_optional_datetime(value.get("startedAt")),
        locked_until=locked_until,
        tries=_optional_int(value.get("tries")) or 0,
        owner=_owner(value.get("owner"), lock_id=execution_id),
    )


# --------------------------------------------------------------------------------------------
# Batch claims (``claim_many``)
# --------------------------------------------------------------------------------------------

#: The fields of a record that change after its insert and that a claimed job is read from:
#: ``claim_many`` locks a candidate only while every one of them is as its scan read it, so the
#: claimed job is built from the scan (its before-image), with no read-back. The others never
#: change (``jobName``, ``params``...) or change only with ``lockId`` (``lastRunAt``,
#: ``lockOwner``, ``staleAttempt``: written by claims).
SNAPSHOT_FIELDS: Final = (
    "lockId",
    "lockedUntil",
    "lockReleasedAt",
    "tries",
    "nextRunAt",
    "priority",
    "status",
    "type",
    "partition",
)

#: The index of each per-candidate update of ``claim_many``: its filter names one ``_id``, so
#: the ``_id`` index finds the one document at once (never a scan of the partition's index).
CLAIM_MANY_UPDATE_HINT: Final[Mapping[str, int]] = {"_id": 1}


@dataclass(frozen=True, slots=True)
class CandidateQuery:
    """The candidate scan of ``claim_many``: ``find(filter).sort(sort).hint(hint)
    .limit(limit)``, on the primary: whole documents (each is its claim's before-image)."""

    filter: dict[str, Any]
    sort: list[tuple[str, int]]
    hint: dict[str, int] | None
    limit: int


def claim_candidates_query(request: ClaimRequest, limit: int) -> CandidateQuery:
    """The ``limit`` best eligible records of ``request``'s partition, in claim order, through
    the request's hint (the same filter, sort and hint as a single claim)."""
    if limit < 1:
        raise ValueError(f"limit={limit!r}: must be at least 1")
    return CandidateQuery(
        filter=eligible_filter(request.job_names, request.partition, request.now),
        sort=list(CLAIM_SORT.items()),
        hint=hint_spec(request.hint),
        limit=limit,
    )


def unchanged_filter(candidate: Mapping[str, Any]) -> dict[str, Any]:
    """Record ``candidate["_id"]`` while every field of :data:`SNAPSHOT_FIELDS` is as in
    ``candidate`` (a missing one still missing, or null). The candidate was eligible when it was
    read, at the request's ``now``: unchanged, it still is, and its claim is exactly the one
    :func:`claim_from_before_image` computes from it."""
    selector: dict[str, Any] = {"_id": candidate["_id"]}
    for field in SNAPSHOT_FIELDS:
        selector[field] = candidate.get(field)
    return selector


def claim_many_updates(
    candidates: Sequence[Mapping[str, Any]], requests: Sequence[ClaimRequest]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``(filter, update)`` of each candidate, candidate ``i`` locked for ``requests[i]``
    (``len(candidates) <= len(requests)``; the requests agree on everything but their lock id).
    Each filter is :func:`unchanged_filter`, so a candidate another writer changed since the scan
    (another claimer took it, an operator moved it) is simply not matched; the update is
    :func:`claim_update_from_snapshot`: what the sorted claim's pipeline would compute from the
    record, computed here from the candidate it must still equal."""
    if len(candidates) > len(requests):
        raise ValueError(f"{len(candidates)} candidates for {len(requests)} requests")
    return [
        (unchanged_filter(candidate), claim_update_from_snapshot(candidate, request))
        for candidate, request in zip(candidates, requests, strict=False)
    ]


def claim_update_from_snapshot(
    candidate: Mapping[str, Any], request: ClaimRequest
) -> dict[str, Any]:
    """The classic update that claims ``candidate`` for ``request`` when the record is still
    as ``candidate`` reads: the fields :func:`claim_update_pipeline` writes (``tries`` +1 by
    ``$inc``, which keeps its stored number type; ``claimWasStale`` and ``staleAttempt`` from
    the previous lock, :func:`was_stale_before`), with none of its server-side expressions."""
    stale = was_stale_before(candidate)
    to_set: dict[str, Any] = {
        "lockId": request.lock_id,
        "lockedUntil": to_millis(request.locked_until),
        "lastRunAt": to_millis(request.now),
        "claimWasStale": stale,
    }
    to_unset = {"lockReleasedAt": ""}
    if stale:
        attempt = {
            "executionId": candidate.get("lockId"),
            "startedAt": candidate.get("lastRunAt"),
            "lockedUntil": candidate.get("lockedUntil"),
            "tries": candidate.get("tries") or 0,
            "owner": candidate.get("lockOwner"),
        }
        to_set["staleAttempt"] = {k: v for k, v in attempt.items() if v is not None}
    else:
        to_unset["staleAttempt"] = ""
    owner = _owner_document(request.owner, lock_id=request.lock_id)
    if owner is None:
        to_unset["lockOwner"] = ""
    else:
        to_set["lockOwner"] = owner
    return {"$set": to_set, "$inc": {"tries": 1}, "$unset": to_unset}


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


#: MongoDB 8.0: ``updateOne`` accepts ``sort``.
SORTED_UPDATE_MIN_WIRE_VERSION: Final = 25

CLAIM_MANY_ROUNDS = 4  # finds of claim_many while other claimers take every candidate first

#: While a claim index is missing, how often (seconds) the claims list the indexes again.
CLAIM_INDEX_RECHECK_SECONDS: Final = 60.0


def choose_claim_path(
    max_wire_version: int, has_lock_id_index: bool, option: str = CLAIM_PATH_AUTO
) -> str:
    """The claim implementation: the sorted ``updateOne`` needs MongoDB 8 (wire version 25) and
    the sparse ``lockId`` index its read-back uses; anything else uses ``findOneAndUpdate``."""
    if option != CLAIM_PATH_AUTO:
        return option
    if max_wire_version >= SORTED_UPDATE_MIN_WIRE_VERSION and has_lock_id_index:
        return CLAIM_PATH_SORTED_UPDATE_ONE
    return CLAIM_PATH_FIND_ONE_AND_UPDATE
