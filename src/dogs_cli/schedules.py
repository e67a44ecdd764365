"""``dogs schedules``: recurring schedules managed at run time, from the shell.

::

    dogs schedules list [--limit 100] [--after ID] [--json] [--registry MODULE:REGISTRY]
    dogs schedules show ID [--json] [--registry MODULE:REGISTRY]
    dogs schedules set ID JOB (--cron EXPR --timezone TZ | --every 5m) [--params JSON]
                       [--misfire run_once|skip|run_all] [--priority N] [--paused]
                       [--registry MODULE:REGISTRY]
    dogs schedules pause ID
    dogs schedules resume ID
    dogs schedules delete ID

Each is one call of ``client.schedules`` (:mod:`dogs_core.runtime.client._async.schedules`).
``set`` is
an upsert (the same command twice changes nothing); with ``--registry`` the params are checked
against the job's model. A worker runs a schedule when it knows its job (no deploy needed);
code-defined recurrent jobs are listed too, marked ``code``: their rule lives in code, not in
the record, so ``list`` and ``show`` print it only when given ``--registry``. Exit codes: 0
done, 1 not done (no such schedule, or one defined in code), 2 bad input or an unreachable
server.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dogs_cli.common import (
    EXIT_NOT_DONE,
    AppDirOption,
    Connection,
    connected_client,
    duration,
    fail,
    flags_named,
    load_registry,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.tables import _console as console
from dogs_cli.tables import print_json, stamp
from dogs_core.domain.registry import WorkerState, liveness
from dogs_core.domain.runtime_schedules import schedule_spec
from dogs_core.domain.schedule_entries import RuntimeSchedule
from dogs_core.errors import MissingRoleError, ScheduleInCodeError, ScheduleNotFoundError
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["schedules_app"]

schedules_app = typer.Typer(
    name="schedules",
    help="Recurring schedules managed at run time: list, show, set, pause, resume, delete.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

IdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The schedule's id.", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="MODULE:REGISTRY",
        help="The code's registry: prints the rule of its recurrent jobs.",
    ),
]


def _call(
    connection: Connection, body: Any, registry: str | None = None, app_dir: Path = Path(".")
) -> Any:
    """Run ``body(client)``; a missing schedule or one defined in code exits 1."""
    jobs = None if registry is None else load_registry(registry, app_dir)
    container = connection.logged_container()

    async def go() -> Any:
        async with connected_client(container, jobs) as client:
            with user_errors():
                try:
                    return await body(client)
                except (ScheduleNotFoundError, ScheduleInCodeError) as error:
                    typer.echo(str(error))
                    raise typer.Exit(EXIT_NOT_DONE) from None

    return run(go)


def _json(schedule: RuntimeSchedule) -> dict[str, Any]:
    def iso(moment: datetime | None) -> str | None:
        return None if moment is None else moment.astimezone(UTC).isoformat()

    return {
        "id": schedule.id,
        "source": schedule.source,
        "job": schedule.job,
        "rule": schedule.rule,
        "params": schedule.params,
        "priority": schedule.priority,
        "paused": schedule.paused,
        "running": schedule.running,
        "next_run_at": iso(schedule.next_run_at),
        "last_run_at": iso(schedule.last_run_at),
        "misfire": None if schedule.spec is None else schedule.spec.misfire,
        "updated_at": iso(schedule.updated_at),
    }


def _state(schedule: RuntimeSchedule) -> str:
    return "paused" if schedule.paused else "running" if schedule.running else "active"


def _table(schedules: list[RuntimeSchedule]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("ID", "Source", "Job", "Rule", "State", "Next run", "Last run"):
        table.add_column(column)
    for s in schedules:
        table.add_row(
            s.id,
            s.source,
            s.job,
            s.rule or "-",
            _state(s),
            "-" if s.next_run_at is None else stamp(s.next_run_at),
            "-" if s.last_run_at is None else stamp(s.last_run_at),
        )
    return table


@schedules_app.command("list")
@with_connection()
def list_schedules(
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1 to 1000).")] = 100,
    after: Annotated[str | None, typer.Option("--after", help="Ids after this one.")] = None,
    as_json: JsonOption = False,
    registry: RegistryOption = None,
    app_dir: AppDirOption = Path("."),
    *,
    connection: Connection,
) -> None:
    """List the schedules by id: runtime ones and code-defined recurrent jobs."""
    listed: list[RuntimeSchedule] = _call(
        connection,
        lambda client: client.schedules.list(after=after, limit=limit),
        registry,
        app_dir,
    )
    if as_json:
        print_json([_json(s) for s in listed])
    elif not listed:
        typer.echo("No schedules.")
    else:
        console().print(_table(listed))


@schedules_app.command("show")
@with_connection()
def show(
    schedule_id: IdArgument,
    as_json: JsonOption = False,
    registry: RegistryOption = None,
    app_dir: AppDirOption = Path("."),
    *,
    connection: Connection,
) -> None:
    """Show one schedule: its job, rule, params, state and runs."""

    async def body(client: DogsClient) -> RuntimeSchedule:
        found = await client.schedules.get(schedule_id)
        if found is None:
            raise ScheduleNotFoundError(schedule_id)
        return found

    schedule = _call(connection, body, registry, app_dir)
    if as_json:
        print_json(_json(schedule))
        return
    for key, value in _json(schedule).items():
        shown = json.dumps(value) if isinstance(value, dict) else value
        typer.echo(f"{key:<12} {'-' if value is None else shown}")


@schedules_app.command("set")
@with_connection()
def set_schedule(
    schedule_id: IdArgument,
    job: Annotated[str, typer.Argument(metavar="JOB", help="The event job it runs.")],
    cron: Annotated[str | None, typer.Option("--cron", help="A cron expression.")] = None,
    timezone: Annotated[
        str | None, typer.Option("--timezone", help="The cron's IANA timezone.")
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="Or a period after each run, e.g. 5m.")
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", "-p", help="Params as a JSON object.")
    ] = None,
    misfire: Annotated[
        str, typer.Option("--misfire", help="run_once, skip or run_all.")
    ] = "run_once",
    priority: Annotated[int | None, typer.Option("--priority", help="Default 1000.")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create or keep it paused.")] = False,
    registry: Annotated[
        str | None,
        typer.Option("--registry", metavar="MODULE:REGISTRY", help="Check params by the job."),
    ] = None,
    app_dir: AppDirOption = Path("."),
    *,
    connection: Connection,
) -> None:
    """Create or change a schedule (an upsert: the same command twice changes nothing).
    Without --registry the job's name is checked against the names the running workers run
    (their registry): a name none of them runs is refused, as its schedule would stay due and
    never run; with no running worker registered a warning says the name was not checked."""
    period = None if every is None else duration("--every", every)
    flags = {
        "run_every": ("--every", every),
        "cron": ("--cron", cron),
        "timezone": ("--timezone", timezone),
        "misfire": ("--misfire", misfire),
    }
    with user_errors(), flags_named(flags):  # the rule, before connecting
        schedule_spec(job, cron=cron, timezone=timezone, every=period, misfire=misfire)
    try:
        parsed = None if params is None else json.loads(params)
    except json.JSONDecodeError as error:
        fail(f"--params {shlex.quote(params or '')}: not JSON ({error.msg})")
    if parsed is not None and not isinstance(parsed, dict):
        fail(f"--params {shlex.quote(params or '')}: must be a JSON object")

    async def body(client: DogsClient) -> Any:
        if registry is None:
            await _check_fleet_runs(client, job)
        return await client.schedules.upsert(
            schedule_id,
            job,
            cron=cron,
            timezone=timezone,
            every=period,
            params=parsed,
            misfire=misfire,
            priority=priority,
            paused=True if paused else None,
        )

    upserted = _call(connection, body, registry, app_dir)
    schedule = upserted.schedule
    next_run = schedule.next_run_at
    when = "paused" if next_run is None else f"next run {stamp(next_run)}"
    what = f"{schedule.rule} of {schedule.job}"
    typer.echo(f"{upserted.change.capitalize()} {schedule.id}: {what}, {when}")


async def _check_fleet_runs(client: DogsClient, job: str) -> None:
    """Refuse a job name that no running worker runs (the workers' registry knows what each
    runs); warn when no running worker is registered, as the name could not be checked."""
    try:
        workers = await client.workers()
    except MissingRoleError:
        workers = []
    now = client.clock.now()
    live = [w for w in workers if liveness(w, now) not in (WorkerState.STOPPED, WorkerState.LOST)]
    known = sorted({name for worker in live for name in worker.job_names})
    if live and job not in known:
        fail(
            f"JOB {shlex.quote(job)}: no running worker runs this job (they run "
            f"{', '.join(known)}): its schedule would stay due and never run. Check the "
            "name, or pass --registry MODULE:REGISTRY to check it against your code"
        )
    if not live:
        typer.echo(
            f"Warning: no running worker is registered, so the job name {shlex.quote(job)} was not "
            "checked: if no worker runs it, the schedule stays due and never runs (pass "
            "--registry MODULE:REGISTRY to check it against your code).",
            err=True,
        )


@schedules_app.command("pause")
@with_connection()
def pause(schedule_id: IdArgument, *, connection: Connection) -> None:
    """Pause a schedule: no run starts until it is resumed (a run under way finishes)."""
    schedule = _call(connection, lambda client: client.schedules.pause(schedule_id))
    typer.echo(f"Paused {schedule.id}: no run starts until dogs schedules resume {schedule.id}.")


@schedules_app.command("resume")
@with_connection()
def resume(schedule_id: IdArgument, *, connection: Connection) -> None:
    """Resume a paused schedule: its next run is its rule's next time."""
    schedule = _call(connection, lambda client: client.schedules.resume(schedule_id))
    next_run = "-" if schedule.next_run_at is None else stamp(schedule.next_run_at)
    typer.echo(f"Resumed {schedule.id}: next run {next_run}.")


@schedules_app.command("delete")
@with_connection()
def delete(schedule_id: IdArgument, *, connection: Connection) -> None:
    """Delete a schedule (a run under way is stopped, as an operator's delete stops one)."""
    deleted = _call(connection, lambda client: client.schedules.delete(schedule_id))
    if not deleted:
        typer.echo(f"Not found: no schedule {schedule_id}")
        raise typer.Exit(EXIT_NOT_DONE)
    typer.echo(f"Deleted {schedule_id}.")
