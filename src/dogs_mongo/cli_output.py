"""What the ``dogs`` command prints: the outcome of ``dogs schedule`` and the counts of
``dogs status``, as a table or as JSON.

Pure presentation: the commands in :mod:`dogs_mongo.cli` read the database and hand the results
here; nothing in this module talks to MongoDB or parses options.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from dogs_core.domain.records import Duplicate, NameStatus, Scheduled

__all__ = ["format_age", "print_schedule_outcome", "print_status", "status_json", "status_table"]

#: The count columns of ``dogs status``, in order, after the job name.
_COUNT_COLUMNS = ("Due", "Later", "Running", "Stale", "Terminal")


def print_schedule_outcome(outcome: Scheduled | Duplicate) -> None:
    """``Scheduled <id>``, or ``Duplicate <id>`` with the unique key that is taken."""
    if isinstance(outcome, Scheduled):
        typer.echo(f"Scheduled {outcome.id}")
    else:
        typer.echo(
            f"Duplicate {outcome.existing_id} (unique key {outcome.unique_identifier!r} "
            "is taken; nothing was scheduled)"
        )


def print_status(
    statuses: Sequence[NameStatus], now: datetime, *, records_collection: str, as_json: bool
) -> None:
    """The counts of ``dogs status`` read at ``now``: a JSON list (``--json``), else a table
    titled with the records collection (or a line saying it holds no records)."""
    if as_json:
        typer.echo(json.dumps([status_json(item, now) for item in statuses], indent=2))
        return
    console = Console()
    if not statuses:
        console.print(f"No job records in {records_collection}.", highlight=False)
        return
    console.print(status_table(statuses, now, records_collection=records_collection))


def status_table(
    statuses: Sequence[NameStatus], now: datetime, *, records_collection: str
) -> Table:
    """One row per job name: its counts and the age of its oldest due job (``-`` for none)."""
    table = Table(title=f"Dogs jobs ({records_collection})")
    table.add_column("Job")
    for column in _COUNT_COLUMNS:
        table.add_column(column, justify="right")
    table.add_column("Oldest due", justify="right")
    for item in statuses:
        age = None if item.oldest_due_at is None else now - item.oldest_due_at
        table.add_row(
            item.job_name,
            str(item.due),
            str(item.scheduled_later),
            str(item.running),
            str(item.stale),
            str(item.terminal),
            "-" if age is None else format_age(age),
        )
    return table


def status_json(item: NameStatus, now: datetime) -> dict[str, Any]:
    """One job name's counts as JSON: times in ISO 8601 UTC, the oldest due job's age in
    seconds (never negative)."""
    oldest = item.oldest_due_at
    return {
        "job_name": item.job_name,
        "due": item.due,
        "scheduled_later": item.scheduled_later,
        "running": item.running,
        "stale": item.stale,
        "terminal": item.terminal,
        "oldest_due_at": None if oldest is None else oldest.astimezone(UTC).isoformat(),
        "oldest_due_age_seconds": (
            None if oldest is None else round(max(0.0, (now - oldest).total_seconds()), 3)
        ),
    }


def format_age(age: timedelta) -> str:
    """A short human duration: ``45s``, ``3m 12s``, ``2h 5m``, ``3d 4h``."""
    seconds = max(0, int(age.total_seconds()))
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"
