"""Workflows from sync code: the blocking client over an async store (its calls on a portal
thread; waiting polls, as the portal carries no feed) beside blocking workers, and the
generated sync client over a sync store."""

from __future__ import annotations

from typing import Any

from dogs_core import BlockingDogsClient, BlockingWorkers, JobContext, Jobs, SyncDogsClient
from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflows import Workflow
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore

jobs = Jobs()


@jobs.event
async def first(params: None, ctx: JobContext) -> int:
    return 1


@jobs.event
async def second(params: None, ctx: JobContext) -> Any:
    return ctx.upstream("first").result + 1


def pair() -> Workflow:
    wf = Workflow("pair")
    step = wf.add(first)
    wf.add(second, after=[step])
    return wf


def test_the_blocking_client_beside_blocking_workers() -> None:
    store = InMemoryJobStore()
    with BlockingDogsClient(store, jobs) as client:
        started = client.start_workflow(pair())
        assert client.get_workflow(started.id).state is WorkflowState.RUNNING
        with BlockingWorkers(store, jobs, poll_interval=0.05):
            view = client.wait_for_workflow(started.id, timeout=10, poll_interval=0.05)
        assert view.state is WorkflowState.SUCCEEDED
        outcome = view.step("second").outcome
        assert outcome is not None
        assert outcome.result == 2
        assert [s.workflow.id for s in client.list_workflows()] == [started.id]
        more = client.start_workflows([pair(), pair()])
        with BlockingWorkers(store, jobs, poll_interval=0.05):
            views = client.wait_for_workflows([s.id for s in more], timeout=10, poll_interval=0.05)
        assert [v.id for v in views] == [s.id for s in more]
        assert {v.state for v in views} == {WorkflowState.SUCCEEDED}


def test_the_sync_client_cancels_and_retries() -> None:
    client = SyncDogsClient(SyncInMemoryJobStore(), jobs)
    started = client.start_workflow(pair())
    cancelled = client.cancel_workflow(started.id)
    assert (cancelled.cancelled, cancelled.stopped) == (True, 1)
    view = client.get_workflow(started.id)
    assert {step.state for step in view.steps} == {StepState.CANCELLED}
    retried = client.retry_workflow(started.id)
    assert (len(retried.step_ids), retried.released) == (2, 1)
    assert client.get_workflow(started.id).state is WorkflowState.RUNNING
