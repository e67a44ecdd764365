"""Workers SIGKILLed inside the release window, on the real mongod: a worker process runs the
parent steps of many workflows and is the only one releasing their children; it is killed while
parents keep completing, so workflows are caught between a parent's row and its step's end,
between the end and the children's release, and after. Then another instance (the test's own
workers and release) takes over: every child step runs exactly once (one record, one run, one
history row), nothing is lost, every workflow succeeds. The counts of each window are printed
(``-s``)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, Workers
from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflows import Workflow
from dogs_core.jobs import Jobs
from dogs_core.runtime.worker.releaser import WorkflowReleaser
from dogs_mongo import AsyncMongoJobStore
from tests.reliability import workflow_worker
from tests.reliability.children import ChildProcess

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

WORKER = Path(workflow_worker.__file__)
WORKFLOWS = 24
CHILDREN = 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def window(view: Any) -> str:
    """Where a workflow stood at the kill."""
    parent = view.step("parent")
    children = [s for s in view.steps if s.name != "parent"]
    if parent.state is StepState.RELEASED:
        return "parent not ended (running, or its row not read yet)"
    if parent.pending or any(c.state is StepState.BLOCKED for c in children):
        return "parent ended, children not all released"
    return "children released"


@pytest.fixture
async def short_transactions(async_mongo_client: AsyncMongoClient[dict[str, Any]]) -> Any:
    """A killed worker's open transaction lives until MongoDB aborts it (60 s by default):
    2 s here, so that the takeover of what it held is seen quickly."""
    admin = async_mongo_client.admin
    name = "transactionLifetimeLimitSeconds"
    before = (await admin.command({"getParameter": 1, name: 1}))[name]
    await admin.command({"setParameter": 1, name: 2})
    yield
    await admin.command({"setParameter": 1, name: before})


@pytest.mark.usefixtures("short_transactions")
async def test_killed_releases_are_finished_by_another_instance_exactly_once(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongodb_uri: str, mongo_database_name: str
) -> None:
    database = async_mongo_client[mongo_database_name]
    runs = database[workflow_worker.RUNS]
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    registry = workflow_worker.jobs(runs)
    client = DogsClient(store, registry)
    victim = ChildProcess([sys.executable, str(WORKER), mongodb_uri, mongo_database_name])
    ids = []
    try:
        victim.wait_ready()
        for n in range(WORKFLOWS):
            wf = Workflow(f"kill-{n}")
            parent = wf.add("parent", {"n": n, "ms": 5 + (n * 7) % 40}, name="parent")
            for k in range(CHILDREN):
                wf.add("child", {"k": k}, name=f"child-{k}", after=[parent])
            ids.append((await client.start_workflow(wf)).id)
        with anyio.fail_after(30):
            while await store.history_collection.count_documents({"jobName": "parent"}) < 8:  # noqa: ASYNC110
                await anyio.sleep(0.002)
        victim.kill()
    finally:
        victim.stop()

    seen = Counter([window(await client.get_workflow(i)) for i in ids])
    print(f"\nat the kill, of {WORKFLOWS} workflows: {dict(seen)}")

    children = Jobs()
    children.add(registry.get("child"))
    children.add(registry.get("parent"))
    releaser = WorkflowReleaser(store, sweep_interval=0.2)
    async with anyio.create_task_group() as group:
        group.start_soon(releaser.run)
        async with Workers(
            store, children, workers_count=8, poll_interval=0.05, release_workflows=False
        ) as workers:
            views = [await client.wait_for_workflow(i, timeout=60, poll_interval=0.1) for i in ids]
            await workers.stop()
        group.cancel_scope.cancel()

    assert {view.state for view in views} == {WorkflowState.SUCCEEDED}
    counted = {doc["_id"]: doc["runs"] async for doc in runs.find()}
    child_steps = [s for view in views for s in view.steps if s.name != "parent"]
    assert len(child_steps) == WORKFLOWS * CHILDREN
    assert {counted.get(step.id) for step in child_steps} == {1}, "each child ran once"
    for view in views:
        n = view.step("parent").outcome.result  # type: ignore[union-attr]
        for k in range(CHILDREN):
            step = view.step(f"child-{k}")
            assert step.outcome is not None
            assert step.outcome.result == n * 10 + k
            rows = await store.read_history(job_id=str(step.record_id))
            assert [row.status for row in rows] == [HistoryStatus.SUCCESS]
    left = await store.records_collection.count_documents({"jobName": "child"})
    assert left == 0, "every child record ran and was deleted"
    child_rows = await store.history_collection.count_documents({"jobName": "child"})
    assert child_rows == WORKFLOWS * CHILDREN, "one record, one row per child: released once"
