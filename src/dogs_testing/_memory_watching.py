"""The feeds role of the in-memory store: each feed a subscriber of the store's
:class:`~dogs_testing._memory_feeds.FeedHub`, which every write that may make a record
claimable, each history row's first write and each pause or resume that changed something
offer to, from any thread. See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.wakeups import RecordChange
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryFeeds"]


class MemoryFeeds(MemoryState):
    """Change notifications (the sync feeds; the async face opens the hub's async ones)."""

    def watch_records(self, job_names: Sequence[str]) -> Generator[list[RecordChange], None, None]:
        """Every insert, reschedule, release, unlock and partition repair of a record of
        ``job_names``, with its name, partition and next run."""
        return self._feeds.records(job_names)

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> Generator[list[HistoryRecord], None, None]:
        """History rows as first written (copies)."""
        return self._feeds.history(job_ids=job_ids, job_names=job_names)

    def watch_pauses(self) -> Generator[list[str], None, None]:
        """The names paused or resumed (by a call that changed something)."""
        return self._feeds.pauses()
