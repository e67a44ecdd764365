"""Integration tests of the MongoDB stores on the real mongod: indexes, capability detection,
stored BSON types, bulk scheduling, the reconciler's compare-and-set, probes, write concern and
transient errors (through the server's ``failCommand`` fail point)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import AutoReconnect, BulkWriteError, DuplicateKeyError, OperationFailure
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from pymongo.write_concern import WriteConcern

from dogs_core.domain.records import (
    ClaimRequest,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    JobType,
    NewJob,
    Scheduled,
)
from dogs_core.errors import InvalidOptionError, InvalidParamsError, StoreError, TransientStoreError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_testing.settling import completed, rescheduled, settle_one, terminal

from .test_queries import (
    ADDITIVE_HISTORY_INDEXES,
    ADDITIVE_RECORD_INDEXES,
    DOGS_HISTORY_INDEXES,
    DOGS_RECORD_INDEXES,
)

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

T0 = datetime(2100, 1, 1, tzinfo=UTC)
_ID_INDEX = {"v": 2, "key": {"_id": 1}, "name": "_id_"}


def _job(
    name: str = "a",
    *,
    partition: int = 0,
    uid: str | None = None,
    params: dict[str, Any] | None = None,
    at: datetime = T0 - timedelta(seconds=1),
    priority: int = 100,
) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params=params,
        next_run_at=at,
        priority=priority,
        partition=partition,
        unique_identifier=uid,
    )


def _request(*names: str, partition: int = 0, now: datetime = T0) -> ClaimRequest:
    return ClaimRequest(
        job_names=names or ("a",),
        partition=partition,
        hint="globalPriority",
        now=now,
        locked_until=now + timedelta(minutes=1),
        lock_id=new_execution_id(),
    )


class Recorder(CommandListener):
    """Records the commands a client sends (name and body)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.commands.append((event.command_name, dict(event.command)))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass

    def names(self) -> list[str]:
        return [name for name, _ in self.commands]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def recorded_client(
    mongodb_uri: str, recorder: Recorder, anyio_backend: object
) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, event_listeners=[recorder]
    )
    yield client
    await client.close()


@pytest.fixture
def fail_point(sync_mongo_client: MongoClient[dict[str, Any]]) -> Iterator[Any]:
    """Arms the server's ``failCommand`` fail point (test commands must be enabled)."""
    armed = False

    def arm(data: dict[str, Any], times: int = 1) -> None:
        nonlocal armed
        try:
            sync_mongo_client.admin.command(
                "configureFailPoint", "failCommand", mode={"times": times}, data=data
            )
        except OperationFailure as error:
            pytest.skip(f"the server has no test commands (configureFailPoint): {error}")
        armed = True

    yield arm
    if armed:
        sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


async def _list_indexes(collection: Any) -> list[dict[str, Any]]:
    cursor = await collection.list_indexes()
    return [dict(index) for index in await cursor.to_list(None)]


