"""The schedules role, optional: recurring schedules managed at run time
(``client.schedules``, ``dogs schedules``). A store that has it lists
:attr:`~dogs_core.ports.common.Role.SCHEDULES` in its ``roles``.

A runtime schedule is a recurrent record whose ``jobName`` is the schedule's id and whose
``schedule`` field (:class:`~dogs_core.domain.runtime_schedules.ScheduleSpec`) says which event
job it runs and when (:mod:`dogs_core.domain.runtime_schedules`). Code-defined recurrent jobs
have recurrent records too, without that field: the reads return both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from dogs_core.domain.records import JobRecord, NewJob
from dogs_core.domain.runtime_schedules import ScheduleSpec

__all__ = ["AsyncScheduleStore"]


@runtime_checkable
class AsyncScheduleStore(Protocol):
    """Recurrent records managed at run time (optional)."""

    async def get_schedule_record(self, schedule_id: str) -> JobRecord | None:
        """The recurrent record named ``schedule_id`` (a runtime schedule's, or a code-defined
        recurrent job's), or ``None``."""
        ...

    async def find_schedule_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """At most ``limit`` (at least 1) recurrent records, by ``job_name`` ascending, only
        names greater than ``after``."""
        ...

    async def insert_schedule(self, job: NewJob) -> bool:
        """Insert the recurrent record of a new runtime schedule (``job.schedule`` set); ``False``
        and nothing written when a recurrent record of that name exists."""
        ...

    async def update_schedule(
        self,
        record_id: str,
        *,
        expected: datetime | None,
        spec: ScheduleSpec,
        params: Mapping[str, Any] | None,
        priority: int,
        next_run_at: datetime | None,
    ) -> JobRecord | None:
        """Compare-and-set on record ``record_id``: if it is a runtime schedule whose spec was
        last written at ``expected`` (its ``updated_at``), write ``spec``, ``params``,
        ``priority`` and, when given, ``next_run_at``; the record after the write, or ``None``
        when it did not match (changed or deleted meanwhile). The lock is left alone."""
        ...

    async def delete_schedule(self, schedule_id: str) -> JobRecord | None:
        """Delete the runtime schedule ``schedule_id`` (never a code-defined recurrent record)
        and return it as it was; ``None`` when there is none. Not fenced: a run under way loses
        its lock at its next fenced write, as with an operator's delete."""
        ...

    async def due_schedules(
        self, job_names: Sequence[str], *, until: datetime, limit: int
    ) -> list[tuple[str, datetime]]:
        """``(schedule id, next run)`` of at most ``limit`` runtime schedules of the event jobs
        ``job_names`` due at or before ``until``, soonest first: what a worker adds to its
        claims (a paused schedule is due at the year 9999, so it is not among them)."""
        ...
