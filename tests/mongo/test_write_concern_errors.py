"""A write concern error after the write was applied (a step-down interrupting the wait for
replication, code 11602) is an ambiguous outcome, not a lost lock: the job that completed is
recorded as a success, once (found by the failover test; reproduced here with a fail point)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_core import HistoryStatus, JobContext, Jobs, Workers
from dogs_core.runtime import DogsClient
from dogs_mongo import AsyncMongoJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

APP_NAME = f"dogs-wce-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def interrupted_delete(sync_mongo_client: MongoClient[dict[str, Any]]) -> Iterator[None]:
    """The next ``delete`` of the workers' client is applied, then reported with a write
    concern error 11602 (InterruptedDueToReplStateChange), as during a step-down."""
    sync_mongo_client.admin.command(
        "configureFailPoint",
        "failCommand",
        mode={"times": 1},
        data={
            "failCommands": ["delete"],
            "writeConcernError": {"code": 11602, "errmsg": "operation was interrupted"},
            "appName": APP_NAME,
        },
    )
    yield
    sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


async def test_a_completion_interrupted_after_it_applied_is_a_success(
    mongodb_uri: str, mongo_database_name: str, interrupted_delete: None
) -> None:
    runs: list[int] = []
    jobs = Jobs()

    @jobs.event
    async def once(params: dict[str, Any] | None, ctx: JobContext) -> str:
        runs.append(ctx.tries)
        return "done"

    # The error marks the server unknown until the driver's next check: check often.
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, appname=APP_NAME, heartbeatFrequencyMS=500
    )
    try:
        store = AsyncMongoJobStore(mongo, mongo_database_name)
        client = DogsClient(store, jobs)
        outcome = await client.schedule("once")
        async with Workers(store, jobs, poll_interval=0.1, probe_enabled=False) as workers:
            with anyio.fail_after(60):
                while await store.get_record(outcome.id) is not None:  # type: ignore[union-attr]  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                while not await client.get_executions(once):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            await workers.stop()
        rows = await client.get_executions(once)
    finally:
        await mongo.close()
    assert runs == [1]
    assert [(row.status, row.result) for row in rows] == [(HistoryStatus.SUCCESS, "done")]
