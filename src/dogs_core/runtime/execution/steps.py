"""The durable steps of one execution (``ctx.step``, ``ctx.sleep``;
:mod:`dogs_core.domain.steps` decides what replays): the one fenced write that records a step's
result (and a sleep's wake-up), retried while the store is briefly away, within half the job's
lock time. A write that matches nothing means another
execution owns the job now: the execution goes stale and the handler is told
(:class:`~dogs_core.errors.LockLostError`), so it never runs past a step it could not record.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from dogs_core.domain.records import ClaimedJob, to_millis
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import LockLostError
from dogs_core.ports import Role, require_role
from dogs_core.ports.common import check_role
from dogs_core.runtime.execution.holding import JobLock
from dogs_core.runtime.execution.services import ExecutionServices, job_extra
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["check_steps", "record_sleep", "record_step", "record_step_in_transaction"]

logger = logging.getLogger("dogs.execution")


def check_steps(services: ExecutionServices) -> None:
    """Raise :class:`~dogs_core.errors.MissingRoleError` unless the store records steps (asked
    before a step's function runs, so that a store without the role runs none)."""
    check_role(services.store, Role.STEPS, "ctx.step")


async def record_step(
    services: ExecutionServices,
    job: ClaimedJob,
    lock: JobLock,
    index: int,
    name: str,
    result: Any,
    duration_ms: int,
    *,
    sleep_until: datetime | None = None,
) -> RecordedStep:
    """Record step number ``index`` of ``job`` (fenced by its lock) and return it; with
    ``sleep_until`` the same write makes the record sleep until then."""
    store = require_role(services.store, Role.STEPS, "ctx.step")
    step = RecordedStep(name, result, services.clock.now(), job.execution_id, duration_ms)
    within = job_lock_seconds(services, job) / 2
    landed = await retry_transient(
        lambda: store.record_step(job.job_id, job.lock_id, index, step, sleep_until=sleep_until),
        what=f"record step {name!r} of {job.job_name}",
        attempts=None,
        deadline=within,
    )
    if not landed:
        lock.lost()
        what = (job.job_name, job.job_id, name, job.execution_id)
        logger.warning(
            "%s (%s): step %r not recorded: execution %s lost its lock", *what, extra=job_extra(job)
        )
        raise LockLostError(job.job_name, job.job_id, job.execution_id)
    logger.debug("%s (%s): step %r recorded", job.job_name, job.job_id, name)
    return step


async def record_sleep(
    services: ExecutionServices,
    job: ClaimedJob,
    lock: JobLock,
    index: int,
    name: str,
    wake: timedelta | datetime,
) -> tuple[RecordedStep, datetime | None]:
    """Record ``ctx.sleep``'s step ``name`` (its result the wake-up time, to the millisecond)
    and, in the same fenced write, the record's sleep until then: from that write on no claim
    takes the job before it wakes, whatever happens to this worker. The wake-up time is
    returned when it is ahead (``None``: nothing to sleep, the run goes on)."""
    now = services.clock.now()
    until = to_millis(now + wake if isinstance(wake, timedelta) else wake)
    sleeping = until > now
    step = await record_step(
        services, job, lock, index, name, until, 0, sleep_until=until if sleeping else None
    )
    if sleeping:
        what = (job.job_name, job.job_id, until.isoformat())
        logger.info("%s (%s) sleeps until %s", *what, extra=job_extra(job))
    return step, until if sleeping else None


async def record_step_in_transaction(
    services: ExecutionServices,
    job: ClaimedJob,
    lock: JobLock,
    index: int,
    name: str,
    call: Callable[[Any], Any],
    stored: Callable[[object], Any],
) -> RecordedStep:
    """Run ``call(session)`` (the step's function, awaited when it returns an awaitable) and
    record its result (``stored`` checks it) in one transaction of the store, fenced by the
    lock. Not retried here: a transaction that keeps conflicting fails the step (the job is
    retried by its policy, and replays the step if its commit landed after all)."""
    store = require_role(services.store, Role.STEPS, "ctx.step")

    async def make_step(session: Any) -> RecordedStep:
        started = time.perf_counter()
        result = call(session)
        if inspect.isawaitable(result):
            result = await result
        elapsed = round((time.perf_counter() - started) * 1000)
        return RecordedStep(name, stored(result), services.clock.now(), job.execution_id, elapsed)

    step = await store.record_step_in_transaction(job.job_id, job.lock_id, index, make_step)
    if step is None:
        lock.lost()
        what = (job.job_name, job.job_id, name, job.execution_id)
        logger.warning(
            "%s (%s): transactional step %r rolled back: execution %s lost its lock",
            *what,
            extra=job_extra(job),
        )
        raise LockLostError(job.job_name, job.job_id, job.execution_id)
    logger.debug("%s (%s): step %r committed with its writes", job.job_name, job.job_id, name)
    return step


def job_lock_seconds(services: ExecutionServices, job: ClaimedJob) -> float:
    """The lock the execution holds, in seconds (from the claim to its ``locked_until``)."""
    claimed = job.last_run_at or services.clock.now()
    seconds = (job.locked_until - claimed).total_seconds()
    return seconds if seconds > 0 else services.settings.default_lock_time.total_seconds()
