"""A broadcast wake-up: any number of tasks wait, one ``notify`` wakes them all."""

from __future__ import annotations

import math

import anyio

from dogs_core.runtime.plumbing.loop import Event, new_event

__all__ = ["Signal"]


class Signal:
    """Like a condition variable without the lock: waiters re-check their own state.

    A waiter that starts waiting after a notification waits for the next one; callers therefore
    check their condition before waiting. The event is created by the first waiter, so a
    ``notify`` nobody waits for (the common case on the hot path) costs one attribute check.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: Event | None = None

    def notify(self) -> None:
        event = self._event
        if event is not None:
            self._event = None
            event.set()

    async def wait(self, seconds: float = math.inf) -> bool:
        """Wait for the next notification; ``False`` when ``seconds`` passed first."""
        event = self._event
        if event is None:
            event = self._event = new_event()
        if seconds == math.inf:
            await event.wait()
            return True
        with anyio.move_on_after(seconds):
            await event.wait()
            return True
        return False
