"""A worker process for the fleet-limits proof (run with ``sys.executable``, not a test).

Usage::

    python fleet_worker.py URI DATABASE [--workers 32] [--lease-rounds 8]

It serves the jobs of :func:`build_jobs` on :class:`~dogs_mongo.AsyncMongoJobStore` (through
:class:`TokenLog`, which records every rate token the store grants, with the execution that got
it, written to ``token_log`` when it stops) until SIGTERM, and prints ``ready`` once its
workers have started. Once the document
``{_id: "go"}`` appears in the side collection ``signals``, two tasks take the lease
:data:`LEASE` in turn with the other processes, ``--lease-rounds`` times each: one waits for it
(``wait=``), the other tries once and backs off. Each holding is logged in ``lease_log``
(acquired and released wall-clock times, token, whether it was lost and whether its fenced write
was accepted); a task that is done logs ``lease_done``.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient

from dogs_core import DogsClient
from dogs_core.errors import LockHeldError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_core.runtime.execution.context import current_job
from dogs_mongo import AsyncMongoJobStore
from dogs_testing.wrapper import JobStoreWrapper

LIMITED = "limited"
LIMIT = 5
KEYED = "keyed"
KEY_LIMIT = 2
RATED = "rated"
RATE = 10
RATE_PERIOD = timedelta(milliseconds=500)
PAUSABLE = "pausable"
LEASE = "proof-lease"
POLL_INTERVAL = 0.2
TOKEN_LOG = "token_log"
LEASE_LOG = "lease_log"
SIGNALS = "signals"
FENCE = "fence"
Params = dict[str, Any] | None


def build_jobs() -> Jobs:
    jobs = Jobs()

    @jobs.event(name=LIMITED, global_concurrency=LIMIT)
    async def limited(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(random.uniform(0.005, 0.030))

    @jobs.event(name=KEYED, global_concurrency=KEY_LIMIT, concurrency_key=lambda p: p["k"])
    async def keyed(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(random.uniform(0.005, 0.020))

    @jobs.event(name=RATED, rate_limit=(RATE, RATE_PERIOD))
    async def rated(params: Params, ctx: JobContext) -> None:
        pass

    @jobs.event(name=PAUSABLE)
    async def pausable(params: Params, ctx: JobContext) -> None:
        pass

    return jobs


class TokenLog(JobStoreWrapper):
    """Records each rate token the store answers: the execution that asked (the running job's
    context), the window it was counted in and whether it was granted. Kept in memory (a write
    per token would delay every start) and written to ``log`` by :meth:`flush`."""

    def __init__(self, inner: AsyncMongoJobStore, log: Any) -> None:
        super().__init__(inner)
        self.log = log
        self.entries: list[dict[str, Any]] = []

    async def flush(self) -> None:
        if self.entries:
            await self.log.insert_many(self.entries)

    async def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        granted = await self.inner.take_rate_token(
            job_name, key, limit=limit, window_start=window_start, window_end=window_end
        )
        context = current_job()
        self.entries.append(
            {
                "job_name": job_name,
                "execution_id": None if context is None else context.execution_id,
                "window_start": window_start,
                "granted": granted,
                "at": datetime.now(UTC),
                "pid": os.getpid(),
            }
        )
        return granted


async def hold(client: DogsClient, database: Any, *, wait: bool) -> bool:
    """Take the lease once (waiting for it, or trying once); log the holding. ``False`` when
    the one try found it held."""
    try:
        async with client.lock(LEASE, ttl="3s", wait="30s" if wait else None) as lease:
            acquired = time.time()
            await anyio.sleep(random.uniform(0.002, 0.015))
            # The fencing token in use: a write accepted only from a newer holder than the last.
            fenced = await database[FENCE].update_one(
                {"_id": "fence", "token": {"$lt": lease.token}},
                {"$set": {"token": lease.token}},
            )
            released = time.time()
            lost = lease.lost
    except LockHeldError:
        return False
    await database[LEASE_LOG].insert_one(
        {
            "pid": os.getpid(),
            "token": lease.token,
            "acquired": acquired,
            "released": released,
            "lost": lost,
            "fenced": fenced.modified_count == 1,
        }
    )
    return True


async def lease_rounds(client: DogsClient, database: Any, rounds: int, *, wait: bool) -> None:
    while await database[SIGNALS].find_one({"_id": "go"}) is None:  # noqa: ASYNC110 - a poll
        await anyio.sleep(0.02)
    done = 0
    while done < rounds:
        if await hold(client, database, wait=wait):
            done += 1
        await anyio.sleep(random.uniform(0.001, 0.010))
    await database[LEASE_LOG].insert_one({"pid": os.getpid(), "lease_done": True})


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("database")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--lease-rounds", type=int, default=8)
    args = parser.parse_args(argv)

    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    database = mongo[args.database]
    store = TokenLog(AsyncMongoJobStore(mongo, args.database), database[TOKEN_LOG])
    workers = Workers(
        store,
        build_jobs(),
        workers_count=args.workers,
        poll_interval=POLL_INTERVAL,
        probe_enabled=False,
    )
    client = DogsClient(store)
    async with workers:
        async with anyio.create_task_group() as group:
            for wait in (True, False):
                group.start_soon(
                    functools.partial(lease_rounds, client, database, args.lease_rounds, wait=wait)
                )
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                print("ready", flush=True)
                async for _ in signals:
                    break
            group.cancel_scope.cancel()
        await workers.stop(grace=5)
    await store.flush()
    await mongo.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
