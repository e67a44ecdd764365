"""``dogs jobs``: see and steer single jobs from the shell (``dogs history`` is in
:mod:`dogs_cli.finding`).

::

    dogs jobs list [--name N] [--state failed] [--unique-key K] [--tag T] [--limit 20] [--json]
    dogs jobs show ID [--json]
    dogs jobs cancel ID | --unique-key K [--name N --registry MODULE:REGISTRY]
    dogs jobs retry ID
    dogs jobs reschedule ID (--run-in 10m | --run-at 2026-01-01T09:00Z) [--priority 5]
    dogs jobs delete ID
    dogs jobs delete --state failed [--name N] [--yes]      # without --yes: a dry run

Each command is one call of :class:`~dogs_core.runtime.client._async.client.DogsClient`
(``find_jobs``,
``get_job`` and ``get_executions``, ``cancel``, ``retry_now``, ``reschedule``, ``delete``,
``delete_jobs``). Exit codes: 0 when it was done, 1 when the job was not in a state for it (not
found, running, already over), 2 for bad input or an unreachable server (one ``Error:`` line).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer

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
    priority_flag,
    run,
    user_errors,
    when,
    with_connection,
)
from dogs_cli.tables import (
    cancel_message,
    delete_message,
    print_job,
    print_page,
    reschedule_message,
)
from dogs_core.domain.audit import JobFate
from dogs_core.domain.filters import RECORD_FILTERS, SEARCH_KEYWORDS
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord, JobState, JobType
from dogs_core.domain.steering import (
    MAX_PAGE_SIZE,
    Cancelled,
    CancelOutcome,
    Deleted,
    DeleteOutcome,
    JobPage,
    Rescheduled,
    RescheduleOutcome,
    check_bulk_state,
    check_state,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import Role, has_role
from dogs_core.runtime.client._async.client import DogsClient
from dogs_mongo.container import DogsContainer

__all__ = ["jobs_app"]

T = TypeVar("T")

jobs_app = typer.Typer(
    name="jobs",
    help="See and steer single jobs: list, show, logs, cancel, retry, reschedule, delete.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JobIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The job's id.", show_default=False)
]
OptionalJobIdArgument = Annotated[
    str | None, typer.Argument(metavar="[ID]", help="The job's id.", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
NameOption = Annotated[str | None, typer.Option("--name", help="Only the jobs of this name.")]
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="MODULE:REGISTRY",
        help="The Jobs registry of the job: it says whether a unique key is scoped per job, "
        "and gives a recurrent job's schedule (needed to cancel its run).",
    ),
]


# -- the connection and the inputs -------------------------------------------------------------


def _call(
    container: DogsContainer,
    body: Callable[[DogsClient], Awaitable[T]],
    jobs: Jobs | None = None,
) -> T:
    """Run ``body`` with the client of ``container`` (connected first, closed after)."""

    async def go() -> T:
        async with connected_client(container, jobs) as client:
            with user_errors():
                return await body(client)

    return run(go)


def _done(message: str, ok: bool) -> None:
    """Print the outcome; exit 1 when the action was not done."""
    typer.echo(message)
    if not ok:
        raise typer.Exit(EXIT_NOT_DONE)


def _count(flag: str, text: str, *, maximum: int | None = None) -> int:
    """A count given as ``flag``: an integer from 1 to ``maximum``."""
    try:
        value = int(text)
    except ValueError:
        fail(f"{flag} {shlex.quote(text)}: must be an integer")
    if value < 1 or (maximum is not None and value > maximum):
        upper = f" and {maximum}" if maximum is not None else ""
        fail(f"{flag} {text}: must be {'between 1' + upper if upper else 'at least 1'}")
    return value


def _state(text: str | None, *, bulk: bool = False) -> JobState | None:
    if text is None:
        return None
    with flags_named({"state": ("--state", text)}):
        return check_bulk_state(text) if bulk else check_state(text)


def _history_status(text: str | None) -> HistoryStatus | None:
    if text is None:
        return None
    try:
        return HistoryStatus(text)
    except ValueError:
        choices = ", ".join(status.value for status in HistoryStatus)
        fail(f"--status {shlex.quote(text)}: expected one of {choices}")


def _text(flag: str, text: str | None) -> str | None:
    if text is not None and not text.strip():
        fail(f"{flag} {shlex.quote(text)}: must not be empty")
    return text


def _registry(spec: str | None, app_dir: Path) -> Jobs | None:
    return None if spec is None else load_registry(spec, app_dir)


# -- dogs jobs list ----------------------------------------------------------------------------


@jobs_app.command("list")
@filter_flags(RECORD_FILTERS)
@with_connection()
def list_jobs(
    limit: Annotated[
        str, typer.Option("--limit", help=f"Jobs per page (1 to {MAX_PAGE_SIZE}).")
    ] = "20",
    after: Annotated[
        str | None, typer.Option("--after", help="The cursor printed by the previous page.")
    ] = None,
    as_json: JsonOption = False,
    registry: RegistryOption = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="Only jobs with this tag (repeat: with all of them)."),
    ] = None,
    app_dir: AppDirOption = Path("."),
    *,
    connection: Connection,
    filter_texts: dict[str, str],
) -> None:
    """List job records in creation order, a page at a time, by name, state, unique key, tags,
    params, owner or creation time; each with its last error."""
    size = _count("--limit", limit, maximum=MAX_PAGE_SIZE)
    for one in RECORD_FILTERS:
        _text(one.flag, filter_texts.get(one.key))
    after = job_id_flag("--after", _text("--after", after))
    keywords = filter_keywords(RECORD_FILTERS, filter_texts, datetime.now(UTC))
    searched = not SEARCH_KEYWORDS.isdisjoint(keywords)
    jobs = _registry(registry, app_dir)
    container = connection.logged_container()

    async def go(client: DogsClient) -> tuple[JobPage, datetime, dict[str, HistoryRecord] | None]:
        read = client.search_jobs if searched else client.find_jobs
        page = await read(**keywords, tags=tag or None, limit=size, after=after)  # type: ignore[arg-type]
        return page, client.clock.now(), await _last_errors(client, page)

    page, read_at, errors = _call(container, go, jobs)
    following = None
    if page.next_after is not None:
        flags = {one.key: one.flag for one in RECORD_FILTERS}
        given = [f"{flags[key]} {shlex.quote(value)}" for key, value in filter_texts.items()]
        given.append(f"--limit {shlex.quote(limit)}")
        given += [f"--tag {shlex.quote(value)}" for value in tag or ()]
        following = " ".join(["dogs jobs list", *given, "--after", page.next_after])
    print_page(page, read_at, as_json=as_json, next_command=following, errors=errors)


async def _last_errors(client: DogsClient, page: JobPage) -> dict[str, HistoryRecord] | None:
    """The newest error of each record of ``page`` that has run (``None`` when the store
    cannot say: it lacks the inspection role)."""
    ran = [record.id for record in page if (record.tries or 0) > 0 or record.lock_id]
    if not has_role(client.store, Role.INSPECTION):
        return None
    return await client.latest_errors(ran) if ran else {}


# -- dogs jobs show ----------------------------------------------------------------------------


@jobs_app.command("show")
@with_connection()
def show(
    job_id: JobIdArgument,
    executions: Annotated[
        str, typer.Option("--executions", help="How many of its last executions to show.")
    ] = "5",
    full: Annotated[
        bool, typer.Option("--full", help="The params and the traceback whole, not folded.")
    ] = False,
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """Show one job: its record, state and owner, its last executions and the traceback of its
    newest error (the scheduler's frames folded); an archived job from the archive."""
    _text("ID", job_id)
    job_id = job_id_flag("ID", job_id)
    count = _count("--executions", executions)
    container = connection.logged_container()

    async def go(client: DogsClient) -> _Shown:
        record = await client.get_job(job_id)
        rows = await client.get_executions(job_id=job_id, limit=count)
        archived_at = None
        if record is None and has_role(client.store, Role.INSPECTION):
            # a bulk delete archives the record while its history rows stay live
            archived, _ = await client.archived_jobs(job_ids=[job_id], limit=1)
            stamps = [archived[0].archived_at] if archived else []
            if not rows:
                page = await client.archived_executions(job_id=job_id, limit=count)
                rows = list(page.rows)
                stamps += list(page.archived_at)
            record = archived[0].item if archived else None
            archived_at = next((moment for moment in stamps if moment is not None), None)
        gone = record is None or archived_at is not None  # a bulk delete archives its records
        fate = await client.job_fate(job_id) if gone else None
        return _Shown(record, rows, client.clock.now(), archived_at, fate)

    shown = _call(container, go)
    if shown.record is None and not shown.rows:
        if shown.fate is not None:
            _done(f"Gone: job {job_id} was {shown.fate} (no record and no history left)", ok=False)
        _done(f"Not found: no job {job_id} (no record, no history, nothing archived)", ok=False)
    print_job(
        job_id,
        shown.record,
        shown.rows,
        shown.now,
        as_json=as_json,
        full=full,
        archived_at=shown.archived_at,
        fate=shown.fate,
    )
    if shown.fate is not None and shown.archived_at is None and not as_json:
        typer.echo(f"The record is gone: {shown.fate} (dogs audit --job-id {job_id}).")


@dataclass(frozen=True, slots=True)
class _Shown:
    record: JobRecord | None
    rows: list[HistoryRecord]
    now: datetime
    archived_at: datetime | None
    fate: JobFate | None


# -- dogs jobs cancel --------------------------------------------------------------------------


@jobs_app.command("cancel")
@with_connection()
def cancel(
    job_id: OptionalJobIdArgument = None,
    unique_key: Annotated[
        str | None, typer.Option("--unique-key", help="Cancel the job holding this unique key.")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="With --unique-key: the job whose scope holds the key."),
    ] = None,
    registry: RegistryOption = None,
    app_dir: AppDirOption = Path("."),
    *,
    connection: Connection,
) -> None:
    """Cancel a job: an event job's record is removed (a running execution is stopped), a
    recurrent job skips its current run. History: a 'cancelled' row."""
    if (job_id is None) == (unique_key is None):
        fail("pass a job ID or --unique-key, not both and not neither")
    if name is not None and unique_key is None:
        fail("--name scopes a --unique-key; a job ID needs no --name")
    if name is not None and registry is None:
        fail("--name needs --registry MODULE:REGISTRY: the job's definition says its key scope")
    _text("ID", job_id)
    job_id = job_id_flag("ID", job_id)
    _text("--unique-key", unique_key)
    jobs = _registry(registry, app_dir)
    container = connection.logged_container()

    async def go(client: DogsClient) -> CancelOutcome:
        if job_id is not None and jobs is None:
            record = await client.get_job(job_id)
            if record is not None and record.type is JobType.RECURRENT:
                fail(
                    f"{job_id} is the recurrent job {record.job_name!r}: pass --registry "
                    "MODULE:REGISTRY (skipping its run needs its schedule), or remove the "
                    "record with `dogs jobs delete`"
                )
        return await client.cancel(job_id, unique_key=unique_key, job=name)

    outcome = _call(container, go, jobs)
    _done(cancel_message(outcome), ok=isinstance(outcome, Cancelled))


