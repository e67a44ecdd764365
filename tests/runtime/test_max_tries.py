"""Attempt limits of event jobs (Dogs ``maxTries.test.ts``, runtime scenarios).

Differences from Dogs, on purpose (DESIGN §5): a failed attempt without an explicit retry time
is rescheduled with backoff and, once it was the last allowed one, the record is marked
``maxTriesReached`` right away instead of waiting for one more claim. A retry at an explicit
time (``Retry(run_in=...)``) keeps Dogs' behaviour: the claim after the last try marks it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.definitions import Retry
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobRecord, JobStatus, JobType
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import START, Harness, assert_nothing_locked

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class Hook:
    """An async ``on_max_tries_reached`` that records the jobs it got (optionally raising)."""

    def __init__(self, *, raises: bool = False) -> None:
        self.calls: list[ClaimedJob] = []
        self.raises = raises

    async def __call__(self, job: ClaimedJob) -> None:
        self.calls.append(job)
        if self.raises:
            raise RuntimeError("alerting is down")


def always_failing(jobs: Jobs, ran: list[int], **options: Any) -> Any:
    @jobs.event(**options)
    async def failing(params: Params, ctx: JobContext) -> None:
        ran.append(ctx.tries)
        raise ValueError(f"try {ctx.tries} failed")

    return failing


async def test_global_max_tries_gives_exactly_n_executions_then_the_terminal_mark() -> None:
    jobs = Jobs()
    ran: list[int] = []
    failing = always_failing(jobs, ran)
    hook = Hook()
    h = Harness(jobs)
    outcome = await h.client.schedule(failing)
    async with h.workers(
        max_tries=3, on_max_tries_reached=hook, max_tries_reached_retention=timedelta(days=1)
    ) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert ran == [1, 2, 3]
    assert [job.tries for job in hook.calls] == [3]
    (record,) = h.store.records()
    assert record.id == getattr(outcome, "id", None)
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert record.tries == 3
    assert record.max_tries_reached_at is not None
    assert record.expires_at == record.max_tries_reached_at + timedelta(days=1)
    assert record.lock_id is None
    assert record.locked_until is None
    assert [row.status for row in h.store.history("failing")] == [HistoryStatus.ERROR] * 3


async def test_null_retention_keeps_terminal_records_forever() -> None:
    jobs = Jobs()
    ran: list[int] = []
    failing = always_failing(jobs, ran)
    h = Harness(jobs)
    await h.client.schedule(failing)
    async with h.workers(max_tries=1, max_tries_reached_retention=None) as workers:
        await anyio.sleep(5)
        await workers.stop()
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert record.expires_at is None


async def test_the_per_job_max_tries_overrides_the_global_one() -> None:
    jobs = Jobs()
    ran: list[int] = []
    failing = always_failing(jobs, ran, max_tries=2)
    hook = Hook()
    h = Harness(jobs)
    await h.client.schedule(failing)
    async with h.workers(max_tries=5, on_max_tries_reached=hook) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert ran == [1, 2]
    assert [job.tries for job in hook.calls] == [2]


async def test_terminal_records_are_never_run() -> None:
    jobs = Jobs()
    ran: list[int] = []
    always_failing(jobs, ran)
    h = Harness(jobs)
    terminal = JobRecord(
        id="terminal-1",
        job_name="failing",
        type=JobType.EVENT,
        priority=100,
        next_run_at=START - timedelta(hours=1),
        partition=0,
        tries=3,
        status=JobStatus.MAX_TRIES_REACHED,
        max_tries_reached_at=START - timedelta(minutes=30),
    )
    await h.store.insert_record(terminal)
    async with h.workers(max_tries=5) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert ran == []
    (record,) = h.store.records()
    assert record.tries == 3
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert h.store.successful_claims() == []
    # the startup backfill gave it its retention deadline
    assert record.expires_at == terminal.max_tries_reached_at + timedelta(days=7)  # type: ignore[operator]


async def test_recurrent_jobs_ignore_max_tries() -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.recurrent(run_every=1)
    async def ticking(ctx: JobContext) -> None:
        ran.append(ctx.tries)
        raise ValueError("always")

    h = Harness(jobs)
    async with h.workers(max_tries=1) as workers:
        await anyio.sleep(10)
        await workers.stop()
    assert len(ran) >= 4
    (record,) = h.store.records()
    assert record.status is None
    assert ran == [1] * len(ran), "a failed recurrent run goes to its next regular run, tries reset"


async def test_success_before_the_limit_deletes_the_record_without_the_callback() -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.event
    async def flaky(params: Params, ctx: JobContext) -> None:
        ran.append(ctx.tries)
        if ctx.tries == 1:
            raise ValueError("first try fails")

    hook = Hook()
    h = Harness(jobs)
    await h.client.schedule(flaky)
    async with h.workers(max_tries=3, on_max_tries_reached=hook) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert ran == [1, 2]
    assert hook.calls == []
    assert h.store.records() == []


async def test_a_throwing_callback_still_leaves_the_record_marked() -> None:
    jobs = Jobs()
    ran: list[int] = []
    failing = always_failing(jobs, ran)
    hook = Hook(raises=True)
    h = Harness(jobs)
    await h.client.schedule(failing)
    async with h.workers(max_tries=2, on_max_tries_reached=hook) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert ran == [1, 2]
    assert len(hook.calls) == 1
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert_nothing_locked(h.store)


async def test_no_on_error_max_tries_one_and_a_stale_run_is_marked_on_the_re_pickup() -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.event(lock_time=10)
    async def hangs(params: Params, ctx: JobContext) -> None:
        ran.append(ctx.tries)
        await anyio.sleep(1000)

    hook = Hook()
    h = Harness(jobs)
    await h.client.schedule(hangs)
    async with h.workers(max_tries=1, on_max_tries_reached=hook) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert ran == [1]
    assert [(job.tries, job.was_stale) for job in hook.calls] == [(2, True)]
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert [row.status for row in h.store.history("hangs")] == [HistoryStatus.STALE]


async def test_a_job_that_goes_stale_every_time() -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.event(lock_time=10, max_tries=2)
    async def hangs(params: Params, ctx: JobContext) -> None:
        ran.append(ctx.tries)
        await anyio.sleep(1000)

    hook = Hook()
    h = Harness(jobs)
    await h.client.schedule(hangs)
    async with h.workers(on_max_tries_reached=hook) as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert ran == [1, 2]
    assert [(job.tries, job.was_stale) for job in hook.calls] == [(3, True)]
    assert [row.status for row in h.store.history("hangs")] == [HistoryStatus.STALE] * 2


async def test_explicit_retry_times_keep_dogs_marking_on_the_next_claim() -> None:
    jobs = Jobs()
    ran: list[int] = []

    async def retry_soon(error: Exception, params: Params, ctx: JobContext) -> Retry:
        return Retry(run_in=timedelta(seconds=1))

    always_failing(jobs, ran, on_error=retry_soon)
    hook = Hook()
    h = Harness(jobs)
    await h.client.schedule("failing")
    async with h.workers(max_tries=3, on_max_tries_reached=hook) as workers:
        await anyio.sleep(30)
        await workers.stop()
    assert ran == [1, 2, 3]
    assert [job.tries for job in hook.calls] == [4]
    (record,) = h.store.records()
    assert record.status is JobStatus.MAX_TRIES_REACHED
    assert record.tries == 4
