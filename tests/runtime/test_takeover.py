"""The history row goes before the completion, and a claim that takes over a killed attempt's
lock completes that attempt's finished work instead of running it again (issue 16, item 10).

A "kill" here is a workers instance cancelled while its completion write hangs: the row was
written, the completion never lands, and the lock is left to expire (as after a SIGKILL).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anyio
import pytest

from dogs_core.domain.outcome import Delete, Reschedule
from dogs_core.domain.records import HistoryStatus, JobType
from dogs_core.domain.settle import Settlement, rows_of
from dogs_core.errors import StoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.conftest import Harness, RecordingStore, assert_nothing_locked, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None
LOCK = 20


class HangingStore(RecordingStore):
    """With ``hang`` set, completions and reschedules wait until ``dead`` is set and then fail:
    the process died before they reached the database. ``order`` lists the writes as they
    reach the store."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = False
        self.dead = False
        self.order: list[str] = []

    async def _hang(self) -> None:
        while self.hang and not self.dead:  # noqa: ASYNC110 - a flag set from outside
            await anyio.sleep(0.1)
        if self.dead:
            raise StoreError("the process is gone")

    async def write_history_many(self, records: Sequence[Any]) -> None:
        self.order.extend(f"row {r.status.value}" for r in records)
        await super().write_history_many(records)

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        # As every store does it: the rows the batch carries first, then its settlements (which
        # is where a process killed in between leaves off).
        rows = rows_of(settlements)
        if rows:
            await self.write_history_many(rows)
        names = {Delete: "complete", Reschedule: "reschedule"}
        self.order.extend(names.get(type(s.command), "settle") for s in settlements)
        await self._hang()
        return await super().settle_many([dataclasses.replace(s, row=None) for s in settlements])


async def _killed_after_the_row(h: Harness, store: HangingStore, *, after: float = 3) -> None:
    """Run a workers instance until its completion hangs (``after`` seconds), then kill it."""
    store.hang = True
    with anyio.CancelScope() as crash:
        async with h.workers():
            await anyio.sleep(after)
            store.hooks.release_error = StoreError("the process is gone")
            store.dead = True
            crash.cancel()
    store.hang = store.dead = False
    store.hooks.release_error = None


async def test_the_row_is_written_before_the_completion() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    store = HangingStore()
    h = Harness(jobs, store=store)
    await h.client.schedule(job)
    async with h.workers() as workers:
        await anyio.sleep(1)
        await workers.stop()
    assert store.order == ["row success", "complete"]
    assert store.records() == []


async def test_a_success_killed_before_its_delete_is_completed_without_a_second_run() -> None:
    jobs = Jobs()
    runs: list[tuple[int, float]] = []

    @jobs.event(lock_time=LOCK)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append((ctx.tries, now()))

    store = HangingStore()
    h = Harness(jobs, store=store)
    outcome = await h.client.schedule(job)
    job_id = getattr(outcome, "id", "")
    await _killed_after_the_row(h, store)
    (record,) = store.records()
    assert record.lock_id is not None, "the killed worker's lock is left behind"
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    async with survivor.workers() as workers:
        await anyio.sleep(LOCK + 5)
        await workers.stop()
    assert runs == [(1, 0.0)], "the handler ran once"
    assert store.records() == [], "the survivor deleted the record"
    rows = store.job_history(job_id)
    assert [(r.status, r.tries, r.execution_id) for r in rows] == [
        (HistoryStatus.SUCCESS, 1, record.lock_id)
    ], "one row: the killed attempt's success (no stale row, no row of the survivor)"


async def test_a_claimer_killed_while_completing_a_success_leaves_it_to_the_next() -> None:
    # Issue 40: the claimer that takes the lock over finds the success and completes it; killed
    # before that completion lands, it ran nothing and wrote no row. The next claimer takes
    # over *its* lock, finds no row for it, and must still see the unsettled success.
    jobs = Jobs()
    runs: list[int] = []

    @jobs.event(lock_time=LOCK)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append(ctx.tries)

    store = HangingStore()
    h = Harness(jobs, store=store)
    outcome = await h.client.schedule(job)
    job_id = getattr(outcome, "id", "")
    await _killed_after_the_row(h, store)
    (first,) = store.records()
    second = Harness(jobs, store=store, clock=h.clock, seed=1)
    await _killed_after_the_row(second, store, after=LOCK + 5)
    (record,) = store.records()
    assert record.lock_id not in (None, first.lock_id), "the second claimer's lock is left"
    assert record.tries == 2
    third = Harness(jobs, store=store, clock=h.clock, seed=2)
    async with third.workers() as workers:
        await anyio.sleep(LOCK + 5)
        await workers.stop()
    assert runs == [1], "the handler ran once, through two takeovers"
    assert store.records() == [], "the third claimer completed the success"
    rows = [(r.status, r.execution_id) for r in store.job_history(job_id)]
    one_row = [(HistoryStatus.SUCCESS, first.lock_id)]
    assert rows == one_row, "one row: no stale row for the claimer that ran nothing"


