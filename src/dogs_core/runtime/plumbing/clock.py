"""Clocks: the wall clock for production, a loop clock that follows the event loop's time, and the
server clock every eligibility and lock time is computed on (the local clock plus the measured
offset to the database's clock; see :mod:`dogs_core.domain.clock_offset`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial

import anyio
import anyio.from_thread

from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL, ClockOffsetTracker
from dogs_core.ports import Clock

__all__ = ["LoopClock", "ServerClock", "SkewedClock", "SystemClock", "now_in_any_thread"]


class SystemClock:
    """The machine's wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class LoopClock:
    """A wall clock driven by the event loop's clock (``anyio.current_time``).

    Under a virtual clock (trio's ``MockClock``, ``looptime``) sleeping and "now" advance
    together, which is what makes lock expiry and polling testable without real sleeps.
    The first call inside a running loop pins ``start`` to the loop time of that moment.
    """

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError(f"LoopClock start must be timezone-aware, got {start!r}")
        self._start = start.astimezone(UTC)
        self._origin: float | None = None

    def now(self) -> datetime:
        loop_now = anyio.current_time()
        if self._origin is None:
            self._origin = loop_now
        return self._start + timedelta(seconds=loop_now - self._origin)


class SkewedClock:
    """``clock`` shifted by ``skew``: a machine whose clock is wrong, for tests and demos."""

    def __init__(self, clock: Clock, skew: timedelta) -> None:
        self.clock = clock
        self.skew = skew

    def now(self) -> datetime:
        return self.clock.now() + self.skew


class ServerClock:
    """The database's clock as this process sees it: ``local.now()`` plus the offset last
    measured (zero until then, and with ``interval=None``, which trusts the local clock).

    The runtime measures (:func:`dogs_core.runtime.plumbing._async.clock_sync.sync_clock`) when
    :attr:`tracker` says it is due: before a worker's first claim and every ``interval``
    after, and in a client before a call that is due. Timers and watchdogs never use it: they
    run on the event loop's monotonic clock.
    """

    def __init__(
        self, local: Clock, interval: timedelta | None = DEFAULT_CLOCK_SYNC_INTERVAL
    ) -> None:
        self.local = local
        self.tracker = ClockOffsetTracker(interval)
        # The hot path reads the time a few times per job: read the system clock directly.
        self._local_now: Callable[[], datetime] = (
            partial(datetime.now, UTC) if type(local) is SystemClock else local.now
        )

    @classmethod
    def over(cls, clock: Clock | None, interval: timedelta | None) -> ServerClock:
        """``clock`` itself when it is already a server clock, else one over it (the system
        clock when ``None``)."""
        if isinstance(clock, ServerClock):
            return clock
        return cls(clock or SystemClock(), interval)

    @property
    def offset(self) -> timedelta:
        return self.tracker.offset

    def now(self) -> datetime:
        return self._local_now() + self.tracker.offset


def now_in_any_thread(clock: Clock) -> datetime:
    """``clock.now()``, also from a sync handler's worker thread when ``clock`` follows the
    event loop (a :class:`LoopClock`: then read on the loop, one hop)."""
    try:
        return clock.now()
    except RuntimeError:  # anyio's NoEventLoopError: the loop's clock, read from a thread
        return anyio.from_thread.run_sync(clock.now)
