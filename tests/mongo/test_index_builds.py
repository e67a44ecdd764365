"""Index builds made explicit, on the real mongod: setup logs each build on a non-empty
collection and waits for builds another process has in progress, and claims never carry a hint
whose index does not exist (the other claim index, or none, with one WARNING per index)."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import OperationFailure
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

import dogs_mongo._async.claims as async_claims
from dogs_core.domain.records import ClaimRequest, NewJob
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo._async.indexes import list_indexes

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

NOW = datetime(2100, 1, 1, tzinfo=UTC)
BY_JOB_NAME = q.RECORD_INDEXES[1].name  # the byJobName hint's index
GLOBAL_PRIORITY = q.RECORD_INDEXES[0].name  # the globalPriority hint's index
LOGGER = "dogs.mongo.store"


class Recorder(CommandListener):
    """The hint of every claim command a client sends (``None``: no hint)."""

    def __init__(self) -> None:
        self.claim_hints: list[Any] = []
        self.failures: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:
        command = event.command
        if event.command_name == "findAndModify":
            self.claim_hints.append(command.get("hint"))
        elif event.command_name == "find" and "jobName" in command.get("filter", {}):
            self.claim_hints.append(command.get("hint"))  # claim_many's candidates

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        if event.command_name != "listIndexes":  # setup lists collections not created yet
            self.failures.append(event.command_name)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def store(
    mongodb_uri: str, mongo_database_name: str, recorder: Recorder
) -> AsyncIterator[AsyncMongoJobStore]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, event_listeners=[recorder]
    )
    store = AsyncMongoJobStore(client, mongo_database_name, owns_client=True)
    await store.setup()
    yield store
    await store.close()


def _new_job(partition: int = 0) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name="a",
        params=None,
        next_run_at=NOW - timedelta(seconds=1),
        priority=0,
        partition=partition,
    )


def _request(hint: str, partition: int = 0) -> ClaimRequest:
    return ClaimRequest(
        job_names=("a",),
        partition=partition,
        hint=hint,
        now=NOW,
        locked_until=NOW + timedelta(minutes=1),
        lock_id=new_execution_id(),
    )


async def _schedule(store: AsyncMongoJobStore, count: int) -> None:
    for _ in range(count):
        await store.insert_job(_new_job())


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "claim index" in record.getMessage()
    ]


async def test_claims_work_when_a_claim_index_is_dropped_after_setup(
    store: AsyncMongoJobStore, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await _schedule(store, 4)
    await store.capabilities()  # detection saw both claim indexes
    await store.records_collection.drop_index(BY_JOB_NAME)

    first = await store.claim(_request("byJobName"))
    second = await store.claim(_request("byJobName"))
    batch = await store.claim_many([_request("byJobName"), _request("byJobName")])

    assert first is not None
    assert second is not None
    assert len(batch) == 2
    assert len({first.job_id, second.job_id, *(job.job_id for job in batch)}) == 4
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert BY_JOB_NAME in warnings[0]
    assert "the hint globalPriority" in warnings[0]
    # One refused claim (the one that found the index gone); the others hinted the other index.
    assert recorder.failures == ["findAndModify"]
    assert recorder.claim_hints[-3:] == [dict(q.hint_spec("globalPriority"))] * 3


async def test_claims_carry_no_hint_when_both_claim_indexes_are_missing(
    store: AsyncMongoJobStore, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await _schedule(store, 3)
    await store.records_collection.drop_index(BY_JOB_NAME)
    await store.records_collection.drop_index(GLOBAL_PRIORITY)

    await store.capabilities()  # detection finds both missing: no claim is ever refused
    claimed = [await store.claim(_request(hint)) for hint in ("byJobName", "globalPriority")]
    batch = await store.claim_many([_request("globalPriority")])

    assert all(job is not None for job in claimed)
    assert len(batch) == 1
    assert recorder.failures == []
    assert recorder.claim_hints == [None, None, None]
    assert len(_warnings(caplog)) == 2
    assert any("claims asking for byJobName use no hint" in line for line in _warnings(caplog))


async def test_a_claim_index_that_is_back_is_hinted_again(
    store: AsyncMongoJobStore,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await _schedule(store, 2)
    await store.records_collection.drop_index(GLOBAL_PRIORITY)
    await store.capabilities()
    assert await store.claim(_request("globalPriority")) is not None
    assert recorder.claim_hints[-1] == dict(q.hint_spec("byJobName"))

    spec = q.RECORD_INDEXES[0]
    await store.records_collection.create_index(list(spec.keys), **spec.create_options())
    monkeypatch.setattr(async_claims, "CLAIM_INDEX_RECHECK_SECONDS", 0.0)
    assert await store.claim(_request("globalPriority")) is not None

    assert recorder.claim_hints[-1] == dict(q.hint_spec("globalPriority"))
    assert any("is ready: claims use the hint globalPriority again" in r for r in caplog.messages)


def test_the_sync_store_falls_back_too(
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    store.capabilities()
    job = _new_job()
    store.insert_job(job)
    store.records_collection.drop_index(BY_JOB_NAME)

    claimed = store.claim_many([_request("byJobName")])

    assert [c.job_id for c in claimed] == [job.id]
    assert len(_warnings(caplog)) == 1


def _raw_documents(count: int) -> list[dict[str, Any]]:
    return [q.document_from_new_job(_new_job(partition=i % 4)) for i in range(count)]


def _build_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.INFO and "index" in record.getMessage()
    ]


async def test_setup_logs_each_build_on_a_non_empty_collection(
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    database = async_mongo_client[mongo_database_name]
    await database[q.DEFAULT_RECORDS_COLLECTION].insert_many(_raw_documents(50))

    await AsyncMongoJobStore(async_mongo_client, mongo_database_name).setup()

    lines = _build_lines(caplog)
    records = q.DEFAULT_RECORDS_COLLECTION
    building = [line for line in lines if line.startswith("dogs: building index")]
    assert len(building) == 1  # a new collection: one createIndexes for all
    assert f"on {records} (about 50 documents): claims start when it is ready" in building[0]
    assert all(spec.name in building[0] for spec in q.RECORD_INDEXES)
    assert any(line.endswith(" s") and f"on {records} ready in" in line for line in lines)
    # The empty history and controls collections get their indexes without a word at INFO.
    assert not any(q.DEFAULT_HISTORY_COLLECTION in line for line in lines)


async def test_setup_logs_one_missing_index_built_on_a_non_empty_collection(
    async_store: AsyncMongoJobStore, caplog: pytest.LogCaptureFixture
) -> None:
    await async_store.records_collection.insert_many(_raw_documents(10))
    await async_store.records_collection.drop_index(GLOBAL_PRIORITY)
    caplog.set_level(logging.INFO, logger=LOGGER)

    fresh = AsyncMongoJobStore(
        async_store.records_collection.database.client, async_store.database_name
    )
    await fresh.setup()

    lines = _build_lines(caplog)
    assert lines[0] == (
        f"dogs: building index {GLOBAL_PRIORITY} on {q.DEFAULT_RECORDS_COLLECTION} "
        "(about 10 documents): claims start when it is ready"
    )
    assert lines[1].startswith(
        f"dogs: index {GLOBAL_PRIORITY} on {q.DEFAULT_RECORDS_COLLECTION} ready in"
    )
    assert GLOBAL_PRIORITY in (await list_indexes(async_store.records_collection)).ready


async def test_setup_waits_for_a_build_another_process_has_in_progress(
    async_store: AsyncMongoJobStore,
    sync_mongo_client: MongoClient[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """listIndexes shows a build in progress like a ready index, while a hint on it fails: setup
    sees it as in progress, says so and waits for it; only then may claims hint it."""
    await async_store.records_collection.insert_many(_raw_documents(10))
    await async_store.records_collection.drop_index(GLOBAL_PRIORITY)
    admin = sync_mongo_client.admin
    try:
        admin.command("configureFailPoint", "hangAfterStartingIndexBuild", mode="alwaysOn")
    except OperationFailure as error:
        pytest.skip(f"the server has no test commands (configureFailPoint): {error}")
    spec = q.RECORD_INDEXES[0]
    other = sync_mongo_client[async_store.database_name][q.DEFAULT_RECORDS_COLLECTION]
    builder = threading.Thread(
        target=lambda: other.create_index(list(spec.keys), **spec.create_options())
    )
    try:
        builder.start()
        with anyio.fail_after(30):
            while not await _building(async_store, GLOBAL_PRIORITY):  # noqa: ASYNC110 - a poll
                await anyio.sleep(0.05)
        caplog.set_level(logging.INFO, logger=LOGGER)
        fresh = AsyncMongoJobStore(
            async_store.records_collection.database.client, async_store.database_name
        )
        async with anyio.create_task_group() as group:
            group.start_soon(fresh.setup)
            with anyio.fail_after(30):
                while not any("being built by another" in m for m in caplog.messages):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            admin.command("configureFailPoint", "hangAfterStartingIndexBuild", mode="off")
    finally:
        admin.command("configureFailPoint", "hangAfterStartingIndexBuild", mode="off")
        builder.join(30)

    lines = _build_lines(caplog)
    assert lines[0] == (
        f"dogs: index {GLOBAL_PRIORITY} on {q.DEFAULT_RECORDS_COLLECTION} (about 10 documents) "
        "is being built by another process: claims start when it is ready"
    )
    assert lines[1].startswith(f"dogs: index {GLOBAL_PRIORITY} on")
    listing = await list_indexes(async_store.records_collection)
    assert GLOBAL_PRIORITY in listing.ready
    assert not listing.building


async def _building(store: AsyncMongoJobStore, name: str) -> bool:
    return name in (await list_indexes(store.records_collection)).building
