"""Telemetry events: what the runtime tells an application about its jobs, as typed values.

The runtime emits them through a :class:`~dogs_core.runtime.plumbing.telemetry.Telemetry` hub to the
callables subscribed to it (the log lines, OpenTelemetry and Prometheus integrations are such
subscribers). An event is a frozen value; a subscriber reads it and returns quickly, since it is
called inline, on the task (and in the context) that emitted it.

Where each is emitted, and in which context:

======================  ==============================================================  ==========
Event                   When                                                            Context
======================  ==============================================================  ==========
SchedulingStarted       ``schedule``/``schedule_many`` begins, before anything is written  caller's
JobScheduled            one record was inserted or found as a duplicate                  caller's
SchedulingEnded         the call returns or raises                                       caller's
ClaimSwept              one claim round trip of a worker ended (claimed or not)          claim lane
JobClaimed              a worker claimed a job (before its execution starts)             claim lane
JobStarted              the handler is about to be called                                execution
JobMisfired             a recurrent job's missed slots were skipped (no handler ran)     execution
JobExpired              an event job past its ``start_before`` was discarded (not run)   execution
JobSucceeded ...        the execution's outcome was written (see :class:`ExecutionEnded`)  execution
LockRenewed             a renewal write of a job's lock landed                           lock task
LockLost                a renewal found the lock taken or expired: the execution is stale  lock task
ProgressWritten         a write carrying the handler's latest progress starts            lock task
StepStarted             a durable step's function is about to run                        handler's
StepEnded               a durable step was recorded, or its function raised              handler's
StepReplayed            a durable step (or sleep) was replayed from the record           handler's
StoreErrored            a store call raised (most are retried: ``transient``)           any
WorkflowStarting        ``start_workflow`` begins, before anything is written            caller's
WorkflowStartEnded      ``start_workflow`` returns or raises                             caller's
WorkflowStepReleased    a releaser (or ``retry_workflow``) released a blocked step       releaser
WorkflowFinished        a workflow ended (all steps over, failed, or cancelled)          releaser
======================  ==============================================================  ==========

"Handler's" is the task (or the worker thread of a sync handler) the handler calls
``ctx.step`` on, in the execution's context: a step's :class:`StepStarted` and its
:class:`StepEnded` come in that same context, so a subscriber may make a span current between
them. "Execution" context means the execution's own context copy (each execution runs in one), so a
subscriber may set context variables in :class:`JobStarted` (an OpenTelemetry span made current
there is the parent of whatever the handler traces); it must not rely on the
:class:`ExecutionEnded` event running in that same context: a stale execution ends on another
task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from dogs_core.domain.progress import Progress
from dogs_core.domain.records import ClaimedJob

__all__ = [
    "EVENT_KINDS",
    "ClaimSwept",
    "Event",
    "ExecutionEnded",
    "JobCancelled",
    "JobClaimed",
    "JobExpired",
    "JobFailed",
    "JobMisfired",
    "JobRetried",
    "JobScheduled",
    "JobSnoozed",
    "JobStale",
    "JobStarted",
    "JobSucceeded",
    "LockLost",
    "LockRenewed",
    "ProgressWritten",
    "SchedulingEnded",
    "SchedulingStarted",
    "StepEnded",
    "StepReplayed",
    "StepStarted",
    "StoreErrored",
    "WorkflowFinished",
    "WorkflowStartEnded",
    "WorkflowStarting",
    "WorkflowStepReleased",
]


@dataclass(frozen=True, slots=True)
class Event:
    """The base of every telemetry event. ``kind`` is a stable dotted name (``job.started``)
    for subscribers that dispatch on strings, as Oban's ``[:oban, :job, :start]`` does."""

    kind: ClassVar[str] = "event"


# -- scheduling -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SchedulingStarted(Event):
    """A ``schedule`` (``count`` 1) or ``schedule_many`` call begins.

    ``trace_context`` is the one mutable part of an event: a subscriber may put string keys and
    values in it (an OpenTelemetry propagator's carrier) before anything is written, and they are
    stored with every record of the call (the additive ``traceContext`` field), to come back on
    :attr:`ClaimedJob.trace_context` when a worker claims the job, in any process.
    """

    kind: ClassVar[str] = "schedule.start"
    call_id: int
    job_names: tuple[str, ...]
    count: int
    trace_context: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class JobScheduled(Event):
    """One record of a scheduling call: inserted, or an existing one found by its unique key
    (``duplicate``; ``job_id`` is then the existing record's). ``outcome`` says which:
    ``scheduled``, ``duplicate``, or (``unique=`` options) ``replaced`` or ``debounced``, where
    ``job_id`` is the existing record that took the call's params."""

    kind: ClassVar[str] = "job.scheduled"
    call_id: int
    job_name: str
    job_id: str
    run_at: datetime
    priority: int
    duplicate: bool = False
    unique_key: str | None = None
    outcome: str = "scheduled"


