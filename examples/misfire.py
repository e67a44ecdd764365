"""Missed runs of recurrent jobs: the three misfire policies, and a cron job beside a backlog.

    python examples/misfire.py                    # the in-memory store
    python examples/misfire.py --uri mongodb://localhost:27017/?replicaSet=rs0

Three hourly jobs whose workers were stopped for four and a half hours (their records are made
due at the slot 4.5 h ago, as stopped workers leave them) start again: ``run_once`` runs once for
the five missed slots, ``skip`` runs none of them (each is more than its grace late), and
``run_all`` with ``max_catch_up=3`` runs the three newest, oldest first, then is on time. A skip
writes no history row: it is told by an INFO log line and a ``JobMisfired`` event, printed here.

Then a backlog: 300 event jobs wait, older than a new recurrent job. At its default priority
(1000) the recurrent job runs first; at the events' priority (100) it waits for all of them.
With ``--uri`` each part uses a fresh database on your server and drops it at the end. See
docs/recurrent-jobs.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_core.domain.events import Event, JobMisfired
from dogs_core.domain.records import to_millis
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_mongo import example_parser
from dogs_mongo.runner import open_example
from dogs_testing import InMemoryJobStore

HOUR = timedelta(hours=1)
BEHIND = 4 * HOUR + 30 * timedelta(minutes=1)
POLICIES: dict[str, dict[str, Any]] = {
    "report_once": {"misfire": "run_once"},
    "report_skip": {"misfire": "skip", "misfire_grace": "1m"},
    "report_all": {"misfire": "run_all", "max_catch_up": 3},
}


def hours_from(t0: datetime, moment: datetime) -> str:
    hours = (moment - t0) / HOUR
    return f"{-hours:.1f} h ago" if hours < 0 else f"in {hours:.1f} h"


async def missed_runs(store: AsyncJobStore) -> None:
    jobs, ran = Jobs(), {name: list[datetime]() for name in POLICIES}
    for name, options in POLICIES.items():

        async def report(ctx: JobContext, name: str = name) -> None:
            assert ctx.record.next_run_at is not None
            ran[name].append(ctx.record.next_run_at)  # the slot this run is for

        jobs.recurrent(name=name, run_every="1h", **options)(report)
    t0 = datetime.now(UTC)
    for name in POLICIES:  # the records as workers stopped 4.5 h ago left them
        await store.ensure_recurrent(name, priority=1000, partition=0, now=to_millis(t0 - BEHIND))
    telemetry, events = Telemetry(), list[Event]()
    telemetry.subscribe(events.append, JobMisfired)
    client = DogsClient(store, jobs)
    async with Workers(store, jobs, telemetry=telemetry, poll_interval=0.05) as workers:
        with anyio.fail_after(30):
            while not await caught_up(client):  # noqa: ASYNC110 - the records are in the store
                await anyio.sleep(0.05)
        await workers.stop()
    for name, options in POLICIES.items():
        (record,) = await client.find_jobs(name)
        slots = ", ".join(hours_from(t0, slot) for slot in ran[name]) or "none"
        said = ", ".join(f"{key}={value!r}" for key, value in options.items())
        print(f"{name} ({said}): {len(ran[name])} run(s), for the slots: {slots}")
        print(f"  next run {hours_from(t0, record.next_run_at)}")
    for event in events:
        assert isinstance(event, JobMisfired)
        span = f"{hours_from(t0, event.first_slot)} to {hours_from(t0, event.last_slot)}"
        print(f"JobMisfired: {event.job.job_name} skipped {event.skipped} slot(s) ({span})")


async def caught_up(client: DogsClient) -> bool:
    now = datetime.now(UTC)
    for name in POLICIES:
        (record,) = await client.find_jobs(name)
        if record.lock_id is not None or record.next_run_at <= now:
            return False
    return True


async def behind_a_backlog(store: AsyncJobStore, priority: int | None) -> None:
    jobs, order = Jobs(), list[str]()
    done = anyio.Event()

    @jobs.event
    async def backlog(params: Any, ctx: JobContext) -> None:
        order.append("event")
        await anyio.sleep(0.01)

    options: dict[str, Any] = {} if priority is None else {"priority": priority}

    @jobs.recurrent(run_every="1h", **options)
    async def nightly(ctx: JobContext) -> None:
        order.append("nightly")
        done.set()

    await DogsClient(store, jobs).schedule_many(backlog, [{} for _ in range(300)])
    async with Workers(store, jobs, poll_interval=0.05) as workers:
        with anyio.fail_after(60):
            await done.wait()
        await workers.stop()
    said = f"priority {nightly.priority}" + (" (the default)" if priority is None else "")
    print(f"nightly at {said}: ran after {order.index('nightly')} of 300 older events")


async def run(args: argparse.Namespace) -> None:
    # A container (and so a store, or a fresh database) per part: each starts empty.
    async with open_example(args, name="misfire", memory=InMemoryJobStore) as example:
        await example.store.setup()
        await missed_runs(example.store)
    for priority in (None, 100):
        async with open_example(args, name="misfire", memory=InMemoryJobStore) as example:
            await example.store.setup()
            await behind_a_backlog(example.store, priority)


def main(argv: Sequence[str] | None = None) -> None:
    args = example_parser("Dogs: misfire policies and a backlog").parse_args(argv)
    anyio.run(run, args)


if __name__ == "__main__":
    main()
