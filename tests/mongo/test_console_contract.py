"""The optional roles of the operator's console (bulk, registry, audit) over both MongoDB
adapters on a real mongod (a pooled, set-up database each: tests/mongo/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_testing.contract.audit import AuditContract
from dogs_testing.contract.bulk import BulkContract
from dogs_testing.contract.registry import RegistryContract
from tests.mongo.conftest import PooledDatabase


class _Async:
    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    async def store(
        self, async_mongo_client: AsyncMongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> AsyncIterator[AsyncMongoJobStore]:
        store = AsyncMongoJobStore(async_mongo_client, pooled_database.name)
        await store.setup()
        await store.setup_registry()
        await store.setup_audit()
        pooled_database.set_up()
        yield store
        await store.close()


class _Sync:
    pytestmark: ClassVar[Any] = [pytest.mark.anyio, pytest.mark.mongo]

    @pytest.fixture
    def store(
        self, sync_mongo_client: MongoClient[dict[str, Any]], pooled_database: PooledDatabase
    ) -> Iterator[ThreadedJobStore]:
        store = MongoJobStore(sync_mongo_client, pooled_database.name)
        store.setup()
        store.setup_registry()
        store.setup_audit()
        pooled_database.set_up()
        yield ThreadedJobStore(store)
        store.close()


class TestBulkAsyncMongo(_Async, BulkContract):
    pass


class TestBulkSyncMongo(_Sync, BulkContract):
    pass


class TestRegistryAsyncMongo(_Async, RegistryContract):
    pass


class TestRegistrySyncMongo(_Sync, RegistryContract):
    pass


class TestAuditAsyncMongo(_Async, AuditContract):
    pass


class TestAuditSyncMongo(_Sync, AuditContract):
    pass
