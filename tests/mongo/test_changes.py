"""The MongoDB change feeds on a real mongod: what the $match lets through, resuming after the
stream's cursor dies, giving up after repeated failures, a standalone server, closing; the
pause feed on the controls collection (pauses and resumes of another client, and nothing of the
slots, rate windows and leases written there); and the additive history index on a database
Dogs created.

Every wait is bounded by the contract's generous safety timeout; nothing asserts a duration.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import PyMongoError

import dogs_mongo.errors as mongo_errors
from dogs_core.domain.controls import DEFAULT_KEY, EVERY_JOB
from dogs_core.domain.records import ClaimRequest, NewJob, to_millis
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import ChangeFeedUnavailableError, TransientStoreError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.mongod import find_mongod_binary
from dogs_testing.contract.base import _history
from dogs_testing.contract.feeds import opened, read_until
from dogs_testing.settling import demoted, released, rescheduled, settle_one, terminal

from .test_queries import ADDITIVE_HISTORY_INDEXES, DOGS_HISTORY_INDEXES

pytestmark = [pytest.mark.anyio, pytest.mark.mongo]

APP_NAME = "dogs-feed-test"


def _now() -> datetime:
    return to_millis(datetime.now(UTC))


def _job(name: str = "a", *, at: datetime, partition: int = 0) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params=None,
        next_run_at=at,
        priority=100,
        partition=partition,
        unique_identifier=None,
    )


def _claim_request(now: datetime, *, lock_for: timedelta = timedelta(seconds=30)) -> ClaimRequest:
    return ClaimRequest(
        job_names=("a",),
        partition=0,
        hint="byJobName",
        now=now,
        locked_until=now + lock_for,
        lock_id=new_execution_id(),
    )


@pytest.fixture
async def feed_client(mongodb_uri: str) -> AsyncGenerator[AsyncMongoClient[dict[str, Any]], None]:
    """A client of its own (``appName``), so that a fail point can target it alone."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, appname=APP_NAME
    )
    yield client
    await client.close()


