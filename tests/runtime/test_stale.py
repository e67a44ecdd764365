"""Stale executions (Dogs ``stale.test.ts`` and ``Executor.asyncContext.test.ts``), with our
cancellation of stale async executions (DESIGN §5)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import StoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, current_job
from tests.runtime.conftest import Harness, RecordingStore, assert_nothing_locked, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


async def test_a_stale_execution_frees_capacity_and_the_job_reruns() -> None:
    jobs = Jobs()
    runs: list[tuple[int, float]] = []

    @jobs.event(lock_time=5)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append((ctx.tries, now()))
        if ctx.tries == 1:
            await anyio.sleep(100)

    h = Harness(jobs)
    await h.client.schedule(job)
    observed: list[int] = []
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(2)
        observed.append(workers.running_executions)
        await anyio.sleep(10)
        observed.append(workers.running_executions)
        await workers.stop()
    assert runs == [(1, 0.0), (2, 5.0)]
    assert observed == [1, 0]
    assert workers.running_executions == 0
    assert h.store.records() == []


async def test_stale_reruns_at_priority_zero_after_other_work() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=5)
    async def always_stale(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(1000)

    @jobs.event
    async def ok(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(1)

    h = Harness(jobs)
    await h.client.schedule(always_stale)
    await h.client.schedule(ok)
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(12)
        await workers.stop()
    rows = sorted(
        h.store.history("always_stale") + h.store.history("ok"), key=lambda r: r.started_at
    )
    assert [(r.job_name, r.status) for r in rows[:3]] == [
        ("always_stale", HistoryStatus.STALE),
        ("ok", HistoryStatus.SUCCESS),
        ("always_stale", HistoryStatus.STALE),
    ]
    assert [r.priority for r in h.store.history("always_stale")][:2] == [100, 0]


async def test_a_stale_async_execution_is_cancelled_by_default() -> None:
    jobs = Jobs()
    events: list[tuple[str, int, float]] = []

    @jobs.event(lock_time=5)
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await anyio.sleep(6 if ctx.tries == 1 else 0)
            events.append(("finished", ctx.tries, now()))
        except anyio.get_cancelled_exc_class():
            events.append(("cancelled", ctx.tries, now()))
            raise

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert events == [("cancelled", 1, 5.0), ("finished", 2, 5.0)]
    assert h.store.records() == []


async def test_a_stale_execution_keeps_running_with_cancel_on_stale_false() -> None:
    jobs = Jobs()
    events: list[tuple[str, int, float]] = []
    contexts: list[JobContext] = []

    @jobs.event(lock_time=5, cancel_on_stale=False)
    async def job(params: Params, ctx: JobContext) -> str:
        contexts.append(ctx)
        await anyio.sleep(8 if ctx.tries == 1 else 4)
        events.append(("finished", ctx.tries, now()))
        return f"try {ctx.tries}"

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(6)
        assert contexts[0].cancelled is False, "not cancelled: it keeps running"
        (record,) = h.store.records()
        assert record.lock_id == contexts[1].execution_id, "try 2 owns the job"
        await anyio.sleep(30)
        await workers.stop()
    assert events == [("finished", 1, 8.0), ("finished", 2, 9.0)]
    rows = h.store.history("job")
    assert [(r.status, r.tries, r.result) for r in rows] == [
        (HistoryStatus.STALE, 1, None),
        (HistoryStatus.SUCCESS, 2, "try 2"),
    ], "the late success of try 1 changed nothing"
    assert h.store.records() == []


async def test_a_stale_execution_no_longer_extends_or_completes() -> None:
    """Dogs' async-context test: a stale execution writes nothing for the job any more."""
    jobs = Jobs()
    answers: list[bool] = []

    @jobs.event(lock_time=5, cancel_on_stale=False)
    async def job(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(6)
            answers.append(await ctx.extend_lock_time(100))
        else:
            await anyio.sleep(2)

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(8)
        await workers.stop()
    assert answers == [False]
    assert [e.started for e in h.store.extends] == [0.0, 5.0], "only the lock-time writes"
    assert h.store.calls.count("complete") == 1, "only the second run completes"


async def test_the_current_job_context_is_bound_during_the_handler() -> None:
    jobs = Jobs()
    seen: list[tuple[str, str, Any]] = []

    async def deep_in_the_call_stack() -> None:
        ctx = current_job()
        assert ctx is not None
        seen.append((ctx.job_name, ctx.job_id, ctx.params))

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        await deep_in_the_call_stack()

    h = Harness(jobs)
    outcome = await h.client.schedule(job, {"user": 42})
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert seen == [("job", getattr(outcome, "id", None), {"user": 42})]
    assert current_job() is None


async def test_a_crashed_worker_leaves_its_lock_and_the_job_is_reclaimed_as_stale() -> None:
    jobs = Jobs()
    runs: list[tuple[int, bool, int, float]] = []

    @jobs.event(lock_time=20)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append((ctx.tries, ctx.was_stale, ctx.record.priority, now()))
        if ctx.tries == 1:
            await anyio.sleep(1000)

    store = RecordingStore()
    h = Harness(jobs, store=store)
    await h.client.schedule(job)
    with anyio.CancelScope() as crash:
        async with h.workers() as workers:
            await anyio.sleep(3)
            # The process dies: no stop, no demotion, and the release it would attempt on a
            # cancelled exit never reaches the database.
            store.hooks.release_error = StoreError("the process is gone")
            crash.cancel()
            await anyio.sleep(1)
    assert not workers.running
    store.hooks.release_error = None
    (record,) = store.records()
    assert record.locked_until == h.at(20)
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    async with survivor.workers() as workers:
        await anyio.sleep(25)
        await workers.stop()
    assert runs == [(1, False, 100, 0.0), (2, True, 100, 20.0)]
    assert store.records() == []
    assert_nothing_locked(store)
