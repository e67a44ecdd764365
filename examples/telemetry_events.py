"""Telemetry events: subscribe a function, count outcomes, alert on failures, log every job.

    python examples/telemetry_events.py                    # the in-memory store
    python examples/telemetry_events.py --uri mongodb://localhost:27017/?replicaSet=rs0

A subscriber is any callable taking an event. This one keeps per-name outcome counts and the
slowest run, the way a metrics exporter would; a second one reacts only to final failures; and
``log_jobs=True`` adds a start and an end line per job to the ``dogs.jobs`` logger, with the
job's fields as ``extra`` (printed here by a formatter that shows them). With ``--uri`` it uses
a fresh database on your server and drops it at the end. See docs/telemetry.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import (
    DogsClient,
    JobContext,
    Jobs,
    RetryPolicy,
    Workers,
    WorkerSettings,
    telemetry,
)
from dogs_core.ports import AsyncJobStore

jobs = Jobs()


@jobs.event(max_tries=2, retry=RetryPolicy(base=timedelta(milliseconds=10), jitter=0))
async def resize_image(params: dict[str, int], ctx: JobContext) -> str:
    await anyio.sleep(params["ms"] / 1000)
    if params["ms"] > 40:
        raise ValueError(f"image {params['ms']} is corrupt")
    return "resized"


class Outcomes:
    """Per job name and outcome counts, and the slowest execution: a metrics exporter's view."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.slowest = 0.0
        self.scheduled = 0

    def __call__(self, event: telemetry.Event) -> None:
        if isinstance(event, telemetry.JobScheduled):
            self.scheduled += 1
        elif isinstance(event, telemetry.ExecutionEnded):
            self.counts[event.job.job_name, event.outcome] += 1
            self.slowest = max(self.slowest, event.duration)


class JobFields(logging.Formatter):
    """Shows the structured fields the job lines carry (a JSON formatter would emit them)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: getattr(record, k) for k in ("job_name", "tries") if hasattr(record, k)}
        return f"{record.levelname:<7} {record.name}: {record.getMessage()}  {fields}"


async def run(store: AsyncJobStore) -> None:
    hub = telemetry.Telemetry()  # an application would use the process-wide one: subscribe()
    outcomes = Outcomes()
    hub.subscribe(outcomes)
    alerts: list[str] = []
    hub.subscribe(lambda e: alerts.append(str(getattr(e, "error", ""))), telemetry.JobFailed)

    client = DogsClient(store, jobs, telemetry=hub)
    await client.schedule_many(resize_image, [{"params": {"ms": ms}} for ms in (5, 10, 20, 50)])
    settings = WorkerSettings(workers_count=4, poll_interval="100ms", log_jobs=True)
    async with Workers(store, jobs, settings, telemetry=hub) as workers:
        with anyio.fail_after(30):
            while sum(outcomes.counts.values()) < 5:  # noqa: ASYNC110 - the subscriber's count
                await anyio.sleep(0.02)
        await workers.stop()
    print(f"scheduled: {outcomes.scheduled}")
    for (name, outcome), count in sorted(outcomes.counts.items()):
        print(f"{name} {outcome}: {count}")
    print(f"slowest run took at least 50 ms: {outcomes.slowest >= 0.05}")
    print(f"alerts: {alerts}")


async def run_on_mongodb(uri: str) -> None:
    from pymongo import AsyncMongoClient

    from dogs_mongo import AsyncMongoJobStore

    database = f"dogs_telemetry_{uuid.uuid4().hex[:8]}"
    mongo: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri, tz_aware=True)
    try:
        await run(AsyncMongoJobStore(mongo, database))
    finally:
        await mongo.drop_database(database)
        await mongo.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs: telemetry events and job log lines")
    parser.add_argument("--uri", help="MongoDB URI (default: the in-memory store)")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JobFields())
    job_lines = logging.getLogger("dogs.jobs")
    job_lines.addHandler(handler)
    job_lines.setLevel(logging.INFO)
    try:
        if args.uri:
            anyio.run(run_on_mongodb, args.uri)
        else:
            from dogs_testing import InMemoryJobStore

            anyio.run(run, InMemoryJobStore())
    finally:
        job_lines.removeHandler(handler)


if __name__ == "__main__":
    main()
