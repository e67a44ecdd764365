"""A claimed record that is not run: why it is pushed back, and its settlement.

:func:`~dogs_core.domain.outcome.decide_before_run` returns a
:class:`~dogs_core.domain.outcome.Defer` for three reasons, told differently: a record of another
type than the definition here (another deployment owns the name: an ERROR, someone must act),
a recurrent job's missed slots skipped by its misfire policy (an INFO line naming the job and
the slots, and a :class:`~dogs_core.domain.events.JobMisfired` event; no history row), and a
paused runtime schedule parked again (a DEBUG line). It returns a
:class:`~dogs_core.domain.outcome.Delete` for an event job past its ``start_before`` deadline:
an INFO line, an ``expired`` history row and a :class:`~dogs_core.domain.events.JobExpired`
event.
"""

from __future__ import annotations

import dataclasses
import logging

from dogs_core.domain.definitions import JobDefinition, RecurrentJobDefinition
from dogs_core.domain.events import JobExpired, JobMisfired
from dogs_core.domain.history import history_record
from dogs_core.domain.outcome import Defer, Delete, MarkTerminal
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus
from dogs_core.domain.settle import Settlement
from dogs_core.runtime.execution.invocation import UserCalls
from dogs_core.runtime.execution.job_events import job_extra
from dogs_core.runtime.execution.recording import reached_max_tries
from dogs_core.runtime.execution.services import ExecutionServices
from dogs_core.runtime.execution.settle import label_of
from dogs_core.runtime.execution.unique_windows import ends_with_window, open_window

__all__ = ["settle_instead_of_running", "tell_deferred"]

logger = logging.getLogger("dogs.execution")


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
