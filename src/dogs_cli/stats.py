"""``dogs stats``: what the executions of each job name did over a recent window.

::

    dogs stats [--name NAME] [--window 1h] [--json]

One call of :meth:`~dogs_core.runtime.client._async.client.DogsClient.stats` (two aggregations of
the
history served by its ``{jobName: 1, startedAt: 1}`` index; see docs/stats.md). The table has a
row per job name with an attempt in the window: the attempts and how they ended (succeeded,
errors, stale, cancelled, snoozed), the success rate per attempt, the jobs that failed (errors
that ended their job) and the success rate per job, the nearest-rank p50 and p95 and the max
duration, and the attempts per minute over the span they were started in; then the errors by
type when there are any. ``--json`` prints the same as one JSON list, with the attempts of every
minute. The window is at most 7 days. Bad input is one ``Error:`` line and exit code 2.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table

from dogs_cli.common import (
    Connection,
    connected_client,
    fail,
    flags_named,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.output import wide_console
from dogs_cli.tables import print_json, stamp
from dogs_core.domain.filters import parse_window
from dogs_core.domain.stats import MAX_STATS_WINDOW, JobStats
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["STATS_COLUMNS", "print_stats", "stats", "stats_json", "stats_table"]

NameOption = Annotated[
    str | None, typer.Option("--name", help="Only this job name.", show_default=False)
]
WindowOption = Annotated[
    str,
    typer.Option("--window", help="How far back from now, e.g. 15m, 1h, 2d (at most 7d)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _window(value: str) -> timedelta:
    with flags_named({"--window": ("--window", value)}):
        return parse_window("--window", value, MAX_STATS_WINDOW)


@with_connection()
def stats(
    name: NameOption = None,
    window: WindowOption = "1h",
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Attempts and how they ended, the success rate per attempt and per job, durations (p50,
    p95, max) and attempts per minute of each job name over the last --window (1h by default),
    from the execution history."""
    if name is not None and not name.strip():
        fail(f"--name {shlex.quote(name)}: must not be empty")
    length = _window(window)
    container = connection.logged_container()

    async def go() -> tuple[list[JobStats], datetime]:
        async with connected_client(container) as client:
            with user_errors():
                return await _read(client, name, length)

    rows, until = run(go)
    print_stats(rows, window=length, until=until, as_json=as_json)


async def _read(
    client: DogsClient, name: str | None, length: timedelta
) -> tuple[list[JobStats], datetime]:
    until = client.clock.now()
    return await client.stats(name, window=length, until=until), until


def print_stats(
    rows: Sequence[JobStats], *, window: timedelta, until: datetime, as_json: bool
) -> None:
    """A JSON list (``--json``), else the table (and the errors by type), or a line saying
    there was no attempt in the window."""
    if as_json:
        print_json([stats_json(row) for row in rows])
        return
    console = wide_console()
    if not rows:
        console.print(f"No attempts in the {_span(window)} before {stamp(until)}.", highlight=False)
        return
    console.print(stats_table(rows, window=window, until=until))
    errors = [(row.job_name, kind, n) for row in rows for kind, n in row.errors_by_type.items()]
    if errors:
        table = Table(title="Errors by type")
        table.add_column("Job")
        table.add_column("Error type")
        table.add_column("Errors", justify="right")
        for job, kind, count in errors:
            table.add_row(job, kind, str(count))
        console.print(table)


#: The columns of ``dogs stats`` after the job name: the attempts split by how they ended, the
#: two success rates, the durations and the rate (the dashboard uses the same words).
STATS_COLUMNS = (
    "Attempts",
    "Succeeded",
    "Errors",
    "Stale",
    "Cancelled",
    "Snoozed",
    "Expired",
    "Attempt success",
    "Failed jobs",
    "Job success",
    "p50",
    "p95",
    "Max",
    "Attempts/min",
)


def stats_table(rows: Sequence[JobStats], *, window: timedelta, until: datetime) -> Table:
    """One row per job name (:data:`STATS_COLUMNS`)."""
    table = Table(title=f"Dogs stats, the {_span(window)} before {stamp(until)}")
    table.add_column("Job")
    for column in STATS_COLUMNS:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row.job_name,
            str(row.runs),
            str(row.succeeded),
            str(row.errors),
            str(row.stale),
            str(row.cancelled),
            str(row.snoozed),
            str(row.expired),
            _rate(row.attempt_success_rate),
            str(row.failed),
            _rate(row.job_success_rate),
            _ms(row.duration_p50_ms),
            _ms(row.duration_p95_ms),
            _ms(row.duration_max_ms),
            "-" if row.per_minute is None else f"{row.per_minute:,.2f}",
        )
    return table


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def stats_json(row: JobStats) -> dict[str, Any]:
    """One job name's stats as JSON: times in ISO 8601 UTC, the minutes as ``[time, runs]``.
    ``failed`` counts the jobs that failed (error rows that ended their job), ``errors`` every
    error row; ``runs`` is ``attempts`` by its older name."""
    return {
        "job_name": row.job_name,
        "since": _iso(row.since),
        "until": _iso(row.until),
        "attempts": row.runs,
        "runs": row.runs,
        "succeeded": row.succeeded,
        "errors": row.errors,
        "retried": row.retried,
        "failed": row.failed,
        "stale": row.stale,
        "cancelled": row.cancelled,
        "snoozed": row.snoozed,
        "expired": row.expired,
        "superseded": row.superseded,
        "attempt_success_rate": row.attempt_success_rate,
        "job_success_rate": row.job_success_rate,
        "errors_by_type": dict(row.errors_by_type),
        "duration_p50_ms": row.duration_p50_ms,
        "duration_p95_ms": row.duration_p95_ms,
        "duration_max_ms": row.duration_max_ms,
        "first_started_at": None if row.first_started_at is None else _iso(row.first_started_at),
        "last_started_at": None if row.last_started_at is None else _iso(row.last_started_at),
        "attempts_per_minute": row.per_minute,
        "throughput": [[_iso(minute), count] for minute, count in row.throughput],
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _span(window: timedelta) -> str:
    """``1h``, ``15m``, ``2d``, ``90s`` (the largest unit that divides it), else ``1:30:05``."""
    seconds = int(window.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds and seconds % size == 0 and window == timedelta(seconds=seconds):
            return f"{seconds // size}{unit}"
    return str(window)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    return f"{value / 60_000:.1f} min"
