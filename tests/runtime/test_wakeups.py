"""Push instead of poll: workers woken by the store's change feed, soon-due timers, the
fallback to polling, and waiting for a job's outcome (virtual time, in-memory store)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncGenerator, Sequence
from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.definitions import Discard, Retry
from dogs_core.domain.records import HistoryRecord, HistoryStatus
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.domain.settle import Settlement
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import (
    ChangeFeedUnavailableError,
    InvalidIdError,
    InvalidOptionError,
    JobNotFoundError,
    TransientStoreError,
    WaitTimeoutError,
)
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, Workers
from tests.runtime.conftest import Harness, RecordingStore, now

pytestmark = pytest.mark.anyio

HOUR = 3600.0
Params = dict[str, Any] | None


def jobs_recording(started: list[float]) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def ping(params: Params, ctx: JobContext) -> str:
        started.append(now())
        return "pong"

    return jobs


async def until_watching(workers: Workers) -> None:
    with anyio.fail_after(60):
        while not workers.watching:  # noqa: ASYNC110 - a property, not an event to wait on
            await anyio.sleep(0.01)


async def test_a_job_scheduled_elsewhere_starts_at_once_although_the_poll_is_an_hour() -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started))
    async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
        await until_watching(workers)
        await anyio.sleep(10)  # idle: the startup sweep is long over
        other = DogsClient(h.store, h.jobs, clock=h.clock)  # another process's client
        scheduled_at = now()
        await other.schedule("ping")
        await anyio.sleep(1)
        await workers.stop()
    assert len(started) == 1
    assert started[0] - scheduled_at < 1


async def test_without_the_feed_the_same_job_waits_for_the_poll() -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started))
    async with h.workers(poll_interval=HOUR, watch_changes=False) as workers:
        await anyio.sleep(10)
        await h.client.schedule("ping")
        await anyio.sleep(60)
        assert started == []
        assert not workers.watching
        await workers.stop()


async def test_a_job_due_before_the_next_poll_starts_on_time() -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started))
    async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
        await until_watching(workers)
        scheduled_at = now()
        await h.client.schedule("ping", run_in=timedelta(seconds=20))
        await anyio.sleep(19.9)
        assert started == []
        await anyio.sleep(1)
        await workers.stop()
    assert len(started) == 1
    assert 20 <= started[0] - scheduled_at < 21


async def test_a_retry_due_within_the_poll_interval_runs_on_time() -> None:
    tries: list[float] = []
    jobs = Jobs()

    async def in_five_seconds(error: Exception, params: Params, ctx: JobContext) -> Retry:
        return Retry(run_in=timedelta(seconds=5))

    @jobs.event(on_error=in_five_seconds)
    async def flaky(params: Params, ctx: JobContext) -> None:
        tries.append(now())
        if ctx.tries == 1:
            raise ValueError("once")

    h = Harness(jobs)
    async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
        await until_watching(workers)
        await h.client.schedule("flaky")
        await anyio.sleep(30)
        await workers.stop()
    assert len(tries) == 2
    assert 5 <= tries[1] - tries[0] < 6


class NoFeedStore(RecordingStore):
    """A store that cannot watch (a standalone MongoDB server)."""

    async def watch_records(
        self, job_names: Sequence[str]
    ) -> AsyncGenerator[list[RecordChange], None]:
        raise ChangeFeedUnavailableError("standalone server")
        yield []  # pragma: no cover - makes this an async generator

    async def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        raise ChangeFeedUnavailableError("standalone server")
        yield []  # pragma: no cover


class FlakyFeedStore(RecordingStore):
    """A store whose record feed fails twice, then works."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0

    async def watch_records(
        self, job_names: Sequence[str]
    ) -> AsyncGenerator[list[RecordChange], None]:
        self.opened += 1
        if self.opened <= 2:
            raise TransientStoreError("connection reset")
        async for batch in super().watch_records(job_names):
            yield batch


