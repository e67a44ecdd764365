"""Bulk actions by filter, decided without I/O: which records a selection holds, what each
action does to each record, and what a run reports.

A bulk action (retry, cancel, reschedule, delete) walks the records of a
:class:`BulkSelection` in ``id`` order (creation order: ids are UUIDv7), a chunk at a time.
For each record of a chunk :func:`bulk_decision` says what follows, as the single-job actions
of :mod:`dogs_core.domain.steering` would: a :class:`Modify` (the same
:class:`~dogs_core.domain.steering.JobChange` as ``retry_now`` or ``reschedule``), a
:class:`Remove` (``delete``, ``cancel``) or a :class:`Skip` with its reason. The store applies
a chunk's changes each fenced on the record being unchanged since the chunk was read
(:class:`~dogs_core.ports.AsyncBulkStore`), so a record a worker claimed, finished or retried
meanwhile is left alone and counted as changed meanwhile.

The selection is extensible: a filter is a field of :class:`BulkSelection` with its check in
:func:`bulk_selection`, its rule in :meth:`BulkSelection.matches` (the in-memory store) and its
translation in ``dogs_mongo.queries.bulk``. Filters: the job name, the state at the moment of
the read, the type of the error of the record's newest execution, and a time range on one of
the record's times (:class:`TimeField`).

A bulk action touches only what it names (issue 40):

- **No filter means nothing** unless the caller says ``all`` (``BulkSelection(all=True)``,
  ``dogs bulk ... --all``, the dashboard's "every job" box): :func:`check_selection` raises
  :class:`~dogs_core.errors.EmptySelectionError` and nothing is written.
- **Kinds** (:class:`RecordKind`): a plain job, a runtime schedule's record
  (``client.schedules``: its ``schedule`` field is set) and a workflow step's record (its
  ``workflow`` field is set). A selection takes plain jobs only, unless it names the other
  kinds (``kinds``, ``--include-schedules``, ``--include-steps``), or its ``job_name`` is a
  schedule's id: naming a schedule exactly asks for it (a schedule's id is its record's job
  name, unique among recurrent records). A step is never taken by its job name alone: steps
  share their event job's name with plain jobs, so only ``--include-steps`` asks for them.
  A dry run counts each kind apart (:attr:`BulkReport.counts`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from dogs_core.domain import validation
from dogs_core.domain.audit import (
    AuditAction,
    AuditEntry,
    AuditOutcome,
)
from dogs_core.domain.records import (
    JobRecord,
    JobState,
    JobType,
    to_millis,
)
from dogs_core.domain.steering import JobChange, retry_now_change
from dogs_core.domain.tags import validate_tag_filter
from dogs_core.domain.validation import DurationLike
from dogs_core.errors import EmptySelectionError, InvalidOptionError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MAX_CHUNK_SIZE",
    "BulkAction",
    "BulkChunk",
    "BulkDecision",
    "BulkReport",
    "BulkSelection",
    "Modify",
    "RecordKind",
    "Remove",
    "RescheduleTo",
    "Skip",
    "SkipReason",
    "TimeField",
    "bulk_decision",
    "bulk_selection",
    "check_chunk_size",
    "counts_in_words",
    "created_id_bound",
    "error_type_matches",
    "record_kind",
]

#: Records read and changed per chunk when none is given: one read and one bulk write each.
DEFAULT_CHUNK_SIZE: Final = 500
#: The largest chunk accepted (a chunk is read whole into memory).
MAX_CHUNK_SIZE: Final = 5_000


class BulkAction(enum.StrEnum):
    """What a bulk action does to each selected record (as the single-job action would)."""

    RETRY = "retry"
    """Due now; a failed record gets a fresh budget of tries (``retry_now``)."""
    CANCEL = "cancel"
    """An event record is removed with a ``cancelled`` history row; a running one's
    execution is fenced off and stops (``cancel``)."""
    RESCHEDULE = "reschedule"
    """Another run time and/or priority (``reschedule``); a failed record is revived."""
    DELETE = "delete"
    """Removed without a history row (``delete``)."""


class TimeField(enum.StrEnum):
    """The record time a selection's ``since``/``until`` bound."""

    CREATED = "created"
    """When it was scheduled: read from its id (a UUIDv7), so the range walks ``_id``."""
    NEXT_RUN = "next_run"
    """``next_run_at``."""
    LAST_RUN = "last_run"
    """``last_run_at``: when its last attempt started (none before its first)."""
    FAILED = "failed"
    """``max_tries_reached_at``: when it reached its attempt limit (failed records only)."""


