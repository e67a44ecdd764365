"""The in-memory store's change feeds beyond the contract: writes from other threads wake the
async face (asyncio and trio), heartbeats follow a virtual clock and are left out for a consumer
without deadlines (only on the async face), a burst is one batch, closing
a feed unsubscribes it, the pause feed is woken by the pauses and resumes that changed
something (of the other face too), and ThreadedJobStore advances and closes a sync feed in
threads."""

from __future__ import annotations

import threading
from collections.abc import Generator
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
import pytest
import trio.testing

from dogs_core.domain.feeds import FEED_HEARTBEAT_SECONDS
from dogs_core.domain.records import HistoryRecord, NewJob
from dogs_core.domain.wakeups import RecordChange
from dogs_core.ids import new_record_id
from dogs_core.runtime.plumbing.watching import without_heartbeats
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.contract.base import _history
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore

pytestmark = pytest.mark.anyio

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SAFETY = 30.0


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def new_job(name: str = "a", partition: int = 0) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params=None,
        next_run_at=T0,
        priority=1,
        partition=partition,
    )


async def test_a_write_from_another_thread_wakes_the_async_face() -> None:
    store = InMemoryJobStore()
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []
        job = new_job(partition=3)
        thread = threading.Thread(target=store.sync.insert_job, args=(job,))
        thread.start()
        changes: list[RecordChange] = []
        with anyio.fail_after(SAFETY):
            while not changes:
                changes.extend(await feed.__anext__())
        thread.join()
    assert changes == [RecordChange(job_name="a", partition=3, next_run_at=T0)]


async def test_a_burst_is_one_batch_and_other_names_are_left_out() -> None:
    store = InMemoryJobStore()
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []
        await store.insert_jobs([new_job(), new_job("b"), new_job(), new_job()])
        with anyio.fail_after(SAFETY):
            batch = await feed.__anext__()
    assert [change.job_name for change in batch] == ["a", "a", "a"]


async def test_closing_a_feed_unsubscribes_it() -> None:
    store = InMemoryJobStore()
    assert not store.sync._feeds.watched
    async with aclosing(store.watch_history()) as feed:
        assert await feed.__anext__() == []
        assert store.sync._feeds.watched
    assert not store.sync._feeds.watched
    await store.write_history_many([_history("e1")])  # nobody listens: nothing kept


def test_the_sync_face_is_a_generator_with_heartbeats() -> None:
    store = SyncInMemoryJobStore()
    feed = store.watch_history(job_names=["a"])
    assert next(feed) == []
    row = _history("e1")
    writer = threading.Thread(target=store.write_history_many, args=([row],))
    writer.start()
    writer.join()
    assert next(feed) == [row]
    assert next(feed) == []  # a heartbeat after FEED_HEARTBEAT_SECONDS of nothing
    feed.close()
    assert not store._feeds.watched


async def test_a_pause_from_another_thread_wakes_the_async_pause_feed() -> None:
    store = InMemoryJobStore()
    async with aclosing(store.watch_pauses()) as feed:
        assert await feed.__anext__() == []
        assert store.sync._feeds.watched

        def pause_twice_then_resume() -> None:
            assert store.sync.set_paused("a", True, now=T0)
            assert not store.sync.set_paused("a", True, now=T0)  # no change: not offered
            assert store.sync.set_paused("a", False, now=T0)

        thread = threading.Thread(target=pause_twice_then_resume)
        thread.start()
        names: list[str] = []
        with anyio.fail_after(SAFETY):
            while len(names) < 2:
                names.extend(await feed.__anext__())
        thread.join()
    assert names == ["a", "a"]
    assert not store.sync._feeds.watched


