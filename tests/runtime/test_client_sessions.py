"""``schedule(..., session=...)`` and ``schedule_many(..., session=...)`` without a database: the
checks of the argument, the retries (kept outside a transaction, none inside one), the store
wrappers passing the session on, and the in-memory store's refusal.

Transactions on a real MongoDB are in ``tests/mongo/test_transactions.py``. Every behavioural
test runs with both clients, as in ``test_client.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from dogs_core.domain.records import (
    BulkScheduleResult,
    JobRecord,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.errors import (
    InvalidOptionError,
    SessionNotSupportedError,
    StoreError,
    TransientStoreError,
)
from dogs_core.runtime import DogsClient, ScheduleItem, SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.plumbing._sync import retry as sync_retry
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore
from dogs_testing.wrapper import JobStoreWrapper
from tests.runtime.conftest import Harness, RecordingStore
from tests.runtime.test_client import FlakyInserts, client_of, registry

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class FakeSession:
    """Looks like a PyMongo session to the client: it has ``in_transaction``."""

    in_transaction: bool


class JoiningStore(FlakyInserts):
    """A flaky store that joins sessions, as a MongoDB store does: it records the session of
    every insert and the read-backs the client makes."""

    def __init__(self, *, before: int = 0, after: int = 0) -> None:
        super().__init__(before=before, after=after)
        self.sessions: list[object | None] = []
        self.reads: list[str] = []

    def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        self.sessions.append(session)
        return super().insert_job(job)

    def insert_jobs(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        self.sessions.append(session)
        return super().insert_jobs(jobs)

    def get_record(self, job_id: str) -> JobRecord | None:
        self.reads.append("get_record")
        return super().get_record(job_id)


@pytest.fixture(params=["async", "sync"])
def flavor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The client's flavor; the sync client's backoff sleeps are skipped."""
    frozen = SimpleNamespace(sleep=lambda seconds: None, monotonic=lambda: 0.0)
    monkeypatch.setattr(sync_retry, "time", frozen)
    return str(request.param)


def joining_harness(**faults: int) -> tuple[Harness, JoiningStore]:
    store = JoiningStore(**faults)
    return Harness(registry(), store=RecordingStore(sync=store)), store


# ----------------------------------------------------------------------------------------------
# Retries: outside a transaction as without a session, none inside one
# ----------------------------------------------------------------------------------------------


async def test_a_session_outside_a_transaction_is_joined_and_retried(flavor: str) -> None:
    h, store = joining_harness(before=2)
    session = FakeSession(in_transaction=False)
    outcome = await client_of(h, flavor).schedule("job", unique_key="k", session=session)
    assert isinstance(outcome, Scheduled)
    assert [r.id for r in h.store.records()] == [outcome.id]
    assert store.calls == ["insert_job"] * 3
    assert store.sessions == [session] * 3


async def test_a_lost_reply_outside_a_transaction_is_read_back(flavor: str) -> None:
    h, store = joining_harness(after=1)
    await client_of(h, flavor).schedule("job", session=FakeSession(in_transaction=False))
    assert store.calls == ["insert_job"]
    assert store.reads == ["get_record"]


async def test_in_a_transaction_a_transient_error_propagates_at_once(flavor: str) -> None:
    h, store = joining_harness(before=1)
    with pytest.raises(TransientStoreError, match="no primary"):
        await client_of(h, flavor).schedule("job", session=FakeSession(in_transaction=True))
    assert store.calls == ["insert_job"], "the caller's with_transaction retries, not the client"
    assert h.store.records() == []


async def test_in_a_transaction_a_lost_reply_is_not_read_back(flavor: str) -> None:
    h, store = joining_harness(after=1)
    with pytest.raises(TransientStoreError, match="connection reset"):
        await client_of(h, flavor).schedule("job", session=FakeSession(in_transaction=True))
    assert store.calls == ["insert_job"]
    assert store.reads == [], "a read inside an aborted transaction would mislead"


async def test_in_a_transaction_an_ambiguous_bulk_insert_propagates(flavor: str) -> None:
    h, store = joining_harness(after=1)
    session = FakeSession(in_transaction=True)
    with pytest.raises(TransientStoreError):
        await client_of(h, flavor).schedule_many("job", [{}, {}], session=session)
    assert store.calls == ["insert_jobs"], "not settled one by one"
    assert store.sessions == [session]


