"""Misfire policies and recurrent priority on a real mongod.

A recurrent record is made as if its workers had been stopped for hours (``ensure_recurrent``
with a past ``now``: the record is due at that slot), then workers start: ``skip`` runs nothing
and moves the record to the next slot with its try given back and no history row; ``run_all``
with ``max_catch_up=3`` runs the three newest missed slots and ends on time. Then the backlog:
a recurrent job at its default priority runs before 1,800 older event jobs, and at the events'
priority after them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus, to_millis
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, Workers
from dogs_mongo import AsyncMongoJobStore

pytestmark = pytest.mark.anyio

GUARD = 30.0
HOUR = timedelta(hours=1)


def hourly(slots: list[datetime], **options: Any) -> Jobs:
    jobs = Jobs()

    @jobs.recurrent(run_every=3600, **options)
    async def report(ctx: JobContext) -> None:
        assert ctx.record.next_run_at is not None
        slots.append(ctx.record.next_run_at)

    return jobs


async def stale_record(store: AsyncMongoJobStore, behind: timedelta) -> datetime:
    """The record of ``report`` due ``behind`` ago, as workers stopped that long leave it."""
    slot = to_millis(datetime.now(UTC) - behind)
    await store.ensure_recurrent("report", priority=1000, partition=0, now=slot)
    return slot


async def run_until(store: AsyncMongoJobStore, jobs: Jobs, done: Any) -> None:
    async with Workers(store, jobs, poll_interval=0.05, watch_changes=False) as workers:
        with anyio.fail_after(GUARD):
            while not await done():  # noqa: ASYNC110 - the state is in the database
                await anyio.sleep(0.05)
        await workers.stop()


async def test_skip_runs_nothing_late_and_moves_the_record_to_the_next_slot(
    async_store: AsyncMongoJobStore,
) -> None:
    slots: list[datetime] = []
    jobs = hourly(slots, misfire="skip", misfire_grace=60)
    slot = await stale_record(async_store, 5 * HOUR + timedelta(minutes=30))
    client = DogsClient(async_store, jobs)

    async def moved() -> bool:
        (record,) = await client.find_jobs("report")
        return record.next_run_at > datetime.now(UTC)

    await run_until(async_store, jobs, moved)
    assert slots == []
    (record,) = await client.find_jobs("report")
    assert record.next_run_at == slot + 6 * HOUR, "the first slot after now, on the grid"
    assert (record.tries, record.lock_id) == (0, None)
    assert await async_store.history_collection.count_documents({}) == 0


async def test_run_all_runs_the_three_newest_missed_slots(async_store: AsyncMongoJobStore) -> None:
    slots: list[datetime] = []
    jobs = hourly(slots, misfire="run_all", max_catch_up=3)
    slot = await stale_record(async_store, 5 * HOUR + timedelta(minutes=30))
    client = DogsClient(async_store, jobs)

    async def caught_up() -> bool:
        (record,) = await client.find_jobs("report")
        return record.lock_id is None and record.next_run_at > datetime.now(UTC)

    await run_until(async_store, jobs, caught_up)
    assert slots == [slot + hours * HOUR for hours in (3, 4, 5)], "oldest first"
    (record,) = await client.find_jobs("report")
    assert record.next_run_at == slot + 6 * HOUR
    rows = await client.get_executions("report")
    assert sorted(row.status for row in rows) == [HistoryStatus.SUCCESS] * 3


async def backlog_order(store: AsyncMongoJobStore, priority: int | None) -> int:
    """How many of 1,800 older event jobs ran before a new recurrent job's first run."""
    jobs = Jobs()
    order: list[str] = []

    @jobs.event
    async def backlog(params: Any, ctx: JobContext) -> None:
        order.append("event")

    options: dict[str, Any] = {} if priority is None else {"priority": priority}

    @jobs.recurrent(run_every=3600, **options)
    async def nightly(ctx: JobContext) -> None:
        order.append("recurrent")

    result = await DogsClient(store, jobs).schedule_many(backlog, [{} for _ in range(1800)])
    assert result.scheduled_count == 1800
    await anyio.sleep(0.01)  # the events are older than the recurrent record
    async with Workers(store, jobs, workers_count=8, poll_interval=0.05) as workers:
        with anyio.fail_after(120):
            while "recurrent" not in order:  # noqa: ASYNC110 - set by the handler
                await anyio.sleep(0.01)
        await workers.stop()
    return order.index("recurrent")


async def test_a_new_recurrent_job_runs_before_an_older_event_backlog(
    async_store: AsyncMongoJobStore,
) -> None:
    assert await backlog_order(async_store, None) < 8 * 4, "in the first claim rounds"


async def test_at_the_events_priority_it_waits_behind_the_backlog(
    async_store: AsyncMongoJobStore,
) -> None:
    assert await backlog_order(async_store, 100) > 1000
