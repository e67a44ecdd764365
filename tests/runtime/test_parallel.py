"""Parallel executions and per-server caps (Dogs ``parallelEvents.test.ts``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Gauge, Harness, now, times

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


async def test_same_name_jobs_run_in_parallel() -> None:
    jobs = Jobs()
    gauge = Gauge()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(10)

    h = Harness(jobs)
    for _ in range(3):
        await h.client.schedule(job)
    async with h.workers(workers_count=4) as workers:
        await anyio.sleep(12)
        await workers.stop()
    assert times(gauge.events, "start") == [0, 0, 0]
    assert times(gauge.events, "end") == [10, 10, 10]
    assert gauge.maximum == 3


async def test_workers_count_bounds_concurrency() -> None:
    jobs = Jobs()
    gauge = Gauge()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(1)

    h = Harness(jobs)
    for _ in range(20):
        await h.client.schedule(job)
    async with h.workers(workers_count=10, poll_interval=100) as workers:
        await anyio.sleep(5)
        await workers.stop()
    assert gauge.maximum == 10
    assert times(gauge.events, "start") == [0] * 10 + [1] * 10
    assert h.store.records() == []


async def test_max_parallel_executions_per_server_caps_one_name() -> None:
    jobs = Jobs()
    gauge = Gauge()
    other = Gauge()

    @jobs.event(max_parallel_executions_per_server=2)
    async def capped(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(3)

    @jobs.event
    async def uncapped(params: Params, ctx: JobContext) -> None:
        with other:
            await anyio.sleep(3)

    h = Harness(jobs)
    for _ in range(5):
        await h.client.schedule(capped)
    for _ in range(3):
        await h.client.schedule(uncapped, priority=50)
    async with h.workers(workers_count=8, poll_interval=100) as workers:
        await anyio.sleep(20)
        await workers.stop()
    assert gauge.maximum == 2
    assert len(times(gauge.events, "end")) == 5, "all five complete"
    assert times(gauge.events, "start") == [0, 0, 3, 3, 6]
    assert times(other.events, "start") == [0, 0, 0], "other names use the free slots"
    assert h.store.records() == []


async def test_a_cap_of_zero_disables_the_job_on_this_instance() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event(max_parallel_executions_per_server=0)
    async def never_here(params: Params, ctx: JobContext) -> None:
        ran.append(now())

    h = Harness(jobs)
    await h.client.schedule(never_here)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert ran == []
    assert len(h.store.records()) == 1
    assert h.store.claims == [], "no name can be offered: no claim is sent at all"
