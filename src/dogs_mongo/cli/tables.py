"""What ``dogs jobs`` and ``dogs history`` print: records, pages, executions and the outcome of
each action, as tables or as one JSON document (times in ISO 8601 UTC).

Pure presentation, like :mod:`dogs_mongo.cli.output`: the commands of :mod:`dogs_mongo.cli.jobs`
read and steer the database and hand the results here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from dogs_core.domain.records import HistoryRecord, JobRecord, Owner
from dogs_core.domain.steering import (
    AlreadyFinished,
    Cancelled,
    Deleted,
    JobPage,
    NotFound,
    Rescheduled,
    Running,
)
from dogs_mongo.cli.output import format_age, wide_console

__all__ = [
    "cancel_message",
    "delete_message",
    "history_json",
    "history_table",
    "job_json",
    "jobs_table",
    "print_history",
    "print_job",
    "print_json",
    "print_page",
    "reschedule_message",
    "stamp",
]

#: Characters of an error message shown in a table cell (``--json`` has all of it).
_ERROR_WIDTH = 80


# -- JSON ----------------------------------------------------------------------------------------


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _plain(value: object) -> object:
    """``value`` made of what JSON can hold: datetimes in ISO 8601, enums by value, mappings
    and sequences converted item by item, anything else as its ``str``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    return str(value)


def _owner_json(owner: Owner | None) -> dict[str, Any] | None:
    if owner is None:
        return None
    return {"host": owner.host, "pid": owner.pid, "instance_id": owner.instance_id}


def job_json(record: JobRecord, now: datetime) -> dict[str, Any]:
    """A record with its state at ``now``."""
    return {
        "id": record.id,
        "job_name": record.job_name,
        "type": record.type.value,
        "state": record.state(now).value,
        "next_run_at": _iso(record.next_run_at),
        "priority": record.priority,
        "tries": record.tries or 0,
        "unique_key": record.unique_identifier,
        "params": _plain(record.params),
        "partition": record.partition,
        "last_run_at": _iso(record.last_run_at),
        "locked_until": _iso(record.locked_until),
        "lock_id": record.lock_id,
        "owner": _owner_json(record.lock_owner),
        "lock_released_at": _iso(record.lock_released_at),
        "claim_was_stale": record.claim_was_stale,
        "status": None if record.status is None else record.status.value,
        "max_tries_reached_at": _iso(record.max_tries_reached_at),
        "expires_at": _iso(record.expires_at),
    }


def history_json(row: HistoryRecord) -> dict[str, Any]:
    """One execution, every field of it."""
    return {
        "execution_id": row.execution_id,
        "job_id": row.job_id,
        "job_name": row.job_name,
        "type": row.type.value,
        "status": row.status.value,
        "tries": row.tries,
        "priority": row.priority,
        "started_at": _iso(row.started_at),
        "ended_at": _iso(row.ended_at),
        "duration_ms": row.duration_ms,
        "was_stale": row.was_stale,
        "owner": _owner_json(row.owner),
        "result": _plain(row.result),
        "error_type": row.error_type,
        "error_message": row.error_message,
        "error_traceback": row.error_traceback,
        "unique_key": row.unique_identifier,
        "params": _plain(row.params),
        "expires_at": _iso(row.expires_at),
    }


def print_json(document: object) -> None:
    """One JSON document on stdout."""
    typer.echo(json.dumps(_plain(document), indent=2))


# -- tables ------------------------------------------------------------------------------------


def _console() -> Console:
    """The terminal's width, or as wide as the table when piped (:func:`wide_console`)."""
    return wide_console()