# -- dogs jobs retry / reschedule --------------------------------------------------------------


@jobs_app.command("retry")
@with_connection()
def retry(
    job_id: JobIdArgument,
    *,
    connection: Connection,
) -> None:
    """Make a job due now. A failed job (at its attempt limit) gets a fresh budget of tries;
    a scheduled or retrying one keeps its tries. A running job is left alone."""
    _text("ID", job_id)
    job_id = job_id_flag("ID", job_id)
    container = connection.logged_container()

    async def go(client: DogsClient) -> tuple[RescheduleOutcome, datetime]:
        return await client.retry_now(job_id), client.clock.now()

    outcome, now = _call(container, go)
    _done(reschedule_message(outcome, now), ok=isinstance(outcome, Rescheduled))


@jobs_app.command("reschedule")
@with_connection()
def reschedule(
    job_id: JobIdArgument,
    run_in: Annotated[
        str | None, typer.Option("--run-in", help="Delay from now, e.g. 90s, 10m, 1h30m.")
    ] = None,
    run_at: Annotated[
        str | None,
        typer.Option("--run-at", help="ISO 8601 time with a timezone, e.g. 2026-01-01T09:00Z."),
    ] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="A new priority.")] = None,
    *,
    connection: Connection,
) -> None:
    """Move a job that is not running to another time (--run-in or --run-at) and/or give it
    another --priority. A failed job is revived as `dogs jobs retry` does."""
    _text("ID", job_id)
    job_id = job_id_flag("ID", job_id)
    moment = when(run_in, run_at)
    new_priority = priority_flag(priority)
    if not moment and new_priority is None:
        fail("pass --run-in, --run-at or --priority")
    container = connection.logged_container()

    async def go(client: DogsClient) -> tuple[RescheduleOutcome, datetime]:
        outcome = await client.reschedule(job_id, priority=new_priority, **moment)
        return outcome, client.clock.now()

    outcome, now = _call(container, go)
    _done(reschedule_message(outcome, now), ok=isinstance(outcome, Rescheduled))


