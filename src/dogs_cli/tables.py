"""What ``dogs jobs`` and ``dogs history`` print: records, pages, executions and the outcome of
each action, as tables or as one JSON document (times in ISO 8601 UTC).

Pure presentation, like :mod:`dogs_cli.output`: the commands of :mod:`dogs_cli.jobs`
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
from rich.text import Text

from dogs_cli.output import format_age, wide_console
from dogs_core.domain.display import (
    StepLine,
    execution_timing,
    params_preview,
    record_moments,
    step_lines,
)
from dogs_core.domain.progress import Progress
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
from dogs_core.domain.tracebacks import fold_traceback

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
    "progress_json",
    "progress_text",
    "reschedule_message",
    "stamp",
]

#: Characters of an error message shown in a table cell (``--json`` has all of it).
_ERROR_WIDTH = 80
#: Characters of a job's params ``dogs jobs show`` prints (``--full``: all of them).
_PARAMS_CELL = 2_000


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
        "progress": progress_json(record.progress),
        "held": _hold_json(record),
        "sleeping_until": _iso(record.sleeping),
        "steps": [
            {
                "name": step.name,
                "result": _plain(step.result),
                "recorded_at": _iso(step.recorded_at),
                "execution_id": step.execution_id,
                "duration_ms": step.duration_ms,
            }
            for step in record.steps
        ],
    }


def _hold_json(record: JobRecord) -> dict[str, Any] | None:
    holding = record.holding
    if holding is None:
        return None
    return {
        "reason": holding.reason.value,
        "since": _iso(holding.since),
        "until": _iso(holding.until),
    }


def progress_json(progress: Progress | None) -> dict[str, Any] | None:
    """A progress report (``None`` when there is none)."""
    if progress is None:
        return None
    return {
        "fraction": progress.fraction,
        "message": progress.message,
        "data": _plain(progress.data),
        "updated_at": _iso(progress.updated_at),
        "execution_id": progress.execution_id,
    }


def progress_text(progress: Progress, now: datetime) -> str:
    """``42% chunk 4/10 {"rows": 12} (3s ago)``: a bar's worth of a report."""
    parts = [] if progress.fraction is None else [f"{progress.fraction * 100:.0f}%"]
    if progress.message:
        parts.append(progress.message)
    if progress.data:
        parts.append(json.dumps(_plain(progress.data)))
    age = now - progress.updated_at
    parts.append(f"({format_age(age)} ago)" if age > timedelta(0) else "(now)")
    return " ".join(parts)


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
        "progress": progress_json(row.progress),
        "outcome": row.outcome,
        "ran": row.ran,
    }


