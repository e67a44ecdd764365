"""Calling a job's handler and its callbacks: the one path the workers and the test harness's
:func:`~dogs_testing.harness.run_job_inline` share.

It applies the job's ``timeout`` (overrunning fails with :class:`JobTimeoutError`), runs the
automatic heartbeat beside an async or sync handler, tells a cancelled handler from a failed
one, and shapes the arguments of handlers and ``on_error``. How a sync callable runs (in a worker
thread for the workers, right here for an inline test run) is the caller's ``run_sync``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextlib import nullcontext
from typing import Any, TypeAlias

import anyio

from dogs_core.domain.definitions import (
    EventJobDefinition,
    JobDefinition,
    Snooze,
    is_async_callable,
)
from dogs_core.domain.values import value
from dogs_core.errors import ExecutionCancelledError, JobTimeoutError

__all__ = [
    "HandlerResult",
    "Interrupted",
    "Raised",
    "Returned",
    "RunSync",
    "SnoozeRequested",
    "Suspended",
    "UserCalls",
    "call_callback",
    "finish_suspended",
    "first_step",
    "handler_call",
    "invoke_handler",
    "on_error_arguments",
]

RunSync: TypeAlias = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a sync callable and returns its result (in a worker thread, or in place)."""

Heartbeat: TypeAlias = Callable[[], Awaitable[bool]]
"""One automatic lock renewal; ``False`` (or an error) ends the heartbeat."""


@value
class Returned:
    """The handler returned ``value``."""

    value: Any


@value
class Raised:
    """The handler raised ``error`` (a :class:`JobTimeoutError` when it overran its timeout)."""

    error: Exception


@value
class Interrupted:
    """The handler was cancelled (its scope was cancelled, or it raised ``error``, an
    :class:`ExecutionCancelledError`, on ``ctx.raise_if_cancelled()``)."""

    error: ExecutionCancelledError | None = None


@value
class SnoozeRequested:
    """The handler returned or raised ``snooze``: run again later, this try not counted."""

    snooze: Snooze


HandlerResult: TypeAlias = Returned | Raised | Interrupted | SnoozeRequested


@value
class Suspended:
    """An async handler that suspended in its first step (see :func:`first_step`): its
    coroutine (or awaitable's iterator) and what it yielded to the event loop."""

    steps: Any
    yielded: Any


def handler_call(definition: JobDefinition, params: object, context: Any) -> Callable[[], Any]:
    """The handler bound to its arguments: ``(params, ctx)`` for an event job, ``(ctx)`` else."""
    if isinstance(definition, EventJobDefinition):
        return functools.partial(definition.handler, params, context)
    return functools.partial(definition.handler, context)


def on_error_arguments(
    definition: JobDefinition, error: BaseException, params: object, context: Any
) -> tuple[Any, ...]:
    """``on_error(error, params, ctx)``: params as the handler got them (``None`` for a
    recurrent job)."""
    return (error, params if isinstance(definition, EventJobDefinition) else None, context)


async def invoke_handler(
    definition: JobDefinition,
    call: Callable[[], Any],
    *,
    run_sync: RunSync,
    scope: anyio.CancelScope,
    heartbeat: Heartbeat | None = None,
    heartbeat_interval: float | None = None,
) -> HandlerResult:
    """Run ``call`` (see :func:`handler_call`) under the job's timeout inside ``scope``, with
    ``heartbeat`` every ``heartbeat_interval`` seconds while it runs. Never raises for what the
    handler did; cancelling ``scope`` gives :class:`Interrupted`."""
    with scope:
        if heartbeat is None or heartbeat_interval is None:
            return await _timed(definition, call, run_sync)
        async with anyio.create_task_group() as beats:
            beats.start_soon(_beat, heartbeat, heartbeat_interval)
            result = await _timed(definition, call, run_sync)
            beats.cancel_scope.cancel()
        return result
    return Interrupted()


def first_step(call: Callable[[], Any]) -> HandlerResult | Suspended:
    """Run an async handler (``call()`` returns its coroutine) up to its first suspension.

    Most handlers of a busy worker finish without suspending at all: no cancel scope, lock
    watchdog or timer is needed while it cannot be interrupted. One that suspends is finished
    by :func:`finish_suspended`. Call both inside the handler's cancel scope."""
    try:
        awaitable = call()
        steps = awaitable if isinstance(awaitable, Coroutine) else awaitable.__await__()
        yielded = steps.send(None)
    except StopIteration as stop:
        return _returned(stop.value)
    except Exception as error:
        return _raised(error)
    return Suspended(steps, yielded)


