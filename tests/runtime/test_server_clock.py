"""Lock expiry on the store's clock: instances whose own clocks are 60 s apart share jobs safely.

The in-memory store's ``clock`` plays the database server's clock; each instance's clock is a
:class:`SkewedClock` over it (the machine's clock, wrong by a fixed skew). The workers and the
client measure their offset to the store (``server_time``) and compute every time on its clock.
With ``clock_sync_interval=None`` (trusting the machine's clock, as Dogs does) the same fleet
runs jobs twice: the fast instance takes the slow one's live locks for expired ones.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, LoopClock, ServerClock, SkewedClock, Workers
from dogs_testing.memory import InMemoryJobStore
from tests.runtime.conftest import START

pytestmark = pytest.mark.anyio

SKEW = timedelta(seconds=60)


def _fleet_jobs(runs: Counter[str], live: set[str], overlaps: list[str]) -> Jobs:
    jobs = Jobs()
    rng = random.Random(7)

    @jobs.event(lock_time=2, heartbeat=True)
    async def work(params: dict[str, Any] | None, ctx: JobContext) -> None:
        runs[ctx.job_id] += 1
        if ctx.job_id in live:
            overlaps.append(ctx.job_id)
        live.add(ctx.job_id)
        try:
            # A tenth of the jobs outlive their 2 s lock several times: renewals keep them.
            await anyio.sleep(rng.uniform(3, 7) if rng.random() < 0.1 else rng.uniform(0, 0.5))
        finally:
            live.discard(ctx.job_id)

    return jobs


async def _all_ended(store: InMemoryJobStore, fleet: list[Workers], n_jobs: int) -> None:
    """Poll until every job has a row and no execution runs (virtual time: polls are free)."""
    while True:
        rows = store.sync.read_history("work", limit=10_000)
        if len(rows) >= n_jobs and not any(w.running_executions for w in fleet):
            return
        await anyio.sleep(1)


async def _run_fleet(interval: float | None, n_jobs: int = 500) -> tuple[Counter[str], int, int]:
    """Schedule ``n_jobs`` (a backlog due two minutes ago) through a client 60 s fast and run
    them on two instances, one 60 s fast and one 60 s slow. Returns runs per job, overlapping
    runs, and jobs with a success."""
    server = LoopClock(START)
    store = InMemoryJobStore(clock=server)
    runs: Counter[str] = Counter()
    live: set[str] = set()
    overlaps: list[str] = []
    jobs = _fleet_jobs(runs, live, overlaps)
    client = DogsClient(store, jobs, clock=SkewedClock(server, SKEW), clock_sync_interval=interval)
    ids = [
        (await client.schedule("work", {"n": n}, run_at=START - 2 * SKEW)).id  # type: ignore[union-attr]
        for n in range(n_jobs)
    ]
    fleet = [
        Workers(
            store,
            jobs,
            clock=SkewedClock(server, skew),
            workers_count=16,
            poll_interval=0.5,
            clock_sync_interval=interval,
            rng=random.Random(seed),
        )
        for seed, skew in ((1, SKEW), (2, -SKEW))
    ]
    async with fleet[0], fleet[1]:
        with anyio.move_on_after(600):
            await _all_ended(store, fleet, n_jobs)
        for workers in fleet:
            await workers.stop()
    succeeded = {
        row.job_id
        for row in store.sync.read_history("work", limit=10_000)
        if row.status is HistoryStatus.SUCCESS
    }
    return runs, len(overlaps), len(succeeded & set(ids))


async def test_instances_60_s_apart_run_each_of_500_jobs_once() -> None:
    runs, overlaps, succeeded = await _run_fleet(interval=60)
    assert succeeded == 500  # nothing lost
    assert overlaps == 0
    assert sorted(set(runs.values())) == [1]  # nothing run twice
    assert len(runs) == 500


async def test_trusting_the_machines_clocks_runs_jobs_twice() -> None:
    """The same fleet without measuring: the check above is not vacuous."""
    runs, overlaps, _ = await _run_fleet(interval=None, n_jobs=100)
    assert overlaps > 0
    assert max(runs.values()) > 1


async def test_a_client_60_s_fast_schedules_due_now_on_the_store_s_clock() -> None:
    server = LoopClock(START)
    store = InMemoryJobStore(clock=server)
    jobs = Jobs()

    @jobs.event
    async def ping(params: None, ctx: JobContext) -> None:
        pass

    client = DogsClient(store, jobs, clock=SkewedClock(server, SKEW))
    outcome = await client.schedule(ping, run_in=10)
    record = await client.get_job(outcome.id)  # type: ignore[union-attr]
    assert record is not None
    assert record.next_run_at == START + timedelta(seconds=10)
    assert client.clock.offset == -SKEW


async def test_workers_measure_again_every_interval() -> None:
    server = LoopClock(START)
    store = InMemoryJobStore(clock=server)
    jobs = Jobs()

    @jobs.event
    async def ping(params: None, ctx: JobContext) -> None:
        pass

    machine = SkewedClock(server, SKEW)
    async with Workers(store, jobs, clock=machine, clock_sync_interval=30) as workers:
        await anyio.sleep(1)
        assert isinstance(workers.clock, ServerClock)
        assert workers.clock.offset == -SKEW
        assert workers.clock.now() == server.now()
        machine.skew = timedelta(seconds=-5)  # the machine's clock is stepped (NTP)
        await anyio.sleep(31)
        assert workers.clock.offset == timedelta(seconds=5)
        assert workers.clock.now() == server.now()
        await workers.stop()


async def test_a_large_offset_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    server = LoopClock(START)
    store = InMemoryJobStore(clock=server)
    jobs = Jobs()

    @jobs.event
    async def ping(params: None, ctx: JobContext) -> None:
        pass

    caplog.set_level("WARNING", logger="dogs.clock")
    async with Workers(store, jobs, clock=SkewedClock(server, SKEW), clock_sync_interval=10):
        await anyio.sleep(35)
    lines = [r.getMessage() for r in caplog.records if r.name == "dogs.clock"]
    assert len(lines) == 1
    assert "60.000 s ahead of the database's" in lines[0]


async def test_a_store_without_a_clock_leaves_the_machine_s_clock_alone() -> None:
    store = InMemoryJobStore()  # no clock: server_time() is None
    jobs = Jobs()

    @jobs.event
    async def ping(params: None, ctx: JobContext) -> None:
        pass

    machine = SkewedClock(LoopClock(START), SKEW)
    client = DogsClient(store, jobs, clock=machine)
    await client.schedule(ping)
    assert client.clock.offset == timedelta(0)
    assert client.clock.now() == machine.now()


async def test_operator_calls_of_a_client_60_s_fast_see_a_running_job_as_running() -> None:
    """Trusting its clock, a client 60 s fast would find the 30 s lock of a running job expired
    and delete, reschedule or purge it as not running."""
    server = LoopClock(START)
    store = InMemoryJobStore(clock=server)
    jobs = Jobs()
    started = anyio.Event()

    @jobs.event
    async def slow(params: None, ctx: JobContext) -> None:
        started.set()
        await anyio.sleep(20)

    client = DogsClient(store, jobs, clock=SkewedClock(server, SKEW))
    outcome = await client.schedule(slow)
    job_id = outcome.id  # type: ignore[union-attr]
    async with Workers(store, jobs, clock=server, default_lock_time=30) as workers:
        await started.wait()
        assert type(await client.delete(job_id)).__name__ == "Running"
        assert type(await client.reschedule(job_id, run_in=5)).__name__ == "Running"
        assert await client.delete_jobs(slow, state="stale") == 0
        assert [r.id for r in (await client.find_jobs(slow, state="running")).jobs] == [job_id]
        # The same client trusting its clock takes the live lock for an expired one.
        trusting = DogsClient(
            store, jobs, clock=SkewedClock(server, SKEW), clock_sync_interval=None
        )
        assert [r.id for r in (await trusting.find_jobs(slow, state="stale")).jobs] == [job_id]
        await workers.stop()
