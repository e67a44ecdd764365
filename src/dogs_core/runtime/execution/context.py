"""What a job handler receives besides its params."""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, MutableMapping
from contextvars import ContextVar, Token
from datetime import datetime, timedelta
from typing import Any, Final, Literal, ParamSpec, Protocol, TypeVar, overload

import anyio.from_thread

from dogs_core.domain.definitions import JobDefinition, Snooze
from dogs_core.domain.events import Event, StepEnded, StepReplayed, StepStarted
from dogs_core.domain.history import workflow_id_of
from dogs_core.domain.records import ClaimedJob, JobType
from dogs_core.domain.schedules import ensure_utc, parse_duration
from dogs_core.domain.steps import RecordedStep, StepBook
from dogs_core.domain.workflow_marker import BatchSummary, Upstream, read_batch, read_upstream
from dogs_core.errors import (
    ExecutionCancelledError,
    LockLostError,
    StepError,
    WorkflowUpstreamError,
)
from dogs_core.runtime.execution.log_capture import LogCapture
from dogs_core.runtime.plumbing.settings import DurationLike
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["ExecutionControls", "JobContext", "Reported", "current_job"]

logger = logging.getLogger("dogs.execution")

P = ParamSpec("P")
T = TypeVar("T")


class LockControls(Protocol):
    """What a context asks of its execution while it runs."""

    @property
    def cancel_requested(self) -> bool: ...

    async def renew_lock(self, seconds: float) -> bool: ...

    def clear_watchdog(self) -> None: ...

    def report_progress(self, fraction: object, message: object, data: object) -> None: ...

    def log_capture(self) -> LogCapture | None: ...

    def check_steps(self) -> None: ...

    async def record_step(
        self, index: int, name: str, result: Any, duration_ms: int
    ) -> RecordedStep: ...

    async def record_step_in_transaction(
        self, index: int, name: str, call: Callable[[Any], Any], stored: Callable[[object], Any]
    ) -> RecordedStep: ...

    async def record_sleep(
        self, index: int, name: str, wake: timedelta | datetime
    ) -> tuple[RecordedStep, datetime | None]: ...


class ExecutionControls(LockControls, Protocol):
    """What a context needs of the execution it belongs to (the runtime's ``Execution``)."""

    @property
    def job(self) -> ClaimedJob: ...

    @property
    def definition(self) -> JobDefinition: ...

    @property
    def telemetry(self) -> Telemetry: ...


_current: ContextVar[JobContext | None] = ContextVar("dogs_current_job", default=None)


def current_job() -> JobContext | None:
    """The context of the job running in this task or thread, if any.

    Lets code deep in a call stack (a repository, a log filter) know which job it serves,
    like Dogs' async-local context. Copied into worker threads that run sync handlers.
    """
    return _current.get()


class _JobLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds ``job_name``, ``job_id`` and ``execution_id`` to every record's ``extra``."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = dict(self.extra or {})
        extra.update(kwargs.get("extra") or {})
        kwargs["extra"] = extra
        return f"[{extra['job_name']} {extra['job_id']}] {msg}", kwargs


class _StoringJobLogger(_JobLogger):
    """The job logger of a job with ``store_logs``: each record also goes to the execution's
    capture (whatever the logging configuration), then to ``logging`` as usual."""

    def __init__(
        self, logger: logging.Logger, extra: Mapping[str, object], capture: LogCapture
    ) -> None:
        super().__init__(logger, extra)
        self.capture = capture

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self.capture.keep(level, msg, args, kwargs.get("exc_info"))
        super().log(level, msg, *args, **kwargs)


