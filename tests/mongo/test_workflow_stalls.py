"""No workflow waits on a transaction it does not own, on the real mongod (issue 40, item 2).

* A releaser killed *inside* its release (between the release's writes: the step's record
  staged, or the step released with a record still staged) leaves nothing that holds a step:
  a live worker's sweep finishes or undoes what it left, and the workflow ends within the
  sweep interval plus the lock time, its second step run once, no staged record left.
* A transaction another client left open on a step (the release transaction of a killed
  worker of an older version: its compare-and-set and its record insert, never committed)
  holds that one workflow only: with every workflow's first step ended in the same sweep
  round, every other workflow ends while it is held, and the held one ends once the
  transaction is gone (aborted here, as mongod aborts it after
  ``transactionLifetimeLimitSeconds``).

Bounds are generous (the machine may be loaded) but far below the 60 s a dead transaction
lives by default, which is what the workflows waited for before.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflow_release import row_ending
from dogs_core.domain.workflows import Workflow
from dogs_core.ids import new_record_id
from dogs_core.runtime.worker.releaser import WorkflowReleaser
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo.queries import workflows as qw
from tests.reliability.children import wait_until

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

WORKFLOWS = 6
SWEEP_INTERVAL = 0.5
LOCK_TIME = 3.0
#: The bound of the issue (sweep interval + lock time), with room for a loaded machine.
BOUND = SWEEP_INTERVAL + LOCK_TIME + 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def registry(ran: Counter[str]) -> Jobs:
    jobs = Jobs()

    @jobs.event(lock_time=f"{LOCK_TIME}s")
    async def first(params: None, ctx: JobContext) -> str:
        return "first"

    @jobs.event(lock_time=f"{LOCK_TIME}s")
    async def second(params: None, ctx: JobContext) -> None:
        ran[str(ctx.workflow_id)] += 1

    return jobs


async def started_with_first_steps_run(
    store: AsyncMongoJobStore, jobs: Jobs
) -> tuple[DogsClient, list[str], dict[str, HistoryRecord]]:
    """``WORKFLOWS`` workflows ``first -> second`` whose first steps ran (their rows written)
    by workers that release nothing: every release is still to be done."""
    client = DogsClient(store, jobs)
    ids = []
    for n in range(WORKFLOWS):
        wf = Workflow(f"stall-{n}")
        wf.add("second", after=[wf.add("first")])
        ids.append((await client.start_workflow(wf)).id)
    records = [(await client.get_workflow(i)).step("first").record_id for i in ids]
    async with Workers(store, jobs, poll_interval=0.05, release_workflows=False) as workers:
        await wait_until(
            lambda: _counted(store, {"jobId": {"$in": records}}, WORKFLOWS),
            BOUND,
            "the first steps ran",
        )
        await workers.stop()
    rows = {}
    for record_id in records:
        (row,) = await client.get_executions(job_id=str(record_id))
        rows[str(record_id)] = row
    return client, ids, rows


async def _counted(store: AsyncMongoJobStore, filter_: dict[str, Any], count: int) -> bool:
    return await store.history_collection.count_documents(filter_) >= count


async def run_until_ended(
    store: AsyncMongoJobStore, client: DogsClient, jobs: Jobs, ids: list[str]
) -> list[Any]:
    async with Workers(
        store,
        jobs,
        poll_interval=0.05,
        workflow_sweep_interval=SWEEP_INTERVAL,
        default_lock_time=LOCK_TIME,
    ) as workers:
        views = await client.wait_for_workflows(ids, timeout=BOUND, poll_interval=0.1)
        await workers.stop()
    return views


@pytest.mark.parametrize("killed_at", ["staged", "released"])
async def test_a_releaser_killed_inside_its_release_holds_no_step(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str, killed_at: str
) -> None:
    ran: Counter[str] = Counter()
    jobs = registry(ran)
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    client, ids, rows = await started_with_first_steps_run(store, jobs)

    # The dying process: its releaser takes the first workflow's row and is killed between
    # two writes of its release (nothing after that point is ever written).
    dying = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    reached = anyio.Event()

    async def killed(point: str) -> None:
        if point == killed_at:
            reached.set()
            await anyio.sleep_forever()

    dying.release_fault = killed
    first_record = (await client.get_workflow(ids[0])).step("first").record_id
    async with anyio.create_task_group() as group:
        group.start_soon(WorkflowReleaser(dying).rows, [rows[str(first_record)]])
        with anyio.fail_after(BOUND):
            await reached.wait()
        group.cancel_scope.cancel()  # the kill
    held = await client.get_workflow(ids[0])
    assert held.step("first").pending  # its consequences are half written
    staged = await store.records_collection.count_documents(qw.staged_filter())
    assert staged == 1  # the record the release wrote, never made due

    views = await run_until_ended(store, client, jobs, ids)
    assert [view.state for view in views] == [WorkflowState.SUCCEEDED] * WORKFLOWS
    assert ran == Counter(dict.fromkeys(ids, 1))  # every second step ran once

    # What the kill left is gone: the released record made due (and run), or the orphan removed.
    async def repaired() -> bool:
        await store.repair_releases()
        return await store.records_collection.count_documents(qw.staged_filter()) == 0

    await wait_until(repaired, BOUND, "no staged record is left")
    assert await store.records_collection.count_documents({}) == 0


async def test_a_transaction_left_open_on_a_step_holds_that_workflow_only(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    ran: Counter[str] = Counter()
    jobs = registry(ran)
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    store.workflow_operation_seconds = 1.0
    await store.setup()
    client, ids, rows = await started_with_first_steps_run(store, jobs)
    # Every first step ended (pending: as a releaser that died right after), so that the first
    # sweep round advances all the workflows at once.
    released = await store.released_steps(record_ids=list(rows))
    endings = [row_ending(step, rows[step.record_id]) for step in released]
    assert all(endings)
    await store.end_steps([e for e in endings if e is not None], now=datetime.now(UTC))

    held_step = (await client.get_workflow(ids[0])).step("second")
    session = async_mongo_client.start_session()  # another process's, left open
    await session.start_transaction()
    dead_record = new_record_id()
    await store.workflow_steps_collection.update_one(
        {"_id": held_step.id, "state": StepState.BLOCKED.value},
        {
            "$set": {
                "state": StepState.RELEASED.value,
                "recordId": dead_record,
                "releasedAt": datetime.now(UTC),
            }
        },
        session=session,
    )
    await store.records_collection.insert_one(
        {"_id": dead_record, "jobName": "second", "type": "event"}, session=session
    )
    try:
        async with Workers(
            store,
            jobs,
            poll_interval=0.05,
            workflow_sweep_interval=SWEEP_INTERVAL,
            default_lock_time=LOCK_TIME,
        ) as workers:
            others = await client.wait_for_workflows(ids[1:], timeout=BOUND, poll_interval=0.1)
            assert [view.state for view in others] == [WorkflowState.SUCCEEDED] * (WORKFLOWS - 1)
            assert (await client.get_workflow(ids[0])).state is WorkflowState.RUNNING
            await session.abort_transaction()  # as mongod does at its lifetime limit
            (held,) = await client.wait_for_workflows(ids[:1], timeout=BOUND, poll_interval=0.1)
            await workers.stop()
    finally:
        await session.end_session()
    assert held.state is WorkflowState.SUCCEEDED
    assert ran == Counter(dict.fromkeys(ids, 1))
