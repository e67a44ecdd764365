"""Durable steps and a durable sleep: an order that reserves stock, charges a card, waits for
the warehouse without holding a worker, and books a shipment, where a retry (or the takeover
after a crash) does not do again what a previous run already did.

    python examples/durable_steps.py                 # in memory
    python examples/durable_steps.py --uri mongodb://localhost:27017/?replicaSet=rs0

Each ``await ctx.step(name, fn, ...)`` runs ``fn`` once and records its result on the job's
record; a later run of the job gets the recorded result back without calling ``fn``. Here the
shipping API fails on the first try: the retry replays ``reserve`` and ``charge`` from their
records and only books the shipment. With ``--uri`` the charge is a *transactional* step: the
payment document and the step's record commit in one MongoDB transaction (both or neither), so
the payment is written exactly once whatever dies when. ``await ctx.sleep(...)`` ends the run
and frees its slot; the job is ``sleeping`` until it wakes (here the warehouse's answer wakes it
early with ``client.retry_now``), then resumes after the sleep with its steps replayed. With
``--uri`` the example uses a fresh database and drops it at the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio

from dogs_core import JobContext, Jobs
from dogs_core.domain.records import JobState
from dogs_core.domain.schedules import RetryPolicy
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore


@dataclass
class Order:
    order_id: int
    amount: int


#: How long the order waits for the warehouse at most; the warehouse's answer wakes it early.
WAREHOUSE_DELAY = timedelta(days=2)


class ShippingDown(Exception):
    """The shipping partner's API failed: the job is retried."""


def build_jobs(calls: Counter[str], payments: Any | None) -> Jobs:
    """The order job; ``payments`` is the application's collection on MongoDB (``None``: in
    memory, where the charge is a plain step)."""
    jobs = Jobs()

    async def reserve_stock(order_id: int) -> dict[str, Any]:
        calls["reserve"] += 1
        return {"order": order_id, "sku": "MUG-1", "reserved": True}

    async def charge_card(order_id: int, amount: int) -> str:
        calls["charge"] += 1
        return f"ch_{order_id}_{amount}"

    async def charge_in_transaction(session: Any, order_id: int, amount: int) -> str:
        assert payments is not None
        calls["charge"] += 1
        payment = {"_id": f"ch_{order_id}_{amount}", "order": order_id, "amount": amount}
        await payments.insert_one(payment, session=session)  # commits with the step
        return str(payment["_id"])

    async def book_shipment(order_id: int, attempt: int) -> str:
        calls["ship"] += 1
        if attempt == 1:
            raise ShippingDown("the shipping API answered 503")
        return f"parcel-{order_id}"

    retry = RetryPolicy(base=timedelta(milliseconds=100), jitter=0)

    @jobs.event(max_tries=3, retry=retry)
    async def fulfil_order(params: Order, ctx: JobContext) -> dict[str, Any]:
        replayed = [step.name for step in ctx.steps]
        if replayed:
            print(f"try {ctx.tries}: replaying {', '.join(replayed)} from the record")
        stock = await ctx.step("reserve", reserve_stock, params.order_id)
        if payments is None:
            payment = await ctx.step("charge", charge_card, params.order_id, params.amount)
        else:
            payment = await ctx.step(
                "charge", charge_in_transaction, params.order_id, params.amount, transactional=True
            )
        await ctx.sleep(WAREHOUSE_DELAY, name="wait for the warehouse")  # holds no worker
        parcel = await ctx.step("ship", book_shipment, params.order_id, ctx.tries)
        return {"sku": stock["sku"], "payment": payment, "parcel": parcel}

    return jobs


async def run(example: Example) -> None:
    calls: Counter[str] = Counter()
    payments = None
    if example.on_mongodb:
        mongo = example.container.async_mongo_client()
        payments = mongo[str(example.database)].payments
        await example.store.setup()
        # made before the first transaction (created inside one, it would make it retry)
        await mongo[str(example.database)].create_collection("payments")
    jobs = build_jobs(calls, payments)
    client = example.client(jobs)
    scheduled = await client.schedule("fulfil_order", Order(order_id=42, amount=1999))
    job_id = str(getattr(scheduled, "id", ""))
    async with example.workers(jobs, poll_interval=0.05) as workers:
        with anyio.fail_after(60):
            while (record := await client.get_job(job_id)) is None or record.state(  # noqa: ASYNC110
                client.clock.now()
            ) is not JobState.SLEEPING:
                await anyio.sleep(0.05)  # polling the record: the plain way to watch one job
        print(f"the order is sleeping until {record.sleeping:%Y-%m-%d}: no worker holds it")
        await client.retry_now(job_id)  # the warehouse answered: wake it now
        print("the warehouse is ready: retry_now wakes the order, which resumes after the sleep")
        with anyio.fail_after(60):
            while await client.find_jobs("fulfil_order"):  # noqa: ASYNC110 - it goes when done
                await anyio.sleep(0.05)
        await workers.stop()
    for execution in reversed(await client.get_executions("fulfil_order")):
        outcome = execution.result if execution.error_message is None else execution.error_message
        print(f"try {execution.tries}: {execution.status.value} -> {outcome}")
    print(
        "function calls: "
        + ", ".join(f"{name} {calls[name]}" for name in ("reserve", "charge", "ship"))
    )
    if payments is not None:
        print(f"payments stored: {await payments.count_documents({'order': 42})}")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="durable_steps",
        memory=InMemoryJobStore,
        description="Dogs: durable steps, replayed by a retry",
    )


if __name__ == "__main__":
    main()
