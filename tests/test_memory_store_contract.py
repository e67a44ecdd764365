"""The adapter contract over the in-memory store: its async face (asyncio, and trio on a virtual
clock) and its sync face run in threads through ThreadedJobStore."""

from __future__ import annotations

from typing import cast

import pytest
import trio.testing

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
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
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore


class TestInMemoryAsyncFace(JobStoreContract):
    # trio on a virtual clock, as tests of jobs run it (dogs_virtual_clock): the feeds'
    # heartbeats then cost no real second; asyncio keeps the real clock.
    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request: pytest.FixtureRequest) -> object:
        if request.param == "trio":
            return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})
        return request.param

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


class TestInMemoryArchiveAsyncFace(ArchiveContract):
    """Part 10, the optional archive port, over the async face."""

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()

    @pytest.fixture
    def archive(self, store: InMemoryJobStore) -> ArchiveUnderTest:
        return cast(ArchiveUnderTest, store)


class TestInMemoryArchiveSyncFaceInThreads(ArchiveContract):
    """Part 10 over the sync face, each archive call in a worker thread."""

    @pytest.fixture
    def sync_store(self) -> SyncInMemoryJobStore:
        return SyncInMemoryJobStore()

    @pytest.fixture
    def store(self, sync_store: SyncInMemoryJobStore) -> ThreadedJobStore:
        return ThreadedJobStore(sync_store)

    @pytest.fixture
    def archive(self, sync_store: SyncInMemoryJobStore) -> ArchiveUnderTest:
        return cast(ArchiveUnderTest, ThreadedArchive(sync_store))


class TestInMemoryFollowingAsyncFace(FollowingContract):
    """The optional following role over the async face."""

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()


class TestInMemoryInspection(InspectionContract):
    """The optional inspection role over the async face."""

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()


class TestInMemoryFollowingSyncFaceInThreads(FollowingContract):
    """The following role over the sync face, each call in a worker thread."""

    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())


class TestInMemoryWorkflowsAsyncFace(WorkflowContract):
    """The optional workflows role over the async face."""

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()


class TestInMemoryWorkflowsSyncFaceInThreads(WorkflowContract):
    """The workflows role over the sync face, each call in a worker thread."""

    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())


class TestInMemoryShapingAsyncFace(UniquenessContract, SchedulesContract):
    """The optional uniqueness and schedules roles (issue 27) over the async face."""

    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()


class TestInMemoryShapingSyncFaceInThreads(UniquenessContract, SchedulesContract):
    """The same over the sync face, each call in a worker thread."""

    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())
