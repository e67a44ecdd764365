"""Numbers a Node worker can read, on the real mongod (issue 16 item 3).

A priority or params int beyond +/-(2**53 - 1) is refused before anything is written (the
checks of tests/runtime/test_node_safe_ints.py, on both clients). What is written is checked by
its BSON type (``$type``): an int that fits 32 bits is an ``int``, a larger safe int an ``long``
(int64), which Node's driver, with ``promoteLongs`` on (its default), returns as a JavaScript
number because it is within ``Number.MAX_SAFE_INTEGER``. A ``bson.Int64`` in params (the opt-out
of a Python-only fleet) is a ``long`` of any 64-bit value. A handler result Node could not read
is a ``string`` (its repr) in history. And a ``long`` or a ``double`` priority written by someone
else (a Node worker writes a number beyond 32 bits as a double) still reads as an int.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from bson import Int64
from typer.testing import CliRunner

from dogs_core import DogsClient, HistoryStatus, Scheduled, SyncDogsClient, Workers
from dogs_core.domain.validation import MAX_SAFE_INTEGER, MIN_SAFE_INTEGER
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from tests.cli.test_cli import REGISTRY, UNREACHABLE, assert_clean_error, invoke
from tests.runtime.test_client import Awaited
from tests.runtime.test_node_safe_ints import BIG_RESULT, CHECKS, SAFE_RESULT, registry

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

GUARD = 60


@pytest.fixture(params=["async", "sync"])
def client(
    request: pytest.FixtureRequest, async_store: AsyncMongoJobStore, sync_store: MongoJobStore
) -> Any:
    if request.param == "async":
        return DogsClient(async_store, registry())
    return Awaited(SyncDogsClient(sync_store, registry()))


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_unsafe_ints_are_refused_and_nothing_is_written(
    client: Any, check: Any, async_store: AsyncMongoJobStore
) -> None:
    await check(client)
    unsafe = {
        "$or": [{"priority": {"$gt": MAX_SAFE_INTEGER}}, {"priority": {"$lt": -MAX_SAFE_INTEGER}}]
    }
    assert await async_store.records_collection.count_documents(unsafe) == 0


async def _bson_type(store: AsyncMongoJobStore, job_id: str, field: str) -> str:
    pipeline: list[dict[str, Any]] = [
        {"$match": {"_id": job_id}},
        {"$project": {"t": {"$type": f"${field}"}}},
    ]
    (row,) = await (await store.records_collection.aggregate(pipeline)).to_list()
    return str(row["t"])


async def test_safe_ints_are_stored_as_int_or_long_which_node_reads_as_numbers(
    async_store: AsyncMongoJobStore,
) -> None:
    params = {"small": 5, "mid": 2**31, "max": MAX_SAFE_INTEGER, "min": MIN_SAFE_INTEGER}
    client = DogsClient(async_store, registry())
    outcome = await client.schedule("mail", params, priority=MAX_SAFE_INTEGER)
    assert isinstance(outcome, Scheduled)
    types = {
        field: await _bson_type(async_store, outcome.id, field)
        for field in ("priority", "params.small", "params.mid", "params.max", "params.min")
    }
    assert types == {
        "priority": "long",
        "params.small": "int",
        "params.mid": "long",
        "params.max": "long",
        "params.min": "long",
    }
    record = await client.get_job(outcome.id)
    assert record is not None
    assert (record.priority, record.params) == (MAX_SAFE_INTEGER, params)


async def test_a_bson_int64_in_params_is_stored_as_a_long_and_reads_back(
    async_store: AsyncMongoJobStore,
) -> None:
    client = DogsClient(async_store, registry())
    outcome = await client.schedule("mail", {"n": Int64(2**62), "top": Int64(2**63 - 1)})
    assert isinstance(outcome, Scheduled)
    assert await _bson_type(async_store, outcome.id, "params.n") == "long"
    record = await client.get_job(outcome.id)
    assert record is not None
    assert record.params == {"n": 2**62, "top": 2**63 - 1}


@pytest.mark.parametrize("stored", [Int64(2**62), Int64(2**63 - 1), float(2**40), 2**40])
async def test_a_priority_written_by_someone_else_reads_as_an_int(
    async_store: AsyncMongoJobStore, stored: Any
) -> None:
    """The values that broke a Node worker, written straight to the collection (as an older
    version of Dogs for Python did), and a double as a Node worker writes a large number."""
    client = DogsClient(async_store, registry())
    outcome = await client.schedule("mail")
    assert isinstance(outcome, Scheduled)
    await async_store.records_collection.update_one(
        {"_id": outcome.id}, {"$set": {"priority": stored}}
    )
    record = await client.get_job(outcome.id)
    assert record is not None
    assert (record.priority, type(record.priority)) == (int(stored), int)
    (listed,) = await client.find_jobs("mail")
    assert listed.priority == int(stored)


async def test_a_result_node_cannot_read_is_a_string_in_history(
    async_store: AsyncMongoJobStore,
) -> None:
    jobs = registry()
    client = DogsClient(async_store, jobs)
    await client.schedule("totals", {"big": True})
    await client.schedule("totals", {"big": False})
    async with Workers(async_store, jobs, poll_interval=0.05, watch_changes=False) as workers:
        with anyio.fail_after(GUARD):
            while await async_store.history_collection.count_documents({}) < 2:  # noqa: ASYNC110 - the rows are in the database
                await anyio.sleep(0.05)
        await workers.stop()
    history = async_store.history_collection
    assert await history.count_documents({"result": {"$type": "string"}}) == 1
    assert await history.count_documents({"result.total": {"$type": "long"}}) == 1
    rows = await client.get_executions("totals")
    assert sorted((row.status, str(row.result)) for row in rows) == sorted(
        [(HistoryStatus.SUCCESS, repr(BIG_RESULT)), (HistoryStatus.SUCCESS, str(SAFE_RESULT))]
    )
    await history.update_many({}, {"$set": {"priority": Int64(2**62)}})
    assert {row.priority for row in await client.get_executions("totals")} == {2**62}


@pytest.mark.parametrize("value", [2**62, 2**63 - 1, 2**53, -(2**53)])
def test_the_cli_refuses_an_unsafe_priority_before_connecting(value: int) -> None:
    env: dict[str, str | None] = {"DOGS_MONGODB_URI": UNREACHABLE}
    result = invoke(CliRunner(), "schedule", REGISTRY, "nap", "--priority", str(value), env=env)
    assert_clean_error(result, f"--priority {value}:", "MAX_SAFE_INTEGER")


def test_the_cli_writes_nothing_for_an_unsafe_priority_or_param(
    mongodb_uri: str, mongo_database_name: str, sync_store: MongoJobStore
) -> None:
    runner = CliRunner()
    env: dict[str, str | None] = {
        "DOGS_MONGODB_URI": mongodb_uri,
        "DOGS_MONGODB_DATABASE": mongo_database_name,
    }
    result = invoke(runner, "schedule", REGISTRY, "nap", "--priority", str(2**62), env=env)
    assert_clean_error(result, "--priority", "MAX_SAFE_INTEGER")
    params = f'{{"seconds": 0, "n": {2**53}}}'
    result = invoke(runner, "schedule", REGISTRY, "nap", "--params", params, env=env)
    assert_clean_error(result, "params.n=9007199254740992", "as a string")
    assert list(sync_store.find_records()) == []
    scheduled = invoke(
        runner, "schedule", REGISTRY, "nap", "--priority", str(MAX_SAFE_INTEGER), env=env
    )
    assert scheduled.exit_code == 0, scheduled.output
    job_id = scheduled.stdout.split()[1]
    moved = invoke(runner, "jobs", "reschedule", job_id, "--priority", str(2**63 - 1), env=env)
    assert_clean_error(moved, f"--priority {2**63 - 1}:", "MAX_SAFE_INTEGER")
    record = sync_store.get_record(job_id)
    assert record is not None
    assert record.priority == MAX_SAFE_INTEGER
