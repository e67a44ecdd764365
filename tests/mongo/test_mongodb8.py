"""The MongoDB 8 claim path (sorted ``updateOne`` + read-back by ``lockId``) on a real server.

These run only when ``DOGS_TEST_MONGODB8_URI`` points at a MongoDB 8 server (a replica set);
the session's mongod is 6.0.5, where the fallback path runs. The command documents of this path
are covered without a server in ``test_queries.py`` and ``test_store_unit.py``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from pymongo import AsyncMongoClient

from dogs_core.domain.records import ClaimRequest, JobRecord, NewJob
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q
from dogs_testing.contract import JobStoreContract

ENV = "DOGS_TEST_MONGODB8_URI"
T0 = datetime(2100, 1, 1, tzinfo=UTC)

if not os.environ.get(ENV):
    pytest.skip(f"{ENV} is not set: no MongoDB 8 server to test on", allow_module_level=True)

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]


@pytest.fixture
async def mongo8_client(anyio_backend: object) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(os.environ[ENV], tz_aware=True)
    hello = await client.admin.command("hello")
    assert hello["maxWireVersion"] >= 25, f"{ENV} is not a MongoDB 8 server: {hello}"
    yield client
    await client.close()


@pytest.fixture
async def mongo8_store(
    mongo8_client: AsyncMongoClient[dict[str, Any]],
) -> AsyncIterator[AsyncMongoJobStore]:
    name = f"dogs_test8_{uuid.uuid4().hex[:16]}"
    store = AsyncMongoJobStore(mongo8_client, name)
    await store.setup()
    yield store
    await mongo8_client.drop_database(name)


class TestMongoDB8Contract(JobStoreContract):
    """The whole contract through the sorted-updateOne claim."""

    pytestmark: ClassVar[Any] = pytestmark

    @pytest.fixture
    def store(self, mongo8_store: AsyncMongoJobStore) -> AsyncMongoJobStore:
        return mongo8_store

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, AsyncMongoJobStore)
        await store.records_collection.insert_one(q.document_from_record(record))

    async def test_the_sorted_path_is_in_use(self, store: AsyncJobStore) -> None:
        assert (await store.capabilities()).claim_path == "sorted_update_one"


def _request(now: datetime, lock_for: timedelta = timedelta(seconds=10)) -> ClaimRequest:
    return ClaimRequest(("a",), 0, "globalPriority", now, now + lock_for, new_execution_id())


async def test_sorted_claim_records_staleness_in_the_document(
    mongo8_store: AsyncMongoJobStore,
) -> None:
    job = NewJob(new_record_id(), "a", {"n": 1}, T0 - timedelta(seconds=1), 100, 0)
    await mongo8_store.schedule(job)
    first = await mongo8_store.claim(_request(T0))
    assert first is not None
    assert (first.tries, first.was_stale) == (1, False)
    record = await mongo8_store.get_job(job.id)
    assert record is not None
    assert record.claim_was_stale is False
    second = await mongo8_store.claim(_request(T0 + timedelta(seconds=10)))
    assert second is not None
    assert (second.job_id, second.tries, second.was_stale) == (job.id, 2, True)
    record = await mongo8_store.get_job(job.id)
    assert record is not None
    assert (record.claim_was_stale, record.lock_id) == (True, second.lock_id)


async def test_without_the_lock_id_index_mongodb8_falls_back(
    mongo8_client: AsyncMongoClient[dict[str, Any]],
) -> None:
    name = f"dogs_test8_{uuid.uuid4().hex[:16]}"
    try:
        store = AsyncMongoJobStore(mongo8_client, name)
        await store.setup()
        await store.records_collection.drop_index(q.LOCK_ID_INDEX_NAME)
        fresh = AsyncMongoJobStore(mongo8_client, name)
        fresh._setup_done = True  # as if another process had set up an older index set
        assert (await fresh.capabilities()).claim_path == "find_one_and_update"
    finally:
        await mongo8_client.drop_database(name)
