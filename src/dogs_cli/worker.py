"""``dogs worker``: run the workers of a registry until SIGTERM or SIGINT, then drain.

::

    dogs worker myapp.jobs:jobs --uri mongodb://localhost/app --workers-count 16
                [--grace 30s] [--log-jobs] [--metrics-port N] [every worker option's flag]

Every worker option of :data:`~dogs_core.runtime.plumbing.settings.WORKER_OPTIONS` that has a flag
is a
flag of this command, checked before connecting (a bad value names its flag, exit 2). On SIGTERM
or SIGINT it stops claiming, lets running jobs finish for ``--grace`` (30 s), cancels what is
left and releases those locks so other workers pick the jobs up at once, then exits 0. A second
signal exits at once with a non-zero code (the locks of jobs still running then expire after
their lock time, as after a crash).

A server that does not answer at startup is waited for, as a running worker rides out an
outage: the workers retry it for ``--startup-timeout`` (30 s), a WARNING line per attempt, then
the command exits 2 saying so. A server that refuses (authentication) or a bad URI exits 2 at
once.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.abc
import typer

from dogs_cli.common import (
    AppDirOption,
    Connection,
    LogLevel,
    NPartitionsOption,
    RegistryArgument,
    connect,
    duration,
    fail,
    flags_named,
    leaf,
    load_registry,
    run,
    setup_logging,
    user_errors,
    with_connection,
    worker_flag_names,
)
from dogs_core.errors import StartupTimeoutError
from dogs_core.jobs import Jobs
from dogs_core.runtime.plumbing.settings import (
    WORKER_OPTIONS,
    WorkerOption,
    WorkerSettings,
    worker_option,
)
from dogs_core.runtime.worker.health import serve_health
from dogs_core.runtime.worker.workers import Workers
from dogs_core.uris import redact_uri
from dogs_mongo.container import DogsContainer

__all__ = ["worker"]

logger = logging.getLogger("dogs.cli")


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
    (:data:`~dogs_core.runtime.plumbing.settings.WORKER_OPTIONS`) that has one and that the command
    does
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
    with user_errors(), flags_named(worker_flag_names(flags, n_partitions)):
        options: dict[str, Any] = {
            name: worker_option(name).from_text(text) for name, text in flags.items()
        }
        options["n_partitions"] = n_partitions
        WorkerSettings(**options)
    return options


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
            # "\[": Rich would take a bare "[prometheus]" for markup and print nothing of it.
            help="Serve Prometheus metrics on this port (all interfaces; needs the "
            "dogs-py\\[prometheus] extra: pip install 'dogs-py\\[prometheus]').",
            show_default=False,
        ),
    ] = None,
    health_port: Annotated[
        int | None,
        typer.Option(
            "--health-port",
            help="Serve /healthz (liveness) and /readyz (readiness) on this port (all interfaces).",
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
    health = _health_server(health_port)
    container = connection.container(worker_flag_names(worker_flags, n_partitions), **options)

    startup = WorkerSettings(**options).startup_timeout
    waits = "waiting" if startup is None else f"waiting up to {startup.total_seconds():g}s"

    async def serve() -> None:
        try:
            # A server down at startup is waited for by the workers (startup_timeout), as a
            # running worker rides out an outage; a refusal or a bad URI fails at once.
            await connect(container, unreachable_ok=f"{waits} for it (--startup-timeout)")
            with user_errors():
                workers = container.workers(jobs)
            async with contextlib.AsyncExitStack() as around:
                with user_errors():
                    await around.enter_async_context(metrics(workers))
                with user_errors(), flags_named({"health_port": ("--health-port", health_port)}):
                    await around.enter_async_context(health(workers))
                try:
                    await _serve_workers(workers, jobs, grace_seconds)
                except Exception as error:  # the workers' task group raises a group
                    _exit_if_unreachable(leaf(error), container)
                    raise
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


def _exit_if_unreachable(error: BaseException, container: DogsContainer) -> None:
    """Exit 2 when the workers gave up waiting for the server at startup."""
    if isinstance(error, StartupTimeoutError):
        uri = redact_uri(container.settings().required_uri())
        fail(
            f"cannot reach MongoDB at {uri} within {error.startup_timeout:g}s of starting "
            f"(--startup-timeout): {error.last_error or 'no answer'}"
        )


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


def _health_server(port: int | None) -> Callable[[Workers], AbstractAsyncContextManager[object]]:
    """What ``--health-port`` runs around the workers: nothing without it; with it,
    ``/healthz`` and ``/readyz`` (dogs_core.runtime.worker.health) served on the port."""
    if port is None:
        return lambda workers: contextlib.nullcontext()
    if not 0 <= port <= 65535:
        fail(f"--health-port {port}: must be a port number from 0 to 65535")
    return lambda workers: serve_health(workers, port=port)


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
