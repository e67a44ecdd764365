"""One timer task for every lock watchdog of a :class:`~dogs_core.runtime.worker.workers.Workers`.

A task per watchdog costs a spawn and a cancellation per job, for a timer that almost never
fires (a job usually finishes long before its lock runs out). Here a watchdog is an entry in a
heap: arming pushes, disarming marks the entry cancelled, and one task sleeps until the
earliest live deadline.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable

import anyio

from dogs_core.runtime.plumbing.loop import Signal

__all__ = ["Deadline", "Deadlines"]

logger = logging.getLogger("dogs.lock")

# Cancelled entries stay in the heap until they reach its top or a compaction drops them;
# compact once they are the majority, so the heap stays within twice the live entries.
_COMPACT_MIN = 64


class Deadline:
    """An armed timer: call :meth:`Deadlines.cancel` to disarm it."""

    __slots__ = ("at", "callback", "cancelled", "fired")

    def __init__(self, at: float, callback: Callable[[float], None]) -> None:
        self.at = at
        self.callback = callback
        self.cancelled = False
        self.fired = False


class Deadlines:
    """A deadline heap served by one task (:meth:`run`), on the loop clock."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._sequence = itertools.count()
        self._cancelled = 0
        self._sleeping_until = math.inf
        self._changed = Signal()

    def __len__(self) -> int:
        """Live (armed, not fired, not cancelled) deadlines."""
        return len(self._heap) - self._cancelled

    def arm(self, at: float, callback: Callable[[float], None]) -> Deadline:
        """Call ``callback(now)`` once the loop clock reaches ``at`` (unless cancelled first)."""
        entry = Deadline(at, callback)
        heapq.heappush(self._heap, (at, next(self._sequence), entry))
        if at < self._sleeping_until:
            self._changed.notify()
        return entry

    def cancel(self, entry: Deadline) -> None:
        """Disarm ``entry``; a no-op once it fired or was cancelled."""
        if entry.cancelled or entry.fired:
            return
        entry.cancelled = True
        self._cancelled += 1
        if self._cancelled >= _COMPACT_MIN and self._cancelled * 2 > len(self._heap):
            self._heap = [item for item in self._heap if not item[2].cancelled]
            heapq.heapify(self._heap)
            self._cancelled = 0

    def fire_due(self, now: float) -> None:
        """Fire every live entry due at ``now`` (the loop also calls this after each sleep)."""
        heap = self._heap
        while heap:
            at, _, entry = heap[0]
            if entry.cancelled:
                heapq.heappop(heap)
                self._cancelled -= 1
                continue
            if at > now:
                return
            heapq.heappop(heap)
            entry.fired = True
            try:
                entry.callback(now)
            except Exception:  # a watchdog callback must not take the timer task down
                logger.exception("a lock watchdog callback raised")

    async def run(self) -> None:
        """Serve the heap until cancelled (the workers' background task group)."""
        while True:
            self.fire_due(anyio.current_time())
            heap = self._heap
            until = heap[0][0] if heap else math.inf
            self._sleeping_until = until
            try:
                await self._changed.wait(until - anyio.current_time())
            finally:
                self._sleeping_until = math.inf
