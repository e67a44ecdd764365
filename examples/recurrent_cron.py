"""Recurrent jobs: a cron job in a timezone and a run_every job, three days in a blink.

    python examples/recurrent_cron.py

Part 1 computes the next runs of ``0 3 * * *`` in Europe/Paris around the switch to summer
time (03:00 in Paris is 02:00 UTC in winter, 01:00 UTC in summer). Part 2 runs the real workers
for three days of *virtual* time: trio's ``MockClock(autojump_threshold=0)`` jumps to the next
deadline whenever every task waits, and :class:`~dogs_testing.JobsHarness` drives the workers
on a loop clock, so three days take well under a second, not days: the clock stops only where
something is due (the workers read the in-memory change feeds without heartbeats, so no
one-second steps). (Needs ``trio``.)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import anyio
import trio.testing

from dogs_core import CronSchedule, JobContext, Jobs
from dogs_core.domain.schedules import next_run_after
from dogs_testing import JobsHarness

PARIS = ZoneInfo("Europe/Paris")
START = datetime(2030, 3, 29, 12, 0, tzinfo=UTC)  # a Friday; summer time starts on Sunday

jobs = Jobs()


@jobs.recurrent(cron="0 3 * * *", timezone="Europe/Paris")
async def nightly_report(ctx: JobContext) -> None:
    """At 03:00 Paris time every day (and once when its record is first created)."""


@jobs.recurrent(run_every="6h")
async def refresh_rates(ctx: JobContext) -> None:
    """Six hours after each run finished (Dogs' fixed delay)."""


def show_next_runs(count: int = 4) -> None:
    rule = CronSchedule("0 3 * * *", "Europe/Paris")
    moment = START
    print(f"next runs of '{rule.expression}' ({rule.timezone}) after {START:%Y-%m-%d %H:%M} UTC:")
    for _ in range(count):
        moment = next_run_after(rule, moment)
        print(f"  {moment.astimezone(PARIS):%a %d %H:%M %Z} = {moment:%H:%M} UTC")


async def run_three_days() -> None:
    async with JobsHarness(jobs, start=START) as harness:
        await harness.advance("3d")
        await harness.run_until_idle()
    for definition in jobs:
        runs = harness.history(definition)
        times = ", ".join(f"{row.started_at.astimezone(PARIS):%a %H:%M}" for row in runs)
        print(f"{definition.name}: {len(runs)} runs (Paris time: {times})")


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description="Recurrent jobs under virtual time").parse_args(argv)
    show_next_runs()
    started = time.perf_counter()
    clock = trio.testing.MockClock(autojump_threshold=0)
    anyio.run(run_three_days, backend="trio", backend_options={"clock": clock})
    print(f"3 virtual days took {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
