"""The telemetry of one scheduling call, shared by the async and the sync client.

:func:`observe_scheduling` returns ``None`` when nobody listens, so an unobserved ``schedule``
builds no event. Otherwise it emits :class:`SchedulingStarted` at once (a tracing subscriber
opens its span and fills the event's ``trace_context``), gives the jobs back carrying that trace
context, and, used as a context manager around the write, emits a :class:`JobScheduled` per
written or duplicate record and the :class:`SchedulingEnded` that closes the call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from types import TracebackType

from dogs_core.domain.events import JobScheduled, SchedulingEnded, SchedulingStarted
from dogs_core.domain.records import (
    Debounced,
    Duplicate,
    NewJob,
    Replaced,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.runtime.plumbing.telemetry import Telemetry, next_call_id

__all__ = ["ObservedScheduling", "observe_scheduling"]


class ObservedScheduling:
    """One observed ``schedule`` or ``schedule_many`` call (see the module docstring)."""

    __slots__ = ("_duplicates", "_scheduled", "_started", "_t0", "_telemetry", "jobs")

    def __init__(self, telemetry: Telemetry, jobs: Sequence[NewJob]) -> None:
        self._telemetry = telemetry
        names = tuple(dict.fromkeys(job.job_name for job in jobs))
        self._started = SchedulingStarted(next_call_id(), names, len(jobs))
        self._t0 = time.monotonic()
        self._scheduled = self._duplicates = 0
        telemetry.emit(self._started)
        carried = dict(self._started.trace_context)
        #: The jobs to write: as given, carrying the call's trace context when a subscriber
        #: gave one.
        self.jobs = (
            [dataclasses.replace(job, trace_context=carried) for job in jobs]
            if carried
            else list(jobs)
        )

    def outcomes(self, outcomes: Sequence[ScheduleOutcome | None]) -> None:
        """What became of each of :attr:`jobs` (``None``: the item failed)."""
        call_id = self._started.call_id
        for job, outcome in zip(self.jobs, outcomes, strict=False):
            run_at = job.next_run_at
            if isinstance(outcome, Scheduled | Replaced | Debounced):
                self._scheduled += 1
                job_id = outcome.id
                run_at = outcome.run_at if isinstance(outcome, Debounced) else run_at
            elif isinstance(outcome, Duplicate):
                self._duplicates += 1
                job_id = outcome.existing_id or job.id
            else:
                continue
            event = JobScheduled(
                call_id,
                job.job_name,
                job_id,
                run_at=run_at,
                priority=job.priority,
                duplicate=isinstance(outcome, Duplicate),
                unique_key=job.unique_identifier,
                outcome=_OUTCOMES[type(outcome)],
            )
            self._telemetry.emit(event)

    def __enter__(self) -> ObservedScheduling:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        started = self._started
        ended = SchedulingEnded(
            started.call_id,
            started.job_names,
            scheduled=self._scheduled,
            duplicates=self._duplicates,
            duration=time.monotonic() - self._t0,
            error=exc,
        )
        self._telemetry.emit(ended)


#: ``JobScheduled.outcome`` of each outcome type.
_OUTCOMES = {
    Scheduled: "scheduled",
    Duplicate: "duplicate",
    Replaced: "replaced",
    Debounced: "debounced",
}


def observe_scheduling(telemetry: Telemetry, jobs: Sequence[NewJob]) -> ObservedScheduling | None:
    """The observation of a call writing ``jobs``, or ``None`` when ``telemetry`` is idle."""
    if not telemetry.active:
        return None
    return ObservedScheduling(telemetry, jobs)
