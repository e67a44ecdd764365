"""The records the scheduler reads and writes, independent of any database.

Field names follow Python conventions; the MongoDB adapter maps them to the field names of
@orion-js/dogs (``jobName``, ``nextRunAt``, ``lockedUntil`` ...) so both can share a database.
All datetimes are timezone-aware UTC. Stores keep millisecond precision (BSON dates do), so
values written through a store come back truncated to the millisecond.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dogs_core.domain.progress import Progress
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.domain.steps import RecordedStep
from dogs_core.domain.values import value

__all__ = [
    "DEFAULT_PRIORITY",
    "DEFAULT_RETENTION",
    "BulkScheduleResult",
    "ClaimRequest",
    "ClaimedJob",
    "Debounced",
    "Duplicate",
    "HistoryRecord",
    "HistoryStatus",
    "Hold",
    "HoldReason",
    "ItemError",
    "JobRecord",
    "JobState",
    "JobStatus",
    "JobType",
    "NameStatus",
    "NewJob",
    "Owner",
    "PreviousAttempt",
    "Replaced",
    "ScheduleOutcome",
    "Scheduled",
    "to_millis",
]

DEFAULT_PRIORITY = 100
DEFAULT_RETENTION = timedelta(days=7)


class JobType(enum.StrEnum):
    """An event job has many records per name; a recurrent job has exactly one."""

    EVENT = "event"
    RECURRENT = "recurrent"


class JobStatus(enum.StrEnum):
    """Stored ``status``; a missing status means pending."""

    PENDING = "pending"
    MAX_TRIES_REACHED = "maxTriesReached"


class HistoryStatus(enum.StrEnum):
    """How one execution ended. The first row written for an execution wins.

    Dogs writes the first three. ``cancelled`` (by an operator, or at shutdown),
    ``snoozed`` (the handler asked to run again later), ``expired`` (an event job not started
    by its ``start_before`` deadline, discarded without running) and ``superseded`` are ours
    (docs/differences.md).

    ``superseded``: the handler ran to success but its settlement was refused because the lock
    had moved on to the execution named by the row's ``superseded_by`` (an outage longer than
    the lock, a takeover), whose claim had found no row of this one and run the job again. The
    job's counted success is that execution's, never this row (docs/reliability.md, "One
    counted success").
    """

    SUCCESS = "success"
    ERROR = "error"
    STALE = "stale"
    CANCELLED = "cancelled"
    SNOOZED = "snoozed"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


class JobState(enum.StrEnum):
    """Where a stored record stands at one moment; every record is in exactly one state.

    Checked in this order: ``failed`` (an event record at its attempt limit,
    ``maxTriesReached``), ``running`` (its lock is live), ``stale`` (its lock expired and was
    not released: the worker that held it died or hung, and the job waits for recovery),
    ``held`` (a fleet-wide concurrency or rate limit refused it and it waits for a slot or a
    token: :class:`Hold`), ``sleeping`` (a durable handler's ``ctx.sleep`` ended its run until
    ``next_run_at``: :attr:`JobRecord.sleeping`), ``retrying`` (an earlier attempt failed or
    was interrupted: ``tries >= 1``), ``due`` (``next_run_at <= now``) and ``scheduled``
    (due later).

    Which records a claim may take is :mod:`dogs_core.domain.claimable`: those due in
    ``due``, ``retrying`` or ``stale`` (``CLAIMABLE_STATES``).
    """

    SCHEDULED = "scheduled"
    DUE = "due"
    RUNNING = "running"
    RETRYING = "retrying"
    STALE = "stale"
    FAILED = "failed"
    HELD = "held"
    SLEEPING = "sleeping"


class HoldReason(enum.StrEnum):
    """Which fleet-wide limit refused a job (``dogs_core.domain.controls``)."""

    CONCURRENCY = "concurrency"
    """Every slot of its ``global_concurrency`` (or of its concurrency key) was taken."""
    RATE = "rate"
    """Its ``rate_limit`` window had no token left."""
    UNREACHABLE = "unreachable"
    """The limit's store could not be read (the job waits as if refused)."""


@dataclass(frozen=True, slots=True)
class Hold:
    """A job given back by a fleet limit (additive ``heldBack`` on the record): why, since
    when it has been waiting to run (the ``next_run_at`` it had when first refused, kept across
    refusals), and the ``next_run_at`` the refusal set. The hold is in force while the record's
    ``next_run_at`` is still ``until``: any other writer that moves the record (a claim that
    runs it, an operator's retry, a Node Dogs worker) ends it without having to remove it."""

    reason: HoldReason
    since: datetime
    until: datetime


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds (or held) a claim: the host, the process and the ``Workers`` instance."""

    host: str
    pid: int
    instance_id: str

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}/{self.instance_id}"


# Subtracting a ready timedelta is several times cheaper than datetime.replace (keyword
# parsing), and stores truncate a few datetimes per job.
_SUB_MICROSECONDS = tuple(timedelta(microseconds=micros) for micros in range(1000))


def to_millis(moment: datetime) -> datetime:
    """Truncate to the millisecond, the precision of a BSON date."""
    if moment.tzinfo is not UTC:
        if moment.tzinfo is None:
            raise ValueError(
                f"naive datetime {moment!r}: Dogs only stores timezone-aware UTC times"
            )
        moment = moment.astimezone(UTC)
    excess = moment.microsecond % 1000
    return moment - _SUB_MICROSECONDS[excess] if excess else moment


@dataclass(frozen=True, slots=True)
class NewJob:
    """A record to insert: what ``schedule`` writes for an event job.

    ``id`` is chosen by the caller so that retrying an insert after an ambiguous failure is
    idempotent: a store that finds ``id`` already present reports ``Scheduled(id)``.
    """

    id: str
    job_name: str
    params: Mapping[str, Any] | None
    next_run_at: datetime
    priority: int
    partition: int
    unique_identifier: str | None = None
    type: JobType = JobType.EVENT
    trace_context: Mapping[str, str] | None = None
    """The scheduling call's trace context (additive ``traceContext``; see
    :class:`~dogs_core.domain.events.SchedulingStarted`)."""
    workflow: Mapping[str, Any] | None = None
    """A workflow step's record: its workflow, step and what its dependencies left (additive
    ``workflow``; :mod:`dogs_core.domain.workflow_records`)."""
    tags: tuple[str, ...] = ()
    """Additive ``tags`` (:mod:`dogs_core.domain.tags`), written only when there are some."""
    start_before: datetime | None = None
    """Additive ``startBefore``: not started by then, the job is discarded (``expired``)."""
    unique_window: timedelta | None = None
    """Additive ``uniqueWindowMs``: the key stays taken this long after the record ended."""
    debounce_until: datetime | None = None
    """Additive ``debounceUntil``: the latest run time a debounce may push the record to."""
    behind_until: datetime | None = None
    """Additive ``behindUntil``: the lock deadline of the running record of its key that this
    one was scheduled behind (``on_conflict="replace"``); a replace never runs it earlier."""
    parked_run_at: datetime | None = None
    """With ``next_run_at`` at :data:`~dogs_core.domain.uniqueness.PARKED_AT`: the run time the
    record gets once its call has checked its key's window (additive ``parkedRunAt``)."""
    parked_at: datetime | None = None
    """When it was parked (additive ``parkedAt``)."""
    schedule: ScheduleSpec | None = None
    """A runtime schedule's recurrent record: what it runs and when (additive ``schedule``)."""


