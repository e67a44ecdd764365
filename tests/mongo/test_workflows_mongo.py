"""Workflows on the real mongod, beside Node Dogs 4.6.8: its own claim command never finds a
blocked step, a step whose job a Node worker claimed, ran and completed (with Node's own
commands, its history row as Node writes it) releases its dependents to Python workers, the
records of released steps have Dogs' fields and types, and a workflow started in the caller's
transaction exists only if that transaction commits.

Node's commands are copied from ``reference/dogs-schema.json`` (``commandsSeenByProfiler``):
the ``findAndModify`` claim, the fenced ``remove`` and the history upsert, in canonical
Extended JSON, with only ids, names and times replaced.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import json_util
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.workflow_records import StepState, WorkflowState
from dogs_core.domain.workflow_release import MISSING_ROW_GRACE
from dogs_core.domain.workflows import Workflow
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.runtime.worker.releaser import WorkflowReleaser
from dogs_mongo import AsyncMongoJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

#: Dogs 4.6.8's claim, as its profiler saw it (dogs-schema.json, ``findAndModify ...``).
NODE_CLAIM = json_util.loads("""
{"findAndModify": "orionjs.jobs_dogs_records",
 "query": {"partition": 2, "jobName": {"$in": ["noop", "echo"]},
           "nextRunAt": {"$lte": {"$date": "2026-11-30T01:16:42.374Z"}},
           "$and": [{"$or": [{"lockedUntil": {"$exists": false}},
                             {"lockedUntil": {"$lte": {"$date": "2026-11-30T01:16:42.374Z"}}}]},
                    {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]}]},
 "remove": false, "new": false, "upsert": false,
 "sort": {"priority": -1, "nextRunAt": 1},
 "hint": {"partition": 1, "jobName": 1, "priority": -1, "nextRunAt": 1},
 "update": {"$set": {"lockId": "BEwq9RsrPe4g5DvEe",
                     "lockedUntil": {"$date": "2026-11-30T01:17:12.374Z"},
                     "lastRunAt": {"$date": "2026-11-30T01:16:42.374Z"}},
            "$inc": {"tries": 1}}}
""")
#: Dogs 4.6.8's history row of a success (the upsert keyed by ``executionId``).
NODE_HISTORY = json_util.loads("""
{"q": {"executionId": "ktjHe4hA4cMPvXXYC"},
 "u": {"$setOnInsert": {"_id": "01a22a06-911e-743e-a2f2-5c7e0fe72f7c", "status": "success"},
       "$set": {"jobId": "01a22a06-90d0-714e-924b-27da6e67da01",
                "executionId": "ktjHe4hA4cMPvXXYC", "jobName": "echo", "type": "event",
                "priority": 100, "tries": 1,
                "startedAt": {"$date": "2026-11-30T01:16:43.161Z"},
                "endedAt": {"$date": "2026-11-30T01:16:43.166Z"}, "duration": 5,
                "expiresAt": {"$date": "2026-12-07T01:16:43.166Z"},
                "errorMessage": null, "result": {"echoed": {"x": 2}}}}}