class RecordKind(enum.StrEnum):
    """What a job record is, for a bulk selection: only plain jobs are taken unless asked."""

    JOB = "job"
    """A job scheduled by code or a call (event or code-defined recurrent)."""
    SCHEDULE = "schedule"
    """The recurrent record of a runtime schedule (``client.schedules``; its ``schedule``
    field is set). Deleting it removes the schedule."""
    STEP = "step"
    """A workflow step's record (its ``workflow`` field is set). Deleting it fails its
    workflow ("its record is gone")."""

    @property
    def words(self) -> str:
        return {
            RecordKind.JOB: "jobs",
            RecordKind.SCHEDULE: "run-time schedules",
            RecordKind.STEP: "workflow steps",
        }[self]


#: What a selection takes when it names no kind.
DEFAULT_KINDS: Final = frozenset({RecordKind.JOB})


def counts_in_words(counts: Mapping[RecordKind, int]) -> str:
    """``25 jobs, 1 run-time schedule``: the kinds counted, each apart (those with none left
    out; ``0 jobs`` when none has any)."""
    parts = []
    for kind in RecordKind:
        count = counts.get(kind, 0)
        if count:
            parts.append(f"{count} {kind.words if count != 1 else kind.words[:-1]}")
    return ", ".join(parts) or "0 jobs"


def record_kind(record: JobRecord) -> RecordKind:
    """The :class:`RecordKind` of ``record``."""
    if record.workflow is not None:
        return RecordKind.STEP
    if record.schedule is not None:
        return RecordKind.SCHEDULE
    return RecordKind.JOB


class SkipReason(enum.StrEnum):
    """Why a selected record was left alone."""

    RUNNING = "running"
    """Its lock is live: only ``cancel`` stops a running job."""
    FAILED = "failed"
    """``cancel`` of a failed record: it is over (retry or delete it)."""
    RECURRENT = "recurrent"
    """``cancel`` of a recurrent record: skipping its run needs its schedule, so it is
    cancelled one at a time (``dogs jobs cancel ID --registry ...``)."""
    CHANGED = "changed meanwhile"
    """A worker or another operator changed the record between the chunk's read and its
    write (claimed, finished, retried): the write was fenced off."""


