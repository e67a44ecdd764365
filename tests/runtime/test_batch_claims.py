"""Batch claims (``claim_batch_size``): one claim call takes several jobs, never more than the
free slots, never past a per-name cap, and only one batch claim per partition is in flight."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core.errors import ValidationError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, WorkerSettings
from tests.runtime.conftest import Gauge, Harness, RecordingStore, times

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def _sleeper(jobs: Jobs, gauge: Gauge, seconds: float = 10, **options: Any) -> Any:
    @jobs.event(**options)
    async def work(params: Params, ctx: JobContext) -> None:
        with gauge:
            await anyio.sleep(seconds)

    return work


async def test_one_call_claims_a_batch_of_jobs() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge)
    h = Harness(jobs)
    for _ in range(12):
        await h.client.schedule(work)
    async with h.workers(workers_count=12, claim_batch_size=12, claim_concurrency=1) as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert h.store.calls.count("claim_many") == 1
    assert times(gauge.events, "start") == [0] * 12


async def test_a_batch_never_exceeds_the_batch_size_or_the_free_slots() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge, seconds=5)
    h = Harness(jobs)
    for _ in range(20):
        await h.client.schedule(work)
    sizes: list[int] = []
    original = h.store.claim_many

    async def recording(requests: Any) -> Any:
        sizes.append(len(requests))
        return await original(requests)

    h.store.claim_many = recording  # type: ignore[method-assign]
    async with h.workers(workers_count=6, claim_batch_size=4, poll_interval=1) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert gauge.maximum == 6
    assert len(times(gauge.events, "end")) == 20
    assert max(sizes) == 4
    assert all(2 <= size <= 4 for size in sizes), "single-slot claims use claim(), not a batch"


async def test_a_batch_respects_a_per_name_cap() -> None:
    jobs, capped_gauge, other_gauge = Jobs(), Gauge(), Gauge()
    capped = _sleeper(jobs, capped_gauge, seconds=3, max_parallel_executions_per_server=2)

    @jobs.event
    async def other(params: Params, ctx: JobContext) -> None:
        with other_gauge:
            await anyio.sleep(3)

    h = Harness(jobs)
    for _ in range(6):
        await h.client.schedule(capped)
    for _ in range(6):
        await h.client.schedule(other, priority=50)
    async with h.workers(workers_count=16, claim_batch_size=16, poll_interval=100) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert capped_gauge.maximum == 2
    assert len(times(capped_gauge.events, "end")) == 6
    assert len(times(other_gauge.events, "end")) == 6
    assert h.store.records() == []


class SlowClaims(RecordingStore):
    """Claim calls take half a second; tracks batch claims in flight per partition."""

    def __init__(self) -> None:
        super().__init__()
        self.batches_in_flight: dict[int, int] = {}
        self.most_batches_per_partition = 0

    async def claim_many(self, requests: Any) -> Any:
        partition = requests[0].partition
        self.batches_in_flight[partition] = self.batches_in_flight.get(partition, 0) + 1
        self.most_batches_per_partition = max(
            self.most_batches_per_partition, self.batches_in_flight[partition]
        )
        try:
            await anyio.sleep(0.5)
            return await super().claim_many(requests)
        finally:
            self.batches_in_flight[partition] -= 1


@pytest.mark.parametrize("n_partitions", [1, 3])
async def test_one_batch_claim_per_partition_in_flight(n_partitions: int) -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge, seconds=0.1)
    store = SlowClaims()
    h = Harness(jobs, store=store)
    for _ in range(60):
        await h.client.schedule(work)
    async with h.workers(
        workers_count=32,
        claim_batch_size=4,
        claim_concurrency=8,
        n_partitions=n_partitions,
        poll_interval=100,
    ) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert len(times(gauge.events, "end")) == 60, "every job ran (no stall on a false miss)"
    assert store.most_batches_per_partition == 1


def test_claim_batch_size_defaults_and_validation() -> None:
    # Not given, the value is the ceiling of the adaptive batch size.
    assert WorkerSettings(workers_count=4).claim_batch_size == 4
    assert WorkerSettings(workers_count=100).claim_batch_size == 64
    assert "claim_batch_size" in WorkerSettings(workers_count=100).adaptive_claims
    assert WorkerSettings(claim_batch_size=1).claim_batch_size == 1
    assert "claim_batch_size" not in WorkerSettings(claim_batch_size=1).adaptive_claims
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValidationError, match="claim_batch_size"):
            WorkerSettings(claim_batch_size=bad)  # type: ignore[arg-type]


class MissAfterWake(RecordingStore):
    """The first claim sent is slow and finds nothing: its miss arrives after a wake()."""

    def __init__(self) -> None:
        super().__init__()
        self.calls_seen = 0

    async def claim(self, request: Any) -> Any:
        self.calls_seen += 1
        if self.calls_seen == 1:
            await anyio.sleep(2)
            return None
        return await super().claim(request)


async def test_a_miss_of_a_claim_sent_before_wake_does_not_put_the_workers_to_sleep() -> None:
    jobs, gauge = Jobs(), Gauge()
    work = _sleeper(jobs, gauge, seconds=1)
    store = MissAfterWake()
    h = Harness(jobs, store=store)
    async with h.workers(workers_count=1, poll_interval=60, probe_enabled=False) as workers:
        await anyio.sleep(1)  # the first claim (empty store) is still on its way
        await h.client.schedule(work)
        workers.wake()
        await anyio.sleep(5)
        await workers.stop()
    # The one slot is held by the slow claim until t=2. Its miss is ignored, so the next claim
    # goes out at once and finds the job, instead of after the 60 s poll interval.
    assert times(gauge.events, "start") == [2.0]
