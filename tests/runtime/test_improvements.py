"""Where we do better than Dogs (DESIGN §5, dogs-spec §7): retries with backoff and a default
attempt limit, a real discard, callbacks that cannot leave a job locked, schedule outcomes,
priority 0, per-job unique keys, cooperative stop, timeouts and type-mismatched records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.definitions import Discard, Retry
from dogs_core.domain.records import (
    ClaimedJob,
    Duplicate,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    Scheduled,
)
from dogs_core.domain.schedules import DEFAULT_MAX_TRIES
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, JobTimeoutError
from tests.runtime.conftest import START, Harness, RecordingStore, assert_nothing_locked, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


async def test_a_failed_event_job_is_retried_with_backoff_until_the_default_limit() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event
    async def failing(params: Params, ctx: JobContext) -> None:
        ran.append(now())
        raise ValueError("nope")

    terminal: list[ClaimedJob] = []

    async def hook(job: ClaimedJob) -> None:
        terminal.append(job)

    h = Harness(jobs)
    await h.client.schedule(failing)
    async with h.workers(poll_interval=30, on_max_tries_reached=hook) as workers:
        await anyio.sleep(12 * 3600)
        await workers.stop()
    assert DEFAULT_MAX_TRIES == 20
    assert len(ran) == 20
    assert [job.tries for job in terminal] == [20]
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert record.tries == 20
    # 19 retries, each delayed by 2 s * 2^(attempt-1), capped at 1 h, with ±20 % jitter
    assert len(h.store.reschedules) == 19
    for attempt, (at, next_run_at) in enumerate(h.store.reschedules, start=1):
        delay = (next_run_at - h.at(at)).total_seconds()
        raw = min(3600.0, 2.0 * 2 ** (attempt - 1))
        assert raw * 0.8 - 0.001 <= delay <= raw * 1.2, (attempt, delay)
    assert [row.status for row in h.store.history("failing")] == [HistoryStatus.ERROR] * 20


async def test_on_error_discard_deletes_the_event_record() -> None:
    jobs = Jobs()

    async def discard(error: Exception, params: Params, ctx: JobContext) -> Discard:
        return Discard()

    @jobs.event(on_error=discard)
    async def job(params: Params, ctx: JobContext) -> None:
        raise ValueError("give up")

    h = Harness(jobs)
    outcome = await h.client.schedule(job, unique_key="k")
    async with h.workers() as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert h.store.records() == []
    assert [(r.status, r.error_message) for r in h.store.history("job")] == [
        (HistoryStatus.ERROR, "give up")
    ]
    assert len(h.store.successful_claims()) == 1
    again = await h.client.schedule(job, unique_key="k")
    assert isinstance(again, Scheduled)
    assert again.id != getattr(outcome, "id", None)


@pytest.mark.parametrize("behaviour", ["raises", "returns junk"])
async def test_an_on_error_that_misbehaves_counts_as_a_failed_attempt(behaviour: str) -> None:
    jobs = Jobs()

    async def on_error(error: Exception, params: Params, ctx: JobContext) -> Any:
        if behaviour == "raises":
            raise RuntimeError("on_error is broken")
        return "retry please"

    @jobs.event(on_error=on_error)
    async def job(params: Params, ctx: JobContext) -> None:
        raise ValueError("handler failed")

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(poll_interval=100) as workers:
        await anyio.sleep(1)
        (record,) = h.store.records()
        await workers.stop()
    assert record.lock_id is None, "not left locked"
    assert record.locked_until is None
    assert record.tries == 1
    delay = (record.next_run_at - h.at(0)).total_seconds()
    assert 1.6 - 0.001 <= delay <= 2.4, "rescheduled after the first backoff delay"
    assert [r.status for r in h.store.history("job")] == [HistoryStatus.ERROR]


async def test_schedule_reports_scheduled_or_duplicate_with_the_existing_id() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        return None

    h = Harness(jobs)
    first = await h.client.schedule(job, {"a": 1}, unique_key="same")
    second = await h.client.schedule(job, {"a": 2}, unique_key="same")
    assert isinstance(first, Scheduled)
    assert second == Duplicate(existing_id=first.id, unique_identifier="same")
    (record,) = h.store.records()
    assert record.params == {"a": 1}, "a duplicate never modifies the existing record"


async def test_priority_zero_can_be_scheduled_and_runs_after_other_work() -> None:
    jobs = Jobs()
    order: list[str] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        assert params is not None
        order.append(params["name"])

    h = Harness(jobs)
    await h.client.schedule(job, {"name": "low"}, priority=0)
    await h.client.schedule(job, {"name": "normal"})
    await h.client.schedule(job, {"name": "high"}, priority=200)
    assert sorted(r.priority for r in h.store.records()) == [0, 100, 200]
    async with h.workers(workers_count=1) as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert order == ["high", "normal", "low"]


async def test_unique_keys_can_be_scoped_per_job_name() -> None:
    jobs = Jobs()

    @jobs.event(unique_scope="job")
    async def a(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event(unique_scope="job")
    async def b(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event
    async def c(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event
    async def d(params: Params, ctx: JobContext) -> None:
        return None

    h = Harness(jobs)
    assert isinstance(await h.client.schedule(a, unique_key="k"), Scheduled)
    assert isinstance(await h.client.schedule(b, unique_key="k"), Scheduled)
    assert isinstance(await h.client.schedule(a, unique_key="k"), Duplicate)
    assert isinstance(await h.client.schedule(c, unique_key="k"), Scheduled)
    assert isinstance(await h.client.schedule(d, unique_key="k"), Duplicate), "global scope"


async def test_every_record_gets_a_partition_at_insert_without_workers() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        return None

    h = Harness(jobs)
    client = type(h.client)(h.store, jobs, n_partitions=8, clock=h.clock)
    for _ in range(40):
        await client.schedule(job)
    partitions = {r.partition for r in h.store.records()}
    assert partitions <= set(range(8))
    assert len(partitions) > 1


async def test_stop_with_grace_drains_then_cancels_and_releases_the_rest() -> None:
    jobs = Jobs()
    events: list[tuple[str, str, float]] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        assert params is not None
        name = params["name"]
        if ctx.tries > 1:
            events.append(("rerun", name, now()))
            assert not ctx.was_stale  # released at shutdown: interrupted, not stale
            return
        try:
            await anyio.sleep(params["seconds"])
            events.append(("finished", name, now()))
        except anyio.get_cancelled_exc_class():
            events.append(("cancelled", name, now()))
            raise

    h = Harness(jobs)
    await h.client.schedule(job, {"name": "quick", "seconds": 3})
    await h.client.schedule(job, {"name": "slow", "seconds": 100})
    async with h.workers(default_lock_time=60, poll_interval=1000) as first:
        await anyio.sleep(1)
        await first.stop(grace=5)
        assert now() == 6.0
    assert events == [("finished", "quick", 3.0), ("cancelled", "slow", 6.0)]
    (record,) = h.store.records()
    assert record.locked_until == h.at(6), "released: claimable at once, not in 60 s"
    assert "release_lock" in h.store.calls
    other = Harness(jobs, store=h.store, clock=h.clock, seed=1)
    async with other.workers(poll_interval=1000) as second:
        await anyio.sleep(1)
        await second.stop()
    assert events[-1] == ("rerun", "slow", 6.0)
    rerun = h.store.successful_claims()[-1]
    assert not rerun.was_stale, "a released lock is no stale lock"
    assert rerun.tries == 2
    statuses = [row.status for row in reversed(h.store.sync.read_history(job_id=rerun.job_id))]
    assert statuses == [HistoryStatus.CANCELLED, HistoryStatus.SUCCESS]
    assert h.store.records() == []


async def test_stop_with_zero_grace_cancels_everything_at_once() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(100)

    h = Harness(jobs)
    for _ in range(3):
        await h.client.schedule(job)
    async with h.workers(default_lock_time=60) as workers:
        await anyio.sleep(1)
        await workers.stop(grace=0)
        assert now() == 1.0
    assert len(h.store.records()) == 3
    assert_nothing_locked(h.store, at=h.at(1))
    rows = h.store.history("job")
    assert [row.status for row in rows] == [HistoryStatus.CANCELLED] * 3, "one row per attempt"
    assert {row.error_message for row in rows} == {"cancelled at shutdown"}


async def test_a_timeout_cancels_an_async_handler_and_counts_a_failed_attempt() -> None:
    jobs = Jobs()
    events: list[tuple[str, int, float]] = []
    errors: list[BaseException] = []

    async def on_error(error: Exception, params: Params, ctx: JobContext) -> None:
        errors.append(error)

    @jobs.event(timeout=5, on_error=on_error)
    async def job(params: Params, ctx: JobContext) -> None:
        try:
            await anyio.sleep(100 if ctx.tries == 1 else 1)
            events.append(("finished", ctx.tries, now()))
        except anyio.get_cancelled_exc_class():
            events.append(("cancelled", ctx.tries, now()))
            raise

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(poll_interval=0.5) as workers:
        await anyio.sleep(20)
        await workers.stop()
    assert events[0] == ("cancelled", 1, 5.0)
    assert events[1][:2] == ("finished", 2)
    assert len(errors) == 1
    assert isinstance(errors[0], JobTimeoutError)
    rows = h.store.history("job")
    assert [r.status for r in rows] == [HistoryStatus.ERROR, HistoryStatus.SUCCESS]
    assert rows[0].duration_ms == 5000
    assert "timeout" in (rows[0].error_message or "")


async def test_a_record_whose_type_differs_from_the_definition_is_deferred() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event
    async def evt(params: Params, ctx: JobContext) -> None:
        ran.append(now())

    h = Harness(jobs)
    await h.store.insert_record(
        JobRecord(
            id="mismatch",
            job_name="evt",
            type=JobType.RECURRENT,
            priority=100,
            next_run_at=START,
            partition=0,
        )
    )
    async with h.workers(default_lock_time=30, poll_interval=1) as workers:
        await anyio.sleep(1)
        first = h.store.record("mismatch")
        await anyio.sleep(30)
        second = h.store.record("mismatch")
        await workers.stop()
    assert ran == []
    assert first is not None
    assert second is not None
    assert first.next_run_at == h.at(30)
    assert first.lock_id is None
    assert first.tries == 1
    assert second.next_run_at == h.at(60)
    assert second.tries == 2
    assert h.store.history("evt") == []


# -- nothing left locked --------------------------------------------------------------------------


@dataclass
class Strict:
    x: int


async def test_nothing_is_left_locked_when_user_code_misbehaves() -> None:
    jobs = Jobs()
    hook_calls: list[str] = []

    async def raising_on_error(error: Exception, params: Params, ctx: JobContext) -> None:
        raise RuntimeError("on_error exploded")

    async def junk_on_error(error: Exception, params: Params, ctx: JobContext) -> object:
        return object()

    async def raising_on_stale(params: Params, ctx: JobContext) -> None:
        raise RuntimeError("on_stale exploded")

    @jobs.event(on_error=raising_on_error)
    async def on_error_raises(params: Params, ctx: JobContext) -> None:
        raise ValueError("fail")

    @jobs.event(on_error=junk_on_error)
    async def on_error_junk(params: Params, ctx: JobContext) -> None:
        raise ValueError("fail")

    @jobs.event(lock_time=2, on_stale=raising_on_stale)
    async def on_stale_raises(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await anyio.sleep(1000)

    @jobs.event
    async def unstorable_result(params: Params, ctx: JobContext) -> object:
        return {1, 2, 3}

    @jobs.event
    async def bad_params(params: Strict, ctx: JobContext) -> None:
        raise AssertionError("never called with params that do not fit")

    @jobs.event
    async def swallows_cancellation(params: Params, ctx: JobContext) -> str:
        try:
            await anyio.sleep(1000)
        except anyio.get_cancelled_exc_class():
            return "swallowed"
        return "slept"

    async def raising_hook(job: ClaimedJob) -> None:
        hook_calls.append(job.job_name)
        raise RuntimeError("hook exploded")

    store = RecordingStore()
    h = Harness(jobs, store=store)
    ids: dict[str, str] = {}
    for name in (
        "on_error_raises",
        "on_error_junk",
        "on_stale_raises",
        "unstorable_result",
        "swallows_cancellation",
    ):
        outcome = await h.client.schedule(name)
        assert isinstance(outcome, Scheduled)
        ids[name] = outcome.id
    await store.insert_record(
        JobRecord(
            id="bad-params",
            job_name="bad_params",
            type=JobType.EVENT,
            priority=100,
            next_run_at=START,
            partition=0,
            params={"y": "not x"},
        )
    )
    ids["bad_params"] = "bad-params"
    async with h.workers(
        max_tries=3, on_max_tries_reached=raising_hook, default_lock_time=10, poll_interval=1
    ) as workers:
        await anyio.sleep(600)
        await workers.stop(grace=1)
    final = {name: store.record(job_id) for name, job_id in ids.items()}
    for name in ("on_error_raises", "on_error_junk", "bad_params"):
        record = final[name]
        assert record is not None, name
        assert record.status is JobStatus.MAX_TRIES_REACHED, name
        assert record.tries == 3, name
    for name in ("on_stale_raises", "unstorable_result"):
        assert final[name] is None, f"{name} completed and was deleted"
    # goes stale every time (its swallowed cancellation changes nothing): marked on try 4
    swallower = final["swallows_cancellation"]
    assert swallower is not None
    assert swallower.status is JobStatus.MAX_TRIES_REACHED
    assert swallower.tries == 4
    assert [r.status for r in store.history("swallows_cancellation")] == [HistoryStatus.STALE] * 3
    assert sorted(hook_calls) == [
        "bad_params",
        "on_error_junk",
        "on_error_raises",
        "swallows_cancellation",
    ]
    assert_nothing_locked(store, at=h.at(601))
    (row,) = store.history("unstorable_result")
    assert row.status is HistoryStatus.SUCCESS
    assert row.result == repr({1, 2, 3})
    assert "do not match Strict" in (store.history("bad_params")[0].error_message or "")


async def test_wake_cuts_an_idle_wait_short() -> None:
    jobs = Jobs()
    ran: list[float] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        ran.append(now())

    h = Harness(jobs)
    async with h.workers(poll_interval=1000) as workers:
        await anyio.sleep(10)
        await h.client.schedule(job)
        workers.wake()
        await anyio.sleep(1)
        await workers.stop()
    assert ran == [10.0]


async def test_retry_at_an_explicit_time() -> None:
    jobs = Jobs()
    runs: list[float] = []

    async def on_error(error: Exception, params: Params, ctx: JobContext) -> Retry:
        return Retry(run_at=START + timedelta(seconds=42))

    @jobs.event(on_error=on_error)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append(now())
        if ctx.tries == 1:
            raise ValueError("later")

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(poll_interval=1) as workers:
        await anyio.sleep(50)
        await workers.stop()
    assert runs == [0.0, 42.0]


async def test_a_handler_that_completes_despite_the_shutdown_cancel_is_not_rerun() -> None:
    """A handler shielding its last step finishes after the grace period: its success counts."""
    jobs = Jobs()
    finished: list[float] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> str:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(10)
        finished.append(now())
        return "done"

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(default_lock_time=60) as workers:
        await anyio.sleep(1)
        await workers.stop(grace=2)
    assert finished == [10.0]
    assert h.store.records() == [], "completed, not released for a rerun"
    assert [r.status for r in h.store.history("job")] == [HistoryStatus.SUCCESS]


@pytest.mark.parametrize("callback", ["on_error", "on_max_tries_reached"])
async def test_stop_with_grace_is_not_held_up_by_a_hanging_callback(callback: str) -> None:
    jobs = Jobs()

    async def hanging_on_error(error: Exception, params: Params, ctx: JobContext) -> None:
        await anyio.sleep_forever()

    async def hanging_hook(job: ClaimedJob) -> None:
        await anyio.sleep_forever()

    options: dict[str, Any] = {"on_error": hanging_on_error} if callback == "on_error" else {}

    @jobs.event(**options)
    async def job(params: Params, ctx: JobContext) -> None:
        raise ValueError("fails")

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers(
        default_lock_time=60, max_tries=1, on_max_tries_reached=hanging_hook
    ) as workers:
        await anyio.sleep(1)
        with anyio.fail_after(100):
            await workers.stop(grace=5)
        assert now() == 6.0
    # A cut-short on_error counts as a failed attempt (here the last one); the hook of the
    # terminal mark is cut short too, and the mark stays.
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert_nothing_locked(h.store)