@value
class JobRecord:
    """A stored job record, as a store returns it."""

    id: str
    job_name: str
    type: JobType
    priority: int
    next_run_at: datetime
    partition: int | None = None
    params: Mapping[str, Any] | None = None
    unique_identifier: str | None = None
    last_run_at: datetime | None = None
    locked_until: datetime | None = None
    lock_id: str | None = None
    claim_was_stale: bool | None = None
    tries: int | None = None
    status: JobStatus | None = None
    max_tries_reached_at: datetime | None = None
    expires_at: datetime | None = None
    lock_owner: Owner | None = None
    """Who holds the lock (additive ``lockOwner``; Node Dogs workers write none)."""
    trace_context: Mapping[str, str] | None = None
    """The trace context of the call that scheduled it (additive ``traceContext``)."""
    lock_released_at: datetime | None = None
    """When the holder gave the lock back at shutdown (additive ``lockReleasedAt``): a
    released record is claimable at once and is not stale."""
    progress: Progress | None = None
    """How far the execution holding the lock is, as its handler last reported (additive
    ``progress``); ``None`` when none reported or the record is not held (a progress left by
    an earlier execution is not shown)."""
    workflow: Mapping[str, Any] | None = None
    """The workflow step this record runs (additive ``workflow``), or ``None``."""
    tags: tuple[str, ...] = ()
    """Additive ``tags``."""
    start_before: datetime | None = None
    """Additive ``startBefore``: the start deadline of an event job."""
    unique_window: timedelta | None = None
    """Additive ``uniqueWindowMs``: how long the unique key stays taken after the record ends."""
    debounce_until: datetime | None = None
    """Additive ``debounceUntil``: the cap of a debounced record's run time."""
    behind_until: datetime | None = None
    """Additive ``behindUntil``: a replace never moves the run time before it."""
    parked_at: datetime | None = None
    """Additive ``parkedAt``: written by a call still checking its key's window."""
    parked_run_at: datetime | None = None
    """Additive ``parkedRunAt``: the run time a parked record gets once published."""
    schedule: ScheduleSpec | None = None
    """Additive ``schedule``: set on the recurrent record of a runtime schedule."""
    held: Hold | None = None
    """The fleet limit that last gave it back (additive ``heldBack``); in force only while
    :attr:`holding` says so."""
    steps: tuple[RecordedStep, ...] = ()
    """The durable steps its runs recorded (additive ``steps``; :mod:`dogs_core.domain.steps`)."""
    sleeping_until: datetime | None = None
    """The wake-up time of a durable handler's last ``ctx.sleep`` (additive ``sleepingUntil``);
    in force only while :attr:`sleeping` says so."""

    def state(self, now: datetime) -> JobState:
        """The :class:`JobState` of this record at ``now``."""
        if self.type is JobType.EVENT and self.status is JobStatus.MAX_TRIES_REACHED:
            return JobState.FAILED
        if self.locked_until is not None and self.locked_until > now:
            return JobState.RUNNING
        if self.locked_until is not None and not self.lock_released:
            return JobState.STALE
        if self.next_run_at > now and self.holding is not None:
            return JobState.HELD
        if self.next_run_at > now and self.sleeping is not None:
            return JobState.SLEEPING
        if (self.tries or 0) >= 1:
            return JobState.RETRYING
        return JobState.DUE if self.next_run_at <= now else JobState.SCHEDULED

    @property
    def holding(self) -> Hold | None:
        """The :class:`Hold` in force: the one recorded, while ``next_run_at`` is its
        ``until`` (whatever moved the record since ended it)."""
        held = self.held
        return held if held is not None and held.until == self.next_run_at else None

    @property
    def sleeping(self) -> datetime | None:
        """The wake-up time of the sleep in force: the one recorded, while ``next_run_at`` is
        still it (an operator's retry or reschedule, or a Node Dogs write, ends the sleep)."""
        until = self.sleeping_until
        return until if until is not None and until == self.next_run_at else None

    def waiting_since(self) -> datetime:
        """Since when this record has been waiting to run: the start of the hold in force, else
        its ``next_run_at`` (the "oldest due" of a status view is the least of these)."""
        holding = self.holding
        return self.next_run_at if holding is None else min(holding.since, self.next_run_at)

    @property
    def lock_released(self) -> bool:
        """The last lock was given back (at shutdown) rather than left to expire."""
        return (
            self.lock_released_at is not None
            and self.locked_until is not None
            and self.lock_released_at >= self.locked_until
        )


