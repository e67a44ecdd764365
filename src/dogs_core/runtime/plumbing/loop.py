"""The event loop's clock, events and cancel scopes for the per-job hot path, without anyio's
lookups.

``anyio.current_time()``, ``anyio.Event()`` and ``anyio.CancelScope()`` find the running
backend on every call (a few Python calls each), several times per job on a busy worker. On
asyncio these helpers use the loop's own clock and ``asyncio.Event`` directly, which is what
anyio's asyncio backend does underneath; on any other backend (trio, under the test suite's
virtual clock) they are anyio's. Cancel scopes are the backend's own class, looked up once.

Unlike anyio's, an ``asyncio.Event`` that is already set returns from ``wait()`` without a
checkpoint: a caller that loops on an event must wait for a new one each time (as every user
here does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

__all__ = ["Event", "cancel_scope_factory", "loop_clock", "new_event"]


class Event(Protocol):
    """What the hot path uses of an event: set once, waited for by any number of tasks."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[object]: ...


def new_event() -> Event:
    """An event of the running backend (``asyncio.Event`` on asyncio, else ``anyio.Event``)."""
    if asyncio._get_running_loop() is not None:
        return asyncio.Event()
    return anyio.Event()


def loop_clock() -> Callable[[], float]:
    """The running loop's clock as a plain callable: ``anyio.current_time`` bound once."""
    loop = asyncio._get_running_loop()
    if loop is not None:
        return loop.time
    return anyio.current_time


def cancel_scope_factory() -> Callable[[], anyio.CancelScope]:
    """Makes cancel scopes of the running backend: its ``CancelScope`` class, looked up once
    (``anyio.CancelScope()`` finds the backend on every call)."""
    scope_class = type(anyio.CancelScope())
    if isinstance(scope_class(), anyio.CancelScope):
        return scope_class
    return anyio.CancelScope  # pragma: no cover - a backend whose scopes need arguments
