"""The job registry the crash-fleet benchmark's ``dogs worker`` processes serve.

``work`` records its start and its end in the side collection ``runs`` (majority write
concern, so a record survives the worker's SIGKILL): ``job_id``, ``execution_id``, ``tries``,
``was_stale``, ``pid``, ``phase`` (``start`` or ``done``) and the wall time. It sleeps
``params["seconds"]``. The side collection lives in the database named by the environment
variables ``DOGS_CRASH_URI`` and ``DOGS_CRASH_DATABASE`` (set by ``benchmarks.crash_fleet``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
from pymongo import AsyncMongoClient, WriteConcern
from pymongo.asynchronous.collection import AsyncCollection

from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext

__all__ = ["LOCK_SECONDS", "RUNS", "jobs"]

RUNS = "runs"
#: The lock of ``work`` (renewed by heartbeats); the benchmark's outages outlast it.
LOCK_SECONDS = 2
jobs = Jobs()
_runs: AsyncCollection[dict[str, Any]] | None = None


def _collection() -> AsyncCollection[dict[str, Any]]:
    global _runs
    if _runs is None:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            os.environ["DOGS_CRASH_URI"], tz_aware=True
        )
        database = client[os.environ["DOGS_CRASH_DATABASE"]]
        _runs = database.get_collection(RUNS, write_concern=WriteConcern("majority"))
    return _runs


async def _record(ctx: JobContext, phase: str) -> None:
    await _collection().insert_one(
        {
            "job_id": ctx.job_id,
            "execution_id": ctx.execution_id,
            "tries": ctx.tries,
            "was_stale": ctx.was_stale,
            "pid": os.getpid(),
            "phase": phase,
            "at": time.time(),
        }
    )


@jobs.event(lock_time=LOCK_SECONDS, heartbeat=True, max_tries=100)
async def work(params: dict[str, float], ctx: JobContext) -> None:
    await _record(ctx, "start")
    await anyio.sleep(params["seconds"])
    await _record(ctx, "done")
