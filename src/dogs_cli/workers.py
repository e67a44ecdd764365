"""``dogs workers``: the fleet of workers sharing the database, and quiet or stop one of them.

::

    dogs workers list [--json]
    dogs workers show ID [--json]             # ID: an instance id, or its first characters
    dogs workers quiet ID                     # claims nothing more; what runs finishes
    dogs workers stop ID [--grace 30s]        # drains with the grace, then stops

Each is one call of :class:`~dogs_core.runtime.client._async.client.DogsClient` (``workers``,
``worker``, ``quiet_worker``, ``stop_worker``), over the workers' registry: every Python
``Workers`` instance writes its document there every 10 s (Node Dogs workers do not). A command
reaches the worker with its next beat, within 10 s. Exit codes: 0 done, 1 no such live worker,
2 bad input or an unreachable server (one ``Error:`` line).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, TypeVar

import typer

from dogs_cli.common import (
    EXIT_NOT_DONE,
    Connection,
    connected_client,
    duration,
    fail,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.console_tables import print_worker, print_workers
from dogs_cli.tables import stamp
from dogs_core.domain.registry import DEFAULT_STOP_GRACE, WorkerInfo, liveness
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["workers_app"]

T = TypeVar("T")

workers_app = typer.Typer(
    name="workers",
    help="The workers sharing the database: list, show, quiet or stop one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

InstanceArgument = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="The worker's instance id, or its first characters.", show_default=False
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _call(connection: Connection, body: Callable[[DogsClient], Awaitable[T]]) -> T:
    container = connection.logged_container()

    async def go() -> T:
        async with connected_client(container) as client:
            with user_errors():
                return await body(client)

    return run(go)


def _instance(text: str) -> str:
    if not text.strip() or any(character.isspace() for character in text):
        fail(f"ID {text!r}: expected a worker's instance id (see `dogs workers list`)")
    return text


@workers_app.command("list")
@with_connection()
def list_workers(as_json: JsonOption = False, *, connection: Connection) -> None:
    """Every worker in the registry: state (running, quiet, stopping, stopped, lost), host and
    pid, slots in use, job names, uptime, last beat, and a command waiting for it."""

    async def go(client: DogsClient) -> tuple[list[WorkerInfo], datetime]:
        return await client.workers(), client.clock.now()

    workers, now = _call(connection, go)
    print_workers(workers, now, as_json=as_json)


@workers_app.command("show")
@with_connection()
def show(
    instance_id: InstanceArgument, as_json: JsonOption = False, *, connection: Connection
) -> None:
    """One worker: what it is and what it runs, since when (as of its last beat)."""
    wanted = _instance(instance_id)

    async def go(client: DogsClient) -> tuple[WorkerInfo | None, datetime]:
        return await client.worker(wanted), client.clock.now()

    info, now = _call(connection, go)
    if info is None:
        typer.echo(f"No worker {wanted} in the registry (see `dogs workers list`).")
        raise typer.Exit(EXIT_NOT_DONE)
    print_worker(info, now, as_json=as_json)


@workers_app.command("quiet")
@with_connection()
def quiet(instance_id: InstanceArgument, *, connection: Connection) -> None:
    """Ask a worker to claim nothing more; the jobs it runs finish. It keeps running (stop it
    after) and takes the command within 10 s (its next beat)."""
    wanted = _instance(instance_id)

    async def go(client: DogsClient) -> tuple[WorkerInfo | None, datetime]:
        return await client.quiet_worker(wanted), client.clock.now()

    info, now = _call(connection, go)
    _told(info, wanted, "quiet", now)


@workers_app.command("stop")
@with_connection()
def stop(
    instance_id: InstanceArgument,
    grace: Annotated[
        str,
        typer.Option(
            "--grace", help="How long its running jobs may finish before they are cancelled."
        ),
    ] = f"{int(DEFAULT_STOP_GRACE.total_seconds())}s",
    *,
    connection: Connection,
) -> None:
    """Ask a worker to stop: it claims nothing more, its jobs get --grace to finish, the rest
    are cancelled and their locks released, then it stops (`dogs worker` exits 0)."""
    wanted = _instance(instance_id)
    seconds = duration("--grace", grace)

    async def go(client: DogsClient) -> tuple[WorkerInfo | None, datetime]:
        return await client.stop_worker(wanted, grace=seconds), client.clock.now()

    info, now = _call(connection, go)
    _told(info, wanted, "stop", now)


def _told(info: WorkerInfo | None, wanted: str, action: str, now: datetime) -> None:
    if info is None:
        typer.echo(f"No live worker {wanted}: nothing to {action} (see `dogs workers list`).")
        raise typer.Exit(EXIT_NOT_DONE)
    typer.echo(
        f"Asked {info.instance_id} ({info.host}:{info.pid}, {liveness(info, now).value}) to "
        f"{action} at {stamp(now)}; it takes it with its next beat, within "
        f"{info.beat_interval.total_seconds():g} s."
    )
