"""The audit trail, decided without I/O: who did what to which jobs, when, and how many.

Every operator action of the clients (cancel, retry, reschedule, delete, bulk actions, pause,
resume, archive, a worker's quiet or stop) leaves one :class:`AuditEntry` in the store's audit
(:class:`~dogs_core.ports.AsyncAuditStore`, an optional role), written after the action with
what it came to. A bulk action's entry is written when it starts and updated after each chunk
(:class:`BulkProgress`): it is also the action's resumable state. The records a bulk delete
or cancel removed are listed, a chunk at a time, in entries of their own under it
(``parent_id``), so that a removed job's page can say who removed it and when.

Who: an :class:`Actor`, the name and where the action came from (``cli``: the OS user;
``dashboard``: the user its auth hook returned; ``api``: application code, the OS user of the
process unless it says otherwise with ``acting_as``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final

from dogs_core.domain import validation
from dogs_core.domain.archiving import ArchiveReport
from dogs_core.domain.registry import WorkerInfo
from dogs_core.domain.schedule_entries import RuntimeSchedule, ScheduleUpserted
from dogs_core.domain.steering import (
    AlreadyFinished,
    Cancelled,
    Deleted,
    NotFound,
    Rescheduled,
    Running,
)
from dogs_core.domain.workflow_records import WorkflowCancelled, WorkflowRetried
from dogs_core.errors import InvalidOptionError

__all__ = [
    "AUDIT_PAGE_SIZE",
    "AUDIT_RETENTION",
    "MAX_AUDIT_JOB_IDS",
    "STALLED_AFTER",
    "Actor",
    "AuditAction",
    "AuditEntry",
    "AuditOutcome",
    "AuditQuery",
    "BulkProgress",
    "JobFate",
    "Recorded",
    "audit_details",
    "audit_target",
    "check_actor",
    "check_audit_query",
    "check_job_ids",
    "job_fate",
    "outcome_words",
    "recorded_result",
]

#: How long an entry is kept (a TTL on ``expiresAt``).
AUDIT_RETENTION: Final = timedelta(days=90)
#: The most job ids one entry lists (a chunk of a bulk action lists at most this many).
MAX_AUDIT_JOB_IDS: Final = 5_000
#: The largest page of ``audit_log``.
AUDIT_PAGE_SIZE: Final = 500
#: A running bulk action whose entry was not updated for this long is taken as interrupted
#: (its process died): it may be resumed.
STALLED_AFTER: Final = timedelta(seconds=60)

_SOURCES: Final = ("cli", "dashboard", "api")


class AuditAction(enum.StrEnum):
    """The operator actions the clients record."""

    CANCEL = "cancel"
    RETRY = "retry"
    RESCHEDULE = "reschedule"
    DELETE = "delete"
    DELETE_JOBS = "delete_jobs"
    BULK_RETRY = "bulk_retry"
    BULK_CANCEL = "bulk_cancel"
    BULK_RESCHEDULE = "bulk_reschedule"
    BULK_DELETE = "bulk_delete"
    BULK_CHUNK = "bulk_chunk"
    """The records one chunk of a bulk delete or cancel removed (under its action's entry)."""
    PAUSE = "pause"
    RESUME = "resume"
    ARCHIVE = "archive"
    WORKER_QUIET = "worker_quiet"
    WORKER_STOP = "worker_stop"
    WORKFLOW_CANCEL = "workflow_cancel"
    WORKFLOW_RETRY = "workflow_retry"
    SCHEDULE_UPSERT = "schedule_upsert"
    SCHEDULE_PAUSE = "schedule_pause"
    SCHEDULE_RESUME = "schedule_resume"
    SCHEDULE_DELETE = "schedule_delete"


class AuditOutcome(enum.StrEnum):
    """How an action ended."""

    DONE = "done"
    """It changed what it says (``count`` of them)."""
    NOT_DONE = "not_done"
    """Nothing to do: not found, running, already finished, already paused..."""
    RUNNING = "running"
    """A bulk action under way (its progress is in the entry)."""
    STOPPED = "stopped"
    """A bulk action stopped before the end of its selection (``max_chunks``); resumable."""
    FAILED = "failed"
    """It raised (``error``); a bulk action is resumable."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: ``name`` (a user), ``source`` (``cli``, ``dashboard`` or ``api``), and the
    host the action came from."""

    name: str
    source: str = "api"
    host: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.source})"


