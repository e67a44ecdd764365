"""A worker process for the crash and failover tests (run with ``sys.executable``, not a test).

Usage::

    python crash_worker.py URI DATABASE [--lock-time S] [--hang] [--w1] [--workers N]

It serves two jobs on :class:`~dogs_mongo.AsyncMongoJobStore` until killed or, without
``--hang``, until SIGTERM:

``victim``
    Records each execution (``job_id``, ``execution_id``, ``tries``, ``was_stale``, ``pid``) in
    the side collection ``runs`` with majority write concern, then, with ``--hang`` and on its
    first try, keeps running forever with a heartbeat (so its lock stays held until the process
    dies); otherwise it sleeps ``params["seconds"]`` and records ``done``.
``quick``
    Records its execution and ``done`` at once.

It prints ``ready`` on stdout once its workers have started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from datetime import timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_mongo import AsyncMongoJobStore

RUNS = "runs"
Params = dict[str, Any] | None


def build_jobs(runs: Any, *, hang: bool) -> Jobs:
    """The jobs of the test application; ``runs`` is an async collection (majority writes)."""
    jobs = Jobs()

    async def record(ctx: JobContext, phase: str) -> None:
        await runs.insert_one(
            {
                "job_id": ctx.job_id,
                "job_name": ctx.job_name,
                "execution_id": ctx.execution_id,
                "tries": ctx.tries,
                "was_stale": ctx.was_stale,
                "pid": os.getpid(),
                "phase": phase,
            }
        )

    @jobs.event(heartbeat=True, max_tries=5)
    async def victim(params: Params, ctx: JobContext) -> None:
        await record(ctx, "started")
        if hang and ctx.tries == 1:
            await anyio.sleep_forever()
        await anyio.sleep(float((params or {}).get("seconds", 0)))
        await record(ctx, "done")

    @jobs.event(max_tries=5)
    async def quick(params: Params, ctx: JobContext) -> None:
        await record(ctx, "started")
        await record(ctx, "done")

    return jobs


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("database")
    parser.add_argument("--lock-time", type=float, default=2.0)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--w1", action="store_true")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    runs = client[args.database].get_collection(RUNS, write_concern=WriteConcern("majority"))
    store = AsyncMongoJobStore(
        client, args.database, write_concern=WriteConcern(w=1) if args.w1 else None
    )
    workers = Workers(
        store,
        build_jobs(runs, hang=args.hang),
        workers_count=args.workers,
        default_lock_time=timedelta(seconds=args.lock_time),
        poll_interval=0.1,
        probe_enabled=False,
    )
    async with workers:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            print("ready", flush=True)
            async for _ in signals:
                await workers.stop(grace=0)
                break
    await client.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
