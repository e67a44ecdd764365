"""The adapter contract over the in-memory store, through its one entry point (StoreContract:
every part its roles call for): its async face (asyncio, and trio on a virtual clock) and its
sync face run in threads through ThreadedJobStore."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio.testing

from dogs_core.domain.records import JobRecord
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.contract import PART_ROLES, StoreContract, _roles_of
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore


class TestInMemoryAsyncFace(StoreContract):
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


class TestInMemorySyncFaceInThreads(StoreContract):
    @pytest.fixture
    def store(self) -> ThreadedJobStore:
        return ThreadedJobStore(SyncInMemoryJobStore())

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, ThreadedJobStore)
        sync_store = store.sync_store
        assert isinstance(sync_store, SyncInMemoryJobStore)
        sync_store.insert_record(record)


def test_every_test_of_the_entry_point_belongs_to_a_part_with_roles() -> None:
    """No test of StoreContract runs whatever the store's roles: each is of a part of
    PART_ROLES, and every part of the suite is in StoreContract."""
    names = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert len(names) > 200
    assert all(_roles_of(StoreContract, name) for name in names)
    parts = {klass for klass in StoreContract.__mro__ if klass in PART_ROLES}
    assert parts == set(PART_ROLES)


_PARTIAL_STORE_TEST = """
import pytest
from dogs_core.ports import REQUIRED_ROLES
from dogs_testing import InMemoryJobStore
from dogs_testing.contract import StoreContract


class RequiredRolesOnly(InMemoryJobStore):
    roles = REQUIRED_ROLES  # as a store being written lists only what it has


class TestPartial(StoreContract):
    @pytest.fixture
    def store(self):
        return RequiredRolesOnly()
"""


def test_the_parts_of_roles_a_store_lacks_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "test_partial.py").write_text(_PARTIAL_STORE_TEST)
    chosen = "test_archive_history_in_batches or test_a_beat_writes_the_document or test_claim_"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-k", chosen, "-rs", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert re.search(r"\b\d+ passed", out), out  # the claims part: a required role
    assert re.search(r"\b2 skipped", out), out  # the archive and registry parts: not listed
    assert "the store does not list the role(s) archive in its roles" in out
    assert "the store does not list the role(s) registry in its roles" in out
