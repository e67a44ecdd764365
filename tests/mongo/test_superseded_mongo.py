"""One counted success across an outage longer than the lock, on the real mongod (issue 40,
item 1).

A worker whose handler ran to success is cut off from the store while it saves that success (its
``settle_many`` waits: the outage as that worker sees it) for longer than the job's lock. The
lock expires, another claim takes the job over, and only then does the saved success arrive. How
the two end depends on which row of the first execution was written first, its own ``success``
or the claimer's ``stale`` row for it (the first row of an execution wins):

- the claimer's ``stale`` row won: the job ran again; the late success is refused and its row
  becomes ``superseded``, naming the execution that took over; stats, ``wait_for`` and the
  workflow count the second execution's success only;
- the first execution's ``success`` won (it landed between the claimer's first read and its own
  write): the claimer completes it without running the job again, and a workflow step whose
  dependents that row released never runs again;
- the claim is this worker's own: it waits for its own settlement and completes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.records import HistoryRecord, HistoryStatus, Scheduled
from dogs_core.domain.settle import Settlement, rows_of
from dogs_core.domain.workflow_records import WorkflowState
from dogs_core.domain.workflows import Workflow
from dogs_core.ports import AsyncJobStore
from dogs_mongo import AsyncMongoJobStore
from dogs_testing.wrapper import JobStoreWrapper

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

LOCK = 2.0
"""The lock of every claim; each outage here outlasts it."""
BOUND = 60.0
"""Seconds any awaited condition may take on a loaded machine (a bound, not a duration)."""

Params = dict[str, Any] | None


class CutOff(JobStoreWrapper):
    """A worker cut off from the store for its settlements until :meth:`restore`: each
    ``settle_many`` waits, then goes on as it was sent. With ``rows_land``, the rows the batch
    carries are written once that event is set (the outage ended for them first) and only the
    settlements wait."""

    def __init__(self, inner: AsyncJobStore, *, rows_land: anyio.Event | None = None) -> None:
        super().__init__(inner)
        self.rows_land = rows_land
        self.rows_written = anyio.Event()
        self.restored = anyio.Event()
        self.held = 0  # settle_many calls cut off
        self.answered = 0  # of those, answered once restored
        self.verdicts: list[bool] = []

    def restore(self) -> None:
        self.restored.set()

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        if self.restored.is_set():
            return await self.inner.settle_many(settlements)
        self.held += 1
        if self.rows_land is not None:
            await self.rows_land.wait()
            await self.inner.write_history_many(rows_of(settlements))
            settlements = [dataclasses.replace(s, row=None) for s in settlements]
            self.rows_written.set()
        await self.restored.wait()
        verdicts = await self.inner.settle_many(settlements)
        self.verdicts.extend(verdicts)
        self.answered += 1
        return verdicts


class LetsRowsLandAfterItsFirstRead(JobStoreWrapper):
    """The claimer's store: right after its first read of a job's history (the takeover's look
    for the previous attempt's row), the cut-off worker's rows land."""

    def __init__(self, inner: AsyncJobStore, cut: CutOff) -> None:
        super().__init__(inner)
        self.cut = cut
        self.reads = 0

    async def read_history(self, *args: Any, **kwargs: Any) -> list[HistoryRecord]:
        rows = await self.inner.read_history(*args, **kwargs)
        if kwargs.get("job_id") is not None:
            self.reads += 1
            if self.reads == 1 and self.cut.rows_land is not None:
                self.cut.rows_land.set()
                await self.cut.rows_written.wait()
        return rows


async def until(condition: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Wait until ``condition`` holds, polling; fail naming ``what`` after :data:`BOUND`."""
    with anyio.move_on_after(BOUND):
        while True:
            value = condition()
            if not isinstance(value, bool):
                value = await value
            if value:
                return
            await anyio.sleep(0.05)
    pytest.fail(f"not within {BOUND} s: {what}")


def workers(store: AsyncJobStore, jobs: Jobs, **options: Any) -> Workers:
    options.setdefault("poll_interval", 0.1)
    return Workers(store, jobs, default_lock_time=LOCK, watch_changes=False, **options)


async def new_store(client: AsyncMongoClient[dict[str, Any]], database: str) -> AsyncMongoJobStore:
    store = AsyncMongoJobStore(client, database)
    await store.setup()
    return store


def paying(runs: list[str]) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def pay(params: Params, ctx: JobContext) -> dict[str, Any]:
        runs.append(ctx.execution_id)
        return {"paid": (params or {}).get("n"), "by": ctx.execution_id}

    return jobs


async def rows_of_job(store: AsyncJobStore, job_id: str) -> dict[str, HistoryRecord]:
    return {row.execution_id: row for row in await store.read_history(job_id=job_id)}


async def test_a_success_saved_after_the_job_ran_again_is_superseded_not_a_second_success(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    runs: list[str] = []
    jobs = paying(runs)
    store = await new_store(async_mongo_client, mongo_database_name)
    client = DogsClient(store, jobs)
    scheduled = await client.schedule("pay", {"n": 1})
    assert isinstance(scheduled, Scheduled)
    job_id = scheduled.id
    cut = CutOff(store)
    # One slot, freed only once its settlement is written: the cut-off worker cannot claim the
    # job again itself (the third test is that case).
    async with workers(cut, jobs, workers_count=1, completions_in_flight=0):
        await until(lambda: cut.held == 1, "the first success is on its way, cut off")
        async with workers(store, jobs):
            # The lock expires; this worker takes the job over, finds no row, runs it again.
            await until(
                lambda: _gone(store, job_id), "the job completed by the worker that took over"
            )
        cut.restore()
        await until(lambda: cut.answered == 1, "the first success's settlement answered")
        first, second = runs
        await until(
            lambda: _status_is(store, job_id, first, HistoryStatus.SUPERSEDED),
            "the first execution's row marked superseded",
        )
    assert cut.verdicts == [False], "the late completion found the lock moved on"
    rows = await rows_of_job(store, job_id)
    assert set(rows) == {first, second}
    late, counted = rows[first], rows[second]
    assert late.status is HistoryStatus.SUPERSEDED, "never a plain success, never stale"
    assert late.superseded_by == second
    assert late.result == {"paid": 1, "by": first}, "its own outcome, kept"
    assert late.outcome == "superseded"
    assert counted.status is HistoryStatus.SUCCESS
    assert counted.was_stale
    assert [row.status for row in rows.values()].count(HistoryStatus.SUCCESS) == 1
    # Node Dogs reads a string status and a string supersededBy; the row's _id is a UUID string.
    raw = await store.history_collection.find_one({"executionId": first})
    assert raw is not None
    assert (raw["status"], raw["supersededBy"]) == ("superseded", second)
    assert isinstance(raw["_id"], str)
    assert await store.history_collection.count_documents({"jobId": job_id}) == 2
    # What the library counts: one success.
    (stats,) = await client.stats(window=timedelta(hours=1))
    assert (stats.succeeded, stats.superseded, stats.stale, stats.runs) == (1, 1, 0, 2)
    ended = await client.wait_for(job_id, timeout=BOUND)
    assert (ended.execution_id, ended.status) == (second, HistoryStatus.SUCCESS)


async def test_a_success_that_lands_before_the_claimers_stale_row_is_completed_not_run_again(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    """The interleaving that left two ``success`` rows: the claimer looks for the previous
    attempt's row, finds none, and that attempt's success lands just after the look."""
    runs: list[str] = []
    jobs = paying(runs)
    store = await new_store(async_mongo_client, mongo_database_name)
    client = DogsClient(store, jobs)
    scheduled = await client.schedule("pay", {"n": 2})
    assert isinstance(scheduled, Scheduled)
    job_id = scheduled.id
    cut = CutOff(store, rows_land=anyio.Event())
    claimer = LetsRowsLandAfterItsFirstRead(store, cut)
    async with workers(cut, jobs, workers_count=1, completions_in_flight=0):
        await until(lambda: cut.held == 1, "the first success is on its way, cut off")
        async with workers(claimer, jobs):
            await until(lambda: _gone(store, job_id), "the job completed by the claimer")
        cut.restore()
        await until(lambda: cut.answered == 1, "the first success's settlement answered")
    assert claimer.reads == 2, "the claimer read the row again after writing its stale row"
    (first,) = runs
    assert runs == [first], "not run again: the first execution's success had won"
    rows = await rows_of_job(store, job_id)
    assert [(row.execution_id, row.status) for row in rows.values()] == [
        (first, HistoryStatus.SUCCESS)
    ]
    assert cut.verdicts == [False]
    (stats,) = await client.stats(window=timedelta(hours=1))
    assert (stats.succeeded, stats.superseded, stats.stale, stats.runs) == (1, 0, 0, 1)


async def test_a_worker_that_claims_a_job_it_is_still_settling_completes_its_own_success(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    runs: list[str] = []
    jobs = paying(runs)
    store = await new_store(async_mongo_client, mongo_database_name)
    client = DogsClient(store, jobs)
    scheduled = await client.schedule("pay", {"n": 3})
    assert isinstance(scheduled, Scheduled)
    job_id = scheduled.id
    cut = CutOff(store)
    # Slots freed while settlements are in flight: this worker claims the job again once its
    # lock expired, while its own success is still cut off.
    async with workers(cut, jobs, workers_count=2):
        await until(lambda: cut.held == 1, "the first success is on its way, cut off")
        (first,) = runs

        async def claimed_again() -> bool:
            record = await store.get_record(job_id)
            return record is not None and record.lock_id not in (None, first)

        await until(claimed_again, "the same worker claimed the job again")
        cut.restore()
        await until(lambda: _gone(store, job_id), "the job completed")
    assert runs == [first], "the worker did not run a job it was still settling"
    rows = await rows_of_job(store, job_id)
    assert [(row.execution_id, row.status) for row in rows.values()] == [
        (first, HistoryStatus.SUCCESS)
    ]


async def test_a_workflow_step_whose_success_won_never_runs_again_and_its_dependent_runs_once(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    ran: list[tuple[str, str]] = []
    jobs = Jobs()

    @jobs.event
    async def step(params: Params, ctx: JobContext) -> str:
        ran.append((str(ctx.step_name), ctx.execution_id))
        return str(ctx.step_name)

    store = await new_store(async_mongo_client, mongo_database_name)
    client = DogsClient(store, jobs)
    flow = Workflow("pair")
    first_step = flow.add("step", {}, name="a")
    flow.add("step", {}, name="b", after=[first_step])
    started = await client.start_workflow(flow)
    cut = CutOff(store, rows_land=anyio.Event())
    claimer = LetsRowsLandAfterItsFirstRead(store, cut)
    async with workers(cut, jobs, workers_count=1, completions_in_flight=0):
        await until(lambda: cut.held == 1, "step a's success is on its way, cut off")
        async with workers(claimer, jobs):
            await until(lambda: [name for name, _ in ran] == ["a", "b"], "step b ran")
            view = await client.wait_for_workflow(started.id, timeout=BOUND)
        cut.restore()
        await until(lambda: cut.answered == 1, "step a's first settlement answered")
    assert [name for name, _ in ran] == ["a", "b"], "step a never ran again"
    assert view.state is WorkflowState.SUCCEEDED
    by_name = {s.name: s for s in view.steps}
    assert by_name["a"].outcome is not None
    assert by_name["a"].outcome.execution_id == ran[0][1], "its one success"


async def test_a_workflow_step_run_again_counts_its_second_success_only(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    """The other order: the step ran again (its first execution was silent past the lock); the
    first execution's late success is superseded and the step's outcome is the second one's."""
    ran: list[tuple[str, str]] = []
    jobs = Jobs()

    @jobs.event
    async def step(params: Params, ctx: JobContext) -> str:
        ran.append((str(ctx.step_name), ctx.execution_id))
        return ctx.execution_id

    store = await new_store(async_mongo_client, mongo_database_name)
    client = DogsClient(store, jobs)
    flow = Workflow("pair")
    first_step = flow.add("step", {}, name="a")
    flow.add("step", {}, name="b", after=[first_step])
    started = await client.start_workflow(flow)
    cut = CutOff(store)
    async with workers(cut, jobs, workers_count=1, completions_in_flight=0):
        await until(lambda: cut.held == 1, "step a's success is on its way, cut off")
        async with workers(store, jobs):
            view = await client.wait_for_workflow(started.id, timeout=BOUND)
        cut.restore()
        await until(lambda: cut.answered == 1, "step a's first settlement answered")
        late = ran[0][1]
        record_id = {s.name: s for s in view.steps}["a"].record_id
        assert record_id is not None
        await until(
            lambda: _status_is(store, record_id, late, HistoryStatus.SUPERSEDED),
            "step a's first row marked superseded",
        )
    assert [name for name, _ in ran] == ["a", "a", "b"]
    assert view.state is WorkflowState.SUCCEEDED
    outcome = {s.name: s for s in view.steps}["a"].outcome
    assert outcome is not None
    assert outcome.execution_id == ran[1][1], "the second run's success is the step's"
    assert outcome.result == ran[1][1]


async def _gone(store: AsyncJobStore, job_id: str) -> bool:
    return await store.get_record(job_id) is None


async def _status_is(
    store: AsyncJobStore, job_id: str, execution_id: str, status: HistoryStatus
) -> bool:
    row = (await rows_of_job(store, job_id)).get(execution_id)
    return row is not None and row.status is status
