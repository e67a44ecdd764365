"""A claim that took over an expired lock: complete the killed attempt's finished work instead
of running it again, or write that attempt's ``stale`` row and run the job.

The decision is :mod:`dogs_core.domain.takeover`'s; this module reads the killed attempt's
history row and performs what was decided. An execution writes its row before its fenced
completion, so a worker killed between the two leaves a ``success`` row and a locked record:
the next claimer finds the row here and performs the completion (event: delete; recurrent:
reschedule to its next slot) without running the handler, and writes no row.

The attempt may also be alive, its success still on its way after an outage longer than its
lock. So a claimer that finds no row writes the attempt's ``stale`` row (naming itself in
``superseded_by``) *before* it runs anything, and reads the row back: the first row of an
execution wins, so exactly one of the two is that attempt's row. Its ``success`` won: the work
is done, completed here as above. The ``stale`` row won: the job runs again, and the attempt,
its settlement refused, turns that row into ``superseded`` (:mod:`dogs_core.runtime.recording`).
Either way the job has one counted success: a ``success`` row is never written for an attempt
whose job ran again. A claim by the worker that is itself still settling the job waits for that
settlement first (:meth:`~dogs_core.runtime.settle.Settler.settled_here`), for half its lock
at most: past that, that settlement is treated as another worker's would be.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.history import killed_attempt_record
from dogs_core.domain.outcome import decide_before_run
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.domain.settle import Settlement
from dogs_core.domain.takeover import (
    PREVIOUS_ROW_LOOKBACK,
    completion_of_finished_attempt,
    previous_attempt_row,
)
from dogs_core.runtime._async.retry import retry_transient
from dogs_core.runtime.outage import log_gave_up
from dogs_core.runtime.services import HISTORY_WRITE_TIMEOUT, ExecutionServices
from dogs_core.runtime.unique_windows import ends_with_window, open_window

__all__ = ["Takeover", "take_over"]

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
    attempt = job.previous_attempt.execution_id
    what = (job.job_name, job.job_id, attempt)
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
