"""What the ``dogs`` command prints: the outcome of ``dogs schedule`` and the counts of
``dogs status`` (with the paused names and the concurrency slots held), as a table or as JSON.

Pure presentation: the commands in :mod:`dogs_cli` read the database and hand the results
here; nothing in this module talks to MongoDB or parses options.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.records import (
    Debounced,
    NameStatus,
    Replaced,
    Scheduled,
    ScheduleOutcome,
)

__all__ = [
    "PIPED_WIDTH",
    "FleetView",
    "format_age",
    "print_schedule_outcome",
    "print_status",
    "status_json",
    "status_table",
    "wide_console",
]

#: A piped table is as wide as its content (up to this), not cut to 80 columns.
PIPED_WIDTH = 250


def wide_console() -> Console:
    """The terminal's width, or ``$COLUMNS``; piped without it, as wide as the table (Rich
    assumes 80 columns when stdout is not a terminal, and would cut the table there)."""
    console = Console()
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(width=PIPED_WIDTH)


#: The count columns of ``dogs status``, in order, after the job name: the words of the
#: dashboard and of the ``dogs_jobs`` gauge's ``state`` label.
_COUNT_COLUMNS = ("Due", "Later", "Running", "Held", "Stale", "Failed")


def print_schedule_outcome(outcome: ScheduleOutcome) -> None:
    """``Scheduled <id>``, ``Replaced <id>``, ``Debounced <id> to <time>``, or
    ``Duplicate <id>`` with the unique key that is taken (and until when, for a window or a
    throttle)."""
    if isinstance(outcome, Scheduled):
        typer.echo(f"Scheduled {outcome.id}")
    elif isinstance(outcome, Replaced):
        typer.echo(f"Replaced {outcome.id} (unique key {outcome.unique_identifier!r})")
    elif isinstance(outcome, Debounced):
        typer.echo(f"Debounced {outcome.id} to {outcome.run_at.isoformat()}")
    elif outcome.held_until is not None:
        typer.echo(
            f"Duplicate {outcome.existing_id} (unique key {outcome.unique_identifier!r} is "
            f"held by its {outcome.reason} until {outcome.held_until.isoformat()}; nothing was "
            "scheduled)"
        )
    else:
        typer.echo(
            f"Duplicate {outcome.existing_id} (unique key {outcome.unique_identifier!r} "
            "is taken; nothing was scheduled)"
        )


@dataclass(frozen=True, slots=True)
class FleetView:
    """What ``dogs status`` shows of the fleet controls: the paused names (``"*"``: every job)
    and the concurrency slots held per name (``None``: the store does not say)."""

    paused: frozenset[str] = frozenset()
    held_slots: Mapping[str, int] | None = None

    def paused_text(self, name: str) -> str:
        """``yes`` (paused on its own), ``all`` (under the pause of every job) or ``-``."""
        return "yes" if name in self.paused else "all" if EVERY_JOB in self.paused else "-"

    def with_names(self, statuses: Sequence[NameStatus]) -> list[NameStatus]:
        """``statuses``, then a row of zeros for each name paused or holding slots that has no
        records, by name."""
        held = {name for name, count in (self.held_slots or {}).items() if count}
        extra = (self.paused - {EVERY_JOB}) | held
        present = {item.job_name for item in statuses}
        return [*statuses, *(NameStatus(name) for name in sorted(extra - present))]


def print_status(
    statuses: Sequence[NameStatus],
    now: datetime,
    *,
    records_collection: str,
    as_json: bool,
    fleet: FleetView | None = None,
) -> None:
    """The counts of ``dogs status`` read at ``now``: a JSON list (``--json``), else a table
    titled with the records collection (or a line saying it holds no records). With ``fleet``,
    the paused names and the slots held: in every JSON row, and as columns of the table when
    something is paused (then also a line when every job is) or slots are held."""
    fleet = fleet or FleetView()
    statuses = fleet.with_names(statuses)
    if as_json:
        rows = [status_json(item, now, fleet) for item in statuses]
        typer.echo(json.dumps(rows, indent=2))
        return
    console = wide_console()
    if EVERY_JOB in fleet.paused:
        console.print("Every job is paused (dogs resume --all lifts it).", highlight=False)
    if not statuses:
        console.print(f"No job records in {records_collection}.", highlight=False)
        return
    console.print(status_table(statuses, now, records_collection=records_collection, fleet=fleet))


def status_table(
    statuses: Sequence[NameStatus],
    now: datetime,
    *,
    records_collection: str,
    fleet: FleetView | None = None,
) -> Table:
    """One row per job name: its counts (``Held``: given back by a fleet limit, or claimed and
    not admitted yet; ``Failed``: at the attempt limit) and the age of the oldest job waiting
    to run (``-`` for none); ``Paused`` when a name is paused, ``Slots held`` when a name holds
    slots."""
    fleet = fleet or FleetView()
    held = fleet.held_slots if fleet.held_slots and any(fleet.held_slots.values()) else None
    table = Table(title=f"Dogs jobs ({records_collection})")
    table.add_column("Job")
    for column in _COUNT_COLUMNS:
        table.add_column(column, justify="right")
    table.add_column("Oldest due", justify="right")
    if fleet.paused:
        table.add_column("Paused")
    if held is not None:
        table.add_column("Slots held", justify="right")
    for item in statuses:
        age = None if item.oldest_due_at is None else now - item.oldest_due_at
        cells = [
            item.job_name,
            str(item.due),
            str(item.scheduled_later),
            str(item.running),
            str(item.held),
            str(item.stale),
            str(item.terminal),
            "-" if age is None else format_age(age),
        ]
        if fleet.paused:
            cells.append(fleet.paused_text(item.job_name))
        if held is not None:
            cells.append(str(held.get(item.job_name, 0)))
        table.add_row(*cells)
    return table


def status_json(item: NameStatus, now: datetime, fleet: FleetView | None = None) -> dict[str, Any]:
    """One job name's counts as JSON: times in ISO 8601 UTC, the oldest due job's age in
    seconds (never negative), whether it is paused (on its own or with every job) and the
    slots it holds (``null`` when the store does not say). ``terminal`` is ``failed`` by its
    older name."""
    fleet = fleet or FleetView()
    oldest = item.oldest_due_at
    held = None if fleet.held_slots is None else fleet.held_slots.get(item.job_name, 0)
    return {
        "job_name": item.job_name,
        "due": item.due,
        "scheduled_later": item.scheduled_later,
        "running": item.running,
        "held": item.held,
        "stale": item.stale,
        "failed": item.terminal,
        "terminal": item.terminal,
        "oldest_due_at": None if oldest is None else oldest.astimezone(UTC).isoformat(),
        "oldest_due_age_seconds": (
            None if oldest is None else round(max(0.0, (now - oldest).total_seconds()), 3)
        ),
        "paused": fleet.paused_text(item.job_name) != "-",
        "held_slots": held,
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
