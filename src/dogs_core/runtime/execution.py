"""One execution of one claimed job: checks, the handler, the outcome writes, stale handling.

Every write made here is fenced by the claim's ``lock_id``; a write that matches nothing means
another execution owns the job now, and this one is treated as stale. Whatever the handler or
its callbacks do, the execution ends with the record either updated, deleted, or left to its
lock's expiry, and its capacity released exactly once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    JobDefinition,
    Retry,
    is_async_callable,
    load_params,
    normalize_on_error_result,
    retry_run_at,
    to_bson_storable,
)
from dogs_core.domain.records import (
    ClaimedJob,
    HistoryRecord,
    HistoryStatus,
    JobStatus,
    JobType,
    to_millis,
)
from dogs_core.domain.renewal import StaleReason
from dogs_core.domain.schedules import next_run_after
from dogs_core.errors import DogsError, ExecutionCancelledError, TransientStoreError
from dogs_core.runtime.context import JobContext, reset_current, set_current
from dogs_core.runtime.lock import LockKeeper
from dogs_core.runtime.retry import retry_transient

if TYPE_CHECKING:
    from dogs_core.runtime.workers import Workers

__all__ = ["Execution", "JobTimeoutError"]

logger = logging.getLogger("dogs.execution")

_SHUTDOWN_RELEASE_TIMEOUT = 30.0


class JobTimeoutError(DogsError, TimeoutError):
    """The handler ran past the job's ``timeout`` and was cancelled (a failed attempt)."""


@dataclass(frozen=True, slots=True)
class _Succeeded:
    value: Any


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


class _Cancelled:
    pass


_Outcome = _Succeeded | _Failed | _Cancelled


