"""The job-store contract over both MongoDB adapters, through its one entry point (StoreContract:
every part their roles call for), on a real mongod (a fresh, set-up database each: an emptied
one of the class's pool, see tests/mongo/conftest.py's DatabasePool)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo.queries import document_from_record
from dogs_testing.contract import StoreContract
from tests.mongo.conftest import PooledDatabase


async def _set_up_async(store: AsyncMongoJobStore) -> None:
    """Every role's collections and indexes: the store lists them all."""
    await store.setup()
    await store.setup_archive()
    await store.setup_following()
    await store.setup_workflows()
    await store.setup_registry()
    await store.setup_audit()


def _set_up_sync(store: MongoJobStore) -> None:
    store.setup()
    store.setup_archive()
    store.setup_following()
    store.setup_workflows()
    store.setup_registry()
    store.setup_audit()


class TestAsyncMongoJobStoreContract(StoreContract):
    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await _set_up_async(store)
        pooled_database.set_up()
        yield store
        await store.close()

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, AsyncMongoJobStore)
        await store.records_collection.insert_one(document_from_record(record))


class TestSyncMongoJobStoreContract(StoreContract):
    """The generated sync adapter, run in worker threads as the runtime runs it."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        _set_up_sync(store)
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, ThreadedJobStore)
        sync_store = store.sync_store
        assert isinstance(sync_store, MongoJobStore)
        sync_store.records_collection.insert_one(document_from_record(record))
