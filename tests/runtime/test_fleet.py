"""Fleet-wide controls under virtual time on the in-memory store: pause and resume, global
concurrency (per name and per key), rate limits, and leases, across several instances."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from dogs_core.domain.controls import RateLimit, rate_window
from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import InvalidOptionError, LockHeldError, TransientStoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, RecordingStore, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class Gauge:
    """How many handlers run at once, at most (per key)."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def enter(self, key: str = "") -> None:
        self.running[key] += 1
        self.peak[key] = max(self.peak[key], self.running[key])

    def leave(self, key: str = "") -> None:
        self.running[key] -= 1


async def test_a_paused_job_is_not_claimed_until_it_is_resumed() -> None:
    jobs = Jobs()
    started: list[float] = []

    @jobs.event
    async def mail(params: Params, ctx: JobContext) -> None:
        started.append(now())

    @jobs.event
    async def other(params: Params, ctx: JobContext) -> None:
        started.append(-now())

    h = Harness(jobs)
    assert await h.client.pause(mail)
    assert not await h.client.pause("mail")  # already paused
    assert await h.client.paused() == frozenset({"mail"})
    await h.client.schedule(mail)
    await h.client.schedule(other)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(10)
        assert started == [-0.0]  # only the other job ran
        assert await h.client.resume(mail)
        await anyio.sleep(3)
        await workers.stop()
    assert len(started) == 2
    assert 10 <= started[1] <= 11  # within one poll interval of the resume


