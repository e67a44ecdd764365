"""A claimed job before its handler runs: a claim that took over a killed attempt's lock (its
row read back, or the success an earlier try left unsettled: that success settled without a
second run; else its ``stale`` row written before anything runs, naming the claimer, and read
back: the first row of an execution wins, so the job has one counted success: ``take_over``),
and a claimed record that is not run but pushed back (another deployment's type, missed slots:
``tell_deferred``, ``settle_instead_of_running``)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import anyio

from dogs_core.domain.definitions import JobDefinition, RecurrentJobDefinition
from dogs_core.domain.events import JobExpired, JobMisfired
from dogs_core.domain.history import history_record, killed_attempt_record
from dogs_core.domain.outcome import Defer, Delete, MarkTerminal, decide_before_run
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus
from dogs_core.domain.settle import Settlement
from dogs_core.domain.takeover import (
    PREVIOUS_ROW_LOOKBACK,
    completion_of_finished_attempt,
    previous_attempt_row,
)
from dogs_core.runtime.execution.ending import ends_with_window, open_window, reached_max_tries
from dogs_core.runtime.execution.invocation import UserCalls
from dogs_core.runtime.execution.services import HISTORY_WRITE_TIMEOUT, ExecutionServices, job_extra
from dogs_core.runtime.execution.settle import label_of
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = ["Takeover", "settle_instead_of_running", "take_over", "tell_deferred"]


logger = logging.getLogger("dogs.execution")


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a claim does about the attempt whose lock it took over."""

    completed: bool
    """The attempt had succeeded: its completion is performed here and the handler must not
    run."""


_NOTHING_TO_DO = Takeover(completed=False)


async def take_over(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition
) -> Takeover:
    """Settle the attempt ``job``'s claim took over (none: nothing to do). A failed read of its
    row is logged and the job runs (at-least-once: a second run is safer than none)."""
    if job.previous_attempt is None:
        return _NOTHING_TO_DO
    # Half the claim's lock: time enough for a settlement the store is answering again, and
    # the stale row below still lands while this claim holds the record.
    within = services.settings.default_lock_time.total_seconds() / 2
    if not await services.settler.settled_here(job.job_id, within=within):
        what = (job.job_name, job.job_id, job.previous_attempt.execution_id)
        logger.warning("%s (%s): the settlement of attempt %s is still in flight here", *what)
    previous = await _read_previous_row(services, job)
    now = services.clock.now()
    # A job that will not run (decide_before_run: terminal, expired, deferred) needs no race:
    # the attempt's own row, if it comes, stays its row.
    runs = decide_before_run(definition, job, services.policy, now) is None
    if previous is None and runs:
        killed = killed_attempt_record(job, definition, now=now)
        if killed is not None and await _write_row(services, killed):
            previous = await _read_previous_row(services, job)  # which of the two rows won
    now = services.clock.now()
    command = completion_of_finished_attempt(
        definition, job, previous, services.policy, now, services.rng.random()
    )
    if command is None:
        return _NOTHING_TO_DO
    assert previous is not None  # a completion is decided from a success row
    what = (job.job_name, job.job_id, previous.execution_id)
    logger.warning(
        "%s (%s): the attempt %s ran to success before its worker stopped; completing it "
        "without running it again",
        *what,
    )
    try:
        if ends_with_window(job, command):
            await open_window(services, job, now)
        settlement = Settlement(job.job_id, job.lock_id, command)
        what_write = f"complete the finished attempt of {job.job_name}"
        if not await services.settler.settle(settlement, what=what_write):
            logger.warning("%s (%s): lost the lock before completing it", *what[:2])
    except Exception as error:
        log_gave_up(logger, f"could not complete {job.job_name} ({job.job_id})", error)
    return Takeover(completed=True)


async def _write_row(services: ExecutionServices, row: HistoryRecord) -> bool:
    """Write the killed attempt's ``stale`` row through the history writer (which retries);
    whether it was handed over (the writer logs a batch it could not write)."""
    try:
        await services.history.submit(row)
    except Exception as error:  # the writer stopped (the workers are stopping)
        log_gave_up(logger, f"could not write history for {row.execution_id}", error)
        return False
    return True


