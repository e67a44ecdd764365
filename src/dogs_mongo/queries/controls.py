"""The controls collection (``orionjs.jobs_dogs_controls``, additive: Node Dogs 4.6.8 never reads
it): the documents of pauses, concurrency slots, rate windows and leases, and every filter and
update sent to it. Each document has a ``kind`` and an ``_id`` naming it whole:

``pause``
    ``_id: {pause: <jobName or "*">}``, ``jobName``, ``pausedAt``. Pausing inserts it (a
    duplicate key: already paused); resuming deletes it.
``slot``
    ``_id: {slot: jobName, key, i}``, ``jobName``, ``key``, ``i``, ``holder`` (a lock id or
    ``null``), ``until``, ``purgeAt`` (``until`` + 1 day, the TTL). A slot is taken by one
    ``findOneAndUpdate`` over the ids of the limit's slots, created on demand.
``rate``
    ``_id: {rate: jobName, key, w: window_start}``, ``jobName``, ``key``, ``count``,
    ``purgeAt`` (the window's end + 1 day). A token is one conditional ``$inc`` (an upsert).
``lease``
    ``_id: {lease: name}``, ``owner`` (or ``null`` once released), ``token`` (int64, the
    fencing token, incremented by every acquisition), ``until``. No ``purgeAt``: the token
    sequence must outlive any holder.

The field order of every ``_id`` is fixed here (an embedded document equals another only with
its fields in the same order): build them with these functions only.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bson.int64 import Int64

from dogs_core.domain.controls import Lease
from dogs_core.domain.records import to_millis

DEFAULT_CONTROLS_COLLECTION: Final = "orionjs.jobs_dogs_controls"

KIND_PAUSE: Final = "pause"
KIND_SLOT: Final = "slot"
KIND_RATE: Final = "rate"
KIND_LEASE: Final = "lease"

#: How long a slot or a rate window is kept after its time (``purgeAt``, the TTL index).
PURGE_AFTER: Final = timedelta(days=1)

#: ``until`` of a free slot: before any ``now``.
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

Document = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Pauses
# --------------------------------------------------------------------------------------------


#: The field naming the job of a pause's ``_id`` (the pause feed matches on it).
PAUSE_ID_FIELD: Final = "pause"


def pause_id(job_name: str) -> Document:
    return {PAUSE_ID_FIELD: job_name}


def pause_document(job_name: str, now: datetime) -> Document:
    """The document a pause inserts (``_id`` unique: a second pause is a duplicate key)."""
    return {
        "_id": pause_id(job_name),
        "kind": KIND_PAUSE,
        "jobName": job_name,
        "pausedAt": to_millis(now),
    }


#: Every pause (through the ``{kind, jobName}`` index, covered by this projection).
PAUSED_NAMES_FILTER: Final[Mapping[str, Any]] = {"kind": KIND_PAUSE}
PAUSED_NAMES_PROJECTION: Final[Mapping[str, int]] = {"_id": 0, "jobName": 1}


def paused_names_from_documents(documents: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    return frozenset(
        str(document["jobName"])
        for document in documents
        if isinstance(document.get("jobName"), str)
    )


# --------------------------------------------------------------------------------------------
# Concurrency slots
# --------------------------------------------------------------------------------------------


def slot_id(job_name: str, key: str, index: int) -> Document:
    return {"slot": job_name, "key": key, "i": index}


def slot_ids(job_name: str, key: str, limit: int) -> list[Document]:
    """The ids of the slots ``0 .. limit-1`` of ``(job_name, key)``."""
    return [slot_id(job_name, key, index) for index in range(limit)]


#: How many slots one probe of ``acquire_slot`` looks at before it looks at all of them.
SLOT_WINDOW: Final = 8


def slot_window(limit: int, holder: str) -> list[int]:
    """The indices a holder looks at first: :data:`SLOT_WINDOW` consecutive ones (wrapping)
    from a start given by the holder's id, so concurrent claimers of a large limit mostly aim
    at different documents (one ``$in`` over every slot, all aiming at the same first free one,
    made them conflict), and a holder that asks again looks where it looked before."""
    if limit <= SLOT_WINDOW:
        return list(range(limit))
    start = zlib.crc32(holder.encode()) % limit
    return [(start + offset) % limit for offset in range(SLOT_WINDOW)]


def acquire_slot_filter(
    job_name: str,
    key: str,
    *,
    limit: int,
    holder: str,
    now: datetime,
    indices: Sequence[int] | None = None,
) -> Document:
    """One of the limit's slots (of ``indices`` when given) that is free (no holder, or its
    time ran out at ``now``) or already held by ``holder``."""
    ids = (
        slot_ids(job_name, key, limit)
        if indices is None
        else [slot_id(job_name, key, index) for index in indices]
    )
    return {
        "_id": {"$in": ids},
        "$or": [{"holder": None}, {"until": {"$lte": to_millis(now)}}, {"holder": holder}],
    }


#: The latest ``until`` first: a slot ``holder`` still holds (its ``until`` is after ``now``,
#: every other match's is not) wins over the free ones, so taking it again returns it.
ACQUIRE_SLOT_SORT: Final[tuple[tuple[str, int], ...]] = (("until", -1),)
SLOT_INDEX_PROJECTION: Final[Mapping[str, int]] = {"_id": 0, "i": 1}


def acquire_slot_update(holder: str, until: datetime) -> Document:
    until = to_millis(until)
    return {"$set": {"holder": holder, "until": until, "purgeAt": until + PURGE_AFTER}}


def slot_index(document: Mapping[str, Any]) -> int:
    """The index of a slot document (projected by :data:`SLOT_INDEX_PROJECTION`)."""
    return int(document["i"])


def create_slot_upserts(
    job_name: str, key: str, *, limit: int, now: datetime
) -> list[tuple[Document, Document]]:
    """``(filter, update)`` of the upserts creating the limit's missing slots, free (holder
    ``null``, ``until`` the epoch), kept a day unless taken; existing slots are left alone."""
    purge_at = to_millis(now) + PURGE_AFTER
    return [
        (
            {"_id": slot_id(job_name, key, index)},
            {
                "$setOnInsert": {
                    "kind": KIND_SLOT,
                    "jobName": job_name,
                    "key": key,
                    "i": index,
                    "holder": None,
                    "until": _EPOCH,
                    "purgeAt": purge_at,
                }
            },
        )
        for index in range(limit)
    ]


def held_slot_filter(job_name: str, key: str, index: int, holder: str) -> Document:
    """The slot while ``holder`` holds it (renewal and release are fenced by it)."""
    return {"_id": slot_id(job_name, key, index), "holder": holder}


def renew_slot_update(until: datetime) -> Document:
    until = to_millis(until)
    return {"$set": {"until": until, "purgeAt": until + PURGE_AFTER}}


def release_slot_update() -> Document:
    """Free the slot at once; its ``purgeAt`` (its last ``until`` + 1 day) is kept."""
    return {"$set": {"holder": None, "until": _EPOCH}}


def held_slots_pipeline(now: datetime) -> list[Document]:
    """The number of slots held at ``now`` per job name (every key together)."""
    return [
        {
            "$match": {
                "kind": KIND_SLOT,
                "holder": {"$ne": None},
                "until": {"$gt": to_millis(now)},
            }
        },
        {"$group": {"_id": "$jobName", "held": {"$sum": 1}}},
    ]


def held_slots_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return {str(row["_id"]): int(row["held"]) for row in rows if row.get("_id") is not None}


# --------------------------------------------------------------------------------------------
# Rate windows
# --------------------------------------------------------------------------------------------


def rate_id(job_name: str, key: str, window_start: datetime) -> Document:
    return {"rate": job_name, "key": key, "w": to_millis(window_start)}


def take_rate_token_filter(
    job_name: str, key: str, *, limit: int, window_start: datetime
) -> Document:
    """The window's counter while it is below ``limit``."""
    return {"_id": rate_id(job_name, key, window_start), "count": {"$lt": limit}}