def _by_name(indexes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {index["name"]: index for index in indexes}


# ---------------------------------------------------------------------------------------------
# Indexes
# ---------------------------------------------------------------------------------------------


async def test_list_indexes_equal_the_dogs_spec(async_store: AsyncMongoJobStore) -> None:
    records = await _list_indexes(async_store.records_collection)
    history = await _list_indexes(async_store.history_collection)
    print("\nlistIndexes", async_store.records_collection.name)
    for index in records:
        print("  ", index)
    print("listIndexes", async_store.history_collection.name)
    for index in history:
        print("  ", index)
    # Dogs' indexes (names, key order, options, order), then our additive ones on each
    # collection (docs/differences.md).
    assert records == [_ID_INDEX, *DOGS_RECORD_INDEXES, *ADDITIVE_RECORD_INDEXES]
    assert history == [_ID_INDEX, *DOGS_HISTORY_INDEXES, *ADDITIVE_HISTORY_INDEXES]
    assert async_store.records_collection.name == "orionjs.jobs_dogs_records"
    assert async_store.history_collection.name == "orionjs.jobs_dogs_history"


async def test_setup_is_memoized_and_idempotent(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
) -> None:
    store = AsyncMongoJobStore(recorded_client, mongo_database_name)
    await store.setup()
    # One batch per new collection: the records, the history, the controls, the unique keys.
    assert recorder.names().count("createIndexes") == 4
    await store.setup()
    assert recorder.names().count("createIndexes") == 4
    # A second store (another process) finds every index in place and creates none.
    again = AsyncMongoJobStore(recorded_client, mongo_database_name)
    await again.setup()
    assert recorder.names().count("createIndexes") == 4
    assert recorder.names().count("listIndexes") == 8


def test_setup_recreates_indexes_whose_options_conflict(
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = sync_mongo_client[mongo_database_name][q.DEFAULT_RECORDS_COLLECTION]
    # Same name, other options (85/86), same keys under another name (85), a stale TTL, and an
    # index Dogs does not declare (kept, with a warning).
    records.create_index("uniqueIdentifier", name="uniqueIdentifier_1")
    records.create_index("lockId", name="lockId_1", sparse=True)
    records.create_index(
        "expiresAt", name="jobs_dogs_records_expires_at_ttl", expireAfterSeconds=60
    )
    records.create_index("jobName", name="jobName_1")
    legacy = [("jobName", 1), ("priority", -1), ("nextRunAt", 1)]
    records.create_index(legacy, name="jobName_1_priority_-1_nextRunAt_1")

    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    indexes = _by_name([dict(index) for index in records.list_indexes()])
    assert "lockId_1" not in indexes
    for expected in DOGS_RECORD_INDEXES:
        assert indexes[expected["name"]] == expected
    assert "jobName_1_priority_-1_nextRunAt_1" in indexes
    assert "recreating it" in caplog.text
    assert "does not declare: jobName_1_priority_-1_nextRunAt_1" in caplog.text


def test_setup_failures_are_not_fatal(
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = sync_mongo_client[mongo_database_name][q.DEFAULT_RECORDS_COLLECTION]
    # Two records holding one identifier: the unique index cannot be built.
    records.insert_many([{"_id": str(i), "uniqueIdentifier": "u"} for i in range(2)])
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()  # logs, does not raise
    names = {index["name"] for index in records.list_indexes()}
    assert "uniqueIdentifier_1" not in names
    assert {"jobs_dogs_records_lock_id", "jobName_1"} <= names
    assert "uniqueIdentifier_1 on orionjs.jobs_dogs_records could not be created" in caplog.text
    assert store.capabilities().claim_path == "find_one_and_update"


# ---------------------------------------------------------------------------------------------
# Capabilities
# ---------------------------------------------------------------------------------------------


async def test_capability_detection_runs_once(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
) -> None:
    store = AsyncMongoJobStore(recorded_client, mongo_database_name)
    first = await store.capabilities()
    recorder.commands.clear()
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(store.capabilities)
    assert await store.capabilities() == first
    assert recorder.commands == []  # cached: no hello, no listIndexes
    assert first.supports_probe
    hello = await recorded_client.admin.command("hello")
    if hello["maxWireVersion"] < 25:
        assert first.claim_path == "find_one_and_update"
    build = await recorded_client.admin.command("buildInfo")
    assert first.server_version == build["version"]


class _WireVersionProxy:
    """The store's database, answering ``hello`` with another maxWireVersion."""

    def __init__(self, database: Any, wire_version: int) -> None:
        self._database = database
        self._wire_version = wire_version

    async def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        result = await self._database.command(command, *args, **kwargs)
        if command == "hello":
            result["maxWireVersion"] = self._wire_version
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


@pytest.mark.parametrize(
    ("wire_version", "drop_lock_index", "expected"),
    [
        (25, False, "sorted_update_one"),
        (25, True, "find_one_and_update"),
        (21, False, "find_one_and_update"),
    ],
)
async def test_claim_path_needs_wire_version_25_and_the_lock_id_index(
    async_store: AsyncMongoJobStore, wire_version: int, drop_lock_index: bool, expected: str
) -> None:
    if drop_lock_index:
        await async_store.records_collection.drop_index(q.LOCK_ID_INDEX_NAME)
    async_store._db = _WireVersionProxy(async_store._db, wire_version)  # type: ignore[assignment]
    assert (await async_store.capabilities()).claim_path == expected


async def test_forced_claim_path(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    store = AsyncMongoJobStore(
        async_mongo_client, mongo_database_name, claim_path="find_one_and_update"
    )
    assert (await store.capabilities()).claim_path == "find_one_and_update"


# ---------------------------------------------------------------------------------------------
# Stored documents: Dogs' fields and BSON types (dogs-schema.json examples)
# ---------------------------------------------------------------------------------------------


async def _types(collection: Any, document_id: str) -> dict[str, str]:
    document = await collection.find_one({"_id": document_id})
    assert document is not None
    projection = {field: {"$type": f"${field}"} for field in document}
    pipeline = [{"$match": {"_id": document_id}}, {"$project": projection}]
    cursor = await collection.aggregate(pipeline)
    [types] = await cursor.to_list(None)
    return {field: types[field] for field in document}


async def test_stored_bson_types_match_dogs(async_store: AsyncMongoJobStore) -> None:
    records = async_store.records_collection
    job = _job(
        "echo", partition=0, uid="dump-unique-1", params={"n": 1.5, "tags": ["a", "b"]}, priority=7
    )
    assert await async_store.insert_job(job) == Scheduled(job.id)
    pending_types = await _types(records, job.id)
    assert pending_types == {  # examples.pendingEventScheduleJob
        "_id": "string",
        "jobName": "string",
        "type": "string",
        "priority": "int",
        "uniqueIdentifier": "string",
        "nextRunAt": "date",
        "partition": "int",
        "params": "object",
    }
    stored = await records.find_one({"_id": job.id})
    assert stored is not None
    assert list(stored) == list(pending_types)  # Dogs' field order
    bare = _job("noop", partition=3)
    await async_store.insert_jobs([bare])
    assert (await _types(records, bare.id))["params"] == "null"  # pendingEventNoParams

    claimed = await async_store.claim(_request("echo", partition=0))
    assert claimed is not None
    assert await _types(records, job.id) == {  # examples.lockedEvent
        **pending_types,
        "lastRunAt": "date",
        "lockId": "string",
        "lockedUntil": "date",
        "tries": "int",
    }
    assert await settle_one(
        async_store, job.id, claimed.lock_id, terminal(T0, expires_at=T0 + timedelta(days=7))
    )
    assert await _types(records, job.id) == {  # examples.maxTriesReached
        **pending_types,
        "lastRunAt": "date",
        "tries": "int",
        "status": "string",
        "maxTriesReachedAt": "date",
        "expiresAt": "date",
    }

    await async_store.ensure_recurrent("cronTick", priority=100, partition=3, now=T0)
    [tick] = await async_store.find_records(job_name="cronTick")
    tick_claim = await async_store.claim(_request("cronTick", partition=3))
    assert tick_claim is not None
    assert await settle_one(
        async_store,
        tick.id,
        tick_claim.lock_id,
        rescheduled(T0 + timedelta(hours=1), priority=100, reset_tries=True),
    )
    assert await _types(records, tick.id) == {  # examples.recurrent
        "_id": "string",
        "jobName": "string",
        "type": "string",
        "priority": "int",
        "nextRunAt": "date",
        "partition": "int",
        "lastRunAt": "date",
        "tries": "int",
    }

    execution = HistoryRecord(
        execution_id=claimed.execution_id,
        job_id=job.id,
        job_name="echo",
        type=JobType.EVENT,
        priority=200,
        tries=1,
        started_at=T0,
        ended_at=T0 + timedelta(milliseconds=5),
        status=HistoryStatus.SUCCESS,
        expires_at=T0 + timedelta(days=7),
        params={"x": 2},
        result={"echoed": {"x": 2}},
        unique_identifier="dump-echo-2",
    )
    await async_store.write_history_many([execution])
    history = async_store.history_collection
    [row] = await history.find({}).to_list(None)
    assert await _types(history, row["_id"]) == {  # examples.historySuccessEvent, then ours
        "_id": "string",
        "executionId": "string",
        "duration": "int",
        "endedAt": "date",
        "errorMessage": "null",
        "expiresAt": "date",
        "jobId": "string",
        "jobName": "string",
        "params": "object",
        "priority": "int",
        "result": "object",
        "startedAt": "date",
        "status": "string",
        "tries": "int",
        "type": "string",
        "uniqueIdentifier": "string",
        "wasStale": "bool",  # the additive fields (docs/differences.md)
        "errorType": "null",
        "errorTraceback": "null",
        "owner": "null",
    }
    assert len(row["_id"]) == 36  # a UUID string, named after the execution (one row each)
    assert row["_id"] == q.history_row_id(row["executionId"])


# ---------------------------------------------------------------------------------------------
# Scheduling
# ---------------------------------------------------------------------------------------------


async def test_concurrent_bulk_schedulers_with_overlapping_identifiers(
    async_store: AsyncMongoJobStore,
) -> None:
    """Dogs' repo test: 4 callers x 250 overlapping identifiers -> 250 scheduled, 750 skipped."""
    results = []

    async def schedule_all() -> None:
        jobs = [_job(partition=i % 4, uid=f"u{i}", params={"i": i}) for i in range(250)]
        results.append(await async_store.insert_jobs(jobs))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(schedule_all)
    assert sum(r.scheduled_count for r in results) == 250
    assert sum(r.skipped_count for r in results) == 750
    assert [r.errors for r in results] == [()] * 4
    records = await async_store.find_records(limit=1000)
    assert len(records) == 250
    assert len({r.unique_identifier for r in records}) == 250
    owners = {r.unique_identifier: r.id for r in records}
    for result in results:
        for outcome in result.outcomes:
            if isinstance(outcome, Duplicate):
                assert outcome.existing_id == owners[outcome.unique_identifier]
            else:
                assert isinstance(outcome, Scheduled)


async def test_schedule_many_item_errors_do_not_block_the_others(
    async_store: AsyncMongoJobStore,
) -> None:
    existing = _job(uid="taken")
    await async_store.insert_job(existing)
    jobs = [
        _job(params={"ok": 1}),
        _job(params={"blob": "x" * q.MAX_BSON_DOCUMENT_SIZE}),  # over 16 MiB: never sent
        _job(uid="fresh"),
        _job(params={"bad": object()}),  # not BSON
        _job(uid="taken", params={"other": True}),
        _job(),
    ]
    result = await async_store.insert_jobs(jobs)
    assert (result.scheduled_count, result.skipped_count) == (3, 1)
    assert [(error.index, type(error.error)) for error in result.errors] == [
        (1, InvalidParamsError),
        (3, InvalidParamsError),
    ]
    assert result.errors[0].job is jobs[1]
    assert result.outcomes == (
        Scheduled(jobs[0].id),
        None,
        Scheduled(jobs[2].id),
        None,
        Duplicate(existing.id, "taken"),
        Scheduled(jobs[5].id),
    )
    assert len(await async_store.find_records()) == 4


async def test_schedule_refuses_a_record_over_16_mib(async_store: AsyncMongoJobStore) -> None:
    with pytest.raises(InvalidParamsError, match="16777216-byte BSON document limit"):
        await async_store.insert_job(_job(params={"blob": "x" * q.MAX_BSON_DOCUMENT_SIZE}))
    assert await async_store.find_records() == []


async def test_ensure_recurrent_leaves_event_records_of_that_name_alone(
    async_store: AsyncMongoJobStore,
) -> None:
    event = _job("report", partition=1, priority=3)
    await async_store.insert_job(event)
    await async_store.ensure_recurrent("report", priority=100, partition=2, now=T0)
    records = {r.type: r for r in await async_store.find_records(job_name="report")}
    assert set(records) == {JobType.EVENT, JobType.RECURRENT}
    assert records[JobType.EVENT].priority == 3
    assert (records[JobType.RECURRENT].partition, records[JobType.RECURRENT].next_run_at) == (
        2,
        T0,
    )


# ---------------------------------------------------------------------------------------------
# Reconciler, probe, write concern
# ---------------------------------------------------------------------------------------------


def test_reconciler_never_moves_a_job_claimed_after_its_scan(sync_store: MongoJobStore) -> None:
    """The compare-and-set repeats the scan's conditions: a claim between the scan and the
    update makes the update match nothing."""
    job = _job(partition=-1)
    sync_store.insert_job(job)
    raced: list[Any] = []

    def claim_then_choose() -> int:
        # Runs after the scan, before the bulk update: another worker claims the record. Its
        # partition is invalid, so seed it valid for the claim and then make it invalid again.
        records = sync_store.records_collection
        records.update_one({"_id": job.id}, {"$set": {"partition": 0}})
        raced.append(sync_store.claim(_request(partition=0)))
        records.update_one({"_id": job.id}, {"$set": {"partition": -1}})
        return 1

    modified = sync_store.reconcile_partitions(
        job_names=["a"], n_partitions=2, now=T0, limit=10, choose_partition=claim_then_choose
    )
    assert raced[0] is not None
    assert modified == 0
    record = sync_store.get_record(job.id)
    assert record is not None
    assert (record.partition, record.lock_id) == (-1, raced[0].lock_id)


def test_reconciler_refuses_a_partition_out_of_range(sync_store: MongoJobStore) -> None:
    sync_store.insert_job(_job(partition=-1))
    with pytest.raises(InvalidOptionError, match=r"^choose_partition\(\) returned 2, outside") as e:
        sync_store.reconcile_partitions(
            job_names=["a"], n_partitions=2, now=T0, limit=10, choose_partition=lambda: 2
        )
    assert (e.value.field, e.value.value) == ("choose_partition", 2)


async def test_probe_explains_the_claim_query_with_each_hint(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
) -> None:
    store = AsyncMongoJobStore(recorded_client, mongo_database_name)
    await store.setup()
    await store.insert_jobs([_job(partition=p % 2, priority=p) for p in range(20)])
    recorder.commands.clear()
    for hint in ("byJobName", "globalPriority"):
        millis = await store.probe(hint=hint, job_names=["a"], partition=1, now=T0)
        assert isinstance(millis, float)
        assert math.isfinite(millis)
        assert millis >= 0
    explains = [body for name, body in recorder.commands if name == "explain"]
    assert [body["explain"]["hint"] for body in explains] == [
        q.hint_spec("byJobName"),
        q.hint_spec("globalPriority"),
    ]
    assert all(body["explain"]["maxTimeMS"] == 1000 for body in explains)
    assert all(body["verbosity"] == "executionStats" for body in explains)
    with pytest.raises(ValueError, match="unknown acquisition hint"):
        await store.probe(hint="fastest", job_names=["a"], partition=1, now=T0)


async def test_claims_and_fenced_writes_use_the_configured_write_concern(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
) -> None:
    store = AsyncMongoJobStore(
        recorded_client, mongo_database_name, write_concern=WriteConcern(w=1, j=False)
    )
    await store.setup()
    job = _job()
    await store.insert_job(job)
    recorder.commands.clear()
    claimed = await store.claim(_request())
    assert claimed is not None
    assert await store.extend_lock(job.id, claimed.lock_id, T0 + timedelta(hours=1))
    assert await settle_one(store, job.id, claimed.lock_id, completed())
    concerns = {
        name: body.get("writeConcern")
        for name, body in recorder.commands
        if name in ("findAndModify", "update", "delete")
    }
    assert concerns == {
        "findAndModify": {"w": 1, "j": False},
        "update": {"w": 1, "j": False},
        "delete": {"w": 1, "j": False},
    }


async def test_history_rows_use_their_own_write_concern(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
) -> None:
    store = AsyncMongoJobStore(
        recorded_client,
        mongo_database_name,
        write_concern=WriteConcern(w="majority"),
        history_write_concern=WriteConcern(w=1),
    )
    await store.setup()
    job = _job()
    await store.insert_job(job)
    claimed = await store.claim(_request())
    assert claimed is not None
    recorder.commands.clear()
    assert await settle_one(store, job.id, claimed.lock_id, completed())
    row = HistoryRecord(
        execution_id=claimed.execution_id,
        job_id=job.id,
        job_name=job.job_name,
        type=JobType.EVENT,
        priority=job.priority,
        tries=1,
        started_at=T0,
        ended_at=T0 + timedelta(seconds=1),
        status=HistoryStatus.SUCCESS,
        expires_at=T0 + timedelta(days=7),
    )
    await store.write_history_many([row])
    concerns = {
        (name, body.get(name)): body.get("writeConcern")
        for name, body in recorder.commands
        if name in ("delete", "update", "insert")
    }
    records, history = store.records_collection.name, store.history_collection.name
    assert concerns[("delete", records)] == {"w": "majority"}
    assert [c for (_, coll), c in concerns.items() if coll == history] == [{"w": 1}], concerns
    assert [r.execution_id for r in await store.read_history(job.job_name)] == [
        claimed.execution_id
    ]


# ---------------------------------------------------------------------------------------------
# Transient errors from the server (failCommand fail point)
# ---------------------------------------------------------------------------------------------


async def test_write_conflict_on_a_claim_is_transient_and_not_applied(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    await async_store.capabilities()
    await async_store.insert_job(_job())
    fail_point({"failCommands": ["findAndModify"], "errorCode": 112})
    with pytest.raises(TransientStoreError, match=r"'code': 112") as raised:
        await async_store.claim(_request())
    assert raised.value.write_may_have_applied is False
    assert await async_store.claim(_request()) is not None  # the retry succeeds


async def test_a_dropped_connection_on_a_write_is_transient_and_may_have_applied(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    job = _job()
    await async_store.insert_job(job)
    claimed = await async_store.claim(_request())
    assert claimed is not None
    # Twice: PyMongo's retryable write retries once by itself.
    fail_point({"failCommands": ["update"], "closeConnection": True}, times=2)
    with pytest.raises(TransientStoreError) as raised:
        await async_store.extend_lock(job.id, claimed.lock_id, T0 + timedelta(hours=1))
    assert raised.value.write_may_have_applied is True


async def test_a_step_down_on_a_write_is_transient(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    fail_point({"failCommands": ["insert"], "errorCode": 10107}, times=2)  # NotWritablePrimary
    with pytest.raises(TransientStoreError) as raised:
        await async_store.insert_job(_job())
    assert raised.value.write_may_have_applied is False


async def test_a_probe_timeout_is_transient_and_a_bad_explain_is_not(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    fail_point({"failCommands": ["explain"], "errorCode": 50})  # MaxTimeMSExpired
    with pytest.raises(TransientStoreError):
        await async_store.probe(hint="byJobName", job_names=["a"], partition=0, now=T0)
    fail_point({"failCommands": ["explain"], "errorCode": 2})  # BadValue
    with pytest.raises(OperationFailure):
        await async_store.probe(hint="byJobName", job_names=["a"], partition=0, now=T0)


class _RacingCollection:
    """The records collection, where the first upsert loses a race to another instance."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.calls = 0

    async def update_one(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            # The other instance inserted the record between our query and our insert.
            await self._collection.insert_one(
                {"_id": new_record_id(), "jobName": "tick", "type": "recurrent", "priority": 1}
            )
            raise DuplicateKeyError("E11000 duplicate key error (index: jobName_1)", 11000)
        return await self._collection.update_one(*args, **kwargs)


async def test_a_duplicate_key_race_in_ensure_recurrent_is_retried(
    async_store: AsyncMongoJobStore,
) -> None:
    records = async_store.records_collection
    racing = _RacingCollection(records)
    async_store._records = racing  # type: ignore[assignment]
    await async_store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
    assert racing.calls == 2  # the retry updated the winner's record
    assert [(doc["priority"], doc["type"]) for doc in await records.find().to_list(None)] == [
        (100, "recurrent")
    ]


async def test_ensure_recurrent_retries_a_duplicate_key_error_once(
    async_store: AsyncMongoJobStore,
) -> None:
    class Failing:
        calls = 0

        async def update_one(self, *args: Any, **kwargs: Any) -> Any:
            Failing.calls += 1
            raise DuplicateKeyError("E11000 duplicate key error (index: jobName_1)", 11000)

    async_store._records = Failing()  # type: ignore[assignment]
    with pytest.raises(DuplicateKeyError):
        await async_store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
    assert Failing.calls == 2


async def test_probe_result_without_a_time_is_a_store_error(
    async_store: AsyncMongoJobStore,
) -> None:
    class NoStats:
        def __init__(self, database: Any) -> None:
            self._database = database
            self.codec_options = database.codec_options

        async def command(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return {"queryPlanner": {}}

    async_store._db = NoStats(async_store._db)  # type: ignore[assignment]
    with pytest.raises(StoreError, match="executionTimeMillis"):
        await async_store.probe(hint="byJobName", job_names=["a"], partition=0, now=T0)


# ---------------------------------------------------------------------------------------------
# claim_many: the commands, races, and failures of the bulk write
# ---------------------------------------------------------------------------------------------


def _batch(count: int, *names: str, partition: int = 0, now: datetime = T0) -> list[ClaimRequest]:
    template = _request(*names, partition=partition, now=now)
    return [dataclasses.replace(template, lock_id=new_execution_id()) for _ in range(count)]


@pytest.mark.parametrize("claim_path", ["find_one_and_update", "sorted_update_one"])
async def test_claim_many_sends_a_find_and_one_bulk_update(
    recorded_client: AsyncMongoClient[dict[str, Any]],
    recorder: Recorder,
    mongo_database_name: str,
    claim_path: str,
) -> None:
    # The forced claim path changes nothing: claim_many uses pipeline updates on every server.
    store = AsyncMongoJobStore(recorded_client, mongo_database_name, claim_path=claim_path)
    await store.setup()
    jobs = [_job(priority=p) for p in (3, 2, 1)]
    await store.insert_jobs(jobs)
    requests = _batch(5)
    recorder.commands.clear()
    claimed = await store.claim_many(requests)
    assert [job.job_id for job in claimed] == [job.id for job in jobs]
    assert [job.lock_id for job in claimed] == [request.lock_id for request in requests[:3]]
    # Every candidate was locked as read: the claims are built from the scan, no read-back.
    (find, scan), (update, bulk) = recorder.commands
    assert (find, update) == ("find", "update")
    assert scan["filter"] == q.eligible_filter(("a",), 0, T0)
    assert (scan["sort"], scan["hint"], scan["limit"]) == (
        {"priority": -1, "nextRunAt": 1},
        {"partition": 1, "priority": -1, "nextRunAt": 1},
        5,
    )
    assert "projection" not in scan  # whole documents: each claim's before-image
    assert bulk["ordered"] is False
    assert [(u["q"]["_id"], u["hint"]) for u in bulk["updates"]] == [
        (job.id, {"_id": 1}) for job in jobs
    ]
    assert bulk["updates"][0]["u"]["$set"]["lockId"] == requests[0].lock_id
    # Built from the scan, each claim is what the store then holds (as a read-back reads it).
    read_back = await store.records_collection.find({"_id": {"$in": [j.id for j in jobs]}}).to_list(
        None
    )
    by_lock = {doc["lockId"]: doc for doc in read_back}
    assert claimed == [q.claim_from_read_back(r, by_lock[r.lock_id]) for r in requests[:3]]
    recorder.commands.clear()
    assert await store.claim_many(_batch(5)) == []
    assert recorder.names() == ["find"]  # a miss costs one read and no write
    await store.close()


class _Intercepted:
    """The records collection with hooks around ``bulk_write`` and ``find``."""

    def __init__(
        self,
        collection: Any,
        *,
        before_write: Any = None,
        error_after_write: Exception | None = None,
        finds_before_error: int | None = None,
    ) -> None:
        self._collection = collection
        self._before_write = before_write
        self._error_after_write = error_after_write
        self._finds_left = finds_before_error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def bulk_write(self, *args: Any, **kwargs: Any) -> Any:
        if self._before_write is not None:
            await self._before_write()
        result = await self._collection.bulk_write(*args, **kwargs)
        if self._error_after_write is not None:
            raise self._error_after_write
        return result

    def find(self, *args: Any, **kwargs: Any) -> Any:
        if self._finds_left is not None:
            if self._finds_left == 0:
                raise AutoReconnect("connection closed")
            self._finds_left -= 1
        return self._collection.find(*args, **kwargs)


async def test_claim_many_skips_a_candidate_another_claimer_took_in_between(
    async_store: AsyncMongoJobStore,
) -> None:
    jobs = [_job(priority=p) for p in (3, 2, 1)]
    await async_store.insert_jobs(jobs)
    other: list[Any] = []

    async def race() -> None:  # after the candidate scan, before the bulk write
        other.append(await async_store.claim(_request()))

    async_store._fenced = _Intercepted(async_store._fenced, before_write=race)  # type: ignore[assignment]
    claimed = await async_store.claim_many(_batch(3))
    [taken] = other
    assert taken is not None
    assert taken.job_id == jobs[0].id
    assert [job.job_id for job in claimed] == [jobs[1].id, jobs[2].id]
    record = await async_store.get_record(jobs[0].id)
    assert record is not None
    assert (record.lock_id, record.tries) == (taken.lock_id, 1)  # not claimed twice


async def test_claim_many_returns_what_a_write_with_a_lost_reply_claimed(
    async_store: AsyncMongoJobStore,
) -> None:
    jobs = [_job(priority=p) for p in (2, 1)]
    await async_store.insert_jobs(jobs)
    fenced = async_store._fenced
    async_store._fenced = _Intercepted(  # type: ignore[assignment]
        fenced, error_after_write=AutoReconnect("connection closed")
    )
    requests = _batch(3)
    claimed = await async_store.claim_many(requests)
    assert [(job.job_id, job.lock_id, job.tries) for job in claimed] == [
        (jobs[0].id, requests[0].lock_id, 1),
        (jobs[1].id, requests[1].lock_id, 1),
    ]
    # When the read-back fails too, the write's error is raised: it may have applied.
    await async_store.insert_job(_job(priority=0))
    primary = async_store._primary
    async_store._primary = _Intercepted(primary, finds_before_error=1)  # type: ignore[assignment]
    with pytest.raises(TransientStoreError, match="claim_many failed") as raised:
        await async_store.claim_many(_batch(3))
    assert raised.value.write_may_have_applied is True
    assert isinstance(raised.value.__cause__, AutoReconnect)


async def test_claim_many_whose_read_back_fails_after_a_write_reports_it_may_have_applied(
    async_store: AsyncMongoJobStore,
) -> None:
    job, moved = _job(priority=2), _job(priority=1)
    await async_store.insert_jobs([job, moved])

    async def change_one() -> None:  # after the scan: one candidate is no longer as read
        await async_store.records_collection.update_one(
            {"_id": moved.id}, {"$set": {"priority": 7}}
        )

    async_store._fenced = _Intercepted(async_store._fenced, before_write=change_one)  # type: ignore[assignment]
    # The scan, then the read-back of what the write took (one of two): it fails.
    async_store._primary = _Intercepted(async_store._primary, finds_before_error=1)  # type: ignore[assignment]
    with pytest.raises(TransientStoreError, match="could not be read back") as raised:
        await async_store.claim_many(_batch(2))
    assert raised.value.write_may_have_applied is True
    stored = await async_store.records_collection.find_one({"_id": job.id})
    assert stored is not None
    assert stored["tries"] == 1  # claimed: recovered as stale when its lock expires


async def test_a_write_conflict_on_claim_many_is_transient_and_not_applied(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    job = _job()
    await async_store.insert_job(job)
    fail_point({"failCommands": ["update"], "errorCode": 112})
    with pytest.raises(TransientStoreError, match=r"'code': 112") as raised:
        await async_store.claim_many(_batch(2))
    assert raised.value.write_may_have_applied is False
    record = await async_store.get_record(job.id)
    assert record is not None
    assert record.lock_id is None
    assert len(await async_store.claim_many(_batch(2))) == 1  # the retry succeeds


async def test_claim_many_returns_its_claims_after_a_write_concern_error(
    async_store: AsyncMongoJobStore, fail_point: Any
) -> None:
    jobs = [_job(priority=p) for p in (2, 1)]
    await async_store.insert_jobs(jobs)
    fail_point(
        {
            "failCommands": ["update"],
            "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"},
        }
    )
    claimed = await async_store.claim_many(_batch(2))
    assert [job.job_id for job in claimed] == [job.id for job in jobs]


async def test_claim_many_claims_around_a_record_it_cannot_update(
    async_store: AsyncMongoJobStore,
) -> None:
    poison, good = _job(priority=2), _job(priority=1)
    await async_store.insert_jobs([poison, good])
    # `tries` that is not a number: the pipeline's $add fails for this record only.
    await async_store.records_collection.update_one({"_id": poison.id}, {"$set": {"tries": "x"}})
    claimed = await async_store.claim_many(_batch(2))
    assert [job.job_id for job in claimed] == [good.id]
    with pytest.raises(BulkWriteError):
        await async_store.claim_many(_batch(2))  # only the poison record is left: raised
    stored = await async_store.records_collection.find_one({"_id": poison.id})
    assert stored is not None
    assert "lockId" not in stored