class JobContext:
    """The execution context: the claimed record, the attempt number, a bound logger, and
    the lock controls.

    Async handlers ``await ctx.extend_lock_time(...)``; sync handlers, which run in a worker
    thread, call :meth:`extend_lock_time_blocking`. :attr:`cancelled` lets a sync handler stop
    cooperatively when the execution went stale or the workers are shutting down (async
    handlers are simply cancelled).
    """

    _capture: LogCapture | None = None  # the execution's kept lines, once the logger is made
    _lost = False  # the execution went stale: set once by it (progress reports are refused)
    _telemetry: Telemetry | None = None  # where step events go (none for a fake context)

    def __init__(self, execution: ExecutionControls) -> None:
        self._execution: LockControls = execution
        self._job = execution.job
        self._definition = execution.definition
        self._telemetry = execution.telemetry

    @functools.cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger named ``dogs.job.<name>`` whose records carry the job's name and ids (made
        on first use: most handlers never log). With the job's ``store_logs``, its records at
        that level are also kept with the job (``client.get_logs``)."""
        job = self._job
        logger = logging.getLogger(f"dogs.job.{job.job_name}")
        extra = {"job_name": job.job_name, "job_id": job.job_id, "execution_id": job.execution_id}
        capture = self._capture = self._execution.log_capture()
        if capture is None:
            return _JobLogger(logger, extra)
        return _StoringJobLogger(logger, extra, capture)

    @property
    def record(self) -> ClaimedJob:
        """The claimed record: ids, name, type, params as stored, tries, priority..."""
        return self._job

    @property
    def definition(self) -> JobDefinition:
        return self._definition

    @property
    def job_id(self) -> str:
        return self._job.job_id

    @property
    def execution_id(self) -> str:
        return self._job.execution_id

    @property
    def job_name(self) -> str:
        return self._job.job_name

    @property
    def tries(self) -> int:
        """The attempt number, counting this one (1 on the first run)."""
        return self._job.tries

    @property
    def was_stale(self) -> bool:
        """Whether an earlier execution of this record lost its lock (crash or stale)."""
        return self._job.was_stale

    @property
    def params(self) -> Mapping[str, Any] | None:
        """The params as stored (the handler receives them loaded into its model, if any)."""
        return self._job.params

    # -- workflows (docs/workflows.md) ------------------------------------------------------

    @property
    def workflow_id(self) -> str | None:
        """The workflow this job is a step of (``None`` for a job scheduled on its own)."""
        return workflow_id_of(self._job)

    @property
    def step_name(self) -> str | None:
        """The name of the workflow step this job runs (``None`` outside a workflow)."""
        marker = self._job.workflow
        return None if not marker else str(marker.get("name"))

    @property
    def step_id(self) -> str | None:
        """The id of the workflow step this job runs (``None`` outside a workflow)."""
        marker = self._job.workflow
        return None if not marker else str(marker.get("step"))

    @functools.cached_property
    def upstreams(self) -> tuple[Upstream, ...]:
        """This step's dependencies, in the order of its ``after``: their names, states and
        results (empty outside a workflow, and for a step without dependencies)."""
        return read_upstream(self._job.workflow)

    def upstream(self, step: object) -> Upstream:
        """One dependency of this step, by name, step id or the handle ``wf.add`` returned:
        ``ctx.upstream("parse").result``. Raises
        :class:`~dogs_core.errors.WorkflowUpstreamError` when ``step`` is none of them."""
        wanted = getattr(step, "name", step)
        for upstream in self.upstreams:
            if wanted in (upstream.name, upstream.step_id):
                return upstream
        names = ", ".join(repr(upstream.name) for upstream in self.upstreams) or "none"
        raise WorkflowUpstreamError(
            f"step {self.step_name!r} has no dependency {wanted!r} (its dependencies: {names})"
        )

    @functools.cached_property
    def batch(self) -> BatchSummary | None:
        """In a batch's callback, its items' outcomes: counts and the failed steps' ids
        (``None`` in any other job)."""
        return read_batch(self._job.workflow)

    @property
    def cancelled(self) -> bool:
        """True once the execution went stale or is being cancelled at shutdown."""
        return self._execution.cancel_requested

    async def extend_lock_time(self, duration: DurationLike) -> bool:
        """Keep the lock for ``duration`` from now (fenced). Returns ``False`` when the request
        was refused (the lock was lost, the execution is stale or finished, or the watchdog was
        cleared); raises the store's error when the write failed (the execution is then stale).
        Concurrent calls share one write: the longest duration asked for wins.
        """
        seconds = parse_duration(duration, field="duration").total_seconds()
        return await self._execution.renew_lock(seconds)

    def extend_lock_time_blocking(self, duration: DurationLike) -> bool:
        """:meth:`extend_lock_time` for sync handlers running in a worker thread."""
        seconds = parse_duration(duration, field="duration").total_seconds()
        return anyio.from_thread.run(self._execution.renew_lock, seconds)

    def progress(
        self,
        fraction: float | None = None,
        message: str | None = None,
        *,
        data: Mapping[str, Any] | None = None,
    ) -> Reported:
        """Report how far the job is: ``fraction`` from 0 to 1 (``None``: not known), a
        ``message`` (at most 1,000 characters) and ``data`` (a small BSON document, at most
        16 KiB). Cheap enough to call on every item: it returns at once, and only the latest
        report is written, with the lock's next renewal, at most once per ``progress_interval``
        (1 s by default; see docs/following.md). ``await ctx.progress(...)`` in an async handler,
        plain ``ctx.progress(...)`` in a sync one: both work in both.

        Raises :class:`~dogs_core.errors.InvalidProgressError` for a report it cannot keep
        (nothing is staged), :class:`~dogs_core.errors.LockLostError` once the execution has
        lost its lock (stop working: another execution may own the job), and
        :class:`~dogs_core.errors.MissingRoleError` when the store has no following role.
        """
        if self._lost:  # also once the execution has ended (a sync handler's thread goes on)
            job = self._job
            raise LockLostError(job.job_name, job.job_id, job.execution_id)
        self._execution.report_progress(fraction, message, data)
        return _REPORTED

    # -- durable steps (docs/durable-jobs.md) -------------------------------------------------

    @overload
    async def step(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]],
        /,
        *args: Any,
        transactional: Literal[True],
        **kwargs: Any,
    ) -> T: ...

    @overload
    async def step(
        self, name: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T: ...

    @overload
    async def step(
        self, name: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T: ...

    async def step(  # type: ignore[misc]  # P.kwargs of the plain forms could hold "transactional"
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` as the durable step ``name`` and return its result, as
        recorded: the first time, ``fn`` runs (awaited when it returns an awaitable) and its
        result is written on the job's record, fenced by this execution's lock; on any later run
        of the job (a retry, the takeover after a crash) the recorded result is returned and
        ``fn`` is not called. The result comes back as stored (BSON types: a tuple becomes a
        list), the same on every run.

        ``transactional=True`` calls ``fn(session, *args, **kwargs)`` with a database session
        of the store (MongoDB: a ``pymongo`` ``AsyncClientSession`` of the store's client, in a
        transaction): the writes ``fn`` makes through it and the recorded result commit together
        or not at all, so they happen exactly once. ``fn`` may run more than once when the
        transaction conflicts (each time rolled back), so it writes only through ``session``.

        Steps are matched by their order and name: a run that calls another step where one was
        recorded raises :class:`~dogs_core.errors.NondeterminismError`. Call them one at a time,
        each name once per run. Raises :class:`~dogs_core.errors.StepError` for a bad or reused
        name, a result that cannot be stored or is over the limits
        (:mod:`dogs_core.domain.steps`), or a step after the handler ended;
        :class:`~dogs_core.errors.LockLostError` when the execution lost its lock (stop: another
        execution owns the job); :class:`~dogs_core.errors.MissingRoleError` when the store has
        no steps role; :class:`~dogs_core.errors.TransactionsNotSupportedError` for a
        transactional step on a store (or a deployment) without transactions. An exception
        ``fn`` raises propagates (the step is not recorded, and the job is retried by its
        policy), with a note naming the step.
        """
        book = self._step_book()
        recorded = book.begin(name)
        if recorded is not None:
            self._emit_replayed(book, name)
            return recorded.result
        index, began = book.next_index, time.perf_counter()
        try:
            self._check_steps()
            self._emit(lambda: StepStarted(self._job, name, index, transactional))
            started = time.perf_counter()  # the recorded duration is the function's alone
            if transactional:
                stored = await self._transactional_step(book, name, fn, args, kwargs)
            else:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
                stored = await self._end_step(book, name, result, started)
        except BaseException as error:
            book.abandon()
            self._emit_ended(name, index, began, error)
            _note_step(error, name, self.job_name)
            raise
        self._emit_ended(name, index, began, None)
        return stored

    async def _transactional_step(
        self,
        book: StepBook,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        step = await self._record_step_in_transaction(
            book.next_index,
            name,
            lambda session: fn(session, *args, **kwargs),
            lambda result: book.check_result(name, result),
        )
        book.recorded(step)
        return step.result

    def step_blocking(
        self, name: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """:meth:`step` for sync handlers, which run in a worker thread: ``fn`` is called in this
        thread (it must not be a coroutine function) and the result recorded before it returns."""
        if inspect.iscoroutinefunction(fn):
            raise StepError(
                repr(self.job_name),
                name,
                "is a coroutine function: step_blocking takes a plain "
                "function; await ctx.step(...) in an async handler",
            )
        book = self._step_book()
        recorded = book.begin(name)
        if recorded is not None:
            self._emit_replayed(book, name)
            return recorded.result  # type: ignore[no-any-return]
        index, began = book.next_index, time.perf_counter()
        try:
            self._check_steps()
            self._emit(lambda: StepStarted(self._job, name, index))
            started = time.perf_counter()  # the recorded duration is the function's alone
            result = fn(*args, **kwargs)
            stored = anyio.from_thread.run(self._end_step, book, name, result, started)
        except BaseException as error:
            book.abandon()
            self._emit_ended(name, index, began, error)
            _note_step(error, name, self.job_name)
            raise
        self._emit_ended(name, index, began, None)
        return stored  # type: ignore[no-any-return]

    # -- durable sleeps (docs/durable-jobs.md) ------------------------------------------------

    async def sleep(self, duration: DurationLike, *, name: str | None = None) -> None:
        """End this run and resume the job ``duration`` from now (a ``timedelta``, seconds or
        ``"3d"``), past this call, with its recorded steps: no worker slot is held meanwhile.

        The sleep is a durable step (``name``, else ``"sleep:1"``, ``"sleep:2"``... in the order
        of the run's sleeps): the first run records its wake-up time and the record sleeps
        (state ``sleeping``) until then; the run that wakes replays it and goes on. The call
        does not return in the run that sleeps: it raises :class:`~dogs_core.Snooze`, which
        the worker settles (the try is given back, the history row says ``snoozed``); whatever
        the handler does with it, the run ends in that sleep. An operator's retry
        (``client.retry_now``, ``dogs jobs retry``) wakes it at once; a cancel removes it.
        Event jobs only (a recurrent job's next run is its schedule's); a zero duration records
        the step and returns."""
        wake = parse_duration(duration, field="duration")
        await self._sleep(name, wake)

    async def sleep_until(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep` until ``when`` (a timezone-aware datetime; one in the past records the
        step and returns)."""
        await self._sleep(name, ensure_utc(when, field="when"))

    def sleep_blocking(self, duration: DurationLike, *, name: str | None = None) -> None:
        """:meth:`sleep` for sync handlers (in their worker thread)."""
        wake = parse_duration(duration, field="duration")
        anyio.from_thread.run(functools.partial(self._sleep, name, wake))

    def sleep_until_blocking(self, when: datetime, *, name: str | None = None) -> None:
        """:meth:`sleep_until` for sync handlers (in their worker thread)."""
        wake = ensure_utc(when, field="when")
        anyio.from_thread.run(functools.partial(self._sleep, name, wake))

    @property
    def waking_at(self) -> datetime | None:
        """When this run's :meth:`sleep` wakes the job (``None``: it did not sleep)."""
        wake: datetime | None = self.__dict__.get("_waking_at")
        return wake

    async def _sleep(self, name: str | None, wake: timedelta | datetime) -> None:
        book = self._step_book()
        if self.record.type is not JobType.EVENT:
            raise StepError(
                repr(self.job_name),
                name,
                "is ctx.sleep in a recurrent job: its next run is its schedule's (sleep in an "
                "event job it schedules)",
            )
        sleeps = self.__dict__["_sleeps"] = self.__dict__.get("_sleeps", 0) + 1
        step_name = f"sleep:{sleeps}" if name is None else name
        if book.begin(step_name) is not None:
            self._emit_replayed(book, step_name)
            return  # slept already: this run resumes past it
        try:
            self._check_steps()
            step, until = await self._record_sleep(book.next_index, step_name, wake)
        except BaseException:
            book.abandon()
            raise
        book.recorded(step)
        if until is not None:
            self.__dict__["_waking_at"] = until
            raise Snooze(run_at=until)

    async def _record_sleep(
        self, index: int, name: str, wake: timedelta | datetime
    ) -> tuple[RecordedStep, datetime | None]:
        return await self._execution.record_sleep(index, name, wake)

    @property
    def steps(self) -> tuple[RecordedStep, ...]:
        """The steps recorded so far for this job: the earlier runs' and this run's."""
        return self._step_book().steps

    def _step_book(self) -> StepBook:
        book: StepBook | None = self.__dict__.get("_book")
        if book is None:
            book = self.__dict__["_book"] = StepBook(self.job_name, self.job_id, self.record.steps)
        self._check_open()
        return book

    def _check_open(self) -> None:
        """Refuse a step once the handler ended or the execution lost its lock."""
        if isinstance(self._execution, _Ended):
            raise StepError(repr(self.job_name), None, "was called after its handler ended")
        if self.waking_at is not None:
            raise StepError(repr(self.job_name), None, "was called after ctx.sleep ended this run")
        if self._lost:
            job = self._job
            raise LockLostError(job.job_name, job.job_id, job.execution_id)

    def _check_steps(self) -> None:
        self._execution.check_steps()

    def _emit(self, make: Callable[[], Event]) -> None:
        telemetry = self._telemetry
        if telemetry is not None and telemetry.active:
            telemetry.emit(make())

    def _emit_replayed(self, book: StepBook, name: str) -> None:
        index = book.next_index - 1  # begin() has moved past the replayed step
        self._emit(lambda: StepReplayed(self._job, name, index))

    def _emit_ended(
        self, name: str, index: int, started: float, error: BaseException | None
    ) -> None:
        self._emit(lambda: StepEnded(self._job, name, index, time.perf_counter() - started, error))

    async def _end_step(self, book: StepBook, name: str, result: object, started: float) -> Any:
        stored = book.check_result(name, result)
        elapsed = round((time.perf_counter() - started) * 1000)
        step = await self._record_step(book.next_index, name, stored, elapsed)
        book.recorded(step)
        return step.result

    async def _record_step(
        self, index: int, name: str, result: Any, duration_ms: int
    ) -> RecordedStep:
        return await self._execution.record_step(index, name, result, duration_ms)

    async def _record_step_in_transaction(
        self, index: int, name: str, call: Callable[[Any], Any], stored: Callable[[object], Any]
    ) -> RecordedStep:
        return await self._execution.record_step_in_transaction(index, name, call, stored)

    def clear_stale_timeout(self) -> None:
        """Disarm the stale watchdog for good: later lock extensions are refused.

        For a job that manages its own lifetime and must never be reported stale locally.
        """
        try:
            anyio.from_thread.run_sync(self._execution.clear_watchdog)
        except RuntimeError:
            # Not in a worker thread: we are on the event loop already.
            self._execution.clear_watchdog()

    def _detach(self) -> None:
        """The execution has ended: let it go (a context a handler kept still answers its
        questions; lock requests are refused). Breaks the execution-context cycle, so that an
        ended execution is freed at once instead of by the garbage collector."""
        self._execution = _Ended(self._execution.cancel_requested)
        if self._capture is not None:
            self._capture.end()

    def raise_if_cancelled(self) -> None:
        """For sync handlers: raise when the execution should stop (stale or shutdown)."""
        if self._execution.cancel_requested:
            raise ExecutionCancelledError(
                f"execution {self.execution_id} of {self.job_name} was cancelled"
            )


class _Ended:
    """What a context holds once its execution has ended."""

    __slots__ = ("cancel_requested",)

    def __init__(self, cancel_requested: bool) -> None:
        self.cancel_requested = cancel_requested

    async def renew_lock(self, seconds: float) -> bool:
        return False

    def clear_watchdog(self) -> None:
        return None

    def report_progress(self, fraction: object, message: object, data: object) -> None:
        logger.warning("ctx.progress called after the execution ended; ignored")

    def log_capture(self) -> LogCapture | None:
        return None

    def check_steps(self) -> None:
        raise StepError("of an ended execution", None, "was called after its handler ended")

    async def record_step(
        self, index: int, name: str, result: Any, duration_ms: int
    ) -> RecordedStep:
        raise StepError("of an ended execution", name, "was called after its handler ended")

    async def record_step_in_transaction(
        self, index: int, name: str, call: Callable[[Any], Any], stored: Callable[[object], Any]
    ) -> RecordedStep:
        raise StepError("of an ended execution", name, "was called after its handler ended")

    async def record_sleep(
        self, index: int, name: str, wake: timedelta | datetime
    ) -> tuple[RecordedStep, datetime | None]:
        raise StepError("of an ended execution", name, "was called after its handler ended")


def _note_step(error: BaseException, name: str, job_name: str) -> None:
    """Say in ``error``'s traceback which step raised it (once: a nested step adds its own)."""
    if isinstance(error, Exception) and not isinstance(error, StepError | LockLostError):
        error.add_note(f"(in step {name!r} of job {job_name!r})")


class Reported:
    """What ``ctx.progress(...)`` returns: already done, and awaitable (so that an async handler
    may ``await`` it and a sync one may not)."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield

    def __repr__(self) -> str:
        return "<progress reported>"


_REPORTED: Final = Reported()


def set_current(context: JobContext | None) -> Token[JobContext | None]:
    """Bind the current job context (the runtime calls it around an execution)."""
    return _current.set(context)


def reset_current(token: Token[JobContext | None]) -> None:
    """Undo :func:`set_current` (a runner task goes on to run other executions)."""
    _current.reset(token)
