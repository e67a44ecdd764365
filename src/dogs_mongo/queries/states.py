"""Where a record stands, as MongoDB filters: one builder per :class:`JobState`, each the stored
form of :meth:`JobRecord.state <dogs_core.domain.records.JobRecord.state>`, and the index that
serves it.

:meth:`JobRecord.state` checks in order: ``failed``, ``running``, ``stale``, ``held``,
``sleeping``, ``retrying``, ``due``, ``scheduled``. Each filter below repeats the negation of
every earlier state, so the eight filters split the collection: a record matches exactly one.
The one exception is a lock without a ``lockId`` (written only by Node Dogs before 4.6, which had no
fencing): ``running`` and ``stale`` ask ``{lockId: {$exists: true}}`` so that Dogs' sparse
``lockId`` index serves them, and such a record matches no state until its lock is cleared.

Indexes: ``failed`` has its own partial index (``jobs_dogs_records_failed``); ``running`` and
``stale`` walk the sparse ``lockId`` index (only locked records are in it: a few per worker);
``held``, ``sleeping``, ``scheduled``, ``due`` and ``retrying`` page over ``_id`` (``find_jobs``
sorts by ``_id``), the state being checked on each record fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import JobState, JobStatus, JobType, to_millis
from dogs_mongo.queries.claims import released_expression
from dogs_mongo.queries.common import HELD_FIELD, LOCK_ID_INDEX_NAME
from dogs_mongo.queries.indexes import FAILED_INDEX_NAME, RECORD_INDEXES
from dogs_mongo.queries.steps import SLEEPING_FIELD

__all__ = [
    "STATE_FILTERS",
    "failed_filter",
    "not_failed_filter",
    "not_locked_after",
    "state_filter",
    "state_hint",
]

Filter = dict[str, Any]


def failed_filter() -> Filter:
    """``failed``: an event record (a missing ``type`` reads as an event) at its attempt limit.
    Its ``status`` equality is the partial filter of ``jobs_dogs_records_failed``."""
    return {"status": JobStatus.MAX_TRIES_REACHED.value, "type": {"$ne": JobType.RECURRENT.value}}


def not_failed_filter() -> Filter:
    return {"$nor": [failed_filter()]}


def not_locked_after(moment: datetime) -> Filter:
    """No lock live after ``moment``: no ``lockedUntil``, or one not later than it."""
    return {"lockedUntil": {"$not": {"$gt": to_millis(moment)}}}


def _has_lock_id() -> Filter:
    return {"lockId": {"$exists": True}}


def _released() -> Filter:
    return {"$expr": released_expression()}


def _not_released() -> Filter:
    return {"$expr": {"$not": [released_expression()]}}


def _not_locked(now: datetime) -> Filter:
    """Neither running nor stale: no lock, or an expired one that was released."""
    return {
        "$or": [
            {"lockedUntil": None},
            {"$and": [{"lockedUntil": {"$lte": to_millis(now)}}, _released()]},
        ]
    }


def _retried() -> Filter:
    return {"tries": {"$gte": 1}}


def _failed(now: datetime) -> list[Filter]:
    return [failed_filter()]


def _running(now: datetime) -> list[Filter]:
    return [not_failed_filter(), _has_lock_id(), {"lockedUntil": {"$gt": to_millis(now)}}]


def _stale(now: datetime) -> list[Filter]:
    return [
        not_failed_filter(),
        _has_lock_id(),
        {"lockedUntil": {"$lte": to_millis(now)}},
        _not_released(),
    ]


def _holding(now: datetime) -> Filter:
    """A hold in force that is not over: ``heldBack.until`` is the ``nextRunAt``, still ahead."""
    return {
        "nextRunAt": {"$gt": to_millis(now)},
        "$expr": {"$eq": [f"${HELD_FIELD}.until", "$nextRunAt"]},
    }


def _not_holding(now: datetime) -> Filter:
    return {"$nor": [_holding(now)]}


def _held(now: datetime) -> list[Filter]:
    return [not_failed_filter(), _not_locked(now), _holding(now)]


def _sleeping_in_force(now: datetime) -> Filter:
    """A durable sleep in force that is not over: ``sleepingUntil`` is the ``nextRunAt``, still
    ahead."""
    return {
        "nextRunAt": {"$gt": to_millis(now)},
        "$expr": {"$eq": [f"${SLEEPING_FIELD}", "$nextRunAt"]},
    }


def _not_sleeping(now: datetime) -> Filter:
    return {"$nor": [_sleeping_in_force(now)]}


def _sleeping(now: datetime) -> list[Filter]:
    return [not_failed_filter(), _not_locked(now), _not_holding(now), _sleeping_in_force(now)]


def _retrying(now: datetime) -> list[Filter]:
    return [
        not_failed_filter(),
        _not_locked(now),
        _not_holding(now),
        _not_sleeping(now),
        _retried(),
    ]


def _due(now: datetime) -> list[Filter]:
    return [
        not_failed_filter(),
        _not_locked(now),
        {"$nor": [_retried()]},
        {"nextRunAt": {"$lte": to_millis(now)}},
    ]


def _scheduled(now: datetime) -> list[Filter]:
    return [
        not_failed_filter(),
        _not_locked(now),
        _not_holding(now),
        _not_sleeping(now),
        {"$nor": [_retried()]},
        {"$nor": [{"nextRunAt": {"$lte": to_millis(now)}}]},
    ]


#: The conditions of each state at ``now`` (all of them must hold).
STATE_FILTERS: Final[Mapping[JobState, Callable[[datetime], list[Filter]]]] = {
    JobState.FAILED: _failed,
    JobState.RUNNING: _running,
    JobState.STALE: _stale,
    JobState.HELD: _held,
    JobState.SLEEPING: _sleeping,
    JobState.RETRYING: _retrying,
    JobState.DUE: _due,
    JobState.SCHEDULED: _scheduled,
}

_FAILED_INDEX_KEYS: Final = next(s for s in RECORD_INDEXES if s.name == FAILED_INDEX_NAME)
_LOCK_ID_INDEX_KEYS: Final = next(s for s in RECORD_INDEXES if s.name == LOCK_ID_INDEX_NAME)


def state_filter(state: JobState, now: datetime) -> list[Filter]:
    """The conditions a record in ``state`` at ``now`` meets (to be ``$and``-ed)."""
    return STATE_FILTERS[JobState(state)](now)


def state_hint(state: JobState | None) -> dict[str, int]:
    """The index that serves the records of ``state``: see the module documentation."""
    if state is JobState.FAILED:
        return _FAILED_INDEX_KEYS.key_document
    if state in (JobState.RUNNING, JobState.STALE):
        return _LOCK_ID_INDEX_KEYS.key_document
    return {"_id": 1}
