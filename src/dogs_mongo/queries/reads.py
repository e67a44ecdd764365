"""Reads: the explain probe, ``find_jobs``, ``get_executions`` and ``status_counts``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dogs_core.domain.records import JobStatus, JobType
from dogs_mongo.queries.claims import eligible_filter, hint_spec
from dogs_mongo.queries.common import CLAIM_SORT, PROBE_MAX_TIME_MS

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
# Reads
# --------------------------------------------------------------------------------------------


def find_jobs_filter(job_name: str | None) -> dict[str, Any]:
    return {} if job_name is None else {"jobName": job_name}


def find_jobs_sort() -> list[tuple[str, int]]:
    """Claim order, then ``_id`` (UUIDv7: insertion order) so that ties are deterministic."""
    return [("priority", -1), ("nextRunAt", 1), ("_id", 1)]


def get_executions_filter(job_name: str | None, job_id: str | None) -> dict[str, Any]:
    """The history of a job name, of one job (``jobId``, served by the additive
    ``{jobId: 1, startedAt: -1}`` index), or of both at once."""
    filter_: dict[str, Any] = {}
    if job_id is not None:
        filter_["jobId"] = job_id
    if job_name is not None:
        filter_["jobName"] = job_name
    return filter_


def get_executions_sort() -> list[tuple[str, int]]:
    """Newest first, served by the ``{jobName: 1, startedAt: 1}`` index read backwards (or by
    ``{jobId: 1, startedAt: -1}`` for one job)."""
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
