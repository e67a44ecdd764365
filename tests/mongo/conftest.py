"""Fixtures of the MongoDB adapter tests: stores on a fresh database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_mongo import AsyncMongoJobStore, MongoJobStore


@pytest.fixture
def anyio_backend() -> str:
    """PyMongo's async client runs on asyncio only."""
    return "asyncio"


@pytest.fixture
async def async_store(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> AsyncIterator[AsyncMongoJobStore]:
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    yield store
    await store.close()


@pytest.fixture
def sync_store(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> Iterator[MongoJobStore]:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    yield store
    store.close()
