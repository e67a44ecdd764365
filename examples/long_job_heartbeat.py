"""Long jobs keep their lock: an automatic heartbeat, and manual extensions.

    python examples/long_job_heartbeat.py

A job's lock lasts ``lock_time``; past it, the execution is *stale*: it is cancelled and
another worker may take the job. Three ten-minute jobs with a one-minute lock:

``reindex``       ``heartbeat=True``: the runtime renews the lock every third of the lock time.
``export``        renews it itself with ``await ctx.extend_lock_time(...)`` between chunks.
``fragile``       does neither: it goes stale after a minute, is retried, and is given up after
                  its ``max_tries``.

Everything runs on the real runtime and store under trio's ``MockClock(autojump_threshold=0)``
(virtual time: the loop jumps to the next deadline when every task waits), so half an hour of
jobs takes a fraction of a second. (Needs ``trio``.)
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

import anyio
import trio.testing

from dogs_core import DogsClient, JobContext, Jobs, LoopClock, Workers
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event(heartbeat=True, lock_time="1m")
async def reindex(params: None, ctx: JobContext) -> str:
    # Ten minutes of work in one await; the extra 5 s keep its end off a heartbeat instant.
    await anyio.sleep(10 * 60 + 5)
    return "reindexed"


@jobs.event(lock_time="1m")
async def export(params: None, ctx: JobContext) -> str:
    for _chunk in range(10):
        await anyio.sleep(50)  # one chunk: under the one-minute lock
        if not await ctx.extend_lock_time("1m"):  # False: the lock is lost, stop
            return "lost the lock"
    return "exported 10 chunks"


@jobs.event(lock_time="1m", max_tries=2)
async def fragile(params: None, ctx: JobContext) -> str:
    await anyio.sleep(10 * 60)
    return "never gets here"


class CountingStore(InMemoryJobStore):
    """The in-memory store, counting lock renewals per job (a store is easy to wrap)."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals: Counter[str] = Counter()

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        record = await self.get_record(job_id)
        if record is not None:
            self.renewals[record.job_name] += 1
        return await super().extend_lock(job_id, lock_id, locked_until)


async def run() -> None:
    store, clock = CountingStore(), LoopClock(datetime(2030, 1, 1, tzinfo=UTC))
    client = DogsClient(store, jobs, clock=clock)
    for job in (reindex, export, fragile):
        await client.schedule(job)
    started = anyio.current_time()
    # default_lock_time = the jobs' lock_time, so that every lock write counted is a renewal.
    workers = Workers(store, jobs, clock=clock, default_lock_time="1m", poll_interval=5)
    async with workers:
        await anyio.sleep(30 * 60)
        await workers.stop()
    print(f"{(anyio.current_time() - started) / 60:.0f} minutes of virtual time")
    for definition in jobs:
        runs = reversed(await client.get_executions(definition))
        outcome = ", ".join(
            f"{r.status.value} after {r.duration_ms / 60_000:.1f} min" for r in runs
        )
        print(f"{definition.name}: {outcome}; lock renewals: {store.renewals[definition.name]}")
    (given_up,) = await client.find_jobs(fragile)
    print(f"fragile is kept as {given_up.status} after {given_up.tries} tries")


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description="Long jobs and their locks").parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="  [log] %(message)s", stream=sys.stdout)
    started = time.perf_counter()
    clock = trio.testing.MockClock(autojump_threshold=0)
    anyio.run(run, backend="trio", backend_options={"clock": clock})
    print(f"real time: {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