async def test_outside_a_transaction_an_ambiguous_bulk_insert_is_settled_in_the_session(
    flavor: str,
) -> None:
    h, store = joining_harness(after=1)
    session = FakeSession(in_transaction=False)
    result = await client_of(h, flavor).schedule_many(
        "job", [ScheduleItem(unique_key="a"), ScheduleItem(unique_key="b")], session=session
    )
    assert (result.scheduled_count, result.skipped_count) == (2, 0)
    assert store.calls == ["insert_jobs", "insert_job", "insert_job"]
    assert store.sessions == [session] * 3


async def test_without_a_session_the_store_gets_none(flavor: str) -> None:
    h, store = joining_harness()
    client = client_of(h, flavor)
    await client.schedule("job")
    await client.schedule_many("job", [{}])
    assert store.sessions == [None, None]


# ----------------------------------------------------------------------------------------------
# Refused sessions
# ----------------------------------------------------------------------------------------------


class AnswersAnything:
    """Like a ``MongoClient`` or a ``Database``: any attribute exists (a database, a
    collection), ``in_transaction`` too."""

    def __getattr__(self, name: str) -> object:
        return object()


@pytest.mark.parametrize(
    "value",
    ["session", 1, object(), {"in_transaction": True}, AnswersAnything()],
    ids=["str", "int", "object", "dict", "client-like"],
)
async def test_a_value_that_is_not_a_session_is_refused(flavor: str, value: object) -> None:
    h, store = joining_harness()
    client = client_of(h, flavor)
    with pytest.raises(InvalidOptionError) as raised:
        await client.schedule("job", session=value)
    assert raised.value.field == "session"
    assert isinstance(raised.value, ValueError)
    with pytest.raises(InvalidOptionError, match=r"^session="):
        await client.schedule_many("job", [{}], session=value)
    assert store.calls == []
    assert h.store.records() == []


@pytest.mark.parametrize("in_transaction", [False, True])
async def test_the_in_memory_store_refuses_a_session_and_writes_nothing(
    flavor: str, in_transaction: bool
) -> None:
    h = Harness(registry())
    client = client_of(h, flavor)
    session = FakeSession(in_transaction)
    with pytest.raises(SessionNotSupportedError, match="no transactions") as raised:
        await client.schedule("job", unique_key="k", session=session)
    assert isinstance(raised.value, StoreError)
    assert isinstance(raised.value, TypeError)
    with pytest.raises(SessionNotSupportedError):
        await client.schedule_many("job", [{}, {"unique_key": "k"}], session=session)
    assert h.store.records() == []
    # The refusal is the store's own, whoever calls it.
    with pytest.raises(SessionNotSupportedError):
        SyncInMemoryJobStore().insert_jobs([], session=session)


# ----------------------------------------------------------------------------------------------
# Wrappers pass the session on; the blocking client has it from the sync client
# ----------------------------------------------------------------------------------------------


async def test_store_wrappers_pass_the_session_on() -> None:
    session = FakeSession(in_transaction=True)
    threaded_inner = JoiningStore()
    wrapped_inner = JoiningStore()
    for store in (
        ThreadedJobStore(threaded_inner),
        JobStoreWrapper(InMemoryJobStore(sync=wrapped_inner)),
    ):
        client = DogsClient(store, registry())
        await client.schedule("job", session=session)
        await client.schedule_many("job", [{}], session=session)
    assert threaded_inner.sessions == [session, session]
    assert wrapped_inner.sessions == [session, session]


def test_the_blocking_client_passes_the_session_on() -> None:
    session = FakeSession(in_transaction=True)
    sync_inner, async_inner = JoiningStore(), JoiningStore()
    for store in (sync_inner, InMemoryJobStore(sync=async_inner)):
        with BlockingDogsClient(store, registry()) as client:
            assert isinstance(client, SyncDogsClient)
            client.schedule("job", session=session)
            client.schedule_many("job", [{}], session=session)
            with pytest.raises(InvalidOptionError):
                client.schedule("job", session="not a session")
    assert sync_inner.sessions == [session, session]
    assert async_inner.sessions == [session, session]