@value
class ClaimRequest:
    """One claim attempt: the best eligible record of one partition, locked for ``lock_id``."""

    job_names: tuple[str, ...]
    partition: int
    hint: str
    now: datetime
    locked_until: datetime
    lock_id: str
    owner: Owner | None = None
    """Written on the record as ``lockOwner``, so every running job has a visible owner."""


@value
class ClaimedJob:
    """What a successful claim hands to an execution."""

    job_id: str
    execution_id: str
    job_name: str
    type: JobType
    params: Mapping[str, Any] | None
    tries: int
    priority: int
    locked_until: datetime
    partition: int | None = None
    unique_identifier: str | None = None
    was_stale: bool = False
    last_run_at: datetime | None = None
    next_run_at: datetime | None = None
    """When the record was due; fixed-rate recurrent schedules count their slots from it."""
    owner: Owner | None = None
    """Who claimed it (this instance)."""
    previous_attempt: PreviousAttempt | None = None
    """The attempt whose expired lock this claim took over (``was_stale``), when the store
    knows it: the claimer writes its ``stale`` history row (a killed worker writes none)."""
    trace_context: Mapping[str, str] | None = None
    """The trace context of the call that scheduled the job (additive ``traceContext``), for
    a tracing subscriber to link the execution's span to the scheduling one."""
    workflow: Mapping[str, Any] | None = None
    """The workflow step the record runs (additive ``workflow``): ``ctx.workflow_id``,
    ``ctx.upstream(...)`` and ``ctx.batch`` read it."""
    tags: tuple[str, ...] = ()
    """The record's tags (additive ``tags``)."""
    start_before: datetime | None = None
    """Not started by then, the job is discarded with an ``expired`` row (``startBefore``)."""
    unique_window: timedelta | None = None
    """Once it ends, its unique key stays taken this long (``uniqueWindowMs``)."""
    schedule: ScheduleSpec | None = None
    """The runtime schedule the record is (``schedule``), as read at the claim."""
    held_since: datetime | None = None
    """Since when the job has been held back by a fleet limit, when the record's hold was in
    force at the claim (:attr:`JobRecord.holding`): a refusal again keeps that start."""
    steps: tuple[RecordedStep, ...] = ()
    """The durable steps earlier runs recorded (additive ``steps``), in order: ``ctx.step``
    replays them (:mod:`dogs_core.domain.steps`)."""

    @property
    def lock_id(self) -> str:
        """The fencing token: every write made for this execution matches it."""
        return self.execution_id


