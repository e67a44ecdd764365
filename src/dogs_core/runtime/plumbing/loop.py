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

``Signal`` is a broadcast wake-up: any number of tasks wait, one ``notify`` wakes them all.

Running a coroutine in its own copy of the context variables, inside the current task.

Executions run on reused runner tasks (a task spawn per job is a large part of a no-op job's
cost). A task has one context, so a handler that sets a context variable and never resets it
(``structlog.contextvars.bind_contextvars``, a tracing context, a request id) would leak it
into the next job of the same runner. Here each step of the coroutine runs inside a context of
its own, the way a new task's would, while the event loop keeps seeing one task: cancellation,
cancel scopes and ``current_task()`` are unaffected.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

import anyio

__all__ = ["Event", "Signal", "cancel_scope_factory", "loop_clock", "new_event", "run_in_context"]


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


T = TypeVar("T")


class _InContext:
    __slots__ = ("_context", "_coroutine")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        self._coroutine = coroutine
        self._context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, run = self._coroutine, self._context.run
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                if error is None:
                    yielded = run(coroutine.send, value)
                else:
                    yielded = run(coroutine.throw, error)
            except StopIteration as stop:
                return stop.value
            try:
                value = yield yielded
                error = None
            except BaseException as raised:  # cancellation, passed on to the coroutine
                value = None
                error = raised


async def run_in_context(coroutine: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """Await ``coroutine`` with every step run in ``context`` (for example
    ``contextvars.copy_context()`` taken where a new task would have been started)."""
    result: T = await _InContext(coroutine, context)
    return result
