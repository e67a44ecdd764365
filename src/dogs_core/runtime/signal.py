"""A broadcast wake-up: any number of tasks wait, one ``notify`` wakes them all."""

from __future__ import annotations

import math

import anyio

__all__ = ["Signal"]


class Signal:
    """Like a condition variable without the lock: waiters re-check their own state.

    Each ``notify`` replaces the event, so a waiter that starts waiting after a notification
    waits for the next one; callers therefore check their condition before waiting.
    """

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait(self, seconds: float = math.inf) -> bool:
        """Wait for the next notification; ``False`` when ``seconds`` passed first."""
        event = self._event
        with anyio.move_on_after(seconds):
            await event.wait()
            return True
        return False
