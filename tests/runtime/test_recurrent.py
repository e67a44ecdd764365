"""Recurrent jobs (Dogs ``recurrent.test.ts`` and the recurrent part of ``stale.test.ts``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from dogs_core.domain.definitions import Retry
from dogs_core.domain.records import HistoryStatus, JobType
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, RecordingStore, now

pytestmark = pytest.mark.anyio


async def test_a_recurrent_job_runs_repeatedly_with_run_every() -> None:
    jobs = Jobs()
    runs: list[float] = []

    @jobs.recurrent(run_every=1)
    async def tick(ctx: JobContext) -> None:
        runs.append(now())

    h = Harness(jobs)
    async with h.workers(poll_interval=0.5) as workers:
        await anyio.sleep(3.2)
        await workers.stop()
    assert runs == [0.0, 1.0, 2.0, 3.0], "next run = completion + run_every"
    (record,) = h.store.records()
    assert record.type is JobType.RECURRENT
    assert record.tries == 0
    assert record.lock_id is None
    assert record.next_run_at == h.at(4)


async def test_run_every_is_a_fixed_delay_from_completion() -> None:
    jobs = Jobs()
    runs: list[float] = []

    @jobs.recurrent(run_every=10)
    async def slow(ctx: JobContext) -> None:
        runs.append(now())
        await anyio.sleep(3)

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert runs == [0.0, 13.0, 26.0]


async def test_cron_next_run_is_computed_in_the_job_timezone() -> None:
    jobs = Jobs()
    runs: list[datetime] = []

    @jobs.recurrent(cron="0 9 * * *", timezone="America/Santiago")
    async def morning(ctx: JobContext) -> None:
        runs.append(h.clock.now())

    start = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    h = Harness(jobs)
    h.clock = type(h.clock)(start)
    async with h.workers(poll_interval=60) as workers:
        await anyio.sleep(1)
        (record,) = h.store.records()
        # 09:00 in Santiago (UTC-4 in May) is 13:00Z
        assert record.next_run_at == datetime(2026, 5, 1, 13, 0, tzinfo=UTC)
        await anyio.sleep(3600)
        await workers.stop()
    assert runs == [start, datetime(2026, 5, 1, 13, 0, tzinfo=UTC)]
    (record,) = h.store.records()
    assert record.next_run_at == datetime(2026, 5, 2, 13, 0, tzinfo=UTC)


async def test_custom_next_run_function() -> None:
    jobs = Jobs()
    runs: list[float] = []

    def next_run(at: datetime) -> datetime:
        return at + timedelta(seconds=7)

    @jobs.recurrent(next_run=next_run)
    async def custom(ctx: JobContext) -> None:
        runs.append(now())

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(15)
        await workers.stop()
    assert runs == [0.0, 7.0, 14.0]


async def test_a_recurrent_priority_is_restored_after_a_stale_run() -> None:
    jobs = Jobs()

    # The lock expires at 5.5 s, between two polls, so the demotion lands before the re-claim.
    # Priority 100 as in Dogs' stale.test.ts (Python's recurrent default is 1000).
    @jobs.recurrent(run_every=100, lock_time=5.5, priority=100)
    async def sometimes_slow(ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(60)

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(20)
        await workers.stop()
    rows = h.store.history("sometimes_slow")
    assert [(r.status, r.priority) for r in rows] == [
        (HistoryStatus.STALE, 100),
        (HistoryStatus.SUCCESS, 0),
    ]
    (record,) = h.store.records()
    assert record.priority == 100, "the definition's priority is restored on success"
    assert record.tries == 0


async def test_the_recurrent_record_is_created_once_at_startup() -> None:
    jobs = Jobs()

    @jobs.recurrent(run_every=1000, priority=7)
    async def daily(ctx: JobContext) -> None:
        return None

    store = RecordingStore()
    first = Harness(jobs, store=store)
    second = Harness(jobs, store=store, clock=first.clock, seed=1)
    async with first.workers(n_partitions=4) as a, second.workers(n_partitions=4) as b:
        await anyio.sleep(1)
        await a.stop()
        await b.stop()
    (record,) = store.records()
    assert record.priority == 7
    assert record.partition in range(4)
    assert len(store.history("daily")) == 1


async def test_recurrent_on_error_and_on_stale_get_none_params() -> None:
    jobs = Jobs()
    errors: list[tuple[str, int]] = []
    stale: list[int] = []
    runs: list[tuple[float, int]] = []

    async def on_error(error: Exception, params: None, ctx: JobContext) -> Retry:
        assert params is None
        errors.append((str(error), ctx.tries))
        return Retry(run_in=timedelta(seconds=5))

    async def on_stale(params: None, ctx: JobContext) -> None:
        assert params is None
        stale.append(ctx.tries)

    @jobs.recurrent(run_every=100, lock_time=10, on_error=on_error, on_stale=on_stale)
    async def job(ctx: JobContext) -> None:
        runs.append((now(), ctx.tries))
        if ctx.tries == 1:
            raise ValueError("first")
        if ctx.tries == 2:
            await anyio.sleep(60)

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert errors == [("first", 1)]
    assert stale == [2]
    # Retry(run_in=5) keeps the tries; the stale run is retried when its lock expires
    assert runs == [(0.0, 1), (5.0, 2), (15.0, 3)]


async def test_a_recurrent_retry_with_run_in_zero_reruns_at_once() -> None:
    jobs = Jobs()
    runs: list[tuple[float, int]] = []

    async def on_error(error: Exception, params: None, ctx: JobContext) -> Retry:
        return Retry(run_in=timedelta(0))

    @jobs.recurrent(run_every=100, on_error=on_error)
    async def job(ctx: JobContext) -> None:
        runs.append((now(), ctx.tries))
        if ctx.tries == 1:
            raise ValueError("again, now")

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(5)
        await workers.stop()
    # an explicit zero delay retries now (by the next poll), not at the next regular run
    assert [tries for _, tries in runs] == [1, 2]
    assert runs[1][0] <= 1.0
