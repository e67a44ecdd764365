"""One execution of one claimed job, from its claim to its history row and its settlement.

:meth:`Execution._life` reads top to bottom: the attempt the claim took over, the checks before a
run, the fleet gate, the job's own lock time, the handler, the outcome, and its history row then
its settlement. It decides nothing itself: :mod:`dogs_core.domain.outcome` says which command
follows what happened, the settler (:mod:`dogs_core.runtime.execution.settle`) performs it fenced
by the
claim's ``lock_id``, a :class:`~dogs_core.runtime.execution.holding.JobLock` holds the lock. A
write that
matches nothing means another execution owns the job now: this one went stale
(:meth:`Execution._on_stale`, which the lock's watchdog may also call at any time). Where it
stands is one :class:`Phase`; it reports to the workers through its host (the slot freed
exactly once, then its end: :mod:`dogs_core.runtime.execution.services`).
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import anyio

from dogs_core.domain.definitions import JobDefinition, load_params
from dogs_core.domain.events import ExecutionEnded, JobCancelled, JobStale, JobStarted, LockLost
from dogs_core.domain.history import history_record
from dogs_core.domain.outcome import (
    Command,
    MarkTerminal,
    Release,
    Reschedule,
    decide,
    decide_before_run,
)
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus, JobType
from dogs_core.domain.renewal import StaleReason
from dogs_core.domain.settle import Settlement
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import ExecutionCancelledError, TransientStoreError
from dogs_core.runtime.execution.arrival import settle_instead_of_running, take_over
from dogs_core.runtime.execution.context import JobContext, reset_current, set_current
from dogs_core.runtime.execution.ending import (
    ends_with_window,
    lock_loss,
    open_window,
    reached_max_tries,
    release_at_shutdown,
    run_on_stale,
    settle_stale,
    supersede,
    what_happened,
)
from dogs_core.runtime.execution.gates import FleetGate, gate_for
from dogs_core.runtime.execution.holding import JobLock
from dogs_core.runtime.execution.invocation import (
    HandlerResult,
    Interrupted,
    Raised,
    Returned,
    Suspended,
    UserCalls,
    finish_suspended,
    handler_call,
    invoke_handler,
)
from dogs_core.runtime.execution.log_capture import LogCapture, capture_for
from dogs_core.runtime.execution.progress import report_progress
from dogs_core.runtime.execution.services import (
    ExecutionServices,
    Milestones,
    ended_event,
    job_extra,
    reporting_renewals,
)
from dogs_core.runtime.execution.settle import Verdict, label_of
from dogs_core.runtime.execution.steps import (
    check_steps,
    record_sleep,
    record_step,
    record_step_in_transaction,
)
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["Execution", "Phase"]

logger = logging.getLogger("dogs.execution")


class Phase(enum.Enum):
    """Where an execution stands."""

    STARTING = "starting"
    """Claimed: the takeover, the checks, the fleet gate, the lock time."""
    RUNNING = "running"
    """Its handler runs."""
    DECIDING = "deciding"
    """Its handler ended: ``on_error``, the outcome."""
    SETTLING = "settling"
    """Its settlement is with the settler; the callback ends it."""
    STALE = "stale"
    """It lost its lock (watchdog, a lost write, an operator): demoted, or stopped."""


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
        self.phase = Phase.STARTING
        self.began = 0.0  # loop time the workers started it (set by them)
        self.ran_for: float | None = None  # seconds from then to the handler's end
        locked_at = services.host.loop_time() if lock_from is None else lock_from
        self._tasks = Milestones(services.host, job, on_end=self._ended)
        self._lock = JobLock(
            services, job, locked_at=locked_at, spawn=self._tasks.spawn, on_stale=self._on_stale
        )
        self._calls = UserCalls(services.thread_limiter, job.job_name)
        self._handler_scope: anyio.CancelScope | None = None  # while the handler may run
        self._gate: FleetGate | None = None
        self._settling: Command | None = None  # the command with the settler
        self._settling_row: HistoryRecord | None = None  # and the row it carries
        self._let_go: Callable[[], None] | None = None  # the settler's hold on the job
        self._started_at: datetime | None = None
        self._t0: float | None = None  # loop time the handler started (event durations)
        self._t1: float | None = None  # and ended: the row's two moments, so the log agrees

    @property
    def stale(self) -> bool:
        return self.phase is Phase.STALE

    # -- controls used by the context and the workers -------------------------------------------

    async def renew_lock(self, seconds: float) -> bool:
        return await self._lock.renew(seconds)

    def clear_watchdog(self) -> None:
        self._lock.clear()

    def report_progress(self, fraction: object, message: object, data: object) -> None:
        report, running = (fraction, message, data), self.phase is Phase.RUNNING
        report_progress(self.services, self.job, self._lock, report, running=running)

    def check_steps(self) -> None:
        check_steps(self.services)

    @property
    def telemetry(self) -> Telemetry:
        """The hub a durable step's events go to (``ctx.step`` emits them)."""
        return self.services.telemetry

    async def record_step(
        self, index: int, name: str, result: Any, duration_ms: int
    ) -> RecordedStep:
        return await record_step(
            self.services, self.job, self._lock, index, name, result, duration_ms
        )

    async def record_step_in_transaction(
        self, index: int, name: str, call: Callable[[Any], Any], stored: Callable[[object], Any]
    ) -> RecordedStep:
        return await record_step_in_transaction(
            self.services, self.job, self._lock, index, name, call, stored
        )

    async def record_sleep(
        self, index: int, name: str, wake: timedelta | datetime
    ) -> tuple[RecordedStep, datetime | None]:
        return await record_sleep(self.services, self.job, self._lock, index, name, wake)

    def log_capture(self) -> LogCapture | None:
        services = self.services
        return capture_for(
            services.logs, services.clock, services.telemetry, self.job, self.definition
        )

    def cancel_for_shutdown(self) -> None:
        """Stop was requested and the grace period is over: cancel the handler and any user
        callback in progress; a cancelled handler's lock is then released."""
        self.cancel_requested = True
        if self._handler_scope is not None:
            self._handler_scope.cancel()
        self._calls.cancel_all()

    # -- the life -------------------------------------------------------------------------------

    async def run(self) -> None:
        token = set_current(self.context)
        try:
            await self._life()
        except Exception as error:
            what = f"{self.job.job_name} ({self.job.job_id})"
            log_gave_up(
                logger, f"error running {what}; its lock will expire and it will rerun", error
            )
        finally:
            reset_current(token)
            # A settling execution's slot is freed by the settler's callback (or before it,
            # when the workers allow), a stale one's after its demotion; any other, here.
            if self.phase is not Phase.SETTLING and self.phase is not Phase.STALE:
                self._tasks.free(stale=False)
            self._tasks.task_ended()

    async def _life(self) -> None:
        services, job, definition = self.services, self.job, self.definition
        takeover = await take_over(services, job, definition)  # the attempt the claim took over
        if takeover.completed:
            return  # it had succeeded: completed there, not run again
        now = services.clock.now()
        instead = decide_before_run(definition, job, services.policy, now)
        if instead is not None:
            await settle_instead_of_running(services, self._calls, job, definition, instead)
            return
        lock_time = definition.effective_lock_time(services.settings.default_lock_time)
        if not await self._through_gate(lock_time):
            return  # refused by a fleet limit: given back, its try not counted
        if lock_time != services.settings.default_lock_time or self._gate is not None:
            if not await self._apply_lock_time(lock_time):
                return
            now = services.clock.now()  # after the writes
        ran = await self._run_handler(lock_time, now)
        if ran is None:
            return  # it went stale: the stale handling ends it
        result, ended_at = ran
        happened = await what_happened(
            result,
            definition=definition,
            job=job,
            context=self.context,
            calls=self._calls,
            clock=services.clock,
        )
        decided_at = ended_at if isinstance(result, Returned) else services.clock.now()
        command = decide(
            definition, job, happened, services.policy, decided_at, services.rng.random()
        )
        if isinstance(command, Release):
            stopped = ExecutionCancelledError("cancelled at shutdown")
            row = self._row(command.history, services.clock.now(), error=stopped)
            if await release_at_shutdown(services, job, command, row):
                self._tell(JobCancelled, "shutdown")
                self._tasks.free(stale=False)
            return
        row = None
        if command.history is not None:
            # Written before the settlement, in its call (a worker killed between the two is
            # settled by the next claimer, see runtime/execution/arrival.py).
            value = result.value if isinstance(result, Returned) else None
            error = result.error if isinstance(result, Raised) else None
            retried = isinstance(command, Reschedule) and job.type is JobType.EVENT
            row = self._row(command.history, ended_at, result=value, error=error, retried=retried)
        if ends_with_window(job, command):  # its key's window, before the record goes
            await open_window(services, job, decided_at)
        self._settle_soon(command, result, row)

    async def _through_gate(self, lock_time: timedelta) -> bool:
        """The job's fleet limits (none: through at once), and its renewal write."""
        services, job = self.services, self.job
        gate = self._gate = gate_for(services, job, self.definition)
        if gate is not None:
            self._tasks.on_free = functools.partial(self._tasks.spawn, gate.leave)
        write = None if gate is None else gate.lock_write(self._lock)
        if services.telemetry.active:
            write = reporting_renewals(services, job, write, self._lock)
        self._lock.lock_time, self._lock.write = lock_time, write
        return gate is None or await gate.enter(lock_time)

    async def _apply_lock_time(self, lock_time: timedelta) -> bool:
        """A job with its own lock time holds the claim's default one until this write."""
        services, job = self.services, self.job
        if lock_time == services.settings.default_lock_time:
            return True
        requested_at = anyio.current_time()
        locked_until = services.clock.now() + lock_time
        owned = await retry_transient(
            lambda: services.store.extend_lock(job.job_id, job.lock_id, locked_until),
            what=f"apply lock time {job.job_name}",
        )
        if not owned:
            what = (job.job_name, job.job_id)
            logger.warning("lost the lock of %s (%s) before it started; not running it", *what)
            return False
        self._lock.locked_at = requested_at
        return True

    async def _run_handler(
        self, lock_time: timedelta, now: datetime
    ) -> tuple[HandlerResult, datetime] | None:
        """The handler, with its lock kept; what it gave and when it ended, or ``None`` when
        the execution went stale before or while it ran."""
        services, job, definition = self.services, self.job, self.definition
        # An async handler without timeout or heartbeat gets its lock keeper only if it
        # suspends (see _invoke); the lock must still hold when it starts.
        stepwise = (
            definition.is_async
            and definition.timeout is None
            and definition.heartbeat_fraction is None
        )
        if (not stepwise or self._lock.expired(services.host.loop_time())) and (
            not self._lock.start()
        ):
            return None  # the lock ran out before the handler could start: stale
        self._started_at = now
        if services.telemetry.active:
            self._t0 = anyio.current_time()
            due = job.held_since or job.next_run_at
            lag = None if due is None else max((now - due).total_seconds(), 0.0)
            services.telemetry.emit(JobStarted(job, pickup_lag=lag))
        self.phase = Phase.RUNNING
        result = await self._invoke(lock_time, stepwise=stepwise)
        if self._t0 is not None:
            self._t1 = anyio.current_time()
        self.ran_for = services.host.loop_time() - self.began
        self._handler_scope = None
        kept = self._lock.finish()
        if self.phase is Phase.STALE:
            late = "success" if isinstance(result, Returned) else "result"
            what = (late, job.execution_id, job.job_name)
            logger.info("ignoring the late %s of execution %s of %s: it lost the job", *what)
            return None
        self.phase = Phase.DECIDING
        # A handler that never suspended took no time that a caller could see.
        return result, (services.clock.now() if kept else now)

    async def _invoke(self, lock_time: timedelta, *, stepwise: bool) -> HandlerResult:
        if self.cancel_requested:
            return Interrupted()
        definition, job, context = self.definition, self.job, self.context

        def call() -> Any:
            # Params that no longer fit the job's model fail this attempt like the handler would.
            return handler_call(definition, load_params(definition, job.params), context)()

        scope = self._handler_scope = self.services.host.cancel_scope()
        if stepwise:
            # The scope is entered before the first step: a handler's own scopes nest in it.
            with scope:
                first = self._lock.first_step(call)
                if not isinstance(first, Suspended):
                    return first
                self._lock.ensure_started()
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
            else functools.partial(self.renew_lock, lock_time.total_seconds()),
            heartbeat_interval=None if interval is None else interval.total_seconds(),
        )

    # -- the settlement -------------------------------------------------------------------------

    def _settle_soon(
        self, command: Command, result: HandlerResult, row: HistoryRecord | None
    ) -> None:
        """Hand the settlement to the settler and let the life end: no task waits for it. The
        slot is free now if the workers allow (they bound the settlements in flight), else
        once it is written."""
        self.phase = Phase.SETTLING
        self._settling, self._settling_row = command, row
        # Until this execution knows how its settlement went, a claim of the job by these
        # workers (the lock expired meanwhile: an outage) waits for it
        # (runtime/execution/arrival.py).
        self._let_go = self.services.settler.hold(self.job.job_id)
        self._tasks.open += 1  # the settlement, until its callback has run
        settlement = Settlement(self.job.job_id, self.job.lock_id, command, row)
        callback = functools.partial(self._settled, settlement, result)
        self.services.settler.settle_soon(settlement, callback)
        # A terminal mark keeps its slot until on_max_tries_reached has run: a hook that hangs
        # is cut short by a stop like the handler (the slot is what a stop drains).
        if not isinstance(command, MarkTerminal) and self.services.host.may_free_early():
            self._tasks.free(stale=False)

    def _settled(self, settlement: Settlement, result: HandlerResult, verdict: Verdict) -> None:
        try:
            if isinstance(verdict, BaseException):
                self._tasks.spawn(self._settle_again, settlement, result, verdict)
            else:
                self._written(settlement.command, result, verdict)
        finally:
            self._tasks.task_ended()

    async def _settle_again(
        self, settlement: Settlement, result: HandlerResult, error: BaseException
    ) -> None:
        job, command = self.job, settlement.command
        try:
            if not isinstance(error, TransientStoreError):
                raise error
            what = (job.job_name, job.job_id, error)
            logger.warning("settling %s (%s) hit a transient store error, retrying: %s", *what)
            label = label_of(command, job.job_name)
            owned = await self.services.settler.settle(settlement, what=label, after=error)
        except Exception as raised:
            what_failed = f"error running {job.job_name} ({job.job_id})"
            log_gave_up(logger, f"{what_failed}; its lock will expire and it will rerun", raised)
            self._done_settling()
            self._tasks.free(stale=False)
            return
        self._written(command, result, owned)

    def _written(self, command: Command, result: HandlerResult, owned: bool) -> None:
        """How the settlement went: the ending event, the slot, or the lost lock."""
        # A lost write's row still tells the end, but for a refused success: the stale
        # handling tells whether it stands or was superseded.
        if owned or command.history not in (None, HistoryStatus.SUCCESS):
            self._tell(ended_event, command, result)
        if not owned:
            self._lock.lost()
            return
        self._done_settling()
        if isinstance(command, MarkTerminal):
            self._tasks.spawn(self._reached_max_tries)
        else:
            self._tasks.free(stale=False)

    async def _reached_max_tries(self) -> None:
        try:
            await reached_max_tries(self.services, self._calls, self.job)
        finally:
            self._tasks.free(stale=False)

    # -- stale ------------------------------------------------------------------------------------

    def _on_stale(self, reason: StaleReason) -> None:
        """Called once by the lock (watchdog, lost lock, failed write, or a lost settlement)."""
        if self.phase is Phase.STALE:
            return
        self.phase = Phase.STALE
        self.context._lost = True
        if self.services.telemetry.active:
            self.services.telemetry.emit(LockLost(self.job, reason.value))
        if self.definition.cancel_on_stale:
            self._stop_handler()
        self._tasks.spawn(self._handle_stale, reason)

    def _stop_handler(self) -> None:
        self.cancel_requested = True
        if self._handler_scope is not None:
            self._handler_scope.cancel()

    async def _handle_stale(self, reason: StaleReason) -> None:
        services, job, definition = self.services, self.job, self.definition
        try:
            refused = self._settling_row
            if refused is not None and refused.status is HistoryStatus.SUCCESS:
                await self._refused_success(refused, reason)
                return
            ended_at = services.clock.now()
            if definition.on_stale is not None:
                services.host.spawn_background(
                    functools.partial(run_on_stale, definition, job, self._calls, self.context)
                )
            loss = await lock_loss(services, job)
            if loss.by_operator:
                # An operator ended the job (and wrote this execution's row, if any): stop the
                # handler even with cancel_on_stale=False, and write nothing more.
                stops = (job.job_name, job.job_id, loss.value, job.execution_id)
                logger.warning("%s (%s): %s; execution %s stops", *stops, extra=job_extra(job))
                self._tell(JobCancelled, "operator")
                self._stop_handler()
                return
            lost = (job.execution_id, job.job_name, job.job_id, reason.value, loss.value)
            logger.warning(
                "execution %s of %s (%s) lost its lock (%s): %s", *lost, extra=job_extra(job)
            )
            self._tell(JobStale, reason.value)
            # A row written before a lost settlement stays its row.
            written = self._settling is not None and self._settling.history is not None
            row = None if written else self._row(HistoryStatus.STALE, ended_at)
            await settle_stale(services, job, definition, row=row, now=ended_at)
        finally:
            self._done_settling()
            # Freed only after the demotion, so the retry queues behind other work.
            self._tasks.free(stale=True)

    async def _refused_success(self, row: HistoryRecord, reason: StaleReason) -> None:
        """The handler ran to success but the settlement found the lock moved on (an outage
        longer than the lock, a takeover): the row says which success counts. No demotion:
        the record is another execution's now."""
        job, command = self.job, self._settling
        assert command is not None
        superseded = await supersede(self.services, row)
        what = (job.execution_id, job.job_name, job.job_id)
        if superseded:
            logger.warning(
                "execution %s of %s (%s) ran to success, but its lock had moved on to an "
                "execution that runs the job again; its row is marked superseded",
                *what,
                extra=job_extra(job),
            )
            self._tell(JobStale, "superseded")
            return
        if superseded is None:
            self._tell(JobStale, reason.value)
            return
        logger.info(
            "execution %s of %s (%s) ran to success and its row won; the execution that took "
            "its lock over completes it without running it again",
            *what,
            extra=job_extra(job),
        )
        self._tell(ended_event, command, Returned(row.result))

    # -- helpers ----------------------------------------------------------------------------------

    def _tell(self, event: Callable[..., ExecutionEnded | None], *args: Any) -> None:
        """Emit the event that ends this started execution, built only when someone listens."""
        telemetry = self.services.telemetry
        if telemetry.active and self._t0 is not None:
            # The handler's run, as the row measures it (not the settlement's write after it).
            end = anyio.current_time() if self._t1 is None else self._t1
            ended = event(self.job, end - self._t0, *args)
            self._t0 = None  # one ending event per started execution
            if ended is not None:
                telemetry.emit(ended)

    def _done_settling(self) -> None:
        """This execution knows how its settlement went: a claim of its job may go on."""
        if self._let_go is not None:
            self._let_go()
            self._let_go = None

    def _ended(self) -> None:
        self._done_settling()
        # Break the cycles (context, lock keeper) so the execution is freed by reference
        # counting now, not by the garbage collector later.
        self.context._detach()
        self._lock.drop()

    def _row(
        self, status: HistoryStatus, ended_at: datetime, **outcome: Any
    ) -> HistoryRecord | None:
        started, relay = self._started_at, self._lock.progress
        if relay is not None:  # the latest report, written or not
            outcome["progress"] = relay.latest
        return history_record(
            self.job, self.definition, status, started_at=started, ended_at=ended_at, **outcome
        )
