"""Running a coroutine in its own copy of the context variables, inside the current task.

Executions run on reused runner tasks (a task spawn per job is a large part of a no-op job's
cost). A task has one context, so a handler that sets a context variable and never resets it
(``structlog.contextvars.bind_contextvars``, a tracing context, a request id) would leak it
into the next job of the same runner. Here each step of the coroutine runs inside a context of
its own, the way a new task's would, while the event loop keeps seeing one task: cancellation,
cancel scopes and ``current_task()`` are unaffected.
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["run_in_context"]

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
