"""The demo: two worker instances share one MongoDB and run a mix of jobs.

    python examples/demo.py                      # starts a throwaway local mongod itself
    python examples/demo.py --uri mongodb://...  # uses your server (a fresh database)
    python examples/demo.py --memory             # the in-memory store, no database at all

It schedules event jobs (some async, some sync in worker threads, some failing and retried
with backoff, some deduplicated by a unique key), runs two recurrent jobs, shows progress, and
ends with a summary read back from the job history.

Two things in its output are on purpose, not faults: ``w:0`` is scheduled a second time to show
that a unique key is held once (the second call answers ``Duplicate``, nothing is added), and
``send_email`` raises a ``ConnectionError`` on 15 % of its attempts to show retries with backoff
(the summary's "failed attempts"; a job whose 4 tries all fail, about one in a hundred, "gave
up").
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dogs_core import (
    DogsClient,
    Duplicate,
    HistoryStatus,
    JobContext,
    Jobs,
    NameStatus,
    Retry,
    RetryPolicy,
    ScheduleItem,
)
from dogs_mongo import Example
from dogs_mongo.runner import open_example
from dogs_testing import InMemoryJobStore

console = Console()
jobs = Jobs()
completed: Counter[str] = Counter()
completed_lock = threading.Lock()  # sync handlers run in worker threads


def count(name: str) -> None:
    with completed_lock:
        completed[name] += 1


@dataclass
class Email:
    to: str
    subject: str


@jobs.event(max_tries=4, lock_time="10s", retry=RetryPolicy(base=timedelta(milliseconds=200)))
async def send_email(params: Email, ctx: JobContext) -> dict[str, str]:
    """An async job with a typed params model; fails now and then and is retried."""
    await anyio.sleep(random.uniform(0.005, 0.02))
    if random.random() < 0.15:
        raise ConnectionError(f"SMTP hiccup sending to {params.to}")
    count("send_email")
    return {"delivered_to": params.to}


def _resize_retry(error: Exception, params: object, ctx: JobContext) -> Retry:
    return Retry(run_in=timedelta(milliseconds=200))


@jobs.event(max_parallel_executions_per_server=2, on_error=_resize_retry)
def resize_image(params: dict[str, int], ctx: JobContext) -> None:
    """A sync job: runs in a worker thread, at most 2 at a time per worker instance."""
    time.sleep(0.01)
    count("resize_image")


@jobs.recurrent(run_every="1s", priority=200)
async def heartbeat(ctx: JobContext) -> None:
    """A recurrent job: exactly one record, rescheduled one second after each run."""
    count("heartbeat")


@jobs.recurrent(cron="* * * * *", timezone="Europe/Paris")
async def minutely_report(ctx: JobContext) -> None:
    """A cron job in a timezone (it runs once at start, then at the top of each minute)."""
    count("minutely_report")


@contextlib.contextmanager
def mongo_uri(uri: str | None) -> Iterator[str]:
    if uri:
        yield uri
        return
    from dogs_mongo.mongod import start_local_mongod

    with console.status("starting a local mongod (single-node replica set)..."):
        mongod = start_local_mongod()
    console.print(f"[green]mongod ready[/green] at {mongod.uri}")
    try:
        yield mongod.uri
    finally:
        mongod.stop()


async def run_demo(example: Example, events: int) -> None:
    store_name = (
        f"MongoDB database {example.database}" if example.on_mongodb else "the in-memory store"
    )
    client = example.client(jobs)  # the container has n_partitions=4, as have its workers
    emails = [
        ScheduleItem(Email(to=f"user{i}@example.com", subject="Welcome"), unique_key=f"w:{i}")
        for i in range(events // 2)
    ]
    images = [ScheduleItem({"image_id": i, "width": 640}) for i in range(events - len(emails))]
    started = time.perf_counter()
    await client.schedule_many(send_email, emails)
    await client.schedule_many(resize_image, images)
    # On purpose: the same unique key again, to show that it is held once.
    again = await client.schedule(
        send_email, Email("user0@example.com", "Welcome"), unique_key="w:0"
    )
    assert isinstance(again, Duplicate), again
    console.print(
        f"scheduled {len(emails)} send_email and {len(images)} resize_image jobs on {store_name}; "
        f"a second 'w:0' was reported as {type(again).__name__} (scheduled twice on purpose: "
        "a unique key is held once, so nothing was added)"
    )

    options = {"workers_count": 16, "poll_interval": 0.2}
    async with (
        example.workers(jobs, **options) as first,
        example.workers(jobs, **options) as second,
    ):
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            mail = progress.add_task("send_email", total=len(emails))
            resize = progress.add_task("resize_image", total=len(images))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                progress.update(mail, completed=completed["send_email"])
                progress.update(resize, completed=completed["resize_image"])
                counts = {status.job_name: status for status in await client.status()}
                if not any(_unfinished(counts.get(job.name)) for job in (send_email, resize_image)):
                    break
                await anyio.sleep(0.1)
        await first.stop(grace=5)
        await second.stop(grace=5)
    elapsed = time.perf_counter() - started
    await summarize(client, elapsed)


async def summarize(client: DogsClient, elapsed: float) -> None:
    table = Table(title="Summary (from the job history)")
    for column in ("job", "runs ok", "failed attempts", "stale", "gave up", "still queued"):
        table.add_column(column, justify="right" if column != "job" else "left")
    counts = {status.job_name: status for status in await client.status()}
    for name in jobs.names:
        history = await client.get_executions(name, limit=100_000)
        statuses = Counter(record.status for record in history)
        left = counts.get(name)
        table.add_row(
            name,
            str(statuses[HistoryStatus.SUCCESS]),
            str(statuses[HistoryStatus.ERROR]),
            str(statuses[HistoryStatus.STALE]),
            str(0 if left is None else left.terminal),
            str(_unfinished(left)),
        )
    console.print(table)
    console.print(
        "The failed attempts are on purpose: send_email raises a ConnectionError on 15 % of its "
        "attempts to show retries with backoff (4 tries; a job whose 4 all fail gives up)."
    )
    done = completed["send_email"] + completed["resize_image"]
    console.print(f"{done} event jobs done in {elapsed:.1f}s ({done / elapsed:.0f} jobs/s)")


def _unfinished(counts: NameStatus | None) -> int:
    """Records of a job that may still run (those at their attempt limit have given up)."""
    if counts is None:
        return 0
    return counts.due + counts.scheduled_later + counts.running + counts.stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--uri", help="MongoDB URI (default: start a local mongod)")
    group.add_argument("--memory", action="store_true", help="use the in-memory store")
    parser.add_argument("--events", type=int, default=400, help="event jobs to schedule")
    parser.add_argument("--verbose", action="store_true", help="show the library's logs")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.CRITICAL,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.events < 2:
        parser.error("--events must be at least 2")

    async def run(args: argparse.Namespace) -> None:
        async with open_example(
            args, name="demo", memory=InMemoryJobStore, n_partitions=4
        ) as example:
            await run_demo(example, args.events)

    if args.memory:
        anyio.run(run, args)
        return
    with mongo_uri(args.uri) as uri:
        args.uri = uri
        anyio.run(run, args)


if __name__ == "__main__":
    main()
