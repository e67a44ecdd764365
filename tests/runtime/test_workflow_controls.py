"""Fleet controls apply to a workflow's steps as to any job (virtual time, the in-memory store):
a step of a paused job is released but not claimed until it is resumed, and a global
concurrency limit holds across the parallel steps of a batch."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflows import Batch
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio


async def test_pause_and_global_concurrency_hold_for_workflow_steps() -> None:
    jobs = Jobs()
    running = 0
    peak = 0
    callback_at: list[float] = []

    @jobs.event(global_concurrency=2, max_tries=1)
    async def item(params: dict[str, Any], ctx: JobContext) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await anyio.sleep(5)
        finally:
            running -= 1

    @jobs.event(max_tries=1)
    async def done(params: None, ctx: JobContext) -> int:
        callback_at.append(now())
        assert ctx.batch is not None
        return ctx.batch.succeeded

    h = Harness(jobs)
    batch = Batch("limited")
    for n in range(6):
        batch.add(item, {"n": n})
    callback = batch.then(done)
    assert await h.client.pause(done)
    started = await h.client.start_workflow(batch)
    async with h.workers(workers_count=8, poll_interval=1, watch_changes=True) as workers:
        await anyio.sleep(60)  # 6 items of 5 s, 2 at a time: done by 15 s
        view = await h.client.get_workflow(started.id)
        assert view.state is WorkflowState.RUNNING
        assert view.step(callback.name).state is StepState.RELEASED  # released, yet not claimed
        assert callback_at == []
        assert await h.client.resume(done)
        finished = await h.client.wait_for_workflow(started.id, timeout=60, poll_interval=0.5)
        await workers.stop()
    assert peak == 2
    assert finished.state is WorkflowState.SUCCEEDED
    assert len(callback_at) == 1
    assert callback_at[0] >= 60
    outcome = finished.step(callback.name).outcome
    assert outcome is not None
    assert outcome.result == 6