# -- dogs jobs delete --------------------------------------------------------------------------


@jobs_app.command("delete")
@with_connection()
def delete(
    job_id: OptionalJobIdArgument = None,
    name: NameOption = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="Delete every record in this state: scheduled, due, retrying, stale, failed, "
            "held.",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete them (without it: count only).")
    ] = False,
    *,
    connection: Connection,
) -> None:
    """Delete one record that is not running (no history row), or every record of a state
    (--state, optionally --name): a dry run that counts them unless --yes."""
    if job_id is not None and (name is not None or state is not None):
        fail("pass a job ID, or --state (and --name) for a bulk delete, not both")
    if job_id is None and state is None:
        fail("pass a job ID, or --state (and --name) for a bulk delete")
    _text("ID", job_id)
    job_id = job_id_flag("ID", job_id)
    _text("--name", name)
    bulk_state = _state(state, bulk=True)
    container = connection.logged_container()
    if job_id is not None:
        _delete_one(container, job_id)
        return
    assert bulk_state is not None

    async def go(client: DogsClient) -> int:
        return await client.delete_jobs(name, state=bulk_state, dry_run=not yes)

    count = _call(container, go)
    which = f"{bulk_state.value} record(s)" + (f" of {name}" if name else "")
    if yes or count == 0:
        typer.echo(f"{'Deleted' if yes else 'Nothing to delete:'} {count} {which}.")
        return
    again = " ".join(["dogs jobs delete", *(["--name", shlex.quote(name)] if name else [])])
    typer.echo(
        f"Would delete {count} {which} (a dry run: nothing was deleted). To delete them: "
        f"{again} --state {bulk_state.value} --yes"
    )


def _delete_one(container: DogsContainer, job_id: str) -> None:
    async def go(client: DogsClient) -> tuple[DeleteOutcome, datetime]:
        return await client.delete(job_id), client.clock.now()

    outcome, now = _call(container, go)
    message = delete_message(outcome, now)
    if isinstance(outcome, Deleted) and outcome.record.type is JobType.RECURRENT:
        message += "; a recurrent record comes back when a worker with its definition starts"
    _done(message, ok=isinstance(outcome, Deleted))
