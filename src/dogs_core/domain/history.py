"""The history row of a finished execution (pure): what :class:`HistoryRecord` it leaves."""

from __future__ import annotations

import dataclasses
import traceback
from datetime import datetime, timedelta
from typing import Any

from dogs_core.domain.definitions import JobDefinition, to_bson_storable
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus
from dogs_core.errors import DogsError

__all__ = [
    "OUTCOME_OF_STATUS",
    "TRACEBACK_LIMIT",
    "error_message",
    "error_traceback",
    "error_type",
    "history_record",
    "killed_attempt_record",
    "superseded_row",
    "workflow_id_of",
]

#: How much of a formatted traceback a history row keeps: its last 8 KiB (the innermost
#: frames and the message), so a deep stack cannot make a row large.
TRACEBACK_LIMIT = 8 * 1024

#: The outcome a row of each status records (:attr:`HistoryRecord.outcome`), the words of the
#: telemetry events and of ``dogs_executions_total``; an error row is ``failed`` unless a retry
#: follows it (``retried``).
OUTCOME_OF_STATUS: dict[HistoryStatus, str] = {
    HistoryStatus.SUCCESS: "succeeded",
    HistoryStatus.ERROR: "failed",
    HistoryStatus.STALE: "stale",
    HistoryStatus.CANCELLED: "cancelled",
    HistoryStatus.SNOOZED: "snoozed",
    HistoryStatus.EXPIRED: "expired",
    HistoryStatus.SUPERSEDED: "superseded",
}


def history_record(
    job: ClaimedJob,
    definition: JobDefinition,
    status: HistoryStatus,
    *,
    started_at: datetime | None,
    ended_at: datetime,
    result: Any = None,
    error: BaseException | None = None,
    progress: Progress | None = None,
    retried: bool = False,
) -> HistoryRecord | None:
    """The row for one execution of ``job``, or ``None`` when the job keeps no history
    (``save_executions_for`` is zero), with the execution's last reported ``progress``;
    ``retried`` when an error row is followed by a retry (its outcome is then ``retried``,
    else ``failed``). A result that cannot be stored as BSON, or that holds an int a Node
    worker cannot read (beyond +/-(2**53 - 1), unless a ``bson.Int64``), is kept as its
    ``repr``, so the history write cannot fail on it; an execution that never started is
    dated at its end."""
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
        was_stale=job.was_stale,
        error_type=None if error is None else error_type(error),
        error_traceback=None if error is None else error_traceback(error),
        owner=job.owner,
        progress=progress,
        workflow_id=workflow_id_of(job),
        outcome="retried"
        if retried and status is HistoryStatus.ERROR
        else OUTCOME_OF_STATUS[status],
    )


def workflow_id_of(job: ClaimedJob) -> str | None:
    """The workflow of a step's claimed record (its additive ``workflow.id``), else ``None``."""
    marker = job.workflow
    if not marker:
        return None
    workflow_id = marker.get("id")
    return workflow_id if isinstance(workflow_id, str) else None


def killed_attempt_record(
    job: ClaimedJob, definition: JobDefinition, *, now: datetime
) -> HistoryRecord | None:
    """The ``stale`` row of the attempt whose expired lock ``job``'s claim took over (its
    worker died or hung and wrote none), or ``None`` when there is none to write. It ends when
    its lock ran out; a row its own worker did write wins (first row wins)."""
    attempt = job.previous_attempt
    if attempt is None or definition.save_executions_for <= timedelta(0):
        return None
    ended = min(attempt.locked_until, now)
    started = attempt.started_at if attempt.started_at is not None else ended
    return HistoryRecord(
        execution_id=attempt.execution_id,
        job_id=job.job_id,
        job_name=job.job_name,
        type=job.type,
        priority=job.priority,
        tries=attempt.tries,
        started_at=min(started, ended),
        ended_at=ended,
        status=HistoryStatus.STALE,
        expires_at=now + definition.save_executions_for,
        params=job.params,
        error_message="the worker holding the lock stopped renewing it (killed or hung)",
        unique_identifier=job.unique_identifier,
        owner=attempt.owner,
        workflow_id=workflow_id_of(job),
        outcome=OUTCOME_OF_STATUS[HistoryStatus.STALE],
        superseded_by=job.execution_id,
    )


def superseded_row(row: HistoryRecord) -> HistoryRecord:
    """``row`` (a ``success`` whose settlement was refused: the lock had moved on) as the
    ``superseded`` row that replaces the claimer's ``stale`` row for its execution: its times,
    result and progress kept, its ``superseded_by`` the store's (the claimer's)."""
    return dataclasses.replace(
        row,
        status=HistoryStatus.SUPERSEDED,
        outcome=OUTCOME_OF_STATUS[HistoryStatus.SUPERSEDED],
        superseded_by=None,
    )


def error_message(error: BaseException) -> str:
    """What a history row keeps of an error: its message, or its type's name when empty."""
    text = str(error)
    return text if text else type(error).__name__


def error_type(error: BaseException) -> str:
    """The qualified name of an error's class (``builtins.`` left out)."""
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def error_traceback(error: BaseException) -> str | None:
    """The formatted traceback of ``error`` (with its causes), its last
    :data:`TRACEBACK_LIMIT` characters; ``None`` for an error that was never raised."""
    if error.__traceback__ is None and error.__cause__ is None and error.__context__ is None:
        return None
    text = "".join(traceback.format_exception(error))
    return text if len(text) <= TRACEBACK_LIMIT else "..." + text[-(TRACEBACK_LIMIT - 3) :]
