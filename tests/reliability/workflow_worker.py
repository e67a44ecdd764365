"""A worker process for the workflow kill test (run with ``sys.executable``, not a test).

Usage::

    python workflow_worker.py URI DATABASE

It runs the ``parent`` steps of :func:`jobs` (and, beside them, the release of every workflow)
on :class:`~dogs_mongo.AsyncMongoJobStore`, with a lock time of 2 s, until killed. It prints
``ready`` once its workers and their release have started.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient

from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_mongo import AsyncMongoJobStore

#: Where each child step's runs are counted (one document per step id).
RUNS = "child_runs"


def jobs(runs: Any = None) -> Jobs:
    """``parent`` sleeps ``params["ms"]`` and returns its number; ``child`` counts its run in
    ``runs`` (an async collection) and returns its parent's result plus its own number."""
    registry = Jobs()

    @registry.event(max_tries=5)
    async def parent(params: dict[str, int], ctx: JobContext) -> int:
        await anyio.sleep(params["ms"] / 1000)
        return params["n"]

    @registry.event(max_tries=5)
    async def child(params: dict[str, int], ctx: JobContext) -> int:
        assert runs is not None
        await runs.update_one({"_id": ctx.step_id}, {"$inc": {"runs": 1}}, upsert=True)
        return int(ctx.upstream("parent").result) * 10 + params["k"]

    return registry


async def main(argv: list[str]) -> None:
    uri, database = argv
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    store = AsyncMongoJobStore(client, database)
    only_parents = Jobs()
    only_parents.add(jobs().get("parent"))
    workers = Workers(
        store,
        only_parents,
        workers_count=4,
        default_lock_time=timedelta(seconds=2),
        poll_interval=0.05,
        probe_enabled=False,
    )
    async with workers:
        while not workers.watching:  # noqa: ASYNC110 - a property, not an event
            await anyio.sleep(0.01)
        await anyio.sleep(0.3)  # the release's own feed opens beside the workers' one
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
