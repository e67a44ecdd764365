"""Scheduling inside the caller's MongoDB transaction (``schedule(..., session=...)``), on the real
mongod (a single-node replica set: transactions work).

Most bodies run twice, through :class:`Side`: the async :class:`DogsClient` in an
``AsyncClientSession.with_transaction``, and the generated :class:`SyncDogsClient` in a
``ClientSession`` transaction driven by ``start_transaction`` / ``commit_transaction`` (a sync
``with_transaction`` callback cannot await; the sync ``with_transaction`` has tests of its own).
The application's own write is an order in an ``orders`` collection of the same database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import pytest
from pymongo import AsyncMongoClient, MongoClient

from dogs_core import (
    BlockingDogsClient,
    DogsClient,
    Duplicate,
    JobContext,
    Jobs,
    Scheduled,
    ScheduleItem,
    SyncDogsClient,
    Workers,
)
from dogs_core.errors import InvalidOptionError, SessionNotSupportedError
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_testing import InMemoryJobStore, SyncInMemoryJobStore
from tests.runtime.test_client import Awaited

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

T = TypeVar("T")


class OrderRejected(Exception):
    """Raised by a transaction body to abort it."""


def registry(confirmed: list[int]) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def confirm_order(params: dict[str, Any], ctx: JobContext) -> None:
        confirmed.append(params["order_id"])

    return jobs


@dataclass
class Side:
    """One flavor: a client, and the application's collection and sessions of the same driver."""

    flavor: str
    client: Any  # DogsClient, or Awaited(SyncDogsClient)
    mongo: Any  # AsyncMongoClient or MongoClient: the store's own client
    database: str
    confirmed: list[int] = field(default_factory=list)

    async def in_transaction(self, body: Callable[[Any], Awaitable[T]]) -> T:
        """``body(session)`` in a transaction, committed when it returns, aborted when it
        raises."""
        if self.flavor == "async":
            async with self.mongo.start_session() as session:
                result: T = await session.with_transaction(body)
                return result
        with self.mongo.start_session() as session:
            session.start_transaction()
            try:
                result = await body(session)
            except BaseException:
                session.abort_transaction()
                raise
            session.commit_transaction()
            return result

    async def insert_order(self, order: dict[str, Any], session: Any) -> None:
        inserted = self.mongo[self.database].orders.insert_one(order, session=session)
        if self.flavor == "async":
            await inserted

    async def orders(self) -> list[dict[str, Any]]:
        found = self.mongo[self.database].orders.find({}).to_list(None)
        return list(await found) if self.flavor == "async" else list(found)


@pytest.fixture(params=["async", "sync"])
def side(
    request: pytest.FixtureRequest,
    async_store: AsyncMongoJobStore,
    sync_store: MongoJobStore,
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
) -> Side:
    confirmed: list[int] = []
    jobs = registry(confirmed)
    if request.param == "async":
        client: Any = DogsClient(async_store, jobs)
        mongo: Any = async_mongo_client
    else:
        client, mongo = Awaited(SyncDogsClient(sync_store, jobs)), sync_mongo_client
    return Side(request.param, client, mongo, mongo_database_name, confirmed)


@pytest.fixture
def fail_point(sync_mongo_client: MongoClient[dict[str, Any]]) -> Iterator[Any]:
    """Arms the server's ``failCommand`` fail point (the test mongod enables test commands)."""

    def arm(data: dict[str, Any], times: int = 1) -> None:
        sync_mongo_client.admin.command(
            "configureFailPoint", "failCommand", mode={"times": times}, data=data
        )

    yield arm
    sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


# ----------------------------------------------------------------------------------------------
# Commit and abort
# ----------------------------------------------------------------------------------------------


async def test_a_committed_job_exists_and_workers_run_it(
    side: Side, async_store: AsyncMongoJobStore
) -> None:
    async def place_order(session: Any) -> Any:
        await side.insert_order({"_id": 1, "total": 1999}, session)
        return await side.client.schedule(
            "confirm_order", {"order_id": 1}, unique_key="confirm:1", session=session
        )

    outcome = await side.in_transaction(place_order)
    assert isinstance(outcome, Scheduled)
    record = await side.client.get_job(outcome.id)
    assert record is not None
    assert (record.params, record.unique_identifier) == ({"order_id": 1}, "confirm:1")
    assert await side.orders() == [{"_id": 1, "total": 1999}]
    jobs = registry(side.confirmed)
    async with Workers(async_store, jobs, workers_count=2, poll_interval=0.05) as workers:
        with anyio.fail_after(10):
            while not side.confirmed:  # noqa: ASYNC110 - polling the handler's effect
                await anyio.sleep(0.02)
        await workers.stop()
    assert side.confirmed == [1]