def check_actor(value: object) -> Actor:
    if not isinstance(value, Actor):
        raise InvalidOptionError("actor", value, "must be a dogs Actor")
    validation.text("actor.name", value.name)
    if len(value.name) > 200:
        raise InvalidOptionError("actor.name", value.name, "must be at most 200 characters")
    validation.choice("actor.source", value.source, _SOURCES)
    if value.host is not None:
        validation.text("actor.host", value.host)
    return value


@dataclass(frozen=True, slots=True)
class BulkProgress:
    """A bulk action's state, kept in its entry: enough to show progress and to resume.

    ``selection`` and ``to`` are the plain documents of
    :meth:`~dogs_core.domain.bulk.BulkSelection.to_document` and
    :meth:`~dogs_core.domain.bulk.RescheduleTo.to_document`; ``cursor`` is the id of the last
    record examined (the walk goes on after it); ``runner`` names the process running it
    (a resume takes it over only once the entry is stalled, :data:`STALLED_AFTER`)."""

    selection: Mapping[str, Any]
    matched: int
    chunk_size: int
    to: Mapping[str, Any] | None = None
    examined: int = 0
    changed: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    chunks: int = 0
    cursor: str | None = None
    runner: str | None = None

    @property
    def done_fraction(self) -> float | None:
        """How far the walk is, by records examined against the matched count (capped at 1)."""
        if self.matched <= 0:
            return None
        return min(1.0, (self.changed + sum(self.skipped.values())) / self.matched)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action.

    ``target``: what it was applied to, in words (a job id, a job name, a selection, a
    worker). ``count``: how many records (or names, workers) it changed. ``job_ids``: the
    jobs it changed, when it names them (a single-job action, a chunk of a bulk delete or
    cancel; at most :data:`MAX_AUDIT_JOB_IDS`). ``details``: the action's arguments and
    outcome in plain values (a new run time, the outcome's words). ``updated_at``: when it was
    last written (a running bulk action's heartbeat)."""

    id: str
    at: datetime
    actor: Actor
    action: str
    target: str
    outcome: AuditOutcome
    count: int = 0
    job_ids: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    bulk: BulkProgress | None = None
    error: str | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None

    def with_progress(
        self, bulk: BulkProgress, *, outcome: AuditOutcome, now: datetime, error: str | None = None
    ) -> AuditEntry:
        """This entry after a chunk: its progress, outcome and count."""
        return replace(
            self, bulk=bulk, outcome=outcome, count=bulk.changed, updated_at=now, error=error
        )

    def stalled(self, now: datetime) -> bool:
        """A running bulk action whose process stopped updating it."""
        last = self.updated_at or self.at
        return self.outcome is AuditOutcome.RUNNING and now - last >= STALLED_AFTER

    @property
    def resumable(self) -> bool:
        return self.bulk is not None and self.outcome in (
            AuditOutcome.RUNNING,
            AuditOutcome.STOPPED,
            AuditOutcome.FAILED,
        )


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """The filters of an audit read: newest first, before ``before`` (an entry id, the cursor
    of the previous page), of one ``action``, ``actor`` name or job (``job_id``: the entries
    that list it, chunks included); ``top_level`` leaves the chunks out."""

    limit: int = 50
    before: str | None = None
    action: str | None = None
    actor: str | None = None
    job_id: str | None = None
    top_level: bool = True


def check_audit_query(
    *,
    limit: int = 50,
    before: str | None = None,
    action: str | None = None,
    actor: str | None = None,
    job_id: str | None = None,
    top_level: bool = True,
) -> AuditQuery:
    size = validation.integer("limit", limit, minimum=1)
    if size > AUDIT_PAGE_SIZE:
        raise InvalidOptionError("limit", limit, f"must be at most {AUDIT_PAGE_SIZE}")
    if action is not None:
        validation.choice("action", action, tuple(one.value for one in AuditAction))
    return AuditQuery(
        limit=size,
        before=validation.optional_text("before", before),
        action=action,
        actor=validation.optional_text("actor", actor),
        job_id=validation.optional_text("job_id", job_id),
        top_level=validation.boolean("top_level", top_level),
    )


def check_job_ids(job_ids: Sequence[str]) -> tuple[str, ...]:
    ids = tuple(job_ids)
    if len(ids) > MAX_AUDIT_JOB_IDS:
        raise InvalidOptionError(
            "job_ids", f"{len(ids)} ids", f"an entry lists at most {MAX_AUDIT_JOB_IDS}"
        )
    for one in ids:
        if not isinstance(one, str) or not one:
            raise InvalidOptionError("job_ids", one, "must be job ids (strings)")
    return ids


# -- what an action came to -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recorded:
    """What an entry says of an action's result: how many, the outcome, the jobs, details."""

    count: int
    outcome: AuditOutcome
    job_ids: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None
    """What the action turned out to apply to, when the result says it better than the
    arguments (a worker named by a prefix of its id)."""


def recorded_result(result: object, job_id: str | None = None) -> Recorded:
    """The audit view of what a client's operator method returned (a steering outcome, a
    count, whether a pause changed anything, an archive report, a worker's document)."""
    ids = () if job_id is None else (job_id,)
    match result:
        case Cancelled(job_id=cancelled, job_name=name, was_running=running):
            details = {"jobName": name, "wasRunning": running, "result": "cancelled"}
            return Recorded(1, AuditOutcome.DONE, (cancelled,), details)
        case Rescheduled(record=record):
            details = {"jobName": record.job_name, "nextRunAt": record.next_run_at}
            return Recorded(1, AuditOutcome.DONE, (record.id,), details)
        case Deleted(record=record):
            details = {"jobName": record.job_name, "result": "deleted"}
            return Recorded(1, AuditOutcome.DONE, (record.id,), details)
        case NotFound():
            return Recorded(0, AuditOutcome.NOT_DONE, ids, {"result": "not found"})
        case AlreadyFinished(status=status):
            return Recorded(0, AuditOutcome.NOT_DONE, ids, {"result": f"already {status}"})
        case Running(record=record):
            details = {"jobName": record.job_name, "result": "running: not changed"}
            return Recorded(0, AuditOutcome.NOT_DONE, ids, details)
        case WorkerInfo(instance_id=instance, host=host, pid=pid):
            details = {"worker": f"{host}:{pid}"}
            return Recorded(1, AuditOutcome.DONE, (), details, target=instance)
        case WorkflowCancelled(cancelled=cancelled, state=state, stopped=stopped):
            details = {"state": str(state), "stopped": stopped}
            return Recorded(int(cancelled), _done_if(cancelled), (), details)
        case WorkflowRetried(step_ids=steps, released=released):
            return Recorded(len(steps), _done_if(bool(steps)), (), {"released": released})
        case ScheduleUpserted(change=change, schedule=schedule):
            changed = change != "unchanged"
            details = {"change": change, "job": schedule.job, "rule": schedule.rule}
            return Recorded(int(changed), _done_if(changed), (), details)
        case RuntimeSchedule(paused=paused, job=job):
            return Recorded(1, AuditOutcome.DONE, (), {"job": job, "paused": paused})
        case ArchiveReport():
            moved = {kind.value: count for kind, count in result.moved.items()}
            outcome = AuditOutcome.DONE if result.total else AuditOutcome.NOT_DONE
            return Recorded(result.total, outcome, (), {"moved": moved})
        case bool():
            return Recorded(int(result), AuditOutcome.DONE if result else AuditOutcome.NOT_DONE)
        case int():
            return Recorded(result, AuditOutcome.DONE if result else AuditOutcome.NOT_DONE)
        case None:
            return Recorded(0, AuditOutcome.NOT_DONE, ids, {"result": "not found"})
    return Recorded(1, AuditOutcome.DONE, ids)


def _done_if(changed: bool) -> AuditOutcome:
    return AuditOutcome.DONE if changed else AuditOutcome.NOT_DONE


def audit_target(action: AuditAction, arguments: Mapping[str, Any]) -> str:
    """What an action was applied to, in words, from the arguments of its client call."""
    name = _name(arguments.get("job"))
    if action in (AuditAction.PAUSE, AuditAction.RESUME):
        return name or "every job"
    if action is AuditAction.DELETE_JOBS:
        return f"{arguments.get('state')} jobs" + (f" of {name}" if name else "")
    if action is AuditAction.ARCHIVE:
        return f"rows older than {arguments.get('older_than')}"
    for key in ("job_id", "instance_id", "workflow_id", "schedule_id"):
        if arguments.get(key) is not None:
            return str(arguments[key])
    unique_key = arguments.get("unique_key")
    if unique_key is None:
        return "?"
    return f"unique key {unique_key}" + (f" of {name}" if name else "")


def audit_details(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a client call as plain values (``None`` left out)."""
    plain: dict[str, Any] = {}
    for key, value in arguments.items():
        if value is None or (callable(value) and not isinstance(value, type)):
            continue
        if isinstance(value, str | int | float | bool | datetime):
            plain[key] = value
        elif hasattr(value, "name") and isinstance(value.name, str):
            plain[key] = value.name  # a job definition
        else:
            plain[key] = str(value)
    return plain


def _name(job: object) -> str | None:
    if job is None:
        return None
    if isinstance(job, str):
        return job
    found = getattr(job, "name", None)
    return found if isinstance(found, str) else str(job)


def outcome_words(entry: AuditEntry) -> str:
    """One line of what an entry says happened (the CLI and the dashboard print it)."""
    if entry.outcome is AuditOutcome.RUNNING and entry.bulk is not None:
        return f"running: {entry.bulk.changed} changed so far"
    if entry.outcome is AuditOutcome.FAILED and entry.error:
        return f"failed: {entry.error}"
    result = entry.details.get("result")
    return str(result) if result else entry.outcome.value.replace("_", " ")


@dataclass(frozen=True, slots=True)
class JobFate:
    """How a job whose record is gone left: ``what`` (``deleted``, ``cancelled``,
    ``archived``), by whom (``None`` for the archive, which names no one per job), when, and
    the audit entry that says so."""

    what: str
    at: datetime
    actor: Actor | None = None
    audit_id: str | None = None
    bulk: bool = False

    def __str__(self) -> str:
        text = f"{self.what}{' in bulk' if self.bulk else ''}"
        if self.actor is not None:
            text += f" by {self.actor}"
        return text + f" at {self.at.strftime('%Y-%m-%d %H:%M:%S UTC')}"


_REMOVALS: Final = {
    AuditAction.DELETE.value: "deleted",
    AuditAction.CANCEL.value: "cancelled",
}


def job_fate(entries: Sequence[AuditEntry], archived_at: datetime | None) -> JobFate | None:
    """What removed a job, from the audit entries that name it (newest first) and when it was
    archived: the newest removal that happened, else the archive."""
    for entry in entries:
        if entry.outcome is not AuditOutcome.DONE:
            continue
        if entry.action in _REMOVALS:
            return JobFate(_REMOVALS[entry.action], entry.at, entry.actor, entry.id)
        if entry.action == AuditAction.BULK_CHUNK.value:
            what = "cancelled" if entry.details.get("action") == "cancel" else "deleted"
            return JobFate(what, entry.at, entry.actor, entry.parent_id or entry.id, bulk=True)
    if archived_at is not None:
        return JobFate("archived", archived_at)
    return None