@dataclass(frozen=True, slots=True)
class SchedulingEnded(Event):
    """The scheduling call ``call_id`` returned (``error`` ``None``) or raised ``error``."""

    kind: ClassVar[str] = "schedule.stop"
    call_id: int
    job_names: tuple[str, ...]
    scheduled: int
    duplicates: int
    duration: float
    """Seconds, on the runtime's monotonic clock."""
    error: BaseException | None = None


# -- claiming ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimSwept(Event):
    """One claim round trip: ``requested`` jobs asked for, ``claimed`` came back; ``duration``
    is the round trip in seconds (the claim latency); ``error`` when it raised."""

    kind: ClassVar[str] = "claim.sweep"
    job_names: tuple[str, ...]
    partition: int | None
    hint: str
    requested: int
    claimed: int
    duration: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class JobClaimed(Event):
    """A worker claimed ``job``. ``pickup_lag`` is how long the job had been due, in seconds
    (claim time minus its ``nextRunAt``; ``None`` when the store did not say)."""

    kind: ClassVar[str] = "job.claimed"
    job: ClaimedJob
    pickup_lag: float | None


# -- executions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobStarted(Event):
    """The handler of ``job`` is about to run (fleet limits admitted it, its lock is held).
    ``pickup_lag`` is how long the job had waited to run, in seconds: from when it was due
    (or, for a job a fleet limit held back, from when it was first due) to this start; once per
    execution, where a claim's :class:`JobClaimed` lag repeats for every claim of a held job."""

    kind: ClassVar[str] = "job.start"
    job: ClaimedJob
    pickup_lag: float | None = None


@dataclass(frozen=True, slots=True)
class JobMisfired(Event):
    """The misfire policy of recurrent ``job`` skipped ``skipped`` slots (at least, when
    ``capped``), from ``first_slot`` to ``last_slot``, without running its handler: the record
    was moved to ``next_run_at``. No history row is written for them."""

    kind: ClassVar[str] = "job.misfired"
    job: ClaimedJob
    skipped: int
    first_slot: datetime
    last_slot: datetime
    next_run_at: datetime
    capped: bool = False


@dataclass(frozen=True, slots=True)
class JobExpired(Event):
    """Event ``job`` was claimed for its first attempt after its ``start_before`` deadline:
    it was deleted without running, with an ``expired`` history row (no :class:`JobStarted`
    precedes it)."""

    kind: ClassVar[str] = "job.expired"
    job: ClaimedJob
    deadline: datetime


@dataclass(frozen=True, slots=True)
class ExecutionEnded(Event):
    """The base of the events that end an execution: exactly one of its subclasses follows each
    :class:`JobStarted`. ``duration`` is seconds from the start to the outcome (monotonic);
    ``outcome`` names the subclass (``succeeded``, ``retried``, ``failed``, ``snoozed``,
    ``cancelled``, ``stale``)."""

    kind: ClassVar[str] = "job.stop"
    outcome: ClassVar[str] = "ended"
    job: ClaimedJob
    duration: float


@dataclass(frozen=True, slots=True)
class JobSucceeded(ExecutionEnded):
    """The handler returned and the success was written."""

    outcome: ClassVar[str] = "succeeded"


@dataclass(frozen=True, slots=True)
class JobRetried(ExecutionEnded):
    """The handler raised ``error`` and the event job will run again at ``retry_at``."""

    outcome: ClassVar[str] = "retried"
    error: BaseException
    retry_at: datetime


@dataclass(frozen=True, slots=True)
class JobFailed(ExecutionEnded):
    """The handler raised ``error`` and the job will not be retried as such: an event job that
    reached its attempt limit or that ``on_error`` discarded, or a recurrent job (which runs
    again at its next slot, ``next_run_at``)."""

    outcome: ClassVar[str] = "failed"
    error: BaseException
    next_run_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobSnoozed(ExecutionEnded):
    """The handler snoozed: the job runs again at ``run_at``, its try given back."""

    outcome: ClassVar[str] = "snoozed"
    run_at: datetime


@dataclass(frozen=True, slots=True)
class JobCancelled(ExecutionEnded):
    """The execution was cancelled: ``by`` is ``"shutdown"`` (the workers stopped; the lock was
    released for another worker) or ``"operator"`` (``client.cancel``)."""

    outcome: ClassVar[str] = "cancelled"
    by: str


