"""Bulk actions by filter as the clients offer them: ``bulk_count`` (the dry run), ``bulk``
(retry, cancel, reschedule or delete every record of a selection, chunk after chunk, with
progress), ``prepare_bulk`` and ``run_bulk`` (the same in two steps, for a server that answers
before the work is done), and ``resume_bulk`` (an interrupted one, from where it stopped).

Each chunk is read, decided record by record as the single-job action would
(:func:`~dogs_core.domain.bulk.bulk_decision`) and written through the bulk role's fenced
writes (:class:`~dogs_core.ports.AsyncBulkStore`), so nothing a worker claimed, finished or
retried meanwhile is overwritten. A cancel writes each removed job's ``cancelled`` row, as
``cancel`` does. The action's audit entry (:mod:`dogs_core.domain.audit`) is written when it
starts and after every chunk: its progress, and the cursor a resume goes on from; the records
a delete or cancel removed are listed chunk by chunk under it.

Between chunks the action yields for ``pause`` seconds (0 by default: one chunk's writes are
one round trip, and claims interleave with them).

A bulk action touches only what it names: a selection without a filter is refused unless it
says ``all`` (:class:`~dogs_core.errors.EmptySelectionError`); runtime schedules and workflow
steps are taken only when asked (:class:`~dogs_core.domain.bulk.RecordKind`); a job name that
matches nothing and that neither the registry nor the store knows is a typo
(:class:`~dogs_core.errors.UnknownJobError`). Nothing is written then. A delete keeps every
record it removes in the records' archive unless ``purge`` (the audit entry says which).

This module is the source of truth; ``_sync/bulk.py`` is generated from it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio

from dogs_core.domain import validation
from dogs_core.domain.audit import (
    AUDIT_RETENTION,
    STALLED_AFTER,
    AuditAction,
    AuditEntry,
    AuditOutcome,
    BulkProgress,
)
from dogs_core.domain.bulk import (
    AUDITED_AS,
    BY_AUDIT_ACTION,
    DEFAULT_CHUNK_SIZE,
    BulkAction,
    BulkReport,
    BulkSelection,
    Modify,
    RecordKind,
    Remove,
    RescheduleTo,
    Skip,
    SkipReason,
    bulk_action,
    bulk_decision,
    check_chunk_size,
    check_selection,
    reschedule_to,
    why_not_resumable,
)
from dogs_core.domain.records import DEFAULT_RETENTION, HistoryRecord, JobRecord, NameStatus
from dogs_core.domain.steering import cancel_rows
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import InvalidOptionError, UnknownJobError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncBulkStore, AsyncJobStore, Role, has_role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client._async.audit import record_entry
from dogs_core.runtime.client.scheduling import ClientBase
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.actors import current_actor

__all__ = ["BulkClient", "ProgressCallback"]

log = logging.getLogger("dogs.bulk")

#: Called after each chunk with the report so far.
ProgressCallback = Callable[[BulkReport], None]


class BulkClient(ClientBase):
    """Retry, cancel, reschedule or delete every job a :class:`BulkSelection` holds."""

    store: AsyncJobStore
    operation_timeout: float | None

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due (the client implements it)."""
        raise NotImplementedError

    @property
    def _runner(self) -> str:
        """This client, as the runner of the bulk actions it runs."""
        runner: str | None = getattr(self, "_bulk_runner", None)
        if runner is None:
            runner = f"{socket.gethostname()}:{os.getpid()}:{new_execution_id()}"
            setattr(self, "_bulk_runner", runner)  # noqa: B010 - one id per client
        return runner

    async def status(self) -> list[NameStatus]:
        raise NotImplementedError  # DogsClient's

    async def bulk_count(self, selection: BulkSelection) -> int:
        """How many records ``selection`` holds now (the dry run of a bulk action). Raises
        :class:`~dogs_core.errors.EmptySelectionError` for a selection without a filter and
        without ``all``, :class:`~dogs_core.errors.UnknownJobError` when it matches nothing
        and its job name is unknown (a typo)."""
        checked = check_selection(selection)
        count = await self._count(checked)
        if count == 0:
            await self._check_name_known(checked)
        return count

    async def bulk_counts(
        self, selection: BulkSelection
    ) -> tuple[dict[RecordKind, int], dict[RecordKind, int]]:
        """Per :class:`RecordKind`, how many records ``selection`` holds now, and how many of
        the kinds it does not take its filters match (what a dry run shows apart)."""
        checked = check_selection(selection)
        taken: dict[RecordKind, int] = {}
        left_out: dict[RecordKind, int] = {}
        for kind in RecordKind:
            count = await self._count(checked.of_kind(kind))
            if kind in checked.taken_kinds:
                taken[kind] = count
            elif count:
                left_out[kind] = count
        if not sum(taken.values()):
            await self._check_name_known(checked)
        return taken, left_out

    async def _count(self, selection: BulkSelection) -> int:
        store = require_role(self.store, Role.BULK, "bulk actions")
        await self._ensure_clock()
        return await retry_transient(
            lambda: store.count_for_bulk(selection, now=self.clock.now()),
            what="count for bulk",
            deadline=self.operation_timeout,
        )

    async def _check_name_known(self, selection: BulkSelection) -> None:
        """A job name that matched nothing: known to the registry or to the store (a record
        of it exists, whatever its state or kind), or a typo."""
        name = selection.job_name
        jobs = self.jobs
        if name is None or (jobs is not None and name in jobs):
            return
        stored = {row.job_name for row in await self.status()}
        if name in stored:
            return
        known = set(jobs.names if jobs is not None else ()) | stored
        raise UnknownJobError(name, sorted(known)[:20])

    async def bulk(
        self,
        action: BulkAction | str,
        selection: BulkSelection,
        *,
        run_at: datetime | None = None,
        run_in: DurationLike | None = None,
        priority: int | None = None,
        dry_run: bool = False,
        purge: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        max_chunks: int | None = None,
        pause: float = 0.0,
        on_progress: ProgressCallback | None = None,
    ) -> BulkReport:
        """Apply ``action`` (``"retry"``, ``"cancel"``, ``"reschedule"`` with ``run_at``,
        ``run_in`` and/or ``priority``, or ``"delete"``) to every record ``selection`` holds,
        ``chunk_size`` records at a time (1..5,000), until none is left or ``max_chunks``
        chunks were done; ``on_progress(report)`` after each chunk. ``dry_run`` only counts,
        each kind apart (the report's ``counts`` and ``left_out``). A delete keeps the
        records it removes in the records' archive unless ``purge``. Returns what it did; the
        report's ``audit_id`` resumes an interrupted one (:meth:`resume_bulk`)."""
        validation.boolean("dry_run", dry_run)
        if dry_run:
            chosen = bulk_action(action)
            reschedule_to(chosen, run_at, run_in, priority)
            _purge(chosen, purge)
            counts, left_out = await self.bulk_counts(selection)
            return BulkReport(
                chosen,
                selection,
                dry_run=True,
                matched=sum(counts.values()),
                counts=counts,
                left_out=left_out,
            )
        entry = await self.prepare_bulk(
            action,
            selection,
            run_at=run_at,
            run_in=run_in,
            priority=priority,
            purge=purge,
            chunk_size=chunk_size,
        )
        return await self.run_bulk(
            entry, max_chunks=max_chunks, pause=pause, on_progress=on_progress
        )

    async def prepare_bulk(
        self,
        action: BulkAction | str,
        selection: BulkSelection,
        *,
        run_at: datetime | None = None,
        run_in: DurationLike | None = None,
        priority: int | None = None,
        purge: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> AuditEntry:
        """Check the arguments, count the selection and write the action's audit entry
        (running, held by this client; its selection and, for a delete, whether it purges),
        without changing any record: :meth:`run_bulk` does."""
        chosen = bulk_action(action)
        to = reschedule_to(chosen, run_at, run_in, priority)
        purging = _purge(chosen, purge)
        size = check_chunk_size(chunk_size)
        checked = check_selection(selection)
        if chosen is BulkAction.DELETE and not purging:
            require_role(self.store, Role.ARCHIVE, "keeping deleted records (or purge=True)")
        counts, _ = await self.bulk_counts(checked)
        matched = sum(counts.values())
        now = self.clock.now()
        details: dict[str, object] = {
            "matched": matched,
            "counts": {kind.value: count for kind, count in counts.items()},
        }
        if chosen is BulkAction.DELETE:
            details["purge"] = purging
        entry = AuditEntry(
            id=new_record_id(),
            at=now,
            actor=current_actor(),
            action=AUDITED_AS[chosen].value,
            target=selection.describe(),
            outcome=AuditOutcome.RUNNING,
            details=details,
            bulk=BulkProgress(
                selection=selection.to_document(),
                matched=matched,
                chunk_size=size,
                to=None if to is None else to.to_document(),
                runner=self._runner,
            ),
            updated_at=now,
            expires_at=now + AUDIT_RETENTION,
        )
        await record_entry(self, entry)
        log.info("dogs: %s of %d %s by %s started", chosen, matched, entry.target, entry.actor)
        return entry

    async def run_bulk(
        self,
        entry: AuditEntry,
        *,
        max_chunks: int | None = None,
        pause: float = 0.0,
        on_progress: ProgressCallback | None = None,
    ) -> BulkReport:
        """Run the action of ``entry`` (from :meth:`prepare_bulk`, or taken over by
        :meth:`resume_bulk`) from its cursor to the end of its selection."""
        if entry.bulk is None or entry.action not in BY_AUDIT_ACTION:
            raise InvalidOptionError("entry", entry.id, "is not the entry of a bulk action")
        if max_chunks is not None:
            validation.integer("max_chunks", max_chunks, minimum=1)
        validation.duration("pause", pause)
        if on_progress is not None and not callable(on_progress):
            raise InvalidOptionError("on_progress", on_progress, "must be a callable or None")
        run = _Run(self, entry, require_role(self.store, Role.BULK, "bulk actions"))
        try:
            return await run.until_done(max_chunks, float(pause), on_progress)
        except Exception as error:
            await run.failed(error)
            raise

    async def resume_bulk(
        self,
        audit_id: str,
        *,
        max_chunks: int | None = None,
        pause: float = 0.0,
        on_progress: ProgressCallback | None = None,
    ) -> BulkReport:
        """Go on with the bulk action of audit entry ``audit_id`` from where it stopped (it
        failed, stopped at ``max_chunks``, or its process died: no progress for a minute)."""
        taken = await self.take_over_bulk(audit_id)
        return await self.run_bulk(
            taken, max_chunks=max_chunks, pause=pause, on_progress=on_progress
        )

    async def take_over_bulk(self, audit_id: str) -> AuditEntry:
        """Make this client the runner of the bulk action of ``audit_id`` (the first half of
        :meth:`resume_bulk`); ``InvalidOptionError`` says why it cannot be resumed (done,
        running elsewhere, not a bulk action)."""
        validation.text("audit_id", audit_id)
        audit = require_role(self.store, Role.AUDIT, "resuming a bulk action")
        await self._ensure_clock()
        now = self.clock.now()
        taken = await retry_transient(
            lambda: audit.take_over_audit(
                audit_id, runner=self._runner, stalled_before=now - STALLED_AFTER, now=now
            ),
            what="take over bulk action",
            deadline=self.operation_timeout,
        )
        if taken is None:
            entry = await audit.get_audit(audit_id)
            raise InvalidOptionError("audit_id", audit_id, why_not_resumable(entry, now))
        log.info("dogs: %s resumed by %s", taken.target, self._runner)
        return taken


class _Run:
    """One run of a bulk action: its chunks, its progress, its entry."""

    def __init__(self, client: BulkClient, entry: AuditEntry, store: AsyncBulkStore) -> None:
        assert entry.bulk is not None
        self.client = client
        self.entry = entry
        self.progress = entry.bulk
        self.store = store
        self.action = BY_AUDIT_ACTION[entry.action]
        self.selection = BulkSelection.from_document(self.progress.selection)
        self.to = RescheduleTo.from_document(self.progress.to)
        self.audited = has_role(client.store, Role.AUDIT)
        # entries written before deletes were archived hold no "purge": they purged
        self.archive = self.action is BulkAction.DELETE and entry.details.get("purge") is False
        self.started = anyio.current_time()

    async def until_done(
        self, max_chunks: int | None, pause: float, on_progress: ProgressCallback | None
    ) -> BulkReport:
        done_now = 0
        while True:
            if max_chunks is not None and done_now >= max_chunks:
                await self._write(AuditOutcome.STOPPED, runner=None)
                return self.report(complete=False)
            last = await self._chunk()
            done_now += 1
            finished = last is None
            await self._write(
                AuditOutcome.DONE if finished else AuditOutcome.RUNNING,
                runner=None if finished else self.progress.runner,
            )
            if on_progress is not None:
                on_progress(self.report(complete=finished))
            if finished:
                log.info(
                    "dogs: %s of %s done: %d changed, %d skipped",
                    self.action,
                    self.entry.target,
                    self.progress.changed,
                    sum(self.progress.skipped.values()),
                )
                return self.report(complete=True)
            await anyio.sleep(pause)

    async def _chunk(self) -> str | None:
        """Read, decide and write one chunk; the cursor after it (``None``: the end)."""
        client = self.client
        await client._ensure_clock()
        now = client.clock.now()
        chunk = await retry_transient(
            lambda: self.store.select_for_bulk(
                self.selection, now=now, after=self.progress.cursor, limit=self.progress.chunk_size
            ),
            what="select for bulk",
            deadline=client.operation_timeout,
        )
        changed, skipped, removed = await self._apply(chunk.records, now)
        merged = dict(self.progress.skipped)
        for reason, count in skipped.items():
            merged[reason] = merged.get(reason, 0) + count
        self.progress = BulkProgress(
            selection=self.progress.selection,
            matched=self.progress.matched,
            chunk_size=self.progress.chunk_size,
            to=self.progress.to,
            examined=self.progress.examined + chunk.examined,
            changed=self.progress.changed + changed,
            skipped=merged,
            chunks=self.progress.chunks + 1,
            cursor=chunk.last_id if chunk.last_id is not None else self.progress.cursor,
            runner=self.progress.runner,
        )
        if removed:
            await self._list_removed(removed, now)
        return chunk.last_id

    async def _apply(
        self, records: tuple[JobRecord, ...], now: datetime
    ) -> tuple[int, dict[str, int], list[JobRecord]]:
        modify: list[tuple[JobRecord, Modify]] = []
        remove: list[JobRecord] = []
        skipped: dict[str, int] = {}
        for record in records:
            decision = bulk_decision(self.action, record, now, self.to)
            if isinstance(decision, Modify):
                modify.append((record, decision))
            elif isinstance(decision, Remove):
                remove.append(record)
            elif isinstance(decision, Skip):
                skipped[decision.reason.value] = skipped.get(decision.reason.value, 0) + 1
        changed = 0
        timeout = self.client.operation_timeout
        if modify:
            changes = [(record, decision.change) for record, decision in modify]
            changed = await retry_transient(
                lambda: self.store.modify_unchanged(changes, now=now),
                what="bulk modify",
                deadline=timeout,
            )
        removed: list[JobRecord] = []
        if remove:
            unless = None if self.action is BulkAction.CANCEL else now
            stamp = now if self.archive else None
            removed = await retry_transient(
                lambda: self.store.delete_unchanged(
                    remove, unless_running_at=unless, archived_at=stamp
                ),
                what="bulk delete",
                deadline=timeout,
            )
            changed += len(removed)
            if self.action is BulkAction.CANCEL:
                await self._cancelled_rows(removed, now)
        missed = len(modify) + len(remove) - changed
        if missed:
            skipped[SkipReason.CHANGED.value] = skipped.get(SkipReason.CHANGED.value, 0) + missed
        return changed, skipped, removed

    async def _cancelled_rows(self, removed: list[JobRecord], now: datetime) -> None:
        rows: list[HistoryRecord] = []
        for record in removed:
            retention = _retention(self.client, record.job_name)
            rows += cancel_rows(
                record, now=now, new_execution_id=new_execution_id(), retention=retention
            )
        if rows:
            await retry_transient(
                lambda: self.client.store.write_history_many(rows),
                what="history",
                deadline=self.client.operation_timeout,
            )

    async def _list_removed(self, removed: list[JobRecord], now: datetime) -> None:
        """The chunk's removed jobs, in an entry under the action's (a removed job's page
        names who removed it)."""
        if not self.audited:
            return
        entry = AuditEntry(
            id=new_record_id(),
            at=now,
            actor=self.entry.actor,
            action=AuditAction.BULK_CHUNK.value,
            target=self.entry.target,
            outcome=AuditOutcome.DONE,
            count=len(removed),
            job_ids=tuple(record.id for record in removed),
            details={
                "action": self.action.value,
                "jobNames": sorted({r.job_name for r in removed}),
                **({"archived": self.archive} if self.action is BulkAction.DELETE else {}),
            },
            parent_id=self.entry.id,
            updated_at=now,
            expires_at=now + AUDIT_RETENTION,
        )
        await record_entry(self.client, entry)

    async def _write(
        self, outcome: AuditOutcome, *, runner: str | None, error: str | None = None
    ) -> None:
        """The entry with the progress so far; a run whose entry another runner took over
        stops (:class:`~dogs_core.errors.InvalidOptionError`)."""
        now = self.client.clock.now()
        held_by = self.progress.runner
        progress = dataclasses.replace(self.progress, runner=runner)
        updated = self.entry.with_progress(progress, outcome=outcome, now=now, error=error)
        if not self.audited:
            self.entry = updated
            return
        audit = require_role(self.client.store, Role.AUDIT, "the audit trail")
        written = await retry_transient(
            lambda: audit.update_audit(updated, runner=held_by),
            what="bulk progress",
            deadline=self.client.operation_timeout,
        )
        if not written:
            raise InvalidOptionError(
                "audit_id", self.entry.id, "was taken over by another runner: this one stops"
            )
        self.entry = updated
        self.progress = progress

    async def failed(self, error: BaseException) -> None:
        """Leave the entry resumable, saying why it stopped (best effort)."""
        if isinstance(error, InvalidOptionError) and error.field == "audit_id":
            return
        text = f"{type(error).__name__}: {error}"[:500]
        log.warning("dogs: %s of %s stopped: %s", self.action, self.entry.target, text)
        try:
            await self._write(AuditOutcome.FAILED, runner=None, error=text)
        except Exception as unwritten:
            log.warning("dogs: the progress of %s was not written: %r", self.entry.id, unwritten)

    def report(self, *, complete: bool) -> BulkReport:
        progress = self.progress
        return BulkReport(
            action=self.action,
            selection=self.selection,
            dry_run=False,
            matched=progress.matched,
            examined=progress.examined,
            changed=progress.changed,
            skipped=dict(progress.skipped),
            chunks=progress.chunks,
            elapsed=timedelta(seconds=anyio.current_time() - self.started),
            complete=complete,
            audit_id=self.entry.id,
            archived=self.archive,
        )


def _purge(action: BulkAction, purge: object) -> bool:
    validation.boolean("purge", purge)
    if purge and action is not BulkAction.DELETE:
        raise InvalidOptionError("purge", purge, f"only a delete purges, not a {action}")
    return bool(purge)


def _retention(client: BulkClient, name: str) -> timedelta | None:
    jobs = client.jobs
    if jobs is not None and name in jobs:
        return jobs.get(name).save_executions_for
    return DEFAULT_RETENTION
