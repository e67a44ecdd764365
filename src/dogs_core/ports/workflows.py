"""The workflows role, optional: workflows and their steps, kept apart from Dogs' records
until each step is released (``client.start_workflow``, the release in every ``Workers``,
``dogs workflows``). A store that has it lists
:attr:`~dogs_core.ports.common.Role.WORKFLOWS` in its ``roles``; the values are in
:mod:`dogs_core.domain.workflow_records`, the decisions in
:mod:`dogs_core.domain.workflow_release`.

The guarantees every store gives (``dogs_testing.contract.WorkflowContract`` checks them):

Invisible while blocked
    A blocked step has no record: its record is inserted when it is released, in the same
    atomic step as its state becomes ``released`` (MongoDB: one transaction), so a Dogs 4.6.8
    claim never sees a blocked step, and a released step always has its record.
Exactly once
    Every write that decides on a step is a compare-and-set on its state, fenced by its
    ``generation`` (a release, a skip) or its ``record_id`` (an end): of concurrent callers
    deciding the same thing, one writes and the others write nothing, and each call returns
    what it wrote itself. So each release of a step inserts one record, whoever releases it.
Atomic start
    :meth:`insert_workflows` writes the workflows, their steps and the records of their steps
    without dependencies all or nothing (MongoDB: in the caller's transaction with
    ``session=``, else in one of its own); inserting the same workflow again (a retry after a
    lost reply) writes nothing.
Resumable
    An end's consequences are written in steps (its dependents released or skipped, the
    workflow failed or ended); a step keeps ``pending`` set until they all are, so that
    :meth:`pending_steps` shows what a crashed caller left, and doing it again is harmless.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import HistoryRecord, JobRecord
from dogs_core.domain.workflow_records import (
    Dependent,
    FinishedWorkflow,
    NewWorkflow,
    ReleasedStep,
    StepEnding,
    StepRecord,
    StepRelease,
    StepSkip,
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)

__all__ = ["AsyncWorkflowStore"]


@runtime_checkable
class AsyncWorkflowStore(Protocol):
    """Workflows and their steps (optional)."""

    async def setup_workflows(self) -> None:
        """Create the workflows' collections and indexes. Idempotent."""
        ...

    async def insert_workflows(
        self, workflows: Sequence[NewWorkflow], *, session: object | None = None
    ) -> None:
        """Insert ``workflows`` atomically, all of them or none (see the module); those
        already stored (a retry after a lost reply) are left as they are. ``session`` as for
        ``insert_job``: a store that cannot join it raises
        :class:`~dogs_core.errors.SessionNotSupportedError` and writes nothing."""
        ...

    async def get_workflow(self, workflow_id: str) -> WorkflowView | None:
        """The workflow and all its steps (in the order they were added), or ``None``."""
        ...

    async def find_workflows(
        self, *, state: WorkflowState | None = None, limit: int = 50, skip: int = 0
    ) -> list[WorkflowSummary]:
        """Workflows (of one ``state``), newest first, with their step counts per state."""
        ...

    async def released_steps(
        self,
        *,
        record_ids: Sequence[str] | None = None,
        workflow_id: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[ReleasedStep]:
        """Released steps in step-id order: those whose current record is one of
        ``record_ids``, or of ``workflow_id``, or all of them (a sweep), from the step id
        ``after`` on, at most ``limit``."""
        ...

    async def step_evidence(
        self, record_ids: Sequence[str]
    ) -> dict[str, tuple[JobRecord | None, HistoryRecord | None]]:
        """For each record id: its record (``None`` when gone) and its newest history row
        (``None`` when it has none), what :func:`~dogs_core.domain.workflow_release.
        evidence_ending` decides from."""
        ...

    async def end_steps(self, endings: Sequence[StepEnding], *, now: datetime) -> list[StepEnding]:
        """Write each end on a step still ``released`` as its ``record_id`` (and mark it
        ``pending``); the endings this call wrote."""
        ...

    async def dependents(self, step_ids: Sequence[str]) -> list[Dependent]:
        """The blocked steps that depend on any of ``step_ids``, each with whether any of its
        dependencies still waits and whether any skips it (gates as stored now)."""
        ...

    async def blocked_steps(self, step_ids: Sequence[str]) -> list[Dependent]:
        """Those of ``step_ids`` that are blocked, as :meth:`dependents` describes them."""
        ...

    async def release_steps(
        self, releases: Sequence[StepRelease], *, now: datetime
    ) -> list[StepRelease]:
        """Release each step still blocked at its generation: its state ``released`` with
        ``record_id`` and its record inserted (:func:`~dogs_core.domain.workflow_start.
        release_job`, with its dependencies' outcomes as stored now). A step's record is
        claimable only once its step says ``released`` with that record id, and never twice;
        a store may write the two in separate steps that a crash can cut, as long as
        :meth:`repair_releases` finishes or undoes what it left. The releases this call
        wrote."""
        ...

    async def repair_releases(self, *, limit: int = 1000) -> int:
        """Finish or undo releases a crash cut between their writes (a store whose
        :meth:`release_steps` is one atomic write has none: it returns 0): a step's record
        written but not yet claimable becomes claimable when its step is released with it, and
        is removed when its step went on without it (released with another record, skipped,
        cancelled); it is left while its step is still blocked (a release may be under way).
        How many records it repaired (at most ``limit`` looked at)."""
        ...

    async def skip_steps(self, skips: Sequence[StepSkip], *, now: datetime) -> list[StepSkip]:
        """Skip each step still blocked at its generation (and mark it ``pending``); the
        skips this call wrote."""
        ...

    async def fail_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        """Skip every blocked step of a running workflow, then mark it ``failed``. Whether
        this call failed it."""
        ...

    async def finish_workflows(
        self, workflow_ids: Sequence[str], *, now: datetime
    ) -> list[FinishedWorkflow]:
        """End each running workflow of ``workflow_ids`` none of whose steps is blocked or
        released (:func:`~dogs_core.domain.workflow_release.workflow_end`); the workflows this
        call ended, with the state it set (a few reads and one write for the lot: the ends of
        a busy fleet's steps come in batches)."""
        ...

    async def settle_steps(self, step_ids: Sequence[str]) -> None:
        """Clear ``pending`` on these steps: their end's consequences are written."""
        ...

    async def pending_steps(self, *, limit: int = 1000) -> list[StepRecord]:
        """Steps whose end's consequences may not all be written (``pending``)."""
        ...

    async def cancel_workflow(self, workflow_id: str, *, now: datetime) -> bool:
        """Mark a running workflow ``cancelled``, then every blocked step of it. Whether this
        call cancelled it (its released steps are the caller's to stop)."""
        ...

    async def retry_workflow(self, workflow_id: str, *, now: datetime) -> list[str] | None:
        """Put a failed, completed or cancelled workflow back to ``running`` (its generation
        plus one) and its failed, skipped and cancelled steps back to ``blocked`` (theirs plus
        one), deleting the failed records they leave; the ids of the steps put back, or
        ``None`` when the workflow was not in one of those states."""
        ...

    def watch_step_rows(
        self, *, except_instance: str | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        """A feed of the history rows that may end a step: every first write of a row of a
        workflow step's execution (``workflow_id`` set) and of a row written by another
        writer (Node Dogs workers do not know workflows), but for the rows whose ``owner`` is
        the ``Workers`` instance ``except_instance`` (that instance hands its own steps' ends
        to its release from its settle path). See :mod:`dogs_core.ports.feeds` for the shape
        every feed has."""
        ...

    def watch_workflows(self, workflow_ids: Sequence[str]) -> AsyncGenerator[list[str], None]:
        """A feed of the ids of ``workflow_ids`` whose workflow changed (a notification: read
        it with :meth:`get_workflow`)."""
        ...
