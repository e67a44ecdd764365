"""Inline runs: one job's handler called right here with a :class:`FakeJobContext`.

No store, no workers. The handler is called through the workers' own invocation path
(:mod:`dogs_core.runtime.execution.invocation`: timeout, heartbeat, cancellation, ``on_error``
arguments),
in a context of its own so that ``current_job()`` returns the fake and nothing leaks out.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

import anyio

from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    JobDefinition,
    Retry,
    is_async_callable,
    load_params,
    normalize_on_error_result,
    validate_params,
)
from dogs_core.errors import ExecutionCancelledError, InvalidParamsError
from dogs_core.ports import Clock
from dogs_core.runtime.execution.context import set_current
from dogs_core.runtime.execution.invocation import (
    HandlerResult,
    Interrupted,
    Raised,
    SnoozeRequested,
    call_callback,
    handler_call,
    invoke_handler,
    on_error_arguments,
)
from dogs_core.runtime.plumbing.clock import LoopClock, SystemClock
from dogs_core.runtime.plumbing.loop import run_in_context
from dogs_testing.fakes import FakeJobContext

__all__ = ["InlineRun", "run_job_inline", "run_job_inline_sync"]


@dataclass(frozen=True, slots=True)
class InlineRun:
    """What one inline run of a handler did.

    ``definition`` is the job that ran; ``context`` the :class:`FakeJobContext` the handler
    received (read its ``lock_extensions``, ``stale_timeout_cleared``, ``locked_until``);
    ``params`` what the handler received (a model instance for a job with a params model);
    ``result`` what it returned; ``error`` what it raised (an
    :class:`~dogs_core.errors.ExecutionCancelledError` means the handler stopped on
    ``ctx.raise_if_cancelled()``, which the workers do not count as a failure);
    ``on_error_decision`` what the job's ``on_error`` returned for that error (``None`` when it
    succeeded, was cancelled, or has no ``on_error``).
    """

    definition: JobDefinition
    context: FakeJobContext
    params: object
    result: Any = None
    error: Exception | None = None
    on_error_decision: Retry | Discard | None = None

    @property
    def ok(self) -> bool:
        """The handler returned normally."""
        return self.error is None

    @property
    def cancelled(self) -> bool:
        """The handler stopped cooperatively (``ctx.raise_if_cancelled()``)."""
        return isinstance(self.error, ExecutionCancelledError)

    def unwrap(self) -> Any:
        """The handler's result; re-raises its error instead when it failed."""
        if self.error is not None:
            raise self.error
        return self.result


def _prepare(
    definition: JobDefinition,
    params: object,
    tries: int,
    context: FakeJobContext | None,
    clock: Clock | None,
) -> tuple[object, FakeJobContext]:
    """Validate like ``schedule`` does, then load like the workers do."""
    if not isinstance(definition, EventJobDefinition) and params is not None:
        raise InvalidParamsError(
            "params", params, f"recurrent job {definition.name!r} takes no params"
        )
    stored = None
    if isinstance(definition, EventJobDefinition):
        stored = validate_params(definition, params)
    if context is None:
        context = FakeJobContext(definition=definition, params=stored, tries=tries, clock=clock)
    return load_params(definition, stored), context


async def _call_here(call: Callable[[], Any]) -> Any:
    """``run_sync`` for inline runs: a sync handler or callback runs in place, not in a thread."""
    return call()


async def _in_own_context(context: FakeJobContext, run: Callable[[], Any]) -> Any:
    """Await ``run()`` with ``current_job()`` bound to ``context``, without leaking the binding."""

    async def bound() -> Any:
        set_current(context)
        return await run()

    return await run_in_context(bound(), contextvars.copy_context())


def _counts_as_failure(error: Exception | None) -> TypeGuard[Exception]:
    """A failure for ``on_error``: an error other than a cooperative cancellation."""
    return error is not None and not isinstance(error, ExecutionCancelledError)


def _unpack(result: HandlerResult) -> tuple[Any, Exception | None]:
    if isinstance(result, Raised):
        return None, result.error
    if isinstance(result, Interrupted):
        return None, result.error or ExecutionCancelledError("the inline run was cancelled")
    if isinstance(result, SnoozeRequested):
        return result.snooze, None  # the run's result is the Snooze the handler gave
    return result.value, None


