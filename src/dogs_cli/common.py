"""What every ``dogs`` command shares: the database options (:func:`with_connection` adds them
to a command, which gets one :class:`Connection`), the one-line errors (exit 2 for bad
input), loading a registry, the container of the options given, the connection check and the
run of an async body.

Every command module of :mod:`dogs_cli` builds on this module, so none imports another's
commands.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import inspect
import logging
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, NoReturn, TypeVar, overload

import anyio
import anyio.to_thread
import typer
from pymongo.errors import ConfigurationError, OperationFailure, PyMongoError
from typer._click import exceptions as usage  # Typer's own click: what its parser raises
from typer.core import TyperGroup

from dogs_core.domain import filters, validation
from dogs_core.domain.finding import OwnerMatch, ParamsMatch
from dogs_core.errors import (
    DogsError,
    InvalidIdError,
    JobNotRegisteredError,
    UnknownJobError,
    ValidationError,
)
from dogs_core.ids import parse_id
from dogs_core.jobs import Jobs
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.plumbing.actors import acting_as, process_actor
from dogs_core.runtime.plumbing.settings import worker_option
from dogs_mongo import queries as q
from dogs_mongo.container import DogsContainer, redact_uri

__all__ = [
    "ENV_DATABASE",
    "ENV_N_PARTITIONS",
    "ENV_URI",
    "EXIT_BAD_INPUT",
    "EXIT_NOT_DONE",
    "AppDirOption",
    "Connection",
    "ControlsOption",
    "DatabaseOption",
    "DriverChoice",
    "DriverOption",
    "HistoryOption",
    "LogLevel",
    "LogLevelOption",
    "NPartitionsOption",
    "OneLineErrors",
    "RecordsOption",
    "RegistryArgument",
    "TimeoutOption",
    "UriOption",
    "check_search_flags",
    "connect",
    "connected_client",
    "container_defaults",
    "duration",
    "fail",
    "filter_flags",
    "filter_keywords",
    "flags_named",
    "job_id_flag",
    "leaf",
    "load_registry",
    "make_container",
    "moment_flag",
    "parse_run_at",
    "priority_flag",
    "run",
    "setup_logging",
    "user_errors",
    "when",
    "with_connection",
    "worker_flag_names",
]

T = TypeVar("T")

logger = logging.getLogger("dogs.cli")

ENV_URI = "DOGS_MONGODB_URI"
ENV_DATABASE = "DOGS_MONGODB_DATABASE"
ENV_N_PARTITIONS = "DOGS_N_PARTITIONS"
EXIT_BAD_INPUT = 2
#: The job was not in a state for the action (not found, running, already finished).
EXIT_NOT_DONE = 1


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
ControlsOption = Annotated[
    str,
    typer.Option(
        "--controls-collection",
        help="Controls collection (pauses, concurrency slots, rate windows, leases).",
        rich_help_panel="Database",
    ),
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


class OneLineErrors(TyperGroup):
    """The root group of ``dogs``: a value the command line refuses (a bad ``--priority
    1e20``, an unknown option, a missing argument) ends with one ``Error:`` line naming it and
    exit code 2, as every check of our own does, instead of Typer's boxed usage error. A group
    called without a command still prints its help."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except usage.NoArgsIsHelpError as shown:
            shown.show()
            sys.exit(shown.exit_code)
        except usage.ClickException as refused:
            typer.secho(f"Error: {_one_line(refused)}", err=True, fg=typer.colors.RED)
            sys.exit(refused.exit_code)
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _one_line(refused: usage.ClickException) -> str:
    """What the command line refused, on one line, with where to read the usage."""
    text = " ".join(refused.format_message().split())
    path = getattr(getattr(refused, "ctx", None), "command_path", None)
    if isinstance(path, str) and path:
        text += f" (see {path} --help)"
    return text