@value
class PreviousAttempt:
    """The lock a stale claim took over: enough to write the killed attempt's history row."""

    execution_id: str
    started_at: datetime | None
    locked_until: datetime
    tries: int
    owner: Owner | None = None


@value
class HistoryRecord:
    """One finished execution (Dogs writes no row while a job runs).

    ``was_stale``, ``error_type``, ``error_traceback`` and ``owner`` are additive fields
    (``wasStale``, ``errorType``, ``errorTraceback``, ``owner``) next to Dogs' own.
    """

    execution_id: str
    job_id: str
    job_name: str
    type: JobType
    priority: int
    tries: int
    started_at: datetime
    ended_at: datetime
    status: HistoryStatus
    expires_at: datetime
    params: Mapping[str, Any] | None = None
    result: Any = None
    error_message: str | None = None
    unique_identifier: str | None = None
    was_stale: bool = False
    """This attempt's claim took over an expired lock (a recovery)."""
    error_type: str | None = None
    """The qualified name of the exception's class."""
    error_traceback: str | None = None
    """The formatted traceback, its last :data:`~dogs_core.domain.history.TRACEBACK_LIMIT`
    characters."""
    owner: Owner | None = None
    progress: Progress | None = None
    """The execution's last reported progress (additive ``progress``), if it reported any."""
    workflow_id: str | None = None
    """The workflow of the step this execution ran (additive ``workflowId``), so that the
    workflows' release reads the rows of steps only."""
    outcome: str | None = None
    """What the execution came to, in the words of the telemetry events and the metrics
    (additive ``outcome``): ``succeeded``, ``retried`` (an error with a retry to come),
    ``failed`` (an error that ended the job: its attempt limit, or discarded), ``snoozed``,
    ``cancelled``, ``stale``. ``None`` on rows written by Node Dogs or before it existed."""
    ran: bool = True
    """``False`` for the ``cancelled`` row of a job cancelled before any execution started it
    (additive ``ran: false``), and for the ``expired`` row of one not started by its deadline: its
    times are the cancel's (or the discard's), it has no duration."""
    superseded_by: str | None = None
    """The execution that took the job over from this one (additive ``supersededBy``): on the
    ``stale`` row a claimer writes for the attempt whose expired lock it took, and on the
    ``superseded`` row that attempt turns it into when it had run to success after all."""

    @property
    def duration_ms(self) -> int:
        return int((self.ended_at - self.started_at) / timedelta(milliseconds=1))


