"""A worker process for the durable-steps kill test (run with ``sys.executable``, not a test).

Usage::

    python -m tests.reliability.steps_worker URI DATABASE --hang-in charge|ship|nowhere

It serves one job, ``order``: a transactional step ``charge`` that inserts the order's payment
into the application's ``app_payments`` collection through the step's session, then a plain step
``ship`` that counts its runs in ``app_shipments`` (majority writes). ``--hang-in charge`` prints
``inside charge`` once the payment is written (its transaction still open) and hangs there;
``--hang-in ship`` prints ``inside ship`` once ``charge`` is committed and hangs in ``ship``: the
two moments the test kills the process at. It prints ``ready`` once its workers have started.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core import JobContext, Jobs
from dogs_core.runtime import Workers
from dogs_mongo import AsyncMongoJobStore

__all__ = ["LOCK_SECONDS", "PAYMENTS", "SHIPMENTS", "build_jobs"]

LOCK_SECONDS = 1.5
PAYMENTS = "app_payments"
SHIPMENTS = "app_shipments"


def build_jobs(database: Any, hang_in: str) -> Jobs:
    jobs = Jobs()
    shipments = database.get_collection(SHIPMENTS, write_concern=WriteConcern("majority"))

    async def charge(session: Any, order: int) -> str:
        payment = {"_id": uuid.uuid4().hex, "order": order}
        await session.client[database.name][PAYMENTS].insert_one(payment, session=session)
        if hang_in == "charge":
            print("inside charge", flush=True)
            await anyio.sleep_forever()
        return str(payment["_id"])

    async def ship(order: int) -> int:
        await shipments.update_one({"_id": order}, {"$inc": {"runs": 1}}, upsert=True)
        if hang_in == "ship":
            print("inside ship", flush=True)
            await anyio.sleep_forever()
        return order

    @jobs.event(lock_time=timedelta(seconds=LOCK_SECONDS), max_tries=20)
    async def order(params: dict[str, int], ctx: JobContext) -> dict[str, Any]:
        payment = await ctx.step("charge", charge, params["order"], transactional=True)
        shipped = await ctx.step("ship", ship, params["order"])
        return {"payment": payment, "shipped": shipped}

    return jobs


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("database")
    parser.add_argument("--hang-in", choices=("charge", "ship", "nowhere"), default="nowhere")
    args = parser.parse_args(argv)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    store = AsyncMongoJobStore(client, args.database)
    jobs = build_jobs(client[args.database], args.hang_in)
    workers = Workers(
        store,
        jobs,
        default_lock_time=timedelta(seconds=LOCK_SECONDS),
        poll_interval=0.1,
        probe_enabled=False,
    )
    async with workers:
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