class CountingFeedStore(RecordingStore):
    """A store counting the batches its record and pause feeds yield."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = {"records": 0, "pauses": 0}

    async def watch_records(
        self, job_names: Sequence[str]
    ) -> AsyncGenerator[list[RecordChange], None]:
        async for batch in super().watch_records(job_names):
            self.batches["records"] += 1
            yield batch

    async def watch_pauses(self) -> AsyncGenerator[list[str], None]:
        async for batch in super().watch_pauses():
            self.batches["pauses"] += 1
            yield batch


async def test_idle_workers_read_their_feeds_without_heartbeats() -> None:
    """Neither the change watcher nor the pause feed checks a deadline between batches, so the
    in-memory feeds owe them no heartbeat: an idle hour is not 3,600 steps of the virtual clock,
    and a change still wakes the lanes at once."""
    started: list[float] = []
    store = CountingFeedStore()
    h = Harness(jobs_recording(started), store=store)
    async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
        await until_watching(workers)
        opened = dict(store.batches)
        await anyio.sleep(HOUR)
        assert store.batches == opened, "no heartbeat in an idle hour"
        scheduled_at = now()
        await DogsClient(store, h.jobs, clock=h.clock).schedule("ping")
        await anyio.sleep(1)
        await workers.stop()
    assert opened == {"records": 1, "pauses": 1}, "each feed's [] once open"
    assert started == [scheduled_at]


async def test_a_store_without_a_feed_falls_back_to_polling_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started), store=NoFeedStore())
    with caplog.at_level(logging.INFO, logger="dogs.workers"):
        async with h.workers(poll_interval=5, watch_changes=True) as workers:
            await anyio.sleep(1)
            await h.client.schedule("ping")
            await anyio.sleep(30)
            assert not workers.watching
            await workers.stop()
    assert len(started) == 1, "the poll still runs the job"
    notes = [r for r in caplog.records if "no change feed" in r.getMessage()]
    assert len(notes) == 1


async def test_a_failing_feed_is_reopened() -> None:
    started: list[float] = []
    store = FlakyFeedStore()
    h = Harness(jobs_recording(started), store=store)
    async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
        await until_watching(workers)
        assert store.opened == 3
        await h.client.schedule("ping")
        await anyio.sleep(1)
        await workers.stop()
    assert len(started) == 1


class BreakingFeedStore(RecordingStore):
    """A store whose record feed opens, then breaks, ``breaks`` times."""

    def __init__(self, breaks: int) -> None:
        super().__init__()
        self.breaks = breaks
        self.opened_at: list[float] = []

    async def watch_records(
        self, job_names: Sequence[str]
    ) -> AsyncGenerator[list[RecordChange], None]:
        self.opened_at.append(now())
        if len(self.opened_at) <= self.breaks:
            yield []  # open: the watcher counts it as watching
            raise TransientStoreError("connection reset")
        async for batch in super().watch_records(job_names):
            yield batch


async def test_a_feed_that_breaks_after_opening_is_reopened_after_the_first_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each break follows a feed that had opened: a new outage, so the backoff starts afresh
    (half a second) instead of doubling up to its ceiling over a long-lived worker's life."""
    store = BreakingFeedStore(breaks=6)
    h = Harness(jobs_recording([]), store=store)
    with caplog.at_level(logging.WARNING, logger="dogs"):
        async with h.workers(poll_interval=HOUR, watch_changes=True) as workers:
            await anyio.sleep(30)
            assert workers.watching
            await workers.stop()
    gaps = [later - earlier for earlier, later in itertools.pairwise(store.opened_at)]
    assert len(gaps) == 6
    assert all(gap == pytest.approx(0.5, abs=0.05) for gap in gaps), gaps
    assert sum("reopening in 0.5s" in r.getMessage() for r in caplog.records) == 6


async def _misses_draining_a_burst(*, feed: bool) -> int:
    """Claim calls that found nothing while 500 jobs scheduled at once were run: woken by the
    feed, or by one ``wake()`` right after the insert (what a single wake-up costs)."""
    started: list[float] = []
    h = Harness(jobs_recording(started))
    async with h.workers(
        poll_interval=HOUR, watch_changes=feed, workers_count=8, n_partitions=4
    ) as workers:
        if feed:
            await until_watching(workers)
        await anyio.sleep(1)
        before = len(h.store.claims)
        await h.client.schedule_many("ping", [{"params": {"n": n}} for n in range(500)])
        if not feed:
            workers.wake()
        await anyio.sleep(30)
        await workers.stop()
    assert len(started) == 500
    return sum(1 for call in h.store.claims[before:] if call.result is None)


async def test_a_burst_of_inserts_costs_about_one_wake_up_not_one_per_insert() -> None:
    once = await _misses_draining_a_burst(feed=False)
    fed = await _misses_draining_a_burst(feed=True)
    # One sweep per insert would be 500 x 4 misses; the feed costs what one wake-up costs.
    # Both counts vary by a few percent between runs (the partitions are drawn at random):
    # in 30 runs, once 341-395 and fed 325-366, fed - once at most +12.
    assert fed <= once * 5 // 4, (fed, once)


# -- waiting for a job ------------------------------------------------------------------------


async def test_wait_for_returns_the_successful_execution() -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started))
    async with h.workers(watch_changes=True) as workers:
        outcome = await h.client.schedule("ping")
        row = await h.client.wait_for(outcome.id, timeout=60)  # type: ignore[union-attr]
        await workers.stop()
    assert row.status is HistoryStatus.SUCCESS
    assert row.result == "pong"


class SlowCompletionStore(RecordingStore):
    """Completions take 50 ms of (virtual) round trip: the row lands well before them."""

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        await anyio.sleep(0.05)
        return await super().settle_many(settlements)


async def test_wait_for_answers_once_the_completion_lands_not_at_the_next_heartbeat() -> None:
    """The row is written before the completion, which no history batch reports: while the
    record is still held by the execution of that row, wait_for reads it again within
    milliseconds instead of waiting for the feed's next heartbeat (a second)."""
    started: list[float] = []
    h = Harness(jobs_recording(started), store=SlowCompletionStore())
    async with h.workers(watch_changes=True) as workers:
        outcome = await h.client.schedule("ping")
        row = await h.client.wait_for(outcome.id, timeout=60)  # type: ignore[union-attr]
        answered = now()
        await workers.stop()
    assert row.status is HistoryStatus.SUCCESS
    assert await h.store.get_record(outcome.id) is None  # type: ignore[union-attr]
    assert 0.05 <= answered - started[0] < 0.2, answered - started[0]


