"""Lock expiry on MongoDB's clock, on the real mongod: two instances whose machines' clocks are
60 s fast and 60 s slow share 500 jobs with 5 s locks renewed by heartbeats (long enough
that a loaded CI machine's stalls do not expire them: a stall is not what this tests).

Each instance has its own ``AsyncMongoClient`` and store, as two processes would. Their clocks
are :class:`SkewedClock` over the system clock; each measures its offset to the server
(``hello.localTime``) and computes every time on the server's clock. The instance whose clock
is slow starts first and is running jobs when the fast one starts: the fast one reads those
locks as two minutes old. The control run trusts the machines' clocks
(``clock_sync_interval=None``, Dogs' behaviour) and runs jobs twice, so the check is not
vacuous: its runs last until one overlaps (at most ``HOLD`` s), so the fast instance always
finds the slow one's jobs running. Figures are printed; nothing asserts a duration.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core.domain.records import HistoryStatus
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, SkewedClock, SystemClock, Workers
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo.queries import DEFAULT_HISTORY_COLLECTION

pytestmark = [pytest.mark.mongo, pytest.mark.anyio, pytest.mark.slow]

SKEW = timedelta(seconds=60)
#: Seconds at most that a run of the control lasts (it ends at the first overlap).
HOLD = 20.0


class Fleet:
    """What the handlers saw: runs per job and runs that overlapped a live run of the same job.
    With ``hold``, every run lasts until some run overlaps another (at most ``hold`` s)."""

    def __init__(self, *, hold: bool) -> None:
        self.runs: Counter[str] = Counter()
        self.live: set[str] = set()
        self.overlaps = 0
        self.hold = hold
        self.overlapped = anyio.Event()

    def jobs(self) -> Jobs:
        jobs = Jobs()
        rng = random.Random(11)

        @jobs.event(lock_time=5, heartbeat=True)
        async def work(params: dict[str, Any] | None, ctx: JobContext) -> None:
            self.runs[ctx.job_id] += 1
            if ctx.job_id in self.live:
                self.overlaps += 1
                self.overlapped.set()
            self.live.add(ctx.job_id)
            try:
                if self.hold:
                    with anyio.move_on_after(HOLD):
                        await self.overlapped.wait()
                else:  # a tenth outlive their lock: renewals keep them
                    await anyio.sleep(
                        rng.uniform(5.5, 7) if rng.random() < 0.1 else rng.uniform(0, 0.05)
                    )
            finally:
                self.live.discard(ctx.job_id)

        return jobs


async def _run(uri: str, database: str, *, n_jobs: int, interval: float | None) -> Fleet:
    fleet = Fleet(hold=interval is None)
    jobs = fleet.jobs()
    clients = [AsyncMongoClient[dict[str, Any]](uri, tz_aware=True) for _ in range(3)]
    stores = [AsyncMongoJobStore(client, database) for client in clients]
    try:
        scheduler = DogsClient(
            stores[0], jobs, clock=SkewedClock(SystemClock(), SKEW), clock_sync_interval=interval
        )
        due = SystemClock().now() - 2 * SKEW  # a backlog every instance sees as due
        result = await scheduler.schedule_many(
            "work", [{"params": {"n": n}, "run_at": due} for n in range(n_jobs)]
        )
        assert result.scheduled_count == n_jobs
        workers = [
            Workers(
                store,
                jobs,
                clock=SkewedClock(SystemClock(), skew),
                workers_count=16,
                poll_interval=0.2,
                clock_sync_interval=interval,
                watch_changes=False,
            )
            for store, skew in ((stores[1], SKEW), (stores[2], -SKEW))
        ]
        fast, slow = workers
        async with slow:
            with anyio.fail_after(30):
                while not slow.running_executions:  # noqa: ASYNC110 - a count, no event
                    await anyio.sleep(0.05)
            async with fast:
                with anyio.move_on_after(120):
                    while True:
                        done = await stores[0]._history.count_documents(
                            {"jobName": "work", "status": "success"}
                        )
                        if done >= n_jobs and not any(w.running_executions for w in workers):
                            break
                        await anyio.sleep(0.2)
                for each in workers:
                    await each.stop()
        print(
            f"\nclock_sync_interval={interval}: {n_jobs} jobs, {len(fleet.runs)} run, "
            f"{sum(n > 1 for n in fleet.runs.values())} run more than once, "
            f"{fleet.overlaps} overlapping runs; offsets "
            f"{[w.clock.offset.total_seconds() for w in workers]} s"
        )
        return fleet
    finally:
        for store in stores:
            await store.close()
        for client in clients:
            await client.close()


async def test_instances_60_s_apart_share_500_jobs_safely(
    mongodb_uri: str, mongo_database_name: str
) -> None:
    fleet = await _run(mongodb_uri, mongo_database_name, n_jobs=500, interval=60)
    assert len(fleet.runs) == 500  # nothing lost
    assert set(fleet.runs.values()) == {1}  # nothing run twice
    assert fleet.overlaps == 0
    client = AsyncMongoClient[dict[str, Any]](mongodb_uri, tz_aware=True)
    try:
        history = client[mongo_database_name][DEFAULT_HISTORY_COLLECTION]
        rows = await history.count_documents({"status": HistoryStatus.SUCCESS.value})
        stale = await history.count_documents({"status": HistoryStatus.STALE.value})
    finally:
        await client.close()
    assert (rows, stale) == (500, 0)


async def test_trusting_skewed_clocks_runs_jobs_twice_on_the_real_server(
    mongodb_uri: str, mongo_database_name: str
) -> None:
    fleet = await _run(mongodb_uri, mongo_database_name, n_jobs=60, interval=None)
    assert fleet.overlaps > 0 or max(fleet.runs.values()) > 1


async def test_server_time_is_the_server_s_clock(async_store: AsyncMongoJobStore) -> None:
    before = SystemClock().now()
    server = await async_store.server_time()
    after = SystemClock().now()
    assert server is not None
    assert server.tzinfo is not None
    # One machine: the server's clock is this machine's, to its millisecond resolution.
    assert before - timedelta(milliseconds=1) <= server <= after
