"""Seeing and steering single jobs through the client while workers run (virtual time, the
in-memory store): cancel, retry_now, reschedule, delete, find_jobs, Snooze, and the history
rows that tell each story (cancelled, snoozed, stale of a killed attempt, owners, tracebacks)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import anyio
import pytest

from dogs_core import (
    AlreadyFinished,
    Cancelled,
    Deleted,
    NotFound,
    Rescheduled,
    Running,
    Snooze,
)
from dogs_core.domain.records import ClaimRequest, HistoryStatus, JobState
from dogs_core.errors import InvalidIdError, InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


def _statuses(h: Harness, job_id: str) -> list[HistoryStatus]:
    return [row.status for row in h.store.job_history(job_id)]


async def test_cancel_a_pending_job_removes_it_and_writes_a_cancelled_row() -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        ran.append(1)

    h = Harness(jobs)
    scheduled = await h.client.schedule(job, run_in=60)
    outcome = await h.client.cancel(scheduled.id)  # type: ignore[union-attr]
    assert isinstance(outcome, Cancelled)
    assert not outcome.was_running
    async with h.workers() as workers:
        await anyio.sleep(120)
        await workers.stop()
    assert ran == []
    assert h.store.records() == []
    assert _statuses(h, outcome.job_id) == [HistoryStatus.CANCELLED]
    # Cancelling again: it is over, and its history says how.
    again = await h.client.cancel(outcome.job_id)
    assert again == AlreadyFinished(outcome.job_id, "cancelled")
    unknown = "0190c2c4-0000-7000-8000-000000000000"
    assert await h.client.cancel(unknown) == NotFound(unknown)
    assert await h.client.cancel(unknown.upper()) == NotFound(unknown)  # as stored
    with pytest.raises(InvalidIdError, match="job_id='no-such-job': not an id"):
        await h.client.cancel("no-such-job")


async def test_cancel_a_running_async_job_stops_it_at_its_next_heartbeat() -> None:
    jobs = Jobs()
    progress: list[float] = []
    stopped: list[float] = []

    @jobs.event(lock_time=30, heartbeat=True)  # renews every 10 s
    async def long(params: Params, ctx: JobContext) -> None:
        try:
            while True:
                progress.append(now())
                await anyio.sleep(1)
        except anyio.get_cancelled_exc_class():
            stopped.append(now())
            raise

    h = Harness(jobs)
    job_id = (await h.client.schedule(long)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(5)
        assert (await h.client.find_jobs(state="running")).jobs[0].id == job_id
        outcome = await h.client.cancel(job_id)
        cancelled_at = now()
        await anyio.sleep(30)
        assert workers.running_executions == 0
        await workers.stop()
    assert isinstance(outcome, Cancelled)
    assert outcome.was_running
    assert len(stopped) == 1
    assert stopped[0] - cancelled_at <= 10
    rows = h.store.job_history(job_id)
    assert [row.status for row in rows] == [HistoryStatus.CANCELLED]
    assert rows[0].execution_id == outcome.execution_id
    assert h.store.records() == []


async def test_a_cancelled_sync_handler_sees_it_through_its_context() -> None:
    jobs = Jobs()
    seen: list[bool] = []

    @jobs.event(lock_time=30, heartbeat=True)
    async def polite(params: Params, ctx: JobContext) -> None:
        # Stands for a sync handler: it never awaits anything cancellable, it checks.
        with anyio.CancelScope(shield=True):
            for _ in range(60):
                if ctx.cancelled:
                    seen.append(True)
                    return
                await anyio.sleep(1)
        seen.append(False)

    h = Harness(jobs)
    job_id = (await h.client.schedule(polite)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(3)
        await h.client.cancel(job_id)
        await anyio.sleep(40)
        await workers.stop()
    assert seen == [True]
    assert _statuses(h, job_id) == [HistoryStatus.CANCELLED]


async def test_cancel_by_unique_key_and_the_key_is_free_again() -> None:
    jobs = Jobs()

    @jobs.event(unique_scope="job")
    async def mail(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    first = await h.client.schedule(mail, run_in=60, unique_key="user-1")
    outcome = await h.client.cancel(unique_key="user-1", job=mail)
    assert isinstance(outcome, Cancelled)
    assert outcome.job_id == first.id  # type: ignore[union-attr]
    again = await h.client.schedule(mail, run_in=60, unique_key="user-1")
    assert again.id != first.id  # type: ignore[union-attr]
    assert isinstance(await h.client.cancel(unique_key="user-2", job=mail), NotFound)
    with pytest.raises(InvalidOptionError, match="exactly one of job_id and unique_key"):
        await h.client.cancel()


async def test_retry_now_revives_a_failed_job_with_a_fresh_budget() -> None:
    jobs = Jobs()
    calls: list[int] = []

    @jobs.event(max_tries=2, unique_scope="job")
    async def flaky(params: Params, ctx: JobContext) -> None:
        calls.append(ctx.tries)
        if len(calls) <= 2:
            raise RuntimeError(f"boom {len(calls)}")

    h = Harness(jobs)
    job_id = (await h.client.schedule(flaky, unique_key="k")).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(600)
        failed = await h.client.find_jobs(flaky, state=JobState.FAILED)
        assert [record.id for record in failed] == [job_id]
        assert isinstance(await h.client.cancel(job_id), AlreadyFinished)
        outcome = await h.client.retry_now(job_id)
        assert isinstance(outcome, Rescheduled)
        assert outcome.record.status is None
        assert outcome.record.tries == 0
        await anyio.sleep(5)
        await workers.stop()
    assert calls == [1, 2, 1]
    assert h.store.records() == []
    rows = h.store.job_history(job_id)
    assert [row.status for row in rows] == [
        HistoryStatus.ERROR,
        HistoryStatus.ERROR,
        HistoryStatus.SUCCESS,
    ]
    assert rows[0].error_type == "RuntimeError"
    assert rows[0].error_traceback is not None
    assert "boom 1" in rows[0].error_traceback
    assert "raise RuntimeError" in rows[0].error_traceback


async def test_reschedule_moves_a_waiting_job_and_refuses_a_running_one() -> None:
    jobs = Jobs()
    started: list[float] = []

    @jobs.event(lock_time=30)
    async def job(params: Params, ctx: JobContext) -> None:
        started.append(now())
        await anyio.sleep(20)

    h = Harness(jobs)
    later = (await h.client.schedule(job, run_in=3600)).id  # type: ignore[union-attr]
    busy = (await h.client.schedule(job)).id  # type: ignore[union-attr]
    async with h.workers(workers_count=1) as workers:
        await anyio.sleep(2)
        refused = await h.client.reschedule(busy, run_in=100)
        assert isinstance(refused, Running)
        moved = await h.client.reschedule(later, run_in=60, priority=5)
        assert isinstance(moved, Rescheduled)
        assert moved.record.next_run_at == h.at(62)
        assert moved.record.priority == 5
        await anyio.sleep(100)
        await workers.stop()
    assert started == [0.0, 62.0]
    with pytest.raises(InvalidOptionError, match="run_at, run_in or priority"):
        await h.client.reschedule(later)


async def test_a_snoozed_job_runs_again_later_without_using_its_tries() -> None:
    jobs = Jobs()
    runs: list[tuple[int, float]] = []

    @jobs.event(max_tries=1)
    async def waits(params: Params, ctx: JobContext) -> str | Snooze:
        runs.append((ctx.tries, now()))
        if len(runs) == 1:
            return Snooze(10)
        if len(runs) == 2:
            raise Snooze(timedelta(seconds=20))
        return "done"

    h = Harness(jobs)
    job_id = (await h.client.schedule(waits)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(60)
        await workers.stop()
    assert runs == [(1, 0.0), (1, 10.0), (1, 30.0)]
    assert _statuses(h, job_id) == [
        HistoryStatus.SNOOZED,
        HistoryStatus.SNOOZED,
        HistoryStatus.SUCCESS,
    ]
    assert h.store.records() == []


async def test_shutdown_writes_a_cancelled_row_and_the_rerun_is_not_stale() -> None:
    jobs = Jobs()
    runs: list[bool] = []

    @jobs.event(lock_time=60)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append(ctx.was_stale)
        if len(runs) == 1:
            await anyio.sleep(1000)

    h = Harness(jobs)
    job_id = (await h.client.schedule(job)).id  # type: ignore[union-attr]
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop(grace=1)
    [record] = h.store.records()
    assert record.state(h.at(4)) is JobState.RETRYING  # released: claimable, not stale
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert runs == [False, False]
    assert _statuses(h, job_id) == [HistoryStatus.CANCELLED, HistoryStatus.SUCCESS]


async def test_a_killed_attempt_gets_its_stale_row_from_the_worker_that_recovers_it() -> None:
    jobs = Jobs()
    runs: list[bool] = []

    @jobs.event(lock_time=5)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append(ctx.was_stale)

    h = Harness(jobs)
    job_id = (await h.client.schedule(job)).id  # type: ignore[union-attr]
    # A worker that claims the job and dies: nothing but the claim is ever written.
    dead = ClaimRequest(("job",), 0, "byJobName", h.at(0), h.at(5), "dead-execution")
    assert await h.store.claim(dead) is not None
    await anyio.sleep(1)
    assert [r.id for r in await h.client.find_jobs(state="running")] == [job_id]
    await anyio.sleep(5)
    assert [r.id for r in await h.client.find_jobs(state="stale")] == [job_id]
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert runs == [True]
    rows = h.store.job_history(job_id)
    assert [(row.execution_id, row.status) for row in rows] == [
        ("dead-execution", HistoryStatus.STALE),
        (rows[1].execution_id, HistoryStatus.SUCCESS),
    ]
    assert rows[0].ended_at == h.at(5)
    assert rows[0].tries == 1
    assert rows[1].was_stale
    assert rows[1].tries == 2
    owner = rows[1].owner
    assert owner is not None
    assert (owner.host, owner.pid) == (socket.gethostname(), os.getpid())
    assert owner.instance_id == workers.owner.instance_id


async def test_a_running_job_shows_its_owner() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=30)
    async def job(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(10)

    h = Harness(jobs)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(1)
        [running] = await h.client.find_jobs(state="running")
        assert running.lock_owner == workers.owner
        await workers.stop()


async def test_cancel_of_a_recurrent_job_skips_the_current_run() -> None:
    jobs = Jobs()
    runs: list[float] = []

    @jobs.recurrent(run_every=100, lock_time=30, heartbeat=True)
    async def tick(ctx: JobContext) -> None:
        runs.append(now())
        await anyio.sleep(50)

    h = Harness(jobs)
    async with h.workers() as workers:
        await anyio.sleep(5)
        [record] = h.store.records()
        outcome = await h.client.cancel(record.id)
        assert isinstance(outcome, Cancelled)
        assert outcome.was_running
        await anyio.sleep(150)
        await workers.stop()
    assert runs == [0.0, 105.0]  # the next regular run, 100 s after the cancel
    assert _statuses(h, record.id)[0] is HistoryStatus.CANCELLED


async def test_delete_and_delete_jobs() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    ids = [(await h.client.schedule(job, run_in=60)).id for _ in range(3)]  # type: ignore[union-attr]
    deleted = await h.client.delete(ids[0])
    assert isinstance(deleted, Deleted)
    assert deleted.record.id == ids[0]
    assert isinstance(await h.client.delete(ids[0]), NotFound)
    assert await h.client.delete_jobs(job, state="scheduled", dry_run=True) == 2
    assert len(h.store.records()) == 2
    assert await h.client.delete_jobs(job, state="scheduled") == 2
    assert h.store.records() == []
    assert h.store.job_history(ids[0]) == []  # delete leaves no row; cancel does
    with pytest.raises(InvalidOptionError, match="running jobs are stopped with cancel"):
        await h.client.delete_jobs(job, state="running")


async def test_find_jobs_pages_with_a_stable_cursor() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    ids = [(await h.client.schedule(job, run_in=60)).id for _ in range(7)]  # type: ignore[union-attr]
    seen: list[str] = []
    after = None
    while True:
        page = await h.client.find_jobs(job, state="scheduled", limit=3, after=after)
        seen.extend(record.id for record in page)
        if page.next_after is None:
            break
        after = page.next_after
        await h.client.schedule(job, run_in=60)  # new records land after the cursor
    assert seen[:7] == ids
    assert len(seen) == len(set(seen))
    with pytest.raises(InvalidOptionError, match="limit"):
        await h.client.find_jobs(limit=1001)
    with pytest.raises(InvalidOptionError, match="state"):
        await h.client.find_jobs(state="napping")


async def test_get_result_by_job_id_after_the_record_is_gone() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> int:
        return 42

    h = Harness(jobs)
    job_id = (await h.client.schedule(job)).id  # type: ignore[union-attr]
    assert await h.client.get_result(job_id) is None
    async with h.workers() as workers:
        await anyio.sleep(2)
        await workers.stop()
    result = await h.client.get_result(job_id)
    assert result is not None
    assert result.result == 42
    assert result.status is HistoryStatus.SUCCESS
    [row] = await h.client.get_executions(job_id=job_id, status="success")
    assert row == result
    assert await h.client.get_executions(job_id=job_id, status="error") == []
    with pytest.raises(InvalidOptionError, match="status"):
        await h.client.get_executions(job_id=job_id, status="fine")
