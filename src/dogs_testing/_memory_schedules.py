"""The schedules role of the in-memory store (:class:`~dogs_core.ports.ScheduleStore`): runtime
schedules are recurrent records with a ``schedule`` (one per name, as MongoDB's partial unique
index keeps them); each step atomic under the state's lock. See :mod:`dogs_testing.memory`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dogs_core.domain import validation
from dogs_core.domain.records import JobRecord, NewJob, to_millis
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_testing._memory_state import MemoryState, _copy_params, _out, _stored_spec

__all__ = ["MemorySchedules"]


class MemorySchedules(MemoryState):
    """Runtime schedules' recurrent records."""

    def get_schedule_record(self, schedule_id: str) -> JobRecord | None:
        with self._state():
            record_id = self._recurrent.get(schedule_id)
            return None if record_id is None else _out(self._records[record_id])

    def find_schedule_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[JobRecord]:
        size = validation.integer("limit", limit, minimum=1)
        with self._state():
            names = sorted(name for name in self._recurrent if after is None or name > after)
            return [_out(self._records[self._recurrent[name]]) for name in names[:size]]

    def insert_schedule(self, job: NewJob) -> bool:
        with self._state():
            if job.id in self._records:
                return True  # a retried insert that had landed
            if job.job_name in self._recurrent:
                return False
            self._insert(job)
            return True

    def update_schedule(
        self,
        record_id: str,
        *,
        expected: datetime | None,
        spec: ScheduleSpec,
        params: Mapping[str, Any] | None,
        priority: int,
        next_run_at: datetime | None,
    ) -> JobRecord | None:
        with self._state():
            record = self._records.get(record_id)
            if record is None or record.schedule is None:
                return None
            stored = record.schedule.updated_at
            if (None if expected is None else to_millis(expected)) != stored:
                return None
            changed = dataclasses.replace(
                record,
                schedule=_stored_spec(spec),
                params=_copy_params(dict(params)) if params is not None else None,
                priority=priority,
                next_run_at=record.next_run_at if next_run_at is None else to_millis(next_run_at),
            )
            self._put(record, changed)
            self._feeds.offer_record(changed)
            return _out(changed)

    def delete_schedule(self, schedule_id: str) -> JobRecord | None:
        with self._state():
            record_id = self._recurrent.get(schedule_id)
            record = None if record_id is None else self._records[record_id]
            if record is None or record.schedule is None:
                return None
            self._put(record, None)
            return _out(record)

    def due_schedules(
        self, job_names: Sequence[str], *, until: datetime, limit: int
    ) -> list[tuple[str, datetime]]:
        size = validation.integer("limit", limit, minimum=1)
        wanted, horizon = set(job_names), to_millis(until)
        with self._state():
            due = [
                (record.next_run_at, record.job_name)
                for record in (self._records[i] for i in self._recurrent.values())
                if record.schedule is not None
                and record.schedule.job in wanted
                and record.next_run_at <= horizon
            ]
        return [(name, at) for at, name in sorted(due)[:size]]
