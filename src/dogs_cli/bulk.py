"""``dogs bulk``: retry, cancel, reschedule or delete every job a filter selects, in chunks,
with progress; a dry run (the count) unless ``--yes``.

::

    dogs bulk retry --state failed [--name N] [--error-type ConnectionError]
                    [--since 2h | --since 2026-05-01T02:00Z] [--until ...]
                    [--time-field created|next_run|last_run|failed] [--chunk-size 500] [--yes]
    dogs bulk cancel     [filters] [--yes]
    dogs bulk reschedule [filters] (--run-in 10m | --run-at T) [--priority N] [--yes]
    dogs bulk delete     [filters] [--purge] [--yes]
    dogs bulk resume AUDIT_ID                 # an interrupted one, from where it stopped

Every action touches only what it names: without a filter it refuses unless ``--all`` (exit 2);
runtime schedules (``dogs schedules``) and workflow steps are never taken unless
``--include-schedules`` / ``--include-steps`` (or ``--name`` is a schedule's id: naming it
asks for it); the dry run counts jobs, schedules and steps apart; a ``--name`` that matches
nothing and that neither the registry nor the store knows is a typo (exit 2). A delete keeps
what it removes in the records' archive unless ``--purge`` (docs/bulk-actions.md: recovering).

Each is :meth:`~dogs_core.runtime.client._async.client.DogsClient.bulk` (or ``resume_bulk``): chunk
after chunk, each record changed only while it is as the chunk read it (a job a worker claimed
or finished meanwhile is left alone and counted). Progress goes to stderr; the action's audit
entry (``dogs audit``) holds its progress and the cursor ``resume`` goes on from. Exit codes: 0
done (or the dry run), 1 it stopped before the end (resume it), 2 bad input or an unreachable
server.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from dogs_cli.common import (
    EXIT_NOT_DONE,
    Connection,
    connected_client,
    fail,
    flags_named,
    moment_flag,
    run,
    user_errors,
    when,
    with_connection,
)
from dogs_cli.console_tables import bulk_json, bulk_summary
from dogs_cli.tables import print_json
from dogs_core.domain.bulk import (
    DEFAULT_CHUNK_SIZE,
    MAX_CHUNK_SIZE,
    BulkAction,
    BulkReport,
    BulkSelection,
    RecordKind,
    TimeField,
    bulk_selection,
    counts_in_words,
)
from dogs_core.domain.filters import STATES_IN_WORDS
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["bulk_app"]

bulk_app = typer.Typer(
    name="bulk",
    help="Retry, cancel, reschedule or delete every job a filter selects (a dry run unless --yes).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_FILTERS = "Filters"
NameOption = Annotated[
    str | None, typer.Option("--name", help="Only the jobs of this name.", rich_help_panel=_FILTERS)
]
StateOption = Annotated[
    str | None,
    typer.Option(
        "--state",
        help=STATES_IN_WORDS,
        rich_help_panel=_FILTERS,
    ),
]
ErrorTypeOption = Annotated[
    str | None,
    typer.Option(
        "--error-type",
        help="Only jobs whose last execution failed with this exception class "
        "(ConnectionError, myapp.errors.QuotaExceeded, or its last part: QuotaExceeded).",
        rich_help_panel=_FILTERS,
    ),
]
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="From this time: ISO 8601 with a timezone, or a duration ago (2h).",
        rich_help_panel=_FILTERS,
    ),
]
TagOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        help="Only jobs with this tag (repeat: with all of them).",
        rich_help_panel=_FILTERS,
    ),
]
UntilOption = Annotated[
    str | None,
    typer.Option(
        "--until",
        help="Before this time: ISO 8601 with a timezone, or a duration ago (30m).",
        rich_help_panel=_FILTERS,
    ),
]
TimeFieldOption = Annotated[
    str,
    typer.Option(
        "--time-field",
        help="The time --since/--until bound: created, next_run, last_run or failed.",
        rich_help_panel=_FILTERS,
    ),
]
AllOption = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Mean every job: required when no filter is given.",
        rich_help_panel=_FILTERS,
    ),
]
SchedulesOption = Annotated[
    bool,
    typer.Option(
        "--include-schedules",
        help="Take run-time schedules too (dogs schedules; left out unless --name is one).",
        rich_help_panel=_FILTERS,
    ),
]
StepsOption = Annotated[
    bool,
    typer.Option(
        "--include-steps",
        help="Take workflow steps too (left out otherwise: removing one fails its workflow).",
        rich_help_panel=_FILTERS,
    ),
]
ChunkOption = Annotated[
    str, typer.Option("--chunk-size", help=f"Records per chunk (1 to {MAX_CHUNK_SIZE}).")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do it (without it: count only).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


# -- inputs ----------------------------------------------------------------------------------


def _selection(
    name: str | None,
    state: str | None,
    error_type: str | None,
    tag: list[str] | None,
    since: str | None,
    until: str | None,
    time_field: str,
    every: bool = False,
    include_schedules: bool = False,
    include_steps: bool = False,
) -> BulkSelection:
    now = datetime.now(UTC)
    named = {
        "job_name": ("--name", name),
        "state": ("--state", state),
        "error_type": ("--error-type", error_type),
        "tags": ("--tag", ", ".join(tag or ())),
        "time_field": ("--time-field", time_field),
        "since": ("--since", since),
        "until": ("--until", until),
    }
    with flags_named(named):
        return bulk_selection(
            job_name=name,
            state=state,
            error_type=error_type,
            tags=tag or None,
            time_field=time_field,
            since=moment_flag("--since", since, now),
            until=moment_flag("--until", until, now),
            include_schedules=include_schedules,
            include_steps=include_steps,
            all=every,
        )


def _chunk_size(text: str) -> int:
    try:
        size = int(text)
    except ValueError:
        fail(f"--chunk-size {shlex.quote(text)}: must be an integer")
    if not 1 <= size <= MAX_CHUNK_SIZE:
        fail(f"--chunk-size {text}: must be between 1 and {MAX_CHUNK_SIZE}")
    return size


def _again(action: BulkAction, given: dict[str, str | bool | None]) -> str:
    flags = [
        flag if value is True else f"{flag} {shlex.quote(value)}"
        for flag, value in given.items()
        if value
    ]
    return " ".join(["dogs bulk", action.value, *flags, "--yes"])


_INCLUDE_FLAGS = {
    RecordKind.SCHEDULE: "--include-schedules",
    RecordKind.STEP: "--include-steps",
}


# -- progress --------------------------------------------------------------------------------


class _Progress:
    """Progress on stderr: a line per chunk on a terminal, else about one per 10 %."""

    def __init__(self) -> None:
        self.terminal = sys.stderr.isatty()
        self.shown = -1
        self.done = -1

    def __call__(self, report: BulkReport) -> None:
        done = report.changed + report.skipped_total
        percent = 100 if report.matched <= 0 else min(100, done * 100 // report.matched)
        same_tenth = percent // 10 == self.shown // 10
        if done == self.done or (not self.terminal and same_tenth and not report.complete):
            return
        self.shown, self.done = percent, done
        typer.echo(
            f"{report.action.value}: {done}/{report.matched} ({percent}%), "
            f"{report.changed} changed, {report.skipped_total} skipped, chunk {report.chunks}",
            err=True,
        )


# -- the commands ----------------------------------------------------------------------------


def _run_bulk(
    action: BulkAction,
    filters: dict[str, Any],
    *,
    chunk_size: str,
    yes: bool,
    as_json: bool,
    connection: Connection,
    options: dict[str, Any] | None = None,
    flags: dict[str, str | bool | None] | None = None,
) -> None:
    selection = _selection(**filters)
    size = _chunk_size(chunk_size)
    container = connection.logged_container()
    progress = _Progress()

    async def go(client: DogsClient) -> BulkReport:
        return await client.bulk(
            action,
            selection,
            dry_run=not yes,
            chunk_size=size,
            on_progress=None if as_json else progress,
            **(options or {}),
        )

    report = _call(container, go)
    if as_json:
        print_json(bulk_json(report))
    elif report.dry_run:
        given: dict[str, str | bool | None] = {
            "--name": filters["name"],
            "--state": filters["state"],
            "--error-type": filters["error_type"],
            "--since": filters["since"],
            "--until": filters["until"],
            "--time-field": None
            if filters["time_field"] == TimeField.CREATED
            else filters["time_field"],
            "--include-schedules": filters.get("include_schedules", False),
            "--include-steps": filters.get("include_steps", False),
            "--all": filters.get("every", False),
            **(flags or {}),
        }
        if report.matched == 0:
            typer.echo(f"Nothing to {action.value}: no {selection.describe()}.")
        else:
            counted = {kind for kind, count in report.counts.items() if count}
            apart = "" if counted <= {RecordKind.JOB} else f": {counts_in_words(report.counts)}"
            typer.echo(
                f"Would {action.value} {report.matched} {selection.describe()}{apart} (a dry "
                f"run: nothing was changed). To do it: {_again(action, given)}"
            )
        if report.left_out:
            flags_needed = " / ".join(_INCLUDE_FLAGS[kind] for kind in report.left_out)
            typer.echo(
                f"Left out: {counts_in_words(report.left_out)} match the same filters "
                f"(add {flags_needed} to take them)."
            )
        return
    else:
        typer.echo(bulk_summary(report))
    if not report.dry_run and not report.complete:
        raise typer.Exit(EXIT_NOT_DONE)


def _call(container: Any, body: Callable[[DogsClient], Awaitable[BulkReport]]) -> BulkReport:
    async def go() -> BulkReport:
        async with connected_client(container) as client:
            with user_errors():
                return await body(client)

    return run(go)


def _filters(**values: Any) -> dict[str, Any]:
    return values


@bulk_app.command("retry")
@with_connection()
def retry(
    name: NameOption = None,
    state: StateOption = None,
    error_type: ErrorTypeOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    time_field: TimeFieldOption = TimeField.CREATED.value,
    every: AllOption = False,
    include_schedules: SchedulesOption = False,
    include_steps: StepsOption = False,
    chunk_size: ChunkOption = str(DEFAULT_CHUNK_SIZE),
    yes: YesOption = False,
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Make every selected job due now; a failed one gets a fresh budget of tries. Running
    jobs are left alone."""
    filters = _filters(
        name=name,
        state=state,
        error_type=error_type,
        tag=tag,
        since=since,
        until=until,
        time_field=time_field,
        every=every,
        include_schedules=include_schedules,
        include_steps=include_steps,
    )
    _run_bulk(
        BulkAction.RETRY,
        filters,
        chunk_size=chunk_size,
        yes=yes,
        as_json=as_json,
        connection=connection,
    )


