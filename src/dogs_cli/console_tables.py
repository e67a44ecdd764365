"""What ``dogs workers``, ``dogs bulk`` and ``dogs audit`` print: the fleet, one worker, a bulk
action's report and progress, the audit trail, as tables or as one JSON document (times in
ISO 8601 UTC).

Pure presentation, like :mod:`dogs_cli.tables`: the commands read and steer the database
and hand the results here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import typer
from rich.table import Table

from dogs_cli.output import format_age
from dogs_cli.tables import _console, print_json, stamp
from dogs_core.domain.audit import AuditEntry, outcome_words
from dogs_core.domain.bulk import BulkReport
from dogs_core.domain.registry import WorkerInfo, liveness, shown_state, uptime

__all__ = [
    "audit_json",
    "bulk_json",
    "bulk_summary",
    "print_audit",
    "print_worker",
    "print_workers",
    "worker_json",
]


def _ago(moment: datetime, now: datetime) -> str:
    return f"{format_age(now - moment)} ago"


# -- workers -------------------------------------------------------------------------------------


def worker_json(info: WorkerInfo, now: datetime) -> dict[str, Any]:
    command = info.command
    return {
        "instance_id": info.instance_id,
        "state": liveness(info, now).value,
        "host": info.host,
        "pid": info.pid,
        "version": info.version,
        "job_names": list(info.job_names),
        "workers_count": info.workers_count,
        "slots_in_use": info.slots_in_use,
        "started_at": info.started_at,
        "last_beat": info.last_beat,
        "expires_at": info.expires_at,
        "executions_total": info.executions_total,
        "executions": [
            {
                "job_id": one.job_id,
                "job_name": one.job_name,
                "execution_id": one.execution_id,
                "started_at": one.started_at,
            }
            for one in info.executions
        ],
        "command": None
        if command is None
        else {
            "action": command.action.value,
            "requested_at": command.requested_at,
            "requested_by": command.requested_by,
            "grace_seconds": None if command.grace is None else command.grace.total_seconds(),
        },
    }


def _command_text(info: WorkerInfo) -> str:
    command = info.command
    if command is None:
        return "-"
    return f"{command.action.value} by {command.requested_by} at {stamp(command.requested_at)}"


def print_workers(workers: Sequence[WorkerInfo], now: datetime, *, as_json: bool) -> None:
    """One row per worker: its id, state, host and pid, slots, jobs, age, last beat."""
    if as_json:
        print_json([worker_json(info, now) for info in workers])
        return
    if not workers:
        typer.echo("No worker in the registry (workers write it every 10 s while they run).")
        return
    table = Table(title="Workers")
    for name, options in (
        ("Instance", {"no_wrap": True}),
        ("State", {"no_wrap": True}),
        ("Host:pid", {"overflow": "fold"}),
        ("Slots", {"justify": "right", "no_wrap": True}),
        ("Jobs", {"overflow": "fold"}),
        ("Up", {"no_wrap": True}),
        ("Last beat", {"no_wrap": True}),
        ("Command", {"overflow": "fold"}),
    ):
        table.add_column(name, **options)
    for info in workers:
        table.add_row(
            info.instance_id,
            shown_state(info, now),
            f"{info.host}:{info.pid}",
            f"{info.slots_in_use}/{info.workers_count}",
            ", ".join(info.job_names),
            format_age(uptime(info, now)),
            _ago(info.last_beat, now),
            _command_text(info),
        )
    _console().print(table)


def print_worker(info: WorkerInfo, now: datetime, *, as_json: bool) -> None:
    """One worker: what it is, then what it runs (as of its last beat)."""
    if as_json:
        print_json(worker_json(info, now))
        return
    lines = [
        ("Instance", info.instance_id),
        ("State", shown_state(info, now)),
        ("Host", f"{info.host} (pid {info.pid})"),
        ("Version", info.version),
        ("Jobs", ", ".join(info.job_names)),
        ("Slots", f"{info.slots_in_use} in use of {info.workers_count}"),
        ("Started", f"{stamp(info.started_at)} ({_ago(info.started_at, now)})"),
        ("Last beat", f"{stamp(info.last_beat)} ({_ago(info.last_beat, now)})"),
        ("Command", _command_text(info)),
    ]
    for label, value in lines:
        typer.echo(f"{label + ':':<11}{value}")
    if not info.executions:
        typer.echo("Running:   nothing (as of its last beat)")
        return
    table = Table(title=f"Running ({info.executions_total}, as of its last beat)")
    table.add_column("Job", overflow="fold")
    table.add_column("Job id", overflow="fold")
    table.add_column("Execution", no_wrap=True)
    table.add_column("Running for", no_wrap=True)
    for one in info.executions:
        table.add_row(one.job_name, one.job_id, one.execution_id, format_age(now - one.started_at))
    _console().print(table)


# -- bulk actions ----------------------------------------------------------------------------------


def bulk_json(report: BulkReport) -> dict[str, Any]:
    return {
        "action": report.action.value,
        "selection": report.selection.describe(),
        "dry_run": report.dry_run,
        "matched": report.matched,
        "examined": report.examined,
        "changed": report.changed,
        "skipped": dict(report.skipped),
        "chunks": report.chunks,
        "elapsed_seconds": report.elapsed.total_seconds(),
        "complete": report.complete,
        "audit_id": report.audit_id,
        "counts": {kind.value: count for kind, count in report.counts.items()},
        "left_out": {kind.value: count for kind, count in report.left_out.items()},
        "archived": report.archived,
    }


def bulk_summary(report: BulkReport) -> str:
    """One line: what a bulk action did, or stopped at."""
    verb = {"retry": "Retried", "cancel": "Cancelled", "reschedule": "Rescheduled"}.get(
        report.action.value, "Deleted"
    )
    skipped = ", ".join(f"{count} {reason}" for reason, count in sorted(report.skipped.items()))
    text = f"{verb} {report.changed} of {report.matched} {report.selection.describe()}"
    text += f" in {report.chunks} chunk(s), {report.elapsed.total_seconds():.1f} s"
    if skipped:
        text += f"; skipped: {skipped}"
    if report.audit_id is not None:
        text += f" (audit {report.audit_id})"
    if report.archived and report.changed:
        text += "; kept in the records' archive (docs/bulk-actions.md: recovering one)"
    return text + "."


# -- the audit trail -------------------------------------------------------------------------------


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    bulk = entry.bulk
    return {
        "id": entry.id,
        "at": entry.at,
        "actor": entry.actor.name,
        "source": entry.actor.source,
        "host": entry.actor.host,
        "action": entry.action,
        "target": entry.target,
        "outcome": entry.outcome.value,
        "count": entry.count,
        "job_ids": list(entry.job_ids),
        "details": dict(entry.details),
        "parent_id": entry.parent_id,
        "error": entry.error,
        "updated_at": entry.updated_at,
        "bulk": None
        if bulk is None
        else {
            "matched": bulk.matched,
            "examined": bulk.examined,
            "changed": bulk.changed,
            "skipped": dict(bulk.skipped),
            "chunks": bulk.chunks,
            "cursor": bulk.cursor,
            "runner": bulk.runner,
        },
    }


def print_audit(entries: Sequence[AuditEntry], *, as_json: bool, more: str | None) -> None:
    """The entries, newest first: when, who (and from where), what, on what, how many."""
    if as_json:
        print_json([audit_json(entry) for entry in entries])
        return
    if not entries:
        typer.echo("No audit entry.")
        return
    table = Table(title="Audit trail, newest first")
    table.add_column("When", no_wrap=True)
    table.add_column("Who", overflow="fold")
    table.add_column("Action", no_wrap=True)
    table.add_column("Target", overflow="fold")
    table.add_column("Count", justify="right", no_wrap=True)
    table.add_column("Outcome", overflow="fold")
    table.add_column("Id", no_wrap=True)
    for entry in entries:
        table.add_row(
            stamp(entry.at),
            f"{entry.actor.name} ({entry.actor.source})",
            entry.action,
            entry.target,
            str(entry.count),
            outcome_words(entry),
            entry.id,
        )
    _console().print(table)
    if more is not None:
        typer.echo(f"More: {more}")