def take_rate_token_update(job_name: str, key: str, *, window_end: datetime) -> Document:
    """Count one start; sent as an upsert, it creates the window's counter at 1 (when the window
    is full, the upsert's insert is a duplicate key)."""
    return {
        "$inc": {"count": 1},
        "$setOnInsert": {
            "kind": KIND_RATE,
            "jobName": job_name,
            "key": key,
            "purgeAt": to_millis(window_end) + PURGE_AFTER,
        },
    }


# --------------------------------------------------------------------------------------------
# Leases
# --------------------------------------------------------------------------------------------


def lease_id(name: str) -> Document:
    return {"lease": name}


def acquire_lease_filter(name: str, now: datetime) -> Document:
    """The lease when nobody holds it (released, or its time ran out at ``now``); sent as an
    upsert, a lease never held is created, and a held one is a duplicate key."""
    return {"_id": lease_id(name), "$or": [{"owner": None}, {"until": {"$lte": to_millis(now)}}]}


def acquire_lease_update(owner: str, until: datetime) -> Document:
    """Take it and increment the fencing token (an int64, 1 on the first acquisition)."""
    return {
        "$set": {"kind": KIND_LEASE, "owner": owner, "until": to_millis(until)},
        "$inc": {"token": Int64(1)},
    }


LEASE_TOKEN_PROJECTION: Final[Mapping[str, int]] = {"_id": 0, "token": 1}


def lease_token(document: Mapping[str, Any]) -> int:
    return int(document["token"])


def held_lease_filter(name: str, owner: str, token: int) -> Document:
    """The lease while ``owner`` holds it under ``token``."""
    return {"_id": lease_id(name), "owner": owner, "token": Int64(token)}


def renew_lease_filter(name: str, owner: str, token: int, now: datetime) -> Document:
    """The lease while ``owner`` holds it under ``token`` and it has not lapsed at ``now``."""
    return {**held_lease_filter(name, owner, token), "until": {"$gt": to_millis(now)}}


def renew_lease_update(until: datetime) -> Document:
    return {"$set": {"until": to_millis(until)}}


def release_lease_update() -> Document:
    """Give the lease back; ``token`` stays, so the next acquisition gets a greater one."""
    return {"$set": {"owner": None}}


def lease_from_document(name: str, document: Mapping[str, Any] | None) -> Lease | None:
    """The stored lease (possibly lapsed), or ``None`` when it is missing or released."""
    if document is None:
        return None
    owner = document.get("owner")
    until = document.get("until")
    if not isinstance(owner, str) or not isinstance(until, datetime):
        return None
    return Lease(name=name, owner=owner, token=int(document["token"]), expires_at=until)