def test_the_sync_pause_feed_is_a_generator_with_heartbeats() -> None:
    store = SyncInMemoryJobStore()
    feed = store.watch_pauses()
    assert next(feed) == []
    assert not store.set_paused("a", False, now=T0)  # not paused: nothing to report
    assert next(feed) == []  # a heartbeat
    assert store.set_paused("*", True, now=T0)
    assert store.set_paused("b", True, now=T0)
    assert next(feed) == ["*", "b"]  # what came since the last batch, in one batch
    feed.close()
    assert not store._feeds.watched


@pytest.mark.parametrize(
    "anyio_backend", [("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})]
)
async def test_heartbeats_follow_a_virtual_clock() -> None:
    store = InMemoryJobStore()
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []
        for _ in range(3600):  # an hour of virtual time, no real time
            start = anyio.current_time()
            assert await feed.__anext__() == []
            assert anyio.current_time() - start >= FEED_HEARTBEAT_SECONDS


@pytest.mark.parametrize(
    "anyio_backend", [("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})]
)
async def test_a_consumer_without_deadlines_gets_no_heartbeats() -> None:
    store = InMemoryJobStore()

    async def schedule_in_an_hour() -> None:
        await anyio.sleep(3600)
        await store.insert_job(new_job())

    async with aclosing(store.watch_records(["a"])) as feed:
        with without_heartbeats():
            assert await feed.__anext__() == []  # the open is owed all the same
            start = anyio.current_time()
            async with anyio.create_task_group() as group:
                group.start_soon(schedule_in_an_hour)
                batch = await feed.__anext__()
            assert batch == [RecordChange(job_name="a", partition=0, next_run_at=T0)]
            assert anyio.current_time() - start >= 3600  # no [] in between
        start = anyio.current_time()  # outside it, the heartbeats are back
        assert await feed.__anext__() == []
        assert anyio.current_time() - start == pytest.approx(FEED_HEARTBEAT_SECONDS)


# ---------------------------------------------------------------------------------------------
# ThreadedJobStore
# ---------------------------------------------------------------------------------------------


class FeedOnly(SyncInMemoryJobStore):
    """A sync store whose history feed records the threads it runs in and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()
        self.closed = threading.Event()

    def watch_history(
        self, *, job_ids: Any = None, job_names: Any = None
    ) -> Generator[list[HistoryRecord], None, None]:
        def feed() -> Generator[list[HistoryRecord], None, None]:
            try:
                while True:
                    self.threads.add(threading.get_ident())
                    yield []
            finally:
                self.threads.add(threading.get_ident())
                self.closed.set()

        return feed()


async def test_threaded_feeds_run_in_threads_and_close_when_cancelled() -> None:
    sync_store = FeedOnly()
    store = ThreadedJobStore(sync_store)
    with anyio.move_on_after(SAFETY) as scope:
        async with aclosing(store.watch_history()) as feed:
            for _ in range(3):
                assert await feed.__anext__() == []
            scope.cancel()
            await feed.__anext__()
    assert scope.cancelled_caught
    assert sync_store.closed.is_set()
    assert threading.get_ident() not in sync_store.threads


async def test_threaded_feeds_of_the_in_memory_store() -> None:
    sync_store = SyncInMemoryJobStore()
    store = ThreadedJobStore(sync_store)
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []
        await store.insert_job(new_job())
        changes: list[RecordChange] = []
        with anyio.fail_after(SAFETY):
            while not changes:
                changes.extend(await feed.__anext__())
    assert changes == [RecordChange(job_name="a", partition=0, next_run_at=T0)]
    assert not sync_store._feeds.watched


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a second of real time: one backend
async def test_a_sync_feed_keeps_its_heartbeats_for_a_consumer_without_deadlines() -> None:
    """Its heartbeats keep each next() in a thread short, so that a cancelled consumer does not
    wait for a change: they are never left out."""
    store = ThreadedJobStore(SyncInMemoryJobStore())
    async with aclosing(store.watch_records(["a"])) as feed:
        with without_heartbeats():
            assert await feed.__anext__() == []
            with anyio.fail_after(SAFETY):
                assert await feed.__anext__() == []
