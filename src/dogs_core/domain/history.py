"""The history row of a finished execution (pure): what :class:`HistoryRecord` it leaves."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from dogs_core.domain.definitions import JobDefinition, to_bson_storable
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus
from dogs_core.errors import DogsError

__all__ = ["error_message", "history_record"]


def history_record(
    job: ClaimedJob,
    definition: JobDefinition,
    status: HistoryStatus,
    *,
    started_at: datetime | None,
    ended_at: datetime,
    result: Any = None,
    error: BaseException | None = None,
) -> HistoryRecord | None:
    """The row for one execution of ``job``, or ``None`` when the job keeps no history
    (``save_executions_for`` is zero). A result that cannot be stored as BSON is kept as its
    ``repr``; an execution that never started is dated at its end."""
    if definition.save_executions_for <= timedelta(0):
        return None
    started = started_at or ended_at
    try:
        stored_result = to_bson_storable(result, path="result", job=job.job_name)
    except DogsError:
        stored_result = repr(result)
    return HistoryRecord(
        execution_id=job.execution_id,
        job_id=job.job_id,
        job_name=job.job_name,
        type=job.type,
        priority=job.priority,
        tries=job.tries,
        started_at=started,
        ended_at=max(ended_at, started),
        status=status,
        expires_at=ended_at + definition.save_executions_for,
        params=job.params,
        result=stored_result,
        error_message=None if error is None else error_message(error),
        unique_identifier=job.unique_identifier,
    )


def error_message(error: BaseException) -> str:
    """What a history row keeps of an error: its message, or its type's name when empty."""
    text = str(error)
    return text if text else type(error).__name__