async def test_wait_for_a_job_that_already_ended_answers_from_history() -> None:
    h = Harness(jobs_recording([]))
    async with h.workers() as workers:
        outcome = await h.client.schedule("ping")
        await anyio.sleep(5)
        await workers.stop()
    before = now()
    row = await h.client.wait_for(outcome.id)  # type: ignore[union-attr]
    assert row.status is HistoryStatus.SUCCESS
    assert now() == before


async def test_wait_for_waits_through_retries_until_the_job_ends() -> None:
    jobs = Jobs()

    async def give_up_on_the_second(error: Exception, params: Params, ctx: JobContext) -> Any:
        return Discard() if ctx.tries >= 2 else None

    @jobs.event(
        on_error=give_up_on_the_second, retry=RetryPolicy(base=timedelta(seconds=1), jitter=0)
    )
    async def fails(params: Params, ctx: JobContext) -> None:
        raise RuntimeError(f"try {ctx.tries}")

    h = Harness(jobs)
    async with h.workers(poll_interval=1) as workers:
        outcome = await h.client.schedule("fails")
        row = await h.client.wait_for(outcome.id, timeout=HOUR)  # type: ignore[union-attr]
        await workers.stop()
    assert row.status is HistoryStatus.ERROR
    assert row.tries == 2
    assert row.error_message == "try 2"


async def test_wait_for_times_out() -> None:
    h = Harness(jobs_recording([]))
    outcome = await h.client.schedule("ping")  # no workers
    started = now()
    with pytest.raises(WaitTimeoutError) as info:
        await h.client.wait_for(outcome.id, timeout=10)  # type: ignore[union-attr]
    assert info.value.job_id == outcome.id  # type: ignore[union-attr]
    assert 10 <= now() - started < 15


async def test_wait_for_an_unknown_job_says_so() -> None:
    h = Harness(jobs_recording([]))
    with pytest.raises(JobNotFoundError):
        await h.client.wait_for("0190c2c4-0000-7000-8000-000000000000", timeout=HOUR)


async def test_wait_for_a_malformed_id_fails_at_once() -> None:
    h = Harness(jobs_recording([]))
    started = anyio.current_time()
    with pytest.raises(InvalidIdError, match="job_id='not-a-uuid': not an id"):
        await h.client.wait_for("not-a-uuid", timeout=HOUR)
    assert anyio.current_time() == started  # no wait: nothing was read


async def test_wait_for_works_by_polling_without_a_feed() -> None:
    started: list[float] = []
    h = Harness(jobs_recording(started), store=NoFeedStore())
    async with h.workers(poll_interval=1) as workers:
        outcome = await h.client.schedule("ping")
        row = await h.client.wait_for(outcome.id, timeout=60)  # type: ignore[union-attr]
        await workers.stop()
    assert row.status is HistoryStatus.SUCCESS


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"timeout": -1}, "timeout"), ({"poll_interval": 0}, "poll_interval")],
)
async def test_wait_for_validates_its_arguments(kwargs: dict[str, Any], field: str) -> None:
    h = Harness(jobs_recording([]))
    with pytest.raises(InvalidOptionError) as info:
        await h.client.wait_for("0190c2c4-0000-7000-8000-000000000000", **kwargs)
    assert info.value.field == field


async def test_watch_yields_finished_executions_of_the_statuses_asked() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=1)
    async def sometimes(params: Params, ctx: JobContext) -> None:
        assert params is not None
        if params["fail"]:
            raise ValueError("asked to")

    h = Harness(jobs)
    seen: list[HistoryRecord] = []

    async def watcher(task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        async for row in h.client.watch(["sometimes"], statuses=["error"]):
            seen.append(row)

    async with anyio.create_task_group() as group, h.workers() as workers:
        await group.start(watcher)
        await anyio.sleep(0.1)
        for fail in (False, True, False, True):
            await h.client.schedule("sometimes", {"fail": fail})
        await anyio.sleep(10)
        await workers.stop()
        group.cancel_scope.cancel()
    assert [row.status for row in seen] == [HistoryStatus.ERROR, HistoryStatus.ERROR]
    assert all(row.params == {"fail": True} for row in seen)


async def test_watch_needs_a_feed() -> None:
    h = Harness(jobs_recording([]), store=NoFeedStore())
    with pytest.raises(ChangeFeedUnavailableError):
        async for _ in h.client.watch():
            pass  # pragma: no cover


@pytest.mark.parametrize("statuses", [5, ["nope"], [3]])
async def test_watch_validates_its_statuses(statuses: Any) -> None:
    h = Harness(jobs_recording([]))
    with pytest.raises(InvalidOptionError) as info:
        async for _ in h.client.watch(statuses=statuses):
            pass  # pragma: no cover
    assert info.value.field == "statuses"