@bulk_app.command("cancel")
@with_connection()
def cancel(
    name: NameOption = None,
    state: StateOption = None,
    error_type: ErrorTypeOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    time_field: TimeFieldOption = TimeField.CREATED.value,
    every: AllOption = False,
    include_schedules: SchedulesOption = False,
    include_steps: StepsOption = False,
    chunk_size: ChunkOption = str(DEFAULT_CHUNK_SIZE),
    yes: YesOption = False,
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Cancel every selected event job (a 'cancelled' history row each; a running one is
    stopped at its next lock renewal). Failed and recurrent jobs are skipped."""
    filters = _filters(
        name=name,
        state=state,
        error_type=error_type,
        tag=tag,
        since=since,
        until=until,
        time_field=time_field,
        every=every,
        include_schedules=include_schedules,
        include_steps=include_steps,
    )
    _run_bulk(
        BulkAction.CANCEL,
        filters,
        chunk_size=chunk_size,
        yes=yes,
        as_json=as_json,
        connection=connection,
    )


@bulk_app.command("reschedule")
@with_connection()
def reschedule(
    name: NameOption = None,
    state: StateOption = None,
    error_type: ErrorTypeOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    time_field: TimeFieldOption = TimeField.CREATED.value,
    every: AllOption = False,
    include_schedules: SchedulesOption = False,
    include_steps: StepsOption = False,
    run_in: Annotated[
        str | None, typer.Option("--run-in", help="Delay from now, e.g. 10m.")
    ] = None,
    run_at: Annotated[
        str | None, typer.Option("--run-at", help="ISO 8601 time with a timezone.")
    ] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="A new priority.")] = None,
    chunk_size: ChunkOption = str(DEFAULT_CHUNK_SIZE),
    yes: YesOption = False,
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Move every selected job that is not running to another time and/or priority; a failed
    one is revived as `dogs bulk retry` does."""
    moment = when(run_in, run_at)
    level: int | None = None
    if priority is not None:
        try:
            level = int(priority)
        except ValueError:
            fail(f"--priority {shlex.quote(priority)}: must be an integer (higher runs first)")
    if not moment and level is None:
        fail("pass --run-in, --run-at or --priority")
    filters = _filters(
        name=name,
        state=state,
        error_type=error_type,
        tag=tag,
        since=since,
        until=until,
        time_field=time_field,
        every=every,
        include_schedules=include_schedules,
        include_steps=include_steps,
    )
    with flags_named({"priority": ("--priority", priority)}):
        _run_bulk(
            BulkAction.RESCHEDULE,
            filters,
            chunk_size=chunk_size,
            yes=yes,
            as_json=as_json,
            connection=connection,
            options={**moment, "priority": level},
            flags={"--run-in": run_in, "--run-at": run_at, "--priority": priority},
        )


@bulk_app.command("delete")
@with_connection()
def delete(
    name: NameOption = None,
    state: StateOption = None,
    error_type: ErrorTypeOption = None,
    tag: TagOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    time_field: TimeFieldOption = TimeField.CREATED.value,
    every: AllOption = False,
    include_schedules: SchedulesOption = False,
    include_steps: StepsOption = False,
    purge: Annotated[
        bool,
        typer.Option("--purge", help="Drop the records instead of keeping them in the archive."),
    ] = False,
    chunk_size: ChunkOption = str(DEFAULT_CHUNK_SIZE),
    yes: YesOption = False,
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Delete every selected job that is not running, without history rows (the audit trail
    lists them); each is kept in the records' archive unless --purge."""
    filters = _filters(
        name=name,
        state=state,
        error_type=error_type,
        tag=tag,
        since=since,
        until=until,
        time_field=time_field,
        every=every,
        include_schedules=include_schedules,
        include_steps=include_steps,
    )
    _run_bulk(
        BulkAction.DELETE,
        filters,
        chunk_size=chunk_size,
        yes=yes,
        as_json=as_json,
        connection=connection,
        options={"purge": True} if purge else None,
        flags={"--purge": purge},
    )


@bulk_app.command("resume")
@with_connection()
def resume(
    audit_id: Annotated[
        str, typer.Argument(metavar="AUDIT_ID", help="The bulk action's audit entry id.")
    ],
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Go on with a bulk action that stopped before the end (it failed, was interrupted, or
    its process died: no progress for a minute), from where it stopped."""
    if not audit_id.strip():
        fail("AUDIT_ID: must not be empty (see `dogs audit --action bulk_retry`)")
    container = connection.logged_container()
    progress = _Progress()

    async def go(client: DogsClient) -> BulkReport:
        return await client.resume_bulk(audit_id, on_progress=None if as_json else progress)

    report = _call(container, go)
    if as_json:
        print_json(bulk_json(report))
    else:
        typer.echo(bulk_summary(report))
    if not report.complete:
        raise typer.Exit(EXIT_NOT_DONE)