async def _read_previous_row(services: ExecutionServices, job: ClaimedJob) -> HistoryRecord | None:
    try:
        with anyio.fail_after(HISTORY_WRITE_TIMEOUT):
            rows = await retry_transient(
                lambda: services.store.read_history(job_id=job.job_id, limit=PREVIOUS_ROW_LOOKBACK),
                what=f"read the previous attempt of {job.job_name}",
            )
    except Exception as error:
        log_gave_up(logger, f"could not read the history of {job.job_id}; running it", error)
        return None
    return previous_attempt_row(job, rows)


def tell_deferred(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition, command: Defer
) -> None:
    """Log (and, for a misfire, emit) why ``job`` is deferred by ``command``."""
    missed = command.missed
    if job.schedule is not None and job.schedule.paused:
        logger.debug("schedule %s is paused: not running it", job.job_name)
        return
    if missed is None:
        what = (job.job_id, job.job_name, job.type, definition.type)
        logger.error("record %s of %r is a %s job but the definition here is %s", *what)
        return
    count = f"{missed.count}{'+' if missed.capped else ''}"
    mode = definition.misfire.mode if isinstance(definition, RecurrentJobDefinition) else None
    logger.info(
        "skipped %s missed slot(s) of %s (%s to %s, misfire=%s); next run at %s",
        count,
        job.job_name,
        missed.first.isoformat(),
        missed.last.isoformat(),
        mode,
        missed.next_run_at.isoformat(),
        extra={**job_extra(job), "skipped_slots": missed.count},
    )
    if services.telemetry.active:
        services.telemetry.emit(
            JobMisfired(
                job, missed.count, missed.first, missed.last, missed.next_run_at, missed.capped
            )
        )


async def settle_instead_of_running(
    services: ExecutionServices,
    calls: UserCalls,
    job: ClaimedJob,
    definition: JobDefinition,
    command: Defer | MarkTerminal | Delete,
) -> None:
    """Settle a claimed job that :func:`~dogs_core.domain.outcome.decide_before_run` refused to
    run: a ``Defer`` (told by :func:`tell_deferred`), a ``MarkTerminal`` of a record past its
    attempt limit (``on_max_tries_reached`` called once it landed), or the ``Delete`` of an
    expired one (its row written with the settlement)."""
    row = None
    if isinstance(command, Defer):
        # Another deployment owns the name (Dogs leaves such a record locked until its lock
        # expires, again and again; we push it back by one lock time so it does not spin), or
        # the misfire policy skips missed slots.
        tell_deferred(services, job, definition, command)
    elif isinstance(command, Delete):
        row = _expired(services, job, definition)
    if ends_with_window(job, command):
        await open_window(services, job, services.clock.now())
    settlement = Settlement(job.job_id, job.lock_id, command, row)
    owned = await services.settler.settle(settlement, what=label_of(command, job.job_name))
    if owned and isinstance(command, MarkTerminal):
        await reached_max_tries(services, calls, job)


def _expired(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition
) -> HistoryRecord | None:
    """Tell that ``job`` missed its start deadline; its ``expired`` row (dated now)."""
    deadline = job.start_before
    assert deadline is not None  # decide_before_run checked it
    now = services.clock.now()
    logger.info(
        "discarding %s (%s): not started by its deadline %s",
        job.job_name,
        job.job_id,
        deadline.isoformat(),
        extra=job_extra(job),
    )
    if services.telemetry.active:
        services.telemetry.emit(JobExpired(job, deadline))
    message = f"not started by its deadline {deadline.isoformat()}"
    row = history_record(job, definition, HistoryStatus.EXPIRED, started_at=None, ended_at=now)
    # it never ran: its row says so (additive ``ran: false``), as a cancel before the start does
    return None if row is None else dataclasses.replace(row, error_message=message, ran=False)
