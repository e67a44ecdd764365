"""Claiming ahead in the runtime: short jobs against slow claims are claimed beyond
``workers_count`` and wait for a slot (never more than ``workers_count`` run at once), long jobs
are not, and a stop whose grace is over gives the waiting jobs back untouched."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.lookahead import Lookahead
from dogs_core.domain.records import ClaimedJob, ClaimRequest
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from dogs_core.runtime.execution.settle import Settler
from dogs_core.runtime.worker.ahead import ClaimedAhead, give_back
from tests.runtime.conftest import Gauge, Harness, assert_nothing_locked

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def _job(jobs: Jobs, gauge: Gauge, seconds: float, ran: list[str]) -> Any:
    @jobs.event()
    async def work(params: Params, ctx: JobContext) -> None:
        with gauge:
            ran.append(ctx.job_id)
            await anyio.sleep(seconds)

    return work


async def test_short_jobs_are_claimed_ahead_and_still_run_at_most_workers_count_at_once() -> None:
    jobs, gauge, ran = Jobs(), Gauge(), list[str]()
    work = _job(jobs, gauge, 0.001, ran)
    h = Harness(jobs)
    ids = [(await h.client.schedule(work)).id for _ in range(400)]  # type: ignore[union-attr]
    h.store.hooks.claim_delay = 0.05  # a claim takes 50 times a job
    ahead_seen = 0
    async with h.workers(workers_count=8, probe_enabled=False) as workers:
        for _ in range(3000):
            await anyio.sleep(0.01)
            ahead_seen = max(ahead_seen, workers._pacer.ledger.extra_slots)
            if len(ran) == len(ids):
                break
        await workers.stop()
    assert ahead_seen == 24  # three batches' worth of slots beyond the 8
    assert gauge.maximum <= 8
    assert sorted(ran) == sorted(ids)  # every job once
    assert_nothing_locked(h.store)


async def test_jobs_longer_than_a_claim_are_not_claimed_ahead() -> None:
    jobs, gauge, ran = Jobs(), Gauge(), list[str]()
    work = _job(jobs, gauge, 1.0, ran)
    h = Harness(jobs)
    for _ in range(40):
        await h.client.schedule(work)
    h.store.hooks.claim_delay = 0.05
    async with h.workers(workers_count=8, probe_enabled=False) as workers:
        for _ in range(10):
            await anyio.sleep(1)
            assert workers._pacer.ledger.extra_slots == 0
            assert workers._pacer.ledger.active <= 8
        await workers.stop()
    assert gauge.maximum <= 8


async def test_jobs_waiting_for_a_slot_are_given_back_as_they_were() -> None:
    jobs, gauge, ran = Jobs(), Gauge(), list[str]()
    work = _job(jobs, gauge, 0.0, ran)
    h = Harness(jobs)
    for _ in range(3):
        await h.client.schedule(work)
    ledger = CapacityLedger(1, {work.name: None})
    ledger.set_extra_slots(2)
    started: list[ClaimedJob] = []
    queue = ClaimedAhead(1, ledger, Lookahead(2), lambda job, at: started.append(job))
    claimed: list[ClaimedJob] = []
    for reservation in ledger.reserve_batch(3):
        request = ClaimRequest(
            (work.name,), 0, "byJobName", h.clock.now(), h.at(30), f"lock-{len(claimed)}"
        )
        job = await h.store.claim(request)
        assert job is not None
        ledger.settle(reservation, job.job_name)
        claimed.append(job)
        queue.offer(job, anyio.current_time())
    assert len(started) == 1  # one slot: the others wait
    assert len(queue) == 2
    waiting = queue.close()
    assert ledger.extra_slots == 0
    assert len(queue) == 0
    settler = Settler(h.store)
    async with anyio.create_task_group() as writers:
        writers.start_soon(settler.run)
        await give_back(settler, h.clock, waiting)
        writers.cancel_scope.cancel()
    for job in waiting:
        record = await h.store.get_record(job.job_id)
        assert record is not None
        assert record.locked_until is None  # unlocked
        assert record.next_run_at <= h.clock.now()  # and due now
        assert record.tries == job.tries - 1  # the claim's try given back
    queue.freed(0.0)
    assert len(started) == 1  # closed: nothing more starts