@dataclass(frozen=True, slots=True)
class Scheduled:
    """``schedule`` inserted a new record.

    ``id``
        the id of the record that was inserted.
    """

    id: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    """``schedule`` found its unique key taken; nothing was written.

    ``unique_identifier``
        the unique key as stored (with ``unique_scope="job"`` it includes the job name).
    ``existing_id``
        the id of the record that holds the key, or ``None`` when that record could not be read
        back (it was completed and deleted in the meantime).
    ``reason``
        ``"record"``: a record holds the key in one of the call's states; ``"window"``: the
        record ended less than its ``period`` ago; ``"throttle"``: a call of this period was
        accepted already (this one is dropped).
    ``held_until``
        for ``"window"`` and ``"throttle"``: when the key is free again.
    """

    existing_id: str | None
    unique_identifier: str
    reason: str = "record"
    held_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Replaced:
    """``schedule(unique=Unique(on_conflict="replace"))`` gave the pending record ``id`` that
    held the key the call's params, run time, priority, tags and deadline."""

    id: str
    unique_identifier: str


@dataclass(frozen=True, slots=True)
class Debounced:
    """``schedule(unique=Unique(on_conflict="debounce"))`` gave the pending record ``id`` the
    call's params and moved its run time to ``run_at``."""

    id: str
    run_at: datetime
    unique_identifier: str


ScheduleOutcome = Scheduled | Duplicate | Replaced | Debounced


@dataclass(frozen=True, slots=True)
class ItemError:
    """One item of a bulk schedule that failed; the others were still written.

    ``index``
        the position of the item in the items given to ``schedule_many``.
    ``error``
        the exception that refused it (an :class:`~dogs_core.errors.InvalidParamsError` or
        another :class:`~dogs_core.errors.DogsError` for bad input, a
        :class:`~dogs_core.errors.StoreError` when the store could not write it).
    ``job``
        the item as given: what the caller passed to the client's ``schedule_many``, or the
        :class:`NewJob` a store's ``schedule_many`` was given.
    """

    index: int
    error: Exception
    job: object


@dataclass(frozen=True, slots=True)
class BulkScheduleResult:
    """Counts and per-item outcomes of ``schedule_many``. The items that did not fail are
    written even when others fail.

    ``scheduled_count``
        how many records were inserted.
    ``skipped_count``
        how many items were duplicates of an existing unique key (nothing written for them).
    ``errors``
        one :class:`ItemError` per item that failed.
    ``outcomes``
        one entry per item, in order: its :class:`Scheduled` or :class:`Duplicate` (or, for
        items with ``unique=`` options, :class:`Replaced` or :class:`Debounced`), or ``None``
        for an item that failed.
    """

    scheduled_count: int
    skipped_count: int
    errors: tuple[ItemError, ...] = ()
    outcomes: tuple[ScheduleOutcome | None, ...] = ()


@dataclass(frozen=True, slots=True)
class NameStatus:
    """Per job name counts for an operator's status view."""

    job_name: str
    due: int = 0
    scheduled_later: int = 0
    running: int = 0
    stale: int = 0
    terminal: int = 0
    """Failed records: at their attempt limit (the ``failed`` state)."""
    oldest_due_at: datetime | None = None
    """Since when the oldest work waiting to run has waited: due records and stale ones (which
    wait for recovery) by their ``next_run_at``, held ones by the start of their hold."""
    held: int = 0
    """Records held back by a fleet-wide concurrency or rate limit (the ``held`` state)."""

    @property
    def failed(self) -> int:
        """The failed records (``terminal``), by the name every view uses."""
        return self.terminal
