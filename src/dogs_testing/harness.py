"""Test your jobs without a database: a fake context, inline runs, and a harness of workers.

Three levels, from the smallest to the most complete:

:func:`run_job_inline` / :func:`run_job_inline_sync`
    Call one job's handler right here with a :class:`FakeJobContext`: no store, no workers.
    Params are validated exactly as ``schedule`` validates them, then loaded as the handler
    receives them. The :class:`InlineRun` tells what the handler returned or raised and, on a
    failure, what its ``on_error`` decided::

        run = await run_job_inline(send_welcome, {"user_id": 42})
        assert run.ok and run.result == "sent"
        run = await run_job_inline(send_welcome, {"user_id": -1}, tries=3)
        assert isinstance(run.on_error_decision, Discard)

:class:`FakeJobContext`
    The :class:`~dogs_core.runtime.context.JobContext` surface, recording lock extensions and
    clears, so a test can check that a long job keeps its lock::

        run = await run_job_inline(import_catalog, {"url": "s3://bucket/big.csv"})
        assert len(run.context.lock_extensions) >= 10
        ctx = FakeJobContext(params={"n": 1}, tries=2)
        ctx.cancel()  # as at shutdown: ctx.raise_if_cancelled() now raises

:class:`JobsHarness`
    The real runtime (a :class:`~dogs_core.runtime.workers.Workers` and a
    :class:`~dogs_core.runtime.client.DogsClient`) over an
    :class:`~dogs_testing.memory.InMemoryJobStore`, on a
    :class:`~dogs_core.runtime.clock.LoopClock`. Meant for virtual time: with anyio's pytest
    plugin and trio's ``MockClock(autojump_threshold=0)``, a day of schedules takes
    milliseconds::

        @pytest.fixture
        def anyio_backend(dogs_virtual_clock):
            return ("trio", {"clock": dogs_virtual_clock})

        @pytest.mark.anyio
        async def test_welcome_is_sent() -> None:
            async with JobsHarness(jobs) as harness:
                await harness.schedule(send_welcome, {"user_id": 42}, run_in="5m")
                harness.assert_scheduled(send_welcome, {"user_id": 42})
                await harness.advance("5m")
                await harness.run_until_idle()
                harness.assert_ran(send_welcome, times=1, status="success")

:class:`ManualClock`
    A :class:`~dogs_core.ports.Clock` you move by hand, for code that takes a clock but runs no
    event loop (a scheduling client under test, a custom ``next_run`` function).

Thread-run (``def``) handlers and virtual time: the event loop counts a worker thread's work as
idle time, so with ``autojump_threshold=0`` the clock may jump while a sync handler runs (and
fire its lock watchdog). Test sync handlers with :func:`run_job_inline`, with a positive
autojump threshold, or with a real clock.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.lowlevel

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
from dogs_core.domain.records import (
    DEFAULT_PRIORITY,
    ClaimedJob,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    ScheduleOutcome,
)
from dogs_core.domain.schedules import parse_duration
from dogs_core.errors import (
    ExecutionCancelledError,
    InvalidOptionError,
    InvalidParamsError,
    WorkersStateError,
)
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.jobs import Jobs
from dogs_core.ports import Clock
from dogs_core.runtime.client import DogsClient
from dogs_core.runtime.clock import LoopClock, SystemClock
from dogs_core.runtime.context import JobContext, set_current
from dogs_core.runtime.execution import Execution, JobTimeoutError
from dogs_core.runtime.settings import DurationLike, WorkerSettings
from dogs_core.runtime.signal import Signal
from dogs_core.runtime.workers import Workers
from dogs_testing.memory import InMemoryJobStore

__all__ = [
    "DEFAULT_START",
    "FakeJobContext",
    "HarnessFactory",
    "InlineRun",
    "JobsHarness",
    "LockExtension",
    "ManualClock",
    "run_job_inline",
    "run_job_inline_sync",
]

DEFAULT_START: Final = datetime(2030, 1, 1, tzinfo=UTC)
"""Where a :class:`ManualClock` and a :class:`JobsHarness` start when not told otherwise."""

_DEFAULT_LOCK_TIME: Final = timedelta(seconds=30)
_HISTORY_LIMIT: Final = 1_000_000
_DEFAULT_POLL_INTERVAL: Final = timedelta(hours=1)
_RECHECK_SECONDS: Final = 600.0
_WAKE_MARGIN_SECONDS: Final = 1e-5


class _Any:
    def __repr__(self) -> str:
        return "ANY"


_ANY_PARAMS: Final[Any] = _Any()


# --------------------------------------------------------------------------------------------
# Clocks


class ManualClock:
    """A clock that moves only when told to (a :class:`~dogs_core.ports.Clock`).

    >>> clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    >>> clock.advance("90s")
    datetime.datetime(2030, 1, 1, 0, 1, 30, tzinfo=datetime.timezone.utc)
    >>> clock.set(datetime(2030, 6, 1, tzinfo=UTC)); clock.now().month
    6
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = _aware("start", start)

    def now(self) -> datetime:
        return self._now

    def advance(self, duration: DurationLike) -> datetime:
        """Move forward by ``duration`` (a ``timedelta``, seconds, or ``"5m"``); returns now."""
        self._now += parse_duration(duration, field="duration")
        return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (any timezone-aware time, also one in the past: clock skew)."""
        self._now = _aware("moment", moment)


def _aware(field: str, value: object) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidOptionError(field, value, "must be a timezone-aware datetime")
    return value.astimezone(UTC)


# --------------------------------------------------------------------------------------------
# The fake context


@dataclass(frozen=True, slots=True)
class LockExtension:
    """One lock extension asked of a :class:`FakeJobContext`.

    ``granted`` is what the call returned; ``automatic`` marks the renewals made by the
    simulated heartbeat of :func:`run_job_inline` (``heartbeat=True`` jobs).
    """

    duration: timedelta
    at: datetime
    granted: bool
    automatic: bool = False


class FakeJobContext(JobContext):
    """A :class:`~dogs_core.runtime.context.JobContext` for tests: same surface, no execution.

    Give a ``definition`` (its name, type, priority and lock time are used) or a ``job_name``;
    ``params`` are the params *as stored* (what ``ctx.params`` returns). Extensions are granted
    and recorded in :attr:`lock_extensions` until the lock is lost (:meth:`lose_lock`), the
    stale timeout was cleared, or the run finished, as the real context refuses them then.
    ``clock`` dates the extensions (the wall clock by default).

    It is a real ``JobContext`` subclass, so ``isinstance`` checks pass and, during
    :func:`run_job_inline`, :func:`~dogs_core.runtime.context.current_job` returns it.
    """

    def __init__(
        self,
        *,
        definition: JobDefinition | None = None,
        job_name: str | None = None,
        params: Mapping[str, Any] | None = None,
        tries: int = 1,
        was_stale: bool = False,
        job_id: str | None = None,
        execution_id: str | None = None,
        lock_time: DurationLike | None = None,
        clock: Clock | None = None,
    ) -> None:
        # JobContext.__init__ needs an Execution; every member it provides is overridden here.
        if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
            raise InvalidOptionError("tries", tries, "must be an int >= 1 (1 = the first run)")
        name = job_name if job_name is not None else (definition.name if definition else "job")
        if lock_time is not None:
            lock = parse_duration(lock_time, field="lock_time")
        elif definition is not None:
            lock = definition.effective_lock_time(_DEFAULT_LOCK_TIME)
        else:
            lock = _DEFAULT_LOCK_TIME
        self._definition = definition
        self._clock: Clock = clock or SystemClock()
        self._lock_time = lock
        self._locked_until = self._clock.now() + lock
        self._record = ClaimedJob(
            job_id=job_id or new_record_id(),
            execution_id=execution_id or new_execution_id(),
            job_name=name,
            type=definition.type if definition is not None else JobType.EVENT,
            params=params,
            tries=tries,
            priority=definition.priority if definition is not None else DEFAULT_PRIORITY,
            locked_until=self._locked_until,
            was_stale=was_stale,
        )
        self._cancelled = False
        self._lock_lost = False
        self._finished = False
        self.lock_extensions: list[LockExtension] = []
        """Every extension asked for, in order (granted or not)."""
        self.stale_timeout_cleared = False
        """Whether :meth:`clear_stale_timeout` was called."""
        self.logger: logging.LoggerAdapter[logging.Logger] = logging.LoggerAdapter(
            logging.getLogger(f"dogs.job.{name}"),
            {"job_name": name, "job_id": self._record.job_id, "execution_id": self.execution_id},
        )

    # -- the JobContext surface ------------------------------------------------------------------

    @property
    def record(self) -> ClaimedJob:
        return self._record

    @property
    def definition(self) -> JobDefinition:
        if self._definition is None:
            raise AttributeError("this FakeJobContext was built without definition=...")
        return self._definition

    @property
    def job_id(self) -> str:
        return self._record.job_id

    @property
    def execution_id(self) -> str:
        return self._record.execution_id

    @property
    def job_name(self) -> str:
        return self._record.job_name

    @property
    def tries(self) -> int:
        return self._record.tries

    @property
    def was_stale(self) -> bool:
        return self._record.was_stale

    @property
    def params(self) -> Mapping[str, Any] | None:
        return self._record.params

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def extend_lock_time(self, duration: DurationLike) -> bool:
        seconds = parse_duration(duration, field="duration")
        await anyio.lowlevel.checkpoint()
        return self._extend(seconds, automatic=False)

    def extend_lock_time_blocking(self, duration: DurationLike) -> bool:
        return self._extend(parse_duration(duration, field="duration"), automatic=False)

    def clear_stale_timeout(self) -> None:
        self.stale_timeout_cleared = True

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise ExecutionCancelledError(
                f"execution {self.execution_id} of {self.job_name} was cancelled"
            )

    # -- test controls ---------------------------------------------------------------------------

    @property
    def locked_until(self) -> datetime:
        """The lock deadline: claim time + lock time, moved by each granted extension."""
        return self._locked_until

    @property
    def granted_extensions(self) -> list[LockExtension]:
        """The extensions that were granted."""
        return [extension for extension in self.lock_extensions if extension.granted]

    def cancel(self) -> None:
        """Request cancellation, as the workers do at shutdown: :attr:`cancelled` turns true."""
        self._cancelled = True

    def lose_lock(self) -> None:
        """Simulate a lost lock (another worker took the job): later extensions are refused and
        the execution is cancelled, as for a job with ``cancel_on_stale=True``."""
        self._lock_lost = True
        self._cancelled = True

    def _extend(self, duration: timedelta, *, automatic: bool) -> bool:
        now = self._clock.now()
        granted = not (self._lock_lost or self._finished or self.stale_timeout_cleared)
        if granted:
            self._locked_until = now + duration
        self.lock_extensions.append(LockExtension(duration, now, granted, automatic))
        return granted

    def _finish(self) -> None:
        self._finished = True


# --------------------------------------------------------------------------------------------
# Inline runs


@dataclass(frozen=True, slots=True)
class InlineRun:
    """What one inline run of a handler did.

    ``params`` is what the handler received (a model instance for a job with a params model);
    ``error`` what it raised (an :class:`~dogs_core.errors.ExecutionCancelledError` means the
    handler stopped on ``ctx.raise_if_cancelled()``, which the workers do not count as a
    failure); ``on_error_decision`` what the job's ``on_error`` returned for that error
    (``None`` when it succeeded, was cancelled, or has no ``on_error``).
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