@dataclass(frozen=True, slots=True)
class JobStale(ExecutionEnded):
    """The execution lost its lock (``reason``: ``watchdog``, ``lost_lock``, ``write_failed``,
    ``external``); the job is retried by whichever worker claims it next."""

    outcome: ClassVar[str] = "stale"
    reason: str


# -- locks and the store ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockRenewed(Event):
    """A renewal of ``job``'s lock landed: it is held until ``locked_until``."""

    kind: ClassVar[str] = "lock.renewed"
    job: ClaimedJob
    locked_until: datetime


@dataclass(frozen=True, slots=True)
class LockLost(Event):
    """``job``'s lock is gone (``reason`` as in :class:`JobStale`); a :class:`JobStale` (or an
    operator's :class:`JobCancelled`) follows."""

    kind: ClassVar[str] = "lock.lost"
    job: ClaimedJob
    reason: str


@dataclass(frozen=True, slots=True)
class ProgressWritten(Event):
    """A write carrying ``job``'s latest reported ``progress`` starts: at most one per
    ``progress_interval`` however often the handler reports (:mod:`dogs_core.domain.progress`),
    so a span keeps a bounded number of them."""

    kind: ClassVar[str] = "job.progress"
    job: ClaimedJob
    progress: Progress


@dataclass(frozen=True, slots=True)
class StepStarted(Event):
    """``job``'s durable step number ``index`` (from 0), ``name``, is about to run its function
    (``ctx.step``; a replayed step has a :class:`StepReplayed` instead)."""

    kind: ClassVar[str] = "step.start"
    job: ClaimedJob
    name: str
    index: int
    transactional: bool = False


@dataclass(frozen=True, slots=True)
class StepEnded(Event):
    """The step of a :class:`StepStarted` ended: its result recorded (``error`` ``None``), or
    its function (or the record write) raised ``error`` and nothing was recorded.
    ``duration`` is the seconds from its start to here (function and record write)."""

    kind: ClassVar[str] = "step.stop"
    job: ClaimedJob
    name: str
    index: int
    duration: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class StepReplayed(Event):
    """``job``'s recorded step ``index``, ``name``, was returned from the record without running
    (a retry, a takeover or a wake-up resumes past it)."""

    kind: ClassVar[str] = "step.replayed"
    job: ClaimedJob
    name: str
    index: int


@dataclass(frozen=True, slots=True)
class StoreErrored(Event):
    """The store call ``operation`` (a port method name) raised ``error``; ``transient`` errors
    (network, failover, write conflict) are retried by the caller."""

    kind: ClassVar[str] = "store.error"
    operation: str
    error: BaseException
    transient: bool


# -- workflows (docs/workflows.md) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkflowStarting(Event):
    """``start_workflow`` begins, before anything is written. As in
    :class:`SchedulingStarted`, a subscriber may fill ``trace_context``: it is stored with the
    workflow and every record of its steps, so each step's execution span can be a child of
    the workflow's (one trace per workflow)."""

    kind: ClassVar[str] = "workflow.start"
    call_id: int
    workflow_id: str
    name: str | None
    steps: int
    trace_context: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class WorkflowStartEnded(Event):
    """``start_workflow`` ``call_id`` returned (``error`` ``None``: the workflow is stored,
    ``released`` of its steps at once) or raised."""

    kind: ClassVar[str] = "workflow.start.stop"
    call_id: int
    workflow_id: str
    name: str | None
    steps: int
    released: int
    duration: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class WorkflowStepReleased(Event):
    """A blocked step was released (its record inserted) by this process: a releaser in the
    workers, or a client's ``retry_workflow``."""

    kind: ClassVar[str] = "workflow.step.released"
    workflow_id: str
    step_id: str
    record_id: str


@dataclass(frozen=True, slots=True)
class WorkflowFinished(Event):
    """A workflow reached its end ``state`` (``succeeded``, ``completed``, ``failed`` or
    ``cancelled``), written by this process."""

    kind: ClassVar[str] = "workflow.finished"
    workflow_id: str
    state: str


#: Every event class by its ``kind``.
EVENT_KINDS: Mapping[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        SchedulingStarted,
        JobScheduled,
        SchedulingEnded,
        ClaimSwept,
        JobClaimed,
        JobStarted,
        JobMisfired,
        JobExpired,
        ExecutionEnded,
        LockRenewed,
        LockLost,
        ProgressWritten,
        StepStarted,
        StepEnded,
        StepReplayed,
        StoreErrored,
        WorkflowStarting,
        WorkflowStartEnded,
        WorkflowStepReleased,
        WorkflowFinished,
    )
}
