"""The composition root (dogs_mongo.container): configuration, validation, wiring by driver, the
in-memory override under virtual time, and both drivers against the real mongod."""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import trio.testing
from pymongo import AsyncMongoClient, MongoClient, monitoring
from pymongo.write_concern import WriteConcern

from dogs_core import (
    BlockingDogsClient,
    BlockingWorkers,
    DogsClient,
    Duplicate,
    EventJobDefinition,
    HistoryStatus,
    InvalidOptionError,
    JobContext,
    Jobs,
    LoopClock,
    Scheduled,
    SystemClock,
    Workers,
)
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo.container import DogsContainer, DogsSettings, redact_uri
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore

START = datetime(2026, 1, 1, tzinfo=UTC)
SKETCH_URI = "mongodb://localhost:27017/?replicaSet=rs0"


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """In-memory tests run on trio under a virtual clock (the Mongo class below uses asyncio)."""
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


@dataclass
class Welcome:
    user_id: int


class CommandThreads(monitoring.CommandListener):
    """Records the name and the thread of every command PyMongo starts."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.seen.append((event.command_name, threading.get_ident()))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        return None

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        return None


def welcome_jobs(seen: list[tuple[int, datetime]], clock: LoopClock | None = None) -> Jobs:
    jobs = Jobs()

    @jobs.event(max_tries=5, lock_time=timedelta(minutes=2))
    async def send_welcome(params: Welcome, ctx: JobContext) -> None:
        seen.append((params.user_id, clock.now() if clock is not None else datetime.now(UTC)))

    return jobs


# ----------------------------------------------------------------------------------------------
# The store overridden by the in-memory one, under virtual time
# ----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_user_sketch_with_the_store_overridden_in_memory() -> None:
    seen: list[tuple[int, datetime]] = []
    clock = LoopClock(START)
    jobs = welcome_jobs(seen, clock)
    send_welcome = jobs.get("send_welcome")
    assert isinstance(send_welcome, EventJobDefinition)
    # The URI names no server that exists here: nothing may touch MongoDB.
    container = DogsContainer(uri=SKETCH_URI, database="app", n_partitions=16, poll_interval=1)
    store = InMemoryJobStore()
    container.store.override(store)
    container.clock.override(clock)

    client = container.client()
    assert isinstance(client, DogsClient)
    outcome = await client.schedule(
        send_welcome, Welcome(user_id=42), run_in=timedelta(minutes=5), unique_key="welcome:42"
    )
    assert isinstance(outcome, Scheduled)
    again = await client.schedule(
        send_welcome, Welcome(user_id=42), run_in=timedelta(minutes=5), unique_key="welcome:42"
    )
    assert isinstance(again, Duplicate)
    assert again.existing_id == outcome.id

    started = anyio.current_time()
    async with container.workers(jobs, workers_count=32) as workers:
        assert isinstance(workers, Workers)
        assert workers.settings.workers_count == 32
        assert workers.settings.n_partitions == 16, "n_partitions comes from the container"
        await anyio.sleep(4 * 60)
        assert seen == []
        await anyio.sleep(2 * 60)
        await workers.stop(grace=5)
    assert anyio.current_time() - started == pytest.approx(6 * 60, abs=1)
    assert [user for user, _ in seen] == [42]
    ran_at = seen[0][1]
    assert START + timedelta(minutes=5) <= ran_at <= START + timedelta(minutes=5, seconds=2)
    assert store.sync.find_records() == [], "a successful event record is deleted"
    history = await client.get_executions(send_welcome)
    assert [row.status for row in history] == [HistoryStatus.SUCCESS]


@pytest.mark.anyio
async def test_recurrent_jobs_and_overrides_through_the_constructor() -> None:
    clock = LoopClock(START)
    runs: list[datetime] = []
    jobs = Jobs()

    @jobs.recurrent(run_every="1m")
    async def every_minute(ctx: JobContext) -> None:
        runs.append(clock.now())

    store = InMemoryJobStore()
    # Provider overrides by name, configuration options by key, in one call.
    container = DogsContainer(store=store, clock=clock, poll_interval="5s", workers_count=2)
    async with container.workers(jobs) as workers:
        assert workers.settings.poll_interval == timedelta(seconds=5)
        await anyio.sleep(10 * 60 + 1)
        await workers.stop()
    assert 10 <= len(runs) <= 11
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(runs)]
    assert all(60 <= gap <= 66 for gap in gaps), gaps


@pytest.mark.anyio
async def test_client_with_a_registry_schedules_by_name() -> None:
    jobs = welcome_jobs([])
    container = DogsContainer(store=InMemoryJobStore(), clock=LoopClock(START))
    client = container.client(jobs)
    outcome = await client.schedule("send_welcome", {"user_id": 7})
    assert isinstance(outcome, Scheduled)
    record = await client.get_job(outcome.id)
    assert record is not None
    assert record.params == {"user_id": 7}


def test_blocking_facade_with_the_in_memory_store() -> None:
    ran = threading.Event()
    jobs = Jobs()

    @jobs.event
    def sync_job(params: dict[str, Any] | None, ctx: JobContext) -> None:
        ran.set()

    container = DogsContainer(driver="sync", store=InMemoryJobStore(), poll_interval=0.05)
    with container.blocking_client(jobs) as client:
        assert isinstance(client, BlockingDogsClient)
        assert isinstance(client.schedule("sync_job", {"n": 1}), Scheduled)
        workers = container.blocking_workers(jobs, workers_count=2)
        assert isinstance(workers, BlockingWorkers)
        with workers:
            assert ran.wait(10)
        history = client.get_executions("sync_job")
    assert [row.status for row in history] == [HistoryStatus.SUCCESS]


# ----------------------------------------------------------------------------------------------
# Configuration and validation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"driver": "motor"}, "driver"),
        ({"n_partitions": 0}, "n_partitions"),
        ({"n_partitions": "4"}, "n_partitions"),
        ({"workers_count": 0}, "workers_count"),
        ({"poll_interval": "soon"}, "poll_interval"),
        ({"default_lock_time": -1}, "default_lock_time"),
        ({"max_tries": 0}, "max_tries"),
        ({"write_concern": 0}, "write_concern"),
        ({"write_concern": "all"}, "write_concern"),
        ({"write_concern": WriteConcern(w=0)}, "write_concern"),
        ({"server_selection_timeout": 0}, "server_selection_timeout"),
        ({"server_selection_timeout": [5]}, "server_selection_timeout"),
        ({"uri": ""}, "uri"),
        ({"database": "my.app"}, "database"),
        ({"records_collection": ""}, "records_collection"),
        ({"history_collection": "system.jobs"}, "history_collection"),
        ({"claim_path": "fast"}, "claim_path"),
        ({"blocking_backend": "curio"}, "blocking_backend"),
        ({"client_options": ["tls"]}, "client_options"),
        ({"workers": 4}, "workers"),
        ({"retention": "7d"}, "retention"),
    ],
)
def test_bad_options_raise_invalid_option_error_naming_the_field(
    options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        DogsContainer(**options)
    assert raised.value.field == field


def test_configuration_loaded_later_is_validated_at_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    container = DogsContainer()
    monkeypatch.setenv("DOGS_MONGODB_URI", "mongodb://db.example:27017/app")
    container.config.uri.from_env("DOGS_MONGODB_URI")
    container.config.from_dict({"driver": "sync", "n_partitions": 8})
    settings = container.settings()
    assert isinstance(settings, DogsSettings)
    assert (settings.uri, settings.driver, settings.n_partitions) == (
        "mongodb://db.example:27017/app",
        "sync",
        8,
    )
    container.config.from_dict({"n_partitions": -1})
    with pytest.raises(InvalidOptionError) as raised:
        container.client()
    assert raised.value.field == "n_partitions"


def test_a_mongo_store_needs_a_uri_and_a_database() -> None:
    with pytest.raises(InvalidOptionError) as raised:
        DogsContainer(driver="sync").store()
    assert raised.value.field == "uri"
    container = DogsContainer(uri="mongodb://127.0.0.1:1/", driver="sync")
    with pytest.raises(InvalidOptionError) as raised:
        container.store()
    assert raised.value.field == "database"
    container.close()
    with pytest.raises(InvalidOptionError) as raised:
        DogsContainer(uri="http://example.com", driver="sync").store()
    assert raised.value.field == "uri"


def test_bad_worker_overrides_raise_invalid_option_error() -> None:
    container = DogsContainer(store=InMemoryJobStore())
    jobs = welcome_jobs([])
    with pytest.raises(InvalidOptionError) as raised:
        container.workers(jobs, workers_cuont=3)
    assert raised.value.field == "workers_cuont"
    with pytest.raises(InvalidOptionError) as raised:
        container.workers(jobs, poll_interval="later")
    assert raised.value.field == "poll_interval"
    with pytest.raises(InvalidOptionError) as raised:
        container.blocking_workers(Jobs())
    assert raised.value.field == "jobs"


def test_workers_with_other_partitions_than_the_client_log_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    container = DogsContainer(store=InMemoryJobStore(), n_partitions=4)
    with caplog.at_level(logging.WARNING, logger="dogs.container"):
        workers = container.workers(welcome_jobs([]), n_partitions=16)
    assert workers.settings.n_partitions == 16
    assert "n_partitions" in caplog.text


def test_sync_driver_wiring() -> None:
    container = DogsContainer(
        uri="mongodb://127.0.0.1:1/fromuri",
        driver="sync",
        write_concern="majority",
        server_selection_timeout="2s",
        records_collection="jobs_records",
        history_collection="jobs_history",
    )
    try:
        store = container.store()
        assert isinstance(store, ThreadedJobStore)
        assert container.store() is store, "the store is a singleton"
        sync_store = store.sync_store
        assert isinstance(sync_store, MongoJobStore)
        assert sync_store.database_name == "fromuri", "the database comes from the URI path"
        assert sync_store.records_collection.name == "jobs_records"
        assert sync_store.history_collection.name == "jobs_history"
        assert sync_store._fenced.write_concern == WriteConcern(w="majority")
        client = container.mongo_client()
        assert isinstance(client, MongoClient)
        assert client is container.sync_mongo_client()
        assert client.codec_options.tz_aware
        assert client.options.server_selection_timeout == 2
        assert isinstance(container.clock(), SystemClock)
        assert container.blocking_client().store is sync_store, "the sync store, unwrapped"
    finally:
        container.close()
    assert container.store() is not store, "close() resets the singletons"
    container.close()


@pytest.mark.parametrize("driver", ["async", "sync"])
def test_the_blocking_client_calls_the_sync_store_with_either_driver(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    container = DogsContainer(uri="mongodb://127.0.0.1:1/app", driver=driver)
    try:
        with container.blocking_client() as client:
            assert isinstance(client, BlockingDogsClient)
            assert client.store is container.sync_store(), "no ThreadedJobStore, no portal"
            assert isinstance(client.store, MongoJobStore)
    finally:
        with caplog.at_level(logging.WARNING, logger="dogs.container"):
            container.close()
    assert "AsyncMongoClient" not in caplog.text, "the blocking client made no async client"


def test_the_blocking_client_follows_an_overridden_store() -> None:
    sync_memory = SyncInMemoryJobStore()
    container = DogsContainer(uri="mongodb://127.0.0.1:1/app", driver="sync")
    container.store.override(ThreadedJobStore(sync_memory))
    with container.blocking_client() as client:
        assert client.store is sync_memory
    container = DogsContainer(uri="mongodb://127.0.0.1:1/app")  # driver "async"
    container.async_store.override(InMemoryJobStore(sync=sync_memory))
    with container.blocking_client(welcome_jobs([])) as client:
        assert isinstance(client.schedule("send_welcome", {"user_id": 1}), Scheduled)
    assert [r.job_name for r in sync_memory.find_records()] == ["send_welcome"]


def test_blocking_workers_refuse_the_async_mongo_store() -> None:
    container = DogsContainer(uri="mongodb://127.0.0.1:1/app")  # driver "async"
    try:
        with pytest.raises(InvalidOptionError) as raised:
            container.blocking_workers(welcome_jobs([]))
        assert raised.value.field == "driver"
    finally:
        anyio.run(container.aclose)


def test_redact_uri_hides_the_password() -> None:
    assert redact_uri("mongodb://app:s3cret@db:27017/x") == "mongodb://app:***@db:27017/x"
    assert redact_uri("mongodb+srv://app:p%40ss@cluster.example/x") == (
        "mongodb+srv://app:***@cluster.example/x"
    )
    assert redact_uri("mongodb://db/x") == "mongodb://db/x"


# ----------------------------------------------------------------------------------------------
# The real mongod, both drivers
# ----------------------------------------------------------------------------------------------


@pytest.mark.mongo
class TestWithMongod:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"  # PyMongo's async client runs on asyncio only

    @pytest.mark.anyio
    @pytest.mark.parametrize("driver", ["async", "sync"])
    async def test_schedule_and_run_on_mongod(
        self, driver: str, mongodb_uri: str, mongo_database_name: str
    ) -> None:
        done = anyio.Event()
        jobs = Jobs()

        @jobs.event
        async def send_welcome(params: Welcome, ctx: JobContext) -> dict[str, int]:
            done.set()
            return {"user_id": params.user_id}

        container = DogsContainer(
            uri=mongodb_uri,
            database=mongo_database_name,
            driver=driver,
            n_partitions=2,
            poll_interval=0.05,
            server_selection_timeout=10,
        )
        try:
            store = container.store()
            if driver == "async":
                assert isinstance(store, AsyncMongoJobStore)
                assert isinstance(container.mongo_client(), AsyncMongoClient)
            else:
                assert isinstance(store, ThreadedJobStore)
                assert isinstance(store.sync_store, MongoJobStore)
            client = container.client(jobs)
            outcome = await client.schedule(send_welcome, Welcome(user_id=42), unique_key="w:42")
            assert isinstance(outcome, Scheduled)
            duplicate = await client.schedule(send_welcome, {"user_id": 42}, unique_key="w:42")
            assert isinstance(duplicate, Duplicate)
            assert duplicate.existing_id == outcome.id
            with anyio.fail_after(20):
                async with container.workers(jobs, workers_count=4) as workers:
                    await done.wait()
                    await workers.stop(grace=5)
            history = await client.get_executions(send_welcome)
            assert [(row.status, row.result) for row in history] == [
                (HistoryStatus.SUCCESS, {"user_id": 42})
            ]
            assert await client.get_job(outcome.id) is None
        finally:
            await container.aclose()
        assert container.store() is not store, "aclose() resets the singletons"
        await container.aclose()

    @pytest.mark.parametrize("driver", ["async", "sync"])
    def test_a_blocking_schedule_is_one_insert_in_the_callers_thread(
        self, driver: str, mongodb_uri: str, mongo_database_name: str
    ) -> None:
        commands = CommandThreads()
        container = DogsContainer(
            uri=mongodb_uri,
            database=mongo_database_name,
            driver=driver,
            client_options={"event_listeners": [commands]},
        )
        try:
            with container.blocking_client(welcome_jobs([])) as client:
                client.schedule("send_welcome", {"user_id": 1})  # the first call sets up indexes
                commands.seen.clear()
                outcome = client.schedule("send_welcome", {"user_id": 2}, unique_key="w:2")
                assert isinstance(outcome, Scheduled)
                assert commands.seen == [("insert", threading.get_ident())]
                record = client.get_job(outcome.id)
                assert record is not None
                assert record.params == {"user_id": 2}
        finally:
            container.close()

    def test_sync_app_with_the_blocking_facade_on_mongod(
        self, mongodb_uri: str, mongo_database_name: str
    ) -> None:
        ran = threading.Event()
        jobs = Jobs()

        @jobs.event
        def resize(params: dict[str, Any] | None, ctx: JobContext) -> None:
            ran.set()

        container = DogsContainer(
            uri=mongodb_uri, database=mongo_database_name, driver="sync", poll_interval=0.05
        )
        try:
            with container.blocking_client(jobs) as client:
                assert isinstance(client.schedule("resize", {"width": 64}), Scheduled)
                with container.blocking_workers(jobs, workers_count=2):
                    assert ran.wait(20)
                history = client.get_executions("resize")
            assert [row.status for row in history] == [HistoryStatus.SUCCESS]
        finally:
            container.close()


def test_bad_partitions_for_workers_fail_before_any_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    container = DogsContainer(store=InMemoryJobStore(), n_partitions=4)
    with (
        caplog.at_level(logging.WARNING, logger="dogs.container"),
        pytest.raises(InvalidOptionError) as raised,
    ):
        container.workers(welcome_jobs([]), n_partitions=0)
    assert raised.value.field == "n_partitions"
    assert caplog.records == [], "validate first, then warn"


def test_the_container_is_exported_from_dogs_mongo_too() -> None:
    import dogs_mongo
    import dogs_mongo.container

    assert dogs_mongo.DogsContainer is dogs_mongo.container.DogsContainer


def test_the_settings_hold_one_worker_settings_built_from_the_configuration() -> None:
    container = DogsContainer(store=InMemoryJobStore(), n_partitions=4, workers_count=32)
    settings = container.settings()
    assert isinstance(settings.workers, WorkerSettings)
    assert (settings.workers.workers_count, settings.workers.n_partitions) == (32, 4)
    assert settings.n_partitions == 4
    assert settings.worker_settings() is settings.workers
    derived = settings.worker_settings(workers_count=2)
    assert (derived.workers_count, derived.claim_concurrency, derived.n_partitions) == (2, 2, 4)


def test_the_telemetry_hub_is_a_provider_every_client_and_worker_uses() -> None:
    from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry

    jobs = Jobs()

    @jobs.event
    async def noop(params: None, ctx: JobContext) -> None:
        pass

    default = DogsContainer(store=InMemoryJobStore())
    assert default.client().telemetry is TELEMETRY
    hub = Telemetry()
    container = DogsContainer(store=InMemoryJobStore(), telemetry=hub)
    assert container.client().telemetry is hub
    assert container.workers(jobs).telemetry is hub
    with container.blocking_client() as blocking:
        assert blocking.telemetry is hub


def test_history_write_concern_is_its_own_option() -> None:
    container = DogsContainer(
        uri="mongodb://localhost:1/?replicaSet=rs0",
        database="app",
        driver="sync",
        history_write_concern=1,
    )
    try:
        store = container.sync_store()
        assert store.history_collection.write_concern == WriteConcern(w=1)
        assert store._fenced.write_concern == WriteConcern(w="majority"), "majority by default"
    finally:
        container.close()
    with pytest.raises(InvalidOptionError) as refused:
        DogsContainer(store=InMemoryJobStore(), history_write_concern=0)
    assert refused.value.field == "history_write_concern"