def _arguments(
    definition: JobDefinition, loaded: object, context: FakeJobContext
) -> tuple[Any, ...]:
    if isinstance(definition, EventJobDefinition):
        return (loaded, context)
    return (context,)


def _on_error_arguments(
    definition: JobDefinition, error: Exception, loaded: object, context: FakeJobContext
) -> tuple[Any, ...]:
    return (error, loaded if isinstance(definition, EventJobDefinition) else None, context)


def _call_with_current(context: FakeJobContext, func: Callable[..., Any], *args: Any) -> Any:
    """Call ``func`` with ``current_job()`` bound to ``context``, without leaking the binding."""

    def call() -> Any:
        set_current(context)
        return func(*args)

    return contextvars.copy_context().run(call)


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
    the workers: overrunning fails with :class:`~dogs_core.runtime.JobTimeoutError`) with the
    job's automatic heartbeat simulated; a ``def`` handler is called directly (not in a thread).
    When the handler fails and the job has an ``on_error``, it is called and its decision
    returned; an ``on_error`` that raises or returns something invalid raises here (the workers
    would log it and retry), so that the test sees the bug.

    ``tries`` is the attempt number the context reports; ``context`` replaces the fake built
    from ``params`` and ``tries`` (to run with a cancelled one, say); ``clock`` dates the lock
    extensions (by default a :class:`~dogs_core.runtime.clock.LoopClock`, so that under a
    virtual clock the dates follow virtual time).

    >>> run = await run_job_inline(resize, {"width": 640})      # doctest: +SKIP
    >>> run.ok, run.result                                        # doctest: +SKIP
    (True, 'resized')
    """
    loaded, ctx = _prepare(
        definition, params, tries, context, clock or LoopClock(datetime.now(UTC))
    )
    args = _arguments(definition, loaded, ctx)
    result: Any = None
    error: Exception | None = None
    try:
        if definition.is_async:
            result = await _await_with_heartbeat(definition, ctx, args)
        else:
            result = _call_with_current(ctx, definition.handler, *args)
    except Exception as raised:
        error = raised
    finally:
        ctx._finish()
    decision = None
    if error is not None and not isinstance(error, ExecutionCancelledError):
        on_error = definition.on_error
        if on_error is not None:
            on_error_args = _on_error_arguments(definition, error, loaded, ctx)
            if is_async_callable(on_error):
                returned = await _in_task(ctx, on_error, *on_error_args)
            else:
                returned = _call_with_current(ctx, on_error, *on_error_args)
            decision = normalize_on_error_result(returned, job_name=definition.name)
    return InlineRun(definition, ctx, loaded, result, error, decision)


async def _in_task(context: FakeJobContext, func: Callable[..., Any], *args: Any) -> Any:
    """Await ``func(*args)`` in a child task whose ``current_job()`` is ``context``."""
    outcome: list[Any] = []
    failure: list[Exception] = []

    async def child() -> None:
        set_current(context)  # the child task's own copy of the context variables
        try:
            outcome.append(await func(*args))
        except Exception as error:
            failure.append(error)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(child)
    if failure:
        raise failure[0]
    return outcome[0]


async def _await_with_heartbeat(
    definition: JobDefinition, ctx: FakeJobContext, args: tuple[Any, ...]
) -> Any:
    interval = definition.heartbeat_interval(ctx._lock_time)
    timeout = definition.timeout
    outcome: list[Any] = []
    failure: list[Exception] = []

    async def heartbeat(seconds: float) -> None:
        while True:
            await anyio.sleep(seconds)
            if not ctx._extend(ctx._lock_time, automatic=True):
                return

    async def handler(scope: anyio.CancelScope) -> None:
        set_current(ctx)  # this task's own copy of the context
        try:
            limit = math.inf if timeout is None else timeout.total_seconds()
            try:
                with anyio.fail_after(limit):
                    outcome.append(await definition.handler(*args))
            except TimeoutError as error:
                if timeout is None or isinstance(error, JobTimeoutError):
                    raise
                raise JobTimeoutError(
                    f"{definition.name} ran longer than its timeout {timeout}"
                ) from error
        except Exception as error:
            failure.append(error)
        finally:
            scope.cancel()

    async with anyio.create_task_group() as tasks:
        if interval is not None:
            tasks.start_soon(heartbeat, interval.total_seconds())
        tasks.start_soon(handler, tasks.cancel_scope)
    if failure:
        raise failure[0]
    return outcome[0]


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
        result = _call_with_current(ctx, definition.handler, *_arguments(definition, loaded, ctx))
    except Exception as raised:
        error = raised
    finally:
        ctx._finish()
    decision = None
    on_error = definition.on_error
    if (
        error is not None
        and on_error is not None
        and not isinstance(error, ExecutionCancelledError)
    ):
        returned = _call_with_current(
            ctx, on_error, *_on_error_arguments(definition, error, loaded, ctx)
        )
        decision = normalize_on_error_result(returned, job_name=definition.name)
    return InlineRun(definition, ctx, loaded, result, error, decision)


# --------------------------------------------------------------------------------------------
# The harness


class _ObservedWorkers(Workers):
    """Workers that report each execution's end (after its history row was written)."""

    def __init__(self, *args: Any, on_finished: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_finished = on_finished

    def forget(self, execution: Execution) -> None:
        super().forget(execution)
        self._on_finished()


class JobsHarness:
    """Workers, a client and an in-memory store on one loop clock: the runtime under test.

    ::

        async with JobsHarness(jobs, workers_count=2) as harness:
            await harness.schedule(send_welcome, {"user_id": 42})
            await harness.run_until_idle()
            harness.assert_ran(send_welcome, times=1, status="success")
            assert harness.scheduled(send_welcome) == []

    ``jobs`` is a :class:`~dogs_core.jobs.Jobs` registry or an iterable of definitions. Worker
    options (``workers_count``, ``max_tries``, ...) are those of
    :class:`~dogs_core.runtime.settings.WorkerSettings`. While :meth:`run_until_idle` or
    :meth:`advance` runs, the harness wakes the workers as soon as a job falls due (its time
    came, a lock expired, a retry is due), so jobs start on time and the cost of a long advance
    is the number of runs, not the length of time; ``poll_interval`` (default 1 h here, 3 s in
    production) is only a fallback: lower it to reproduce production polling.

    ``store`` defaults to a new :class:`InMemoryJobStore` on the harness clock (so retention
    TTLs expire in virtual time); ``clock`` to a :class:`~dogs_core.runtime.clock.LoopClock`
    starting at ``start``. Give two harnesses the same ``store`` and ``clock`` to test two
    worker instances sharing a database.

    The workers start on entry (``start_workers=False`` delays that until the first
    :meth:`run_until_idle`, :meth:`advance` or :meth:`start_workers`: handy to check what code
    under test scheduled before anything runs) and stop on exit, cancelling what still runs
    after ``exit_grace`` (0 by default) and releasing its lock.
    """

    def __init__(
        self,
        jobs: Jobs | Iterable[JobDefinition],
        *,
        store: InMemoryJobStore | None = None,
        clock: Clock | None = None,
        start: datetime | None = None,
        seed: int | None = 0,
        start_workers: bool = True,
        exit_grace: DurationLike | None = 0,
        **worker_options: Any,
    ) -> None:
        self.jobs = jobs if isinstance(jobs, Jobs) else Jobs(jobs)
        if clock is not None and start is not None:
            raise InvalidOptionError("start", start, "pass either clock or start, not both")
        self.clock: Clock = clock or LoopClock(_aware("start", start or DEFAULT_START))
        self.store = store if store is not None else InMemoryJobStore(clock=self.clock)
        worker_options.setdefault("poll_interval", _DEFAULT_POLL_INTERVAL)
        self.settings = WorkerSettings(**worker_options)
        self._seed = seed
        self.client = DogsClient(
            self.store,
            self.jobs,
            n_partitions=self.settings.n_partitions,
            clock=self.clock,
            rng=random.Random(seed),
        )
        self._start_on_enter = start_workers
        self._exit_grace = (
            None if exit_grace is None else parse_duration(exit_grace, field="exit_grace")
        )
        self._workers: _ObservedWorkers | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._entered = False
        self._finished_executions = 0
        self._finished = Signal()

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._entered:
            raise WorkersStateError("this JobsHarness was already used; create a new one")
        self._entered = True
        self._stack = contextlib.AsyncExitStack()
        if self._start_on_enter:
            try:
                await self.start_workers()
            except BaseException:
                stack, self._stack = self._stack, None
                with anyio.CancelScope(shield=True):
                    await stack.aclose()
                raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if self._workers is not None and exc_type is None:
            await self._workers.stop(grace=self._exit_grace)
        if stack is None:
            return None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The workers' task group wraps the body's error (an assertion, say): unwrap it.
            if exc is not None and _sole_leaf(group) is exc:
                raise exc from None
            raise

    async def start_workers(self) -> None:
        """Start the workers now (idempotent) and wait until they have set up the store and
        the records of the recurrent jobs."""
        if self._workers is not None:
            return
        if self._stack is None:
            raise WorkersStateError("use the harness as 'async with JobsHarness(...) as harness'")
        workers = _ObservedWorkers(
            self.store,
            self.jobs,
            self.settings,
            clock=self.clock,
            rng=random.Random(self._seed),
            on_finished=self._on_execution_finished,
        )
        await self._stack.enter_async_context(workers)
        self._workers = workers
        recurrent = {d.name for d in self.jobs if d.type is JobType.RECURRENT}
        for _ in range(10_000):
            if not workers.running:
                raise WorkersStateError("the workers stopped while starting; see the dogs logs")
            if workers.capabilities is not None:
                present = {r.job_name for r in self.store.sync.find_jobs()}
                if recurrent <= present:
                    return
            await anyio.lowlevel.checkpoint()
        raise WorkersStateError("the workers did not finish starting")

    def _on_execution_finished(self) -> None:
        self._finished_executions += 1
        self._finished.notify()

    @property
    def workers(self) -> Workers:
        """The running workers (to ``stop(grace=...)`` them, or read their counters)."""
        if self._workers is None:
            raise WorkersStateError("the workers are not started yet")
        return self._workers

    def now(self) -> datetime:
        """The application time (the harness clock)."""
        return self.clock.now()

    # -- driving ---------------------------------------------------------------------------------

    async def schedule(
        self,
        job: EventJobDefinition | str,
        params: object = None,
        *,
        run_in: DurationLike | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
    ) -> ScheduleOutcome:
        """Schedule an event job through the client (see
        :meth:`~dogs_core.runtime.client.DogsClient.schedule`) and wake idle workers so that a
        due job starts at once."""
        outcome = await self.client.schedule(
            job, params, run_in=run_in, run_at=run_at, priority=priority, unique_key=unique_key
        )
        if self._workers is not None:
            self._workers.wake()
        return outcome

    async def run_until_idle(self, timeout: DurationLike = "1h") -> None:  # noqa: ASYNC109
        """Let the workers run until no job is due and none is running.

        "Due" means claimable now by these workers (``next_run_at`` reached, lock free or
        expired, not terminal); a job scheduled later, a retry waiting for its backoff, and the
        next run of a recurrent job are not due: move time with :meth:`advance`. Raises
        ``TimeoutError`` naming what is still due or running after ``timeout`` (of the event
        loop's time: virtual under a mock clock).
        """
        await self.start_workers()
        workers = self.workers
        seconds = parse_duration(timeout, field="timeout").total_seconds()
        deadline = anyio.current_time() + seconds
        while True:
            due = self._due()
            running = workers.claims_succeeded - self._finished_executions
            if not due and running <= 0:
                return
            if due:
                if not workers.running:
                    raise WorkersStateError(
                        f"the workers are stopped; {len(due)} job(s) due: {_describe(due)}"
                    )
                workers.wake()
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise TimeoutError(
                    f"not idle after {timeout}: {running} execution(s) running, "
                    f"{len(due)} job(s) due: {_describe(due)}"
                )
            await self._finished.wait(self._next_wait(remaining))

    async def advance(self, duration: DurationLike) -> None:
        """Let ``duration`` pass (virtual time under a mock clock) with the workers running.

        The workers are woken whenever a job falls due. Work that falls due exactly at the end
        may still be in progress when this returns: follow with :meth:`run_until_idle`.
        """
        seconds = parse_duration(duration, field="duration").total_seconds()
        await self.start_workers()
        end = anyio.current_time() + seconds
        while True:
            if self._due():
                self.workers.wake()
            remaining = end - anyio.current_time()
            if remaining <= 0:
                return
            await self._finished.wait(self._next_wait(remaining))

    def _runnable_names(self) -> frozenset[str]:
        return frozenset(
            d.name
            for d in self.jobs
            if not (isinstance(d, EventJobDefinition) and d.max_parallel_executions_per_server == 0)
        )

    def _due(self) -> list[JobRecord]:
        runnable = self._runnable_names()
        now = self.clock.now()
        return [r for r in self.store.sync.find_jobs() if r.is_eligible(runnable, now)]

    def _next_wait(self, remaining: float) -> float:
        """How long to wait before looking again: until the next moment a record of these
        workers may fall due (its ``next_run_at`` or lock expiry), a fallback period, or the
        end. Executions that finish cut the wait short."""
        runnable = self._runnable_names()
        now = self.clock.now()
        soonest: datetime | None = None
        for record in self.store.sync.find_jobs():
            if record.job_name not in runnable or _is_terminal(record):
                continue
            for moment in (record.next_run_at, record.locked_until):
                if moment is not None and moment > now and (soonest is None or moment < soonest):
                    soonest = moment
        wait = min(remaining, _RECHECK_SECONDS)
        if soonest is not None:
            # A little more than exact, against float rounding of the loop clock; stored times
            # are truncated to the millisecond, so this never shifts the next run of a job.
            wait = min(wait, (soonest - now).total_seconds() + _WAKE_MARGIN_SECONDS)
        return wait

    # -- reading ---------------------------------------------------------------------------------

    def scheduled(self, job: JobDefinition | str | None = None) -> list[JobRecord]:
        """The records still to run (pending, running, waiting for a retry, and the records of
        recurrent jobs), of one job or all, in claim order. Terminal records (an event job that
        reached its attempt limit) are left out: see ``harness.store.sync.find_jobs()``."""
        name = _name(job) if job is not None else None
        return [
            record
            for record in self.store.sync.find_jobs(job_name=name)
            if not _is_terminal(record)
        ]

    def history(self, job: JobDefinition | str) -> list[HistoryRecord]:
        """Every finished execution of ``job``, oldest first."""
        rows = self.store.sync.get_executions(_name(job), limit=_HISTORY_LIMIT)
        return sorted(rows, key=lambda row: (row.started_at, row.ended_at))

    # -- assertions ------------------------------------------------------------------------------

    def assert_scheduled(
        self,
        job: JobDefinition | str,
        params: object = _ANY_PARAMS,
        *,
        count: int | None = None,
    ) -> list[JobRecord]:
        """Assert that ``job`` has records still to run: ``count`` of them exactly, or at least
        one; only those with ``params`` when given (compared as stored, so a params model
        instance and the equivalent dict match). Returns the matching records."""
        name = _name(job)
        records = self.scheduled(name)
        matching = records
        if params is not _ANY_PARAMS:
            expected = self._stored_params(job, params)
            matching = [record for record in records if record.params == expected]
        if (count is None and matching) or (count is not None and len(matching) == count):
            return matching
        wanted = "at least one" if count is None else str(count)
        where = "" if params is _ANY_PARAMS else f" with params {params!r}"
        raise AssertionError(
            f"expected {wanted} scheduled {name!r} job(s){where}, found {len(matching)}; "
            f"scheduled {name!r} records: {_describe(records)}"
        )

    def assert_ran(
        self,
        job: JobDefinition | str,
        *,
        times: int | None = None,
        status: HistoryStatus | str | None = None,
    ) -> list[HistoryRecord]:
        """Assert that ``job`` finished ``times`` executions (at least one when ``None``), of
        ``status`` (``"success"``, ``"error"``, ``"stale"``) when given, else of any status.
        Returns the matching history rows, oldest first."""
        name = _name(job)
        rows = self.history(name)
        wanted_status = None if status is None else HistoryStatus(status)
        matching = [row for row in rows if wanted_status is None or row.status is wanted_status]
        if (times is None and matching) or (times is not None and len(matching) == times):
            return matching
        wanted = "at least one" if times is None else str(times)
        kind = "" if wanted_status is None else f" {wanted_status.value}"
        seen = ", ".join(f"{row.status.value} (try {row.tries})" for row in rows) or "none"
        raise AssertionError(
            f"expected {wanted}{kind} execution(s) of {name!r}, found {len(matching)}; "
            f"its executions: {seen}"
        )

    def _stored_params(self, job: JobDefinition | str, params: object) -> object:
        definition = self.jobs.get(job) if isinstance(job, str) else job
        if isinstance(definition, EventJobDefinition):
            return validate_params(definition, params)
        return params


class HarnessFactory:
    """Builds :class:`JobsHarness` instances sharing one store and one clock (the
    ``dogs_harness_factory`` fixture): each is one worker instance on the same "database"."""

    def __init__(self, *, start: datetime = DEFAULT_START) -> None:
        self.clock = LoopClock(start)
        self.store = InMemoryJobStore(clock=self.clock)

    def __call__(self, jobs: Jobs | Iterable[JobDefinition], **options: Any) -> JobsHarness:
        """``JobsHarness(jobs, store=<shared>, clock=<shared>, **options)``."""
        return JobsHarness(jobs, store=self.store, clock=self.clock, **options)


def _is_terminal(record: JobRecord) -> bool:
    return record.type is JobType.EVENT and record.status is JobStatus.MAX_TRIES_REACHED


def _sole_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _name(job: JobDefinition | str) -> str:
    return job if isinstance(job, str) else job.name


def _describe(records: list[JobRecord]) -> str:
    if not records:
        return "none"
    shown = [
        f"{r.job_name}(params={dict(r.params) if r.params is not None else None}, "
        f"next_run_at={r.next_run_at.isoformat()}, tries={r.tries or 0}"
        f"{', locked' if r.locked_until is not None else ''})"
        for r in records[:10]
    ]
    more = f" and {len(records) - 10} more" if len(records) > 10 else ""
    return ", ".join(shown) + more
