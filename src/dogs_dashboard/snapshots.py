"""Reads a page shows that may be expensive (the counts of every record, the stats of the
history): fresh while they are cheap, a timed snapshot once they are not.

A :class:`Snapshot` measures each read. A read that took less than :data:`CHEAP_SECONDS` is
done again whenever its value is older than ``fresh_age`` (0 for the counts: always fresh; the
stats' cache time for the stats), inline, so a small database shows exact numbers. A slow one
(counting a million records takes seconds) is served as it was last read, with its age, and read
again after the response is sent (:meth:`refresh`, a Starlette background task), one read at a
time and at most every ``max(fresh_age, 5 x its cost)``: the page answers at once, and a
dashboard left open costs the database a fifth of one connection's time at most.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

import anyio

__all__ = ["CHEAP_SECONDS", "Snapshot", "SnapshotRead"]

logger = logging.getLogger("dogs.dashboard")

T = TypeVar("T")

#: A read faster than this is done inline whenever its value is stale.
CHEAP_SECONDS: Final = 0.25
#: A slow read is done again at most every this many times its own duration.
SLOW_READ_SPACING: Final = 5.0


@dataclass(frozen=True, slots=True)
class SnapshotRead(Generic[T]):
    """What a page shows: the value (``None`` when it could not be read), why not (``error``),
    and its age in seconds when it is older than the request (``None``: read just now)."""

    value: T | None
    error: str | None
    age: float | None


@dataclass
class Snapshot(Generic[T]):
    """One expensive read of a page (see the module documentation)."""

    read: Callable[[], Awaitable[T]]
    fresh_age: float
    name: str
    clock: Callable[[], float] = time.monotonic
    _value: T | None = None
    _error: str | None = None
    _at: float = float("-inf")
    _cost: float = 0.0
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _refreshing: bool = False

    async def get(self) -> SnapshotRead[T]:
        """The value: read now when never read, or stale and cheap; else as last read."""
        age = self.clock() - self._at
        if self._at == float("-inf") or (age >= self.fresh_age and self._cost < CHEAP_SECONDS):
            async with self._lock:
                if self.clock() - self._at >= self.fresh_age or self._at == float("-inf"):
                    await self._read()
            return SnapshotRead(self._value, self._error, None)
        shown_age = age if age >= 1.0 else None
        return SnapshotRead(self._value, self._error, shown_age)

    def due(self) -> bool:
        """Whether a background read should start now (slow, old enough, none running)."""
        if self._refreshing or self._cost < CHEAP_SECONDS:
            return False
        spacing = max(self.fresh_age, SLOW_READ_SPACING * self._cost)
        return self.clock() - self._at >= spacing

    async def refresh(self) -> None:
        """Read again (a background task after a response); one at a time."""
        if self._refreshing:
            return
        self._refreshing = True
        try:
            async with self._lock:
                await self._read()
        finally:
            self._refreshing = False

    async def _read(self) -> None:
        started = self.clock()
        try:
            self._value, self._error = await self.read(), None
        except NotImplementedError:
            self._value, self._error = None, "the store cannot say"
        except Exception as error:  # a panel, not the page: show why and keep serving
            logger.warning("dashboard: reading %s failed: %r", self.name, error)
            self._error = f"{type(error).__name__}: {error}"
        self._cost = self.clock() - started
        self._at = self.clock()
