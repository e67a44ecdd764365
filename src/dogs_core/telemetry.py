"""Telemetry, in one import: the hub, the process-wide hub, ``subscribe`` and every event.

    from dogs_core import telemetry

    def on_event(event: telemetry.Event) -> None:
        if isinstance(event, telemetry.JobFailed):
            alert(event.job.job_name, event.error)

    telemetry.subscribe(on_event, telemetry.JobFailed)

The events are defined in :mod:`dogs_core.domain.events` (its docstring says when and in which
context each is emitted); the hub in :mod:`dogs_core.runtime.plumbing.telemetry`.
"""

from dogs_core.domain.events import (
    EVENT_KINDS,
    ClaimSwept,
    Event,
    ExecutionEnded,
    JobCancelled,
    JobClaimed,
    JobExpired,
    JobFailed,
    JobMisfired,
    JobRetried,
    JobScheduled,
    JobSnoozed,
    JobStale,
    JobStarted,
    JobSucceeded,
    LockLost,
    LockRenewed,
    ProgressWritten,
    SchedulingEnded,
    SchedulingStarted,
    StepEnded,
    StepReplayed,
    StepStarted,
    StoreErrored,
)
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Subscriber, Telemetry, subscribe
from dogs_core.runtime.worker.job_logs import JobLogLines

__all__ = [
    "EVENT_KINDS",
    "TELEMETRY",
    "ClaimSwept",
    "Event",
    "ExecutionEnded",
    "JobCancelled",
    "JobClaimed",
    "JobExpired",
    "JobFailed",
    "JobLogLines",
    "JobMisfired",
    "JobRetried",
    "JobScheduled",
    "JobSnoozed",
    "JobStale",
    "JobStarted",
    "JobSucceeded",
    "LockLost",
    "LockRenewed",
    "ProgressWritten",
    "SchedulingEnded",
    "SchedulingStarted",
    "StepEnded",
    "StepReplayed",
    "StepStarted",
    "StoreErrored",
    "Subscriber",
    "Telemetry",
    "subscribe",
]
