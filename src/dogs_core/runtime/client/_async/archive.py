"""Archiving as the clients offer it (``archive``): old history rows and failed records moved
into the archive collections, batch after batch, through the store's archive port
(:class:`~dogs_core.ports.AsyncArchiveStore`); each batch retried when transient (a batch is
idempotent). Progress is logged under ``dogs.archive``.

This module is the source of truth; ``_sync/archive.py`` is generated from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from functools import partial

import anyio

from dogs_core.domain.archiving import (
    DEFAULT_ARCHIVE_BATCH_SIZE,
    ArchiveKind,
    ArchiveOptions,
    ArchiveReport,
    archive_cutoff,
    archive_options,
)
from dogs_core.domain.audit import AuditAction
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import parse_id
from dogs_core.ports import AsyncArchiveStore, AsyncJobStore, Role, has_role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client.calls import ALL_ARCHIVE_KINDS, ARCHIVE_LOG_EVERY
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["ArchiveClient", "BatchCallback"]

log = logging.getLogger("dogs.archive")


#: Called after each batch with the kind, the documents that batch moved and the kind's total.
BatchCallback = Callable[[ArchiveKind, int, int], None]


class ArchiveClient(ClientBase):
    """``archive``: history rows and failed records older than a threshold, out of the live
    collections (and out of TTL's reach) into archive collections."""

    store: AsyncJobStore
    operation_timeout: float | None

    @audited(AuditAction.ARCHIVE)
    async def archive(
        self,
        *,
        older_than: DurationLike,
        batch_size: int = DEFAULT_ARCHIVE_BATCH_SIZE,
        kinds: Iterable[ArchiveKind | str] = ALL_ARCHIVE_KINDS,
        dry_run: bool = False,
        max_batches: int | None = None,
        on_batch: BatchCallback | None = None,
    ) -> ArchiveReport:
        """Move the history rows started, and the failed event records marked, more than
        ``older_than`` ago (a timedelta, seconds or ``"30d"``) into the archive collections, in
        batches of ``batch_size`` (1..10,000), until none is left (or ``max_batches`` batches
        were sent in all). ``kinds``: ``"history"``, ``"failed_records"`` or both. A dry run
        counts and moves nothing. ``on_batch(kind, moved, total_of_kind)`` follows each batch.

        Safe to interrupt: the next run finishes an interrupted batch (nothing lost, nothing
        archived twice). Raises :class:`~dogs_core.errors.InvalidOptionError` for a bad
        argument, or :class:`~dogs_core.errors.MissingRoleError` when the store has no archive
        role (a custom store without :class:`~dogs_core.ports.AsyncArchiveStore`), before
        anything is written."""
        options = archive_options(
            older_than=older_than,
            batch_size=batch_size,
            kinds=kinds,
            dry_run=dry_run,
            max_batches=max_batches,
        )
        if on_batch is not None and not callable(on_batch):
            raise InvalidOptionError("on_batch", on_batch, "must be a callable or None")
        archive = require_role(self.store, Role.ARCHIVE, "archive")
        now = self.clock.now()
        cutoff = archive_cutoff(now, options.older_than)
        started = anyio.current_time()
        if options.dry_run:
            counts = await _count(archive, options.kinds, cutoff)
            elapsed = timedelta(seconds=anyio.current_time() - started)
            return ArchiveReport(cutoff=cutoff, moved=counts, elapsed=elapsed, dry_run=True)
        await retry_transient(archive.setup_archive, what="archive setup")
        moved: dict[ArchiveKind, int] = {}
        batches = 0
        complete = True
        for kind in options.kinds:
            total, sent, done = await _archive_kind(
                archive, kind, cutoff, now, options, batches, on_batch
            )
            moved[kind] = total
            batches += sent
            complete = complete and done
        elapsed = timedelta(seconds=anyio.current_time() - started)
        report = ArchiveReport(
            cutoff=cutoff, moved=moved, batches=batches, elapsed=elapsed, complete=complete
        )
        log.info(
            "dogs: archived %d documents older than %s in %d batches (%s)",
            report.total,
            cutoff.isoformat(),
            batches,
            ", ".join(f"{kind.value}: {count}" for kind, count in moved.items()),
        )
        return report

    async def archived_at(self, job_id: str) -> datetime | None:
        """When job ``job_id`` was moved to the archive (its failed record or its history
        rows); ``None`` when it was not, or the store has no archive."""
        job_id = parse_id(job_id)
        if not has_role(self.store, Role.ARCHIVE):
            return None
        archive = require_role(self.store, Role.ARCHIVE, "archived_at")
        return await retry_transient(
            lambda: archive.archived_at(job_id),
            what="read archive",
            deadline=self.operation_timeout,
        )


async def _count(
    archive: AsyncArchiveStore, kinds: Iterable[ArchiveKind], cutoff: datetime
) -> dict[ArchiveKind, int]:
    """A dry run: what a run with ``cutoff`` would move, per kind."""
    counts: dict[ArchiveKind, int] = {}
    for kind in kinds:
        count = partial(archive.count_archivable, kind, cutoff=cutoff)
        counts[kind] = await retry_transient(count, what="count archivable")
    return counts


async def _archive_kind(
    archive: AsyncArchiveStore,
    kind: ArchiveKind,
    cutoff: datetime,
    now: datetime,
    options: ArchiveOptions,
    batches_before: int,
    on_batch: BatchCallback | None,
) -> tuple[int, int, bool]:
    """Batches of ``kind`` until one moves nothing: (moved, batches sent, finished)."""
    step = (
        archive.archive_history if kind is ArchiveKind.HISTORY else archive.archive_failed_records
    )
    total = 0
    sent = 0
    while True:
        if options.max_batches is not None and batches_before + sent >= options.max_batches:
            log.info("dogs: archive of %s stopped after %d batches (max_batches)", kind.value, sent)
            return total, sent, False
        moved = await retry_transient(
            lambda: step(cutoff=cutoff, batch_size=options.batch_size, archived_at=now),
            what=f"archive {kind.value}",
        )
        sent += 1
        total += moved
        if on_batch is not None:
            on_batch(kind, moved, total)
        if moved == 0:
            log.info("dogs: archive of %s done: %d moved in %d batches", kind.value, total, sent)
            return total, sent, True
        if sent % ARCHIVE_LOG_EVERY == 0:
            log.info("dogs: archive of %s: %d moved in %d batches", kind.value, total, sent)
