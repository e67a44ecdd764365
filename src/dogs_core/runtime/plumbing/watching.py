"""Wake-ups from the store's change feed: push instead of poll, with polling as the safety net.

One :class:`ChangeWatcher` per ``Workers`` reads ``AsyncJobStore.watch_records`` and performs
the :class:`~dogs_core.domain.wakeups.WakePlan` of each batch: wake the claim lanes now (at the
partitions concerned first), or arm a local timer for a job due before the next poll. A feed
that fails is reopened with a backoff; a store that cannot watch is left to polling, logged
once. A missed change costs at most one poll interval, never a job.

A feed yields ``[]`` (a heartbeat) at least every second while nothing happens, so that a
consumer can check deadlines of its own between batches. The watcher checks none (its timers
are :class:`~dogs_core.runtime.plumbing.deadlines.Deadlines`), so it reads its feed inside
:func:`without_heartbeats`: a store may then leave the heartbeats out. The in-memory store's
feeds do, because under a virtual clock every heartbeat is one more step the clock must stop at
(three virtual days were half a million of them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from datetime import datetime, timedelta

import anyio

from dogs_core.domain.wakeups import RecordChange, plan_wakeups
from dogs_core.errors import ChangeFeedUnavailableError
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.plumbing.deadlines import Deadline, Deadlines

__all__ = ["ChangeWatcher", "heartbeats_wanted", "without_heartbeats"]

logger = logging.getLogger("dogs.workers")

_FIRST_BACKOFF = 0.5  # seconds before reopening a failed feed, doubled up to _MAX_BACKOFF
_MAX_BACKOFF = 30.0
_MAX_TIMERS = 1_000  # soon-due timers held at once; the poll covers the rest

# A context variable, not a feed argument: an async generator runs in the context of the task
# that advances it, so the hint reaches the store's feed through every forwarding wrapper
# without a change to the store port.
_HEARTBEATS_WANTED: ContextVar[bool] = ContextVar("dogs_feed_heartbeats_wanted", default=True)


@contextlib.contextmanager
def without_heartbeats() -> Iterator[None]:
    """Within: the feeds this task advances owe it no heartbeat, because it checks no deadline
    of its own between their batches. A hint to the store (a MongoDB feed heartbeats anyway);
    a feed still yields ``[]`` once open, then its batches."""
    token = _HEARTBEATS_WANTED.set(False)
    try:
        yield
    finally:
        _HEARTBEATS_WANTED.reset(token)


def heartbeats_wanted() -> bool:
    """Whether the task advancing a feed now wants its heartbeats (for a store's feed, read at
    each wait: see :func:`without_heartbeats`)."""
    return _HEARTBEATS_WANTED.get()


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
            failure: Exception | None = None
            try:
                await self._follow()
            except ChangeFeedUnavailableError as error:
                self._watching = False
                logger.info("no change feed (%s): waking by polling only", error)
                return
            except Exception as error:
                failure = error
            if self._watching:
                # It had opened: a failure after a good spell is a new outage, not the
                # next step of the last one's backoff.
                backoff = _FIRST_BACKOFF
            self._watching = False
            if failure is not None:
                logger.warning("change feed failed, reopening in %.1fs: %r", backoff, failure)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    async def _follow(self) -> None:
        feed = self._store.watch_records(self._names)
        async with contextlib.aclosing(feed):
            with without_heartbeats():
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
