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
    "check_actor",
    "check_audit_query",
    "check_job_ids",
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
