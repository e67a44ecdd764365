"""What an operator's action does to one stored job, decided without I/O.

The clients (``cancel``, ``retry_now``, ``reschedule``, ``delete``) read or take a record through
the store's atomic primitives (``delete_job``, ``modify_job``) and ask this module what follows:
the :class:`JobChange` to apply, the history rows to write, the typed outcome to return.

The lifecycle, and who moves a record between states (``JobRecord.state``)::

    scheduled --(time passes)--> due --(a worker claims)--> running
    running --(success / discard)--> [deleted; history success|error]
    running --(failure, tries left)--> retrying --(claim)--> running
    running --(failure, no tries left)--> failed (maxTriesReached) --(TTL)--> [gone]
    running --(worker killed)--> stale --(another worker claims)--> running (history: stale)
    running --(shutdown)--> retrying (lock released; history: cancelled)
    running --(handler returns Snooze)--> scheduled/retrying (history: snoozed, try not counted)
    any but running --(operator cancel)--> [deleted; history: cancelled]
    running --(operator cancel)--> [deleted; the execution is fenced off and stopped]
    failed | retrying | scheduled | due | stale --(operator retry_now / reschedule)--> due/...
    any but running --(operator delete)--> [deleted; no history]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from dogs_core.domain.records import (
    DEFAULT_RETENTION,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
)
from dogs_core.errors import InvalidOptionError

__all__ = [
    "MAX_PAGE_SIZE",
    "AlreadyFinished",
    "CancelOutcome",
    "Cancelled",
    "DeleteOutcome",
    "Deleted",
    "JobChange",
    "JobPage",
    "NotFound",
    "RescheduleOutcome",
    "Rescheduled",
    "Running",
    "cancel_rows",
    "check_bulk_state",
    "check_state",
    "retry_now_change",
]

#: The largest page ``find_jobs`` returns; a larger ``limit`` is refused.
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class JobChange:
    """What ``modify_job`` sets on a record that is not running. ``None`` leaves a field alone.

    ``revive`` makes a failed (``maxTriesReached``) record pending again: its ``status``,
    ``max_tries_reached_at`` and ``expires_at`` are removed.
    """

    next_run_at: datetime | None = None
    priority: int | None = None
    tries: int | None = None
    revive: bool = False


# -- outcomes --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The record was removed (an event job) or its run skipped (a recurrent job).

    ``was_running``: an execution held it; it is fenced off and told to stop.
    ``execution_id``: the execution whose history row says ``cancelled``.
    """

    job_id: str
    job_name: str
    was_running: bool
    execution_id: str | None


@dataclass(frozen=True, slots=True)
class NotFound:
    """No record with that id (or unique key), and no history of it either."""

    job_id: str


@dataclass(frozen=True, slots=True)
class AlreadyFinished:
    """The job is over: its record is gone and its history says how it ended (``status``), or
    it is at its attempt limit (``status`` is ``"failed"``; ``retry_now`` revives it)."""

    job_id: str
    status: str


@dataclass(frozen=True, slots=True)
class Running:
    """The record is held by a live execution; it was not changed (``cancel`` stops it)."""

    record: JobRecord


@dataclass(frozen=True, slots=True)
class Rescheduled:
    """The record after the change."""

    record: JobRecord


@dataclass(frozen=True, slots=True)
class Deleted:
    """The record as it was when it was deleted."""

    record: JobRecord


CancelOutcome = Cancelled | NotFound | AlreadyFinished
RescheduleOutcome = Rescheduled | NotFound | Running
DeleteOutcome = Deleted | NotFound | Running


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of ``find_jobs``, in record-id order (creation order, UUIDv7). Pass
    ``next_after`` as ``after`` for the next page; ``None`` when this was the last one."""

    jobs: tuple[JobRecord, ...]
    next_after: str | None

    def __iter__(self) -> Iterator[JobRecord]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, index: int) -> JobRecord:
        return self.jobs[index]


# -- decisions -------------------------------------------------------------------------------


def retry_now_change(record: JobRecord, now: datetime) -> JobChange:
    """Due now. A failed record is revived with a fresh budget of tries (``tries = 0``); a
    pending or retrying one keeps its tries, so its attempt limit still counts them."""
    failed = record.type is JobType.EVENT and record.status is JobStatus.MAX_TRIES_REACHED
    return JobChange(next_run_at=now, tries=0 if failed else None, revive=failed)


def cancel_rows(
    record: JobRecord,
    *,
    now: datetime,
    new_execution_id: str,
    retention: timedelta | None = DEFAULT_RETENTION,
) -> list[HistoryRecord]:
    """The history rows of cancelling ``record`` (as it was when it was taken), first to last.

    A running record's row carries the id of the execution that held it, so that execution's
    own late row (first row wins) cannot replace it. A stale record also gets the ``stale`` row
    of its dead attempt, which no recovering worker will write now. A record that was not
    running gets a row of its own (``new_execution_id``) dated ``now``. ``retention`` is the
    job's ``save_executions_for`` (``None`` or zero: no rows).
    """
    if retention is None or retention <= timedelta(0):
        return []
    state = record.state(now)
    expires_at = now + retention
    rows: list[HistoryRecord] = []
    tries = record.tries or 0
    if state is JobState.STALE and record.lock_id is not None:
        rows.append(
            _row(record, record.lock_id, HistoryStatus.STALE, record.last_run_at, now, expires_at)
        )
    if state is JobState.RUNNING and record.lock_id is not None:
        started = record.last_run_at
        rows.append(_row(record, record.lock_id, HistoryStatus.CANCELLED, started, now, expires_at))
    else:
        row = _row(record, new_execution_id, HistoryStatus.CANCELLED, now, now, expires_at, tries)
        rows.append(replace(row, was_stale=False, owner=None, ran=False))
    return rows


def _row(
    record: JobRecord,
    execution_id: str,
    status: HistoryStatus,
    started_at: datetime | None,
    ended_at: datetime,
    expires_at: datetime,
    tries: int | None = None,
) -> HistoryRecord:
    started = started_at if started_at is not None and started_at <= ended_at else ended_at
    return HistoryRecord(
        execution_id=execution_id,
        job_id=record.id,
        job_name=record.job_name,
        type=record.type,
        priority=record.priority,
        tries=(record.tries or 0) if tries is None else tries,
        started_at=started,
        ended_at=ended_at,
        status=status,
        expires_at=expires_at,
        params=record.params,
        error_message="cancelled by an operator" if status is HistoryStatus.CANCELLED else None,
        unique_identifier=record.unique_identifier,
        was_stale=bool(record.claim_was_stale),
        owner=record.lock_owner,
        outcome=status.value if status is HistoryStatus.STALE else "cancelled",
    )


def check_state(value: object, *, field: str = "state") -> JobState | None:
    """A ``find_jobs`` state filter: ``None`` or a :class:`JobState` (or its name)."""
    if value is None:
        return None
    try:
        return JobState(str(value)) if isinstance(value, str | JobState) else _refuse(field, value)
    except ValueError:
        return _refuse(field, value)


def check_bulk_state(value: object) -> JobState:
    """The state of a bulk delete: any state but ``running`` (stop those with ``cancel``)."""
    state = check_state(value)
    if state is None or state is JobState.RUNNING:
        choices = ", ".join(s.value for s in JobState if s is not JobState.RUNNING)
        raise InvalidOptionError(
            "state", value, f"expected one of {choices} (running jobs are stopped with cancel)"
        )
    return state


def _refuse(field: str, value: object) -> JobState:
    choices = ", ".join(state.value for state in JobState)
    raise InvalidOptionError(field, value, f"expected one of {choices}")