async def test_an_aborted_transaction_leaves_no_record(side: Side) -> None:
    scheduled: list[Any] = []

    async def place_order(session: Any) -> None:
        await side.insert_order({"_id": 2}, session)
        scheduled.append(
            await side.client.schedule("confirm_order", {"order_id": 2}, session=session)
        )
        scheduled.append(
            await side.client.schedule_many(
                "confirm_order", [{"params": {"order_id": 2}, "unique_key": "u2"}], session=session
            )
        )
        raise OrderRejected

    with pytest.raises(OrderRejected):
        await side.in_transaction(place_order)
    assert isinstance(scheduled[0], Scheduled)
    assert scheduled[1].scheduled_count == 1
    assert await side.client.get_job(scheduled[0].id) is None
    assert list(await side.client.find_jobs()) == []
    assert await side.orders() == []


# ----------------------------------------------------------------------------------------------
# A taken unique key does not abort the caller's transaction
# ----------------------------------------------------------------------------------------------


async def test_a_taken_unique_key_is_a_duplicate_and_the_transaction_commits(side: Side) -> None:
    first = await side.client.schedule("confirm_order", {"order_id": 3}, unique_key="confirm:3")
    assert isinstance(first, Scheduled)

    async def place_order(session: Any) -> tuple[Any, Any, Any]:
        taken = await side.client.schedule(
            "confirm_order", {"order_id": 30}, unique_key="confirm:3", session=session
        )
        await side.insert_order({"_id": 3}, session)  # after the duplicate: still accepted
        new = await side.client.schedule(
            "confirm_order", {"order_id": 4}, unique_key="confirm:4", session=session
        )
        again = await side.client.schedule(
            "confirm_order", {"order_id": 40}, unique_key="confirm:4", session=session
        )
        return taken, new, again

    taken, new, again = await side.in_transaction(place_order)
    assert taken == Duplicate(existing_id=first.id, unique_identifier="confirm:3")
    assert isinstance(new, Scheduled)
    # The transaction's own write is seen by its later reads: the second is a duplicate of it.
    assert again == Duplicate(existing_id=new.id, unique_identifier="confirm:4")
    assert await side.orders() == [{"_id": 3}]
    records = {r.unique_identifier: r for r in await side.client.find_jobs("confirm_order")}
    assert sorted(records) == ["confirm:3", "confirm:4"]
    assert records["confirm:3"].params == {"order_id": 3}, "the holder was not modified"
    assert records["confirm:4"].id == new.id
    assert records["confirm:4"].params == {"order_id": 4}


async def test_schedule_many_in_a_transaction(side: Side) -> None:
    holder = await side.client.schedule("confirm_order", {"order_id": 0}, unique_key="taken")
    assert isinstance(holder, Scheduled)
    items = [
        ScheduleItem(params={"order_id": 1}),
        ScheduleItem(params={"order_id": 2}, unique_key="taken"),
        ScheduleItem(params={"order_id": 3}, unique_key="fresh"),
        ScheduleItem(params={"order_id": 4}, unique_key="fresh"),
        ScheduleItem(params={"order_id": 5}, priority="high"),  # type: ignore[arg-type]
    ]

    async def place_orders(session: Any) -> Any:
        await side.insert_order({"_id": 9}, session)
        return await side.client.schedule_many("confirm_order", items, session=session)

    result = await side.in_transaction(place_orders)
    assert (result.scheduled_count, result.skipped_count) == (2, 2)
    # An invalid item is an item error, never sent: it does not abort the transaction.
    assert [error.index for error in result.errors] == [4]
    first, taken, fresh, fresh_again, invalid = result.outcomes
    assert isinstance(first, Scheduled)
    assert taken == Duplicate(existing_id=holder.id, unique_identifier="taken")
    assert isinstance(fresh, Scheduled)
    assert fresh_again == Duplicate(existing_id=fresh.id, unique_identifier="fresh")
    assert invalid is None
    assert await side.orders() == [{"_id": 9}]
    stored = sorted(r.params["order_id"] for r in await side.client.find_jobs("confirm_order"))
    assert stored == [0, 1, 3]


# ----------------------------------------------------------------------------------------------
# Retries: the caller's with_transaction, never the client, inside a transaction
# ----------------------------------------------------------------------------------------------


async def test_a_transient_error_reaches_with_transaction_which_retries_it(
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    async_store: AsyncMongoJobStore,
    mongo_database_name: str,
    fail_point: Any,
) -> None:
    client = DogsClient(async_store, registry([]))
    orders = async_mongo_client[mongo_database_name].orders
    attempts: list[Any] = []

    async def place_order(session: Any) -> Any:
        attempts.append(session)
        await orders.insert_one({"_id": len(attempts)}, session=session)
        return await client.schedule(
            "confirm_order", {"order_id": 1}, unique_key="confirm:1", session=session
        )

    await client.schedule("confirm_order", {"order_id": 0})  # the indexes, before the fail point
    # The upsert of the identified job fails once with a labelled write conflict: PyMongo's own
    # error must reach with_transaction, which then runs the whole transaction again.
    fail_point(
        {"failCommands": ["update"], "errorCode": 112, "errorLabels": ["TransientTransactionError"]}
    )
    async with async_mongo_client.start_session() as session:
        outcome = await session.with_transaction(place_order)
    assert len(attempts) == 2
    assert isinstance(outcome, Scheduled)
    assert await orders.find({}).to_list(None) == [{"_id": 2}], "the first attempt was aborted"
    assert [r.id for r in await client.find_jobs() if r.unique_identifier] == [outcome.id]


