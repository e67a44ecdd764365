"""Event jobs and their history (Dogs ``events.test.ts`` and ``history.test.ts``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.definitions import Retry
from dogs_core.domain.records import Duplicate, HistoryStatus, JobType, Scheduled, ScheduleOutcome
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, assert_nothing_locked, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


async def test_an_event_job_runs() -> None:
    jobs = Jobs()
    seen: list[int] = []

    @jobs.event
    async def add(params: Params, ctx: JobContext) -> None:
        assert params is not None
        seen.append(params["n"])

    h = Harness(jobs)
    await h.client.schedule(add, {"n": 1})
    await h.client.schedule(add, {"n": 2})
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert sorted(seen) == [1, 2]
    assert h.store.records() == [], "a successful event record is deleted"


async def test_retry_through_on_error_run_in_until_the_third_try() -> None:
    jobs = Jobs()
    tries: list[tuple[int, float]] = []

    async def on_error(error: Exception, params: Params, ctx: JobContext) -> Retry:
        return Retry(run_in=timedelta(seconds=1))

    @jobs.event(on_error=on_error)
    async def flaky(params: Params, ctx: JobContext) -> None:
        tries.append((ctx.tries, now()))
        if ctx.tries < 3:
            raise ValueError("not yet")

    h = Harness(jobs)
    await h.client.schedule(flaky)
    async with h.workers(poll_interval=0.5) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert [t for t, _ in tries] == [1, 2, 3]
    # run_in=1s after each failure, picked up at the next poll
    assert tries[1][1] - tries[0][1] == pytest.approx(1, abs=0.5)
    assert tries[2][1] - tries[1][1] == pytest.approx(1, abs=0.5)
    assert h.store.records() == []


async def test_short_lock_time_makes_try_one_stale_then_try_two_extends_and_completes() -> None:
    jobs = Jobs()
    stale_tries: list[int] = []
    ran: list[int] = []
    completed: list[int] = []

    async def on_stale(params: Params, ctx: JobContext) -> None:
        stale_tries.append(ctx.tries)

    @jobs.event(lock_time=10, on_stale=on_stale)
    async def slow(params: Params, ctx: JobContext) -> None:
        ran.append(ctx.tries)
        if ctx.tries == 2:
            assert await ctx.extend_lock_time(10_000) is True
        await anyio.sleep(20)
        completed.append(ctx.tries)

    h = Harness(jobs)
    await h.client.schedule(slow)
    async with h.workers(default_lock_time=30) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert ran == [1, 2]
    assert stale_tries == [1]
    assert completed == [2], "try 1 was cancelled when it went stale; try 2 completed"
    assert h.store.records() == []
    statuses = [row.status for row in h.store.history("slow")]
    assert statuses == [HistoryStatus.STALE, HistoryStatus.SUCCESS]


async def test_two_concurrent_schedules_with_one_unique_key_run_once() -> None:
    jobs = Jobs()
    runs: list[str] = []

    @jobs.event
    async def once(params: Params, ctx: JobContext) -> None:
        runs.append(ctx.job_id)

    h = Harness(jobs)
    outcomes: list[ScheduleOutcome] = []

    async def schedule() -> None:
        outcomes.append(await h.client.schedule(once, {"x": 1}, unique_key="only-one"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(schedule)
        tg.start_soon(schedule)
    scheduled = [o for o in outcomes if isinstance(o, Scheduled)]
    duplicates = [o for o in outcomes if isinstance(o, Duplicate)]
    assert len(scheduled) == 1
    assert len(duplicates) == 1
    assert duplicates[0].existing_id == scheduled[0].id
    async with h.workers() as workers:
        await anyio.sleep(5)
        await workers.stop()
    assert runs == [scheduled[0].id]
    # the key is free again once the record is gone
    again = await h.client.schedule(once, {"x": 1}, unique_key="only-one")
    assert isinstance(again, Scheduled)


async def test_different_unique_keys_all_run_and_duplicates_are_deduped() -> None:
    jobs = Jobs()
    runs: list[int] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        assert params is not None
        runs.append(params["i"])

    h = Harness(jobs)
    for i in range(3):
        assert isinstance(await h.client.schedule(job, {"i": i}, unique_key=f"k{i}"), Scheduled)
    assert isinstance(await h.client.schedule(job, {"i": 99}, unique_key="k1"), Duplicate)
    async with h.workers() as workers:
        await anyio.sleep(3)
        await workers.stop()
    assert sorted(runs) == [0, 1, 2]


# -- history ----------------------------------------------------------------------------------


async def test_success_history_has_the_exact_fields() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> dict[str, Any]:
        await anyio.sleep(7)
        return {"ok": True, "tries": ctx.tries}

    h = Harness(jobs)
    outcome = await h.client.schedule(job, {"a": 1})
    assert isinstance(outcome, Scheduled)
    async with h.workers() as workers:
        await anyio.sleep(10)
        await workers.stop()
    (claim,) = h.store.successful_claims()
    (row,) = h.store.history("job")
    assert row.execution_id == claim.execution_id
    assert row.job_id == outcome.id
    assert row.job_name == "job"
    assert row.type is JobType.EVENT
    assert row.priority == 100
    assert row.tries == 1
    assert row.status is HistoryStatus.SUCCESS
    assert row.params == {"a": 1}
    assert row.result == {"ok": True, "tries": 1}
    assert row.error_message is None
    assert row.unique_identifier is None
    assert row.started_at == h.at(0)
    assert row.ended_at == h.at(7)
    assert row.duration_ms == 7000
    assert row.expires_at == row.ended_at + timedelta(days=7)
    # also visible through the client, newest first
    executions = await h.client.get_executions(job)
    assert [e.execution_id for e in executions] == [row.execution_id]


async def test_error_history_has_the_error_message_and_no_result() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        raise ValueError("Hello")

    h = Harness(jobs)
    await h.client.schedule(job, unique_key="u1")
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    row = h.store.history("job")[0]
    assert row.status is HistoryStatus.ERROR
    assert row.error_message == "Hello"
    assert row.result is None
    assert row.unique_identifier == "u1"
    assert row.tries == 1


async def test_stale_history() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=5)
    async def job(params: Params, ctx: JobContext) -> str:
        if ctx.tries == 1:
            await anyio.sleep(100)
        return "done"

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(20)
        await workers.stop()
    rows = h.store.history("job")
    assert [r.status for r in rows] == [HistoryStatus.STALE, HistoryStatus.SUCCESS]
    stale = rows[0]
    assert stale.tries == 1
    assert stale.duration_ms == 5000, "the stale row ends when the lock expired"
    assert stale.result is None
    assert rows[1].tries == 2
    assert rows[1].result == "done"
    assert_nothing_locked(h.store)


async def test_save_executions_for_zero_disables_history() -> None:
    jobs = Jobs()

    @jobs.event(save_executions_for=0)
    async def job(params: Params, ctx: JobContext) -> None:
        return None

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert h.store.history("job") == []
    assert h.store.records() == []
