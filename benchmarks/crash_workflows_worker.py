"""A worker process of the workflow crash benchmark (``benchmarks.crash_workflows``).

Usage::

    python -m benchmarks.crash_workflows_worker URI DATABASE SWEEP_SECONDS KILL_CHANCE

It runs every step of the benchmark's workflows (``step``: sleeps ``params["ms"]``, counts
its runs in the side collection ``step_runs`` with the time its record became due, majority
write concern, so a count outlives the kill) and their release, on
:class:`~dogs_mongo.AsyncMongoJobStore`, with 2 s locks, until SIGTERM. With ``KILL_CHANCE``
> 0 it kills itself with SIGKILL *inside* a release: between the release's writes (the step's
record staged, or the step released with its record still staged), each time with that
chance: the kills the benchmark aims at the release window. ``DOGS_CRASH_DEBUG`` logs each
sweep's counts.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import time
from datetime import timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core.domain.schedules import RetryPolicy
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_mongo import AsyncMongoJobStore

__all__ = ["LOCK_SECONDS", "RUNS", "jobs"]

#: Where each step's runs are counted (one document per step id).
RUNS = "step_runs"
#: The lock time of every step.
LOCK_SECONDS = 2.0


def jobs(runs: Any = None) -> Jobs:
    registry = Jobs()

    # A run cut by a kill is tried again after a short backoff: the benchmark measures holds
    # of the release, not a job's retry policy.
    retry = RetryPolicy(base=timedelta(seconds=0.1), max_delay=timedelta(seconds=0.5))

    @registry.event(max_tries=20, lock_time=timedelta(seconds=LOCK_SECONDS), retry=retry)
    async def step(params: dict[str, int], ctx: JobContext) -> int:
        assert runs is not None
        # When its record became due: the release's end (a release a kill cut: its repair).
        due = ctx.record.next_run_at
        await runs.update_one(
            {"_id": ctx.step_id}, {"$inc": {"runs": 1}, "$min": {"due": due}}, upsert=True
        )
        await anyio.sleep(params["ms"] / 1000)
        return params["ms"]

    return registry


async def main(argv: list[str]) -> None:
    uri, database, sweep, chance = argv
    logging.basicConfig(
        level=logging.WARNING, format="%(created).3f %(process)d %(name)s %(message)s"
    )
    if os.environ.get("DOGS_CRASH_DEBUG"):
        logging.getLogger("dogs.workflows").setLevel(logging.DEBUG)
    print(f"{time.time():.3f} started", flush=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    store = AsyncMongoJobStore(client, database)
    rng = random.Random()
    kill_chance = float(chance)

    async def killed_inside_a_release(point: str) -> None:
        if rng.random() < kill_chance:
            print(f"{time.time():.3f} killed at {point}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    store.release_fault = killed_inside_a_release
    runs = client[database].get_collection(RUNS, write_concern=WriteConcern("majority"))
    workers = Workers(
        store,
        jobs(runs),
        workers_count=8,
        poll_interval=0.1,
        default_lock_time=timedelta(seconds=LOCK_SECONDS),
        workflow_sweep_interval=timedelta(seconds=float(sweep)),
        probe_enabled=False,
    )
    async with workers:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                break
        await workers.stop()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
