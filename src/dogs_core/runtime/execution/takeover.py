"""A claim that took over an expired lock: complete the killed attempt's finished work instead
of running it again, or queue that attempt's ``stale`` row and run the job.

The decision is :mod:`dogs_core.domain.takeover`'s; this module reads the killed attempt's
history row and performs what was decided. An execution writes its row before its fenced
completion, so a worker killed between the two leaves a ``success`` row and a locked record:
the next claimer finds the row here and performs the completion (event: delete; recurrent:
reschedule to its next slot) without running the handler, and writes no row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.history import killed_attempt_record
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.domain.settle import Settlement
from dogs_core.domain.takeover import (
    PREVIOUS_ROW_LOOKBACK,
    completion_of_finished_attempt,
    previous_attempt_row,
)
from dogs_core.runtime.execution.services import HISTORY_WRITE_TIMEOUT, ExecutionServices
from dogs_core.runtime.execution.unique_windows import ends_with_window, open_window
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = ["Takeover", "take_over"]

logger = logging.getLogger("dogs.execution")


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a claim does about the attempt whose lock it took over."""

    completed: bool
    """The attempt had succeeded: its completion is performed here and the handler must not
    run."""
    killed_row: HistoryRecord | None = None
    """The ``stale`` row to queue for the attempt (it wrote none); ``None``: nothing to write."""


_NOTHING_TO_DO = Takeover(completed=False)


async def take_over(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition
) -> Takeover:
    """Settle the attempt ``job``'s claim took over (none: nothing to do). A failed read of its
    row is logged and the job runs (at-least-once: a second run is safer than none)."""
    if job.previous_attempt is None:
        return _NOTHING_TO_DO
    previous = await _read_previous_row(services, job)
    now = services.clock.now()
    command = completion_of_finished_attempt(
        definition, job, previous, services.policy, now, services.rng.random()
    )
    if command is None:
        killed = None if previous is not None else killed_attempt_record(job, definition, now=now)
        return Takeover(completed=False, killed_row=killed)
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
