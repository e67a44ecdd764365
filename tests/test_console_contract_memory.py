"""The optional roles of the operator's console (bulk, registry, audit) over the in-memory
store: its async face, and its sync face run in threads through ThreadedJobStore."""

from __future__ import annotations

import pytest

from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.contract.audit import AuditContract
from dogs_testing.contract.bulk import BulkContract
from dogs_testing.contract.registry import RegistryContract
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore


class _Async:
    @pytest.fixture
    def store(self) -> InMemoryJobStore:
        return InMemoryJobStore()


class _Threaded:
    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())


class TestBulkAsyncFace(_Async, BulkContract):
    pass


class TestBulkSyncFaceInThreads(_Threaded, BulkContract):
    pass


class TestRegistryAsyncFace(_Async, RegistryContract):
    pass


class TestRegistrySyncFaceInThreads(_Threaded, RegistryContract):
    pass


class TestAuditAsyncFace(_Async, AuditContract):
    pass


class TestAuditSyncFaceInThreads(_Threaded, AuditContract):
    pass