async def test_a_recurrent_success_killed_before_its_reschedule_moves_to_its_next_slot() -> None:
    jobs = Jobs()
    runs: list[float] = []

    @jobs.recurrent(run_every=100, lock_time=LOCK)
    async def tick(ctx: JobContext) -> None:
        runs.append(now())

    store = HangingStore()
    h = Harness(jobs, store=store)
    await _killed_after_the_row(h, store)
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    async with survivor.workers() as workers:
        await anyio.sleep(LOCK + 5)
        await workers.stop()
    assert runs == [0.0], "not run again when the survivor took the lock over"
    (record,) = store.records()
    assert record.type is JobType.RECURRENT
    assert record.lock_id is None
    assert record.tries == 0
    assert isinstance(record.next_run_at, datetime)
    assert record.next_run_at > h.at(LOCK), "its next regular slot, counted from the takeover"
    rows = store.history("tick")
    assert [r.status for r in rows] == [HistoryStatus.SUCCESS]
    assert_nothing_locked(store)


async def test_an_error_killed_before_its_retry_write_runs_again_and_keeps_its_row() -> None:
    jobs = Jobs()
    runs: list[int] = []

    @jobs.event(lock_time=LOCK, max_tries=3)
    async def job(params: Params, ctx: JobContext) -> None:
        runs.append(ctx.tries)
        if ctx.tries == 1:
            raise RuntimeError("first try fails")

    store = HangingStore()
    h = Harness(jobs, store=store)
    outcome = await h.client.schedule(job)
    job_id = getattr(outcome, "id", "")
    await _killed_after_the_row(h, store)
    survivor = Harness(jobs, store=store, clock=h.clock, seed=1)
    async with survivor.workers() as workers:
        await anyio.sleep(LOCK + 5)
        await workers.stop()
    assert runs == [1, 2], "a failed attempt is retried: the normal path"
    assert store.records() == []
    rows = sorted(store.job_history(job_id), key=lambda r: r.tries)
    assert [(r.tries, r.status, r.was_stale) for r in rows] == [
        (1, HistoryStatus.ERROR, False),  # the killed attempt's own row, not a stale one
        (2, HistoryStatus.SUCCESS, True),
    ]


async def test_a_completion_that_finds_its_lock_lost_keeps_its_success_row_only() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=LOCK)
    async def job(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            await store.release_all_locks()  # the lock is lost while the handler runs

    store = HangingStore()
    h = Harness(jobs, store=store)
    outcome = await h.client.schedule(job)
    job_id = getattr(outcome, "id", "")
    async with h.workers(workers_count=1) as workers:
        await anyio.sleep(3)
        await workers.stop()
    rows = sorted(store.job_history(job_id), key=lambda r: r.tries)
    assert [(r.tries, r.status) for r in rows] == [
        (1, HistoryStatus.SUCCESS),  # its row, written before the completion that failed
        (2, HistoryStatus.SUCCESS),  # the job ran again: at-least-once
    ]
    assert len({r.execution_id for r in rows}) == 2, "one row per execution id"
    assert store.records() == []


async def test_a_group_commit_with_a_key_sends_each_key_once_per_batch() -> None:
    from dogs_core.runtime.plumbing.batching import GroupCommit

    batches: list[list[tuple[str, str]]] = []
    items = [("a", "1"), ("b", "1"), ("c", "1"), ("a", "2"), ("b", "2"), ("a", "3")]

    async def write(items: list[tuple[str, str]]) -> list[bool]:
        batches.append(list(items))
        await anyio.sleep(1)
        return [True] * len(items)

    commit: GroupCommit[tuple[str, str], bool] = GroupCommit(
        write, what="complete", key=lambda item: item[0]
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(commit.run)
        async with anyio.create_task_group() as submitters:
            for item in items:
                submitters.start_soon(commit.submit, item)
        tg.cancel_scope.cancel()
    for batch in batches:
        assert len({job for job, _ in batch}) == len(batch), f"a key twice in {batch}"
    assert sorted(item for batch in batches for item in batch) == sorted(items)
