"""Sync (``def``) handlers run in worker threads bounded by ``workers_count``.

The loop sees a thread's real work as idle time (DESIGN §7): with ``autojump_threshold=0`` a
handler doing a few milliseconds of real work would let virtual time jump past lock deadlines.
This module therefore uses a positive threshold: virtual time only jumps after the loop has been
idle for 50 ms of real time, far longer than these handlers work.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.domain.records import HistoryStatus, JobStatus
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.errors import ExecutionCancelledError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, current_job
from tests.runtime.conftest import Harness

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0.05)})


async def test_a_sync_handler_runs_in_a_worker_thread_with_its_context() -> None:
    jobs = Jobs()
    seen: list[tuple[bool, Any, int, bool, bool]] = []

    @jobs.event
    def job(params: Params, ctx: JobContext) -> str:
        bound = current_job()
        renewed = ctx.extend_lock_time_blocking(60)
        seen.append(
            (
                threading.current_thread() is not threading.main_thread(),
                params,
                ctx.tries,
                bound is not None and bound.execution_id == ctx.execution_id,
                renewed,
            )
        )
        return "sync ok"

    h = Harness(jobs)
    await h.client.schedule(job, {"n": 1})
    async with h.workers(poll_interval=100) as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert seen == [(True, {"n": 1}, 1, True, True)]
    (row,) = h.store.history("job")
    assert row.status is HistoryStatus.SUCCESS
    assert row.result == "sync ok"
    assert h.store.extends[-1].matched is True


async def test_sync_handlers_are_bounded_by_workers_count() -> None:
    jobs = Jobs()
    lock = threading.Lock()
    running = [0, 0]  # current, maximum

    @jobs.event
    def job(params: Params, ctx: JobContext) -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    h = Harness(jobs)
    for _ in range(6):
        await h.client.schedule(job)
    async with h.workers(workers_count=2, poll_interval=100) as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert running[1] == 2
    assert h.store.records() == []


async def test_a_stale_sync_handler_sees_cancelled_and_stops_cooperatively() -> None:
    jobs = Jobs()
    exited = threading.Event()
    outcome: list[str] = []

    @jobs.event(lock_time=1)
    def job(params: Params, ctx: JobContext) -> None:
        if ctx.tries > 1:
            return
        try:
            while True:
                ctx.raise_if_cancelled()
                time.sleep(0.005)
        except ExecutionCancelledError:
            outcome.append("cancelled")
            raise
        finally:
            exited.set()

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(3.5)
        await workers.stop()
    assert await anyio.to_thread.run_sync(exited.wait, 5)
    assert outcome == ["cancelled"]
    assert [r.status for r in h.store.history("job")] == [
        HistoryStatus.STALE,
        HistoryStatus.SUCCESS,
    ]


@pytest.mark.anyio
async def test_a_failing_sync_handler_is_retried_then_marked_and_nothing_stays_locked() -> None:
    # Here, not with the other misbehaving jobs of test_improvements: a thread under
    # autojump_threshold=0 lets virtual time jump past the lock (see DESIGN §7).
    jobs = Jobs()
    hook_calls: list[str] = []

    @jobs.event
    def sync_raises(params: Any, ctx: JobContext) -> None:
        raise ValueError("sync fail")

    async def hook(job: Any) -> None:
        hook_calls.append(job.job_name)

    h = Harness(jobs)
    outcome = await h.client.schedule(sync_raises)
    async with h.workers(
        max_tries=3, on_max_tries_reached=hook, default_lock_time=30, poll_interval=5
    ) as workers:
        await anyio.sleep(60)  # retries back off 2 s, then 4 s (each autojump costs 50 ms)
        await workers.stop(grace=1)
    (record,) = h.store.sync.find_records()
    assert record.id == outcome.id  # type: ignore[union-attr]
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert record.tries == 3
    assert record.lock_id is None
    assert hook_calls == ["sync_raises"]
    statuses = [r.status for r in await h.store.read_history("sync_raises", limit=10)]
    assert statuses == [HistoryStatus.ERROR] * 3


async def test_a_sync_handler_records_its_steps_with_step_blocking() -> None:
    jobs = Jobs()
    calls: list[str] = []

    def charge(order: int) -> str:
        calls.append("charge")
        return f"ch_{order}"

    retry = RetryPolicy(base=timedelta(seconds=1), jitter=0)

    @jobs.event(max_tries=2, retry=retry, lock_time=3600)
    def pay(params: Params, ctx: JobContext) -> str:
        charged = ctx.step_blocking("charge", charge, 7)
        if ctx.tries == 1:
            raise RuntimeError("retry me")
        return charged

    h = Harness(jobs)
    outcome = await h.client.schedule(pay)
    async with h.workers(poll_interval=1) as workers:
        for _ in range(600):
            if any(r.status is HistoryStatus.SUCCESS for r in h.store.history("pay")):
                break
            await anyio.sleep(1)
        await workers.stop()
    assert calls == ["charge"], "replayed on the retry, not called again"
    rows = h.store.job_history(getattr(outcome, "id", ""))
    assert [(r.status, r.result) for r in rows] == [
        (HistoryStatus.ERROR, None),
        (HistoryStatus.SUCCESS, "ch_7"),
    ]


async def test_sync_handlers_sleep_and_a_past_wake_up_goes_on_at_once() -> None:
    jobs = Jobs()
    seen: list[str] = []

    @jobs.event(lock_time=3600)
    def report(params: Params, ctx: JobContext) -> None:
        ctx.sleep_until_blocking(ctx.record.locked_until - timedelta(days=1))  # in the past
        seen.append(f"past:{len(ctx.steps)}")
        ctx.sleep_blocking("20s", name="cool down")
        seen.append("woke")

    h = Harness(jobs)
    outcome = await h.client.schedule(report)
    job_id = str(getattr(outcome, "id", ""))
    async with h.workers(poll_interval=5) as workers:
        await anyio.sleep(60)  # each autojump costs 50 ms
        await workers.stop()
    assert seen == ["past:1", "past:2", "woke"], "the second run replayed both sleeps"
    record_steps = [r.status for r in h.store.job_history(job_id)]
    assert record_steps == [HistoryStatus.SNOOZED, HistoryStatus.SUCCESS]