def test_the_sync_client_in_with_transaction(
    sync_mongo_client: MongoClient[dict[str, Any]],
    sync_store: MongoJobStore,
    mongo_database_name: str,
    fail_point: Any,
) -> None:
    client = SyncDogsClient(sync_store, registry([]))
    orders = sync_mongo_client[mongo_database_name].orders
    attempts: list[Any] = []

    def place_order(session: Any) -> Any:
        attempts.append(session)
        orders.insert_one({"_id": len(attempts)}, session=session)
        return client.schedule(
            "confirm_order", {"order_id": 1}, unique_key="confirm:1", session=session
        )

    client.schedule("confirm_order", {"order_id": 0})
    fail_point(
        {"failCommands": ["update"], "errorCode": 112, "errorLabels": ["TransientTransactionError"]}
    )
    with sync_mongo_client.start_session() as session:
        outcome = session.with_transaction(place_order)
        assert isinstance(outcome, Scheduled)
        # Again, in a new transaction: a duplicate, and that transaction commits too.
        again = session.with_transaction(place_order)
    assert again == Duplicate(existing_id=outcome.id, unique_identifier="confirm:1")
    assert len(attempts) == 3
    assert orders.find({}).to_list(None) == [{"_id": 2}, {"_id": 3}]


def test_the_blocking_client_joins_a_transaction(
    sync_mongo_client: MongoClient[dict[str, Any]], sync_store: MongoJobStore
) -> None:
    with BlockingDogsClient(sync_store, registry([])) as client:
        with sync_mongo_client.start_session() as session:
            outcome = session.with_transaction(
                lambda s: client.schedule("confirm_order", {"order_id": 1}, session=s)
            )
        assert isinstance(outcome, Scheduled)
        assert client.get_job(outcome.id) is not None


async def test_a_session_outside_a_transaction_is_joined_and_retried(
    side: Side, fail_point: Any
) -> None:
    await side.client.schedule("confirm_order", {"order_id": 0})  # the indexes
    # Twice: PyMongo's retryable write retries once by itself, then the client retries.
    fail_point({"failCommands": ["insert"], "errorCode": 10107}, times=2)  # NotWritablePrimary
    if side.flavor == "async":
        async with side.mongo.start_session() as session:
            outcome = await side.client.schedule("confirm_order", {"order_id": 1}, session=session)
            again = await side.client.schedule_many(
                "confirm_order", [{"params": {"order_id": 2}}], session=session
            )
    else:
        with side.mongo.start_session() as session:
            outcome = await side.client.schedule("confirm_order", {"order_id": 1}, session=session)
            again = await side.client.schedule_many(
                "confirm_order", [{"params": {"order_id": 2}}], session=session
            )
    assert isinstance(outcome, Scheduled)
    assert again.scheduled_count == 1
    assert len(await side.client.find_jobs("confirm_order")) == 3


# ----------------------------------------------------------------------------------------------
# Refusals
# ----------------------------------------------------------------------------------------------


async def test_the_in_memory_store_refuses_a_session(side: Side) -> None:
    memory: Any
    if side.flavor == "async":
        memory = InMemoryJobStore()
        client: Any = DogsClient(memory, registry([]))
        records = memory.sync.find_records
    else:
        memory = SyncInMemoryJobStore()
        client = Awaited(SyncDogsClient(memory, registry([])))
        records = memory.find_records

    async def place_order(session: Any) -> None:
        await side.insert_order({"_id": 1}, session)
        await client.schedule("confirm_order", {"order_id": 1}, session=session)

    with pytest.raises(SessionNotSupportedError, match="in-memory store"):
        await side.in_transaction(place_order)
    assert records() == []
    assert await side.orders() == [], "the caller's transaction was aborted by the error"


async def test_a_value_that_is_not_a_session_is_refused(side: Side) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        await side.client.schedule("confirm_order", {"order_id": 1}, session="a session")
    assert raised.value.field == "session"
    with pytest.raises(InvalidOptionError, match=r"^session="):
        await side.client.schedule_many("confirm_order", [{}], session=side.mongo)
    assert list(await side.client.find_jobs()) == []


async def test_a_session_of_the_other_driver_is_refused_by_pymongo(
    side: Side,
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    sync_mongo_client: MongoClient[dict[str, Any]],
) -> None:
    """A sync session given to the async store, or the reverse, is PyMongo's ``ValueError``
    (the client only checks that it looks like a session): nothing is written."""
    if side.flavor == "async":
        with (
            sync_mongo_client.start_session() as session,
            pytest.raises(ValueError, match="must be an AsyncClientSession"),
        ):
            await side.client.schedule("confirm_order", {"order_id": 1}, session=session)
    else:
        async with async_mongo_client.start_session() as async_session:
            with pytest.raises(ValueError, match="must be a ClientSession"):
                await side.client.schedule("confirm_order", {"order_id": 1}, session=async_session)
    assert list(await side.client.find_jobs()) == []