async def test_pausing_every_job_lets_running_ones_finish() -> None:
    jobs = Jobs()
    ended: list[float] = []

    @jobs.event
    async def work(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(5)
        ended.append(now())

    h = Harness(jobs)
    await h.client.schedule(work)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(1)
        await h.client.pause()
        await anyio.sleep(1.5)  # the pause is seen within one poll interval
        await h.client.schedule(work)
        await anyio.sleep(20)
        assert ended == [5.0]  # the running one finished; the new one waits
        await h.client.resume()
        await anyio.sleep(10)
        await workers.stop()
    assert len(ended) == 2
    with pytest.raises(InvalidOptionError, match="job"):
        await h.client.pause("*")


async def test_global_concurrency_holds_across_instances_and_tries_are_not_used() -> None:
    jobs = Jobs()
    gauge = Gauge()
    tries: list[int] = []

    @jobs.event(global_concurrency=2, max_tries=1)
    async def heavy(params: Params, ctx: JobContext) -> None:
        tries.append(ctx.tries)
        gauge.enter()
        try:
            await anyio.sleep(10)
        finally:
            gauge.leave()

    h = Harness(jobs)
    for _ in range(8):
        await h.client.schedule(heavy)
    second = Harness(jobs, store=RecordingStore(sync=h.store.sync), clock=h.clock, seed=1)
    async with h.workers(workers_count=4) as a, second.workers(workers_count=4) as b:
        await anyio.sleep(120)
        await a.stop()
        await b.stop()
    assert gauge.peak[""] == 2
    assert tries == [1] * 8, "a job given back by the limit keeps its try"
    assert h.store.records() == []
    statuses = [row.status for row in h.store.history("heavy")]
    assert statuses == [HistoryStatus.SUCCESS] * 8, "no row for a job given back"


async def test_concurrency_per_key() -> None:
    jobs = Jobs()
    gauge = Gauge()

    @jobs.event(global_concurrency=1, concurrency_key=lambda p: p["account"])
    async def sync_account(params: Params, ctx: JobContext) -> None:
        assert params is not None
        gauge.enter(params["account"])
        try:
            await anyio.sleep(5)
        finally:
            gauge.leave(params["account"])

    h = Harness(jobs)
    for account in ("a", "a", "a", "b", "b"):
        await h.client.schedule(sync_account, {"account": account})
    async with h.workers(workers_count=5) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert gauge.peak == Counter({"a": 1, "b": 1})
    assert h.store.records() == []


async def test_a_crashed_holder_gives_its_slot_back_when_its_lock_expires() -> None:
    jobs = Jobs()
    runs: list[tuple[int, float]] = []

    @jobs.event(global_concurrency=1, lock_time=10)
    async def single(params: Params, ctx: JobContext) -> None:
        runs.append((ctx.tries, now()))
        await anyio.sleep(1 if ctx.tries > 1 else 1000)

    h = Harness(jobs)
    await h.client.schedule(single)
    workers = h.workers()
    with anyio.CancelScope() as crash:
        async with workers:
            await anyio.sleep(2)
            crash.cancel()  # a crash: no stop, no release, no slot given back
    second = Harness(jobs, store=RecordingStore(sync=h.store.sync), clock=h.clock, seed=2)
    async with second.workers() as other:
        await anyio.sleep(30)
        await other.stop()
    assert runs[0] == (1, 0.0)
    assert runs[1][0] == 2
    assert runs[1][1] >= 10.0  # not before the dead worker's lock (and slot) ran out
    assert h.store.records() == []


async def test_a_rate_limit_holds_in_every_window() -> None:
    jobs = Jobs()
    starts: list[float] = []

    @jobs.event(rate_limit=RateLimit(3, "10s"))
    async def call_api(params: Params, ctx: JobContext) -> None:
        starts.append(now())

    h = Harness(jobs)
    for _ in range(10):
        await h.client.schedule(call_api)
    async with h.workers(workers_count=8) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert len(starts) == 10
    windows = Counter(rate_window(h.at(t), RateLimit(3, "10s").period)[0] for t in starts)
    assert max(windows.values()) == 3
    assert h.store.records() == []


async def test_a_lease_has_one_holder_and_growing_tokens() -> None:
    jobs = Jobs()

    @jobs.event
    async def unused(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    client = h.client
    async with client.lock("nightly", ttl=3) as first:
        assert first.token == 1
        with pytest.raises(LockHeldError, match="nightly"):
            async with client.lock("nightly", ttl=3):
                pass
        await anyio.sleep(20)  # renewed every second: still held long past its ttl
        assert not first.lost
        with pytest.raises(LockHeldError):
            async with client.lock("nightly", ttl=3):
                pass
    async with client.lock("nightly", ttl=3) as second:
        assert second.token == 2
    got: list[int] = []

    async def waiter() -> None:
        async with client.lock("nightly", ttl=3, wait=30) as lease:
            got.append(lease.token)

    async with anyio.create_task_group() as group, client.lock("nightly", ttl=3) as third:
        group.start_soon(waiter)
        await anyio.sleep(5)
        assert got == []  # waiting for the lease
        token = third.token
    assert third.token == 3
    assert got == [token + 1]


async def test_a_lease_whose_renewal_fails_is_lost() -> None:
    jobs = Jobs()

    @jobs.event
    async def unused(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    async with h.client.lock("report", ttl=3) as lease:
        # Someone took it over after a (simulated) long pause of ours: our renewals now fail.
        assert h.store.sync.release_lease("report", owner=lease.owner, token=lease.token)
        await anyio.sleep(5)
        assert lease.lost
        with pytest.raises(Exception, match="was lost"):
            lease.raise_if_lost()
    with pytest.raises(InvalidOptionError, match="ttl"):
        async with h.client.lock("report", ttl=0.5):
            pass


async def test_with_a_pause_feed_pause_and_resume_take_effect_at_once() -> None:
    jobs = Jobs()
    started: list[float] = []

    @jobs.event
    async def mail(params: Params, ctx: JobContext) -> None:
        started.append(now())

    h = Harness(jobs)
    async with h.workers(poll_interval=60, watch_changes=True) as workers:
        await anyio.sleep(1)
        await h.client.pause(mail)
        await anyio.sleep(0.1)
        await h.client.schedule(mail)
        await anyio.sleep(5)  # far less than a poll interval: only the feeds can tell
        assert started == []
        await h.client.resume(mail)
        resumed = now()
        await anyio.sleep(1)
        await workers.stop()
    assert len(started) == 1
    assert started[0] - resumed < 1


class FlakyLimits(RecordingStore):
    """The rate tokens' store calls fail for a while (an outage of the controls)."""

    failures = 10

    async def take_rate_token(self, *args: Any, **kwargs: Any) -> bool:
        if self.failures > 0:
            self.failures -= 1
            raise TransientStoreError("controls unreachable")
        return await super().take_rate_token(*args, **kwargs)


async def test_an_unreachable_limit_makes_the_job_wait_not_go_stale() -> None:
    jobs = Jobs()
    runs: list[tuple[int, bool]] = []

    @jobs.event(rate_limit=(10, "1s"))
    async def call_api(params: Params, ctx: JobContext) -> None:
        runs.append((ctx.tries, ctx.was_stale))

    h = Harness(jobs, store=FlakyLimits())
    job_id = (await h.client.schedule(call_api)).id  # type: ignore[union-attr]
    async with h.workers(default_lock_time=3, poll_interval=1) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert runs == [(1, False)], "given back with its try, not recovered as stale"
    assert [row.status for row in h.store.job_history(job_id)] == [HistoryStatus.SUCCESS]
