"""ThreadedJobStore: a sync store's calls run in worker threads, bounded by the limiter, and a
call that has started completes and returns even when its caller is cancelled meanwhile. (Every
method's forwarding is covered by the contract suite over the sync in-memory store.)"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from dogs_core.domain.records import ClaimedJob, ClaimRequest, JobRecord, NewJob, Scheduled
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.memory import SyncInMemoryJobStore

pytestmark = pytest.mark.anyio

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def new_job() -> NewJob:
    return NewJob(
        id=new_record_id(), job_name="a", params=None, next_run_at=T0, priority=1, partition=0
    )


def claim_request() -> ClaimRequest:
    return ClaimRequest(
        job_names=("a",),
        partition=0,
        hint="byJobName",
        now=T0,
        locked_until=T0 + timedelta(minutes=1),
        lock_id=new_execution_id(),
    )


class ThreadRecordingStore(SyncInMemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()
        self.active = 0
        self.max_active = 0
        self._counter_lock = threading.Lock()

    def get_record(self, job_id: str) -> JobRecord | None:
        with self._counter_lock:
            self.threads.add(threading.get_ident())
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(0.005)
        with self._counter_lock:
            self.active -= 1
        return super().get_record(job_id)


async def test_calls_run_in_worker_threads_bounded_by_the_limiter() -> None:
    sync_store = ThreadRecordingStore()
    store: AsyncJobStore = ThreadedJobStore(sync_store, anyio.CapacityLimiter(1))
    assert isinstance(store, AsyncJobStore)
    job = new_job()
    assert await store.insert_job(job) == Scheduled(job.id)
    job_id = job.id
    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(store.get_record, job_id)
    assert sync_store.max_active == 1
    assert threading.get_ident() not in sync_store.threads


class GatedClaimStore(SyncInMemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        self.entered.set()
        self.release.wait(10)
        return super().claim(request)


async def test_a_started_call_completes_when_its_caller_is_cancelled() -> None:
    sync_store = GatedClaimStore()
    sync_store.insert_job(new_job())
    store = ThreadedJobStore(sync_store)
    assert store.sync_store is sync_store
    request = claim_request()
    results: list[ClaimedJob | None] = []
    scope = anyio.CancelScope()

    async def claimer() -> None:
        with scope:
            results.append(await store.claim(request))
            await anyio.lowlevel.checkpoint()  # the cancellation is delivered here

    async with anyio.create_task_group() as tg:
        tg.start_soon(claimer)
        await anyio.to_thread.run_sync(sync_store.entered.wait)
        scope.cancel()
        sync_store.release.set()
    assert scope.cancelled_caught
    [claimed] = results  # the claim was neither lost nor left locked behind the caller's back
    assert claimed is not None
    assert claimed.lock_id == request.lock_id