async def finish_suspended(suspended: Suspended) -> HandlerResult:
    """Await the rest of a handler that :func:`first_step` left suspended, in the cancel scope
    the first step ran in (cancellation propagates: the scope tells it apart)."""
    try:
        return _returned(await _Rest(suspended))
    except Exception as error:
        return _raised(error)


class _Rest:
    """Awaits a suspended coroutine: yields what it yielded, then drives it to its end."""

    __slots__ = ("_suspended",)

    def __init__(self, suspended: Suspended) -> None:
        self._suspended = suspended

    def __await__(self) -> Generator[Any, Any, Any]:
        steps, yielded = self._suspended.steps, self._suspended.yielded
        while True:
            try:
                value = yield yielded
            except BaseException as error:  # cancellation, passed on to the handler
                try:
                    yielded = steps.throw(error)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                yielded = steps.send(value)
            except StopIteration as stop:
                return stop.value


def _returned(value: Any) -> HandlerResult:
    return SnoozeRequested(value) if isinstance(value, Snooze) else Returned(value)


def _raised(error: Exception) -> HandlerResult:
    """What a handler that raised ``error`` did (a snooze and a cooperative stop are not
    failures)."""
    if isinstance(error, Snooze):
        return SnoozeRequested(error)
    if isinstance(error, ExecutionCancelledError):
        return Interrupted(error)
    return Raised(error)


async def call_callback(func: Callable[..., Any], args: tuple[Any, ...], run_sync: RunSync) -> Any:
    """Call a user callback (``on_error``, ``on_stale``, a hook): awaited when async, through
    ``run_sync`` when not (and its result awaited if it returned an awaitable)."""
    if is_async_callable(func):
        return await func(*args)
    result = await run_sync(functools.partial(func, *args))
    if hasattr(result, "__await__"):
        return await result
    return result


class UserCalls:
    """How one execution calls user code: sync callables in worker threads bounded by the
    workers' limiter, and callbacks (``on_error``, ``on_stale``, hooks) that
    :meth:`cancel_all` cuts short with :class:`ExecutionCancelledError`, so that a hanging
    callback cannot hold up ``stop``."""

    __slots__ = ("_cancelled", "_job_name", "_limiter", "_scopes")

    def __init__(self, limiter: anyio.CapacityLimiter, job_name: str) -> None:
        self._limiter = limiter
        self._job_name = job_name
        self._scopes: set[anyio.CancelScope] = set()
        self._cancelled = False

    async def in_thread(self, call: Callable[[], Any]) -> Any:
        """A :data:`RunSync` that runs ``call`` in a worker thread."""
        return await anyio.to_thread.run_sync(call, limiter=self._limiter, abandon_on_cancel=True)

    async def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run a user callback (see :func:`call_callback`) unless cancelled first."""
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            if self._cancelled:
                scope.cancel()
            try:
                return await call_callback(func, args, self.in_thread)
            finally:
                self._scopes.discard(scope)
        raise ExecutionCancelledError(
            f"a callback of {self._job_name} was cancelled: the workers are stopping"
        )

    def cancel_all(self) -> None:
        """Cancel the callbacks in progress, and any started later."""
        self._cancelled = True
        for scope in self._scopes:
            scope.cancel()


async def _timed(
    definition: JobDefinition, call: Callable[[], Any], run_sync: RunSync
) -> HandlerResult:
    timeout = definition.timeout
    try:
        with anyio.fail_after(timeout.total_seconds()) if timeout else nullcontext():
            value = await call() if definition.is_async else await run_sync(call)
        return _returned(value)
    except Snooze as snooze:
        return SnoozeRequested(snooze)
    except TimeoutError as error:
        if timeout is not None and not isinstance(error, JobTimeoutError):
            timed_out = JobTimeoutError(f"{definition.name} ran longer than its timeout {timeout}")
            timed_out.__cause__ = error
            return Raised(timed_out)
        return Raised(error)
    except ExecutionCancelledError as error:
        return Interrupted(error)
    except Exception as error:
        return Raised(error)


async def _beat(heartbeat: Heartbeat, interval: float) -> None:
    while True:
        await anyio.sleep(interval)
        try:
            renewed = await heartbeat()
        except Exception:
            return  # the renewal machine already reported the execution stale
        if not renewed:
            return
