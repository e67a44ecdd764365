"""Graceful shutdown at the library level: drain within the grace period, cancel the rest, release
their locks so another instance claims them at once; also under store faults, and from a thread
with the blocking facade.

The async tests run under virtual time (trio ``MockClock``); the blocking facade runs its own
event loop thread, so its test uses real time (well under a second per wait).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.domain.records import JobRecord, Scheduled
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, LoopClock, Workers
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_testing.faults import FaultKind, FaultyJobStore
from dogs_testing.memory import InMemoryJobStore
from tests.reliability.support import START

Params = dict[str, Any] | None


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


@dataclass
class Run:
    name: str
    tries: int
    was_stale: bool
    started: float
    ended: float | None = None
    outcome: str = "running"


@dataclass
class World:
    """A registry with one job (``params = {"name": ..., "seconds": ...}``) that records its
    runs, one store and one application clock."""

    store: InMemoryJobStore = field(default_factory=InMemoryJobStore)
    clock: LoopClock = field(default_factory=lambda: LoopClock(START))
    runs: list[Run] = field(default_factory=list)
    jobs: Jobs = field(default_factory=Jobs)
    ids: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        runs = self.runs

        @self.jobs.event
        async def work(params: Params, ctx: JobContext) -> None:
            assert params is not None
            run = Run(params["name"], ctx.tries, ctx.was_stale, anyio.current_time())
            runs.append(run)
            try:
                await anyio.sleep(params["seconds"])
            except anyio.get_cancelled_exc_class():
                run.outcome = "cancelled"
                raise
            finally:
                run.ended = anyio.current_time()
            run.outcome = "done"

    async def schedule(self, name: str, seconds: float) -> None:
        client = DogsClient(self.store, self.jobs, clock=self.clock)
        outcome = await client.schedule("work", {"name": name, "seconds": seconds})
        assert isinstance(outcome, Scheduled)
        self.ids[name] = outcome.id

    def workers(self, store: Any = None, **options: Any) -> Workers:
        options.setdefault("default_lock_time", 60)
        options.setdefault("poll_interval", 1)
        options.setdefault("workers_count", 8)
        return Workers(
            store if store is not None else self.store,
            self.jobs,
            clock=self.clock,
            rng=random.Random(len(self.runs)),
            **options,
        )

    def record(self, name: str) -> JobRecord | None:
        return self.store.sync.get_record(self.ids[name])

    def of(self, name: str) -> list[Run]:
        return [run for run in self.runs if run.name == name]


def now() -> float:
    return anyio.current_time()


@pytest.mark.anyio
async def test_stop_drains_within_the_grace_period_then_hands_the_rest_to_another_instance() -> (
    None
):
    world = World()
    for name, seconds in (("short", 2), ("medium", 4), ("long", 50)):
        await world.schedule(name, seconds)
    async with world.workers() as first:
        await anyio.sleep(1)
        assert first.running_executions == 3
        asked = now()
        await first.stop(grace=10)
        stopped = now()
    # The jobs that could finish in the grace period did; stop() returned right after it.
    assert [run.outcome for run in world.of("short") + world.of("medium")] == ["done", "done"]
    assert world.record("short") is None
    assert world.record("medium") is None
    assert stopped - asked == pytest.approx(10, abs=0.01)
    # The rest was cancelled and its lock released (lockId kept: late writes stay fenced).
    [long_run] = world.of("long")
    assert long_run.outcome == "cancelled"
    assert long_run.ended == pytest.approx(asked + 10, abs=0.01)
    record = world.record("long")
    assert record is not None
    assert record.lock_id is not None
    assert record.locked_until is not None
    assert record.locked_until <= world.clock.now()
    # Another instance claims it at once: its second try, no recovery of a stale lock (the lock
    # was released, and the interrupted attempt has its ``cancelled`` history row).
    async with world.workers() as second:
        await anyio.sleep(0.5)
        assert [(r.tries, r.was_stale) for r in world.of("long")] == [(1, False), (2, False)]
        assert world.of("long")[1].started == pytest.approx(stopped, abs=0.01)
        await second.stop(grace=0)


@pytest.mark.anyio
async def test_stop_returns_as_soon_as_everything_drained_and_claims_nothing_new() -> None:
    world = World()
    await world.schedule("first", 3)
    async with world.workers() as workers:
        await anyio.sleep(0.5)
        asked = now()
        async with anyio.create_task_group() as group:
            group.start_soon(workers.stop, 60)
            await anyio.sleep(0.1)
            await world.schedule("late", 1)  # due now, but the workers are stopping
        stopped = now()
    assert stopped - asked == pytest.approx(2.5, abs=0.01)
    assert [run.outcome for run in world.of("first")] == ["done"]
    assert world.of("late") == []
    late = world.record("late")
    assert late is not None
    assert late.lock_id is None
    assert not workers.running


@pytest.mark.anyio
async def test_stop_without_grace_waits_for_each_job_or_its_lock() -> None:
    world = World()
    await world.schedule("quick", 5)
    await world.schedule("endless", 1000)
    async with world.workers(default_lock_time=20) as workers:
        await anyio.sleep(1)
        asked = now()
        await workers.stop()  # grace None: as Dogs, until each finishes or goes stale
        stopped = now()
    assert stopped - asked == pytest.approx(19, abs=0.01)  # the 20 s lock of "endless"
    assert [run.outcome for run in world.of("quick")] == ["done"]
    assert [run.outcome for run in world.of("endless")] == ["cancelled"]  # stale, cancelled


@pytest.mark.anyio
async def test_a_release_that_fails_once_is_retried() -> None:
    world = World()
    await world.schedule("long", 100)
    faulty = FaultyJobStore(world.store)
    faulty.fail_next("settle_many", FaultKind.ERROR_BEFORE)
    faulty.fail_next("settle_many", FaultKind.ERROR_AFTER, skip_calls=1)
    async with world.workers(faulty) as workers:
        await anyio.sleep(1)
        await workers.stop(grace=1)
    assert faulty.stats.count("settle_many") == 2
    record = world.record("long")
    assert record is not None
    assert record.locked_until is not None
    assert record.locked_until <= world.clock.now()


@pytest.mark.anyio
async def test_a_stop_while_the_store_is_down_is_bounded_and_loses_nothing() -> None:
    world = World()
    await world.schedule("long", 100)
    faulty = FaultyJobStore(world.store)
    async with world.workers(faulty, default_lock_time=30) as workers:
        await anyio.sleep(1)
        faulty.disconnect()
        asked = now()
        await workers.stop(grace=1)
        assert now() - asked < 10  # the release is given up after its retries
        record = world.record("long")
        assert record is not None
        assert record.locked_until is not None
        assert record.locked_until > world.clock.now()  # still held: it will expire
    # Nothing is lost: once the lock expires, another instance recovers the job.
    async with world.workers() as second:
        await anyio.sleep(35)
        await second.stop(grace=0)
    assert [(r.tries, r.was_stale) for r in world.of("long")] == [(1, False), (2, True)]


@pytest.mark.anyio
async def test_a_failing_body_releases_the_locks_at_once() -> None:
    world = World()
    await world.schedule("long", 100)

    async def application() -> None:
        async with world.workers():
            await anyio.sleep(1)
            raise KeyError("the application failed")

    with pytest.raises((KeyError, ExceptionGroup)):  # wrapped by the task group today
        await application()
    record = world.record("long")
    assert record is not None
    assert record.locked_until is not None
    assert record.locked_until <= world.clock.now(), "the lock was left to expire"


@pytest.mark.anyio
async def test_a_cancelled_body_releases_the_locks_at_once() -> None:
    world = World()
    await world.schedule("long", 100)
    with anyio.move_on_after(1):
        async with world.workers() as workers:
            await workers.serve()
    record = world.record("long")
    assert record is not None
    assert record.locked_until is not None
    assert record.locked_until <= world.clock.now(), "the lock was left to expire"


# -- the blocking facade, from another thread (real time) ----------------------------------------


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def test_blocking_workers_stop_from_another_thread_drains_cancels_and_releases() -> None:
    store = InMemoryJobStore()
    jobs = Jobs()
    started: dict[str, tuple[int, bool]] = {}
    finished: list[str] = []
    lock = threading.Lock()

    @jobs.event
    async def run_async(params: Params, ctx: JobContext) -> None:
        assert params is not None
        with lock:
            started[params["name"]] = (ctx.tries, ctx.was_stale)
        await anyio.sleep(params["seconds"])
        with lock:
            finished.append(params["name"])

    @jobs.event
    def run_sync(params: Params, ctx: JobContext) -> None:
        assert params is not None
        with lock:
            started[params["name"]] = (ctx.tries, ctx.was_stale)
        deadline = time.monotonic() + params["seconds"]
        while time.monotonic() < deadline:
            ctx.raise_if_cancelled()  # a sync handler stops cooperatively
            time.sleep(0.01)
        with lock:
            finished.append(params["name"])

    def schedule(job: str, name: str, seconds: float) -> str:
        async def go() -> str:
            outcome = await DogsClient(store, jobs).schedule(
                job, {"name": name, "seconds": seconds}
            )
            assert isinstance(outcome, Scheduled)
            return outcome.id

        return anyio.run(go)

    ids = {
        "quick": schedule("run_async", "quick", 0.1),
        "slow_async": schedule("run_async", "slow_async", 30),
        "slow_sync": schedule("run_sync", "slow_sync", 30),
    }
    options: dict[str, Any] = {"poll_interval": 0.05, "default_lock_time": 60}
    workers = BlockingWorkers(store, jobs, **options)
    workers.start()
    try:
        _wait_for(lambda: len(started) == 3)
        elapsed: list[float] = []

        def stop() -> None:
            begin = time.monotonic()
            workers.stop(grace=0.5)
            elapsed.append(time.monotonic() - begin)

        stopper = threading.Thread(target=stop)
        stopper.start()
        stopper.join(timeout=10)
        assert not stopper.is_alive(), "stop() hung"
    finally:
        workers.stop(grace=0)
    assert 0.4 <= elapsed[0] < 3.0
    assert finished == ["quick"]
    assert store.sync.get_record(ids["quick"]) is None
    now = datetime.now(UTC)
    for name in ("slow_async", "slow_sync"):
        record = store.sync.get_record(ids[name])
        assert record is not None
        assert record.locked_until is not None
        assert record.locked_until <= now, f"{name} was not released"
    # A second instance picks both up at once, as second tries (released locks are not stale).
    started.clear()
    second = BlockingWorkers(store, jobs, **options)
    second.start()
    try:
        _wait_for(lambda: len(started) == 2, timeout=2.0)
    finally:
        second.stop(grace=0)
    assert started == {"slow_async": (2, False), "slow_sync": (2, False)}
