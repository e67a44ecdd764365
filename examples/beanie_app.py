"""Beanie (the ODM on PyMongo's async client): a document and its job written in one MongoDB
transaction, so both exist or neither does.

    python examples/beanie_app.py --uri mongodb://localhost:27017/?replicaSet=rs0

The container is given the application's ``AsyncMongoClient`` (``async_mongo_client=``), so the
Dogs client and Beanie share it and a session of one is a session of the other: inside
``session.with_transaction``, ``order.insert(session=session)`` and ``client.schedule(...,
session=session)`` commit together. A signup that fails after both writes leaves neither. A
fresh database, dropped at the end; transactions need a replica set. See docs/beanie.md.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence
from typing import Any

import anyio
from beanie import Document, init_beanie
from pymongo import AsyncMongoClient

from dogs_core import JobContext, Jobs, Scheduled
from dogs_mongo import DogsContainer

jobs = Jobs()


class Order(Document):
    email: str
    total_cents: int

    class Settings:
        name = "orders"


@jobs.event(max_tries=5)
async def send_receipt(params: dict[str, str], ctx: JobContext) -> str:
    order = await Order.get(params["order_id"])
    assert order is not None, "the job exists only if its order was committed"
    return f"receipt for {order.total_cents / 100:.2f} EUR sent to {order.email}"


class PaymentDeclined(Exception):
    """Raised after the order and its job were written: both roll back."""


async def place_order(
    mongo: AsyncMongoClient[dict[str, Any]], container: DogsContainer, email: str, cents: int
) -> str:
    client = container.client(jobs)

    async def body(session: Any) -> Scheduled | object:
        order = Order(email=email, total_cents=cents)
        await order.insert(session=session)
        outcome = await client.schedule(send_receipt, {"order_id": str(order.id)}, session=session)
        if cents <= 0:
            raise PaymentDeclined(email)
        return outcome

    async with mongo.start_session() as session:
        try:
            await session.with_transaction(body)
        except PaymentDeclined:
            return "payment declined: neither the order nor its job was written"
    return "placed with its receipt job"


async def run(uri: str) -> None:
    database = f"dogs_beanie_{uuid.uuid4().hex[:8]}"
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    container = DogsContainer(database=database, async_mongo_client=mongo)
    try:
        await init_beanie(database=mongo[database], document_models=[Order])
        # Dogs' collections and indexes before the first transaction (created inside one, a
        # collection would make it fail once).
        await container.store().setup()
        for email, cents in [("ada@example.com", 4200), ("bob@example.com", 0)]:
            print(f"{email}: {await place_order(mongo, container, email, cents)}")
        print(f"orders stored: {await Order.count()}")
        client = container.client(jobs)
        async with container.workers(jobs, poll_interval=0.2) as workers:
            with anyio.fail_after(30):
                while len(await client.find_jobs(send_receipt)):  # noqa: ASYNC110 - demo wait
                    await anyio.sleep(0.05)
            await workers.stop()
        for execution in await client.get_executions(send_receipt):
            print(f"{execution.job_name}: {execution.status.value} -> {execution.result}")
    finally:
        await mongo.drop_database(database)
        await mongo.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs with Beanie: a document and its job")
    parser.add_argument("--uri", help="MongoDB URI of a replica set")
    args = parser.parse_args(argv)
    if not args.uri:
        print("transactions need a replica set: pass --uri mongodb://...?replicaSet=...")
        return
    anyio.run(run, args.uri, backend="asyncio")


if __name__ == "__main__":
    main()
