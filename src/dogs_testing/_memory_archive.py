"""The archive of the in-memory store (:class:`~dogs_core.ports.ArchiveStore`): the same steps
as MongoDB's (:mod:`dogs_mongo._async.archive`), each one atomic under the state's lock, so
that a test can stop between them (:meth:`MemoryArchive.copy_batch` is the copy alone) and see
the next batch finish the work.

A batch: settle the pending copies left by an interrupted batch; pick up to N old rows in the
order of MongoDB's index walk (history by ``(job_name, started_at)``, failed records by
``(job_name, id)``); copy them, pending; delete the originals (a failed record only while it is
the same failed record: terminal, same ``max_tries_reached_at``); settle the copies (pending
cleared where the original is gone, the copy dropped where it is still there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.archiving import (
    ArchiveKind,
    check_archive_batch,
    check_archived_at,
    check_cutoff,
    check_kind,
)
from dogs_core.domain.records import HistoryRecord, JobRecord
from dogs_testing._memory_state import MemoryState, _history_row, _is_terminal, _out, _unindex

__all__ = ["ArchivedCopy", "MemoryArchive", "archive_of"]


@dataclasses.dataclass(slots=True)
class ArchivedCopy:
    """One document of an archive: the row or record as it was copied, when, and whether its
    original may still be live (``pending``)."""

    item: HistoryRecord | JobRecord
    archived_at: datetime
    pending: bool = True


def archive_of(state: MemoryState, kind: ArchiveKind) -> dict[str, ArchivedCopy]:
    """The archive of ``kind`` kept beside ``state`` (created on first use; the bulk role's
    deletes keep their records in the records' archive too)."""
    archives: dict[ArchiveKind, dict[str, ArchivedCopy]] = state.__dict__.setdefault(
        "_archives", {ArchiveKind.HISTORY: {}, ArchiveKind.FAILED_RECORDS: {}}
    )
    return archives[kind]


class MemoryArchive(MemoryState):
    """The archive part of the sync face, over :class:`MemoryState`; its two archives are kept
    beside the state (created on first use), keyed by execution id (history) and record id."""

    def _archive(self, kind: ArchiveKind) -> dict[str, ArchivedCopy]:
        return archive_of(self, kind)

    def setup_archive(self) -> None:
        """Nothing to create in memory."""

    def archive_history(self, *, cutoff: datetime, batch_size: int, archived_at: datetime) -> int:
        return self._archive_batch(ArchiveKind.HISTORY, cutoff, batch_size, archived_at)

    def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        return self._archive_batch(ArchiveKind.FAILED_RECORDS, cutoff, batch_size, archived_at)

    def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int:
        chosen = check_kind(kind)
        limit = check_cutoff(cutoff)
        with self._state():
            return len(self._old_keys(chosen, limit, None))

    def count_archived(self, kind: ArchiveKind) -> int:
        with self._state():
            return len(self._archive(check_kind(kind)))

    def archived_at(self, job_id: str) -> datetime | None:
        with self._state():
            copies = [self._archive(ArchiveKind.FAILED_RECORDS).get(job_id)]
            copies += [
                copy
                for copy in self._archive(ArchiveKind.HISTORY).values()
                if isinstance(copy.item, HistoryRecord) and copy.item.job_id == job_id
            ]
            moments = [copy.archived_at for copy in copies if copy is not None and not copy.pending]
        return max(moments, default=None)

    def archived(self, kind: ArchiveKind) -> dict[str, ArchivedCopy]:
        """A copy of the archive of ``kind``, by key (execution id or record id)."""
        with self._state():
            return {key: dataclasses.replace(copy) for key, copy in self._archive(kind).items()}

    def archived_keys(self, kind: ArchiveKind) -> list[str]:
        """The archive's keys, sorted: execution ids (history), record ids (failed records)."""
        with self._state():
            return sorted(self._archive(check_kind(kind)))

    def copy_batch(
        self, kind: ArchiveKind, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """The read and the copy of one batch alone (a batch interrupted before its deletes);
        the number copied."""
        return len(
            self._copy(
                check_kind(kind),
                check_cutoff(cutoff),
                check_archive_batch(batch_size),
                check_archived_at(archived_at),
            )
        )

    def _archive_batch(
        self, kind: ArchiveKind, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        limit = check_cutoff(cutoff)
        size = check_archive_batch(batch_size)
        stamp = check_archived_at(archived_at)
        with self._state():
            pending = [key for key, copy in self._archive(kind).items() if copy.pending][:size]
        moved = self._settle(kind, pending)
        return moved + self._settle(kind, self._copy(kind, limit, size, stamp))

    def _old_keys(self, kind: ArchiveKind, cutoff: datetime, size: int | None) -> list[str]:
        if kind is ArchiveKind.HISTORY:
            rows = [
                (row.job_name, row.started_at, self._history_seq[key], key)
                for key, row in self._history.items()
                if row.started_at < cutoff
            ]
            return [key for *_, key in sorted(rows)][:size]
        records = [
            (record.job_name, record.id)
            for record_id in self._terminal
            if (record := self._records[record_id]).max_tries_reached_at is not None
            and record.max_tries_reached_at < cutoff
        ]
        return [record_id for _, record_id in sorted(records)][:size]

    def _copy(self, kind: ArchiveKind, cutoff: datetime, size: int, stamp: datetime) -> list[str]:
        with self._state():
            keys = self._old_keys(kind, cutoff, size)
            archive = self._archive(kind)
            for key in keys:
                item: HistoryRecord | JobRecord
                if kind is ArchiveKind.HISTORY:
                    item = _history_row(self._history[key])
                else:
                    item = _out(self._records[key])
                archive[key] = ArchivedCopy(item=item, archived_at=stamp)
            return keys

    def _settle(self, kind: ArchiveKind, keys: Sequence[str]) -> int:
        """Delete the originals of ``keys`` (fenced), then settle or drop each pending copy."""
        if not keys:
            return 0
        with self._state():
            archive = self._archive(kind)
            for key in keys:
                copy = archive.get(key)
                if copy is not None and copy.pending:
                    self._delete_original(kind, key, copy)
        with self._state():
            gone = 0
            for key in keys:
                live = key in (self._history if kind is ArchiveKind.HISTORY else self._records)
                copy = archive.get(key)
                if live:
                    if copy is not None and copy.pending:
                        del archive[key]
                    continue
                gone += 1
                if copy is not None:
                    copy.pending = False
            return gone

    def _delete_original(self, kind: ArchiveKind, key: str, copy: ArchivedCopy) -> None:
        if kind is ArchiveKind.HISTORY:
            row = self._history.pop(key, None)
            if row is not None:
                del self._history_seq[key]
                _unindex(self._history_by_name, row.job_name, key)
                _unindex(self._history_by_job, row.job_id, key)
            return
        record = self._records.get(key)
        copied = copy.item
        assert isinstance(copied, JobRecord)
        if (
            record is not None
            and _is_terminal(record)
            and record.max_tries_reached_at == copied.max_tries_reached_at
        ):
            self._put(record, None)
