"""What a store keeps of a workflow (pure values): the workflow, its steps, and the values the
workflows role of the port takes and returns.

A step lives in the store's steps collection (MongoDB: ``orionjs.jobs_dogs_workflow_steps``),
never in Dogs' records collection while it is blocked: its record is inserted only when it is
released, so no Dogs 4.6.8 claim can ever see a blocked step. A step moves
``blocked -> released -> succeeded | failed | cancelled``, or ``blocked -> skipped |
cancelled``; a workflow's retry puts its failed, skipped and cancelled steps back to
``blocked`` with a new ``generation`` (the fence of every write that decides on a step).

A step's ``gate`` is what it means to the steps after it (:func:`gate_of`): ``wait`` until it
ended, then ``pass`` (succeeded, or failed or cancelled with ``on_failure="continue"``) or
``skip``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryStatus, NewJob
from dogs_core.domain.values import value
from dogs_core.domain.workflows import FailurePolicy

__all__ = [
    "ENDED_STEP_STATES",
    "ENDED_WORKFLOW_STATES",
    "MAX_STEP_RESULT_BYTES",
    "MAX_UPSTREAM_BYTES",
    "Dependent",
    "FinishedWorkflow",
    "Gate",
    "NewWorkflow",
    "ReleasedStep",
    "StepEnding",
    "StepOutcome",
    "StepRecord",
    "StepRelease",
    "StepSkip",
    "StepState",
    "WorkflowCancelled",
    "WorkflowRecord",
    "WorkflowRetried",
    "WorkflowStarted",
    "WorkflowState",
    "WorkflowSummary",
    "WorkflowView",
    "gate_of",
]

#: Largest result (as BSON) a step's end keeps in the workflow: a larger one is omitted there
#: (its history row keeps it) and ``ctx.upstream(step).result`` says so.
MAX_STEP_RESULT_BYTES: Final = 256 * 1024
#: Most bytes of results carried to one dependent's record; results past it (in the order of
#: its ``after``) are omitted there the same way.
MAX_UPSTREAM_BYTES: Final = 4 * 1024 * 1024


class StepState(enum.StrEnum):
    """Where one step stands."""

    BLOCKED = "blocked"
    """Waiting for its dependencies: no record yet."""
    RELEASED = "released"
    """Its record is inserted: pending, running or retrying like any job."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Its job failed for good (its attempt limit, a discarded error, a deleted record)."""
    SKIPPED = "skipped"
    """Never ran: a dependency failed under ``skip``, or the workflow failed."""
    CANCELLED = "cancelled"
    """The workflow was cancelled (or an operator cancelled the step's job)."""


ENDED_STEP_STATES: Final = frozenset(
    {StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED}
)