""")
#: The BSON types of an event record Dogs 4.6.8 inserted (examples.pendingEventScheduleJob).
DOGS_RECORD_TYPES = {
    "_id": str,
    "jobName": str,
    "type": str,
    "priority": int,
    "nextRunAt": datetime,
    "partition": int,
    "params": dict,
}


def node_claim(database: Any, *, names: list[str], partition: int, now: datetime) -> Any:
    command = copy.deepcopy(NODE_CLAIM)
    command["query"]["partition"] = partition
    command["query"]["jobName"]["$in"] = names
    command["query"]["nextRunAt"]["$lte"] = now
    command["query"]["$and"][0]["$or"][1]["lockedUntil"]["$lte"] = now
    lock_id = new_execution_id()
    command["update"]["$set"].update(
        {"lockId": lock_id, "lockedUntil": now + timedelta(seconds=30), "lastRunAt": now}
    )
    return lock_id, command


def node_history(job_id: str, lock_id: str) -> Any:
    """Node's history upsert of a success of ``job_id``'s run ``lock_id``, written now: its
    ``expiresAt`` a week ahead, as Node writes it (the copied command's is a fixed date, past
    since 2026-12-07: mongod's TTL monitor would remove the row before a late reader saw it,
    and the step would end ``failed``, "its record is gone and it left no history row")."""
    upsert = copy.deepcopy(NODE_HISTORY)
    now = datetime.now(UTC)
    upsert["q"]["executionId"] = lock_id
    upsert["u"]["$setOnInsert"]["_id"] = new_record_id()
    upsert["u"]["$set"].update(
        {
            "jobId": job_id,
            "executionId": lock_id,
            "jobName": "node_echo",
            "startedAt": now,
            "endedAt": now,
            "expiresAt": now + timedelta(days=7),
        }
    )
    return upsert


def registry(ran: list[str]) -> tuple[Jobs, Jobs]:
    """The application's jobs, and the ones the Python workers run (``node_echo`` runs on
    Node only)."""
    jobs, python = Jobs(), Jobs()

    @jobs.event
    async def node_echo(params: dict[str, Any], ctx: JobContext) -> None:
        raise AssertionError("a Node worker runs it")

    @jobs.event
    async def report(params: dict[str, Any] | None, ctx: JobContext) -> dict[str, Any]:
        ran.append(str(ctx.step_name))
        return {"echoed": ctx.upstream("node").result}

    python.add(report)
    return jobs, python


async def test_node_never_claims_a_blocked_step_and_its_end_releases_the_next_ones(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    ran: list[str] = []
    jobs, python = registry(ran)
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    client = DogsClient(store, jobs, n_partitions=4)
    wf = Workflow("mixed")
    node = wf.add("node_echo", {"x": 2}, name="node")
    for n in range(3):
        wf.add("report", {"n": n}, name=f"report-{n}", after=[node])
    started = await client.start_workflow(wf)
    database = store.records_collection.database
    far = datetime(2200, 1, 1, tzinfo=UTC)  # every record is due for this claim
    names = ["node_echo", "report"]

    # While the three reports are blocked, Dogs' own claim finds the first step only.
    claimed = []
    for partition in range(4):
        while True:
            lock_id, command = node_claim(database, names=names, partition=partition, now=far)
            found = (await database.command(command))["value"]
            if found is None:
                break
            claimed.append((found, lock_id))
    view = await client.get_workflow(started.id)
    assert [found["_id"] for found, _ in claimed] == [view.step("node").record_id]
    steps = store.workflow_steps_collection
    for partition in range(4):  # the steps' own documents never match it either
        _, command = node_claim(database, names=names, partition=partition, now=far)
        assert await steps.count_documents(command["query"]) == 0
    ((record, lock_id),) = claimed
    assert {key: type(record[key]) for key in DOGS_RECORD_TYPES} == DOGS_RECORD_TYPES

    async with Workers(
        store, python, n_partitions=4, poll_interval=0.2, watch_changes=True
    ) as workers:
        # Node ran it: its fenced remove, then its history upsert (no owner, no wasStale).
        removed = await store.records_collection.delete_one(
            {"_id": record["_id"], "type": "event", "lockId": lock_id}
        )
        assert removed.deleted_count == 1
        upsert = node_history(record["_id"], lock_id)
        await store.history_collection.update_one(upsert["q"], upsert["u"], upsert=True)
        done = await client.wait_for_workflow(started.id, timeout=60, poll_interval=0.2)
        await workers.stop()
    assert done.state is WorkflowState.SUCCEEDED
    assert sorted(ran) == ["report-0", "report-1", "report-2"]
    node_outcome = done.step("node").outcome
    assert node_outcome is not None
    assert node_outcome.result == {"echoed": {"x": 2}}
    for n in range(3):
        step = done.step(f"report-{n}")
        assert step.state is StepState.SUCCEEDED
        assert step.outcome is not None
        assert step.outcome.result == {"echoed": {"echoed": {"x": 2}}}


class Later:
    """The releaser's clock an hour after the release: the step's job ran that long."""

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(hours=1)


async def test_a_look_between_nodes_remove_and_its_row_does_not_fail_the_step(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    """Node Dogs removes a finished record, then writes its row (fire-and-forget; under load,
    seconds later). A sweep that looks in between sees neither: the step is judged gone only
    a grace after that first sight (docs/workflows.md), so the row, once written, ends it as
    the success it was; a step that ran for an hour is not judged at first sight."""
    jobs, _ = registry([])
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    client = DogsClient(store, jobs, n_partitions=1)
    wf = Workflow("remove-then-row")
    node = wf.add("node_echo", {"x": 2}, name="node")
    wf.add("report", name="report", after=[node])
    started = await client.start_workflow(wf)
    database = store.records_collection.database
    far = datetime(2200, 1, 1, tzinfo=UTC)
    lock_id, command = node_claim(database, names=["node_echo"], partition=0, now=far)
    record = (await database.command(command))["value"]
    releaser = WorkflowReleaser(store, clock=Later(), watch=False)
    assert (await releaser.sweep()).ended == []  # running: its record is held

    removed = await store.records_collection.delete_one({"_id": record["_id"], "lockId": lock_id})
    assert removed.deleted_count == 1
    between = await releaser.sweep()  # Node's row is not written yet
    assert between.ended == []
    assert (await client.get_workflow(started.id)).step("node").state is StepState.RELEASED

    upsert = node_history(record["_id"], lock_id)
    await store.history_collection.update_one(upsert["q"], upsert["u"], upsert=True)
    after = await releaser.sweep()
    assert [ending.state for ending in after.ended] == [StepState.SUCCEEDED]
    view = await client.get_workflow(started.id)
    assert view.step("node").state is StepState.SUCCEEDED
    assert view.step("report").state is StepState.RELEASED
    assert view.state is WorkflowState.RUNNING


async def test_a_record_gone_without_a_row_fails_its_step_a_grace_after_its_first_sight(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    jobs, _ = registry([])
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    client = DogsClient(store, jobs, n_partitions=1)
    wf = Workflow("deleted")
    wf.add("node_echo", name="node")
    started = await client.start_workflow(wf)
    await store.records_collection.delete_many({})  # by hand: no row will ever come

    class Clock:
        at = datetime.now(UTC)

        def now(self) -> datetime:
            return self.at

    clock = Clock()
    releaser = WorkflowReleaser(store, clock=clock, watch=False)
    assert (await releaser.sweep()).ended == []  # the first sight
    clock.at += MISSING_ROW_GRACE / 2
    assert (await releaser.sweep()).ended == []
    clock.at += MISSING_ROW_GRACE / 2
    (ending,) = (await releaser.sweep()).ended
    assert ending.state is StepState.FAILED
    assert "no history row" in (ending.outcome.error_message or "")
    assert (await client.get_workflow(started.id)).state is WorkflowState.FAILED


async def test_a_workflow_in_the_callers_transaction_exists_only_if_it_commits(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    jobs, _ = registry([])
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    await store.setup_workflows()
    client = DogsClient(store, jobs)
    orders = async_mongo_client[mongo_database_name]["orders"]

    def workflow() -> Workflow:
        wf = Workflow("order")
        first = wf.add("report", name="first")
        wf.add("report", name="second", after=[first])
        return wf

    async with async_mongo_client.start_session() as session:

        async def commit(session: Any) -> Any:
            await orders.insert_one({"_id": 1}, session=session)
            return await client.start_workflow(workflow(), session=session)

        started = await session.with_transaction(commit)
    assert (await client.get_workflow(started.id)).state is WorkflowState.RUNNING
    assert await store.records_collection.count_documents({}) == 1

    class Declined(Exception):
        pass

    async with async_mongo_client.start_session() as session:

        async def abort(session: Any) -> None:
            await orders.insert_one({"_id": 2}, session=session)
            await client.start_workflow(workflow(), session=session)
            raise Declined

        with pytest.raises(Declined):
            await session.with_transaction(abort)
    assert await store.workflows_collection.count_documents({}) == 1
    assert await store.workflow_steps_collection.count_documents({}) == 2
    assert await store.records_collection.count_documents({}) == 1
    assert await orders.count_documents({}) == 1
