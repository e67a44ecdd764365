"""What is released now (pure): the decisions of a workflow's release, local and global.

The release is driven by what every worker writes, Python or Node: history rows. From a
step's record and its newest row, :func:`evidence_ending` (or, for a success row alone,
:func:`row_ending`) says whether the step ended and how; the store writes that end once (a
compare-and-set on the step's state and record id). Each blocked dependent of an ended step
is then decided by :func:`decide_dependent` from its dependencies' gates: wait while any of
them waits, skip when any skips, release otherwise. A step that failed under
``on_failure="fail"`` fails the whole workflow (:func:`fails_workflow`); a workflow whose
steps have all ended reaches :func:`workflow_end`.

:func:`plan` is the same rule applied to a whole workflow at once (what the property tests
compare the incremental release with): it depends on the states alone, never on the order in
which the steps ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from dogs_core.domain.params import bson_document_size
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord, JobStatus
from dogs_core.domain.workflow_records import (
    ENDED_STEP_STATES,
    MAX_STEP_RESULT_BYTES,
    Dependent,
    FinishedWorkflow,
    Gate,
    ReleasedStep,
    StepEnding,
    StepOutcome,
    StepRecord,
    StepRelease,
    StepSkip,
    StepState,
    WorkflowState,
    gate_of,
)
from dogs_core.domain.workflows import FailurePolicy

__all__ = [
    "MISSING_ROW_GRACE",
    "Plan",
    "StepNode",
    "bounded_result",
    "decide_dependent",
    "evidence_ending",
    "fails_workflow",
    "plan",
    "row_ending",
    "workflow_end",
]

#: How long a released step's record must have been seen gone, without any history row, before
#: the step counts as failed (its record was deleted, or its job keeps no history). A Python
#: worker writes the row before it deletes the record; a Node worker writes it just after,
#: fire-and-forget: under load, seconds later. Counted from the first sight of the gap, never
#: from the release (a step that ran for an hour is not judged at first sight).
MISSING_ROW_GRACE: Final = timedelta(seconds=30)

_ENDED_BY_ROW: Final = {
    HistoryStatus.SUCCESS: StepState.SUCCEEDED,
    HistoryStatus.CANCELLED: StepState.CANCELLED,
}


def decide_dependent(dependent: Dependent) -> StepState | None:
    """What happens to a blocked step now: ``None`` (wait: a dependency has not ended),
    ``skipped`` (a dependency skips it) or ``released``."""
    if dependent.waiting:
        return None
    if dependent.skipping:
        return StepState.SKIPPED
    return StepState.RELEASED


def row_ending(step: ReleasedStep, row: HistoryRecord) -> StepEnding | None:
    """The end a success row of the step's record says at once (any other row needs the
    record too: :func:`evidence_ending`), else ``None``."""
    if row.job_id != step.record_id or row.status is not HistoryStatus.SUCCESS:
        return None
    return _ending(step, StepState.SUCCEEDED, row, row.ended_at)


def evidence_ending(
    step: ReleasedStep,
    record: JobRecord | None,
    newest: HistoryRecord | None,
    *,
    now: datetime,
    missing_since: datetime | None = None,
    grace: timedelta = MISSING_ROW_GRACE,
) -> StepEnding | None:
    """Whether the released ``step`` has ended, from its record (``None``: gone) and the
    newest history row of that record, as ``wait_for`` decides a job's end: a success row
    ends it; otherwise its job has ended once its record is gone or failed (its attempt
    limit), with the newest row's status (``cancelled`` by an operator, else ``failed``); a
    record gone without any row counts as failed once it has been so for ``grace`` since
    ``missing_since`` (when the caller first saw it so; ``None``: not known, it waits)."""
    if newest is not None and newest.job_id != step.record_id:
        newest = None
    if newest is not None and newest.status is HistoryStatus.SUCCESS:
        return _ending(step, StepState.SUCCEEDED, newest, newest.ended_at)
    terminal = record is not None and record.status is JobStatus.MAX_TRIES_REACHED
    if record is not None and not terminal:
        return None
    if newest is None:
        if terminal:
            assert record is not None
            ended_at = record.max_tries_reached_at or now
            return _ending(step, StepState.FAILED, None, ended_at, "its attempt limit")
        if missing_since is None or now - missing_since < grace:
            return None
        reason = "its record is gone and it left no history row"
        return _ending(step, StepState.FAILED, None, now, reason)
    state = _ENDED_BY_ROW.get(newest.status, StepState.FAILED)
    return _ending(step, state, newest, newest.ended_at)


def _ending(
    step: ReleasedStep,
    state: StepState,
    row: HistoryRecord | None,
    ended_at: datetime,
    message: str | None = None,
) -> StepEnding:
    if row is None:
        outcome = StepOutcome(status=None, ended_at=ended_at, error_message=message)
    else:
        result, omitted = bounded_result(row.result)
        outcome = StepOutcome(
            status=row.status,
            ended_at=row.ended_at,
            execution_id=row.execution_id,
            error_message=row.error_message,
            result=result,
            result_omitted=omitted,
        )
    return StepEnding(
        step_id=step.id,
        workflow_id=step.workflow_id,
        record_id=step.record_id,
        state=state,
        gate=gate_of(state, step.policy),
        outcome=outcome,
        policy=step.policy,
        leaf=step.leaf,
    )


def bounded_result(result: Any) -> tuple[Any, bool]:
    """``(result, False)``, or ``(None, True)`` when it is over
    :data:`~dogs_core.domain.workflow_records.MAX_STEP_RESULT_BYTES` as BSON."""
    if result is None or isinstance(result, bool | int | float):
        return result, False
    try:
        size = bson_document_size({"result": result})
    except (TypeError, ValueError):
        return None, True
    return (None, True) if size > MAX_STEP_RESULT_BYTES else (result, False)


def fails_workflow(state: StepState, policy: FailurePolicy) -> bool:
    """Whether a step that ended in ``state`` under ``policy`` fails its workflow."""
    return policy is FailurePolicy.FAIL and state in (StepState.FAILED, StepState.CANCELLED)


def workflow_end(counts: Mapping[StepState, int], *, failing: bool = False) -> WorkflowState | None:
    """The state a running workflow reaches once no step is blocked or released: ``failed``
    when a step ended as :func:`fails_workflow` says (``failing``: its own ``fail_workflow``
    may not be written yet, cut by a crash, while the end of another step is), ``succeeded``
    when every step succeeded, else ``completed``; ``None`` while some are."""
    if counts.get(StepState.BLOCKED, 0) or counts.get(StepState.RELEASED, 0):
        return None
    if failing:
        return WorkflowState.FAILED
    others = sum(count for state, count in counts.items() if state is not StepState.SUCCEEDED)
    return WorkflowState.SUCCEEDED if others == 0 else WorkflowState.COMPLETED


# -- the whole workflow at once ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepNode:
    """A step as :func:`plan` sees it: its dependencies and its policy."""

    after: tuple[str, ...]
    policy: FailurePolicy = FailurePolicy.FAIL


@dataclass(frozen=True, slots=True)
class Plan:
    """What follows a workflow's states: steps to release, steps to skip, whether the
    workflow fails now, and the state it ends in (``None``: it goes on)."""

    release: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    fail: bool = False
    end: WorkflowState | None = None
    states: Mapping[str, StepState] = field(default_factory=dict)
    """Every step's state once the plan is applied."""


