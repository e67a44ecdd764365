"""The feeds role: change notifications (never a queue: polling stays the safety net).

Every feed is an async generator of batches with the same shape: it yields ``[]`` once as soon
as it is open (a change made after that is reported), then batches of changes (a burst may be
one batch), and ``[]`` again at least every few seconds while nothing happens
(:data:`~dogs_core.domain.feeds.FEED_HEARTBEAT_SECONDS`), so that a consumer may check its own
deadlines (one without any may waive them: ``without_heartbeats`` of
:mod:`dogs_core.runtime.plumbing.watching`). Changes may be missed and a change may be reported that
changed nothing of interest. Transient errors are resumed from where the feed was when
possible; ``TransientStoreError`` when not. Where the backend cannot watch (a standalone
MongoDB server, a user without the permission), the first ``__anext__`` raises
:class:`~dogs_core.errors.ChangeFeedUnavailableError`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.wakeups import RecordChange

__all__ = ["AsyncFeedStore"]


@runtime_checkable
class AsyncFeedStore(Protocol):
    """Change notifications."""

    def watch_records(self, job_names: Sequence[str]) -> AsyncGenerator[list[RecordChange], None]:
        """A feed of records of ``job_names`` that may have become claimable: inserted, or
        updated so that their lock is released or cleared or their ``next_run_at`` moved."""
        ...

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        """A feed of history rows as they are first written, optionally only of ``job_ids``
        and/or ``job_names``."""
        ...

    def watch_pauses(self) -> AsyncGenerator[list[str], None]:
        """A feed of pause changes: the job names (``"*"`` included) paused or resumed since the
        last batch. A notification only: read ``paused_names`` (the controls role) for the
        state."""
        ...
