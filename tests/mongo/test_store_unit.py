"""Store logic that needs no server: claim-path choice, the sorted-claim commands (MongoDB 8)
through a recording fake, input checks, transient errors from an unreachable server, and the
error of a server without transactions."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient, ReturnDocument
from pymongo.errors import OperationFailure
from pymongo.write_concern import WriteConcern

from dogs_core.domain.records import ClaimRequest, JobState, NewJob
from dogs_core.errors import (
    InvalidOptionError,
    InvalidParamsError,
    MissingRoleError,
    StoreUnavailableError,
    TransactionsNotSupportedError,
    TransientStoreError,
)
from dogs_core.ports import AsyncJobStore, JobStore, StoreCapabilities
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.queries.claims import choose_claim_path

NOW = datetime(2100, 1, 1, tzinfo=UTC)


def _request() -> ClaimRequest:
    return ClaimRequest(
        job_names=("a", "b"),
        partition=3,
        hint="globalPriority",
        now=NOW,
        locked_until=NOW + timedelta(seconds=30),
        lock_id="LOCKLOCKLOCKLOCK1",
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def unconnected_client(anyio_backend: object) -> AsyncIterator[AsyncMongoClient[Any]]:
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{_closed_port()}/?directConnection=true",
        serverSelectionTimeoutMS=100,
        connect=False,
    )
    yield client
    await client.close()


@dataclass
class _Result:
    matched_count: int


class RecordingCollection:
    """Stands for the records collection: records calls, returns canned results."""

    def __init__(self, matched: int, read_back: dict[str, Any] | None) -> None:
        self.matched = matched
        self.read_back = read_back
        self.calls: list[tuple[str, Any, Any, dict[str, Any]]] = []

    async def update_one(self, filter_: Any, update: Any, **options: Any) -> _Result:
        self.calls.append(("update_one", filter_, update, options))
        return _Result(self.matched)

    async def find_one(self, filter_: Any, *args: Any, **options: Any) -> dict[str, Any] | None:
        self.calls.append(("find_one", filter_, args, options))
        return self.read_back

    async def find_one_and_update(
        self, filter_: Any, update: Any, **options: Any
    ) -> dict[str, Any] | None:
        self.calls.append(("find_one_and_update", filter_, update, options))
        return self.read_back


def _store_with_fake(
    client: AsyncMongoClient[Any], fake: RecordingCollection, path: str
) -> AsyncMongoJobStore:
    store = AsyncMongoJobStore(client, "db")
    store._fenced = fake  # type: ignore[assignment]
    store._primary = fake  # type: ignore[assignment]
    store._capabilities = StoreCapabilities(claim_path=path)
    return store


def test_choose_claim_path() -> None:
    assert choose_claim_path(25, True) == "sorted_update_one"
    assert choose_claim_path(27, True) == "sorted_update_one"
    assert choose_claim_path(25, False) == "find_one_and_update"  # no lockId index: fall back
    assert choose_claim_path(21, True) == "find_one_and_update"  # MongoDB 7
    assert choose_claim_path(17, True) == "find_one_and_update"  # MongoDB 6
    assert choose_claim_path(17, False, "sorted_update_one") == "sorted_update_one"


def test_the_claim_path_names_are_defined_once() -> None:
    from dogs_mongo import settings
    from dogs_mongo._async import store as async_store
    from dogs_mongo._sync import store as sync_store

    assert q.CLAIM_PATHS == ("auto", "sorted_update_one", "find_one_and_update")
    for module in (async_store, sync_store):
        assert module.CLAIM_PATH_SORTED_UPDATE_ONE is q.CLAIM_PATH_SORTED_UPDATE_ONE
        assert module.CLAIM_PATH_FIND_ONE_AND_UPDATE is q.CLAIM_PATH_FIND_ONE_AND_UPDATE
    assert settings.DogsSettings().claim_path == q.CLAIM_PATH_AUTO
    for path in q.CLAIM_PATHS:
        assert settings.DogsSettings.from_config({"claim_path": path}).claim_path == path
        client: MongoClient[Any] = MongoClient(connect=False)
        MongoJobStore(client, "db", claim_path=path)
        client.close()


def test_stores_implement_the_ports() -> None:
    client: MongoClient[Any] = MongoClient(connect=False)
    assert isinstance(MongoJobStore(client, "db"), JobStore)
    client.close()


@pytest.mark.anyio
async def test_async_store_implements_the_port(unconnected_client: AsyncMongoClient[Any]) -> None:
    assert isinstance(AsyncMongoJobStore(unconnected_client, "db"), AsyncJobStore)


@pytest.mark.anyio
async def test_store_options_are_checked(unconnected_client: AsyncMongoClient[Any]) -> None:
    with pytest.raises(InvalidOptionError, match="acknowledged") as refused:
        AsyncMongoJobStore(unconnected_client, "db", write_concern=WriteConcern(w=0))
    assert refused.value.field == "write_concern"
    with pytest.raises(InvalidOptionError) as refused:
        AsyncMongoJobStore(unconnected_client, "db", claim_path="fastest")
    assert str(refused.value) == (
        "claim_path='fastest': must be one of auto, sorted_update_one, find_one_and_update"
    )
    store = AsyncMongoJobStore(
        unconnected_client, "db", records_collection="r", history_collection="h"
    )
    assert (store.records_collection.name, store.history_collection.name) == ("r", "h")
    assert store.records_collection.codec_options.tz_aware


@pytest.mark.anyio
async def test_sorted_claim_sends_update_one_with_sort_and_hint_then_reads_back_by_lock_id(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    request = _request()
    read_back = {
        "_id": "r1",
        "jobName": "b",
        "type": "event",
        "priority": 100,
        "nextRunAt": NOW,
        "partition": 3,
        "params": {"x": 1},
        "lockId": request.lock_id,
        "lockedUntil": request.locked_until,
        "tries": 3,
        "claimWasStale": True,
    }
    fake = RecordingCollection(matched=1, read_back=read_back)
    store = _store_with_fake(unconnected_client, fake, "sorted_update_one")
    claimed = await store.claim(request)
    assert claimed is not None
    assert (claimed.job_id, claimed.tries, claimed.was_stale, claimed.lock_id) == (
        "r1",
        3,
        True,
        request.lock_id,
    )
    (_, filter_, update, options), (read, read_filter, _, _) = fake.calls
    command = q.sorted_update_one_claim(request)
    assert filter_ == command.filter
    assert filter_["partition"] == 3
    assert update == command.update
    assert isinstance(update, list)  # a pipeline update
    assert options == {
        "sort": {"priority": -1, "nextRunAt": 1},
        "hint": {"partition": 1, "priority": -1, "nextRunAt": 1},
    }
    assert (read, read_filter) == ("find_one", {"lockId": request.lock_id})


@pytest.mark.anyio
async def test_sorted_claim_with_an_empty_read_back_is_dropped(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    fake = RecordingCollection(matched=1, read_back=None)
    store = _store_with_fake(unconnected_client, fake, "sorted_update_one")
    assert await store.claim(_request()) is None
    assert [call[0] for call in fake.calls] == ["update_one", "find_one"]


@pytest.mark.anyio
async def test_sorted_claim_that_matched_nothing_reads_nothing(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    fake = RecordingCollection(matched=0, read_back=None)
    store = _store_with_fake(unconnected_client, fake, "sorted_update_one")
    assert await store.claim(_request()) is None
    assert [call[0] for call in fake.calls] == ["update_one"]


@pytest.mark.anyio
async def test_find_one_and_update_claim_returns_the_before_image(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    request = _request()
    before = {"_id": "r1", "jobName": "a", "type": "event", "priority": 1, "nextRunAt": NOW}
    fake = RecordingCollection(matched=0, read_back=before)
    store = _store_with_fake(unconnected_client, fake, "find_one_and_update")
    claimed = await store.claim(request)
    assert claimed is not None
    assert (claimed.tries, claimed.was_stale) == (1, False)
    [(name, filter_, update, options)] = fake.calls
    assert name == "find_one_and_update"
    assert filter_ == q.eligible_filter(("a", "b"), 3, NOW)
    assert update == q.claim_update(request)
    assert options == {
        "sort": [("priority", -1), ("nextRunAt", 1)],
        "hint": {"partition": 1, "priority": -1, "nextRunAt": 1},
        "return_document": ReturnDocument.BEFORE,
    }


@pytest.mark.anyio
async def test_claim_with_no_names_sends_nothing(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    fake = RecordingCollection(matched=1, read_back=None)
    store = _store_with_fake(unconnected_client, fake, "sorted_update_one")
    request = ClaimRequest((), 0, "byJobName", NOW, NOW, "L")
    assert await store.claim(request) is None
    assert fake.calls == []


@pytest.mark.anyio
async def test_unreachable_server_raises_transient_errors(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    store = AsyncMongoJobStore(unconnected_client, "db")
    with pytest.raises(StoreUnavailableError):  # no server to list the indexes of
        await store.setup()
    assert not store._setup_done  # ... so the next call tries again
    with pytest.raises(TransientStoreError) as raised:
        await store.claim(_request())
    assert raised.value.write_may_have_applied is False  # capability detection is a read
    job = NewJob(id="x", job_name="a", params=None, next_run_at=NOW, priority=1, partition=0)
    with pytest.raises(TransientStoreError) as raised:
        await store.insert_job(job)
    assert raised.value.write_may_have_applied is False  # no server was ever selected
    with pytest.raises(TransientStoreError):
        await store.get_record("x")


@pytest.mark.anyio
async def test_unstorable_params_are_refused_before_any_io(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    store = AsyncMongoJobStore(unconnected_client, "db")
    big = NewJob(
        id="big",
        job_name="a",
        params={"blob": "x" * (q.MAX_BSON_DOCUMENT_SIZE + 1)},
        next_run_at=NOW,
        priority=1,
        partition=0,
    )
    odd = NewJob(
        id="odd", job_name="a", params={"s": {1, 2}}, next_run_at=NOW, priority=1, partition=0
    )
    with pytest.raises(InvalidParamsError, match="BSON document limit"):
        await store.insert_job(big)
    with pytest.raises(InvalidParamsError, match="cannot be stored as a BSON document"):
        await store.insert_job(odd)
    result = await store.insert_jobs([big, odd])
    assert (result.scheduled_count, result.skipped_count) == (0, 0)
    assert [(e.index, type(e.error)) for e in result.errors] == [
        (0, InvalidParamsError),
        (1, InvalidParamsError),
    ]
    assert result.outcomes == (None, None)


@pytest.mark.anyio
async def test_operator_calls_refuse_bad_input_before_any_io(
    unconnected_client: AsyncMongoClient[Any],
) -> None:
    """Every refusal below is raised before a server is selected (the client has none)."""
    store = AsyncMongoJobStore(unconnected_client, "db")
    refusals: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("now", lambda: store.find_records(state=JobState.DUE)),
        ("state", lambda: store.find_records(state="nowhere", now=NOW)),  # type: ignore[arg-type]
        ("limit", lambda: store.find_records(limit=0)),
        ("after", lambda: store.find_records(after=5)),  # type: ignore[arg-type]
        ("job_name", lambda: store.find_records(job_name=b"a")),  # type: ignore[arg-type]
        ("state", lambda: store.delete_records(job_name=None, state=JobState.RUNNING, now=NOW)),
        (
            "dry_run",
            lambda: store.delete_records(job_name=None, state=JobState.DUE, now=NOW, dry_run=1),  # type: ignore[arg-type]
        ),
        ("job_id", lambda: store.delete_record(None)),  # type: ignore[arg-type]
        ("unless_failed", lambda: store.delete_record("j", unless_failed="yes")),  # type: ignore[arg-type]
        ("change", lambda: store.modify_record("j", {"priority": 1}, now=NOW)),  # type: ignore[arg-type]
        ("status", lambda: store.read_history("a", status="lost")),  # type: ignore[arg-type]
        ("job_name", lambda: store.read_history()),
    ]
    for field, call in refusals:
        with pytest.raises(InvalidOptionError) as refused:
            await call()
        assert refused.value.field == field, field
    assert await store.read_history("a", limit=0) == []  # nothing to read: nothing sent


def test_a_motor_client_is_refused_naming_what_to_use() -> None:
    # A stand-in with Motor's module path: Motor itself is not installed (it is not supported).
    motor_client = type("AsyncIOMotorClient", (), {"__module__": "motor.motor_asyncio"})()
    with pytest.raises(InvalidOptionError) as refused:
        AsyncMongoJobStore(motor_client, "db")
    assert refused.value.field == "client"
    assert refused.value.value == "motor.motor_asyncio.AsyncIOMotorClient"
    assert "pymongo.AsyncMongoClient" in str(refused.value)
    with pytest.raises(InvalidOptionError, match="Motor clients are not supported"):
        MongoJobStore(motor_client, "db")


@pytest.mark.anyio
async def test_a_server_without_transactions_is_told_apart_from_a_missing_role(
    unconnected_client: AsyncMongoClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store has the workflows role; it is the deployment (a standalone mongod) that lacks
    # transactions, so the error must say to run a replica set, not to add a role.
    store = AsyncMongoJobStore(unconnected_client, "db")

    def standalone() -> Any:
        raise OperationFailure(
            "Transaction numbers are only allowed on a replica set member or mongos", code=20
        )

    monkeypatch.setattr(unconnected_client, "start_session", standalone)
    with pytest.raises(TransactionsNotSupportedError, match="run a replica set") as raised:
        await store._transaction("start_workflow", lambda session: None)
    assert not isinstance(raised.value, MissingRoleError)
    assert str(raised.value).startswith("start_workflow: workflows need MongoDB transactions")
