"""The scheduling role of the in-memory store: inserts under the state's lock, one global
namespace of unique identifiers (Dogs' sparse unique index) and one record per recurrent job
name (its partial unique index). See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    ItemError,
    JobRecord,
    JobType,
    NewJob,
    Scheduled,
    ScheduleOutcome,
    to_millis,
)
from dogs_core.errors import SessionNotSupportedError
from dogs_core.ids import new_record_id
from dogs_testing._memory_state import MemoryState

__all__ = ["MemoryScheduling"]


class MemoryScheduling(MemoryState):
    """Inserting records (no transactions: a ``session`` is refused)."""

    def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        """See the port; a ``session`` is refused (:func:`_refuse_session`)."""
        _refuse_session(session)
        with self._state():
            return self._insert(job)

    def insert_jobs(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        _refuse_session(session)
        with self._state():
            outcomes: list[ScheduleOutcome | None] = []
            errors: list[ItemError] = []
            for index, job in enumerate(jobs):
                try:
                    outcomes.append(self._insert(job))
                except Exception as error:  # an item's failure never stops the others
                    errors.append(ItemError(index=index, error=error, job=job))
                    outcomes.append(None)
            return BulkScheduleResult(
                scheduled_count=sum(isinstance(o, Scheduled) for o in outcomes),
                skipped_count=sum(isinstance(o, Duplicate) for o in outcomes),
                errors=tuple(errors),
                outcomes=tuple(outcomes),
            )

    def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        with self._state():
            record_id = self._recurrent.get(job_name)
            if record_id is None:
                record = JobRecord(
                    id=new_record_id(),
                    job_name=job_name,
                    type=JobType.RECURRENT,
                    priority=priority,
                    next_run_at=to_millis(now),
                    partition=partition,
                )
                self._put(None, record)
                self._feeds.offer_record(record)
            else:
                old = self._records[record_id]
                self._put(old, dataclasses.replace(old, priority=priority, status=None))


def _refuse_session(session: object | None) -> None:
    """The in-memory store has no transactions to join: a ``session`` is refused before
    anything is written (a job that appeared whatever became of the caller's transaction would
    be worse than an error)."""
    if session is not None:
        raise SessionNotSupportedError(
            f"the in-memory store cannot join a database session ({type(session).__name__}): "
            "it has no transactions, so nothing was written; schedule without session=, or "
            "use a MongoDB store"
        )
