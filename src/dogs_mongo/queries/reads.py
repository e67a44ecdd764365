"""Reads: the explain probe, ``find_jobs``, ``get_executions`` and ``status_counts``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryStatus, JobState, JobStatus, JobType, to_millis
from dogs_mongo.queries.claims import eligible_filter, hint_spec, stale_lock_expression
from dogs_mongo.queries.common import CLAIM_SORT, HELD_FIELD, PROBE_MAX_TIME_MS
from dogs_mongo.queries.indexes import TAGS_INDEX_KEYS
from dogs_mongo.queries.states import not_locked_after, state_filter, state_hint

# --------------------------------------------------------------------------------------------
# Probe (docs/concepts.md#the-adaptive-index-hint)
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
# Reads
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FindJobsQuery:
    """One page of ``find_jobs``: ``find(filter).sort(sort).hint(hint).limit(limit)``."""

    filter: dict[str, Any]
    sort: list[tuple[str, int]]
    hint: dict[str, int]
    limit: int


def _records_filter(
    conditions: list[dict[str, Any]],
    *,
    job_name: str | None,
    unique_identifier: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    filter_: dict[str, Any] = {}
    if job_name is not None:
        filter_["jobName"] = job_name
    if unique_identifier is not None:
        filter_["uniqueIdentifier"] = unique_identifier
    if after is not None:
        filter_["_id"] = {"$gt": after}
    if conditions:
        filter_["$and"] = conditions
    return filter_


def find_jobs_query(
    *,
    job_name: str | None,
    state: JobState | None,
    unique_identifier: str | None,
    after: str | None,
    limit: int,
    now: datetime | None,
    tags: Sequence[str] | None = None,
) -> FindJobsQuery:
    """The page of records matching every given filter, ``_id`` ascending from ``after``
    (exclusive), through the index of the state (:func:`~dogs_mongo.queries.states.state_hint`)
    or, for a unique key, the ``uniqueIdentifier`` index (one record at most)."""
    conditions: list[dict[str, Any]] = []
    if state is not None:
        if now is None:
            raise ValueError("a state filter needs now")
        conditions = state_filter(state, now)
    if tags:
        conditions = [*conditions, {"tags": {"$all": list(tags)}}]
    filter_ = _records_filter(
        conditions, job_name=job_name, unique_identifier=unique_identifier, after=after
    )
    hint = {"uniqueIdentifier": 1} if unique_identifier is not None else state_hint(state)
    if tags and unique_identifier is None:
        hint = dict(TAGS_INDEX_KEYS)  # tags are the narrowest filter given
    return FindJobsQuery(filter=filter_, sort=[("_id", 1)], hint=hint, limit=limit)


def delete_jobs_query(
    *, job_name: str | None, state: JobState, now: datetime
) -> tuple[dict[str, Any], dict[str, int]]:
    """The ``(filter, hint)`` of a bulk delete (or count) of the records of ``state`` at
    ``now``. Never a record whose lock is live at ``now``: the states but ``failed`` exclude
    those already, and ``failed`` gets the condition added."""
    if JobState(state) is JobState.RUNNING:
        raise ValueError("running records are never deleted in bulk")
    conditions = state_filter(state, now)
    if state is JobState.FAILED:
        conditions = [*conditions, not_locked_after(now)]
    return _records_filter(conditions, job_name=job_name), state_hint(state)


def get_executions_filter(
    job_name: str | None, job_id: str | None, status: HistoryStatus | None = None
) -> dict[str, Any]:
    """The history of a job name, of one job (``jobId``, served by the additive
    ``{jobId: 1, startedAt: -1}`` index), or of both at once, optionally of one status."""
    filter_: dict[str, Any] = {}
    if job_id is not None:
        filter_["jobId"] = job_id
    if job_name is not None:
        filter_["jobName"] = job_name
    if status is not None:
        filter_["status"] = HistoryStatus(status).value
    return filter_


def get_executions_sort() -> list[tuple[str, int]]:
    """Newest first, served by the ``{jobName: 1, startedAt: 1}`` index read backwards (or by
    ``{jobId: 1, startedAt: -1}`` for one job). Ties of ``startedAt`` are ordered by the
    reader (:func:`executions_page`): no index has ``endedAt``."""
    return [("startedAt", -1)]


def _execution_order(doc: Mapping[str, Any]) -> tuple[datetime, datetime]:
    return doc["startedAt"], doc.get("endedAt") or doc["startedAt"]


def executions_in_order(documents: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """History documents newest first: ``startedAt`` descending, ties by ``endedAt``
    descending."""
    return sorted(documents, key=_execution_order, reverse=True)


def executions_page(
    documents: Sequence[Mapping[str, Any]], *, lead: int, limit: int
) -> list[Mapping[str, Any]] | None:
    """The page of ``get_executions`` from rows read in ``startedAt`` order: ``lead`` rows just
    before the page (0 or 1), up to ``limit`` rows of the page, and one row after it. ``None``
    when a row outside the page shares the ``startedAt`` of the page's first or last row: the
    page's edge then cuts a tie and the tie's order needs the rows around it
    (:func:`executions_window_filters`); otherwise the page in full order."""
    page = documents[lead : lead + limit]
    if not page:
        return []
    first, last = page[0]["startedAt"], page[-1]["startedAt"]
    if lead and documents[0]["startedAt"] == first:
        return None
    if len(documents) > lead + limit and documents[lead + limit]["startedAt"] == last:
        return None
    return executions_in_order(page)


def executions_window_filters(
    filter_: Mapping[str, Any], page: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """For a page whose edge cuts a tie: the filter of the rows newer than its first row (to
    count them) and of every row in its range of ``startedAt`` (to read them in full order;
    the page is then a slice of them)."""
    newest, oldest = page[0]["startedAt"], page[-1]["startedAt"]
    newer = {"$and": [dict(filter_), {"startedAt": {"$gt": newest}}]}
    window = {"$and": [dict(filter_), {"startedAt": {"$gte": oldest, "$lte": newest}}]}
    return newer, window


def status_counts_pipeline(now: datetime) -> list[dict[str, Any]]:
    """One aggregation giving, per job name, the records of each state
    (:meth:`JobRecord.state`): terminal (failed), running, stale, due (due, and retrying with a
    past ``nextRunAt``), held (a fleet limit's hold in force), later (scheduled, and the other
    retrying ones), and since when the oldest waiting record has waited
    (:meth:`JobRecord.waiting_since` of the due, stale and held records).

    Each record counts once: terminal first, then running, then stale, then due or later. A
    lock released at shutdown is neither running nor stale: the record waits as due or later.
    """

    def count(name: str) -> dict[str, Any]:
        return {"$sum": {"$cond": [{"$eq": ["$state", name]}, 1, 0]}}

    waiting = {"$in": ["$state", ["due", "stale", "held"]]}
    states = ("due", "later", "running", "stale", "terminal", "held")
    return [
        {"$project": {"jobName": 1, "since": _waiting_since(), "state": _count_state(now)}},
        {
            "$group": {
                "_id": "$jobName",
                **{name: count(name) for name in states},
                "oldestDueAt": {"$min": {"$cond": [waiting, "$since", None]}},
            }
        },
        {"$sort": {"_id": 1}},
    ]


_HOLDING: Final = {"$eq": [f"${HELD_FIELD}.until", "$nextRunAt"]}


def _count_state(now: datetime) -> dict[str, Any]:
    """The state a record counts in at ``now`` (``terminal``, ``running``, ``stale``, ``due``,
    ``held`` or ``later``), the first that holds."""
    at = to_millis(now)
    terminal = {
        "$and": [
            {"$ne": ["$type", JobType.RECURRENT.value]},
            {"$eq": ["$status", JobStatus.MAX_TRIES_REACHED.value]},
        ]
    }
    has_lock = {"$eq": [{"$type": "$lockedUntil"}, "date"]}
    running = {"$and": [has_lock, {"$gt": ["$lockedUntil", at]}]}
    return {
        "$switch": {
            "branches": [
                {"case": terminal, "then": "terminal"},
                {"case": running, "then": "running"},
                {"case": stale_lock_expression(), "then": "stale"},
                {"case": {"$lte": ["$nextRunAt", at]}, "then": "due"},
                {"case": _HOLDING, "then": "held"},
            ],
            "default": "later",
        }
    }


def _waiting_since() -> dict[str, Any]:
    """Waiting since: the start of the hold in force, else the next run."""
    return {
        "$cond": [
            {"$and": [_HOLDING, {"$lt": [f"${HELD_FIELD}.since", "$nextRunAt"]}]},
            f"${HELD_FIELD}.since",
            "$nextRunAt",
        ]
    }
