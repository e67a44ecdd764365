"""The job-store contract over both MongoDB adapters, on a real mongod (a fresh, set-up database
each: an emptied one of the class's pool, see tests/mongo/conftest.py's DatabasePool)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar, cast

import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo.queries import document_from_record
from dogs_testing.contract import (
    ArchiveContract,
    ArchiveUnderTest,
    FollowingContract,
    InspectionContract,
    JobStoreContract,
    SchedulesContract,
    ThreadedArchive,
    UniquenessContract,
    WorkflowContract,
)
from tests.mongo.conftest import PooledDatabase


class TestAsyncMongoJobStoreContract(JobStoreContract):
    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        pooled_database.set_up()
        yield store
        await store.close()

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, AsyncMongoJobStore)
        await store.records_collection.insert_one(document_from_record(record))


class TestSyncMongoJobStoreContract(JobStoreContract):
    """The generated sync adapter, run in worker threads as the runtime runs it."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, ThreadedJobStore)
        sync_store = store.sync_store
        assert isinstance(sync_store, MongoJobStore)
        sync_store.records_collection.insert_one(document_from_record(record))


class TestAsyncMongoArchiveContract(ArchiveContract):
    """Part 10, the optional archive port, over the async adapter."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        await store.setup_archive()
        pooled_database.set_up()
        yield store
        await store.close()

    @pytest.fixture
    def archive(self, store: AsyncMongoJobStore) -> ArchiveUnderTest:
        return cast(ArchiveUnderTest, store)


class TestSyncMongoArchiveContract(ArchiveContract):
    """Part 10 over the generated sync adapter, each archive call in a worker thread."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def sync_store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[MongoJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        store.setup_archive()
        pooled_database.set_up()
        yield store
        store.close()

    @pytest.fixture
    def store(self, sync_store: MongoJobStore) -> ThreadedJobStore:
        return ThreadedJobStore(sync_store)

    @pytest.fixture
    def archive(self, sync_store: MongoJobStore) -> ArchiveUnderTest:
        return cast(ArchiveUnderTest, ThreadedArchive(sync_store))


class TestAsyncMongoFollowingContract(FollowingContract):
    """The optional following role over the async adapter."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        await store.setup_following()
        pooled_database.set_up()
        yield store
        await store.close()


class TestSyncMongoFollowingContract(FollowingContract):
    """The following role over the generated sync adapter, each call in a worker thread."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        store.setup_following()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()


class TestAsyncMongoWorkflowContract(WorkflowContract):
    """The optional workflows role over the async adapter."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        await store.setup_workflows()
        pooled_database.set_up()
        yield store
        await store.close()


class TestSyncMongoWorkflowContract(WorkflowContract):
    """The workflows role over the generated sync adapter, each call in a worker thread."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        store.setup_workflows()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()


class TestAsyncMongoShapingContract(UniquenessContract, SchedulesContract):
    """The optional uniqueness and schedules roles (issue 27) over the async adapter."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        pooled_database.set_up()
        yield store
        await store.close()


class TestAsyncMongoInspectionContract(InspectionContract):
    """The optional inspection role over the async adapter."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        pooled_database.set_up()
        yield store
        await store.close()


class TestSyncMongoShapingContract(UniquenessContract, SchedulesContract):
    """The same over the generated sync adapter, each call in a worker thread."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()


class TestSyncMongoInspectionContract(InspectionContract):
    """The inspection role over the generated sync adapter, in worker threads."""

    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()
