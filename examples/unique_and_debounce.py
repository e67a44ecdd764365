"""Shaping work at the door: unique keys with a window, keys from params, replace, debounce,
throttle, a start deadline and tags, each one option of ``schedule()``.

    python examples/unique_and_debounce.py                    # the in-memory store
    python examples/unique_and_debounce.py --uri mongodb://localhost:27017/?replicaSet=rs0

Prints the outcome of every call (``Scheduled``, ``Duplicate``, ``Replaced``, ``Debounced``) and
what ran. See docs/uniqueness.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from dogs_core import (
    Debounced,
    Duplicate,
    JobContext,
    Jobs,
    Replaced,
    Scheduled,
    ScheduleOutcome,
    Unique,
)
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()
RAN: list[tuple[str, Any]] = []


@jobs.event
async def sync_customer(params: dict[str, Any], ctx: JobContext) -> None:
    RAN.append(("sync_customer", params))


@jobs.event
async def reindex(params: dict[str, Any], ctx: JobContext) -> None:
    RAN.append(("reindex", params))


@jobs.event
async def notify(params: dict[str, Any], ctx: JobContext) -> None:
    RAN.append(("notify", params))


@jobs.event
async def send_report(params: dict[str, Any], ctx: JobContext) -> None:
    RAN.append(("send_report", params))


def said(outcome: ScheduleOutcome) -> str:
    if isinstance(outcome, Scheduled):
        return "Scheduled"
    if isinstance(outcome, Replaced):
        return "Replaced"
    if isinstance(outcome, Debounced):
        return "Debounced"
    assert isinstance(outcome, Duplicate)
    return f"Duplicate ({outcome.reason})"


async def tour(example: Example) -> None:
    client = example.client(jobs)
    # A start deadline and tags: no worker runs in the next 0.2 s, so this one expires.
    await client.schedule(
        send_report, {"n": "late"}, start_before=0.1, tags=["tenant:acme", "report"]
    )
    tagged = await client.find_jobs(tags="tenant:acme")
    print(f"tags: {len(tagged.jobs)} job tagged tenant:acme")
    await anyio.sleep(0.2)
    async with example.workers(jobs, poll_interval=0.1) as workers:
        # A key held while the record exists, then 10 minutes after it ended.
        window = Unique(key="cust:42", period="10m")
        first = await client.schedule(sync_customer, {"id": 42}, unique=window, run_in=0.3)
        again = await client.schedule(sync_customer, {"id": 42}, unique=window)
        print(f"window: {said(first)}, then {said(again)} while pending")
        await anyio.sleep(0.8)
        after = await client.schedule(sync_customer, {"id": 42}, unique=window)
        print(f"window: after the run, {said(after)}")

        # A key from params: one pending sync per customer, whatever else the params say.
        by_customer = Unique(by=("customer_id",), states="pending")
        outcomes = [
            await client.schedule(sync_customer, {"customer_id": 7, "n": n}, unique=by_customer,
                                  run_in="1h")
            for n in range(3)
        ]  # fmt: skip
        print(f"by params: {', '.join(said(o) for o in outcomes)}")

        # Replace: the newest params win while the job is pending.
        newest = Unique(key="reindex", on_conflict="replace")
        for version in (1, 2, 3):
            outcome = await client.schedule(reindex, {"version": version}, unique=newest,
                                            run_in=0.3)  # fmt: skip
            print(f"replace v{version}: {said(outcome)}")

        # Debounce: each call pushes the run to now + delay (never past max_wait).
        debounce = Unique(key="notify:ada", on_conflict="debounce", delay=0.3, max_wait=2)
        storm = [await client.schedule(notify, {"n": n}, unique=debounce) for n in range(20)]
        print(f"debounce: {sum(isinstance(o, Scheduled) for o in storm)} scheduled, "
              f"{sum(isinstance(o, Debounced) for o in storm)} debounced")  # fmt: skip

        # Throttle: at most one per minute; the others are dropped (and told so).
        throttle = Unique(key="report:acme", on_conflict="throttle", period="1m")
        calls = [
            await client.schedule(send_report, {"n": n}, unique=throttle, run_in="1h")
            for n in range(4)
        ]
        print(f"throttle: {', '.join(said(o) for o in calls)}")

        await anyio.sleep(1.2)
        await workers.stop()
    expired = await client.get_executions(send_report, status="expired")
    print(f"start deadline: {len(expired)} expired ({expired[0].error_message})")
    print(f"ran: {sorted((name, sorted(params.items())) for name, params in RAN)}")


def main(argv: Sequence[str] | None = None) -> None:
    RAN.clear()
    run_example(
        tour, argv, name="unique", memory=InMemoryJobStore, description=__doc__.splitlines()[0]
    )


if __name__ == "__main__":
    main()