def _last_error_json(row: HistoryRecord | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "execution_id": row.execution_id,
        "started_at": _iso(row.started_at),
        "error_type": row.error_type,
        "error_message": row.error_message,
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


def jobs_table(
    records: Sequence[JobRecord],
    now: datetime,
    *,
    title: str | None = None,
    errors: Mapping[str, HistoryRecord] | None = None,
) -> Table:
    """One row per record: id, job, state, when (the time that matters in its state: next
    run, due since, running since, failed at, held until), tries, priority, owner, and with
    ``errors`` (the newest error row of each record) its last error's type and message."""
    table = Table(title=title)
    table.add_column("ID", overflow="fold", min_width=8)
    table.add_column("Job", overflow="fold")
    table.add_column("State", no_wrap=True)
    table.add_column("When", overflow="fold", min_width=19)
    table.add_column("Tries", justify="right", no_wrap=True)
    table.add_column("Priority", justify="right", no_wrap=True)
    table.add_column("Owner", overflow="fold", min_width=8)
    if errors is not None:
        table.add_column("Last error", overflow="fold", min_width=12)
    for record in records:
        first = record_moments(record, now)[0]
        cells = [
            record.id,
            record.job_name,
            record.state(now).value,
            f"{first.label.lower()} {_moment(first.at, now)}",
            str(record.tries or 0),
            str(record.priority),
            "-" if record.lock_owner is None else str(record.lock_owner),
        ]
        if errors is not None:
            error = errors.get(record.id)
            cells.append("-" if error is None else _error(error) or "-")
        table.add_row(*cells)
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
        timing = execution_timing(row)
        table.add_row(
            "-" if timing.started_at is None else stamp(timing.started_at),
            *job,
            row.status.value if timing.ran else f"{row.status.value} (never ran)",
            str(row.tries),
            "-" if timing.duration_ms is None else _duration(timing.duration_ms),
            "yes" if row.was_stale else "no",
            "-" if row.owner is None else str(row.owner),
            _error(row) or "-",
        )
    return table


def print_page(
    page: JobPage,
    now: datetime,
    *,
    as_json: bool,
    next_command: str | None,
    errors: Mapping[str, HistoryRecord] | None = None,
) -> None:
    """A page of ``dogs jobs list`` (with each record's last error when ``errors`` is given),
    then how to get the next one (``next_command``)."""
    if as_json:
        jobs = [
            {**job_json(r, now), "last_error": _last_error_json((errors or {}).get(r.id))}
            for r in page.jobs
        ]
        print_json({"jobs": jobs, "next_after": page.next_after})
        return
    console = _console()
    if not page.jobs:
        console.print("No job records match.", highlight=False)
    else:
        console.print(jobs_table(page.jobs, now, errors=errors))
    if next_command is not None:
        console.print(f"Next page: {next_command}", highlight=False, soft_wrap=True)


def print_job(
    job_id: str,
    record: JobRecord | None,
    rows: Sequence[HistoryRecord],
    now: datetime,
    *,
    as_json: bool,
    full: bool = False,
    archived_at: datetime | None = None,
    fate: object | None = None,
) -> None:
    """``dogs jobs show``: the record (or that it is gone, or archived at ``archived_at``), its
    last executions, and the traceback of its newest error with the scheduler's and the
    libraries' frames folded; ``full`` shows the params and the traceback whole."""
    if as_json:
        print_json(
            {
                "id": job_id,
                "job": None if record is None else job_json(record, now),
                "executions": [history_json(row) for row in rows],
                "archived_at": _iso(archived_at),
            }
        )
        return
    console = _console()
    if archived_at is not None and getattr(fate, "audit_id", None) is not None:
        console.print(
            f"Job {job_id} is in the archive since {_moment(archived_at, now)}: {fate} "
            f"(dogs audit --job-id {job_id}); docs/bulk-actions.md says how to recover it.",
            highlight=False,
        )
    elif archived_at is not None:
        console.print(
            f"Job {job_id} is in the archive: `dogs archive` moved it there "
            f"{_moment(archived_at, now)}.",
            highlight=False,
        )
    if record is None and archived_at is None:
        ended = f"; its last execution ended {rows[0].status.value}" if rows else ""
        console.print(f"Job {job_id}: no record (it is over{ended}).", highlight=False)
        if rows and rows[0].progress is not None:
            final = progress_text(rows[0].progress, now)
            console.print(f"Its last progress: {final}", highlight=False)
    if record is not None:
        console.print(_record_table(record, now, full=full, archived=archived_at is not None))
        if record.steps:
            console.print(_steps_table(step_lines(record, rows), now))
        preview = params_preview(_plain(record.params), limit=_PARAMS_CELL)
        if preview.truncated and not full:
            console.print(
                f"Params cut at {len(preview.text):,} of {preview.size:,} characters "
                f"({preview.size_label}): `dogs jobs show {job_id} --full` prints them all.",
                highlight=False,
            )
    if rows:
        console.print(history_table(rows, now, title="Last executions", one_job=True))
        _print_traceback(console, rows, full=full)
    elif record is not None:
        console.print("No finished execution yet.", highlight=False)


def _print_traceback(console: Console, rows: Sequence[HistoryRecord], *, full: bool) -> None:
    """The newest error's traceback: folded (the user's frames, the others one line each)."""
    newest = next((row for row in rows if row.error_traceback), None)
    if newest is None or newest.error_traceback is None:
        return
    folded = fold_traceback(newest.error_traceback)
    title = f"Traceback of the newest error (execution {newest.execution_id}, try {newest.tries})"
    if folded.folded_frames and not full:
        frames = "frame" if folded.folded_frames == 1 else "frames"
        title += f"; {folded.folded_frames} {frames} of Dogs and libraries folded (--full: all)"
    console.print(title + ":", highlight=False)
    console.print(Text(folded.text if full else folded.short()), soft_wrap=True)


def _record_table(
    record: JobRecord, now: datetime, *, full: bool = False, archived: bool = False
) -> Table:
    title = f"Job {record.id}" + (" (archived)" if archived else "")
    table = Table(title=title, show_header=False)
    table.add_column("Field", style="bold")
    table.add_column("Value", overflow="fold")
    # a bulk delete archives records in any state, not only failed ones
    state = f"{record.state(now).value} (archived)" if archived else record.state(now).value
    fields: list[tuple[str, str]] = [
        ("Job", f"{record.job_name} ({record.type.value})"),
        ("State", state),
    ]
    for moment in record_moments(record, now):
        note = f"; {moment.note}" if moment.note else ""
        fields.append((moment.label, _moment(moment.at, now) + note))
    preview = params_preview(_plain(record.params), limit=10**12 if full else _PARAMS_CELL)
    fields += [
        ("Priority", str(record.priority)),
        ("Tries", str(record.tries or 0)),
        ("Unique key", record.unique_identifier or "-"),
        ("Params", preview.text + ("\n..." if preview.truncated else "")),
        ("Owner", "-" if record.lock_owner is None else str(record.lock_owner)),
        ("Lock id", record.lock_id or "-"),
    ]
    if record.progress is not None:
        fields.insert(2, ("Progress", progress_text(record.progress, now)))
    if record.lock_released_at is not None:
        fields.append(("Lock released", _moment(record.lock_released_at, now)))
    if record.expires_at is not None:
        fields.append(("Expires", _moment(record.expires_at, now)))
    for name, value in fields:
        table.add_row(name, Text(value))
    return table


def _steps_table(lines: Sequence[StepLine], now: datetime) -> Table:
    """A durable job's recorded steps: what a later run replays instead of running again."""
    table = Table(title="Recorded steps (replayed, not run again)")
    for column in ("#", "Step", "Recorded", "Took", "Try", "Size", "Result"):
        table.add_column(column, overflow="fold")
    for line in lines:
        table.add_row(
            str(line.number),
            Text(line.name),
            _moment(line.recorded_at, now),
            f"{line.duration_ms:,} ms",
            "-" if line.tries is None else str(line.tries),
            line.size_label,
            Text(line.result),
        )
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
