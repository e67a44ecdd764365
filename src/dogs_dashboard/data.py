"""What the pages show, read through the client only (``status``, ``paused``, ``stats``,
``find_jobs``, ``get_job``, ``get_executions``), and the stats cache.

The stats come from an aggregation over the history (``DogsClient.stats``); a live page asks
for them every few seconds from every open browser, so they are cached for
``cache_seconds`` and computed by one caller at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import anyio

from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.records import HistoryRecord, JobRecord, JobState, NameStatus
from dogs_core.domain.stats import JobStats
from dogs_core.domain.steering import JobPage
from dogs_core.errors import JobNotFoundError, MissingStoreRoleError
from dogs_core.runtime._async.client import DogsClient

__all__ = [
    "ExecutionLines",
    "NameRow",
    "Overview",
    "SearchResult",
    "StatsCache",
    "read_job",
    "read_lines",
    "read_overview",
    "search_jobs",
]

logger = logging.getLogger("dogs.dashboard")


@dataclass(frozen=True, slots=True)
class NameRow:
    """One line of the overview: the counts of a job name, its pause and its stats."""

    name: str
    status: NameStatus
    paused: bool
    stats: JobStats | None


@dataclass(frozen=True, slots=True)
class Overview:
    rows: tuple[NameRow, ...]
    all_paused: bool
    stats_error: str | None
    window: timedelta
    total_throughput: tuple[tuple[datetime, int], ...]


@dataclass
class StatsCache:
    """``client.stats(window=...)``, kept for ``cache_seconds``; concurrent readers of an
    expired entry wait for one computation instead of each starting its own."""

    client: DogsClient
    window: timedelta
    cache_seconds: float
    clock: Callable[[], float] = time.monotonic
    _value: list[JobStats] | None = None
    _error: str | None = None
    _at: float = float("-inf")
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def get(self) -> tuple[list[JobStats], str | None]:
        """The stats of every name (empty with an error text when the store cannot say)."""
        async with self._lock:
            if self.clock() - self._at >= self.cache_seconds:
                self._value, self._error = await self._compute()
                self._at = self.clock()
            return list(self._value or []), self._error

    async def _compute(self) -> tuple[list[JobStats], str | None]:
        try:
            return list(await self.client.stats(window=self.window)), None
        except NotImplementedError:
            return [], "the store cannot aggregate stats"
        except Exception as error:  # a panel, not the page: show why and keep serving
            logger.warning("dashboard: reading stats failed: %r", error)
            return [], f"{type(error).__name__}: {error}"


async def read_overview(client: DogsClient, stats_cache: StatsCache) -> Overview:
    """Every job name with records, a pause or history in the stats window."""
    statuses = {row.job_name: row for row in await client.status()}
    paused = await client.paused()
    stats, error = await stats_cache.get()
    by_name = {row.job_name: row for row in stats}
    names = sorted(set(statuses) | (set(paused) - {EVERY_JOB}) | set(by_name))
    rows = tuple(
        NameRow(
            name=name,
            status=statuses.get(name, NameStatus(job_name=name)),
            paused=name in paused or EVERY_JOB in paused,
            stats=by_name.get(name),
        )
        for name in names
    )
    return Overview(
        rows=rows,
        all_paused=EVERY_JOB in paused,
        stats_error=error,
        window=stats_cache.window,
        total_throughput=_summed(stats),
    )


def _summed(stats: Sequence[JobStats]) -> tuple[tuple[datetime, int], ...]:
    """The throughput of every name added minute by minute."""
    totals: dict[datetime, int] = {}
    for row in stats:
        for minute, count in row.throughput:
            totals[minute] = totals.get(minute, 0) + count
    return tuple(sorted(totals.items()))


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A page of the job list: the records, the cursor of the next page, and how a search
    matched (``"id"``, ``"unique key"`` or ``None`` when there was no search)."""

    page: JobPage
    matched_by: str | None = None


async def search_jobs(
    client: DogsClient,
    *,
    name: str | None,
    state: str | None,
    query: str | None,
    limit: int,
    after: str | None,
    tag: str | None = None,
) -> SearchResult:
    """The job list: one page of ``find_jobs``, or the records a search names. A search is
    an id first, then a unique key (as stored, then scoped by ``name`` the way a job with
    ``unique_scope="job"`` stores it)."""
    if not query:
        page = await client.find_jobs(name, state=state, limit=limit, after=after, tags=tag)
        return SearchResult(page)
    record = await client.get_job(query)
    if record is not None:
        return SearchResult(JobPage((record,), None), "id")
    keys = [query] + ([f"{name}:{query}"] if name else [])
    for key in keys:
        page = await client.find_jobs(name, state=state, unique_key=key, limit=limit)
        if page.jobs:
            return SearchResult(page, "unique key")
    return SearchResult(JobPage((), None), None)


async def read_job(
    client: DogsClient, job_id: str, *, limit: int = 50
) -> tuple[JobRecord | None, list[HistoryRecord]]:
    """A job's record (``None`` once it is gone) and its newest executions."""
    record = await client.get_job(job_id)
    executions = await client.get_executions(job_id=job_id, limit=limit)
    return record, executions


@dataclass(frozen=True, slots=True)
class ExecutionLines:
    """The log lines of one execution of a job (the running one, else the newest)."""

    execution_id: str
    running: bool
    lines: tuple[LogLine, ...]
    more: bool
    """More lines were kept than shown."""


#: The most lines the job page shows (a job's ``max_log_lines`` is 1,000 by default).
MAX_LINES_SHOWN = 1_000


async def read_lines(
    client: DogsClient,
    record: JobRecord | None,
    executions: Sequence[HistoryRecord],
    now: datetime,
) -> ExecutionLines | None:
    """The lines of the execution running ``record``, else of the newest of ``executions``;
    ``None`` when there is no execution or the store keeps no lines (no following role)."""
    if record is not None and record.lock_id is not None and record.state(now) is JobState.RUNNING:
        execution_id, running = record.lock_id, True
    elif executions:
        execution_id, running = executions[0].execution_id, False
    else:
        return None
    try:
        lines = await client.get_logs(execution_id, limit=MAX_LINES_SHOWN + 1)
    except MissingStoreRoleError:
        return None
    except JobNotFoundError:
        lines = []
    shown = tuple(lines[:MAX_LINES_SHOWN])
    return ExecutionLines(execution_id, running, shown, len(lines) > MAX_LINES_SHOWN)