@pytest.fixture
async def store(
    feed_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> AsyncMongoJobStore:
    store = AsyncMongoJobStore(feed_client, mongo_database_name)
    await store.setup()
    return store


@pytest.fixture
def fail_point(sync_mongo_client: MongoClient[dict[str, Any]]) -> Iterator[Any]:
    """Arms ``failCommand`` for the feed client's commands only; off at the end. The default
    error is one PyMongo does not retry (a retryable read under ``pymongo.timeout`` is retried
    until the timeout) but labels resumable: only the feed's own reopening gets past it."""

    def arm(commands: list[str], *, times: int, code: int = 43) -> None:
        sync_mongo_client.admin.command(
            "configureFailPoint",
            "failCommand",
            mode={"times": times},
            data={
                "failCommands": commands,
                "errorCode": code,
                "errorLabels": ["ResumableChangeStreamError"],
                "appName": APP_NAME,
            },
        )

    yield arm
    sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


def _is_at(at: datetime) -> Any:
    return lambda items: any(change.next_run_at == at for change in items)


async def _change_stream_cursors(client: MongoClient[dict[str, Any]], ns: str) -> list[int]:
    """The ids of the cursors open on ``ns`` (idle or in a getMore)."""
    pipeline: list[dict[str, Any]] = [
        {"$currentOp": {"idleCursors": True, "allUsers": True}},
        {"$match": {"ns": ns, "cursor.cursorId": {"$exists": True}}},
    ]
    ops = await anyio.to_thread.run_sync(lambda: list(client.admin.aggregate(pipeline)))
    return [int(op["cursor"]["cursorId"]) for op in ops]


# ---------------------------------------------------------------------------------------------
# What the $match lets through
# ---------------------------------------------------------------------------------------------


async def test_claims_and_renewals_are_not_reported_releases_are(
    store: AsyncMongoJobStore,
) -> None:
    now = _now()
    marker = now + timedelta(hours=1)
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        await store.insert_job(_job(at=now - timedelta(seconds=1)))
        claimed = await store.claim(_claim_request(now))
        assert claimed is not None
        for seconds in (2, 30, 600):  # renewals, a short lock time included
            assert await store.extend_lock(
                claimed.job_id, claimed.execution_id, _now() + timedelta(seconds=seconds)
            )
        assert await settle_one(store, claimed.job_id, claimed.execution_id, released(_now()))
        await store.insert_job(_job(at=marker))
        changes = await read_until(feed, _is_at(marker))
    assert changes == [
        RecordChange(job_name="a", partition=0, next_run_at=now - timedelta(seconds=1)),
        RecordChange(),  # the release: an update, whose job name the event does not carry
        RecordChange(job_name="a", partition=0, next_run_at=marker),
    ]


async def test_reschedule_and_partition_repair_carry_what_they_set(
    store: AsyncMongoJobStore,
) -> None:
    now = _now()
    await store.insert_job(_job(at=now))
    claimed = await store.claim(_claim_request(now))
    assert claimed is not None
    later = now + timedelta(minutes=5)
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        assert await settle_one(
            store, claimed.job_id, claimed.execution_id, rescheduled(later, reset_tries=True)
        )
        await store.records_collection.update_one({"_id": claimed.job_id}, q.reconcile_update(3))
        changes = await read_until(feed, lambda items: any(c.partition == 3 for c in items))
    assert changes == [RecordChange(next_run_at=later), RecordChange(partition=3)]


async def test_a_terminal_mark_and_a_demotion_are_not_reported(store: AsyncMongoJobStore) -> None:
    now = _now()
    await store.insert_job(_job(at=now))
    first = await store.claim(_claim_request(now))
    assert first is not None
    marker = now + timedelta(hours=2)
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        assert await settle_one(store, first.job_id, first.execution_id, demoted())
        assert await settle_one(store, first.job_id, first.execution_id, terminal(now))
        await store.insert_job(_job(at=marker))
        changes = await read_until(feed, _is_at(marker))
    assert changes == [RecordChange(job_name="a", partition=0, next_run_at=marker)]


async def test_history_rows_of_one_bulk_are_each_reported_once(
    store: AsyncMongoJobStore,
) -> None:
    rows = [_history(f"e{i}") for i in range(3)]
    async with aclosing(store.watch_history(job_names=["a"])) as feed:
        await opened(feed)
        await store.write_history_many(rows)
        await store.write_history_many(rows)  # later writes of the same executions: updates
        marker = _history("marker")
        await store.write_history_many([marker])
        seen = await read_until(feed, lambda items: any(r.execution_id == "marker" for r in items))
    assert sorted(row.execution_id for row in seen) == ["e0", "e1", "e2", "marker"]


# ---------------------------------------------------------------------------------------------
# Resuming, and giving up
# ---------------------------------------------------------------------------------------------


async def test_a_killed_cursor_is_resumed(
    store: AsyncMongoJobStore, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    ns = f"{store.database_name}.{store.records_collection.name}"
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        cursors = await _change_stream_cursors(sync_mongo_client, ns)
        assert cursors, "the feed's change stream cursor is not on the server"
        await anyio.to_thread.run_sync(
            lambda: sync_mongo_client[store.database_name].command(
                "killCursors", store.records_collection.name, cursors=cursors
            )
        )
        at = _now() + timedelta(minutes=1)
        await store.insert_job(_job(at=at))
        changes = await read_until(feed, _is_at(at))
    assert RecordChange(job_name="a", partition=0, next_run_at=at) in changes


async def test_failures_pymongo_cannot_resume_are_reopened_from_the_token(
    store: AsyncMongoJobStore, fail_point: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dogs.mongo.store")
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        # Inserted while the stream is failing: reported once it is reopened after its token.
        missed = _now() + timedelta(minutes=1)
        await store.insert_job(_job(at=missed))
        fail_point(["getMore", "aggregate"], times=3)  # getMore, PyMongo's resume, ours
        changes = await read_until(feed, _is_at(missed))
    assert RecordChange(job_name="a", partition=0, next_run_at=missed) in changes
    assert "reopening the change stream" in caplog.text


async def test_repeated_failures_end_in_a_transient_error(
    store: AsyncMongoJobStore, fail_point: Any
) -> None:
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        fail_point(["getMore", "aggregate"], times=1000)
        batches: list[list[Any]] = []
        with anyio.fail_after(60), pytest.raises(TransientStoreError, match="in a row"):  # noqa: PT012
            while True:
                batches.append(await feed.__anext__())
    assert batches == [[]] * mongo_errors.MAX_REOPENS  # a heartbeat between attempts


async def test_a_non_resumable_failure_propagates(
    store: AsyncMongoJobStore, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    sync_mongo_client.admin.command(
        "configureFailPoint",
        "failCommand",
        mode={"times": 1},
        data={"failCommands": ["aggregate"], "errorCode": 2, "appName": APP_NAME},
    )
    try:
        async with aclosing(store.watch_records(["a"])) as feed:
            with pytest.raises(PyMongoError):
                await feed.__anext__()
    finally:
        sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


async def test_closing_a_sync_feed_in_threads_closes_its_cursor(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    sync_store = MongoJobStore(sync_mongo_client, mongo_database_name)
    sync_store.setup()
    store = ThreadedJobStore(sync_store)
    ns = f"{mongo_database_name}.{q.DEFAULT_RECORDS_COLLECTION}"
    async with aclosing(store.watch_records(["a"])) as feed:
        await opened(feed)
        assert await _change_stream_cursors(sync_mongo_client, ns)
        with anyio.fail_after(30):
            assert await feed.__anext__() == []  # the heartbeat of an idle getMore
    with anyio.fail_after(30):
        while await _change_stream_cursors(sync_mongo_client, ns):  # noqa: ASYNC110
            await anyio.sleep(0.05)


# ---------------------------------------------------------------------------------------------
# The pause feed
# ---------------------------------------------------------------------------------------------


def _is_name(name: str) -> Any:
    return lambda names: name in names


def _other_controls(other: MongoJobStore, now: datetime) -> None:
    """Slots, a rate window and a lease written by ``other``: inserts (the documents are
    created on demand), updates and deletes of the controls collection, none of them a pause."""
    later = now + timedelta(minutes=1)
    assert other.acquire_slot("a", DEFAULT_KEY, limit=2, holder="h", until=later, now=now) == 0
    assert other.renew_slot("a", DEFAULT_KEY, 0, holder="h", until=later + timedelta(minutes=1))
    assert other.release_slot("a", DEFAULT_KEY, 0, holder="h")
    assert other.take_rate_token("a", DEFAULT_KEY, limit=1, window_start=now, window_end=later)
    token = other.acquire_lease("a", owner="o", until=later, now=now)
    assert token is not None
    assert other.renew_lease("a", owner="o", token=token, until=later, now=now)
    assert other.release_lease("a", owner="o", token=token)
    other.controls_collection.delete_many({"kind": {"$ne": q.KIND_PAUSE}})


async def test_pauses_of_another_client_are_reported_and_the_other_controls_are_not(
    store: AsyncMongoJobStore,
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
) -> None:
    other = MongoJobStore(sync_mongo_client, mongo_database_name)
    now = _now()
    async with aclosing(store.watch_pauses()) as feed:
        await opened(feed)

        def write() -> None:
            assert other.set_paused("a", True, now=now)
            assert not other.set_paused("a", True, now=now)  # already paused: no event
            _other_controls(other, now)
            other.controls_collection.update_one(  # an update of a pause: not a pause
                {"_id": q.pause_id("a")}, {"$set": {"pausedAt": now + timedelta(seconds=1)}}
            )
            assert other.set_paused("a", False, now=now)
            assert not other.set_paused("b", False, now=now)  # not paused: no event
            assert other.set_paused(EVERY_JOB, True, now=now)
            assert other.set_paused("marker", True, now=now)

        await anyio.to_thread.run_sync(write)
        names = await read_until(feed, _is_name("marker"))
    assert names == ["a", "a", EVERY_JOB, "marker"]
    assert await store.paused_names() == frozenset({EVERY_JOB, "marker"})


async def test_the_pause_feed_reopens_after_failures_from_the_token(
    store: AsyncMongoJobStore, fail_point: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dogs.mongo.store")
    async with aclosing(store.watch_pauses()) as feed:
        await opened(feed)
        # Paused while the stream is failing: reported once it is reopened after its token.
        assert await store.set_paused("a", True, now=_now())
        fail_point(["getMore", "aggregate"], times=3)  # getMore, PyMongo's resume, ours
        names = await read_until(feed, _is_name("a"))
    assert names == ["a"]
    assert "watch_pauses: reopening the change stream" in caplog.text


async def test_a_killed_pause_feed_cursor_is_resumed(
    store: AsyncMongoJobStore, sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    controls = store.controls_collection.name
    ns = f"{store.database_name}.{controls}"
    async with aclosing(store.watch_pauses()) as feed:
        await opened(feed)
        cursors = await _change_stream_cursors(sync_mongo_client, ns)
        assert cursors, "the pause feed's change stream cursor is not on the server"
        await anyio.to_thread.run_sync(
            lambda: sync_mongo_client[store.database_name].command(
                "killCursors", controls, cursors=cursors
            )
        )
        assert await store.set_paused("a", True, now=_now())
        assert await store.set_paused("a", False, now=_now())
        names = await read_until(feed, lambda names: names.count("a") == 2)
    assert names == ["a", "a"]


async def test_a_sync_pause_feed_in_threads_reports_a_resume(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    sync_store = MongoJobStore(sync_mongo_client, mongo_database_name)
    sync_store.setup()
    assert sync_store.set_paused("a", True, now=_now())
    store = ThreadedJobStore(sync_store)
    async with aclosing(store.watch_pauses()) as feed:
        await opened(feed)
        assert await store.set_paused("a", False, now=_now())
        names = await read_until(feed, _is_name("a"))
    assert names == ["a"]


# ---------------------------------------------------------------------------------------------
# A standalone server
# ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def standalone_uri() -> Iterator[str]:
    """A mongod started without ``--replSet`` (no change streams), stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="dogs-standalone-"))
    port = _free_port()
    process = subprocess.Popen(
        [
            str(find_mongod_binary()),
            "--dbpath",
            str(root),
            "--logpath",
            str(root / "mongod.log"),
            "--bind_ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--wiredTigerCacheSizeGB",
            "0.25",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (root / "mongod.log").read_text()[-2000:]
            with contextlib.suppress(PyMongoError):
                probe: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=250)
                with probe:
                    probe.admin.command("ping")
                break
            assert time.monotonic() < deadline, "the standalone mongod did not start"
            time.sleep(0.1)
        yield uri
    finally:
        process.kill()
        process.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


async def test_a_standalone_server_has_no_change_feeds(standalone_uri: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(standalone_uri, tz_aware=True)
    try:
        store = AsyncMongoJobStore(client, "dogs_standalone")
        await store.setup()
        feeds = (
            store.watch_records(["a"]),
            store.watch_history(job_ids=["x"]),
            store.watch_pauses(),
        )
        for feed in feeds:
            async with aclosing(feed):
                with pytest.raises(ChangeFeedUnavailableError, match="replica set"):
                    await feed.__anext__()
        await store.insert_job(_job(at=_now()))  # the store itself works: polling stays
    finally:
        await client.drop_database("dogs_standalone")
        await client.close()


async def test_a_standalone_server_has_no_change_feeds_in_threads(standalone_uri: str) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(standalone_uri, tz_aware=True)
    with client:
        store = ThreadedJobStore(MongoJobStore(client, "dogs_standalone_sync"))
        for feed in (store.watch_records(["a"]), store.watch_pauses()):
            async with aclosing(feed):
                with pytest.raises(ChangeFeedUnavailableError):
                    await feed.__anext__()
        client.drop_database("dogs_standalone_sync")


def test_unavailability_is_recognised_by_code_and_message() -> None:
    from pymongo.errors import OperationFailure

    assert mongo_errors.is_unavailable(OperationFailure("x", code=40573))
    assert mongo_errors.is_unavailable(OperationFailure("not authorized", code=13))
    assert mongo_errors.is_unavailable(
        OperationFailure("The $changeStream stage is only supported on replica sets")
    )
    assert not mongo_errors.is_unavailable(OperationFailure("other", code=2))


# ---------------------------------------------------------------------------------------------
# The additive history index
# ---------------------------------------------------------------------------------------------


async def test_setup_adds_only_the_job_id_index_to_a_history_dogs_created(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    history = sync_mongo_client[mongo_database_name][q.DEFAULT_HISTORY_COLLECTION]
    for spec in q.HISTORY_INDEXES[:-1]:  # Dogs' own, as Node Dogs creates them
        history.create_index(list(spec.keys), **spec.create_options())
    MongoJobStore(sync_mongo_client, mongo_database_name).setup()
    indexes = [dict(index) for index in history.list_indexes()][1:]  # without _id_
    assert indexes == [*DOGS_HISTORY_INDEXES, *ADDITIVE_HISTORY_INDEXES]
    plan = history.find({"jobId": "j"}).sort(q.get_executions_sort()).explain()
    assert q.HISTORY_JOB_ID_INDEX_NAME in str(plan["queryPlanner"]["winningPlan"])
