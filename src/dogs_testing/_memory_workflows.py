"""The workflows role of the in-memory store (:class:`~dogs_core.ports.WorkflowStore`): the
workflows and their steps beside the state, each call one atomic step under the state's lock
(as MongoDB's transactions and compare-and-sets make them), so a test can crash a caller
between two calls and see the next one finish the work. See :mod:`dogs_core.ports.workflows`.

A released step's record is inserted as ``schedule`` inserts one (the records feed hears of
it); every change of a workflow or of one of its steps is offered to the workflows feed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Sequence
from datetime import datetime

from dogs_core.domain import validation
from dogs_core.domain.records import HistoryRecord, JobRecord, JobStatus, NewJob, to_millis
from dogs_core.domain.workflow_records import (
    ENDED_WORKFLOW_STATES,
    Dependent,
    FinishedWorkflow,
    Gate,
    NewWorkflow,
    ReleasedStep,
    StepEnding,
    StepRecord,
    StepRelease,
    StepSkip,
    StepState,
    WorkflowRecord,
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)
from dogs_core.domain.workflow_release import fails_workflow, workflow_end
from dogs_core.domain.workflow_start import release_job
from dogs_core.errors import StoreError
from dogs_testing._memory_scheduling import _refuse_session
from dogs_testing._memory_state import MemoryState, _history_row, _out

__all__ = ["MemoryWorkflows"]

#: The states a retry puts back to blocked.
_RETRIED = frozenset({StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED})


@dataclasses.dataclass(slots=True)
class _Tables:
    workflows: dict[str, WorkflowRecord] = dataclasses.field(default_factory=dict)
    steps: dict[str, StepRecord] = dataclasses.field(default_factory=dict)
    order: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # workflow -> steps
    by_record: dict[str, str] = dataclasses.field(default_factory=dict)  # record -> step
    seq: dict[str, int] = dataclasses.field(default_factory=dict)  # workflow -> insert order


class MemoryWorkflows(MemoryState):
    """The workflows part of the sync face, over :class:`MemoryState`."""

    def _wf(self) -> _Tables:
        tables: _Tables = self.__dict__.setdefault("_workflow_tables", _Tables())
        return tables

    def setup_workflows(self) -> None:
        """Nothing to create in memory."""

    def insert_workflows(
        self, workflows: Sequence[NewWorkflow], *, session: object | None = None
    ) -> None:
        _refuse_session(session)
        with self._state():
            tables = self._wf()
            # a retry of an insert that landed leaves the stored ones as they are
            new = [w for w in workflows if w.workflow.id not in tables.workflows]
            seen: set[str] = set()
            for record_id in (record.id for workflow in new for record in workflow.records):
                if record_id in self._records or record_id in seen:
                    raise StoreError(f"insert_workflows: duplicate record id {record_id!r}")
                seen.add(record_id)
            for workflow in new:
                self._insert_workflow(workflow)

    def _insert_workflow(self, workflow: NewWorkflow) -> None:
        tables = self._wf()
        tables.workflows[workflow.workflow.id] = _ms_workflow(workflow.workflow)
        tables.seq[workflow.workflow.id] = len(tables.seq)
        tables.order[workflow.workflow.id] = [step.id for step in workflow.steps]
        for step in workflow.steps:
            tables.steps[step.id] = _ms_step(step)
            if step.record_id is not None:
                tables.by_record[step.record_id] = step.id
        for record in workflow.records:
            self._insert(record)
        self._feeds.offer_workflow(workflow.workflow.id)

    def get_workflow(self, workflow_id: str) -> WorkflowView | None:
        with self._state():
            tables = self._wf()
            workflow = tables.workflows.get(workflow_id)
            if workflow is None:
                return None
            steps = tuple(tables.steps[step] for step in tables.order[workflow_id])
            return WorkflowView(workflow=workflow, steps=steps)

    def find_workflows(
        self, *, state: WorkflowState | None = None, limit: int = 50, skip: int = 0
    ) -> list[WorkflowSummary]:
        validation.integer("limit", limit, minimum=0)
        validation.integer("skip", skip, minimum=0)
        wanted = None if state is None else WorkflowState(state)
        with self._state():
            tables = self._wf()
            chosen = [
                workflow
                for workflow in tables.workflows.values()
                if wanted is None or workflow.state is wanted
            ]
            chosen.sort(key=lambda w: (w.created_at, tables.seq[w.id]), reverse=True)
            summaries = []
            for workflow in chosen[skip : skip + limit]:
                counts = dict.fromkeys(StepState, 0)
                for step_id in tables.order[workflow.id]:
                    counts[tables.steps[step_id].state] += 1
                summaries.append(WorkflowSummary(workflow=workflow, counts=counts))
            return summaries

    def released_steps(
        self,
        *,
        record_ids: Sequence[str] | None = None,
        workflow_id: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[ReleasedStep]:
        validation.integer("limit", limit, minimum=0)
        with self._state():
            tables = self._wf()
            current = None if record_ids is None else frozenset(record_ids)
            if record_ids is not None:
                candidates = [tables.by_record[r] for r in record_ids if r in tables.by_record]
            elif workflow_id is not None:
                candidates = list(tables.order.get(workflow_id, ()))
            else:
                candidates = list(tables.steps)
            found = []
            for step_id in sorted(set(candidates)):
                step = tables.steps[step_id]
                if after is not None and step_id <= after:
                    continue
                if step.state is not StepState.RELEASED or step.record_id is None:
                    continue
                if current is None or step.record_id in current:
                    found.append(_released_ref(step))
            return found[:limit]

    def step_evidence(
        self, record_ids: Sequence[str]
    ) -> dict[str, tuple[JobRecord | None, HistoryRecord | None]]:
        with self._state():
            evidence: dict[str, tuple[JobRecord | None, HistoryRecord | None]] = {}
            for record_id in dict.fromkeys(record_ids):
                record = self._records.get(record_id)
                evidence[record_id] = (
                    None if record is None else _out(record),
                    self._newest_row(record_id),
                )
            return evidence

    def _newest_row(self, job_id: str) -> HistoryRecord | None:
        keys = self._history_by_job.get(job_id)
        if not keys:
            return None
        rows = [self._history[key] for key in keys]
        newest = max(
            rows, key=lambda r: (r.started_at, r.ended_at, self._history_seq[r.execution_id])
        )
        return _history_row(newest)

    def end_steps(self, endings: Sequence[StepEnding], *, now: datetime) -> list[StepEnding]:
        with self._state():
            tables = self._wf()
            written = []
            for ending in endings:
                step = tables.steps.get(ending.step_id)
                if (
                    step is None
                    or step.state is not StepState.RELEASED
                    or step.record_id != ending.record_id
                ):
                    continue
                outcome = dataclasses.replace(
                    ending.outcome, ended_at=to_millis(ending.outcome.ended_at)
                )
                tables.steps[step.id] = dataclasses.replace(
                    step,
                    state=ending.state,
                    gate=ending.gate,
                    ended_at=to_millis(now),
                    outcome=outcome,
                    pending=True,
                )
                written.append(ending)
                self._feeds.offer_workflow(step.workflow_id)
            return written

    def dependents(self, step_ids: Sequence[str]) -> list[Dependent]:
        with self._state():
            tables = self._wf()
            children: dict[str, None] = {}
            for step_id in step_ids:
                step = tables.steps.get(step_id)
                if step is not None:
                    children.update(dict.fromkeys(step.children))
            return self._views(tables, children)

    def blocked_steps(self, step_ids: Sequence[str]) -> list[Dependent]:
        with self._state():
            return self._views(self._wf(), dict.fromkeys(step_ids))

    def _views(self, tables: _Tables, step_ids: dict[str, None]) -> list[Dependent]:
        views = []
        for step_id in step_ids:
            step = tables.steps.get(step_id)
            if step is None or step.state is not StepState.BLOCKED:
                continue
            gates = {tables.steps[parent].gate for parent in step.after}
            views.append(
                Dependent(
                    id=step.id,
                    workflow_id=step.workflow_id,
                    generation=step.generation,
                    waiting=Gate.WAIT in gates,
                    skipping=Gate.SKIP in gates,
                )
            )
        return views

    def release_steps(self, releases: Sequence[StepRelease], *, now: datetime) -> list[StepRelease]:
        at = to_millis(now)
        with self._state():
            tables = self._wf()
            written = []
            for release in releases:
                step = tables.steps.get(release.step_id)
                if (
                    step is None
                    or step.state is not StepState.BLOCKED
                    or step.generation != release.generation
                    or release.record_id in self._records
                ):
                    continue
                released = dataclasses.replace(
                    step, state=StepState.RELEASED, record_id=release.record_id, released_at=at
                )
                job = self._release_job(tables, released, at)
                tables.steps[step.id] = released
                tables.by_record[release.record_id] = step.id
                self._insert(job)
                written.append(release)
                self._feeds.offer_workflow(step.workflow_id)
            return written

    def repair_releases(self, *, limit: int = 1000) -> int:
        if limit < 0:
            raise ValueError(f"limit={limit!r}: must not be negative")
        return 0  # a release here is one write under the store's lock: none is ever cut

    def _release_job(self, tables: _Tables, step: StepRecord, now: datetime) -> NewJob:
        parents = [tables.steps[parent] for parent in step.after]
        if not step.summary:
            return release_job(step, record_id=step.record_id or "", now=now, upstream=parents)
        counts = dict.fromkeys(StepState, 0)
        failed = []
        for parent in parents:
            counts[parent.state] += 1
            if parent.state in (StepState.FAILED, StepState.CANCELLED):
                failed.append(parent.id)
        batch = (counts, failed)
        return release_job(step, record_id=step.record_id or "", now=now, batch=batch)

    def skip_steps(self, skips: Sequence[StepSkip], *, now: datetime) -> list[StepSkip]:
        with self._state():
            tables = self._wf()
            written = []
            for skip in skips:
                step = tables.steps.get(skip.step_id)
                if (
                    step is None
                    or step.state is not StepState.BLOCKED
                    or step.generation != skip.generation
                ):
                    continue
                tables.steps[step.id] = _skipped(step, now, pending=True)
                written.append(skip)
                self._feeds.offer_workflow(step.workflow_id)
            return written

    def fail_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        with self._state():
            tables = self._wf()
            workflow = tables.workflows.get(workflow_id)
            if workflow is None or workflow.state is not WorkflowState.RUNNING:
                return False
            for step_id in tables.order[workflow_id]:
                step = tables.steps[step_id]
                if step.state is StepState.BLOCKED:
                    tables.steps[step_id] = _skipped(step, now, pending=False)
            tables.workflows[workflow_id] = dataclasses.replace(
                workflow, state=WorkflowState.FAILED, ended_at=to_millis(now)
            )
            self._feeds.offer_workflow(workflow_id)
            return True

    def finish_workflows(
        self, workflow_ids: Sequence[str], *, now: datetime
    ) -> list[FinishedWorkflow]:
        with self._state():
            tables = self._wf()
            finished = []
            for workflow_id in dict.fromkeys(workflow_ids):
                workflow = tables.workflows.get(workflow_id)
                if workflow is None or workflow.state is not WorkflowState.RUNNING:
                    continue
                counts = dict.fromkeys(StepState, 0)
                failing = False
                for step_id in tables.order[workflow_id]:
                    step = tables.steps[step_id]
                    counts[step.state] += 1
                    failing = failing or fails_workflow(step.state, step.policy)
                end = workflow_end(counts, failing=failing)
                if end is None:
                    continue
                tables.workflows[workflow_id] = dataclasses.replace(
                    workflow, state=end, ended_at=to_millis(now)
                )
                self._feeds.offer_workflow(workflow_id)
                finished.append(FinishedWorkflow(workflow_id, end))
            return finished

    def settle_steps(self, step_ids: Sequence[str]) -> None:
        with self._state():
            tables = self._wf()
            for step_id in step_ids:
                step = tables.steps.get(step_id)
                if step is not None and step.pending:
                    tables.steps[step_id] = dataclasses.replace(step, pending=False)

    def pending_steps(self, *, limit: int = 1000) -> list[StepRecord]:
        validation.integer("limit", limit, minimum=0)
        with self._state():
            tables = self._wf()
            pending = [step for step in tables.steps.values() if step.pending]
            pending.sort(key=lambda step: step.id)
            return pending[:limit]

    def cancel_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        at = to_millis(now)
        with self._state():
            tables = self._wf()
            workflow = tables.workflows.get(workflow_id)
            if workflow is None or workflow.state is not WorkflowState.RUNNING:
                return False
            tables.workflows[workflow_id] = dataclasses.replace(
                workflow, state=WorkflowState.CANCELLED, ended_at=at
            )
            for step_id in tables.order[workflow_id]:
                step = tables.steps[step_id]
                if step.state is StepState.BLOCKED:
                    tables.steps[step_id] = dataclasses.replace(
                        step, state=StepState.CANCELLED, gate=Gate.SKIP, ended_at=at
                    )
            self._feeds.offer_workflow(workflow_id)
            return True

    def retry_workflow(self, workflow_id: str, *, now: datetime) -> list[str] | None:
        with self._state():
            tables = self._wf()
            workflow = tables.workflows.get(workflow_id)
            if workflow is None or workflow.state not in ENDED_WORKFLOW_STATES - {
                WorkflowState.SUCCEEDED
            }:
                return None
            reset = []
            for step_id in tables.order[workflow_id]:
                step = tables.steps[step_id]
                if step.state not in _RETRIED:
                    continue
                record = None if step.record_id is None else self._records.get(step.record_id)
                if record is not None and record.status is JobStatus.MAX_TRIES_REACHED:
                    self._put(record, None)
                tables.steps[step_id] = _blocked_again(step)
                reset.append(step_id)
            tables.workflows[workflow_id] = dataclasses.replace(
                workflow,
                state=WorkflowState.RUNNING,
                ended_at=None,
                generation=workflow.generation + 1,
            )
            self._feeds.offer_workflow(workflow_id)
            return reset

    def watch_step_rows(
        self, *, except_instance: str | None = None
    ) -> Generator[list[HistoryRecord], None, None]:
        """Every history row as first written but those whose owner is ``except_instance``
        (the in-memory store does not tell a Node row: the release looks each one up)."""
        return self._feeds.step_rows(except_instance)

    def watch_workflows(self, workflow_ids: Sequence[str]) -> Generator[list[str], None, None]:
        return self._feeds.workflows(workflow_ids)


def _released_ref(step: StepRecord) -> ReleasedStep:
    assert step.record_id is not None
    assert step.released_at is not None
    return ReleasedStep(
        id=step.id,
        workflow_id=step.workflow_id,
        record_id=step.record_id,
        policy=step.policy,
        generation=step.generation,
        released_at=step.released_at,
        leaf=not step.children,
    )


def _skipped(step: StepRecord, now: datetime, *, pending: bool) -> StepRecord:
    return dataclasses.replace(
        step, state=StepState.SKIPPED, gate=Gate.SKIP, ended_at=to_millis(now), pending=pending
    )


def _blocked_again(step: StepRecord) -> StepRecord:
    return dataclasses.replace(
        step,
        state=StepState.BLOCKED,
        gate=Gate.WAIT,
        generation=step.generation + 1,
        record_id=None,
        released_at=None,
        ended_at=None,
        outcome=None,
        pending=False,
    )


def _ms_workflow(workflow: WorkflowRecord) -> WorkflowRecord:
    return dataclasses.replace(workflow, created_at=to_millis(workflow.created_at))


def _ms_step(step: StepRecord) -> StepRecord:
    released = None if step.released_at is None else to_millis(step.released_at)
    return dataclasses.replace(step, released_at=released)
