"""``dogs jobs logs``: the log lines a job's executions kept (jobs with ``store_logs``).

::

    dogs jobs logs ID                      # every line of the job (or of one execution), in order
    dogs jobs logs ID --follow             # and the new ones as they come, until the job ends
    dogs jobs logs ID --json               # one JSON document per line (JSON Lines)

``ID`` is a job id (every execution of it) or an execution id. One call of
:class:`~dogs_core.runtime.client._async.client.DogsClient` (``get_logs`` page after page, or
``follow_logs``). Exit codes: 0 when done (``--follow``: once the job has ended), 1 when no job
or execution has that id, 2 for bad input or an unreachable server, 130 when interrupted.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Annotated, TypeAlias

import typer

from dogs_cli.common import (
    Connection,
    connected_client,
    fail,
    flags_named,
    job_id_flag,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.tables import stamp
from dogs_core.domain import validation
from dogs_core.domain.log_lines import LogLine, check_line_id
from dogs_core.ids import parse_job_or_execution_id
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["format_line", "line_json", "logs"]

_PAGE = 1_000

_Show: TypeAlias = Callable[[LogLine], str]


def format_line(line: LogLine) -> str:
    """``2026-05-01 09:00:00.123Z INFO    [execution] message``, then the exception's lines."""
    millis = f"{line.time.microsecond // 1000:03d}"
    when = stamp(line.time).replace("Z", f".{millis}Z")
    text = f"{when} {line.level_name:<8} [{line.execution_id}] {line.message}"
    if line.exception:
        text += "\n" + "\n".join(f"    {row}" for row in line.exception.rstrip().splitlines())
    return text


def line_json(line: LogLine) -> str:
    """One line as one JSON document."""
    return json.dumps(
        {
            "id": line.id,
            "time": line.time.isoformat(),
            "level": line.level_name,
            "levelno": line.level,
            "message": line.message,
            "exception": line.exception,
            "job_id": line.job_id,
            "job_name": line.job_name,
            "execution_id": line.execution_id,
            "seq": line.seq,
            "trace_id": line.trace_id,
        }
    )


@with_connection()
def logs(
    job_id: Annotated[
        str,
        typer.Argument(metavar="ID", help="A job id, or an execution id.", show_default=False),
    ],
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Print new lines as they come, until the job ends."),
    ] = False,
    after: Annotated[
        str | None, typer.Option("--after", help="Only the lines after this line id.")
    ] = None,
    limit: Annotated[
        str, typer.Option("--limit", help="Most lines printed (without --follow).")
    ] = "10000",
    poll_interval: Annotated[
        str,
        typer.Option(
            "--poll-interval", help="With --follow where change streams are off: read this often."
        ),
    ] = "1s",
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON document per line (JSON Lines).")
    ] = False,
    *,
    connection: Connection,
) -> None:
    """Print the log lines a job kept (store_logs), or those of one of its executions."""
    with flags_named({"--poll-interval": ("--poll-interval", poll_interval)}):
        pause = validation.positive_duration("--poll-interval", poll_interval).total_seconds()
    job_id = job_id_flag("ID", job_id, parse_job_or_execution_id)
    after = job_id_flag("--after", after, check_line_id)
    most = _count("--limit", limit)
    show = line_json if as_json else format_line
    container = connection.logged_container()

    async def go() -> None:
        async with connected_client(container) as client:
            with user_errors():
                if follow:
                    await _follow(client, job_id, after, pause, show)
                else:
                    await _print_all(client, job_id, after, most, show)

    try:
        run(go)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _count(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        fail(f"{flag} {shlex.quote(text)}: must be an integer")
    if value < 1:
        fail(f"{flag} {text}: must be at least 1")
    return value


async def _print_all(
    client: DogsClient, job_id: str, after: str | None, limit: int, show: _Show
) -> None:
    printed = 0
    while printed < limit:
        page = await client.get_logs(job_id, after=after, limit=min(_PAGE, limit - printed))
        for line in page:
            typer.echo(show(line))
        printed += len(page)
        if len(page) < _PAGE:
            return
        after = page[-1].id


async def _follow(
    client: DogsClient, job_id: str, after: str | None, pause: float, show: _Show
) -> None:
    async for line in client.follow_logs(job_id, after=after, poll_interval=pause):
        typer.echo(show(line))
    typer.echo(f"-- {job_id} has ended", err=True)
