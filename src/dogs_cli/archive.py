"""``dogs archive``: move old history rows and failed records into the archive collections.

::

    dogs archive --older-than 30d [--batch-size 500] [--history/--no-history]
                 [--failed/--no-failed] [--max-batches N] [--dry-run] [--json]
                 [--history-archive NAME] [--records-archive NAME]

One call of :meth:`~dogs_core.runtime.client._async.client.DogsClient.archive` (see
docs/archiving.md):
a line per batch on stderr (``history: batch 3 moved 500, 1500 in all``), then a summary table, or
with ``--json`` one JSON document on stdout. ``--dry-run`` counts what would move and moves nothing.
Safe to interrupt (Ctrl-C, a crash): run it again and it finishes the batch it left. Bad input
is one ``Error:`` line and exit code 2.
"""

from __future__ import annotations

import shlex
from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dogs_cli.common import (
    Connection,
    connected_client,
    duration,
    fail,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.tables import print_json, stamp
from dogs_core.domain.archiving import (
    DEFAULT_ARCHIVE_BATCH_SIZE,
    MAX_ARCHIVE_BATCH_SIZE,
    ArchiveKind,
    ArchiveReport,
    outlives_default_retention,
)
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo._async.archive import MongoArchiver
from dogs_mongo._sync.archive import MongoArchiver as SyncMongoArchiver
from dogs_mongo.container import DogsContainer

__all__ = ["archive", "archive_table"]

OlderThanOption = Annotated[
    str,
    typer.Option(
        "--older-than",
        help="Archive what is older than this, e.g. 30d, 12h (history rows by start time, "
        "failed records by when they failed).",
        show_default=False,
    ),
]
BatchSizeOption = Annotated[
    int,
    typer.Option("--batch-size", help=f"Documents per batch (1..{MAX_ARCHIVE_BATCH_SIZE:,})."),
]
HistoryOption = Annotated[
    bool, typer.Option("--history/--no-history", help="Archive history rows.")
]
FailedOption = Annotated[
    bool,
    typer.Option("--failed/--no-failed", help="Archive failed (maxTriesReached) event records."),
]
MaxBatchesOption = Annotated[
    int | None,
    typer.Option("--max-batches", help="Stop after this many batches (run again to go on)."),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Count what would be archived; move nothing.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
HistoryArchiveOption = Annotated[
    str | None,
    typer.Option(
        "--history-archive",
        help="The history archive collection (default: the history collection + _archive).",
        show_default=False,
    ),
]
RecordsArchiveOption = Annotated[
    str | None,
    typer.Option(
        "--records-archive",
        help="The records archive collection (default: the records collection + _archive).",
        show_default=False,
    ),
]


@with_connection()
def archive(
    older_than: OlderThanOption,
    batch_size: BatchSizeOption = DEFAULT_ARCHIVE_BATCH_SIZE,
    history: HistoryOption = True,
    failed: FailedOption = True,
    max_batches: MaxBatchesOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    history_archive: HistoryArchiveOption = None,
    records_archive: RecordsArchiveOption = None,
    *,
    connection: Connection,
) -> None:
    """Move history rows and failed records older than --older-than out of the live
    collections (and out of TTL's reach) into archive collections, in small batches."""
    age = _older_than(older_than)
    kinds = _checked(batch_size, history, failed, max_batches, history_archive, records_archive)
    err = Console(stderr=True, highlight=False)
    if outlives_default_retention(age) and ArchiveKind.HISTORY in kinds:
        err.print(
            f"Note: history rows kept for Dogs' default retention (7 days) expire before they "
            f"are {older_than} old; only rows of jobs with a longer save_executions_for remain."
        )
    container = connection.logged_container()

    batches: dict[ArchiveKind, int] = {}

    def progress(kind: ArchiveKind, moved: int, total: int) -> None:
        batches[kind] = batches.get(kind, 0) + 1
        err.print(f"{kind.value}: batch {batches[kind]} moved {moved}, {total} in all")

    async def go() -> ArchiveReport:
        async with connected_client(container) as client:
            with user_errors():
                _use_collections(container, history_archive, records_archive)
                return await client.archive(
                    older_than=age,
                    batch_size=batch_size,
                    kinds=kinds,
                    dry_run=dry_run,
                    max_batches=max_batches,
                    on_batch=None if dry_run else progress,
                )

    report = run(go)
    if as_json:
        print_json(report.as_dict())
        return
    Console().print(archive_table(report))
    if not report.complete:
        err.print("Stopped at --max-batches: run again to archive the rest.")


_FAILED = ArchiveKind.FAILED_RECORDS


def _checked(
    batch_size: int,
    history: bool,
    failed: bool,
    max_batches: int | None,
    history_archive: str | None,
    records_archive: str | None,
) -> list[ArchiveKind]:
    """The options checked before connecting; the kinds to archive."""
    if not 1 <= batch_size <= MAX_ARCHIVE_BATCH_SIZE:
        fail(f"--batch-size {batch_size}: must be in 1..{MAX_ARCHIVE_BATCH_SIZE}")
    if max_batches is not None and max_batches < 1:
        fail(f"--max-batches {max_batches}: must be at least 1")
    kinds = [kind for kind, wanted in ((ArchiveKind.HISTORY, history), (_FAILED, failed)) if wanted]
    if not kinds:
        fail("--no-history --no-failed: nothing to archive")
    names = (("--history-archive", history_archive), ("--records-archive", records_archive))
    for flag, name in names:
        if name is not None and not name.strip():
            fail(f"{flag} {shlex.quote(name)}: must not be empty")
    return kinds


def _older_than(value: str) -> timedelta:
    age = duration("--older-than", value)
    if age <= timedelta(0):
        fail(f"--older-than {shlex.quote(value)}: must be greater than zero")
    return age


def _use_collections(container: DogsContainer, history: str | None, records: str | None) -> None:
    if history is None and records is None:
        return
    store: object = container.store()
    if isinstance(store, ThreadedJobStore):
        store = store.sync_store
    if not isinstance(store, MongoArchiver | SyncMongoArchiver):
        fail("--history-archive/--records-archive need a MongoDB store")
    store.use_archive_collections(history=history, records=records)


def archive_table(report: ArchiveReport) -> Table:
    """One row per kind: documents moved (or, on a dry run, that would move)."""
    verb = "Would archive" if report.dry_run else "Archived"
    title = f"{verb}: older than {stamp(report.cutoff)}"
    table = Table(title=title)
    table.add_column("Kind")
    table.add_column("Documents", justify="right")
    for kind, count in report.moved.items():
        table.add_row(kind.value.replace("_", " "), f"{count:,}")
    table.add_row("total", f"{report.total:,}")
    if not report.dry_run:
        table.caption = f"{report.batches} batches in {report.elapsed.total_seconds():.1f} s"
    return table