def short_mongo_error(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    # ServerSelectionTimeoutError carries the whole topology description after the reason.
    for marker in (", Timeout:", " (configured timeouts"):
        index = text.find(marker)
        if index > 0:
            text = text[:index]
    return text if len(text) <= 300 else text[:297] + "..."


def leaf(error: BaseException) -> BaseException:
    """The first non-group exception of a (nested) exception group, else ``error``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn validation errors of the library into the one-line exit-2 message."""
    try:
        yield
    except BaseExceptionGroup as group:
        first = leaf(group)
        if isinstance(first, typer.Exit | DogsError):
            with user_errors():
                raise first from None
        raise
    except (ValidationError, UnknownJobError, JobNotRegisteredError) as error:
        fail(str(error))
    except DogsError as error:
        fail(str(error), code=1)


@contextlib.contextmanager
def flags_named(flags: Mapping[str, tuple[str, object]]) -> Iterator[None]:
    """Report a validation error of an option the user gave as a flag as ``--flag VALUE:
    reason``: ``flags`` maps the option's field name to the flag and the text typed."""
    try:
        yield
    except ValidationError as error:
        if error.field not in flags:
            raise
        flag, typed = flags[error.field]
        fail(f"{flag} {shlex.quote(str(typed))}: {error.reason}")


def worker_flag_names(flags: Mapping[str, str], n_partitions: int) -> dict[str, tuple[str, object]]:
    """What :func:`flags_named` needs for the worker options typed as flags (option name -> text
    typed) and ``--n-partitions``, which every command that builds a container takes."""
    typed: dict[str, object] = {**flags, "n_partitions": n_partitions}
    return {name: (str(worker_option(name).flag), text) for name, text in typed.items()}


@overload
def job_id_flag(flag: str, text: str, parse: Callable[[str], str | None] = ...) -> str: ...
@overload
def job_id_flag(flag: str, text: None, parse: Callable[[str], str | None] = ...) -> None: ...
@overload
def job_id_flag(
    flag: str, text: str | None, parse: Callable[[str], str | None] = ...
) -> str | None: ...
def job_id_flag(
    flag: str, text: str | None, parse: Callable[[str], str | None] = parse_id
) -> str | None:
    """An id typed as ``flag`` (``ID``, ``--after``, ``--job-id``), checked by the library's
    own parser (``parse``: :func:`dogs_core.ids.parse_id` for a job's, a workflow's or an
    audit entry's id, which are UUIDs in any case) and given in its stored form; anything else
    fails naming the flag, before any read (a typo would find nothing)."""
    if text is None:
        return None
    try:
        parsed = parse(text)
    except InvalidIdError as error:
        fail(f"{flag} {shlex.quote(text)}: {error.reason}")
    assert parsed is not None
    return parsed


def check_search_flags(*, param: str | None = None, owner: str | None = None) -> None:
    """``--param PATH=VALUE`` and ``--owner`` checked before any connection (the client parses
    them again)."""
    with flags_named({"params": ("--param", param), "owner": ("--owner", owner)}):
        if param is not None:
            ParamsMatch.parse(param)
        if owner is not None:
            OwnerMatch.parse(owner)


def priority_flag(text: str | None, flag: str = "--priority") -> int | None:
    """``--priority`` typed as ``text``: an integer a Node Dogs worker can read (higher runs
    first); a bad one fails naming the flag and the text."""
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        fail(f"{flag} {shlex.quote(text)}: must be an integer (higher runs first)")
    with flags_named({"priority": (flag, text)}):
        return validation.priority("priority", value)


def run(func: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body on asyncio (PyMongo's async client needs it)."""
    with user_errors():
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


def make_container(
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
    with user_errors(), flags_named(named):
        container = DogsContainer(
            **{
                **_CONTAINER_DEFAULTS.get(),
                "uri": uri or None,
                "database": database,
                "driver": driver.value,
                "server_selection_timeout": timeout,
                "records_collection": records_collection,
                "history_collection": history_collection,
                **options,
            }
        )
        container.settings()  # validate now, before any connection
    if not uri:
        fail(f"no MongoDB URI: pass --uri or set ${ENV_URI}")
    return container


#: Container options that a framework's command (``manage.py dogs_worker``, ``flask dogs
#: worker``) gives the containers the commands build; the command line's options win.
_CONTAINER_DEFAULTS: ContextVar[Mapping[str, Any]] = ContextVar(
    "dogs_container_defaults", default=MappingProxyType({})
)


@contextlib.contextmanager
def container_defaults(options: Mapping[str, Any]) -> Iterator[None]:
    """While inside, every container a command builds starts from ``options`` (see
    :mod:`dogs_integrations.frameworks`)."""
    token = _CONTAINER_DEFAULTS.set(dict(options))
    try:
        yield
    finally:
        _CONTAINER_DEFAULTS.reset(token)


@dataclass(frozen=True, slots=True)
class Connection:
    """The database options of a command, as :func:`with_connection` hands them to it."""

    uri: str | None
    database: str | None
    driver: DriverChoice
    timeout: float
    records_collection: str
    history_collection: str
    log_level: LogLevel
    #: ``None`` when the command has no ``--controls-collection`` (the container's default).
    controls_collection: str | None = None

    def container(
        self, flags: Mapping[str, tuple[str, object]] | None = None, **options: Any
    ) -> DogsContainer:
        """The container of these options (see :func:`make_container`)."""
        if self.controls_collection is not None:
            options["controls_collection"] = self.controls_collection
        return make_container(
            self.uri,
            self.database,
            self.driver,
            self.timeout,
            self.records_collection,
            self.history_collection,
            flags,
            **options,
        )

    def logged_container(self) -> DogsContainer:
        """The log set up at ``--log-level``, then the container of these options."""
        setup_logging(self.log_level)
        return self.container()


def _connection_parameters(log_level: LogLevel, controls: bool) -> list[inspect.Parameter]:
    options: list[tuple[str, object, object]] = [
        ("uri", UriOption, None),
        ("database", DatabaseOption, None),
        ("driver", DriverOption, DriverChoice.ASYNC),
        ("timeout", TimeoutOption, 5.0),
        ("records_collection", RecordsOption, q.DEFAULT_RECORDS_COLLECTION),
        ("history_collection", HistoryOption, q.DEFAULT_HISTORY_COLLECTION),
    ]
    if controls:
        options.append(("controls_collection", ControlsOption, q.DEFAULT_CONTROLS_COLLECTION))
    options.append(("log_level", LogLevelOption, log_level))
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=info)
        for name, info, default in options
    ]


def with_connection(
    *, log_level: LogLevel = LogLevel.WARNING, controls: bool = False
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the database options (``--uri``, ``--database``, ``--driver``,
    ``--timeout``, ``--records-collection``, ``--history-collection``, with ``controls``
    ``--controls-collection``) and ``--log-level`` (default ``log_level``) where its signature
    declares the keyword-only ``connection: Connection``; the command receives them as that one
    :class:`Connection`."""
    added = _connection_parameters(log_level, controls)

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        if "connection" not in signature.parameters:
            raise TypeError(f"{command.__name__} declares no connection parameter")
        params: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            params += added if parameter.name == "connection" else [parameter]

        @functools.wraps(command)
        def with_database(**kwargs: Any) -> None:
            given = {parameter.name: kwargs.pop(parameter.name) for parameter in added}
            command(**kwargs, connection=Connection(**given))

        setattr(with_database, "__signature__", signature.replace(parameters=params))  # noqa: B010
        with_database.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return with_database

    return decorate


async def connect(container: DogsContainer, *, unreachable_ok: str | None = None) -> None:
    """Build the store and ping the server; fail with one line when either cannot be done.
    ``unreachable_ok``: a server that does not answer is not fatal but logged as a WARNING
    ending with this text (what waits for it instead); a refusal or a bad configuration still
    fails."""
    settings = container.settings()
    uri = redact_uri(settings.required_uri())
    try:
        with user_errors():
            container.store()  # creates the client: a bad URI or database fails here
        client = container.mongo_client()
        if settings.driver == "async":
            await client.admin.command("ping")
        else:
            await anyio.to_thread.run_sync(client.admin.command, "ping")
    except OperationFailure as error:
        fail(f"MongoDB at {uri} refused the connection: {short_mongo_error(error)}")
    except ConfigurationError as error:
        fail(f"bad MongoDB configuration for {uri}: {short_mongo_error(error)}")
    except PyMongoError as error:
        timeout = settings.server_selection_timeout or timedelta(seconds=30)
        if unreachable_ok is not None:
            logger.warning(
                "cannot reach MongoDB at %s yet (%s): %s",
                uri,
                short_mongo_error(error),
                unreachable_ok,
            )
            return
        fail(
            f"cannot reach MongoDB at {uri} within {timeout.total_seconds():g}s "
            f"(--timeout): {short_mongo_error(error)}"
        )


@contextlib.asynccontextmanager
async def connected_client(
    container: DogsContainer, jobs: Jobs | None = None
) -> AsyncIterator[DogsClient]:
    """The container's client (of ``jobs``) once the server answered; the container is closed
    when the block ends."""
    try:
        await connect(container)
        with acting_as(process_actor("cli")):  # the audit trail names the OS user
            yield container.client(jobs)
    finally:
        with anyio.CancelScope(shield=True):
            await container.aclose()


def setup_logging(level: LogLevel) -> None:
    logging.basicConfig(
        level=getattr(logging, level.value),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )


# -- times -------------------------------------------------------------------------------------


def duration(flag: str, value: str) -> timedelta:
    """``value`` of ``flag`` as a duration; a bad one fails naming the flag."""
    with flags_named({flag: (flag, value)}):
        return validation.duration(flag, value)


def when(run_in: str | None, run_at: str | None) -> dict[str, Any]:
    """``run_in`` / ``run_at`` of ``--run-in`` / ``--run-at`` (at most one of them)."""
    if run_in is not None and run_at is not None:
        fail("pass either --run-in or --run-at, not both")
    if run_in is not None:
        return {"run_in": duration("--run-in", run_in)}
    return {} if run_at is None else {"run_at": parse_run_at(run_at)}


def moment_flag(flag: str, text: str | None, now: datetime) -> datetime | None:
    """``text`` of ``flag``, read as every edge reads a time
    (:func:`dogs_core.domain.filters.parse_moment`: a duration ago such as ``2h``, or ISO 8601,
    UTC when it names no zone)."""
    if text is None:
        return None
    with flags_named({flag: (flag, text)}):
        return filters.parse_moment(flag, text, now)


def filter_flags(
    table: Sequence[filters.Filter],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command one flag per filter of ``table`` (its ``flag`` and ``help``, declared once
    in :mod:`dogs_core.domain.filters`); the command receives what was typed as
    ``filter_texts`` (filter key -> text) and reads it with :func:`filter_keywords`."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        params = [p for p in signature.parameters.values() if p.name != "filter_texts"]
        # The filters first, as a command's help lists them (each has a default, so any
        # parameter may follow).
        added = [
            inspect.Parameter(
                one.key,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=None,
                annotation=Annotated[str | None, typer.Option(one.flag, help=one.help)],
            )
            for one in table
        ]
        params[0:0] = added

        @functools.wraps(command)
        def with_filters(**kwargs: Any) -> None:
            texts = {one.key: kwargs.pop(one.key) for one in table}
            command(**kwargs, filter_texts={k: v for k, v in texts.items() if v is not None})

        setattr(with_filters, "__signature__", signature.replace(parameters=params))  # noqa: B010
        with_filters.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return with_filters

    return decorate


def filter_keywords(
    table: Sequence[filters.Filter], texts: Mapping[str, str], now: datetime
) -> dict[str, object]:
    """The client keywords of the filters typed
    (:func:`dogs_core.domain.filters.filters_from_text`);
    a bad one fails naming its flag and the text typed (exit 2)."""
    flags = {one.key: (one.flag, texts.get(one.key)) for one in table}
    with flags_named(flags):
        return filters.filters_from_text(table, texts, now)


def parse_run_at(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        fail(f"--run-at={value!r}: expected an ISO 8601 time such as 2026-01-01T09:00:00+00:00")
    if moment.tzinfo is None:
        fail(f"--run-at={value!r}: add a timezone, e.g. {value}Z or {value}+02:00")
    return moment