async def run_job_inline(
    definition: JobDefinition,
    params: object = None,
    *,
    tries: int = 1,
    context: FakeJobContext | None = None,
    clock: Clock | None = None,
) -> InlineRun:
    """Run ``definition``'s handler once, here, with a :class:`FakeJobContext`.

    ``params`` are validated as ``schedule`` validates them (an invalid value raises
    :class:`~dogs_core.errors.InvalidParamsError`, as scheduling would) and loaded as the
    workers load them. An ``async def`` handler is awaited (under the job's ``timeout``, like
    the workers: overrunning fails with :class:`~dogs_core.errors.JobTimeoutError`) with the
    job's automatic heartbeat simulated; a ``def`` handler is called directly (not in a thread).
    When the handler fails and the job has an ``on_error``, it is called and its decision
    returned; an ``on_error`` that raises or returns something invalid raises here (the workers
    would log it and retry), so that the test sees the bug.

    ``tries`` is the attempt number the context reports; ``context`` replaces the fake built
    from ``params`` and ``tries`` (to run with a cancelled one, say); ``clock`` dates the lock
    extensions (by default a :class:`~dogs_core.runtime.plumbing.clock.LoopClock`, so that under a
    virtual clock the dates follow virtual time).

    >>> run = await run_job_inline(resize, {"width": 640})      # doctest: +SKIP
    >>> run.ok, run.result                                        # doctest: +SKIP
    (True, 'resized')
    """
    loaded, ctx = _prepare(
        definition, params, tries, context, clock or LoopClock(datetime.now(UTC))
    )
    interval = definition.heartbeat_interval(ctx._lock_time)

    async def heartbeat() -> bool:
        return ctx._extend(ctx._lock_time, automatic=True)

    invocation = functools.partial(
        invoke_handler,
        definition,
        handler_call(definition, loaded, ctx),
        run_sync=_call_here,
        scope=anyio.CancelScope(),
        heartbeat=None if interval is None else heartbeat,
        heartbeat_interval=None if interval is None else interval.total_seconds(),
    )
    try:
        result, error = _unpack(await _in_own_context(ctx, invocation))
    finally:
        ctx._finish()
    decision = None
    on_error = definition.on_error
    if on_error is not None and _counts_as_failure(error):
        args = on_error_arguments(definition, error, loaded, ctx)
        returned = await _in_own_context(ctx, lambda: call_callback(on_error, args, _call_here))
        decision = normalize_on_error_result(returned, job_name=definition.name)
    return InlineRun(definition, ctx, loaded, result, error, decision)


def _call_with_current(context: FakeJobContext, func: Callable[..., Any], *args: Any) -> Any:
    """Call ``func`` with ``current_job()`` bound to ``context``, without leaking the binding."""

    def call() -> Any:
        set_current(context)
        return func(*args)

    return contextvars.copy_context().run(call)


def run_job_inline_sync(
    definition: JobDefinition,
    params: object = None,
    *,
    tries: int = 1,
    context: FakeJobContext | None = None,
    clock: Clock | None = None,
    backend: str = "asyncio",
) -> InlineRun:
    """:func:`run_job_inline` for sync tests: a ``def`` handler (and ``def`` ``on_error``) runs
    right here, without an event loop; anything async runs in ``anyio.run(backend=...)``
    (so do not call it from inside a running event loop)."""
    if definition.is_async or (
        definition.on_error is not None and is_async_callable(definition.on_error)
    ):
        call = functools.partial(
            run_job_inline,
            definition,
            params,
            tries=tries,
            context=context,
            clock=clock or SystemClock(),
        )
        run: InlineRun = anyio.run(call, backend=backend)
        return run
    loaded, ctx = _prepare(definition, params, tries, context, clock)
    result: Any = None
    error: Exception | None = None
    try:
        result = _call_with_current(ctx, handler_call(definition, loaded, ctx))
    except Exception as raised:
        error = raised
    finally:
        ctx._finish()
    decision = None
    on_error = definition.on_error
    if on_error is not None and _counts_as_failure(error):
        args = on_error_arguments(definition, error, loaded, ctx)
        returned = _call_with_current(ctx, on_error, *args)
        decision = normalize_on_error_result(returned, job_name=definition.name)
    return InlineRun(definition, ctx, loaded, result, error, decision)
