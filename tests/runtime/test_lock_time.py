"""Per-job lock time (Dogs ``jobLockTime.test.ts``), lock renewal through
``ctx.extend_lock_time`` (Dogs ``Executor.lockTime.test.ts``, driven through the real runtime and
store), and the automatic heartbeat."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import StoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, RecordingStore, assert_nothing_locked, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def statuses(h: Harness, name: str) -> list[HistoryStatus]:
    return [row.status for row in h.store.history(name)]


async def test_a_job_lock_time_above_the_default_prevents_staleness() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=60)
    async def long(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(20)

    h = Harness(jobs)
    await h.client.schedule(long)
    async with h.workers(default_lock_time=10) as workers:
        await anyio.sleep(1)
        (record,) = h.store.records()
        assert record.locked_until == h.at(60), "the job's lock time is applied after the claim"
        await anyio.sleep(30)
        await workers.stop()
    assert statuses(h, "long") == [HistoryStatus.SUCCESS]
    (claim,) = h.store.claims[:1]
    assert claim.request.locked_until == h.at(10), "the claim itself uses the default lock time"


async def test_a_job_lock_time_below_the_default_causes_one_stale_run() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=5)
    async def short(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(10)

    h = Harness(jobs)
    await h.client.schedule(short)
    async with h.workers(default_lock_time=30) as workers:
        await anyio.sleep(20)
        await workers.stop()
    assert statuses(h, "short") == [HistoryStatus.STALE, HistoryStatus.SUCCESS]
    assert next(row.duration_ms for row in h.store.history("short")) == 5000


async def test_the_default_lock_time_applies_without_a_job_lock_time() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(10)

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(default_lock_time=4) as workers:
        await anyio.sleep(20)
        await workers.stop()
    assert statuses(h, "job") == [HistoryStatus.STALE, HistoryStatus.SUCCESS]
    assert h.store.history("job")[0].duration_ms == 4000
    assert "extend_lock" not in h.store.calls, "no second write when the lock time is the default"


async def test_the_watchdog_counts_the_lock_from_the_claim_request() -> None:
    """A slow claim eats into the lock: the record's lock runs from the claim request, so the
    local watchdog must too, or another worker could claim the job while this one still runs."""
    jobs = Jobs()
    events: list[tuple[str, int, float]] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        events.append(("start", ctx.tries, now()))
        try:
            await anyio.sleep(20)
        except anyio.get_cancelled_exc_class():
            events.append(("cancelled", ctx.tries, now()))
            raise

    fast = RecordingStore()
    slow = RecordingStore(sync=fast.sync)
    slow.hooks.claim_delay = 3  # the claim sent at 0 returns at 3, with lockedUntil = 10
    h = Harness(jobs, store=fast)
    await h.client.schedule(job)
    lagging = Harness(jobs, store=slow, clock=h.clock)
    other = Harness(jobs, store=fast, clock=h.clock, seed=1)
    async with lagging.workers(workers_count=1, default_lock_time=10, poll_interval=1000) as a:
        await anyio.sleep(5)
        async with other.workers(default_lock_time=10, poll_interval=1) as b:
            await anyio.sleep(12)
            await b.stop()
        await a.stop()
    assert ("start", 1, 3.0) in events
    assert ("cancelled", 1, 10.0) in events, "stale when the stored lock expired, not at 13"
    assert ("start", 2, 10.0) in events
    (stale_row, *_) = fast.history("job")
    assert stale_row.status is HistoryStatus.STALE
    assert stale_row.ended_at == h.at(10)


async def test_a_slow_lock_time_write_also_eats_into_the_lock() -> None:
    jobs = Jobs()
    stale_at: list[float] = []

    async def on_stale(params: Params, ctx: JobContext) -> None:
        stale_at.append(now())

    @jobs.event(lock_time=10, on_stale=on_stale)
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(20)

    h = Harness(jobs)
    h.store.hooks.extend_delay = 2  # the lock-time write sent at 0 sets lockedUntil = 10
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(15)
        await workers.stop()
    assert stale_at == [10.0]


# -- renewal through ctx.extend_lock_time ------------------------------------------------------


async def test_concurrent_pulses_coalesce_into_one_follow_up_with_the_longest_duration() -> None:
    jobs = Jobs()
    results: list[bool] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        async def pulse(seconds: float) -> None:
            results.append(await ctx.extend_lock_time(seconds))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pulse, 100)  # starts the first write
            await anyio.sleep(0.1)
            for seconds in range(101, 199):
                tg.start_soon(pulse, seconds)
            tg.start_soon(pulse, 299)
        await anyio.sleep(200)

    h = Harness(jobs)
    h.store.hooks.extend_delay = 1
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30) as workers:
        await anyio.sleep(300)
        await workers.stop()
    assert len(results) == 100
    assert all(results)
    first, second = h.store.extends
    assert first.started == 0
    assert first.locked_until == h.at(100)
    assert second.started == 1, "the follow-up starts when the first write returns"
    assert second.locked_until == h.at(1 + 299), "it carries the longest pending duration"
    assert statuses(h, "job") == [HistoryStatus.SUCCESS]


async def test_the_watchdog_deadline_is_the_write_start_plus_extra() -> None:
    """A slow renewal write eats into the lock: the watchdog fires at start + extra."""
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(2)
        assert await ctx.extend_lock_time(10)  # written at t=2, returns at t=5
        await anyio.sleep(100)

    h = Harness(jobs)
    h.store.hooks.extend_delay = 3
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(13)
        await workers.stop()
    (row,) = h.store.history("job")[:1]
    assert row.status is HistoryStatus.STALE
    assert row.ended_at == h.at(12), "stale at write start (2) + extra (10), not response + extra"


async def test_a_lost_lock_makes_the_execution_stale_exactly_once() -> None:
    jobs = Jobs()
    answers: list[bool] = []
    stale_calls: list[float] = []

    async def on_stale(params: Params, ctx: JobContext) -> None:
        stale_calls.append(now())

    @jobs.event(on_stale=on_stale, cancel_on_stale=False)
    async def job(params: Params, ctx: JobContext) -> None:
        if ctx.tries > 1:
            await anyio.sleep(1000)
            return
        await anyio.sleep(1)
        h.store.sync.release_all_locks()  # someone else took the lock away
        answers.append(await ctx.extend_lock_time(60))
        answers.append(await ctx.extend_lock_time(60))  # refused: no further write

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(5)
        await workers.stop(grace=0)
    assert answers == [False, False]
    assert stale_calls == [1.0]
    assert len(h.store.extends) == 1
    assert h.store.extends[0].matched is False
    assert statuses(h, "job")[:1] == [HistoryStatus.STALE]
    assert "demote_stale" in h.store.calls


async def test_a_store_error_on_renewal_makes_it_stale_and_the_caller_gets_the_error() -> None:
    jobs = Jobs()
    boom = StoreError("renewal exploded")
    caught: list[BaseException] = []
    stale_calls: list[float] = []

    async def on_stale(params: Params, ctx: JobContext) -> None:
        stale_calls.append(now())

    @jobs.event(on_stale=on_stale, cancel_on_stale=False)
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await ctx.extend_lock_time(60)
        except StoreError as error:
            caught.append(error)
        assert await ctx.extend_lock_time(60) is False, "refused once stale"

    h = Harness(jobs)
    h.store.hooks.extend_error = boom
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(5)
        await workers.stop()
    assert caught == [boom], "the caller sees the store's own error"
    assert stale_calls == [0.0]
    assert statuses(h, "job") == [HistoryStatus.STALE], "the late success is ignored"
    (record,) = h.store.records()
    assert record.priority == 0, "demoted"


async def test_a_store_error_on_renewal_cancels_the_handler_by_default() -> None:
    jobs = Jobs()
    outcome: list[str] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await ctx.extend_lock_time(60)
            outcome.append("returned")
        except anyio.get_cancelled_exc_class():
            outcome.append("cancelled")
            raise

    h = Harness(jobs)
    h.store.hooks.extend_error = StoreError("renewal exploded")
    await h.client.schedule(job)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(5)
        await workers.stop()
    assert outcome == ["cancelled"]
    assert statuses(h, "job") == [HistoryStatus.STALE]


async def test_clear_stale_timeout_disarms_the_watchdog_for_good() -> None:
    jobs = Jobs()
    answers: list[bool] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        ctx.clear_stale_timeout()
        answers.append(await ctx.extend_lock_time(60))
        await anyio.sleep(50)

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(default_lock_time=10, poll_interval=1000) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert answers == [False]
    assert statuses(h, "job") == [HistoryStatus.SUCCESS], "no local stale after 10 s"
    assert h.store.extends == []


async def test_clearing_during_an_in_flight_renewal_never_re_arms_the_watchdog() -> None:
    jobs = Jobs()
    answers: list[bool] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        async def renew() -> None:
            answers.append(await ctx.extend_lock_time(60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(renew)  # written at 0, answered at 3
            await anyio.sleep(1)
            ctx.clear_stale_timeout()
        await anyio.sleep(45)

    h = Harness(jobs)
    h.store.hooks.extend_delay = 3
    await h.client.schedule(job)
    async with h.workers(default_lock_time=10, poll_interval=1000) as workers:
        await anyio.sleep(50)
        await workers.stop()
    assert answers == [True], "the write in flight still completes"
    assert statuses(h, "job") == [HistoryStatus.SUCCESS], "never stale, though 10 s passed"
    assert len(h.store.extends) == 1


async def test_a_pulse_made_as_a_renewal_settles_starts_a_new_write() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        assert await ctx.extend_lock_time(10)
        assert await ctx.extend_lock_time(20)
        await anyio.sleep(15)

    h = Harness(jobs)
    h.store.hooks.extend_delay = 1
    await h.client.schedule(job)
    async with h.workers(default_lock_time=5, poll_interval=1000) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert [(e.started, e.locked_until) for e in h.store.extends] == [
        (0.0, h.at(10)),
        (1.0, h.at(21)),
    ]
    assert statuses(h, "job") == [HistoryStatus.SUCCESS]


@pytest.mark.parametrize("repeat", range(4))
async def test_a_pulse_at_the_lock_deadline_cannot_revive_the_expired_lock(repeat: int) -> None:
    """The pulse and the watchdog are due at the same instant; whichever task runs first, the
    lock has expired (another worker may already claim it), so the pulse is refused."""
    jobs = Jobs()
    answers: list[bool] = []

    @jobs.event(cancel_on_stale=False)
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(10)
        answers.append(await ctx.extend_lock_time(30))

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(default_lock_time=10, poll_interval=1000) as workers:
        await anyio.sleep(12)
        await workers.stop()
    assert answers == [False]
    assert statuses(h, "job") == [HistoryStatus.STALE]
    assert h.store.extends == []


async def test_a_pulse_after_the_handler_returned_is_refused() -> None:
    jobs = Jobs()
    contexts: list[JobContext] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        contexts.append(ctx)

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(1)
        assert await contexts[0].extend_lock_time(10) is False
        await workers.stop()
    assert h.store.extends == []


# -- heartbeat (DESIGN §5) -----------------------------------------------------------------------


async def test_heartbeat_keeps_a_long_job_alive_past_its_lock_time() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=True, lock_time=30)
    async def long(params: Params, ctx: JobContext) -> str:
        await anyio.sleep(95)
        return "done"

    h = Harness(jobs)
    await h.client.schedule(long)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(50)
        (record,) = h.store.records()
        assert record.locked_until is not None
        assert record.locked_until > h.at(50)
        await anyio.sleep(60)
        await workers.stop()
    assert statuses(h, "long") == [HistoryStatus.SUCCESS]
    assert [e.started for e in h.store.extends] == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert all(e.locked_until == h.at(e.started + 30) for e in h.store.extends)
    assert len(h.store.claims) == 1 or all(c.result is None for c in h.store.claims[1:])
    assert h.store.records() == []


async def test_heartbeat_fraction_and_a_per_job_lock_time() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=0.5, lock_time=timedelta(seconds=8))
    async def long(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(17)

    h = Harness(jobs)
    await h.client.schedule(long)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert statuses(h, "long") == [HistoryStatus.SUCCESS]
    # the first write applies the job's lock time, then a pulse every 4 s
    assert [e.started for e in h.store.extends] == [0, 4, 8, 12, 16]


async def test_a_heartbeat_that_loses_its_lock_goes_stale() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=True, lock_time=30)
    async def long(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(15)
        h.store.sync.release_all_locks()
        await anyio.sleep(100)

    h = Harness(jobs)
    await h.client.schedule(long)
    async with h.workers(default_lock_time=30, poll_interval=1000) as workers:
        await anyio.sleep(40)
        await workers.stop()
    assert statuses(h, "long")[:1] == [HistoryStatus.STALE]
    assert h.store.history("long")[0].ended_at == h.at(20), "the pulse at 20 s found it lost"
    assert_nothing_locked(h.store, at=h.at(40))
