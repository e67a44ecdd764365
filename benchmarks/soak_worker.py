"""One worker process of the soak benchmark (started by :mod:`benchmarks.soak`, not by hand).

Usage::

    python benchmarks/soak_worker.py URI DATABASE [--workers-count 16] [--lock-time 10]
        [--sample-every 60] [--error-rate 0.01] [--ambiguous-rate 0.005] [--delay-rate 0.01]
        [--seed N]

It serves the soak's jobs on :class:`~dogs_mongo.AsyncMongoJobStore` wrapped in
:class:`~dogs_testing.faults.FaultyJobStore` (random transient errors before the call, after it
(the write applied, its reply lost: ambiguous) and short delays, on every steady-state port call)
until SIGTERM. The faults are injected only; the process is never killed, because after a SIGKILL
a job may run twice by design (at-least-once), and the soak counts double runs as failures.

The jobs (:func:`build_jobs`):

``soak``
    An event job whose params say what it does: ``{"k": key, "kind": "noop" | "sleep" |
    "flaky", "s": seconds}``. ``sleep`` sleeps ``s``; ``flaky`` raises on its first try (and
    succeeds on its retry). A successful run records its marker ``{_id: key}`` in the side
    collection ``runs`` (majority writes, not faulted); a second success of the same key (a
    duplicate ``_id``) is recorded in ``doubles`` instead: the soak's "run twice" count.
``soak_tick``
    A recurrent job every :data:`TICK_EVERY`; each run records a row in ``ticks``.

Every ``--sample-every`` seconds it prints one JSON line on stdout: ``{"type": "sample", "t":
unix time, "rss_mib", "fds", "tasks", "handled", "faults"}`` (resident memory from
``/proc/self/status``, open descriptors from ``/proc/self/fd``, ``asyncio.all_tasks()``); at
exit a ``{"type": "final", ...}`` line with the injected faults by kind. Log lines (one WARNING
per injected transient error retried) go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient, WriteConcern
from pymongo.errors import DuplicateKeyError

from dogs_core.domain.schedules import RetryPolicy
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext, Workers
from dogs_mongo import AsyncMongoJobStore
from dogs_testing.faults import PORT_METHODS, FaultPlan, FaultStats, FaultyJobStore

__all__ = ["JOB_NAME", "TICK_NAME", "build_jobs", "sample"]

JOB_NAME: Final = "soak"
TICK_NAME: Final = "soak_tick"
TICK_EVERY: Final = timedelta(seconds=3)
RUNS: Final = "runs"
DOUBLES: Final = "doubles"
TICKS: Final = "ticks"
MAX_TRIES: Final = 10
FLAKY_MESSAGE: Final = "fails on its first try, by design"
#: Startup calls are left alone (a soak measures the steady state, not a failed start).
FAULTED_METHODS: Final = PORT_METHODS - {"setup", "capabilities", "ensure_recurrent"}

Params = dict[str, Any] | None


class Counters:
    """What this process's handlers did (read by the sampler)."""

    def __init__(self) -> None:
        self.handled = 0
        self.doubles = 0


def build_jobs(database: Any, counters: Counters) -> Jobs:
    """The soak's jobs; ``database`` is an async database whose side collections take
    majority writes."""
    majority = WriteConcern("majority")
    runs = database.get_collection(RUNS, write_concern=majority)
    doubles = database.get_collection(DOUBLES, write_concern=majority)
    ticks = database.get_collection(TICKS, write_concern=majority)
    jobs = Jobs()

    @jobs.event(name=JOB_NAME, max_tries=MAX_TRIES, retry=RetryPolicy(base=timedelta(seconds=1)))
    async def soak(params: Params, ctx: JobContext) -> None:
        counters.handled += 1
        p = params or {}
        if p.get("kind") == "sleep":
            await anyio.sleep(float(p.get("s", 0.0)))
        elif p.get("kind") == "flaky" and ctx.tries == 1:
            raise RuntimeError(FLAKY_MESSAGE)
        marker = {
            "job_id": ctx.job_id,
            "execution_id": ctx.execution_id,
            "tries": ctx.tries,
            "pid": os.getpid(),
        }
        try:
            await runs.insert_one({"_id": p.get("k"), **marker})
        except DuplicateKeyError:
            counters.doubles += 1
            await doubles.insert_one({"k": p.get("k"), **marker})

    @jobs.recurrent(name=TICK_NAME, run_every=TICK_EVERY)
    async def soak_tick(ctx: JobContext) -> None:
        await ticks.insert_one(
            {"execution_id": ctx.execution_id, "pid": os.getpid(), "at": time.time()}
        )

    return jobs


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sample(counters: Counters, stats: FaultStats) -> dict[str, Any]:
    """One sample of this process: memory, descriptors, tasks and work done."""
    return {
        "type": "sample",
        "t": time.time(),
        "pid": os.getpid(),
        "rss_mib": round(_rss_mib(), 2),
        "fds": len(os.listdir("/proc/self/fd")),
        "tasks": len(asyncio.all_tasks()),
        "handled": counters.handled,
        "doubles": counters.doubles,
        "faults": stats.total,
    }


def _emit(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


async def _sampler(counters: Counters, stats: FaultStats, every: float) -> None:
    while True:
        _emit(sample(counters, stats))
        await anyio.sleep(every)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri")
    parser.add_argument("database")
    parser.add_argument("--workers-count", type=int, default=16)
    parser.add_argument("--lock-time", type=float, default=10.0)
    parser.add_argument("--sample-every", type=float, default=60.0)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--ambiguous-rate", type=float, default=0.005)
    parser.add_argument("--delay-rate", type=float, default=0.01)
    parser.add_argument("--max-delay", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=None)
    return parser.parse_args(argv)


async def main(argv: list[str]) -> None:
    args = _parse(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(message)s"
    )
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    stats = FaultStats()
    plan = FaultPlan.random(
        error_rate=args.error_rate,
        ambiguous_rate=args.ambiguous_rate,
        delay_rate=args.delay_rate,
        max_delay=args.max_delay,
        methods=FAULTED_METHODS,
    )
    store = FaultyJobStore(
        AsyncMongoJobStore(mongo, args.database),
        plan,
        rng=random.Random(args.seed),
        stats=stats,
        name=f"soak-{os.getpid()}",
    )
    counters = Counters()
    workers = Workers(
        store,
        build_jobs(mongo[args.database], counters),
        workers_count=args.workers_count,
        default_lock_time=timedelta(seconds=args.lock_time),
        poll_interval=0.5,
    )
    async with workers:
        async with anyio.create_task_group() as group:
            group.start_soon(_sampler, counters, stats, args.sample_every)
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                _emit({"type": "ready", "pid": os.getpid()})
                async for _ in signals:
                    break
            group.cancel_scope.cancel()
        await workers.stop(grace=10)
    final = sample(counters, stats)
    final["type"] = "final"
    final["calls"] = stats.total_calls
    final["by_kind"] = {str(kind): n for kind, n in stats.by_kind().items()}
    _emit(final)
    await mongo.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:], backend="asyncio")