class WorkflowState(enum.StrEnum):
    """Where a workflow stands: ``running`` until every step has ended (``succeeded`` when
    every one succeeded, ``completed`` when some failed or were skipped under their
    policies), ``failed`` at once when a step with ``on_failure="fail"`` failed, or
    ``cancelled``."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED_WORKFLOW_STATES: Final = frozenset(set(WorkflowState) - {WorkflowState.RUNNING})


class Gate(enum.StrEnum):
    """What a step means to the steps that depend on it."""

    WAIT = "wait"
    PASS = "pass"
    SKIP = "skip"


def gate_of(state: StepState, policy: FailurePolicy) -> Gate:
    """The gate of a step in ``state`` under ``policy`` (see the module documentation)."""
    if state is StepState.SUCCEEDED:
        return Gate.PASS
    if state is StepState.FAILED or state is StepState.CANCELLED:
        return Gate.PASS if policy is FailurePolicy.CONTINUE else Gate.SKIP
    if state is StepState.SKIPPED:
        return Gate.SKIP
    return Gate.WAIT


@value
class StepOutcome:
    """How a step's job ended: the status of its last history row (``None`` when it ended
    without one), that execution, when, its error message and its result (``None`` with
    ``result_omitted`` when it was over :data:`MAX_STEP_RESULT_BYTES`)."""

    status: HistoryStatus | None
    ended_at: datetime
    execution_id: str | None = None
    error_message: str | None = None
    result: Any = None
    result_omitted: bool = False


@value
class StepRecord:
    """One stored step. ``after`` and ``children`` are step ids; ``record_id`` is the record
    of its current release (a new one each time it is released); ``pending`` is set while the
    consequences of its end (its dependents' release or skip, the workflow's end) are not all
    written, so that a sweep finishes what a crashed releaser began."""

    id: str
    workflow_id: str
    name: str
    job_name: str
    params: Mapping[str, Any] | None
    priority: int
    partition: int
    after: tuple[str, ...]
    children: tuple[str, ...]
    policy: FailurePolicy
    state: StepState
    gate: Gate
    generation: int = 0
    summary: bool = False
    record_id: str | None = None
    released_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: StepOutcome | None = None
    pending: bool = False
    trace_context: Mapping[str, str] | None = None


@value
class WorkflowRecord:
    """One stored workflow (its steps are stored apart)."""

    id: str
    name: str | None
    state: WorkflowState
    created_at: datetime
    step_count: int
    ended_at: datetime | None = None
    generation: int = 0
    """How many times it was retried."""
    trace_context: Mapping[str, str] | None = None


@value
class WorkflowView:
    """A workflow with all its steps, in the order they were added (``get_workflow``)."""

    workflow: WorkflowRecord
    steps: tuple[StepRecord, ...]

    @property
    def id(self) -> str:
        return self.workflow.id

    @property
    def state(self) -> WorkflowState:
        return self.workflow.state

    def step(self, name_or_id: str) -> StepRecord:
        """The step of this name or id (``KeyError`` when none)."""
        for step in self.steps:
            if step.name == name_or_id or step.id == name_or_id:
                return step
        raise KeyError(name_or_id)

    def counts(self) -> dict[StepState, int]:
        """How many steps are in each state (every state listed)."""
        counts = dict.fromkeys(StepState, 0)
        for step in self.steps:
            counts[step.state] += 1
        return counts


@value
class WorkflowSummary:
    """A workflow and how many of its steps are in each state (``list_workflows``)."""

    workflow: WorkflowRecord
    counts: Mapping[StepState, int]


@value
class NewWorkflow:
    """A workflow to insert at once: the workflow, every step, and the records of the steps
    released at the start (those without dependencies)."""

    workflow: WorkflowRecord
    steps: tuple[StepRecord, ...]
    records: tuple[NewJob, ...]


@value
class ReleasedStep:
    """A released step as the release reads it: which record it waits for."""

    id: str
    workflow_id: str
    record_id: str
    policy: FailurePolicy
    generation: int
    released_at: datetime
    leaf: bool = False
    """No step depends on it: its end may end its workflow, and releases nothing."""


@value
class StepEnding:
    """A released step's end, as decided from its record and history: fenced by its record
    id (an end of an older release writes nothing)."""

    step_id: str
    workflow_id: str
    record_id: str
    state: StepState
    gate: Gate
    outcome: StepOutcome
    policy: FailurePolicy = FailurePolicy.FAIL
    leaf: bool = False
    """No step depends on it (see :class:`ReleasedStep`)."""


@value
class Dependent:
    """A blocked step after some ended steps: whether any of its dependencies still waits,
    and whether any skips it (:func:`~dogs_core.domain.workflow_release.decide_dependent`)."""

    id: str
    workflow_id: str
    generation: int
    waiting: bool
    skipping: bool


@value
class StepRelease:
    """Release a blocked step (fenced by its generation) as the record ``record_id``."""

    step_id: str
    workflow_id: str
    generation: int
    record_id: str


@value
class StepSkip:
    """Skip a blocked step (fenced by its generation)."""

    step_id: str
    workflow_id: str
    generation: int


@value
class FinishedWorkflow:
    """A workflow reached ``state`` (by this call)."""

    workflow_id: str
    state: WorkflowState


@value
class WorkflowStarted:
    """What ``start_workflow`` wrote: the workflow's id and each step's id by name."""

    id: str
    name: str | None
    step_ids: Mapping[str, str]

    def step_id(self, step: object) -> str:
        """The id of a step given by its handle (``wf.add``'s return) or its name."""
        name = getattr(step, "name", step)
        return self.step_ids[str(name)]


@value
class WorkflowCancelled:
    """What ``cancel_workflow`` did: whether it cancelled the workflow (``False``: it had
    ended already, in ``state``), and how many of its released jobs it stopped."""

    id: str
    cancelled: bool
    state: WorkflowState
    stopped: int = 0


@value
class WorkflowRetried:
    """What ``retry_workflow`` did: the steps put back to run (failed, skipped and cancelled
    ones) and how many of them were released at once."""

    id: str
    step_ids: tuple[str, ...]
    released: int
