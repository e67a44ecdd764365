"""Workflows as the clients offer them: ``start_workflow``, ``get_workflow``,
``list_workflows``, ``wait_for_workflow``, ``cancel_workflow`` and ``retry_workflow``, through
the store's workflows role (:class:`~dogs_core.ports.AsyncWorkflowStore`). See
docs/workflows.md.

This module is the source of truth; ``_sync/workflows.py`` is generated from it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import anyio

from dogs_core.domain.audit import AuditAction
from dogs_core.domain.events import (
    WorkflowFinished,
    WorkflowStartEnded,
    WorkflowStarting,
)
from dogs_core.domain.partitions import assign_partition
from dogs_core.domain.steering import Cancelled, NotFound
from dogs_core.domain.workflow_records import (
    ENDED_WORKFLOW_STATES,
    NewWorkflow,
    ReleasedStep,
    StepEnding,
    WorkflowCancelled,
    WorkflowRetried,
    WorkflowStarted,
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)
from dogs_core.domain.workflow_release import Advanced, cancelled_ending, evidence_ending
from dogs_core.domain.workflow_start import compile_workflow, with_trace_context
from dogs_core.domain.workflows import MAX_WORKFLOW_STEPS, Workflow
from dogs_core.errors import (
    ChangeFeedUnavailableError,
    InvalidOptionError,
    WorkflowNotFoundError,
    WorkflowStateError,
    WorkflowTimeoutError,
)
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncJobStore, AsyncWorkflowStore, Role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client._async.steering import SteeringClient
from dogs_core.runtime.client.calls import (
    CANCEL_PAGE,
    MAX_WORKFLOW_PAGE,
    start_label,
    workflow_state,
)
from dogs_core.runtime.client.scheduling import (
    in_transaction,
    validate_job_id,
    validate_session,
    validate_wait,
)
from dogs_core.runtime.plumbing._async.advance import end_steps, release_blocked
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.telemetry import Telemetry, next_call_id, tell_advanced

__all__ = ["WorkflowClient"]

logger = logging.getLogger("dogs.workflows")


class WorkflowClient(SteeringClient):
    """Start, read, wait for, cancel and retry workflows."""

    store: AsyncJobStore
    telemetry: Telemetry
    operation_timeout: float | None

    async def _ensure_setup(self) -> bool:
        """The store's setup and clock (the client implements it: ``DogsClient``)."""
        raise NotImplementedError

    async def _workflows(self, feature: str) -> tuple[AsyncWorkflowStore, bool]:
        """The store's workflows role (``feature`` is named if it has none), its collections
        and indexes created once; and whether the clock's offset changed (times computed before
        are computed again)."""
        store = require_role(self.store, Role.WORKFLOWS, feature)
        changed = await self._ensure_setup()
        if not getattr(self, "_workflows_ready", False):
            await retry_transient(
                store.setup_workflows, what="workflows setup", deadline=self.operation_timeout
            )
            self._workflows_ready = True
        return store, changed

    # -- starting -----------------------------------------------------------------------------

    async def start_workflow(
        self, workflow: Workflow, *, session: object | None = None
    ) -> WorkflowStarted:
        """Store ``workflow`` and release its steps without dependencies, all at once: the
        workflow, its steps and their first records are written atomically (MongoDB: in the
        caller's transaction with ``session=``, else in one of its own).

        Every check happens before anything is written and names the step:
        :class:`~dogs_core.errors.InvalidWorkflowError` (an unknown step in ``after``, a
        cycle, a bad policy, an unknown job, too many steps...) or
        :class:`~dogs_core.errors.InvalidParamsError` (a step's params that do not validate).
        A store without the workflows role raises
        :class:`~dogs_core.errors.MissingRoleError`; a MongoDB server without transactions (a
        standalone one) :class:`~dogs_core.errors.TransactionsNotSupportedError`.
        """
        validate_session(session)
        if not isinstance(workflow, Workflow):
            raise InvalidOptionError("workflow", workflow, "must be a Workflow (or a Batch)")
        require_role(self.store, Role.WORKFLOWS, "start_workflow")
        (started,) = await self.start_workflows([workflow], session=session)
        return started

    async def start_workflows(
        self, workflows: Sequence[Workflow], *, session: object | None = None
    ) -> list[WorkflowStarted]:
        """:meth:`start_workflow` for many at once, all of them or none, in one write (MongoDB:
        one transaction, or the caller's with ``session=``): a thousand workflows cost one
        transaction, not a thousand. Every workflow is checked before anything is written; at
        most :data:`~dogs_core.domain.workflows.MAX_WORKFLOW_STEPS` steps in all (else start
        them in several calls). The started workflows, in the order given."""
        validate_session(session)
        if isinstance(workflows, Workflow) or not isinstance(workflows, Sequence):
            raise InvalidOptionError(
                "workflows", workflows, "must be a list of Workflow (or Batch) objects"
            )
        for index, workflow in enumerate(workflows):
            if not isinstance(workflow, Workflow):
                raise InvalidOptionError(
                    f"workflows[{index}]", workflow, "must be a Workflow (or a Batch)"
                )
        if not workflows:
            return []
        require_role(self.store, Role.WORKFLOWS, "start_workflows")
        compiled = self._compile_all(workflows)  # every check, before any I/O
        store, clock_changed = await self._workflows("start_workflows")
        if clock_changed:
            compiled = self._compile_all(workflows)  # on the clock just measured
        startings = self._starting(workflows, compiled)
        compiled = [
            compiled_one if starting is None or not starting.trace_context
            else with_trace_context(compiled_one, starting.trace_context)
            for compiled_one, starting in zip(compiled, startings, strict=True)
        ]  # fmt: skip
        began = time.monotonic()
        error: BaseException | None = None
        try:
            if in_transaction(session):
                await store.insert_workflows(compiled, session=session)
            else:
                await retry_transient(
                    lambda: store.insert_workflows(compiled, session=session),
                    what=start_label(workflows, compiled),
                    deadline=self.operation_timeout,
                )
        except BaseException as raised:
            error = raised
            raise
        finally:
            self._start_ended(workflows, compiled, startings, time.monotonic() - began, error)
        steps = sum(len(one.steps) for one in compiled)
        released = sum(len(one.records) for one in compiled)
        label = start_label(workflows, compiled).removeprefix("start ")
        logger.info("started %s: %d steps, %d released", label, steps, released)
        return [
            WorkflowStarted(
                id=one.workflow.id,
                name=workflow.name,
                step_ids={step.name: step.id for step in one.steps},
            )
            for workflow, one in zip(workflows, compiled, strict=True)
        ]

    def _compile_all(self, workflows: Sequence[Workflow]) -> list[NewWorkflow]:
        compiled = [self._compile(workflow) for workflow in workflows]
        total = sum(len(one.steps) for one in compiled)
        if len(compiled) > 1 and total > MAX_WORKFLOW_STEPS:
            raise InvalidOptionError(
                "workflows",
                f"{len(compiled)} workflows",
                f"{total} steps in all, at most {MAX_WORKFLOW_STEPS} in one call: start them "
                "in several calls",
            )
        return compiled

    def _starting(
        self, workflows: Sequence[Workflow], compiled: Sequence[NewWorkflow]
    ) -> list[WorkflowStarting | None]:
        if not self.telemetry.active:
            return [None] * len(compiled)
        startings: list[WorkflowStarting | None] = []
        for workflow, one in zip(workflows, compiled, strict=True):
            starting = WorkflowStarting(
                next_call_id(), one.workflow.id, workflow.name, len(one.steps)
            )
            self.telemetry.emit(starting)
            startings.append(starting)
        return startings

    def _start_ended(
        self,
        workflows: Sequence[Workflow],
        compiled: Sequence[NewWorkflow],
        startings: Sequence[WorkflowStarting | None],
        duration: float,
        error: BaseException | None,
    ) -> None:
        for workflow, one, starting in zip(workflows, compiled, startings, strict=True):
            if starting is not None:
                ended = WorkflowStartEnded(
                    starting.call_id,
                    one.workflow.id,
                    workflow.name,
                    len(one.steps),
                    released=len(one.records),
                    duration=duration,
                    error=error,
                )
                self.telemetry.emit(ended)

    def _compile(self, workflow: Workflow) -> NewWorkflow:
        return compile_workflow(
            workflow,
            resolve=self._event_definition,
            new_id=new_record_id,
            partition=lambda: assign_partition(self.n_partitions, self._rng),
            now=self.clock.now(),
        )

    # -- reading ------------------------------------------------------------------------------

    async def get_workflow(self, workflow_id: str) -> WorkflowView:
        """The workflow and its steps (states, record ids, results). Raises
        :class:`~dogs_core.errors.WorkflowNotFoundError` when there is none."""
        workflow_id = validate_job_id(workflow_id, field="workflow_id")
        store = require_role(self.store, Role.WORKFLOWS, "get_workflow")
        view = await retry_transient(
            lambda: store.get_workflow(workflow_id),
            what="read a workflow",
            deadline=self.operation_timeout,
        )
        if view is None:
            raise WorkflowNotFoundError(workflow_id)
        return view

    async def list_workflows(
        self, *, state: WorkflowState | str | None = None, limit: int = 50, skip: int = 0
    ) -> list[WorkflowSummary]:
        """Workflows, newest first (of one ``state``), with their step counts per state."""
        wanted = workflow_state(state)
        for field, number, least in (("limit", limit, 1), ("skip", skip, 0)):
            if isinstance(number, bool) or not isinstance(number, int) or number < least:
                raise InvalidOptionError(field, number, f"must be an integer >= {least}")
        if limit > MAX_WORKFLOW_PAGE:
            raise InvalidOptionError("limit", limit, f"must be at most {MAX_WORKFLOW_PAGE}")
        store = require_role(self.store, Role.WORKFLOWS, "list_workflows")
        return await retry_transient(
            lambda: store.find_workflows(state=wanted, limit=limit, skip=skip),
            what="list workflows",
            deadline=self.operation_timeout,
        )

    async def wait_for_workflow(
        self,
        workflow_id: str,
        *,
        timeout: timedelta | int | float | str | None = None,  # noqa: ASYNC109 (sync twin too)
        poll_interval: timedelta | int | float | str = 1,
    ) -> WorkflowView:
        """Wait until the workflow has ended (``succeeded``, ``completed``, ``failed`` or
        ``cancelled``) and return it. Woken by the store's workflows feed (MongoDB change
        streams), by reads every ``poll_interval`` where there is none. Raises
        :class:`~dogs_core.errors.WorkflowTimeoutError` after ``timeout`` and
        :class:`~dogs_core.errors.WorkflowNotFoundError` for an unknown id."""
        workflow_id = validate_job_id(workflow_id, field="workflow_id")
        (view,) = await self.wait_for_workflows(
            [workflow_id], timeout=timeout, poll_interval=poll_interval
        )
        return view

    async def wait_for_workflows(
        self,
        workflow_ids: Sequence[str],
        *,
        timeout: timedelta | int | float | str | None = None,  # noqa: ASYNC109 (sync twin too)
        poll_interval: timedelta | int | float | str = 1,
    ) -> list[WorkflowView]:
        """Wait until every one of these workflows has ended and return them, in the order
        given: :meth:`wait_for_workflow` for many at once, with one feed for all of them (a
        workflow is read again only when the feed says it changed, or at each
        ``poll_interval`` where there is no feed). Raises
        :class:`~dogs_core.errors.WorkflowTimeoutError` (naming one that had not ended, and how
        many had not) after ``timeout``, :class:`~dogs_core.errors.WorkflowNotFoundError` for
        an unknown id."""
        if isinstance(workflow_ids, str) or not isinstance(workflow_ids, Sequence):
            raise InvalidOptionError(
                "workflow_ids",
                workflow_ids,
                f"must be a list of workflow ids, not {type(workflow_ids).__name__}",
            )
        workflow_ids = [validate_job_id(one, field="workflow_ids") for one in workflow_ids]
        seconds, pause = validate_wait(timeout, poll_interval)
        waiting = list(dict.fromkeys(workflow_ids))
        if not waiting:
            return []
        ended: dict[str, WorkflowView] = {}
        started = anyio.current_time()
        store = require_role(self.store, Role.WORKFLOWS, "wait_for_workflows")
        async with _feed(store, waiting) as feed:
            check = waiting
            while True:
                for workflow_id in check:
                    view = await self.get_workflow(workflow_id)
                    if view.state in ENDED_WORKFLOW_STATES:
                        ended[workflow_id] = view
                waiting = [workflow_id for workflow_id in waiting if workflow_id not in ended]
                if not waiting:
                    return [ended[workflow_id] for workflow_id in workflow_ids]
                elapsed = anyio.current_time() - started
                if seconds is not None and elapsed >= seconds:
                    raise WorkflowTimeoutError(waiting[0], seconds, others=len(waiting) - 1)
                wait = pause if seconds is None else min(pause, max(seconds - elapsed, 0.0))
                changed = None if feed is None else await _next(feed)
                if changed is None:
                    await anyio.sleep(wait)
                    check = waiting
                else:
                    check = [workflow_id for workflow_id in waiting if workflow_id in changed]

    # -- steering -----------------------------------------------------------------------------

    @audited(AuditAction.WORKFLOW_CANCEL)
    async def cancel_workflow(self, workflow_id: str) -> WorkflowCancelled:
        """Cancel a running workflow: nothing is released any more, its blocked steps become
        ``cancelled``, its pending jobs are removed (with ``cancelled`` history rows) and its
        running ones told to stop (at their next lock renewal, as ``cancel`` does). Safe to
        call again (after a crash midway, it finishes the work)."""
        # checked first, so that a missing role's error names this call, not get_workflow
        require_role(self.store, Role.WORKFLOWS, "cancel_workflow")
        view = await self.get_workflow(workflow_id)
        workflow_id = view.id  # as stored (an id is accepted in any case)
        store, _ = await self._workflows("cancel_workflow")
        changed = await retry_transient(
            lambda: store.cancel_workflow(workflow_id, now=self.clock.now()),
            what="cancel a workflow",
            deadline=self.operation_timeout,
        )
        state = WorkflowState.CANCELLED if changed else (await self.get_workflow(view.id)).state
        if state is not WorkflowState.CANCELLED:
            return WorkflowCancelled(workflow_id, cancelled=False, state=state)
        stopped = await self._stop_released(store, workflow_id)
        if changed:
            logger.warning("cancelled workflow %s (%d jobs stopped)", workflow_id, stopped)
            if self.telemetry.active:
                self.telemetry.emit(WorkflowFinished(workflow_id, WorkflowState.CANCELLED.value))
        return WorkflowCancelled(workflow_id, cancelled=changed, state=state, stopped=stopped)

    async def _stop_released(self, store: AsyncWorkflowStore, workflow_id: str) -> int:
        """Cancel the record of each released step of a cancelled workflow, and end the step."""
        stopped = 0
        after: str | None = None
        while True:
            read = functools.partial(
                store.released_steps, workflow_id=workflow_id, after=after, limit=CANCEL_PAGE
            )
            page = await retry_transient(
                read,
                what="read released workflow steps",
                deadline=self.operation_timeout,
            )
            if not page:
                return stopped
            endings: list[StepEnding] = []
            unknown: list[ReleasedStep] = []
            for step in page:
                outcome = await self.cancel(step.record_id)
                if isinstance(outcome, Cancelled | NotFound):
                    stopped += isinstance(outcome, Cancelled)
                    endings.append(cancelled_ending(step, self.clock.now()))
                else:
                    unknown.append(step)
            endings.extend(await self._evidence_endings(store, unknown))
            self._tell(await end_steps(store, endings, now=self.clock.now))
            after = page[-1].id

    async def _evidence_endings(
        self, store: AsyncWorkflowStore, steps: Sequence[ReleasedStep]
    ) -> list[StepEnding]:
        if not steps:
            return []
        evidence = await retry_transient(
            lambda: store.step_evidence([step.record_id for step in steps]),
            what="read workflow steps' records",
            deadline=self.operation_timeout,
        )
        now = self.clock.now()
        endings = []
        for step in steps:
            record, newest = evidence.get(step.record_id, (None, None))
            ending = evidence_ending(step, record, newest, now=now)
            if ending is not None:
                endings.append(ending)
        return endings

    @audited(AuditAction.WORKFLOW_RETRY)
    async def retry_workflow(self, workflow_id: str) -> WorkflowRetried:
        """Run again the failed, skipped and cancelled steps of a workflow that has ended
        (succeeded steps are not run again; their results stay): it is ``running`` again and
        the steps whose dependencies allow it are released at once. Raises
        :class:`~dogs_core.errors.WorkflowStateError` for a workflow still running."""
        # checked first, so that a missing role's error names this call, not get_workflow
        require_role(self.store, Role.WORKFLOWS, "retry_workflow")
        view = await self.get_workflow(workflow_id)
        workflow_id = view.id  # as stored (an id is accepted in any case)
        if view.state is WorkflowState.RUNNING:
            raise WorkflowStateError(
                workflow_id, view.state.value, "retry it once it has ended (or cancel it first)"
            )
        if view.state is WorkflowState.SUCCEEDED:
            return WorkflowRetried(workflow_id, step_ids=(), released=0)
        store, _ = await self._workflows("retry_workflow")
        reset = await retry_transient(
            lambda: store.retry_workflow(workflow_id, now=self.clock.now()),
            what="retry a workflow",
            deadline=self.operation_timeout,
        )
        if reset is None:
            state = (await self.get_workflow(workflow_id)).state
            raise WorkflowStateError(workflow_id, state.value, "it changed while retrying")
        advanced = await release_blocked(store, reset, now=self.clock.now)
        self._tell(advanced)
        logger.warning(
            "retried workflow %s: %d steps again, %d released",
            workflow_id,
            len(reset),
            len(advanced.released),
        )
        return WorkflowRetried(workflow_id, tuple(reset), released=len(advanced.released))

    def _tell(self, advanced: Advanced) -> None:
        """The telemetry of what this call released and ended."""
        tell_advanced(self.telemetry, advanced)


@contextlib.asynccontextmanager
async def _feed(
    store: AsyncWorkflowStore, workflow_ids: Sequence[str]
) -> AsyncIterator[AsyncIterator[list[str]] | None]:
    """The workflows feed of these workflows, open (``None`` where the store has none)."""
    try:
        feed = store.watch_workflows(workflow_ids)
    except AttributeError:  # a store adapted without its feeds
        yield None
        return
    async with contextlib.aclosing(feed):
        try:
            await anext(feed)
        except ChangeFeedUnavailableError:
            yield None
            return
        yield feed


async def _next(feed: AsyncIterator[list[str]]) -> set[str] | None:
    """Wait for the feed's next batch (the ids that changed) or heartbeat (none); ``None``
    once it failed or ended (the caller then polls: a feed only ever shortens the wait)."""
    try:
        return set(await anext(feed))
    except StopAsyncIteration:
        return None
    except Exception as error:
        logger.warning("workflows feed failed, waiting by polling: %r", error)
        return None
