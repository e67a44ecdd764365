"""Durable steps on the real mongod (issue 37): a transactional step's writes and its recorded
result commit together or not at all (its function raising, or the lock taken away while it
ran), and the steps survive on the record between runs; the in-memory store refuses a
transactional step before running anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.records import HistoryStatus, Scheduled
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.errors import LockLostError, TransactionsNotSupportedError
from dogs_mongo import AsyncMongoJobStore
from dogs_testing import InMemoryJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

BOUND = 60.0
RETRY = RetryPolicy(base=timedelta(seconds=0.1), jitter=0)


async def _until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    with anyio.move_on_after(BOUND):
        while not await condition():  # noqa: ASYNC110 - a database read
            await anyio.sleep(0.05)
        return
    pytest.fail(f"not within {BOUND} s: {what}")


async def _run(store: Any, jobs: Jobs, job_id: str) -> list[Any]:
    """Workers until the job has a success row or its record failed; its rows."""

    async def ended() -> bool:
        rows = await store.read_history(job_id=job_id)
        record = await store.get_record(job_id)
        return any(r.status is HistoryStatus.SUCCESS for r in rows) or (
            record is not None and record.status is not None
        )

    async with Workers(store, jobs, poll_interval=0.1, watch_changes=False) as workers:
        await _until(ended, "the job ends")
        await workers.stop()
    return list(reversed(await store.read_history(job_id=job_id)))


async def test_a_transactional_step_that_raises_or_loses_its_lock_writes_nothing(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    database = async_mongo_client[mongo_database_name]
    await database.create_collection("app_payments")
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    jobs = Jobs()
    lost: list[BaseException] = []

    async def charge(session: Any, attempt: int) -> str:
        payments = session.client[mongo_database_name]["app_payments"]
        await payments.insert_one({"attempt": attempt}, session=session)
        if attempt == 1:
            raise ConnectionError("the card network is down")
        if attempt == 2:
            # another execution takes the job over while the transaction is open
            await database["orionjs.jobs_dogs_records"].update_many(
                {}, {"$set": {"lockId": "someone-else"}}
            )
        return f"paid on try {attempt}"

    @jobs.event(max_tries=5, retry=RETRY, lock_time=5)
    async def order(params: None, ctx: JobContext) -> str:
        try:
            return await ctx.step("charge", charge, ctx.tries, transactional=True)
        except LockLostError as error:
            lost.append(error)
            raise

    client = DogsClient(store, jobs)
    outcome = await client.schedule(order)
    assert isinstance(outcome, Scheduled)
    # try 1 raises; try 2 loses its lock (its record then belongs to "someone-else": the
    # operator gives it back); try 3 commits
    async with Workers(store, jobs, poll_interval=0.1, watch_changes=False) as workers:

        async def took_over() -> bool:
            return bool(lost)

        await _until(took_over, "try 2 loses its lock inside the transaction")
        await database["orionjs.jobs_dogs_records"].update_many(
            {}, {"$unset": {"lockId": "", "lockedUntil": ""}}
        )

        async def paid() -> bool:
            rows = await store.read_history(job_id=outcome.id)
            return any(r.status is HistoryStatus.SUCCESS for r in rows)

        await _until(paid, "try 3 commits")
        await workers.stop()
    attempts = [doc["attempt"] async for doc in database["app_payments"].find()]
    assert attempts == [3], "the raising and the fenced-out transactions were rolled back"
    rows = list(reversed(await store.read_history(job_id=outcome.id)))
    assert rows[-1].result == "paid on try 3"


async def test_the_in_memory_store_refuses_a_transactional_step_before_running_it() -> None:
    store = InMemoryJobStore()
    jobs = Jobs()
    calls: list[int] = []
    caught: list[BaseException] = []

    async def charge(session: Any) -> None:
        calls.append(1)

    @jobs.event(max_tries=1)
    async def order(params: None, ctx: JobContext) -> None:
        try:
            await ctx.step("charge", charge, transactional=True)
        except TransactionsNotSupportedError as error:
            caught.append(error)
            raise

    outcome = await DogsClient(store, jobs).schedule(order)
    assert isinstance(outcome, Scheduled)
    await _run(store, jobs, outcome.id)
    assert calls == []
    assert len(caught) == 1
    assert "transactional steps need MongoDB transactions" in str(caught[0])
