"""``dogs history``, ``dogs errors`` and ``dogs find``: finished executions across every job,
the errors of a window grouped, and one job wherever it is (live, finished or archived).

::

    dogs history [--name N] [--job-id ID] [--status error] [--error-type T] [--owner HOST]
                 [--since 2h] [--until 2026-01-01T09:00Z] [--param user.id=42]
                 [--unique-key K] [--archived] [--limit 20] [--before CURSOR] [--json]
    dogs errors [--name N] [--window 1h] [--max-rows 50000] [--json]
    dogs find ID_OR_UNIQUE_KEY [--name N --registry MODULE:REGISTRY] [--json]

Each is a call of the client's inspection half (``find_executions``, ``archived_executions``,
``errors``, ``lookup``), served by the store's inspection role (docs/finding.md says which index
serves which filter). A time is ISO 8601 with a timezone, or a duration meaning that long ago
(``--since 2h``). Bad input is one ``Error:`` line and exit code 2; ``dogs find`` exits 1 when
nothing matches.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from dogs_cli.common import (
    EXIT_NOT_DONE,
    AppDirOption,
    Connection,
    connected_client,
    fail,
    filter_flags,
    filter_keywords,
    flags_named,
    job_id_flag,
    load_registry,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.output import wide_console
from dogs_cli.tables import history_json, history_table, print_json, stamp
from dogs_core.domain.filters import EXECUTION_FILTERS, parse_window
from dogs_core.domain.finding import (
    DEFAULT_ERROR_ROWS,
    ErrorReport,
    ExecutionPage,
    JobLookup,
)
from dogs_core.domain.tracebacks import fold_traceback
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["errors", "find", "history"]

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _count(flag: str, text: str, maximum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        fail(f"{flag} {shlex.quote(text)}: must be an integer")
    if not 1 <= value <= maximum:
        fail(f"{flag} {text}: must be between 1 and {maximum:,}")
    return value


def _text(flag: str, text: str | None) -> str | None:
    if text is not None and not text.strip():
        fail(f"{flag} {shlex.quote(text)}: must not be empty")
    return text


def _client_call(connection: Connection, body: Any, registry: str | None = None,
                 app_dir: Path = Path(".")) -> Any:  # fmt: skip
    jobs = None if registry is None else load_registry(registry, app_dir)
    container = connection.logged_container()

    async def go() -> Any:
        async with connected_client(container, jobs) as client:
            with user_errors():
                return await body(client)

    return run(go)


# -- dogs history ------------------------------------------------------------------------------


@filter_flags(EXECUTION_FILTERS)
@with_connection()
def history(
    archived: Annotated[
        bool, typer.Option("--archived", help="Search the archive (dogs archive) instead.")
    ] = False,
    limit: Annotated[str, typer.Option("--limit", help="Executions per page.")] = "20",
    before: Annotated[
        str | None, typer.Option("--before", help="The cursor printed by the previous page.")
    ] = None,
    as_json: JsonOption = False,
    *,
    connection: Connection,
    filter_texts: dict[str, str],
) -> None:
    """Finished executions, newest first, of every job or by name, job, status, error type,
    owner, start time, params or unique key; --archived searches the archive."""
    for one in EXECUTION_FILTERS:
        _text(one.flag, filter_texts.get(one.key))
    _text("--before", before)
    size = _count("--limit", limit, 1000)
    now = datetime.now(UTC)
    keywords = filter_keywords(EXECUTION_FILTERS, filter_texts, now)
    if "job_id" in filter_texts:
        keywords["job_id"] = job_id_flag("--job-id", filter_texts["job_id"])

    async def go(client: DogsClient) -> tuple[ExecutionPage, datetime]:
        search = client.archived_executions if archived else client.find_executions
        page = await search(**keywords, limit=size, before=before)  # type: ignore[arg-type]
        return page, client.clock.now()

    page, read_at = _client_call(connection, go)
    flags = {one.key: one.flag for one in EXECUTION_FILTERS}
    again = [f"{flags[key]} {shlex.quote(value)}" for key, value in filter_texts.items()]
    again.append(f"--limit {shlex.quote(limit)}")
    following = None
    if page.next_before is not None:
        words = ["dogs history", *again, *(["--archived"] if archived else [])]
        following = " ".join([*words, "--before", shlex.quote(page.next_before)])
    _print_executions(page, read_at, as_json=as_json, following=following, archived=archived)


def _print_executions(
    page: ExecutionPage, now: datetime, *, as_json: bool, following: str | None, archived: bool
) -> None:
    """The page as a table (or a JSON list of executions), then the next page's command (on
    stderr with --json, so the list stays what scripts read)."""
    if as_json:
        rows = [history_json(row) for row in page.rows]
        for row, moment in zip(rows, page.archived_at, strict=False):
            row["archived_at"] = None if moment is None else moment.isoformat()
        print_json(rows)
        if following is not None:
            typer.echo(f"Next page: {following}", err=True)
        return
    console = wide_console()
    if not page.rows:
        where = " in the archive" if archived else ""
        console.print(f"No executions match{where}.", highlight=False)
    else:
        title = "Archived executions" if archived else "Executions, newest first"
        console.print(history_table(page.rows, now, title=title))
    if following is not None:
        console.print(f"Next page: {following}", highlight=False, soft_wrap=True)


# -- dogs errors -------------------------------------------------------------------------------


@with_connection()
def errors(
    name: Annotated[str | None, typer.Option("--name", help="Only this job name.")] = None,
    window: Annotated[
        str, typer.Option("--window", help="How far back from now, e.g. 15m, 1h, 2d (at most 7d).")
    ] = "1h",
    max_rows: Annotated[
        str,
        typer.Option("--max-rows", help="Group at most the newest this many error rows."),
    ] = str(DEFAULT_ERROR_ROWS),
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """The errors of the last --window grouped by type and message (numbers and ids alike),
    most frequent first: how many, when first and last, of which jobs, and the newest one with
    its traceback (the scheduler's frames folded)."""
    _text("--name", name)
    rows = _count("--max-rows", max_rows, 500_000)
    with flags_named({"--window": ("--window", window)}):
        length = parse_window("--window", window)

    async def go(client: DogsClient) -> ErrorReport:
        return await client.errors(name, window=length, max_rows=rows)

    report: ErrorReport = _client_call(connection, go)
    if as_json:
        print_json(_report_json(report))
        return
    _print_report(report)


def _report_json(report: ErrorReport) -> dict[str, Any]:
    return {
        "since": report.since,
        "until": report.until,
        "job_name": report.job_name,
        "examined": report.examined,
        "truncated": report.truncated,
        "groups": [
            {
                "error_type": group.error_type,
                "fingerprint": group.fingerprint,
                "count": group.count,
                "first_seen": group.first_seen,
                "last_seen": group.last_seen,
                "job_names": list(group.job_names),
                "messages": list(group.messages),
                "newest": None if group.newest is None else history_json(group.newest),
            }
            for group in report.groups
        ],
    }


def _print_report(report: ErrorReport) -> None:
    console = wide_console()
    span = f"{stamp(report.since)} to {stamp(report.until)}"
    of = f" of {report.job_name}" if report.job_name else ""
    if not report.groups:
        console.print(f"No errors{of} from {span}.", highlight=False)
        return
    table = Table(title=f"Errors{of}, {span}: {report.examined:,} in {len(report.groups)} groups")
    for column in ("Count", "Error type", "Message", "Jobs", "First", "Last", "Newest"):
        table.add_column(column, justify="right" if column == "Count" else "left",
                         overflow="fold")  # fmt: skip
    for group in report.groups:
        message = group.messages[0] if len(group.messages) == 1 else group.fingerprint
        table.add_row(
            f"{group.count:,}",
            group.error_type,
            Text(message),
            ", ".join(group.job_names),
            stamp(group.first_seen),
            stamp(group.last_seen),
            "-" if group.newest is None else group.newest.job_id,
        )
    console.print(table)
    if report.truncated:
        console.print(
            f"Only the newest {report.examined:,} errors of the window were grouped "
            "(--max-rows, or a shorter --window).",
            highlight=False,
        )
    newest = report.groups[0].newest
    if newest is not None and newest.error_traceback:
        console.print(
            f"Traceback of the newest {report.groups[0].error_type} "
            f"(job {newest.job_id}, `dogs jobs show {newest.job_id}`):",
            highlight=False,
        )
        console.print(Text(fold_traceback(newest.error_traceback).short()), soft_wrap=True)


# -- dogs find ---------------------------------------------------------------------------------


@with_connection()
def find(
    query: Annotated[
        str, typer.Argument(metavar="ID_OR_UNIQUE_KEY", help="A job id or a unique key.")
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="With --registry: the job whose scope holds the key."),
    ] = None,
    registry: Annotated[
        str | None,
        typer.Option("--registry", metavar="MODULE:REGISTRY", help="The registry of --name."),
    ] = None,
    app_dir: AppDirOption = Path("."),
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Find a job by id or unique key wherever it is: its live record, its finished executions
    (its record gone), or the archive. Exit 1 when nothing matches."""
    if not query.strip():
        fail(f"ID_OR_UNIQUE_KEY {shlex.quote(query)}: must not be empty")
    if name is not None and registry is None:
        fail("--name needs --registry MODULE:REGISTRY: the job's definition says its key scope")

    async def go(client: DogsClient) -> tuple[JobLookup, datetime]:
        return await client.lookup(query.strip(), job=name), client.clock.now()

    lookup, now = _client_call(connection, go, registry, app_dir)
    if as_json:
        print_json(_lookup_json(lookup))
    else:
        _print_lookup(lookup, now)
    if not lookup.jobs:
        raise typer.Exit(EXIT_NOT_DONE)


def _lookup_json(lookup: JobLookup) -> dict[str, Any]:
    return {
        "query": lookup.query,
        "matched_by": lookup.matched_by,
        "jobs": [
            {
                "job_id": job.job_id,
                "job_name": job.job_name,
                "where": job.where,
                "archived_at": job.archived_at,
                "newest": None if job.newest is None else history_json(job.newest),
            }
            for job in lookup.jobs
        ],
    }


def _print_lookup(lookup: JobLookup, now: datetime) -> None:
    console = wide_console()
    if not lookup.jobs:
        console.print(
            f"No job with the id or unique key {lookup.query!r}: not live, not in the history, "
            "not in the archive.",
            highlight=False,
        )
        return
    table = Table(title=f"Jobs with the {lookup.matched_by} {lookup.query}")
    for column in ("Job id", "Job", "Where", "State or last outcome", "Since"):
        table.add_column(column, overflow="fold")
    for job in lookup.jobs:
        since: datetime | None
        if job.where == "live" and job.record is not None:
            state, since = job.record.state(now).value, job.record.next_run_at
        elif job.newest is not None:
            state, since = job.newest.status.value, job.newest.ended_at
        else:
            state, since = "failed", job.archived_at
        if job.where == "archived" and job.archived_at is not None:
            state += f" (archived {stamp(job.archived_at)})"
        table.add_row(
            job.job_id, job.job_name, job.where, state, "-" if since is None else stamp(since)
        )
    console.print(table)
    console.print("`dogs jobs show ID` shows one of them.", highlight=False)
