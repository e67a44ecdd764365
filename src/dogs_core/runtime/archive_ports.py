"""Where a client finds the archive port behind its store (``client.archive``): the store itself,
the store a wrapper holds (``inner``: the telemetry wrappers), or the sync store of a
:class:`~dogs_core.runtime.threaded.ThreadedJobStore`, whose archive then runs in worker threads
(:class:`ThreadedArchiveStore`). Not generated: both clients import it.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

import anyio.to_thread

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import ArchiveStore
from dogs_core.runtime.threaded import ThreadedJobStore

__all__ = ["ThreadedArchiveStore", "archive_port_of"]

_MAX_WRAPPERS = 8


class ThreadedArchiveStore:
    """:class:`~dogs_core.ports.AsyncArchiveStore` over a sync archive: each call in a worker
    thread (``anyio.to_thread.run_sync``)."""

    def __init__(self, sync: ArchiveStore) -> None:
        self.sync = sync

    async def setup_archive(self) -> None:
        await anyio.to_thread.run_sync(self.sync.setup_archive)

    async def archive_history(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        step = partial(
            self.sync.archive_history, cutoff=cutoff, batch_size=batch_size, archived_at=archived_at
        )
        return await anyio.to_thread.run_sync(step)

    async def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        step = partial(
            self.sync.archive_failed_records,
            cutoff=cutoff,
            batch_size=batch_size,
            archived_at=archived_at,
        )
        return await anyio.to_thread.run_sync(step)

    async def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int:
        count = partial(self.sync.count_archivable, kind, cutoff=cutoff)
        return await anyio.to_thread.run_sync(count)

    async def count_archived(self, kind: ArchiveKind) -> int:
        return await anyio.to_thread.run_sync(self.sync.count_archived, kind)


def archive_port_of(store: object) -> object:
    """The object behind ``store`` that should implement the archive port (the caller checks
    it against the async or the sync protocol); raises
    :class:`~dogs_core.errors.InvalidOptionError` when there is none."""
    current = store
    for _ in range(_MAX_WRAPPERS):
        if isinstance(current, ThreadedJobStore):
            inner = current.sync_store
            if isinstance(inner, ArchiveStore):
                return ThreadedArchiveStore(inner)
            break
        if isinstance(current, ArchiveStore):  # async or sync: the same names
            return current
        wrapped = getattr(current, "inner", None)
        if wrapped is None:
            break
        current = wrapped
    raise InvalidOptionError(
        "store", store, "has no archive (it implements neither AsyncArchiveStore nor ArchiveStore)"
    )
