"""The MongoDB 8 claim path (sorted ``updateOne`` + read-back by ``lockId``) on a server of the
MongoDB 8 dialect.

The session's mongod is 6.0.5, where the fallback path runs. These tests run on
``$DOGS_TEST_MONGODB8_URI`` (a real MongoDB 8 replica set) when it is set, otherwise on the
SecantusDB emulator started by the ``mongodb8_server`` fixture (tests/mongo/conftest.py). The
emulator speaks the dialect (maxWireVersion 27, ``update`` with ``sort``) but its sorted update is
not atomic under concurrency, so on it the contract's races are skipped: they prove the path only
on a real MongoDB 8. The command documents of this path are also covered without a server in
``test_queries.py`` and ``test_store_unit.py``.
"""

from __future__ import annotations

import inspect
import re
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

from .conftest import ENV_MONGODB8_URI, MongoDB8Server

T0 = datetime(2100, 1, 1, tzinfo=UTC)

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

#: What a contract test that runs calls at once contains: a task group (directly or through the
#: contract's ``_at_once`` and ``_both`` helpers) or a gather.
_RUNS_CALLS_AT_ONCE = re.compile(r"create_task_group|start_soon|\b_at_once\(|\b_both\(|gather\(")


def _races(contract: type) -> frozenset[str]:
    """The contract's tests that run store calls concurrently, found in their source so that a
    race added to the contract later is skipped on the emulator too."""
    return frozenset(
        name
        for name, member in inspect.getmembers(contract, inspect.isfunction)
        if name.startswith("test_") and _RUNS_CALLS_AT_ONCE.search(inspect.getsource(member))
    )


RACES = _races(JobStoreContract)
NOT_ATOMIC = "SecantusDB's sorted update is not atomic under concurrency"
#: Contract tests that prove nothing of the MongoDB 8 path and are too slow on the emulator.
TOO_SLOW_ON_THE_EMULATOR = {
    "test_claim_many_of_more_than_a_thousand": (
        "claim_many takes the same path on every server version (it runs on mongod 6 in "
        "test_contract.py) and its 1,200-record bulk write takes about a minute on SecantusDB"
    ),
}


def test_the_races_are_found() -> None:
    """The source scan finds the races the emulator is known to lose, and nothing else is
    skipped than races and the slow cases."""
    known = {
        "test_concurrent_claimers_claim_each_job_exactly_once",
        "test_concurrent_claim_many_calls_claim_each_job_exactly_once",
        "test_delete_record_against_a_claim_in_flight",
        "test_delete_record_during_a_renewal",
        "test_reschedule_racing_a_claim",
        "test_two_operators_deleting_at_once",
        "test_concurrent_pauses_change_it_once",
    }
    assert known <= RACES
    assert "test_release_makes_the_record_claimable_at_once" not in RACES
    assert "test_claim_many_returns_what_claims_in_a_row_return" not in RACES
    assert set(TOO_SLOW_ON_THE_EMULATOR) <= {n for n in dir(JobStoreContract) if n[:5] == "test_"}


@pytest.fixture
async def mongo8_client(
    mongodb8_server: MongoDB8Server, anyio_backend: object
) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    uri = mongodb8_server.uri
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    hello = await client.admin.command("hello")
    assert hello["maxWireVersion"] >= 25, f"{uri} is not a MongoDB 8 server: {hello}"
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

    @pytest.fixture(autouse=True)
    def _one_call_at_a_time_on_the_emulator(
        self, request: pytest.FixtureRequest, mongodb8_server: MongoDB8Server
    ) -> None:
        """On SecantusDB, no race (its sorted update can let two claimers take one record) and
        no case that only costs time; a real MongoDB 8 runs them all."""
        if not mongodb8_server.emulator:
            return
        name = request.function.__name__
        if name in RACES:
            pytest.skip(f"{NOT_ATOMIC}; runs on a real MongoDB 8 ({ENV_MONGODB8_URI})")
        if name in TOO_SLOW_ON_THE_EMULATOR:
            pytest.skip(TOO_SLOW_ON_THE_EMULATOR[name])

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
    await mongo8_store.insert_job(job)
    first = await mongo8_store.claim(_request(T0))
    assert first is not None
    assert (first.tries, first.was_stale) == (1, False)
    record = await mongo8_store.get_record(job.id)
    assert record is not None
    assert record.claim_was_stale is False
    second = await mongo8_store.claim(_request(T0 + timedelta(seconds=10)))
    assert second is not None
    assert (second.job_id, second.tries, second.was_stale) == (job.id, 2, True)
    record = await mongo8_store.get_record(job.id)
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
