"""The aggregations behind ``job_stats``: per job name over a window of the history, served by
Dogs' own index ``{jobName: 1, startedAt: 1}``.

Two pipelines read the same rows (``startedAt`` in ``[since, until)``, of the asked names or of
all of them), each one index scan of the window:

:func:`stats_summary_pipeline`
    one document per name: the runs, the counts per status, the failures per error type, and
    the nearest-rank p50 and p95 and the max of the durations (MongoDB 6.0 has no
    ``$percentile``, a 7.0 operator: the durations are pushed, sorted with ``$sortArray`` and
    picked with ``$arrayElemAt`` at rank ``ceil(p * n / 100)``, the rank
    :func:`dogs_core.domain.stats.nearest_rank_index` computes). It fetches the rows.
:func:`stats_minutes_pipeline`
    one document per name and UTC minute (``$dateTrunc``) with its count: a covered query (the
    index holds both fields; no document is fetched).

The match names the names with ``$in`` when they are given, else every string ``jobName``
(``$type``): either way a predicate on the index's first field, so the scan's bounds are the
names (or all of them) and, within each, the window's ``startedAt`` (the scan seeks from name
to name). Without it the planner would ignore the index, and a hint alone would scan every key.
The reads also hint the index (:data:`STATS_HINT`). :func:`stats_from_documents` turns the
two results into :class:`~dogs_core.domain.stats.JobStats` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.stats import FAILED, RETRIED, UNKNOWN_ERROR_TYPE, JobStats, stats_of_name

__all__ = [
    "STATS_HINT",
    "stats_from_documents",
    "stats_match",
    "stats_minutes_pipeline",
    "stats_summary_pipeline",
]

Document = dict[str, Any]

#: Dogs' history index by name and start (``jobName_1_startedAt_1``), by its key pattern.
STATS_HINT: Final[Mapping[str, int]] = {"jobName": 1, "startedAt": 1}

_STATUS_FIELDS: Final = (
    ("succeeded", HistoryStatus.SUCCESS),
    ("errors", HistoryStatus.ERROR),
    ("stale", HistoryStatus.STALE),
    ("cancelled", HistoryStatus.CANCELLED),
    ("snoozed", HistoryStatus.SNOOZED),
    ("expired", HistoryStatus.EXPIRED),
    ("superseded", HistoryStatus.SUPERSEDED),
)
#: The error rows' outcomes counted (additive ``outcome``; Node Dogs rows have none).
_OUTCOME_FIELDS: Final = (("retried", RETRIED), ("failedJobs", FAILED))


def stats_match(*, since: datetime, until: datetime, job_names: Sequence[str] | None) -> Document:
    """The rows of the window, of ``job_names`` (all names when ``None``: every string
    ``jobName``, a predicate on the index's first field, so that the scan's ``startedAt`` bounds
    are the window's; with none, the planner scans every key of the hinted index)."""
    match: Document = {
        "jobName": {"$type": "string"} if job_names is None else {"$in": list(job_names)}
    }
    match["startedAt"] = {"$gte": since, "$lt": until}
    return match


def _count_of(status: HistoryStatus) -> Document:
    return {"$sum": {"$cond": [{"$eq": ["$status", status.value]}, 1, 0]}}


def _count_of_error_outcome(outcome: str) -> Document:
    error = {"$eq": ["$status", HistoryStatus.ERROR.value]}
    return {"$sum": {"$cond": [{"$and": [error, {"$eq": ["$outcome", outcome]}]}, 1, 0]}}


#: A row's failure type: its ``errorType`` when that is a non-empty string, else "unknown".
_ERROR_TYPE: Final[Document] = {
    "$cond": [
        {
            "$and": [
                {"$eq": [{"$type": "$errorType"}, "string"]},
                {"$ne": ["$errorType", ""]},
            ]
        },
        "$errorType",
        UNKNOWN_ERROR_TYPE,
    ]
}


def _percentile(percent: int) -> Document:
    """The nearest-rank ``percent``-th percentile of the sorted ``$sorted`` of ``$$n`` values
    (``null`` when there are none); ``ceil(p * n / 100)`` in doubles is exact for any ``n``
    below 2**53 / 100."""
    rank = {"$ceil": {"$divide": [{"$multiply": [percent, "$$n"]}, 100]}}
    index = {"$toInt": {"$max": [0, {"$subtract": [rank, 1]}]}}
    return {"$cond": [{"$eq": ["$$n", 0]}, None, {"$arrayElemAt": ["$sorted", index]}]}


def stats_summary_pipeline(
    *, since: datetime, until: datetime, job_names: Sequence[str] | None
) -> list[Document]:
    """One document per name: ``runs``, the status counts, ``failures`` (``[{type, count}]``),
    ``p50``, ``p95``, ``max`` (``null`` without a duration), sorted by name."""
    group: Document = {"_id": "$jobName", "runs": {"$sum": 1}}
    for field, status in _STATUS_FIELDS:
        group[field] = _count_of(status)
    for field, outcome in _OUTCOME_FIELDS:
        group[field] = _count_of_error_outcome(outcome)
    group["first"] = {"$min": "$startedAt"}
    group["last"] = {"$max": "$startedAt"}
    # An expired row never ran: its zero duration is not a duration of the job.
    timed = {
        "$and": [{"$isNumber": "$duration"}, {"$ne": ["$status", HistoryStatus.EXPIRED.value]}]
    }
    group["durations"] = {"$push": {"$cond": [timed, "$duration", "$$REMOVE"]}}
    group["errorTypes"] = {
        "$push": {
            "$cond": [{"$eq": ["$status", HistoryStatus.ERROR.value]}, _ERROR_TYPE, "$$REMOVE"]
        }
    }
    counted = ("runs", *(f for f, _ in _STATUS_FIELDS), *(f for f, _ in _OUTCOME_FIELDS))
    kept = {field: 1 for field in (*counted, "first", "last")}
    failures = {
        "$map": {
            "input": {"$setUnion": ["$errorTypes"]},
            "as": "type",
            "in": {
                "type": "$$type",
                "count": {
                    "$size": {
                        "$filter": {"input": "$errorTypes", "cond": {"$eq": ["$$this", "$$type"]}}
                    }
                },
            },
        }
    }
    return [
        {"$match": stats_match(since=since, until=until, job_names=job_names)},
        {"$group": group},
        {
            "$project": {
                **kept,
                "errorTypes": 1,
                "sorted": {"$sortArray": {"input": "$durations", "sortBy": 1}},
            }
        },
        {
            "$project": {
                **kept,
                "failures": failures,
                "p50": {"$let": {"vars": {"n": {"$size": "$sorted"}}, "in": _percentile(50)}},
                "p95": {"$let": {"vars": {"n": {"$size": "$sorted"}}, "in": _percentile(95)}},
                "max": {"$last": "$sorted"},
            }
        },
        {"$sort": {"_id": 1}},
    ]


def stats_minutes_pipeline(
    *, since: datetime, until: datetime, job_names: Sequence[str] | None
) -> list[Document]:
    """One document per name and UTC minute with a row: ``{_id: {name, minute}, count}``.
    Only ``jobName`` and ``startedAt`` are read: the index covers it."""
    minute = {"$dateTrunc": {"date": "$startedAt", "unit": "minute"}}
    return [
        {"$match": stats_match(since=since, until=until, job_names=job_names)},
        {"$group": {"_id": {"name": "$jobName", "minute": minute}, "count": {"$sum": 1}}},
    ]


def stats_from_documents(
    summaries: Iterable[Mapping[str, Any]],
    minutes: Iterable[Mapping[str, Any]],
    *,
    since: datetime,
    until: datetime,
) -> list[JobStats]:
    """The :class:`JobStats` of every name of ``summaries`` (the two pipelines' results),
    sorted by name. A minute of a name absent from ``summaries`` (a row written between the two
    reads) is dropped."""
    per_name: dict[str, dict[datetime, int]] = {}
    for document in minutes:
        key = document["_id"]
        per_name.setdefault(str(key["name"]), {})[_utc(key["minute"])] = int(document["count"])
    result = [
        stats_of_name(
            str(summary["_id"]),
            since=since,
            until=until,
            runs=int(summary["runs"]),
            statuses={status.value: int(summary.get(field, 0)) for field, status in _STATUS_FIELDS},
            errors_by_type={
                str(item["type"]): int(item["count"]) for item in summary.get("failures") or ()
            },
            durations=(_ms(summary.get("p50")), _ms(summary.get("p95")), _ms(summary.get("max"))),
            per_minute=per_name.get(str(summary["_id"]), {}),
            error_outcomes={
                outcome: int(summary.get(field, 0)) for field, outcome in _OUTCOME_FIELDS
            },
            started=(_moment(summary.get("first")), _moment(summary.get("last"))),
        )
        for summary in summaries
    ]
    return sorted(result, key=lambda stats: stats.job_name)


def _ms(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _moment(value: object) -> datetime | None:
    return _utc(value) if isinstance(value, datetime) else None


def _utc(moment: datetime) -> datetime:
    """A BSON date as read back (aware UTC with ``tz_aware`` clients, naive UTC otherwise)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
