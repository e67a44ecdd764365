"""What the pages show, read through the client only (``fleet_status``, ``paused``, ``stats``,
``find_jobs``, ``search_jobs``, ``lookup``, ``latest_errors``, ``get_job``, ``get_executions``
and the archive's reads).

The overview's counts (every record of the store) and stats (an aggregation of the history)
are :class:`~dogs_dashboard.snapshots.Snapshot` reads: exact while they are cheap, a timed
snapshot read again in the background once they are not (a million records take seconds to
count).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.finding import FoundJob, JobLookup
from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.records import HistoryRecord, JobRecord, JobState, NameStatus
from dogs_core.domain.stats import JobStats
from dogs_core.domain.steering import JobPage
from dogs_core.errors import JobNotFoundError, MissingRoleError
from dogs_core.ports import Role, has_role
from dogs_core.runtime.client._async.client import DogsClient
from dogs_dashboard.snapshots import Snapshot

__all__ = [
    "ExecutionLines",
    "JobView",
    "ListFilters",
    "NameRow",
    "Overview",
    "SearchResult",
    "counts_snapshot",
    "read_job",
    "read_lines",
    "read_overview",
    "search_jobs",
    "stats_snapshot",
]


def counts_snapshot(client: DogsClient) -> Snapshot[list[NameStatus]]:
    """Every name's counts (``fleet_status``: a job claimed but not admitted by its fleet
    limit is held, not running), fresh whenever they are cheap to read."""
    return Snapshot(client.fleet_status, fresh_age=0.0, name="counts")


def stats_snapshot(
    client: DogsClient, window: timedelta, cache_seconds: float
) -> Snapshot[list[JobStats]]:
    """``client.stats(window=...)``, kept ``cache_seconds`` at least."""

    async def read() -> list[JobStats]:
        return list(await client.stats(window=window))

    return Snapshot(read, fresh_age=cache_seconds, name="stats")


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
    counts_error: str | None = None
    counts_age: float | None = None
    """Seconds since the counts were read, when they are a snapshot (``None``: just now)."""
    stats_age: float | None = None


async def read_overview(
    client: DogsClient,
    counts: Snapshot[list[NameStatus]],
    stats_cache: Snapshot[list[JobStats]],
    window: timedelta,
) -> Overview:
    """Every job name with records, a pause or history in the stats window."""
    counted = await counts.get()
    statuses = {row.job_name: row for row in counted.value or []}
    paused = await client.paused()
    stats = await stats_cache.get()
    by_name = {row.job_name: row for row in stats.value or []}
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
        stats_error=stats.error,
        window=window,
        total_throughput=_summed(stats.value or []),
        counts_error=counted.error,
        counts_age=counted.age,
        stats_age=stats.age,
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
    """A page of the job list: the records, the cursor of the next page, how a search matched
    (``"id"``, ``"unique key"`` or ``None`` when there was no search, or nothing matched), the
    jobs it found that have no live record (finished, archived), and each record's last error."""

    page: JobPage
    matched_by: str | None = None
    elsewhere: tuple[FoundJob, ...] = ()
    errors: dict[str, HistoryRecord] = field(default_factory=dict)
    searched: bool = False


@dataclass(frozen=True, slots=True)
class ListFilters:
    """The job list's filters beyond name and state: params path, owner, creation time."""

    params: str | None = None
    owner: str | None = None
    created_since: datetime | None = None
    created_until: datetime | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.params, self.owner, self.created_since,
                                           self.created_until))  # fmt: skip


async def search_jobs(
    client: DogsClient,
    *,
    name: str | None,
    state: str | None,
    query: str | None,
    limit: int,
    after: str | None,
    filters: ListFilters | None = None,
    tag: str | None = None,
) -> SearchResult:
    """The job list: one page of ``find_jobs`` (``search_jobs`` with filters), or what a
    search by id or unique key finds, live, finished or archived (``lookup``)."""
    inspecting = has_role(client.store, Role.INSPECTION)
    if query:
        return await _looked_up(client, query, name, inspecting)
    if filters is not None and filters.any:
        page = await client.search_jobs(
            name,
            state=state,
            params=filters.params,
            owner=filters.owner,
            created_since=filters.created_since,
            created_until=filters.created_until,
            tags=tag,
            limit=limit,
            after=after,
        )
    else:
        page = await client.find_jobs(name, state=state, limit=limit, after=after, tags=tag)
    return SearchResult(page, errors=await _errors(client, page.jobs, inspecting))


async def _looked_up(
    client: DogsClient, query: str, name: str | None, inspecting: bool
) -> SearchResult:
    if not inspecting:  # a store without the role: live records only, as before
        record = await client.get_job(query) if _looks_like_id(query) else None
        if record is not None:
            return SearchResult(JobPage((record,), None), "id", searched=True)
        page = await client.find_jobs(name, unique_key=query, limit=50)
        return SearchResult(page, "unique key" if page.jobs else None, searched=True)
    lookup: JobLookup = await client.lookup(query, job=name)
    live = tuple(job.record for job in lookup.jobs if job.where == "live" and job.record)
    elsewhere = tuple(job for job in lookup.jobs if job.where != "live")
    return SearchResult(
        JobPage(live, None),
        lookup.matched_by,
        elsewhere,
        await _errors(client, live, inspecting),
        searched=True,
    )


def _looks_like_id(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def _errors(
    client: DogsClient, records: Sequence[JobRecord], inspecting: bool
) -> dict[str, HistoryRecord]:
    ran = [record.id for record in records if (record.tries or 0) > 0 or record.lock_id]
    if not inspecting or not ran:
        return {}
    return await client.latest_errors(ran)


@dataclass(frozen=True, slots=True)
class JobView:
    """A job's page: its record (``None`` once it is gone), its newest executions, and when
    ``dogs archive`` moved it (``archived_at``: the record and rows are the archive's)."""

    record: JobRecord | None
    executions: list[HistoryRecord]
    archived_at: datetime | None = None


async def read_job(client: DogsClient, job_id: str, *, limit: int = 50) -> JobView:
    """A job's record and newest executions; from the archive when nothing is live."""
    record = await client.get_job(job_id)
    executions = await client.get_executions(job_id=job_id, limit=limit)
    if record is not None or not has_role(client.store, Role.INSPECTION):
        return JobView(record, executions)
    # a bulk delete archives the record while its history rows stay live
    archived, _ = await client.archived_jobs(job_ids=[job_id], limit=1)
    stamps = [archived[0].archived_at] if archived else []
    if not executions:
        page = await client.archived_executions(job_id=job_id, limit=limit)
        executions = list(page.rows)
        stamps += list(page.archived_at)
    return JobView(
        archived[0].item if archived else None,
        executions,
        next((moment for moment in stamps if moment is not None), None),
    )


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
    except MissingRoleError:
        return None
    except JobNotFoundError:
        lines = []
    shown = tuple(lines[:MAX_LINES_SHOWN])
    return ExecutionLines(execution_id, running, shown, len(lines) > MAX_LINES_SHOWN)
