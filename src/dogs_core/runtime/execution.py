"""One execution of one claimed job: checks, the handler, the outcome write, stale handling.

The execution decides nothing itself: :mod:`dogs_core.domain.outcome` says which write follows
what happened, :class:`~dogs_core.runtime.fenced.FencedWriter` performs it, and the lock is kept
by a :class:`~dogs_core.runtime.lock.LockKeeper`. Every write is fenced by the claim's
``lock_id``; one that matches nothing means another execution owns the job now, and this one is
treated as stale. Whatever the handler or its callbacks do, the execution ends with the record
updated, deleted, or left to its lock's expiry.

An execution gets its collaborators as one :class:`ExecutionServices` value and reports to the
workers through its one ``report`` callback: :attr:`Milestone.FREED` (or ``FREED_STALE``) exactly
once when its slot is free, then :attr:`Milestone.ENDED` when its last task has ended.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import anyio

from dogs_core.domain.definitions import (
    Discard,
    JobDefinition,
    Retry,
    load_params,
    normalize_on_error_result,
)
from dogs_core.domain.events import ExecutionEnded, JobCancelled, JobStale, JobStarted, LockLost
from dogs_core.domain.history import history_record
from dogs_core.domain.outcome import Cancelled as CancelledRun
from dogs_core.domain.outcome import (
    Command,
    Defer,
    Delete,
    Failed,
    Happened,
    MarkTerminal,
    Release,
    Reschedule,
    Snoozed,
    Stale,
    Succeeded,
    decide,
    decide_before_run,
)
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobType
from dogs_core.domain.renewal import StaleReason
from dogs_core.errors import ExecutionCancelledError, TransientStoreError
from dogs_core.runtime.context import JobContext, reset_current, set_current
from dogs_core.runtime.deferrals import tell_deferred
from dogs_core.runtime.fenced import FencedWriter
from dogs_core.runtime.gates import FleetGate, gate_for
from dogs_core.runtime.invocation import (
    HandlerResult,
    Interrupted,
    Raised,
    Returned,
    SnoozeRequested,
    Suspended,
    UserCalls,
    finish_suspended,
    first_step,
    handler_call,
    invoke_handler,
    on_error_arguments,
)
from dogs_core.runtime.job_events import ended_event, job_extra, reporting_renewals
from dogs_core.runtime.lock import LockKeeper, RenewWrite
from dogs_core.runtime.outage import log_gave_up
from dogs_core.runtime.recording import (
    reached_max_tries,
    run_on_stale,
    stopped_by_operator,
    submit_history,
)
from dogs_core.runtime.services import ExecutionServices, Milestone
from dogs_core.runtime.takeover import take_over

__all__ = ["Execution"]

logger = logging.getLogger("dogs.execution")

_SHUTDOWN_RELEASE_TIMEOUT = 30.0


class Execution:
    """The lifecycle of one claimed job."""

    def __init__(
        self,
        services: ExecutionServices,
        job: ClaimedJob,
        definition: JobDefinition,
        *,
        lock_from: float | None = None,
    ) -> None:
        self.services = services
        self.job = job
        self.definition = definition
        self.context = JobContext(self)
        self.cancel_requested = False
        self._writer = FencedWriter(job, services.store, services.completions)
        self._stale = False
        self._finished = False
        self._freed = False
        self._row_written = False  # this execution's history row was submitted
        self._completing = False  # its completion is with the batch writer (see _complete_soon)
        self._handler_scope: anyio.CancelScope | None = None
        self._calls = UserCalls(services.thread_limiter, job.job_name)
        self._keeper: LockKeeper | None = None  # started before the handler, or lazily
        self._keeper_args: tuple[timedelta, RenewWrite | None] = (timedelta(0), None)
        self._stepwise = False  # the handler runs stepwise: see _invoke
        self._in_first_step = False
        self._gate: FleetGate | None = None
        self._open_tasks = 1  # run() itself, plus what _spawn started and has not ended
        self.began = 0.0  # loop time the workers started it (set by them)
        self.ran_for: float | None = None  # seconds from then to the handler's end
        self._started_at: datetime | None = None
        self._t0: float | None = None  # loop time the handler started (event durations)
        # Loop time at which the stored lockedUntil was computed (the claim request, then the
        # lock-time write): the watchdog counts the lock from there, so store latency eats into
        # the lock instead of letting the execution outlive it.
        self._lock_from = anyio.current_time() if lock_from is None else lock_from

    @property
    def stale(self) -> bool:
        return self._stale

    # -- controls used by the context and the workers -------------------------------------------

    async def extend_lock(self, seconds: float) -> bool:
        keeper = self._keeper
        if keeper is None and self._in_first_step:
            keeper = self._start_keeper()
        if keeper is None:
            logger.warning("extend_lock_time called while the handler is not running; ignored")
            return False
        return await keeper.extend(seconds)

    def clear_watchdog(self) -> None:
        if self._keeper is None and self._in_first_step:
            self._start_keeper()
        if self._keeper is not None:
            self._keeper.clear()

    def cancel_for_shutdown(self) -> None:
        """Stop was requested and the grace period is over: cancel the handler and any user
        callback in progress; a cancelled handler's lock is then released."""
        self.cancel_requested = True
        if self._handler_scope is not None:
            self._handler_scope.cancel()
        self._calls.cancel_all()

    # -- the lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        token = set_current(self.context)
        try:
            await self._lifecycle()
        except Exception as error:
            what = f"{self.job.job_name} ({self.job.job_id})"
            log_gave_up(
                logger, f"error running {what}; its lock will expire and it will rerun", error
            )
        finally:
            reset_current(token)
            # A stale execution's slot is freed after its demotion, a completing one's by
            # _complete_soon or its callback; every other path that did not free it, here.
            if not self._stale and not self._completing:
                self._free(stale=False)
            self._task_ended()

    async def _lifecycle(self) -> None:
        services, job, definition = self.services, self.job, self.definition
        takeover = await take_over(services, job, definition, self._writer)
        if takeover.completed:
            return  # the attempt it took over had succeeded: completed, not run again
        now = services.clock.now()
        instead = decide_before_run(definition, job, services.policy, now)
        if instead is not None:
            await self._instead_of_running(instead)
            return
        if takeover.killed_row is not None:
            self._spawn(submit_history, services, takeover.killed_row)
        lock_time = definition.effective_lock_time(services.settings.default_lock_time)
        gate = self._gate = gate_for(services, job, definition)
        write = None if gate is None else gate.lock_write()
        if services.telemetry.active:
            write = reporting_renewals(services, job, write)
        if gate is not None and not await gate.enter(self._writer, lock_time):
            return  # refused by a fleet limit: given back, its try not counted
        if lock_time != services.settings.default_lock_time:
            if not await self._apply_lock_time(lock_time):
                return
            now = services.clock.now()  # after the write
        elif gate is not None:
            now = services.clock.now()
        self._keeper_args = (lock_time, write)
        # An async handler without timeout or heartbeat gets its lock keeper only if it
        # suspends (see _invoke); the lock must still hold when it starts.
        self._stepwise = (
            definition.is_async
            and definition.timeout is None
            and definition.heartbeat_fraction is None
        )
        expired = services.loop_time() >= self._lock_from + lock_time.total_seconds()
        if expired or not self._stepwise:
            keeper = self._start_keeper()
            if not keeper.check_deadline():
                # The lock ran out before the handler could start; the stale handling runs.
                keeper.finish()
                return
        self._started_at = started_at = now
        if services.telemetry.active:
            self._t0 = anyio.current_time()
            services.telemetry.emit(JobStarted(job))
        result = await self._invoke(lock_time)
        self.ran_for = services.loop_time() - self.began
        if self._keeper is not None:
            self._keeper.finish()
        self._finished = True
        # A handler that never suspended took no time that a caller could see.
        ended_at = started_at if self._keeper is None else services.clock.now()
        if self._stale:
            late = "success" if isinstance(result, Returned) else "result"
            what = (late, job.execution_id, job.job_name)
            logger.info("ignoring the late %s of stale execution %s of %s", *what)
            return
        happened = await self._what_happened(result)
        decided_at = ended_at if isinstance(result, Returned) else services.clock.now()
        command = decide(
            definition, job, happened, services.policy, decided_at, services.rng.random()
        )
        await self._conclude(command, result, ended_at)

    async def _apply_lock_time(self, lock_time: timedelta) -> bool:
        """A job with its own lock time holds the claim's default one until this write."""
        services, job = self.services, self.job
        if lock_time == services.settings.default_lock_time:
            return True
        requested_at = anyio.current_time()
        if not await self._writer.extend_lock(services.clock.now() + lock_time):
            what = (job.job_name, job.job_id)
            logger.warning("lost the lock of %s (%s) before it started; not running it", *what)
            return False
        self._lock_from = requested_at
        return True

    def _start_keeper(self) -> LockKeeper:
        """The lock's keeper, started: its watchdog counts from the claim (``_lock_from``)."""
        if self._keeper is not None:
            return self._keeper
        services, (lock_time, write) = self.services, self._keeper_args
        keeper = self._keeper = LockKeeper(
            job=self.job,
            store=services.store,
            clock=services.clock,
            lock_time=lock_time,
            locked_at=self._lock_from,
            deadlines=services.deadlines,
            spawn=self._spawn,
            on_stale=self._on_stale,
            write=write,
        )
        keeper.start()
        return keeper

    async def _invoke(self, lock_time: timedelta) -> HandlerResult:
        if self.cancel_requested:
            return Interrupted()
        definition, job, context = self.definition, self.job, self.context

        def call() -> Any:
            # Params that no longer fit the job's model fail this attempt like the handler would.
            return handler_call(definition, load_params(definition, job.params), context)()

        scope = self.services.cancel_scope()
        self._handler_scope = scope
        if self._stepwise:
            # The scope is entered before the first step: a handler's own scopes nest in it.
            with scope:
                self._in_first_step = True
                try:
                    first = first_step(call)
                finally:
                    self._in_first_step = False
                if not isinstance(first, Suspended):
                    return first
                self._start_keeper()
                return await finish_suspended(first)
            return Interrupted()

        interval = definition.heartbeat_interval(lock_time)
        return await invoke_handler(
            definition,
            call,
            run_sync=self._calls.in_thread,
            scope=scope,
            heartbeat=None
            if interval is None
            else functools.partial(self.extend_lock, lock_time.total_seconds()),
            heartbeat_interval=None if interval is None else interval.total_seconds(),
        )

    async def _what_happened(self, result: HandlerResult) -> Happened:
        if isinstance(result, Returned):
            return Succeeded()
        if isinstance(result, Interrupted):
            return CancelledRun()  # for shutdown (a handler that finished anyway keeps it)
        if isinstance(result, SnoozeRequested):
            return Snoozed(result.snooze.run_after(self.services.clock.now()))
        job, error = self.job, result.error
        what = (job.job_name, job.job_id, job.tries, error)
        logger.error(
            "job %s (%s) failed on try %d: %r", *what, exc_info=error, extra=job_extra(job)
        )
        return Failed(await self._ask_on_error(result.error))

    async def _ask_on_error(self, error: BaseException) -> Retry | Discard:
        """What ``on_error`` says; a callback that raises or returns junk means "retry"."""
        on_error = self.definition.on_error
        if on_error is None:
            return Retry()
        try:
            params = load_params(self.definition, self.job.params)
            args = on_error_arguments(self.definition, error, params, self.context)
            returned = await self._calls.call(on_error, *args)
            return normalize_on_error_result(returned, job_name=self.job.job_name)
        except Exception:
            logger.exception(
                "on_error of %s raised or returned an invalid value; counting a failed attempt",
                self.job.job_name,
            )
            return Retry()

    async def _conclude(self, command: Command, result: HandlerResult, ended_at: datetime) -> None:
        if isinstance(command, Release):
            await self._release_for_shutdown(command)
            return
        what = None
        if isinstance(command, Reschedule):
            recurrent = self.job.type is JobType.RECURRENT
            if isinstance(result, Raised):
                what = "reschedule after failure" if recurrent else "schedule retry"
        if command.history is not None:
            # The row first: a worker killed after the completion must have left it (a kill
            # between the two is settled by the next claimer, see runtime/takeover.py). A
            # completion's batch writer flushes the rows queued before it, so it need not wait.
            value = result.value if isinstance(result, Returned) else None
            error = result.error if isinstance(result, Raised) else None
            wait = not isinstance(command, Delete)
            await self._write_history(
                command.history, ended_at, result=value, error=error, wait=wait
            )
        if isinstance(command, Delete):
            self._complete_soon(command, result)
            return
        owned = await self._writer.perform(command, what=what)
        self._written(command, result, owned)
        if owned and isinstance(command, MarkTerminal):
            await self._reached_max_tries()
        if owned:
            self._free(stale=False)

    def _written(self, command: Command, result: HandlerResult, owned: bool) -> None:
        """Tell how the outcome write went: the ending event, or the lost lock."""
        if owned or self._row_written:  # a lost write's row still tells how the handler ended
            self._tell(ended_event, command, result)
        if not owned:
            self._lost_after_run()

    # -- the completion, with the batch writer ------------------------------------------------

    def _complete_soon(self, command: Delete, result: HandlerResult) -> None:
        """Hand the completion to its batch writer and let the lifecycle end: no task waits
        for it. The slot is free now if the workers allow (they bound the completions in
        flight), else once the completion is written."""
        self._completing = True
        self._open_tasks += 1  # the completion, until its callback has run
        self._writer.complete_soon(functools.partial(self._completed, command, result))
        if self.services.may_free_early():
            self._free(stale=False)

    def _completed(
        self, command: Delete, result: HandlerResult, verdict: bool | BaseException
    ) -> None:
        try:
            if isinstance(verdict, BaseException):
                self._spawn(self._complete_again, command, result, verdict)
                return
            self._written(command, result, verdict)
            if verdict:
                self._free(stale=False)
        finally:
            self._task_ended()

    async def _complete_again(
        self, command: Delete, result: HandlerResult, error: BaseException
    ) -> None:
        job = self.job
        gave_up = (
            f"error running {job.job_name} ({job.job_id}); its lock will expire and it will rerun"
        )
        try:
            if not isinstance(error, TransientStoreError):
                raise error
            what = (job.job_name, job.job_id, error)
            logger.warning("completing %s (%s) hit a transient store error, retrying: %s", *what)
            owned = await self._writer.complete_again(error)
        except Exception as raised:
            log_gave_up(logger, gave_up, raised)
            self._free(stale=False)
            return
        self._written(command, result, owned)
        if owned:
            self._free(stale=False)

    async def _instead_of_running(self, command: Defer | MarkTerminal) -> None:
        if isinstance(command, Defer):
            # Another deployment owns the name (Dogs leaves such a record locked until its lock
            # expires, again and again; we push it back by one lock time so it does not spin),
            # or the misfire policy skips missed slots (runtime/deferrals.py tells which).
            tell_deferred(self.services, self.job, self.definition, command)
            await self._writer.perform(command)
        elif await self._writer.perform(command):
            await self._reached_max_tries()

    async def _reached_max_tries(self) -> None:
        await reached_max_tries(self.services, self._calls, self.job)

    async def _release_for_shutdown(self, command: Release) -> None:
        job = self.job
        with anyio.CancelScope(shield=True), anyio.move_on_after(_SHUTDOWN_RELEASE_TIMEOUT):
            released = await self._writer.perform(command)
            what = (job.job_name, job.job_id, "released" if released else "already lost")
            logger.warning("cancelled %s (%s) at shutdown; lock %s", *what, extra=job_extra(job))
            if released:
                self._tell(JobCancelled, "shutdown")
                self._free(stale=False)
                stopped = ExecutionCancelledError("cancelled at shutdown")
                await self._write_history(command.history, self.services.clock.now(), error=stopped)

    # -- stale ------------------------------------------------------------------------------------

    def _on_stale(self, reason: StaleReason) -> None:
        """Called once by the renewal machine (watchdog, lost lock, failed write, or us)."""
        if self._stale:
            return
        self._stale = True
        if self.services.telemetry.active:
            self.services.telemetry.emit(LockLost(self.job, reason.value))
        if self.definition.cancel_on_stale:
            self.cancel_requested = True
            if self._handler_scope is not None and not self._finished:
                self._handler_scope.cancel()
        self._spawn(self._handle_stale, reason)

    def _lost_after_run(self) -> None:
        """A post-run fenced write matched nothing: someone else owns the job now."""
        if self._keeper is not None:
            self._keeper.mark_stale()
        else:
            self._on_stale(StaleReason.EXTERNAL)

    async def _handle_stale(self, reason: StaleReason) -> None:
        try:
            await self._stale_writes(reason)
        finally:
            self._free(stale=True)

    async def _stale_writes(self, reason: StaleReason) -> None:
        services, job, definition = self.services, self.job, self.definition
        ended_at = services.clock.now()
        what = (job.execution_id, job.job_name, job.job_id, reason)
        logger.warning("execution %s of %s (%s) went stale (%s)", *what, extra=job_extra(job))
        if definition.on_stale is not None:
            services.spawn_background(
                functools.partial(run_on_stale, definition, job, self._calls, self.context)
            )
        if await stopped_by_operator(services, job):
            # Cancelled by an operator, who wrote this execution's history row: stop the
            # handler even with cancel_on_stale=False, and write nothing more.
            logger.warning("%s (%s) was cancelled by an operator", job.job_name, job.job_id)
            self._tell(JobCancelled, "operator")
            self.cancel_requested = True
            if self._handler_scope is not None and not self._finished:
                self._handler_scope.cancel()
            return
        self._tell(JobStale, reason.value)
        command = decide(definition, job, Stale(), services.policy, ended_at, services.rng.random())
        try:
            await self._writer.perform(command)
        except Exception as error:
            log_gave_up(logger, f"could not demote stale job {job.job_id}", error)
        finally:
            # Free the slot only after the demotion, so the retry queues behind other work.
            self._free(stale=True)
        if not self._row_written:  # a row written before a lost completion stays its row
            with anyio.CancelScope(shield=True):  # a stale execution's tasks are cancelled
                await self._write_history(HistoryStatus.STALE, ended_at)  # at the stop

    # -- helpers ----------------------------------------------------------------------------------

    def _tell(self, event: Callable[..., ExecutionEnded | None], *args: Any) -> None:
        """Emit the event that ends this started execution, built only when someone listens."""
        telemetry = self.services.telemetry
        if telemetry.active and self._t0 is not None:
            ended = event(self.job, anyio.current_time() - self._t0, *args)
            self._t0 = None  # one ending event per started execution
            if ended is not None:
                telemetry.emit(ended)

    def _free(self, *, stale: bool) -> None:
        """Give the slot back, once: after the outcome write, after a stale demotion, or when
        the lifecycle ends without either."""
        if not self._freed:
            self._freed = True
            if self._gate is not None:
                self._spawn(self._gate.leave)
            self.services.report(self.job, Milestone.FREED_STALE if stale else Milestone.FREED)

    def _spawn(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a task that belongs to this execution (a renewal write, the stale handling);
        the execution has ended only once all of them have."""
        self._open_tasks += 1

        async def task() -> None:
            try:
                await func(*args)
            except Exception:
                logger.exception(
                    "unexpected error in a task of %s (%s)", self.job.job_name, self.job.job_id
                )
            finally:
                self._task_ended()

        self.services.spawn(task)

    def _task_ended(self) -> None:
        self._open_tasks -= 1
        if self._open_tasks == 0:
            # Break the cycles (context, lock keeper) so the execution is freed by reference
            # counting now, not by the garbage collector later.
            self.context._detach()
            self._keeper = None
            self.services.report(self.job, Milestone.ENDED)

    async def _write_history(
        self,
        status: HistoryStatus,
        ended_at: datetime,
        *,
        result: Any = None,
        error: Any = None,
        wait: bool = True,
    ) -> None:
        job, started, definition = self.job, self._started_at, self.definition
        outcome = {"result": result, "error": error}
        row = history_record(
            job, definition, status, started_at=started, ended_at=ended_at, **outcome
        )
        if row is not None:
            self._row_written = True
            if wait:
                await submit_history(self.services, row)
            else:
                self.services.history.submit_nowait(row)
