"""What an execution tells telemetry and logs: the event that ends it (from the outcome command
its handler led to), its renewals, and the structured ``extra`` fields of its log lines.

Kept out of :mod:`dogs_core.runtime.execution.execution` so that the execution only asks "is anyone
listening" and hands over what happened; the mapping is one pure function, tested on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from dogs_core.domain.events import (
    ExecutionEnded,
    JobFailed,
    JobRetried,
    JobSnoozed,
    JobSucceeded,
    LockRenewed,
)
from dogs_core.domain.outcome import Command, Reschedule
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobType
from dogs_core.runtime.execution.invocation import HandlerResult, Raised
from dogs_core.runtime.plumbing.lock import ProgressRider, RenewWrite, job_lock_write

if TYPE_CHECKING:
    from dogs_core.runtime.execution.services import ExecutionServices

__all__ = ["ended_event", "job_extra", "reporting_renewals"]


def job_extra(job: ClaimedJob) -> Mapping[str, object]:
    """The structured fields of an execution's log lines (``logging``'s ``extra``): a JSON
    formatter finds them as attributes of the record."""
    return {
        "job_name": job.job_name,
        "job_id": job.job_id,
        "execution_id": job.execution_id,
        "tries": job.tries,
    }


def reporting_renewals(
    services: ExecutionServices,
    job: ClaimedJob,
    write: RenewWrite | None,
    rider: ProgressRider | None = None,
) -> RenewWrite | None:
    """The lock keeper's renewal write (``None``: the job's plain ``extend_lock``, carrying
    ``rider``'s progress), emitting :class:`LockRenewed` when it lands, if anyone listens when
    the execution starts."""
    telemetry = services.telemetry
    if not telemetry.active:
        return write
    inner = write if write is not None else job_lock_write(job, services.store, rider)

    async def renew(until: datetime) -> bool:
        matched = await inner(until)
        if matched and telemetry.active:
            telemetry.emit(LockRenewed(job, until))
        return matched

    return renew


def ended_event(
    job: ClaimedJob, duration: float, command: Command, result: HandlerResult
) -> ExecutionEnded | None:
    """The event for an execution whose handler gave ``result`` and whose outcome ``command``
    was written; ``None`` for a command that ends no run (shutdown releases and stale
    demotions have events of their own, emitted where they happen)."""
    status = command.history
    if status is HistoryStatus.SUCCESS:
        return JobSucceeded(job, duration)
    if status is HistoryStatus.SNOOZED and isinstance(command, Reschedule):
        return JobSnoozed(job, duration, run_at=command.next_run_at)
    if status is HistoryStatus.ERROR and isinstance(result, Raised):
        if isinstance(command, Reschedule):
            if job.type is JobType.EVENT:
                return JobRetried(job, duration, error=result.error, retry_at=command.next_run_at)
            return JobFailed(job, duration, error=result.error, next_run_at=command.next_run_at)
        return JobFailed(job, duration, error=result.error)
    return None