def plan(
    steps: Mapping[str, StepNode],
    states: Mapping[str, StepState],
    workflow: WorkflowState = WorkflowState.RUNNING,
) -> Plan:
    """Everything the rule decides for ``steps`` in ``states`` (a running workflow): the
    fixpoint of :func:`decide_dependent` over every blocked step (a skip cascades), or, when a
    step failed under ``fail``, the workflow's failure (every blocked step skipped)."""
    current = dict(states)
    if workflow is not WorkflowState.RUNNING:
        return Plan(states=current)
    if any(fails_workflow(current[name], node.policy) for name, node in steps.items()):
        skip = frozenset(name for name, state in current.items() if state is StepState.BLOCKED)
        current.update(dict.fromkeys(skip, StepState.SKIPPED))
        return Plan(skip=skip, fail=True, end=WorkflowState.FAILED, states=current)
    release: set[str] = set()
    skip_set: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in steps.items():
            if current[name] is not StepState.BLOCKED:
                continue
            gates = [gate_of(current[parent], steps[parent].policy) for parent in node.after]
            decided = decide_dependent(_dependent(name, gates))
            if decided is StepState.RELEASED:
                release.add(name)
                current[name] = StepState.RELEASED
            elif decided is StepState.SKIPPED:
                skip_set.add(name)
                current[name] = StepState.SKIPPED
                changed = True
    counts = _counts(current.values())
    return Plan(
        release=frozenset(release),
        skip=frozenset(skip_set),
        end=workflow_end(counts),
        states=current,
    )


def _dependent(name: str, gates: Iterable[Gate]) -> Dependent:
    listed = list(gates)
    return Dependent(
        id=name,
        workflow_id="",
        generation=0,
        waiting=Gate.WAIT in listed,
        skipping=Gate.SKIP in listed,
    )


def _counts(states: Iterable[StepState]) -> dict[StepState, int]:
    counts = dict.fromkeys(StepState, 0)
    for state in states:
        counts[state] += 1
    return counts


def has_ended(state: StepState) -> bool:
    """Whether a step in ``state`` has ended."""
    return state in ENDED_STEP_STATES


@dataclass(frozen=True, slots=True)
class Ended:
    """An ended (or skipped) step whose consequences are to be written."""

    step_id: str
    workflow_id: str
    fails_workflow: bool = False
    leaf: bool = False
    """No step depends on it: nothing to release after it, and its workflow may end."""

    @classmethod
    def of_ending(cls, ending: StepEnding) -> Ended:
        fails = fails_workflow(ending.state, ending.policy)
        return cls(ending.step_id, ending.workflow_id, fails, ending.leaf)

    @classmethod
    def of_step(cls, step: StepRecord) -> Ended:
        fails = fails_workflow(step.state, step.policy)
        return cls(step.id, step.workflow_id, fails, not step.children)


@dataclass(slots=True)
class Advanced:
    """What one call wrote itself (another caller's writes are not in it)."""

    ended: list[StepEnding] = field(default_factory=list)
    released: list[StepRelease] = field(default_factory=list)
    skipped: list[StepSkip] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """Workflows this call failed."""
    finished: list[FinishedWorkflow] = field(default_factory=list)

    def add(self, other: Advanced) -> None:
        self.ended.extend(other.ended)
        self.released.extend(other.released)
        self.skipped.extend(other.skipped)
        self.failed.extend(other.failed)
        self.finished.extend(other.finished)


def cancelled_ending(step: ReleasedStep, now: datetime) -> StepEnding:
    """The end of a released step whose job ``cancel_workflow`` removed."""
    return StepEnding(
        step_id=step.id,
        workflow_id=step.workflow_id,
        record_id=step.record_id,
        state=StepState.CANCELLED,
        gate=gate_of(StepState.CANCELLED, step.policy),
        outcome=StepOutcome(status=HistoryStatus.CANCELLED, ended_at=now),
        policy=step.policy,
        leaf=step.leaf,
    )
