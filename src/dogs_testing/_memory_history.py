"""The history role of the in-memory store: rows keyed by execution id, the first row written
for an execution winning whole (MongoDB's ``$setOnInsert`` upsert), read back newest first.
See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

from dogs_core.domain import validation
from dogs_core.domain.feeds import check_history_filter, check_history_status
from dogs_core.domain.records import HistoryRecord, HistoryStatus
from dogs_testing._memory_state import MemoryState, _copy_params, _history_row

__all__ = ["MemoryHistory"]


class MemoryHistory(MemoryState):
    """The rows executions leave."""

    def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        """Each record inserted in order, under one lock, unless its execution has a row: the
        first row wins whole. Every row is copied before the first is stored: a record that
        cannot be copied writes nothing."""
        rows = [_history_row(record) for record in records]
        if not rows:
            return
        with self._state():
            for row in rows:
                self._insert_history(row)

    def supersede_history(self, row: HistoryRecord) -> bool:
        """The execution's ``stale`` row replaced in place (its ``superseded_by`` kept)."""
        new = _history_row(row)
        with self._state():
            old = self._history.get(new.execution_id)
            if old is None or old.status is not HistoryStatus.STALE:
                return False
            self._history[new.execution_id] = dataclasses.replace(
                new, superseded_by=old.superseded_by
            )
            return True

    def read_history(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        check_history_filter(job_name, job_id)
        wanted = check_history_status(status)
        validation.integer("limit", limit, minimum=0)
        validation.integer("skip", skip, minimum=0)
        with self._state():
            if job_id is not None:
                keys = self._history_by_job.get(job_id, {})
            else:
                keys = self._history_by_name.get(job_name or "", {})
            rows = [self._history[key] for key in keys]
            if job_id is not None and job_name is not None:
                rows = [row for row in rows if row.job_name == job_name]
            if wanted is not None:
                rows = [row for row in rows if row.status is wanted]
            rows.sort(
                key=lambda row: (row.started_at, row.ended_at, self._history_seq[row.execution_id]),
                reverse=True,
            )
            return [
                dataclasses.replace(
                    row, params=_copy_params(row.params), result=copy.deepcopy(row.result)
                )
                for row in rows[skip : skip + limit]
            ]
