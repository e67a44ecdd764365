"""Durable sleeps (issue 37, item 3) on the in-memory store with virtual time: ``ctx.sleep``
ends the run and frees its slot, the job is ``sleeping`` until it wakes, the waking run resumes
past the sleep with its recorded steps, an operator's retry wakes it early and a cancel removes
it, and a worker killed after the sleep was recorded does not wake the job early."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.definitions import Snooze
from dogs_core.domain.records import HistoryStatus, JobState
from dogs_core.errors import StepError, StoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from dogs_testing import FakeJobContext, run_job_inline
from tests.runtime.conftest import Harness, RecordingStore, assert_nothing_locked

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None
DAY = 24 * 3600
LOCK = 20


def _id(outcome: object) -> str:
    return str(getattr(outcome, "id", ""))


async def _state(h: Harness, job_id: str) -> JobState | None:
    record = await h.client.get_job(job_id)
    return None if record is None else record.state(h.clock.now())


def _order_saga(jobs: Jobs, calls: list[str], *, sleep: str = "7d") -> Any:
    def charge() -> str:
        calls.append("charge")
        return "ch_1"

    @jobs.event(lock_time=LOCK)
    async def order(params: Params, ctx: JobContext) -> str:
        paid = await ctx.step("charge", charge)
        await ctx.sleep(sleep)
        calls.append("ship")
        return str(paid)

    return order


async def test_a_sleep_frees_the_slot_and_the_job_resumes_past_it_with_its_steps() -> None:
    jobs = Jobs()
    calls: list[str] = []
    order = _order_saga(jobs, calls, sleep="1d")

    @jobs.event()
    async def other(params: Params, ctx: JobContext) -> None:
        calls.append("other")

    h = Harness(jobs)
    job_id = _id(await h.client.schedule(order))
    await h.client.schedule(other, run_in=3600)
    async with h.workers(workers_count=1, poll_interval=60) as workers:
        await anyio.sleep(2 * 3600)
        assert calls == ["charge", "other"], "the only slot ran another job during the sleep"
        assert await _state(h, job_id) is JobState.SLEEPING
        record = await h.client.get_job(job_id)
        assert record is not None
        assert record.next_run_at == record.sleeping == h.at(0) + timedelta(days=1)
        await anyio.sleep(DAY)
        await workers.stop()
    assert calls == ["charge", "other", "ship"], "the charge was replayed, not run again"
    rows = h.store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.SNOOZED, HistoryStatus.SUCCESS]
    assert rows[-1].result == "ch_1"
    assert rows[-1].started_at >= h.at(0) + timedelta(days=1), "not woken before its time"


async def test_an_operators_retry_wakes_a_sleeping_job_and_a_cancel_removes_one() -> None:
    jobs = Jobs()
    calls: list[str] = []
    order = _order_saga(jobs, calls)
    h = Harness(jobs)
    woken, cancelled = _id(await h.client.schedule(order)), _id(await h.client.schedule(order))
    async with h.workers() as workers:
        await anyio.sleep(60)
        assert [await _state(h, j) for j in (woken, cancelled)] == [JobState.SLEEPING] * 2
        await h.client.retry_now(woken)
        await h.client.cancel(cancelled)
        await anyio.sleep(60)
        await workers.stop()
    assert calls == ["charge", "charge", "ship"]
    assert h.store.records() == []
    assert h.store.job_history(woken)[-1].status is HistoryStatus.SUCCESS
    assert h.store.job_history(cancelled)[-1].status is HistoryStatus.CANCELLED


async def test_a_worker_killed_after_recording_the_sleep_does_not_wake_the_job_early() -> None:
    jobs = Jobs()
    calls: list[str] = []
    order = _order_saga(jobs, calls, sleep="1h")
    store = RecordingStore()
    h = Harness(jobs, store=store)
    job_id = _id(await h.client.schedule(order))
    store.hooks.release_error = StoreError("the process is gone")  # its settlement never lands
    with anyio.CancelScope() as crash:
        async with h.workers():
            while not (store.records() and store.records()[0].steps[1:]):  # noqa: ASYNC110
                await anyio.sleep(0.1)  # virtual time: polling the store is the plain way
            await anyio.sleep(1)
            crash.cancel()
    store.hooks.release_error = None
    (left,) = store.records()
    assert [s.name for s in left.steps] == ["charge", "sleep:1"]
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    async with survivor.workers() as workers:
        await anyio.sleep(LOCK + 60)
        assert calls == ["charge"], "the killed run's sleep holds: nothing ran before its end"
        await anyio.sleep(3600)
        await workers.stop()
    assert calls == ["charge", "ship"]
    assert [r.status for r in store.job_history(job_id)][-1] is HistoryStatus.SUCCESS
    assert_nothing_locked(store)


async def test_a_handler_that_swallows_the_sleep_still_sleeps_and_can_step_no_more() -> None:
    jobs = Jobs()
    errors: list[str] = []

    @jobs.event()
    async def stubborn(params: Params, ctx: JobContext) -> str:
        if ctx.steps:
            return "woke"
        with contextlib.suppress(Exception):  # a broad handler catches the sleep's Snooze
            await ctx.sleep(600)
        try:
            await ctx.step("after", lambda: 1)
        except StepError as error:
            errors.append(str(error))
        return "ran on"

    h = Harness(jobs)
    job_id = _id(await h.client.schedule(stubborn))
    async with h.workers() as workers:
        await anyio.sleep(60)
        assert await _state(h, job_id) is JobState.SLEEPING
        await anyio.sleep(600)
        await workers.stop()
    assert len(errors) == 1
    assert "after ctx.sleep ended this run" in errors[0]
    rows = h.store.job_history(job_id)
    assert [r.status for r in rows] == [HistoryStatus.SNOOZED, HistoryStatus.SUCCESS]
    assert rows[-1].result == "woke"


async def test_a_recurrent_job_cannot_sleep_and_bad_durations_are_refused() -> None:
    jobs = Jobs()
    errors: list[str] = []

    @jobs.recurrent(run_every="1h")
    async def hourly(ctx: JobContext) -> None:
        try:
            await ctx.sleep("1m")
        except StepError as error:
            errors.append(str(error))

    h = Harness(jobs)
    async with h.workers() as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert len(errors) == 1
    assert "recurrent job" in errors[0]
    assert all(not r.steps for r in h.store.records())
    ctx = FakeJobContext(job_name="x")
    for bad in (-1, "soon", True):
        with pytest.raises(Exception, match="duration"):
            await ctx.sleep(bad)
    assert ctx.recorded_steps == []


async def test_a_fake_context_records_the_sleep_and_replays_past_it() -> None:
    jobs = Jobs()
    calls: list[str] = []
    order = _order_saga(jobs, calls, sleep="3d")
    first = FakeJobContext(definition=order)
    with pytest.raises(Snooze) as slept:
        await order.handler(None, first)
    assert [s.name for s in first.recorded_steps] == ["charge", "sleep:1"]
    assert slept.value.run_at == first.recorded_steps[1].result
    run = await run_job_inline(order, None, context=FakeJobContext(steps=first.recorded_steps))
    assert run.result == "ch_1"
    assert calls == ["charge", "ship"]
