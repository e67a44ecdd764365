"""Change streams: the pipelines of the three feeds, and their events turned into port values.

The records feed (``watch_records``) watches the records collection for what may make a record
claimable, and nothing else, so that an instance is not woken by the claims and lock renewals
of the whole fleet:

* ``insert`` of a record of the watched job names (``schedule``, ``schedule_many``'s inserts
  and upserts, ``ensure_recurrent``'s upsert): the event carries the new document, so the
  change knows its job name, partition and next run;
* ``update`` that removes ``lockedUntil`` or ``lockId`` (a reschedule, ``unlock_all``, a Node
  worker's reschedule), that sets ``nextRunAt`` or ``partition`` (the partition reconciler), or
  that sets ``lockedUntil`` to a time not after the event's own cluster time plus
  :data:`RELEASE_SLACK_MS` (a release at shutdown writes ``lockedUntil = now``; a claim or a
  renewal writes a lock time in the future and is not matched). An update marking a record
  ``maxTriesReached`` is not matched (the record is terminal).

An update event carries only the changed fields (no ``fullDocument``: ``updateLookup`` would
cost one read per event for every watching instance), so its job name (and its partition,
unless repaired) is unknown (``None``): the consumer treats it as concerning every instance.
``$project`` keeps the events small: the resume token, and the few fields the change needs.

The history feed (``watch_history``) reports history rows as they are first written: the first
upsert of an execution id is an ``insert`` event, filtered by ``jobId`` and ``jobName``.

The pause feed (``watch_pauses``) watches the controls collection for the inserts (a pause) and
deletes (a resume) of pause documents only, recognised by their ``_id`` (``{pause: name}``,
which a delete event carries in ``documentKey`` too), so that the slots, rate windows and leases
written there all the time wake nobody. The event reports the name only: the consumer reads
the pauses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryRecord, JobStatus
from dogs_core.domain.wakeups import RecordChange
from dogs_mongo.queries.controls import PAUSE_ID_FIELD
from dogs_mongo.queries.history import history_from_document

__all__ = [
    "CHANGE_STREAM_MAX_AWAIT_MS",
    "RELEASE_SLACK_MS",
    "history_change",
    "history_changes_pipeline",
    "pause_change",
    "pause_changes_pipeline",
    "record_change",
    "record_changes_pipeline",
]

#: ``maxAwaitTimeMS`` of the feeds' ``getMore``: an idle feed yields ``[]`` this often.
CHANGE_STREAM_MAX_AWAIT_MS: Final = 1000

#: How far after the event's cluster time a written ``lockedUntil`` still counts as a release
#: (``lockedUntil = now`` on the worker's clock). A lock renewal writes ``now + lock time``: one
#: shorter than this would wake the feed's consumers (harmlessly); a worker clock ahead of the
#: server's by more than this makes a release go unnoticed (the poll finds the record).
RELEASE_SLACK_MS: Final = 1000

_UPDATED = "updateDescription.updatedFields"


def _released_lock() -> dict[str, Any]:
    """An update that wrote a ``lockedUntil`` not after the event's time (plus the slack)."""
    return {
        f"{_UPDATED}.lockedUntil": {"$type": "date"},
        "$expr": {
            "$lte": [
                f"${_UPDATED}.lockedUntil",
                {"$add": [{"$toDate": "$clusterTime"}, RELEASE_SLACK_MS]},
            ]
        },
    }


def record_changes_pipeline(job_names: Sequence[str]) -> list[dict[str, Any]]:
    """The ``watch`` pipeline of the records feed (see the module documentation). No job name
    matches nothing at all (not even the updates, whose job name is unknown)."""
    names = list(dict.fromkeys(job_names))
    if not names:
        return [{"$match": {"operationType": {"$in": []}}}]
    return [
        {
            "$match": {
                "$or": [
                    {"operationType": "insert", "fullDocument.jobName": {"$in": names}},
                    {
                        "operationType": "update",
                        f"{_UPDATED}.status": {"$ne": JobStatus.MAX_TRIES_REACHED.value},
                        "$or": [
                            {"updateDescription.removedFields": {"$in": ["lockedUntil", "lockId"]}},
                            {f"{_UPDATED}.nextRunAt": {"$exists": True}},
                            {f"{_UPDATED}.partition": {"$exists": True}},
                            _released_lock(),
                        ],
                    },
                ]
            }
        },
        {
            "$project": {
                "operationType": 1,
                "fullDocument.jobName": 1,
                "fullDocument.partition": 1,
                "fullDocument.nextRunAt": 1,
                f"{_UPDATED}.nextRunAt": 1,
                f"{_UPDATED}.partition": 1,
            }
        },
    ]


def history_changes_pipeline(
    *, job_ids: Sequence[str] | None, job_names: Sequence[str] | None
) -> list[dict[str, Any]]:
    """The ``watch`` pipeline of the history feed: inserts (first writes), optionally only of
    ``job_ids`` and of ``job_names`` (an empty list matches nothing)."""
    match: dict[str, Any] = {"operationType": "insert"}
    if job_ids is not None:
        match["fullDocument.jobId"] = {"$in": list(dict.fromkeys(job_ids))}
    if job_names is not None:
        match["fullDocument.jobName"] = {"$in": list(dict.fromkeys(job_names))}
    return [{"$match": match}, {"$project": {"fullDocument": 1}}]


def pause_changes_pipeline() -> list[dict[str, Any]]:
    """The ``watch`` pipeline of the pause feed: inserts and deletes of pause documents."""
    return [
        {
            "$match": {
                "operationType": {"$in": ["insert", "delete"]},
                f"documentKey._id.{PAUSE_ID_FIELD}": {"$exists": True},
            }
        },
        {"$project": {"documentKey": 1}},
    ]


def record_change(event: Mapping[str, Any]) -> RecordChange:
    """The change an event of the records feed reports (``None`` where it does not say)."""
    if event.get("operationType") == "insert":
        document = event.get("fullDocument") or {}
        return RecordChange(
            job_name=_str(document.get("jobName")),
            partition=_partition(document.get("partition")),
            next_run_at=_datetime(document.get("nextRunAt")),
        )
    updated = (event.get("updateDescription") or {}).get("updatedFields") or {}
    return RecordChange(
        partition=_partition(updated.get("partition")),
        next_run_at=_datetime(updated.get("nextRunAt")),
    )


def history_change(event: Mapping[str, Any]) -> HistoryRecord | None:
    """The history row an event of the history feed reports (``None`` for an event without a
    readable row: it is skipped)."""
    document = event.get("fullDocument")
    if not isinstance(document, Mapping):
        return None
    try:
        return history_from_document(document)
    except (KeyError, TypeError, ValueError):
        return None


def pause_change(event: Mapping[str, Any]) -> str | None:
    """The job name (or ``"*"``) an event of the pause feed paused or resumed (``None`` for an
    event without one: it is skipped)."""
    key = (event.get("documentKey") or {}).get("_id")
    return _str(key.get(PAUSE_ID_FIELD)) if isinstance(key, Mapping) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _partition(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _datetime(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


#: Seconds each open and each ``getMore`` of a feed may take (``pymongo.timeout``).
OPERATION_TIMEOUT: Final = 10.0

#: Most events in one batch (a burst larger than that is several batches).
MAX_BATCH: Final = 1_000


def buffered(stream: Any) -> bool:
    """Whether the stream holds received events (PyMongo's cursor; another driver's stream is
    read one event per batch)."""
    has_next = getattr(getattr(stream, "_cursor", None), "_has_next", None)
    return bool(has_next()) if callable(has_next) else False
