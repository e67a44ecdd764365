"""The adapter contract over the in-memory store: its async face (asyncio and trio) and its sync
face run in threads through ThreadedJobStore."""

from __future__ import annotations

import pytest

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.threaded import ThreadedJobStore
from dogs_testing.contract import JobStoreContract
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore


class TestInMemoryAsyncFace(JobStoreContract):
    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        backend: str = request.param
        return backend

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, InMemoryJobStore)
        await store.insert_record(record)


class TestInMemorySyncFaceInThreads(JobStoreContract):
    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, ThreadedJobStore)
        sync_store = store.sync_store
        assert isinstance(sync_store, SyncInMemoryJobStore)
        sync_store.insert_record(record)
