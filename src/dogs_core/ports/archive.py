"""The archive role, optional: moving old history rows and failed records into archive
collections, one batch per call (``client.archive``, ``dogs archive``). A store that has it
lists :attr:`~dogs_core.ports.common.Role.ARCHIVE` in its ``roles``.

Which rows are old is :mod:`dogs_core.domain.archiving`'s rule: a history row whose
``started_at`` is before ``cutoff``; an event record in status ``maxTriesReached`` whose
``max_tries_reached_at`` is before ``cutoff``, oldest first. Each call moves at most
``batch_size`` of them (1..10,000; otherwise ``InvalidOptionError`` and nothing written) and
returns how many left the live collection for the archive in that call.

Crash safety: a call may be interrupted at any point; the next call finishes what it left
(copies kept pending until their source is gone), so that after calls returning ``0`` every
moved row is in the archive exactly once, keeps its fields (plus ``archivedAt``) and is gone
from the live collection. A failed record changed meanwhile (revived by ``retry_now``,
rescheduled) is never deleted, and its archive copy is removed. Retrying a call that raised a
transient error is safe.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.archiving import ArchiveKind

__all__ = ["AsyncArchiveStore"]


@runtime_checkable
class AsyncArchiveStore(Protocol):
    """Moving old rows to archive collections (optional)."""

    async def setup_archive(self) -> None:
        """Create the archive collections' indexes and the live collections' indexes the batch
        reads walk. Idempotent."""
        ...

    async def archive_history(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Move up to ``batch_size`` history rows started before ``cutoff``, stamped
        ``archived_at``; the number moved."""
        ...

    async def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Move up to ``batch_size`` failed event records marked before ``cutoff``, stamped
        ``archived_at``; the number moved."""
        ...

    async def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int:
        """How many documents of ``kind`` a run with ``cutoff`` would move (a dry run)."""
        ...

    async def count_archived(self, kind: ArchiveKind) -> int:
        """How many documents of ``kind`` the archive holds (settled and pending)."""
        ...

    async def archived_at(self, job_id: str) -> datetime | None:
        """When job ``job_id`` left the live collections for the archive: the newest
        ``archived_at`` of its settled copies (its failed record, its history rows); ``None``
        when the archive holds none of them. (Issue 29: a job's page says it was archived.)"""
        ...
