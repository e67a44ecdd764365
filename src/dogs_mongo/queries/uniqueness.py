"""The uniqueness role's documents: holds of unique keys in their own collection (additive,
docs/differences.md) and the compare-and-set filters on records (see
:mod:`dogs_core.ports.uniqueness`).

A hold is ``{_id: <key>, jobId, expiresAt}``: the key is taken until ``expiresAt``, after which
the TTL index removes the document (within a minute; every read compares ``expiresAt`` with the
time itself, so a late removal changes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import to_millis
from dogs_core.domain.uniqueness import HoldState, PendingUpdate, UniqueHold
from dogs_mongo.queries.indexes import IndexSpec
from dogs_mongo.queries.states import not_failed_filter, not_locked_after

__all__ = [
    "DEFAULT_UNIQUE_KEYS_COLLECTION",
    "UNIQUE_KEY_INDEXES",
    "extend_hold_update",
    "hold_from_document",
    "holding_filter",
    "parked_filter",
    "pending_update",
    "publish_update",
    "take_hold_filter",
    "take_hold_update",
]

DEFAULT_UNIQUE_KEYS_COLLECTION: Final = "orionjs.jobs_dogs_unique_keys"

UNIQUE_KEY_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec(
        "jobs_dogs_unique_keys_expires_at_ttl", (("expiresAt", 1),), {"expireAfterSeconds": 0}
    ),
)

Document = dict[str, Any]


def hold_from_document(doc: Mapping[str, Any] | None) -> UniqueHold | None:
    if doc is None or not isinstance(doc.get("expiresAt"), datetime):
        return None
    return UniqueHold(key=str(doc["_id"]), job_id=str(doc.get("jobId")), until=doc["expiresAt"])


def take_hold_filter(key: str, now: datetime) -> Document:
    """A hold of ``key`` that no longer lasts (matched: taken over; absent: the upsert inserts
    it; live: the upsert's insert fails on ``_id``)."""
    return {"_id": key, "expiresAt": {"$lte": to_millis(now)}}


def take_hold_update(job_id: str, until: datetime) -> Document:
    return {"$set": {"jobId": job_id, "expiresAt": to_millis(until)}}


def extend_hold_update(job_id: str, until: datetime) -> Document:
    """At least until ``until`` (a later time already stored is kept)."""
    return {"$set": {"jobId": job_id}, "$max": {"expiresAt": to_millis(until)}}


def _not_parked() -> Document:
    return {"parkedAt": {"$exists": False}}


def holding_filter(
    job_id: str | None, identifier: str, state: HoldState, now: datetime
) -> Document:
    """Record ``job_id`` (``None``: any) holding ``identifier`` (Dogs' unique index finds it),
    not parked, and in ``state`` at ``now`` (:func:`~dogs_core.domain.uniqueness.hold_state`'s
    rule)."""
    conditions: list[Document] = [_not_parked()]
    if state is HoldState.FAILED:
        conditions.append({"$nor": [not_failed_filter()]})
    else:
        conditions.append(not_failed_filter())
        if state is HoldState.RUNNING:
            conditions.append({"lockedUntil": {"$gt": to_millis(now)}})
        else:
            conditions.append(not_locked_after(now))
    holder: Document = {} if job_id is None else {"_id": job_id}
    return {**holder, "uniqueIdentifier": identifier, "$and": conditions}


def pending_update(update: PendingUpdate, now: datetime) -> list[Document]:
    """What a replace or a debounce writes, as one pipeline (values as ``$literal``: a params
    string starting with ``$`` is a string, not a field path). A replace's run time is never
    before ``behindUntil``; a debounce's is
    :func:`~dogs_core.domain.uniqueness.debounced_next_run` of the stored ``nextRunAt`` and
    ``debounceUntil``."""
    params = dict(update.params) if isinstance(update.params, Mapping) else None
    fields: Document = {
        "params": {"$literal": params},
        "priority": int(update.priority),
    }
    if update.debounce is None:
        wanted = to_millis(update.next_run_at)  # never before a running record it waits behind
        fields["nextRunAt"] = {"$max": [wanted, {"$ifNull": ["$behindUntil", wanted]}]}
    else:
        pushed = to_millis(now + update.debounce)
        capped = {"$min": [pushed, {"$ifNull": ["$debounceUntil", pushed]}]}
        fields["nextRunAt"] = {"$max": ["$nextRunAt", capped]}
    unset: list[str] = []
    if update.tags:
        fields["tags"] = {"$literal": list(update.tags)}
    else:
        unset.append("tags")
    if update.start_before is not None:
        fields["startBefore"] = to_millis(update.start_before)
    else:
        unset.append("startBefore")
    return [{"$set": fields}, *([{"$unset": unset}] if unset else [])]


def parked_filter(job_id: str, parked_at: datetime) -> Document:
    return {"_id": job_id, "parkedAt": to_millis(parked_at)}


def publish_update(run_at: datetime) -> Document:
    return {"$set": {"nextRunAt": to_millis(run_at)}, "$unset": {"parkedAt": "", "parkedRunAt": ""}}
