"""Clocks: the wall clock for production, and a loop clock that follows the event loop's time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio

__all__ = ["LoopClock", "SystemClock"]


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
