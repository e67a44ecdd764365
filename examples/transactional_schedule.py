"""Scheduling in a transaction: an order and its confirmation job, committed together.

    python examples/transactional_schedule.py --uri mongodb://localhost:27017/?replicaSet=rs0
    python examples/transactional_schedule.py      # no database: the in-memory store refuses

A checkout writes the order and schedules its confirmation job in one MongoDB transaction
(``schedule(..., session=session)``): both are written, or neither. A checkout that fails after
scheduling rolls the job back with the order; a retried checkout finds its job already there
(``Duplicate``) without aborting the transaction. Transactions need a replica set (one node is
enough: ``dogs mongod``). With ``--uri`` the example uses a fresh database and drops it at the
end.

The in-memory store has no transactions: it refuses a session with ``SessionNotSupportedError``
and writes nothing, which is what the run without ``--uri`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from pymongo import AsyncMongoClient

from dogs_core import (
    DogsClient,
    Duplicate,
    JobContext,
    Jobs,
    ScheduleOutcome,
    SessionNotSupportedError,
)
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@dataclass
class Confirmation:
    order_id: int
    email: str


@jobs.event(max_tries=5)
async def send_confirmation(params: Confirmation, ctx: JobContext) -> str:
    """Runs only for an order that was committed."""
    return f"order {params.order_id} confirmed to {params.email}"


class OutOfStock(Exception):
    """Raised by a checkout after it wrote its order and scheduled its job: both roll back."""


async def place_order(
    client: DogsClient, orders: Any, session: Any, order_id: int, email: str, *, in_stock: bool
) -> ScheduleOutcome:
    """The application's checkout, inside the caller's transaction (``session``)."""
    await orders.update_one(
        {"_id": order_id}, {"$setOnInsert": {"email": email}}, upsert=True, session=session
    )
    outcome = await client.schedule(
        send_confirmation,
        Confirmation(order_id, email),
        unique_key=f"confirm:{order_id}",  # a retried checkout schedules it once
        session=session,
    )
    if not in_stock:
        raise OutOfStock(order_id)
    return outcome


async def checkout(
    mongo: Any, client: DogsClient, orders: Any, order_id: int, email: str, *, in_stock: bool = True
) -> str:
    async def body(session: Any) -> ScheduleOutcome:
        return await place_order(client, orders, session, order_id, email, in_stock=in_stock)

    async with mongo.start_session() as session:
        try:
            outcome = await session.with_transaction(body)  # retries transient errors itself
        except OutOfStock:
            return "out of stock: neither the order nor its job was written"
    if isinstance(outcome, Duplicate):
        return "already placed: its confirmation job is kept, written once"
    return "placed with its confirmation job"


async def in_a_transaction(example: Example) -> None:
    # The container's own client: the order and its job are written in one of its sessions.
    mongo: AsyncMongoClient[dict[str, Any]] = example.container.async_mongo_client()
    store = example.store
    client = example.client(jobs)
    orders = mongo[str(example.database)].orders
    # The indexes (and so the collection) before the first transaction: created inside it,
    # the collection would make that transaction's first attempt fail and be retried.
    await store.setup()
    for order_id, email, in_stock in [
        (1, "ada@example.com", True),
        (1, "ada@example.com", True),  # the same checkout, retried by the browser
        (2, "grace@example.com", True),
        (3, "linus@example.com", False),
    ]:
        result = await checkout(mongo, client, orders, order_id, email, in_stock=in_stock)
        print(f"order {order_id}: {result}")
    print(f"orders stored: {[o['_id'] async for o in orders.find({}).sort('_id', 1)]}")
    async with example.workers(jobs, workers_count=2, poll_interval=0.1) as workers:
        while await client.find_jobs(send_confirmation):  # noqa: ASYNC110 - done jobs go
            await anyio.sleep(0.05)
        await workers.stop()
    for execution in reversed(await client.get_executions(send_confirmation)):
        print(f"{execution.job_name}: {execution.status.value} -> {execution.result}")


async def without_a_database(example: Example) -> None:
    client = example.client(jobs)
    # A session needs no server until its first command, and the store refuses it before that.
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient("mongodb://localhost/")
    try:
        async with mongo.start_session() as session:
            try:
                await client.schedule(
                    send_confirmation, Confirmation(1, "ada@example.com"), session=session
                )
            except SessionNotSupportedError as error:
                print(f"SessionNotSupportedError: {error}")
    finally:
        await mongo.close()
    print(f"records written: {len(await client.find_jobs())}")
    print("run with --uri mongodb://...?replicaSet=rs0 to commit an order and its job together")


async def run(example: Example) -> None:
    await (in_a_transaction if example.on_mongodb else without_a_database)(example)


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="transactions",
        memory=InMemoryJobStore,
        description="Dogs: scheduling in a MongoDB transaction",
    )


if __name__ == "__main__":
    main()