class Execution:
    """The lifecycle of one claimed job inside one :class:`~dogs_core.runtime.workers.Workers`."""

    def __init__(
        self,
        workers: Workers,
        job: ClaimedJob,
        definition: JobDefinition,
        *,
        lock_from: float | None = None,
    ) -> None:
        self.workers = workers
        self.job = job
        self.definition = definition
        self.context = JobContext(self)
        self.cancel_requested = False
        self._stale = False
        self._shutdown = False
        self._finished = False
        self._handler_scope: anyio.CancelScope | None = None
        self._callback_scopes: set[anyio.CancelScope] = set()
        self._keeper: LockKeeper | None = None
        self._open_tasks = 1  # run() itself, plus what _spawn started and has not ended
        self._started_at: datetime | None = None
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
        if keeper is None:
            logger.warning("extend_lock_time called before the handler started; ignored")
            return False
        return await keeper.extend(seconds)

    def clear_watchdog(self) -> None:
        if self._keeper is not None:
            self._keeper.clear()

    def cancel_for_shutdown(self) -> None:
        """Stop was requested and the grace period is over: cancel the handler and any user
        callback in progress; a cancelled handler's lock is then released."""
        self._shutdown = True
        self.cancel_requested = True
        if self._handler_scope is not None:
            self._handler_scope.cancel()
        for scope in self._callback_scopes:
            scope.cancel()

    # -- the lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        token = set_current(self.context)
        try:
            await self._lifecycle()
        except Exception:
            logger.exception(
                "unexpected error running %s (%s); its lock will expire and it will be retried",
                self.job.job_name,
                self.job.job_id,
            )
        finally:
            reset_current(token)
            self.workers.release_capacity(self, stale=self._stale)
            self._task_ended()

    def _spawn(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a task that belongs to this execution (a renewal write, the heartbeat, the
        stale handling); the execution is forgotten only once all of them have ended."""
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

        self.workers.spawn_for_execution(task)

    def _task_ended(self) -> None:
        self._open_tasks -= 1
        if self._open_tasks == 0:
            self.workers.forget(self)

    async def _lifecycle(self) -> None:
        job, definition, settings = self.job, self.definition, self.workers.settings
        if job.type is not definition.type:
            await self._handle_type_mismatch()
            return
        if isinstance(definition, EventJobDefinition):
            limit = definition.effective_max_tries(settings.max_tries)
            if limit is not None and job.tries > limit:
                await self._mark_max_tries_reached()
                return
        lock_time = definition.effective_lock_time(settings.default_lock_time)
        if lock_time != settings.default_lock_time:
            requested_at = anyio.current_time()
            now = self.workers.clock.now()
            owned = await self._fenced(
                "apply lock time",
                lambda: self.workers.store.extend_lock(job.job_id, job.lock_id, now + lock_time),
            )
            if not owned:
                logger.warning(
                    "lost the lock of %s (%s) before it started; not running it",
                    job.job_name,
                    job.job_id,
                )
                return
            self._lock_from = requested_at
        keeper = LockKeeper(
            job=job,
            store=self.workers.store,
            clock=self.workers.clock,
            lock_time=lock_time,
            locked_at=self._lock_from,
            deadlines=self.workers.deadlines,
            spawn=self._spawn,
            on_stale=self._on_stale,
        )
        self._keeper = keeper
        keeper.start()
        if not keeper.check_deadline():
            # The lock ran out before the handler could start; the stale handling is running.
            keeper.finish()
            return
        heartbeat = definition.heartbeat_interval(lock_time)
        heartbeat_scope: anyio.CancelScope | None = None
        if heartbeat is not None:
            heartbeat_scope = anyio.CancelScope()
            self._spawn(self._heartbeat, heartbeat, lock_time, heartbeat_scope)

        self._started_at = self.workers.clock.now()
        outcome = await self._invoke()
        if heartbeat_scope is not None:
            heartbeat_scope.cancel()
        keeper.finish()
        self._finished = True
        ended_at = self.workers.clock.now()

        if self._stale:
            logger.info(
                "ignoring the late %s of stale execution %s of %s",
                "success" if isinstance(outcome, _Succeeded) else "result",
                job.execution_id,
                job.job_name,
            )
            return
        if isinstance(outcome, _Cancelled):
            # Cancelled for shutdown (a handler that finished anyway keeps its outcome).
            await self._release_for_shutdown()
            return
        if isinstance(outcome, _Succeeded):
            await self._on_success(outcome.value, ended_at)
        else:
            await self._on_failure(outcome.error, ended_at)

    async def _invoke(self) -> _Outcome:
        definition, job = self.definition, self.job
        scope = anyio.CancelScope()
        self._handler_scope = scope
        if self.cancel_requested:
            return _Cancelled()
        timeout = definition.timeout
        with scope:
            try:
                with anyio.fail_after(timeout.total_seconds()) if timeout else nullcontext():
                    if isinstance(definition, EventJobDefinition):
                        params = load_params(definition, job.params)
                        call = functools.partial(definition.handler, params, self.context)
                    else:
                        call = functools.partial(definition.handler, self.context)
                    if definition.is_async:
                        value = await call()
                    else:
                        value = await anyio.to_thread.run_sync(
                            call,
                            limiter=self.workers.thread_limiter,
                            abandon_on_cancel=True,
                        )
                return _Succeeded(value)
            except TimeoutError as error:
                if timeout is not None and not isinstance(error, JobTimeoutError):
                    return _Failed(
                        JobTimeoutError(f"{job.job_name} ran longer than its timeout {timeout}")
                    )
                return _Failed(error)
            except ExecutionCancelledError:
                return _Cancelled()
            except Exception as error:
                return _Failed(error)
        return _Cancelled()

    async def _heartbeat(
        self, interval: timedelta, lock_time: timedelta, scope: anyio.CancelScope
    ) -> None:
        with scope:
            while True:
                await anyio.sleep(interval.total_seconds())
                try:
                    renewed = await self.extend_lock(lock_time.total_seconds())
                except Exception:
                    return  # the renewal machine already reported the execution stale
                if not renewed:
                    return

    # -- outcomes ---------------------------------------------------------------------------------

    async def _on_success(self, value: Any, ended_at: datetime) -> None:
        job, definition = self.job, self.definition
        if job.type is JobType.RECURRENT:
            next_run = next_run_after(
                _schedule_of(definition), self.workers.clock.now(), scheduled_at=job.next_run_at
            )
            owned = await self._reschedule(
                "reschedule", next_run, priority=definition.priority, reset_tries=True
            )
        else:
            owned = await self._fenced_delete()
        if not owned:
            self._lost_after_run()
            return
        self.workers.release_capacity(self, stale=False)
        await self._write_history(HistoryStatus.SUCCESS, ended_at, result=value)

    async def _on_failure(self, error: BaseException, ended_at: datetime) -> None:
        job, definition, settings = self.job, self.definition, self.workers.settings
        logger.error("job %s (%s) failed on try %d: %r", job.job_name, job.job_id, job.tries, error)
        decision = await self._ask_on_error(error)
        now = self.workers.clock.now()
        rand = self.workers.rng.random()
        if job.type is JobType.RECURRENT:
            if isinstance(decision, Retry) and (
                decision.run_in is not None or decision.run_at is not None
            ):
                next_run = retry_run_at(definition, decision, now, job.tries, rand)
                reset = False
            else:
                next_run = next_run_after(
                    _schedule_of(definition), now, scheduled_at=job.next_run_at
                )
                reset = True
            owned = await self._reschedule(
                "reschedule after failure",
                next_run,
                priority=definition.priority,
                reset_tries=reset,
            )
        elif isinstance(decision, Discard):
            owned = await self._fenced_delete()
        else:
            assert isinstance(definition, EventJobDefinition)
            limit = definition.effective_max_tries(settings.max_tries)
            explicit = decision.run_in is not None or decision.run_at is not None
            if not explicit and limit is not None and job.tries >= limit:
                owned = await self._mark_max_tries_reached()
            else:
                next_run = retry_run_at(definition, decision, now, job.tries, rand)
                owned = await self._reschedule(
                    "schedule retry", next_run, priority=None, reset_tries=False
                )
        if not owned:
            self._lost_after_run()
            return
        self.workers.release_capacity(self, stale=False)
        await self._write_history(
            HistoryStatus.ERROR, ended_at, error_message=_error_message(error)
        )

    async def _ask_on_error(self, error: BaseException) -> Retry | Discard:
        """What ``on_error`` says; a callback that raises or returns junk means "retry"."""
        on_error = self.definition.on_error
        if on_error is None:
            return Retry()
        params: object = self.job.params
        try:
            if isinstance(self.definition, EventJobDefinition):
                params = load_params(self.definition, self.job.params)
            returned = await self._call_user(on_error, error, params, self.context)
            return normalize_on_error_result(returned, job_name=self.job.job_name)
        except Exception:
            logger.exception(
                "on_error of %s raised or returned an invalid value; counting a failed attempt",
                self.job.job_name,
            )
            return Retry()

    async def _mark_max_tries_reached(self) -> bool:
        job, settings = self.job, self.workers.settings
        now = self.workers.clock.now()
        retention = settings.max_tries_reached_retention

        async def marked() -> bool:
            record = await self.workers.store.get_job(job.job_id)
            return (
                record is not None
                and record.lock_id is None
                and record.status is JobStatus.MAX_TRIES_REACHED
                and record.max_tries_reached_at == to_millis(now)
            )

        owned = await self._fenced(
            "mark maxTriesReached",
            lambda: self.workers.store.mark_max_tries_reached(
                job.job_id,
                job.lock_id,
                now=now,
                expires_at=None if retention is None else now + retention,
            ),
            verify=marked,
        )
        if owned:
            logger.warning(
                "job %s (%s) reached its attempt limit after %d tries",
                job.job_name,
                job.job_id,
                job.tries,
            )
            hook = settings.on_max_tries_reached
            if hook is not None:
                try:
                    await self._call_user(hook, job)
                except Exception:
                    logger.exception("on_max_tries_reached raised for %s", job.job_name)
        return owned

    async def _handle_type_mismatch(self) -> None:
        """The record's type differs from the definition's (another deployment owns the name).

        Dogs leaves such a record locked until its lock expires, again and again; we push it
        back by one lock time so it does not spin, and say so loudly (each claim still counts a
        try).
        """
        job = self.job
        logger.error(
            "record %s of %r is a %s job but the definition here is %s; deferring it",
            job.job_id,
            job.job_name,
            job.type,
            self.definition.type,
        )
        later = self.workers.clock.now() + self.workers.settings.default_lock_time
        await self._fenced(
            "defer mismatched record",
            lambda: self.workers.store.reschedule(
                job.job_id, job.lock_id, next_run_at=later, priority=None, reset_tries=False
            ),
        )

    async def _release_for_shutdown(self) -> None:
        job = self.job
        now = self.workers.clock.now()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_SHUTDOWN_RELEASE_TIMEOUT):
            released = await self._fenced(
                "release lock at shutdown",
                lambda: self.workers.store.release_lock(job.job_id, job.lock_id, now=now),
            )
            logger.warning(
                "cancelled %s (%s) at shutdown; lock %s",
                job.job_name,
                job.job_id,
                "released" if released else "already lost",
            )

    # -- stale ------------------------------------------------------------------------------------

    def _on_stale(self, reason: StaleReason) -> None:
        """Called once by the renewal machine (watchdog, lost lock, failed write, or us)."""
        if self._stale:
            return
        self._stale = True
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
        job, definition = self.job, self.definition
        ended_at = self.workers.clock.now()
        logger.warning(
            "execution %s of %s (%s) went stale (%s)",
            job.execution_id,
            job.job_name,
            job.job_id,
            reason,
        )
        if definition.on_stale is not None:
            self.workers.spawn(self._run_on_stale, name=f"dogs on_stale {job.job_name}")
        try:
            await self._fenced(
                "demote stale job",
                lambda: self.workers.store.demote_stale(job.job_id, job.lock_id),
            )
        except Exception:
            logger.exception("could not demote stale job %s", job.job_id)
        finally:
            # Free the slot only after the demotion, so the retry queues behind other work.
            self.workers.release_capacity(self, stale=True)
        # Shielded: a stale execution's tasks are cancelled when the workers stop.
        with anyio.CancelScope(shield=True):
            await self._write_history(HistoryStatus.STALE, ended_at)

    async def _run_on_stale(self) -> None:
        on_stale = self.definition.on_stale
        if on_stale is None:
            return
        try:
            params: object = self.job.params
            if isinstance(self.definition, EventJobDefinition):
                params = load_params(self.definition, self.job.params)
            await self._call_user(on_stale, params, self.context)
        except Exception:
            logger.exception("on_stale of %s raised", self.job.job_name)

    # -- helpers ----------------------------------------------------------------------------------

    async def _fenced(
        self,
        what: str,
        write: Callable[[], Awaitable[bool]],
        *,
        verify: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """A fenced write, retried on transient errors.

        A retry that matches nothing proves little when an earlier attempt may have landed
        (its reply was lost): then ``verify`` reads the record back to tell "my write landed"
        from "someone else owns the job". Without an ambiguous attempt, matching nothing means
        the lock is lost, whatever the record looks like now.
        """
        ambiguous = False

        async def attempt() -> bool:
            nonlocal ambiguous
            try:
                return await write()
            except TransientStoreError as error:
                ambiguous = ambiguous or error.write_may_have_applied
                raise

        owned = await retry_transient(attempt, what=f"{what} {self.job.job_name}")
        if not owned and ambiguous and verify is not None:
            owned = await retry_transient(verify, what=f"verify {what} {self.job.job_name}")
        return owned

    async def _fenced_delete(self) -> bool:
        """Delete the event record (success, or a discarded failure)."""
        job, store = self.job, self.workers.store

        async def gone() -> bool:
            return await store.get_job(job.job_id) is None

        # Coalesced with other executions' completions into one store call; its verdict is
        # "the record is gone", which also settles an attempt whose reply was lost.
        completions = self.workers.completions
        return await self._fenced(
            "complete", lambda: completions.submit((job.job_id, job.lock_id)), verify=gone
        )

    async def _reschedule(
        self, what: str, next_run: datetime, *, priority: int | None, reset_tries: bool
    ) -> bool:
        """Release the record for its next run (a recurrent run, or a retry)."""
        job, store = self.job, self.workers.store

        async def rescheduled() -> bool:
            record = await store.get_job(job.job_id)
            return (
                record is not None
                and record.lock_id is None
                and record.next_run_at == to_millis(next_run)
            )

        return await self._fenced(
            what,
            lambda: store.reschedule(
                job.job_id,
                job.lock_id,
                next_run_at=next_run,
                priority=priority,
                reset_tries=reset_tries,
            ),
            verify=rescheduled,
        )

    async def _call_user(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run a user callback; cut short with :class:`ExecutionCancelledError` when the workers
        stop and the grace period is over, so a hanging callback cannot hold up ``stop``."""
        with anyio.CancelScope() as scope:
            self._callback_scopes.add(scope)
            if self._shutdown:
                scope.cancel()
            try:
                if is_async_callable(func):
                    return await func(*args)
                result = await anyio.to_thread.run_sync(
                    functools.partial(func, *args),
                    limiter=self.workers.thread_limiter,
                    abandon_on_cancel=True,
                )
                if hasattr(result, "__await__"):
                    return await result
                return result
            finally:
                self._callback_scopes.discard(scope)
        raise ExecutionCancelledError(
            f"a callback of {self.job.job_name} was cancelled: the workers are stopping"
        )

    async def _write_history(
        self,
        status: HistoryStatus,
        ended_at: datetime,
        *,
        result: Any = None,
        error_message: str | None = None,
    ) -> None:
        job, definition = self.job, self.definition
        if definition.save_executions_for <= timedelta(0):
            return
        started_at = self._started_at or ended_at
        try:
            stored_result = to_bson_storable(result, path="result", job=job.job_name)
        except DogsError:
            stored_result = repr(result)
        record = HistoryRecord(
            execution_id=job.execution_id,
            job_id=job.job_id,
            job_name=job.job_name,
            type=job.type,
            priority=job.priority,
            tries=job.tries,
            started_at=started_at,
            ended_at=max(ended_at, started_at),
            status=status,
            expires_at=ended_at + definition.save_executions_for,
            params=job.params,
            result=stored_result,
            error_message=error_message,
            unique_identifier=job.unique_identifier,
        )
        # Coalesced with other executions' rows. The batch writer is not cancelled with this
        # execution, so a row once queued is written even if the wait below is cut short.
        history = self.workers.history
        try:
            await retry_transient(lambda: history.submit(record), what=f"history of {job.job_name}")
        except Exception:
            logger.exception("could not write history for %s", job.execution_id)


def _schedule_of(definition: JobDefinition) -> Any:
    schedule = getattr(definition, "schedule", None)
    if schedule is None:  # pragma: no cover - recurrent definitions always have one
        raise DogsError(f"recurrent job {definition.name!r} has no schedule")
    return schedule


def _error_message(error: BaseException) -> str:
    text = str(error)
    return text if text else type(error).__name__
