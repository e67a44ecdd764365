"""Adaptive claim sizes in the runtime: with ``claim_batch_size`` and ``claim_concurrency`` left
out, a claim takes every free slot and then what a thinning backlog holds, an idle instance
still sends one claim per partition per poll interval, a given value stays fixed, and two
instances draining one backlog share it."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.domain.records import ClaimRequest
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from dogs_core.runtime.plumbing.telemetry import Telemetry
from tests.runtime.conftest import Gauge, Harness, RecordingStore, times

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def _sleeper(jobs: Jobs, gauge: Gauge, seconds: float = 1) -> Any:
    @jobs.event()
    async def work(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(seconds)

    return work


def _record_sizes(store: RecordingStore) -> list[int]:
    """The number of jobs each claim call asked for, in order."""
    sizes: list[int] = []
    claim, claim_many = store.claim, store.claim_many

    async def one(request: ClaimRequest) -> Any:
        sizes.append(1)
        return await claim(request)

    async def many(requests: Any) -> Any:
        sizes.append(len(requests))
        return await claim_many(requests)

    store.claim = one  # type: ignore[method-assign]
    store.claim_many = many  # type: ignore[method-assign]
    return sizes


async def test_claims_take_every_free_slot_then_follow_a_thinning_backlog() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge)
    h = Harness(jobs)
    for _ in range(100):
        await h.client.schedule(work)
    h.store.hooks.claim_delay = 0.1
    sizes = _record_sizes(h.store)
    async with h.workers(workers_count=16, probe_enabled=False) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert len(times(gauge.events, "end")) == 100
    assert gauge.maximum == 16
    # 100 jobs: six claims of every slot, a seventh that found the four left (partial), then
    # claims of what the last one found: the idle sweeps, one per poll interval.
    assert sizes[:7] == [16] * 7
    assert set(sizes[7:]) == {4}
    assert len(sizes[7:]) <= 30


async def test_an_idle_instance_sweeps_each_partition_once_per_poll_interval() -> None:
    jobs, gauge = Jobs(), Gauge()
    _sleeper(jobs, gauge)
    h = Harness(jobs)
    sizes = _record_sizes(h.store)
    options = {"workers_count": 32, "n_partitions": 3, "poll_interval": 10, "probe_enabled": False}
    async with h.workers(**options) as workers:
        await anyio.sleep(35)  # sweeps at 0, 10, 20 and 30
        await workers.stop()
    assert len(sizes) == 12  # one claim per partition per sweep
    for sweep in range(4):
        calls = h.store.claims[3 * sweep : 3 * sweep + 3]
        assert sorted(call.request.partition for call in calls) == [0, 1, 2]


async def test_a_given_batch_size_stays_fixed() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge)
    h = Harness(jobs)
    for _ in range(40):
        await h.client.schedule(work)
    sizes = _record_sizes(h.store)
    async with h.workers(workers_count=16, claim_batch_size=4, probe_enabled=False) as workers:
        await anyio.sleep(20)
        await workers.stop()
    assert len(times(gauge.events, "end")) == 40
    assert sizes[0] == 4  # no ramp from one job: the given size from the first claim
    assert max(sizes) == 4


async def test_two_adaptive_instances_share_a_backlog() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge)
    first = RecordingStore()
    second = RecordingStore(sync=first.sync)
    for store in (first, second):
        store.hooks.claim_delay = 0.05
    h = Harness(jobs, store=first)
    for _ in range(400):
        await h.client.schedule(work)
    options: dict[str, Any] = {"workers_count": 8, "n_partitions": 4, "probe_enabled": False}
    options.update(poll_interval=1, watch_changes=False, telemetry=Telemetry())
    a = h.workers(**options)
    b = Harness(jobs, store=second, seed=1).workers(**options)
    async with a, b:
        await anyio.sleep(60)
        await a.stop()
        await b.stop()
    assert len(times(gauge.events, "end")) == 400
    assert a.claims_succeeded + b.claims_succeeded == 400
    assert min(a.claims_succeeded, b.claims_succeeded) >= 160  # neither starved: 40% or more
