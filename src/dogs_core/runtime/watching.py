"""Wake-ups from the store's change feed: push instead of poll, with polling as the safety net.

One :class:`ChangeWatcher` per ``Workers`` reads ``AsyncJobStore.watch_records`` and performs
the :class:`~dogs_core.domain.wakeups.WakePlan` of each batch: wake the claim lanes now (at the
partitions concerned first), or arm a local timer for a job due before the next poll. A feed
that fails is reopened with a backoff; a store that cannot watch is left to polling, logged
once. A missed change costs at most one poll interval, never a job.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import anyio

from dogs_core.domain.wakeups import RecordChange, plan_wakeups
from dogs_core.errors import ChangeFeedUnavailableError
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.deadlines import Deadline, Deadlines

__all__ = ["ChangeWatcher"]

logger = logging.getLogger("dogs.workers")

_FIRST_BACKOFF = 0.5  # seconds before reopening a failed feed, doubled up to _MAX_BACKOFF
_MAX_BACKOFF = 30.0
_MAX_TIMERS = 1_000  # soon-due timers held at once; the poll covers the rest


class ChangeWatcher:
    """Turns the change feed of one store into wake-ups of one instance's claim lanes."""

    def __init__(
        self,
        store: AsyncJobStore,
        job_names: Sequence[str],
        *,
        clock: Clock,
        deadlines: Deadlines,
        horizon: timedelta,
        wake: Callable[[Sequence[int]], None],
    ) -> None:
        self._store = store
        self._names = tuple(job_names)
        self._name_set = frozenset(job_names)
        self._clock = clock
        self._deadlines = deadlines
        self._horizon = horizon
        self._wake = wake
        self._timers: dict[datetime, Deadline] = {}
        self._watching = False

    @property
    def watching(self) -> bool:
        """Whether the feed is open now (changes made from here on wake the lanes)."""
        return self._watching

    async def run(self) -> None:
        """Watch until cancelled, or until the store says it cannot watch."""
        backoff = _FIRST_BACKOFF
        while True:
            try:
                await self._follow()
            except ChangeFeedUnavailableError as error:
                self._watching = False
                logger.info("no change feed (%s): waking by polling only", error)
                return
            except Exception as error:
                self._watching = False
                logger.warning("change feed failed, reopening in %.1fs: %r", backoff, error)
            else:
                self._watching = False
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _follow(self) -> None:
        feed = self._store.watch_records(self._names)
        async with contextlib.aclosing(feed):
            async for batch in feed:
                if not self._watching:
                    self._watching = True
                    # Changes made before the feed opened were not reported: look once.
                    self._wake(())
                if batch:
                    self._apply(batch)

    def _apply(self, batch: list[RecordChange]) -> None:
        now = self._clock.now()
        plan = plan_wakeups(
            batch, job_names=self._name_set, now=now, horizon=self._horizon, max_later=_MAX_TIMERS
        )
        if plan.now:
            self._wake(plan.partitions)
        for due in plan.later:
            if due in self._timers or len(self._timers) >= _MAX_TIMERS:
                continue
            # A millisecond late rather than early: stored times are whole milliseconds.
            at = anyio.current_time() + (due - now).total_seconds() + 0.001
            self._timers[due] = self._deadlines.arm(at, self._timer_fired(due))

    def _timer_fired(self, due: datetime) -> Callable[[float], None]:
        def fired(_now: float) -> None:
            self._timers.pop(due, None)
            self._wake(())

        return fired
