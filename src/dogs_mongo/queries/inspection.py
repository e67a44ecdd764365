"""The inspection role's MongoDB shape: the filters of an :class:`ExecutionQuery` and a
:class:`RecordQuery`, the index each search walks, the error report's pipeline, and the three
additive history indexes that serve them (docs/differences.md).

Which index serves an execution search (newest first), in order of preference:

==============================  ======================================================
Filter given                    Index (all ``startedAt`` descending after the key)
==============================  ======================================================
``job_id``                      ``jobId_1_startedAt_-1`` (ours, since 0.1)
``unique_identifier``           ``jobs_dogs_history_unique_identifier`` (partial: rows
                                with a key)
``error_type``                  ``jobs_dogs_history_errors_by_type`` (partial: error rows)
``status`` but ``success``      ``jobs_dogs_history_unsuccessful`` (partial: error, stale,
                                cancelled and snoozed rows)
``job_name``                    Dogs' ``jobName_1_startedAt_1``, read backwards
none of them                    ``jobName_1_startedAt_1`` with every name (``$in`` of the
                                ``distinct`` names): one scan per name, merged in order
                                (``SORT_MERGE``), so newest first across names
==============================  ======================================================

A time range bounds the scan on ``startedAt``. The owner and params filters are checked on each
row the scan fetches: the read stops once the page is full, and gives up after
:data:`UNINDEXED_MAX_TIME_MS` (``maxTimeMS``). The partial indexes cost nothing on the happy
path: a ``success`` row without a unique key enters none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.finding import (
    ExecutionCursor,
    ExecutionQuery,
    OwnerMatch,
    ParamsMatch,
    RawErrorGroup,
    RecordQuery,
    uuid7_floor,
)
from dogs_core.domain.records import HistoryStatus, to_millis
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo.queries import archive as qa
from dogs_mongo.queries.indexes import (
    ERRORS_BY_TYPE_INDEX,
    HISTORY_INSPECTION_INDEXES,
    HISTORY_JOB_ID_INDEX_NAME,
    HISTORY_UNIQUE_KEY_INDEX,
    UNSUCCESSFUL_INDEX,
)
from dogs_mongo.queries.states import state_filter, state_hint

__all__ = [
    "ERRORS_BY_TYPE_INDEX",
    "HISTORY_INSPECTION_INDEXES",
    "HISTORY_UNIQUE_KEY_INDEX",
    "UNINDEXED_MAX_TIME_MS",
    "UNSUCCESSFUL_INDEX",
    "ExecutionPlan",
    "error_groups_pipeline",
    "execution_plan",
    "raw_error_group",
    "record_plan",
]

Document = dict[str, Any]

#: How long a search with a filter no index serves may read before it gives up.
UNINDEXED_MAX_TIME_MS: Final = 5_000

_BY_NAME: Final = "jobName_1_startedAt_1"


class ExecutionPlan:
    """One execution search: its filter, the index it walks (``hint``, a name) and whether it
    needs every job name for the merged walk (``needs_names``)."""

    __slots__ = ("bounded", "filter", "hint", "needs_names")

    def __init__(self, filter_: Document, hint: str, *, needs_names: bool, bounded: bool) -> None:
        self.filter = filter_
        self.hint = hint
        self.needs_names = needs_names
        #: A filter no index serves is checked on each row: the read gets a time limit.
        self.bounded = bounded

    def with_names(self, names: Sequence[str]) -> Document:
        """The filter, with the ``$in`` of every job name a merged walk needs."""
        if not self.needs_names:
            return self.filter
        return {**self.filter, "jobName": {"$in": list(names)}}


def execution_plan(
    query: ExecutionQuery, before: ExecutionCursor | None, *, archive: bool = False
) -> ExecutionPlan:
    """The filter and index of a search of history rows newest first (see the module's table;
    an archive's rows are walked by ``archive_started_at`` or its job id and name indexes)."""
    filter_ = executions_filter(query, before)
    bounded = bool(query.unindexed) or (archive and _unindexed_in_archive(query))
    if archive:
        return ExecutionPlan(filter_, _archive_hint(query), needs_names=False, bounded=bounded)
    if query.job_id is not None:
        hint = HISTORY_JOB_ID_INDEX_NAME
    elif query.unique_identifier is not None:
        hint = HISTORY_UNIQUE_KEY_INDEX.name
    elif query.error_type is not None:
        hint = ERRORS_BY_TYPE_INDEX.name
    elif query.status is not None and query.status is not HistoryStatus.SUCCESS:
        hint = UNSUCCESSFUL_INDEX.name
    else:
        hint = _BY_NAME
    needs_names = hint == _BY_NAME and query.job_name is None
    return ExecutionPlan(filter_, hint, needs_names=needs_names, bounded=bounded)


def _archive_hint(query: ExecutionQuery) -> str:
    if query.job_id is not None:
        return "archive_job_id"
    if query.unique_identifier is not None:
        return "archive_history_unique_identifier"
    if query.job_name is not None:
        return "archive_job_name_started_at"
    return "archive_started_at"


def _unindexed_in_archive(query: ExecutionQuery) -> bool:
    """The archive has no status or error type index: those filters are checked per row."""
    return query.status is not None or query.error_type is not None


def executions_filter(query: ExecutionQuery, before: ExecutionCursor | None) -> Document:
    """Every filter of ``query``, and the rows after the page ``before`` ended."""
    filter_: Document = {}
    if query.job_id is not None:
        filter_["jobId"] = query.job_id
    if query.job_name is not None:
        filter_["jobName"] = query.job_name
    if query.error_type is not None:
        filter_["status"] = HistoryStatus.ERROR.value
        filter_["errorType"] = query.error_type
    elif query.status is not None:
        filter_["status"] = query.status.value
    if query.unique_identifier is not None:
        filter_["uniqueIdentifier"] = query.unique_identifier
    started: Document = {}
    if query.since is not None:
        started["$gte"] = to_millis(query.since)
    if query.until is not None:
        started["$lt"] = to_millis(query.until)
    if before is not None:
        # Rows at the cursor's time not shown yet, and every older row (ids are unique, so the
        # $nin only ever drops the rows of the page at that time).
        started["$lte"] = to_millis(before.started_at)
        filter_["executionId"] = {"$nin": list(before.execution_ids)}
    if started:
        filter_["startedAt"] = started
    conditions = [
        *([] if query.owner is None else [owner_filter("owner", query.owner)]),
        *([] if query.params is None else [params_filter(query.params)]),
    ]
    if conditions:
        filter_["$and"] = conditions
    return filter_


def owner_filter(field: str, match: OwnerMatch) -> Document:
    """The rows whose owner document (``owner``, or a record's ``lockOwner``) ``match`` names."""
    if match.exact or match.pid is not None:
        exact: Document = {f"{field}.host": match.host, f"{field}.pid": match.pid}
        if match.instance_id is not None:
            exact[f"{field}.instanceId"] = match.instance_id
        return exact
    return {"$or": [{f"{field}.host": match.host}, {f"{field}.instanceId": match.instance_id}]}


def params_filter(match: ParamsMatch) -> Document:
    """``params.<path>`` equal to the value (MongoDB's equality: 42 matches 42.0; an array at
    the path matches when it holds the value)."""
    return {f"params.{match.path}": match.value}


def record_plan(
    query: RecordQuery, *, now: datetime | None, after: str | None, archive: bool = False
) -> tuple[Document, Mapping[str, int]]:
    """The filter and index (a key pattern) of a record search in id order: the state's index
    (:func:`~dogs_mongo.queries.states.state_hint`), the unique key's, else ``_id`` (a created
    range and named ids bound it)."""
    conditions: list[Document] = []
    if query.state is not None:
        if now is None:
            raise ValueError("a state filter needs now")
        conditions.extend(state_filter(query.state, now))
    if query.owner is not None:
        conditions.append(owner_filter("lockOwner", query.owner))
    if query.params is not None:
        conditions.append(params_filter(query.params))
    filter_: Document = {}
    if query.job_name is not None:
        filter_["jobName"] = query.job_name
    if query.unique_identifier is not None:
        filter_["uniqueIdentifier"] = query.unique_identifier
    if query.tags:
        filter_["tags"] = {"$all": list(query.tags)}
    ids: Document = {}
    if query.job_ids is not None:
        ids["$in"] = list(query.job_ids)
    if query.created_since is not None:
        ids["$gte"] = uuid7_floor(query.created_since)
    if query.created_until is not None:
        ids["$lt"] = uuid7_floor(query.created_until)
    if after is not None:
        ids["$gt"] = after
    if ids:
        filter_["_id"] = ids
    if conditions:
        filter_["$and"] = conditions
    if archive and query.unique_identifier is not None:
        return filter_, {"uniqueIdentifier": 1}
    if archive:
        return filter_, {"_id": 1}
    if query.unique_identifier is not None:
        return filter_, {"uniqueIdentifier": 1}
    return filter_, state_hint(query.state)


def error_groups_pipeline(
    *, since: datetime, until: datetime, job_name: str | None, max_rows: int
) -> list[Document]:
    """The newest ``max_rows`` error rows of the window, per exact ``(errorType, errorMessage)``:
    the count, the first and last start, the job names, and the newest row's execution id. A
    covered scan of the partial ``jobs_dogs_history_unsuccessful`` (its keys hold every field
    read): no row is fetched."""
    match: Document = {
        "status": HistoryStatus.ERROR.value,
        "startedAt": {"$gte": to_millis(since), "$lt": to_millis(until)},
    }
    if job_name is not None:
        match["jobName"] = job_name
    covered = ("startedAt", "errorType", "errorMessage", "jobName", "executionId")
    return [
        {"$match": match},
        {"$sort": {"startedAt": -1}},
        {"$limit": max_rows},
        {"$project": {"_id": 0, **dict.fromkeys(covered, 1)}},  # the index holds them all
        {
            "$group": {
                "_id": {"type": "$errorType", "message": "$errorMessage"},
                "count": {"$sum": 1},
                "first": {"$min": "$startedAt"},
                "last": {"$max": "$startedAt"},
                "names": {"$addToSet": "$jobName"},
                "newest": {"$first": "$executionId"},
            }
        },
        {"$sort": {"count": -1}},
    ]


def raw_error_group(document: Mapping[str, Any]) -> RawErrorGroup:
    """One result of :func:`error_groups_pipeline`."""
    key = document["_id"]
    kind, message = key.get("type"), key.get("message")
    return RawErrorGroup(
        error_type=kind if isinstance(kind, str) and kind else None,
        message=message if isinstance(message, str) else None,
        count=int(document["count"]),
        first_seen=document["first"],
        last_seen=document["last"],
        job_names=tuple(sorted(str(name) for name in document.get("names") or ())),
        newest_execution_id=str(document["newest"]),
    )


#: The largest page of a search (a client's 1000 and one more, to know there is a next one),
#: and the most ids ``latest_errors`` takes.
MAX_PAGE = 1001

#: The most rows an error report may group.
MAX_ERROR_ROWS = 10_000_000

KEYS_OF = {
    spec.name: spec.key_document
    for spec in (
        *q.HISTORY_INDEXES,
        *qa.ARCHIVE_HISTORY_INDEXES,
        *qa.ARCHIVE_RECORD_INDEXES,
    )
}


def page_limit(value: object, field: str = "limit", maximum: int = MAX_PAGE) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidOptionError(field, value, f"must be an integer from 1 to {maximum}")
    return value


def job_ids_of(job_ids: object) -> list[str]:
    if isinstance(job_ids, str) or not isinstance(job_ids, Sequence):
        raise InvalidOptionError("job_ids", job_ids, "must be a sequence of job ids")
    if len(job_ids) > MAX_PAGE or not all(isinstance(i, str) and i for i in job_ids):
        raise InvalidOptionError("job_ids", job_ids, f"must be at most {MAX_PAGE} job ids")
    return list(dict.fromkeys(job_ids))
