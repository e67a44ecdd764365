"""Push on the real mongod: workers woken by change streams, and wait_for on both clients.

Each wait below is bounded by a generous guard (``fail_after``) that only stops a broken test;
with an hour's poll interval, a job that starts at all was started by the change stream.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import (
    DogsClient,
    HistoryStatus,
    JobContext,
    Jobs,
    Scheduled,
    SyncDogsClient,
    Workers,
)
from dogs_core.errors import WaitTimeoutError
from dogs_mongo import AsyncMongoJobStore, MongoJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

HOUR = 3600
GUARD = 60


def registry(started: anyio.Event | None = None) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def ping(params: dict[str, Any] | None, ctx: JobContext) -> str:
        if started is not None:
            started.set()
        return "pong"

    @jobs.event(max_tries=1)
    async def boom(params: dict[str, Any] | None, ctx: JobContext) -> None:
        raise RuntimeError("boom")

    return jobs


def workers_on(store: AsyncMongoJobStore, jobs: Jobs, **options: Any) -> Workers:
    options = {"poll_interval": HOUR, "probe_enabled": False, "watch_changes": True, **options}
    return Workers(store, jobs, **options)


async def until_watching(workers: Workers) -> None:
    with anyio.fail_after(GUARD):
        while not workers.watching:  # noqa: ASYNC110 - a property, not an event to wait on
            await anyio.sleep(0.01)


async def test_a_job_scheduled_by_another_client_starts_although_the_poll_is_an_hour(
    async_store: AsyncMongoJobStore,
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
) -> None:
    started = anyio.Event()
    jobs = registry(started)
    async with workers_on(async_store, jobs) as workers:
        await until_watching(workers)
        await anyio.sleep(0.5)  # the startup sweeps are over: only a wake-up can run the job
        elsewhere = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
        outcome = await DogsClient(elsewhere, jobs).schedule("ping")
        assert isinstance(outcome, Scheduled)
        with anyio.fail_after(GUARD):
            await started.wait()
        await workers.stop()


async def test_without_change_streams_the_job_waits_for_the_poll(
    async_store: AsyncMongoJobStore,
) -> None:
    started = anyio.Event()
    jobs = registry(started)
    async with workers_on(async_store, jobs, watch_changes=False) as workers:
        await anyio.sleep(0.5)
        await DogsClient(async_store, jobs).schedule("ping")
        with anyio.move_on_after(2):
            await started.wait()
        assert not started.is_set()
        assert not workers.watching
        await workers.stop(grace=0)


@pytest.mark.parametrize("flavor", ["async", "sync"])
async def test_wait_for_success_and_failure(
    flavor: str, async_store: AsyncMongoJobStore, sync_store: MongoJobStore
) -> None:
    jobs = registry()
    async with workers_on(async_store, jobs, poll_interval=0.2) as workers:
        if flavor == "async":
            client = DogsClient(async_store, jobs)
            ok = await client.schedule("ping")
            bad = await client.schedule("boom")
            assert isinstance(ok, Scheduled)
            assert isinstance(bad, Scheduled)
            with anyio.fail_after(GUARD):
                done = await client.wait_for(ok.id)
                failed = await client.wait_for(bad.id)
        else:
            sync = SyncDogsClient(sync_store, jobs)
            ok = sync.schedule("ping")
            bad = sync.schedule("boom")
            assert isinstance(ok, Scheduled)
            assert isinstance(bad, Scheduled)
            with anyio.fail_after(GUARD):
                done = await anyio.to_thread.run_sync(lambda: sync.wait_for(ok.id))
                failed = await anyio.to_thread.run_sync(lambda: sync.wait_for(bad.id))
        await workers.stop()
    assert (done.status, done.result, done.job_id) == (HistoryStatus.SUCCESS, "pong", ok.id)
    assert (failed.status, failed.error_message) == (HistoryStatus.ERROR, "boom")


@pytest.mark.parametrize("flavor", ["async", "sync"])
async def test_wait_for_times_out_on_a_job_nobody_runs(
    flavor: str, async_store: AsyncMongoJobStore, sync_store: MongoJobStore
) -> None:
    jobs = registry()
    if flavor == "async":
        client = DogsClient(async_store, jobs)
        outcome = await client.schedule("ping")
        assert isinstance(outcome, Scheduled)
        with pytest.raises(WaitTimeoutError):
            await client.wait_for(outcome.id, timeout=0.5)
    else:
        sync = SyncDogsClient(sync_store, jobs)
        outcome = sync.schedule("ping")
        assert isinstance(outcome, Scheduled)
        with pytest.raises(WaitTimeoutError):
            sync.wait_for(outcome.id, timeout=0.5)


async def test_watch_yields_executions_as_they_finish(async_store: AsyncMongoJobStore) -> None:
    jobs = registry()
    client = DogsClient(async_store, jobs)
    seen: list[tuple[str, HistoryStatus]] = []

    async def watch(task_status: anyio.abc.TaskStatus[None]) -> None:
        rows = client.watch(["ping", "boom"])
        task_status.started()
        async for row in rows:
            seen.append((row.job_name, row.status))
            if len(seen) == 2:
                return

    async with workers_on(async_store, jobs, poll_interval=0.2) as workers:
        async with anyio.create_task_group() as group:
            await group.start(watch)
            await anyio.sleep(1)  # the change stream is open
            await client.schedule("ping")
            await client.schedule("boom")
            with anyio.fail_after(GUARD):
                while len(seen) < 2:  # noqa: ASYNC110 - filled by the watcher task
                    await anyio.sleep(0.05)
        await workers.stop()
    assert sorted(seen) == [("boom", HistoryStatus.ERROR), ("ping", HistoryStatus.SUCCESS)]
