"""Recurring schedules managed at run time: one event job, a schedule per tenant, added, changed,
paused, resumed and deleted while a worker runs them, with no code change and no redeploy.

    python examples/runtime_schedules.py                    # the in-memory store
    python examples/runtime_schedules.py --uri mongodb://localhost:27017/?replicaSet=rs0

The worker knows the event job ``nightly_report``; the application adds the schedules
``report-acme`` and ``report-globex`` at run time (``client.schedules.upsert``), each with its
own params. Each is stored as a recurrent record keyed by its id, so a run never overlaps the
previous one and the misfire policy applies. The same registry serves the shell::

    dogs worker examples.runtime_schedules:jobs --poll-interval 1
    dogs schedules set report-acme nightly_report --every 2s --params '{"tenant": "acme"}'
    dogs schedules pause report-acme

See docs/schedules.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio

from dogs_core import JobContext, Jobs
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@dataclass
class Report:
    tenant: str
    fmt: str = "pdf"


RUNS: list[tuple[str, str]] = []
#: Seconds between two runs of report-acme (short, so that the tour takes a few seconds).
TICK = 0.25


@jobs.event
async def nightly_report(params: Report, ctx: JobContext) -> str:
    RUNS.append((ctx.record.job_name, params.tenant))
    print(f"{datetime.now(UTC):%H:%M:%S.%f}"[:-3] + f" {ctx.record.job_name}: {params.tenant}")
    return f"{params.tenant}.{params.fmt}"


@jobs.recurrent(run_every="1h")
async def cleanup(ctx: JobContext) -> None:
    """A code-defined recurrent job: it shows in the schedules list, marked as from code."""


async def tour(example: Example) -> None:
    client = example.client(jobs)
    schedules = client.schedules
    acme = await schedules.upsert(
        "report-acme", nightly_report, every=TICK, params={"tenant": "acme"}
    )
    print(f"{acme.change} {acme.schedule.id}: {acme.schedule.rule}")
    again = await schedules.upsert(
        "report-acme", nightly_report, every=TICK, params={"tenant": "acme"}
    )
    print(f"the same upsert again: {again.change}")
    await schedules.upsert(
        "report-globex", "nightly_report", cron="0 3 * * *", timezone="Europe/Paris",
        params={"tenant": "globex", "fmt": "csv"},
    )  # fmt: skip
    async with example.workers(jobs, poll_interval=TICK / 3) as workers:
        await anyio.sleep(2.5 * TICK)
        changed = await schedules.upsert(
            "report-acme", nightly_report, every=TICK, params={"tenant": "acme-corp"}
        )
        print(f"{changed.change} report-acme: new params")
        await anyio.sleep(1.5 * TICK)
        await schedules.pause("report-acme")
        paused_runs = len(RUNS)
        await anyio.sleep(2 * TICK)
        print(f"runs while paused: {len(RUNS) - paused_runs}")
        for entry in await schedules.list():
            state = "paused" if entry.paused else "active"
            print(f"  {entry.id:<14} {entry.source:<8} {entry.job:<15} {entry.rule} ({state})")
        await schedules.resume("report-acme")
        await anyio.sleep(1.5 * TICK)
        await schedules.delete("report-acme")
        deleted_runs = len(RUNS)
        await anyio.sleep(1.5 * TICK)
        print(f"runs after delete: {len(RUNS) - deleted_runs}")
        await workers.stop()
    tenants = sorted({tenant for _, tenant in RUNS})
    print(f"report-acme ran {len(RUNS)} times, for {', '.join(tenants)}")


def main(argv: Sequence[str] | None = None) -> None:
    RUNS.clear()
    run_example(
        tour,
        argv,
        name="runtime_schedules",
        memory=InMemoryJobStore,
        description=__doc__.splitlines()[0],
    )


if __name__ == "__main__":
    main()