# -- the selection ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BulkSelection:
    """Which records a bulk action takes: every given filter holds (``None``: any).

    ``error_type`` matches the error type of the record's newest history row
    (:func:`error_type_matches`: ``ConnectionError``, ``myapp.errors.QuotaExceeded`` or
    ``QuotaExceeded``). Rows written by Node Dogs workers have no error type. ``since``
    (inclusive) and ``until`` (exclusive) bound the record's ``time_field``. ``tags``: the
    record carries every one of them (``schedule(tags=...)``).

    ``kinds``: the :class:`RecordKind` s taken (``None``: plain jobs, and a runtime schedule
    whose id is ``job_name``). ``all``: the caller means every record when no filter is given
    (a bulk action refuses an unfiltered selection without it, :func:`check_selection`).
    """

    job_name: str | None = None
    state: JobState | None = None
    error_type: str | None = None
    time_field: TimeField = TimeField.CREATED
    since: datetime | None = None
    until: datetime | None = None
    tags: tuple[str, ...] = ()
    kinds: frozenset[RecordKind] | None = None
    all: bool = False

    @property
    def has_time_range(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def unfiltered(self) -> bool:
        """No filter narrows it: it holds every record of its kinds."""
        return (
            self.job_name is None
            and self.state is None
            and self.error_type is None
            and not self.has_time_range
            and not self.tags
        )

    @property
    def taken_kinds(self) -> frozenset[RecordKind]:
        """The kinds it takes: ``kinds``, or plain jobs plus, named by ``job_name``, a
        runtime schedule."""
        if self.kinds is not None:
            return self.kinds
        if self.job_name is not None:
            return DEFAULT_KINDS | {RecordKind.SCHEDULE}
        return DEFAULT_KINDS

    def of_kind(self, kind: RecordKind) -> BulkSelection:
        """The same filters, taking ``kind`` alone (a dry run counts each kind apart)."""
        return dataclasses.replace(self, kinds=frozenset({kind}))

    def matches(self, record: JobRecord, now: datetime, last_error_type: str | None) -> bool:
        """Whether ``record`` is selected at ``now``, its newest row's error type being
        ``last_error_type`` (the rule both stores follow)."""
        if record_kind(record) not in self.taken_kinds:
            return False
        if self.job_name is not None and record.job_name != self.job_name:
            return False
        if self.state is not None and record.state(now) is not self.state:
            return False
        if self.error_type is not None and not error_type_matches(last_error_type, self.error_type):
            return False
        if self.tags and not set(self.tags) <= set(record.tags):
            return False
        return self._in_range(record)

    def _in_range(self, record: JobRecord) -> bool:
        if not self.has_time_range:
            return True
        if self.time_field is TimeField.CREATED:
            low = None if self.since is None else created_id_bound(self.since)
            high = None if self.until is None else created_id_bound(self.until)
            return (low is None or record.id >= low) and (high is None or record.id < high)
        moment = _record_time(record, self.time_field)
        if moment is None:
            return False
        return (self.since is None or moment >= self.since) and (
            self.until is None or moment < self.until
        )

    def describe(self) -> str:
        """The selection in words, for logs, confirmations and the audit trail."""
        parts = [f"{self.state.value} " if self.state is not None else "", self._kind_words()]
        if self.job_name is not None:
            parts.append(f" of {self.job_name}")
        if self.tags:
            parts.append(f" tagged {', '.join(self.tags)}")
        if self.error_type is not None:
            parts.append(f" whose last error is {self.error_type}")
        if self.has_time_range:
            label = {
                TimeField.CREATED: "created",
                TimeField.NEXT_RUN: "due",
                TimeField.LAST_RUN: "last run",
                TimeField.FAILED: "failed",
            }[self.time_field]
            if self.since is not None and self.until is not None:
                parts.append(f", {label} from {_iso(self.since)} to {_iso(self.until)}")
            elif self.since is not None:
                parts.append(f", {label} from {_iso(self.since)}")
            elif self.until is not None:
                parts.append(f", {label} before {_iso(self.until)}")
        return "".join(parts).strip()

    def _kind_words(self) -> str:
        kinds = self.taken_kinds
        if kinds == DEFAULT_KINDS or (self.kinds is None and self.job_name is not None):
            return "jobs"
        words = [kind.words for kind in RecordKind if kind in kinds]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]

    def to_document(self) -> dict[str, Any]:
        """The selection as plain values (kept with a bulk action's audit entry, so that an
        interrupted run can be resumed)."""
        return {
            "jobName": self.job_name,
            "state": None if self.state is None else self.state.value,
            "errorType": self.error_type,
            "timeField": self.time_field.value,
            "since": self.since,
            "until": self.until,
            **({"tags": list(self.tags)} if self.tags else {}),
            **({"kinds": sorted(kind.value for kind in self.kinds)} if self.kinds else {}),
            "all": self.all,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> BulkSelection:
        """The inverse of :meth:`to_document` (checked as :func:`bulk_selection` checks). An
        entry written before ``all`` existed, without a filter, meant every record."""
        selection = bulk_selection(
            job_name=document.get("jobName"),
            state=document.get("state"),
            error_type=document.get("errorType"),
            time_field=document.get("timeField") or TimeField.CREATED.value,
            since=document.get("since"),
            until=document.get("until"),
            tags=document.get("tags"),
            kinds=document.get("kinds"),
        )
        if document.get("all", "all" not in document and selection.unfiltered):
            selection = dataclasses.replace(selection, all=True)
        return selection


def bulk_selection(
    *,
    job_name: str | None = None,
    state: JobState | str | None = None,
    error_type: str | None = None,
    time_field: TimeField | str = TimeField.CREATED,
    since: datetime | None = None,
    until: datetime | None = None,
    tags: str | Iterable[str] | None = None,
    kinds: Iterable[RecordKind | str] | None = None,
    include_schedules: bool = False,
    include_steps: bool = False,
    all: bool = False,
) -> BulkSelection:
    """A checked :class:`BulkSelection`; raises ``InvalidOptionError`` naming the field
    (``tags``: one tag or several, the records carrying all of them). ``include_schedules``
    and ``include_steps`` add runtime schedules and workflow steps to the kinds taken
    (``kinds``, when given, names them all)."""
    name = validation.optional_text("job_name", job_name)
    wanted = _state(state)
    kind = validation.optional_text("error_type", error_type)
    if kind is not None:
        kind = kind.strip()
        if not kind or any(character.isspace() for character in kind):
            raise InvalidOptionError(
                "error_type", error_type, "must be an exception class name, e.g. ConnectionError"
            )
    chosen = _time_field(time_field)
    low = _moment("since", since)
    high = _moment("until", until)
    if low is not None and high is not None and low >= high:
        raise InvalidOptionError("until", until, f"must be later than since ({_iso(low)})")
    validation.boolean("all", all)
    taken = _kinds(kinds, include_schedules, include_steps)
    return BulkSelection(
        name, wanted, kind, chosen, low, high, validate_tag_filter(tags) or (), taken, all
    )


def _kinds(
    kinds: Iterable[RecordKind | str] | None, include_schedules: object, include_steps: object
) -> frozenset[RecordKind] | None:
    validation.boolean("include_schedules", include_schedules)
    validation.boolean("include_steps", include_steps)
    if kinds is None:
        if not include_schedules and not include_steps:
            return None
        taken = set(DEFAULT_KINDS)
    else:
        if isinstance(kinds, str):
            kinds = [kinds]
        taken = set()
        for one in kinds:
            try:
                taken.add(RecordKind(str(one)))
            except ValueError:
                choices = ", ".join(kind.value for kind in RecordKind)
                raise InvalidOptionError("kinds", one, f"expected one of {choices}") from None
        if not taken:
            raise InvalidOptionError("kinds", kinds, "must name at least one kind")
    if include_schedules:
        taken.add(RecordKind.SCHEDULE)
    if include_steps:
        taken.add(RecordKind.STEP)
    return frozenset(taken)


def _state(value: object) -> JobState | None:
    if value is None or isinstance(value, JobState):
        return value
    if isinstance(value, str):
        try:
            return JobState(value)
        except ValueError:
            pass
    choices = ", ".join(state.value for state in JobState)
    raise InvalidOptionError("state", value, f"expected one of {choices}")


def _time_field(value: object) -> TimeField:
    if isinstance(value, TimeField):
        return value
    if isinstance(value, str):
        try:
            return TimeField(value)
        except ValueError:
            pass
    choices = ", ".join(one.value for one in TimeField)
    raise InvalidOptionError("time_field", value, f"expected one of {choices}")


def _moment(field_name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidOptionError(field_name, value, "must be a datetime")
    if value.tzinfo is None:
        raise InvalidOptionError(field_name, value, "must be timezone-aware")
    return to_millis(value.astimezone(UTC))


def _record_time(record: JobRecord, time_field: TimeField) -> datetime | None:
    if time_field is TimeField.NEXT_RUN:
        return record.next_run_at
    if time_field is TimeField.LAST_RUN:
        return record.last_run_at
    return record.max_tries_reached_at


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def created_id_bound(moment: datetime) -> str:
    """The smallest UUIDv7 string created at ``moment`` (to the millisecond): record ids
    compare as their creation times, so ``id >= bound(since)`` and ``id < bound(until)`` is a
    creation-time range that the ``_id`` index serves."""
    millis = int(to_millis(moment).timestamp() * 1000)
    if millis < 0:
        millis = 0
    text = f"{millis:012x}"[-12:]
    return f"{text[:8]}-{text[8:]}"


def error_type_matches(stored: str | None, wanted: str) -> bool:
    """Whether an error type as a history row stores it (``ConnectionRefusedError`` for a
    built-in, ``myapp.errors.QuotaExceeded`` otherwise: ``domain.history.error_type``) is
    ``wanted``: the same name, or ``wanted`` is its last dotted part(s) (``QuotaExceeded``,
    ``errors.QuotaExceeded``); ``builtins.X`` names the built-in ``X`` only."""
    if stored is None:
        return False
    if wanted.startswith("builtins."):
        return stored in (wanted, wanted.removeprefix("builtins."))
    return stored == wanted or stored.endswith("." + wanted)


def check_chunk_size(value: object) -> int:
    size = validation.integer("chunk_size", value, minimum=1)
    if size > MAX_CHUNK_SIZE:
        raise InvalidOptionError("chunk_size", value, f"must be at most {MAX_CHUNK_SIZE}")
    return size


# -- one chunk ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BulkChunk:
    """What one read of a selection found: the matching records (``id`` order) among the
    records examined after the cursor, and the id of the last one examined (the next read
    starts after it; ``None`` when no record is left after it)."""

    records: tuple[JobRecord, ...]
    examined: int
    last_id: str | None


@dataclass(frozen=True, slots=True)
class RescheduleTo:
    """What a bulk reschedule sets: a run time (``run_at``, or ``delay`` from the moment of
    each chunk) and/or a priority."""

    run_at: datetime | None = None
    delay: timedelta | None = None
    priority: int | None = None

    def to_document(self) -> dict[str, Any]:
        return {
            "runAt": self.run_at,
            "delaySeconds": None if self.delay is None else self.delay.total_seconds(),
            "priority": self.priority,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> RescheduleTo | None:
        if not document:
            return None
        seconds = document.get("delaySeconds")
        return cls(
            run_at=document.get("runAt"),
            delay=None if seconds is None else timedelta(seconds=float(seconds)),
            priority=document.get("priority"),
        )


@dataclass(frozen=True, slots=True)
class Modify:
    change: JobChange


@dataclass(frozen=True, slots=True)
class Remove:
    pass


@dataclass(frozen=True, slots=True)
class Skip:
    reason: SkipReason


BulkDecision = Modify | Remove | Skip


def bulk_decision(
    action: BulkAction, record: JobRecord, now: datetime, to: RescheduleTo | None = None
) -> BulkDecision:
    """What ``action`` does to ``record`` as read at ``now`` (the single-job rules)."""
    state = record.state(now)
    if action is BulkAction.CANCEL:
        if state is JobState.FAILED:
            return Skip(SkipReason.FAILED)
        if record.type is JobType.RECURRENT:
            return Skip(SkipReason.RECURRENT)
        return Remove()
    if state is JobState.RUNNING:
        return Skip(SkipReason.RUNNING)
    if action is BulkAction.DELETE:
        return Remove()
    revived = retry_now_change(record, now)
    if action is BulkAction.RETRY:
        return Modify(revived)
    if to is None:
        raise InvalidOptionError("to", to, "a bulk reschedule needs a run time or a priority")
    moves = to.run_at is not None or to.delay is not None
    run_at = to.run_at if to.run_at is not None else now + (to.delay or timedelta(0))
    return Modify(
        JobChange(
            next_run_at=run_at if moves else None,
            priority=to.priority,
            tries=revived.tries,
            revive=revived.revive,
        )
    )


# -- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BulkReport:
    """What a bulk action did (or, ``dry_run``, would take).

    ``matched``: the records of the selection when the run started (the dry run's count; the
    selection is read again chunk by chunk, so records that joined or left it meanwhile make
    ``changed + skipped`` differ from it). ``changed``: records this run changed. ``skipped``:
    per :class:`SkipReason`, records left alone. ``complete``: the walk reached the end
    (``False`` when it stopped at ``max_chunks`` or was interrupted; resume it by
    ``audit_id``)."""

    action: BulkAction
    selection: BulkSelection
    dry_run: bool
    matched: int
    examined: int = 0
    changed: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    chunks: int = 0
    elapsed: timedelta = timedelta(0)
    complete: bool = True
    audit_id: str | None = None
    counts: Mapping[RecordKind, int] = field(default_factory=dict)
    """Per kind, the records of the selection when it started (``matched`` is their sum);
    ``left_out``: the records of the kinds it does not take that its filters match."""
    left_out: Mapping[RecordKind, int] = field(default_factory=dict)
    archived: bool = False
    """A delete that kept the records it removed in the records' archive (not ``purge``)."""

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


AUDITED_AS = {
    BulkAction.RETRY: AuditAction.BULK_RETRY,
    BulkAction.CANCEL: AuditAction.BULK_CANCEL,
    BulkAction.RESCHEDULE: AuditAction.BULK_RESCHEDULE,
    BulkAction.DELETE: AuditAction.BULK_DELETE,
}

BY_AUDIT_ACTION = {audit.value: action for action, audit in AUDITED_AS.items()}


def bulk_action(action: object) -> BulkAction:
    try:
        return BulkAction(str(action))
    except ValueError:
        choices = ", ".join(one.value for one in BulkAction)
        raise InvalidOptionError("action", action, f"expected one of {choices}") from None


def check_selection(selection: object) -> BulkSelection:
    """``selection`` as a bulk action may take it: a :class:`BulkSelection` with a filter, or
    ``all`` (else :class:`~dogs_core.errors.EmptySelectionError`; nothing is written)."""
    if not isinstance(selection, BulkSelection):
        raise InvalidOptionError(
            "selection", selection, "must be a BulkSelection (dogs_core.bulk_selection(...))"
        )
    if selection.unfiltered and not selection.all:
        raise EmptySelectionError(selection.describe())
    return selection


def reschedule_to(
    action: BulkAction,
    run_at: datetime | None,
    run_in: DurationLike | None,
    priority: int | None,
) -> RescheduleTo | None:
    given = run_at is not None or run_in is not None or priority is not None
    if action is not BulkAction.RESCHEDULE:
        if given:
            raise InvalidOptionError(
                "run_at", run_at, f"only a reschedule takes a time or priority, not {action}"
            )
        return None
    if run_at is not None and run_in is not None:
        raise InvalidOptionError("run_in", run_in, "give run_at or run_in, not both")
    if not given:
        raise InvalidOptionError(
            "run_at", None, "a bulk reschedule needs run_at, run_in or priority"
        )
    if run_at is not None and (not isinstance(run_at, datetime) or run_at.tzinfo is None):
        raise InvalidOptionError("run_at", run_at, "must be a timezone-aware datetime")
    delay = None if run_in is None else validation.duration("run_in", run_in)
    level = None if priority is None else validation.priority("priority", priority)
    return RescheduleTo(run_at=run_at, delay=delay, priority=level)


def why_not_resumable(entry: AuditEntry | None, now: datetime) -> str:
    if entry is None:
        return "no such audit entry"
    if entry.bulk is None:
        return f"is a {entry.action}, not a bulk action"
    if entry.outcome is AuditOutcome.DONE:
        return "that bulk action is done"
    if entry.outcome is AuditOutcome.RUNNING and not entry.stalled(now):
        return "that bulk action is running (its runner wrote progress less than a minute ago)"
    return "that bulk action cannot be resumed now"