def stamp(moment: datetime) -> str:
    """``2026-05-01 09:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _moment(moment: datetime | None, now: datetime) -> str:
    """``2026-05-01 09:00:00Z (in 5m)`` / ``(3m ago)``."""
    if moment is None:
        return "-"
    shown = stamp(moment)
    ahead = moment - now
    relative = f"in {format_age(ahead)}" if ahead > timedelta(0) else f"{format_age(-ahead)} ago"
    return f"{shown} ({relative})"


def _duration(milliseconds: int) -> str:
    if milliseconds < 1000:
        return f"{milliseconds} ms"
    if milliseconds < 60_000:
        return f"{milliseconds / 1000:.1f} s"
    return format_age(timedelta(milliseconds=milliseconds))


def _error(row: HistoryRecord) -> str:
    text = ": ".join(part for part in (row.error_type, row.error_message) if part)
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_WIDTH else text[: _ERROR_WIDTH - 3] + "..."


def jobs_table(records: Sequence[JobRecord], now: datetime, *, title: str | None = None) -> Table:
    """One row per record: id, job, state, next run, tries, priority, owner."""
    table = Table(title=title)
    table.add_column("ID", overflow="fold", min_width=8)
    table.add_column("Job", overflow="fold")
    table.add_column("State", no_wrap=True)
    table.add_column("Next run", overflow="fold", min_width=19)
    table.add_column("Tries", justify="right", no_wrap=True)
    table.add_column("Priority", justify="right", no_wrap=True)
    table.add_column("Owner", overflow="fold", min_width=8)
    for record in records:
        table.add_row(
            record.id,
            record.job_name,
            record.state(now).value,
            _moment(record.next_run_at, now),
            str(record.tries or 0),
            str(record.priority),
            "-" if record.lock_owner is None else str(record.lock_owner),
        )
    return table


def history_table(
    rows: Sequence[HistoryRecord],
    now: datetime,
    *,
    title: str | None = None,
    one_job: bool = False,
) -> Table:
    """One row per execution, newest first: started, job and job id (unless ``one_job``: the
    rows of one job), status, tries, duration, whether its claim recovered a stale lock,
    owner, error."""
    table = Table(title=title)
    table.add_column("Started", no_wrap=True)
    if not one_job:
        table.add_column("Job", overflow="fold")
        table.add_column("Job id", overflow="fold", min_width=8)
    table.add_column("Status", no_wrap=True)
    table.add_column("Tries", justify="right", no_wrap=True)
    table.add_column("Duration", justify="right", no_wrap=True)
    table.add_column("Was stale", no_wrap=True)
    table.add_column("Owner", overflow="fold", min_width=8)
    table.add_column("Error", overflow="fold", min_width=12)
    for row in rows:
        job = [] if one_job else [row.job_name, row.job_id]
        table.add_row(
            stamp(row.started_at),
            *job,
            row.status.value,
            str(row.tries),
            _duration(row.duration_ms),
            "yes" if row.was_stale else "no",
            "-" if row.owner is None else str(row.owner),
            _error(row) or "-",
        )
    return table


def print_page(page: JobPage, now: datetime, *, as_json: bool, next_command: str | None) -> None:
    """A page of ``dogs jobs list``, then how to get the next one (``next_command``)."""
    if as_json:
        print_json({"jobs": [job_json(r, now) for r in page.jobs], "next_after": page.next_after})
        return
    console = _console()
    if not page.jobs:
        console.print("No job records match.", highlight=False)
    else:
        console.print(jobs_table(page.jobs, now))
    if next_command is not None:
        console.print(f"Next page: {next_command}", highlight=False, soft_wrap=True)


def print_job(
    job_id: str,
    record: JobRecord | None,
    rows: Sequence[HistoryRecord],
    now: datetime,
    *,
    as_json: bool,
) -> None:
    """``dogs jobs show``: the record (or that it is gone) and its last executions."""
    if as_json:
        print_json(
            {
                "id": job_id,
                "job": None if record is None else job_json(record, now),
                "executions": [history_json(row) for row in rows],
            }
        )
        return
    console = _console()
    if record is None:
        ended = f"; its last execution ended {rows[0].status.value}" if rows else ""
        console.print(f"Job {job_id}: no record (it is over{ended}).", highlight=False)
    else:
        console.print(_record_table(record, now))
    if rows:
        console.print(history_table(rows, now, title="Last executions", one_job=True))
    elif record is not None:
        console.print("No finished execution yet.", highlight=False)


def _record_table(record: JobRecord, now: datetime) -> Table:
    table = Table(title=f"Job {record.id}", show_header=False)
    table.add_column("Field", style="bold")
    table.add_column("Value", overflow="fold")
    fields: list[tuple[str, str]] = [
        ("Job", f"{record.job_name} ({record.type.value})"),
        ("State", record.state(now).value),
        ("Next run", _moment(record.next_run_at, now)),
        ("Priority", str(record.priority)),
        ("Tries", str(record.tries or 0)),
        ("Unique key", record.unique_identifier or "-"),
        ("Params", json.dumps(_plain(record.params))),
        ("Owner", "-" if record.lock_owner is None else str(record.lock_owner)),
        ("Locked until", _moment(record.locked_until, now)),
        ("Lock id", record.lock_id or "-"),
        ("Last run", _moment(record.last_run_at, now)),
    ]
    if record.lock_released_at is not None:
        fields.append(("Lock released", _moment(record.lock_released_at, now)))
    if record.max_tries_reached_at is not None:
        fields.append(("Failed at", _moment(record.max_tries_reached_at, now)))
    if record.expires_at is not None:
        fields.append(("Expires", _moment(record.expires_at, now)))
    for name, value in fields:
        table.add_row(name, value)
    return table


def print_history(rows: Sequence[HistoryRecord], now: datetime, *, as_json: bool) -> None:
    """``dogs history``: the executions, newest first."""
    if as_json:
        print_json([history_json(row) for row in rows])
        return
    console = _console()
    if not rows:
        console.print("No executions match.", highlight=False)
        return
    console.print(history_table(rows, now))


# -- outcomes ----------------------------------------------------------------------------------


def cancel_message(outcome: Cancelled | NotFound | AlreadyFinished) -> str:
    """The line ``dogs jobs cancel`` prints."""
    if isinstance(outcome, Cancelled):
        if outcome.was_running:
            return (
                f"Cancelled {outcome.job_id} ({outcome.job_name}): its running execution "
                f"{outcome.execution_id} is fenced off and told to stop"
            )
        return f"Cancelled {outcome.job_id} ({outcome.job_name})"
    if isinstance(outcome, AlreadyFinished):
        if outcome.status == "failed":
            return (
                f"Not cancelled: {outcome.job_id} is failed (at its attempt limit); "
                "`dogs jobs retry` revives it, `dogs jobs delete` removes it"
            )
        return f"Not cancelled: {outcome.job_id} is over (its last execution: {outcome.status})"
    return f"Not found: no job {outcome.job_id} (no record and no history)"


def reschedule_message(outcome: Rescheduled | NotFound | Running, now: datetime) -> str:
    """The line ``dogs jobs retry`` and ``dogs jobs reschedule`` print."""
    if isinstance(outcome, Rescheduled):
        record = outcome.record
        return (
            f"Rescheduled {record.id} ({record.job_name}): {record.state(now).value}, "
            f"next run {_moment(record.next_run_at, now)}, tries {record.tries or 0}, "
            f"priority {record.priority}"
        )
    if isinstance(outcome, Running):
        return (
            f"Not changed: {outcome.record.id} is running (owner "
            f"{outcome.record.lock_owner or 'unknown'}); `dogs jobs cancel` stops it"
        )
    return f"Not found: no record {outcome.job_id}"


def delete_message(outcome: Deleted | NotFound | Running, now: datetime) -> str:
    """The line ``dogs jobs delete ID`` prints."""
    if isinstance(outcome, Deleted):
        record = outcome.record
        return f"Deleted {record.id} ({record.job_name}, was {record.state(now).value})"
    if isinstance(outcome, Running):
        return f"Not deleted: {outcome.record.id} is running; `dogs jobs cancel` stops it"
    return f"Not found: no record {outcome.job_id}"
