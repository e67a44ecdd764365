"""The bulk role of the in-memory store (:class:`~dogs_core.ports.BulkStore`): chunked reads
of a selection in id order, and writes fenced on each record being unchanged since its
snapshot, each one atomic under the state's lock. See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain import validation
from dogs_core.domain.archiving import ArchiveKind, check_archived_at
from dogs_core.domain.bulk import BulkChunk, BulkSelection, TimeField, created_id_bound
from dogs_core.domain.records import JobRecord, JobState, to_millis
from dogs_core.domain.steering import JobChange
from dogs_core.errors import InvalidOptionError
from dogs_testing._memory_archive import ArchivedCopy, archive_of
from dogs_testing._memory_state import MemoryState, _ms, _out
from dogs_testing._memory_steering import _changed

__all__ = ["MemoryBulk", "unchanged_since"]


def unchanged_since(current: JobRecord, snapshot: JobRecord) -> bool:
    """The bulk role's fence: the fields every claim, settlement and operator write changes
    are as in the snapshot."""
    return (
        current.lock_id == snapshot.lock_id
        and current.locked_until == _ms(snapshot.locked_until)
        and (current.tries or 0) == (snapshot.tries or 0)
        and current.status == snapshot.status
        and current.next_run_at == to_millis(snapshot.next_run_at)
        and current.priority == snapshot.priority
    )


class MemoryBulk(MemoryState):
    """Bulk actions by filter over :class:`MemoryState`."""

    def select_for_bulk(
        self, selection: BulkSelection, *, now: datetime, after: str | None, limit: int
    ) -> BulkChunk:
        _check(selection, after)
        size = validation.integer("limit", limit, minimum=1)
        at = to_millis(now)
        with self._state():
            candidates = (
                record
                for record in self._records.values()
                if (after is None or record.id > after)
                and _matches_but_error(selection, record, at)
            )
            found = heapq.nsmallest(size + 1, candidates, key=lambda record: record.id)
            examined = found[:size]
            kept = [
                _out(record)
                for record in examined
                if selection.error_type is None
                or selection.matches(record, at, self._last_error_type(record.id))
            ]
        last_id = examined[-1].id if len(found) > size else None
        return BulkChunk(tuple(kept), len(examined), last_id)

    def count_for_bulk(self, selection: BulkSelection, *, now: datetime) -> int:
        _check(selection, None)
        at = to_millis(now)
        with self._state():
            return sum(
                1
                for record in self._records.values()
                if selection.matches(record, at, self._last_error_type(record.id))
            )

    def modify_unchanged(
        self, changes: Sequence[tuple[JobRecord, JobChange]], *, now: datetime
    ) -> int:
        for snapshot, change in changes:
            if not isinstance(snapshot, JobRecord) or not isinstance(change, JobChange):
                raise InvalidOptionError("changes", changes, "must be (JobRecord, JobChange) pairs")
        at = to_millis(now)
        changed = 0
        with self._state():
            for snapshot, change in changes:
                current = self._records.get(snapshot.id)
                if current is None or not unchanged_since(current, snapshot):
                    continue
                if current.locked_until is not None and current.locked_until > at:
                    continue
                new = _changed(current, change)
                if new != current:
                    self._put(current, new)
                    self._feeds.offer_record(new)
                changed += 1
        return changed

    def delete_unchanged(
        self,
        snapshots: Sequence[JobRecord],
        *,
        unless_running_at: datetime | None,
        archived_at: datetime | None = None,
    ) -> list[JobRecord]:
        for snapshot in snapshots:
            if not isinstance(snapshot, JobRecord):
                raise InvalidOptionError("snapshots", snapshot, "must be JobRecords")
        stamp = None if archived_at is None else check_archived_at(archived_at)
        at = _ms(unless_running_at)
        deleted: list[JobRecord] = []
        with self._state():
            for snapshot in snapshots:
                current = self._records.get(snapshot.id)
                if current is None or not unchanged_since(current, snapshot):
                    continue
                if _running(current, at):
                    continue
                if stamp is not None:
                    # one atomic step here: the copy and the delete (MongoDB's three steps)
                    archive = archive_of(self, ArchiveKind.FAILED_RECORDS)
                    archive[current.id] = ArchivedCopy(_out(current), stamp, pending=False)
                self._put(current, None)
                deleted.append(snapshot)
        return deleted

    def _last_error_type(self, job_id: str) -> str | None:
        """The error type of the newest history row of ``job_id``."""
        keys = self._history_by_job.get(job_id)
        if not keys:
            return None
        newest = max(
            (self._history[key] for key in keys),
            key=lambda row: (row.started_at, row.ended_at, self._history_seq[row.execution_id]),
        )
        return newest.error_type


def _running(record: JobRecord, at: datetime | None) -> bool:
    """Its lock is live at ``at`` (never, when ``at`` is ``None``)."""
    return at is not None and record.locked_until is not None and record.locked_until > at


def _matches_but_error(selection: BulkSelection, record: JobRecord, at: datetime) -> bool:
    """Every filter of ``selection`` but the error type holds (what a chunk examines)."""
    return dataclasses.replace(selection, error_type=None).matches(record, at, None)


def _check(selection: object, after: object) -> None:
    if not isinstance(selection, BulkSelection):
        raise InvalidOptionError("selection", selection, "must be a BulkSelection")
    if after is not None and not isinstance(after, str):
        raise InvalidOptionError("after", after, "must be a record id (a string)")
    if selection.time_field is TimeField.CREATED and selection.since is not None:
        created_id_bound(selection.since)  # a moment that cannot bound an id fails here
    if selection.state is not None:
        JobState(selection.state)
