"""The bulk role, optional: the reads and fenced writes of bulk actions by filter
(:mod:`dogs_core.domain.bulk`), one chunk per call. A store that has it lists
:attr:`~dogs_core.ports.common.Role.BULK` in its ``roles``.

Fencing: a bulk write changes a record only while it is **unchanged since the chunk read it**
(its ``lock_id``, ``locked_until``, ``tries``, ``status``, ``next_run_at`` and
``priority`` as in the snapshot given), in one atomic step per record, so a record claimed,
settled or steered meanwhile is left alone (and reported as not changed). A write made for a
record that is not running at ``now`` also requires its lock not to be live at ``now``.

Kinds: a selection takes only the :class:`~dogs_core.domain.bulk.RecordKind` s it names
(:attr:`~dogs_core.domain.bulk.BulkSelection.taken_kinds`: plain jobs by default; runtime
schedules and workflow steps only when asked), in every read and count.

Archiving: a bulk delete with ``archived_at`` keeps each record it deletes in the records'
archive (the archive role's ``<records>_archive`` collection, stamped ``archivedAt``), as the
archive role moves failed records: copied first (pending), deleted fenced, then settled (the
copy of a record left live is removed). A crash between the steps is settled by the next
archive batch, which settles pending copies first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.bulk import BulkChunk, BulkSelection
from dogs_core.domain.records import JobRecord
from dogs_core.domain.steering import JobChange

__all__ = ["AsyncBulkStore"]


@runtime_checkable
class AsyncBulkStore(Protocol):
    """Bulk actions by filter, chunk by chunk (optional)."""

    async def select_for_bulk(
        self, selection: BulkSelection, *, now: datetime, after: str | None, limit: int
    ) -> BulkChunk:
        """Examine at most ``limit`` records with an id greater than ``after`` (all when
        ``None``), in ascending id order, that meet every filter of ``selection`` but the error
        type, and return those that meet it too (:meth:`BulkSelection.matches` at ``now``),
        with the id of the last record examined, or ``None`` when no record after it meets
        those filters (the walk is over: no empty last read)."""
        ...

    async def count_for_bulk(self, selection: BulkSelection, *, now: datetime) -> int:
        """How many records ``selection`` holds at ``now`` (a dry run)."""
        ...

    async def modify_unchanged(
        self, changes: Sequence[tuple[JobRecord, JobChange]], *, now: datetime
    ) -> int:
        """Apply each change to its record if the record is unchanged since its snapshot and
        not running at ``now`` (``revive`` as ``modify_record`` does). Returns how many
        records were changed."""
        ...

    async def delete_unchanged(
        self,
        snapshots: Sequence[JobRecord],
        *,
        unless_running_at: datetime | None,
        archived_at: datetime | None = None,
    ) -> list[JobRecord]:
        """Delete each record if it is unchanged since its snapshot (and, with
        ``unless_running_at``, its lock is not live then); the snapshots of the records this
        call deleted. With ``archived_at``, each deleted record is kept in the records'
        archive, stamped ``archived_at`` (see the module documentation)."""
        ...
