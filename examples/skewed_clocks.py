"""Clocks that disagree: two worker instances whose machines' clocks are 45 s apart share jobs.

    python examples/skewed_clocks.py                    # the in-memory store
    python examples/skewed_clocks.py --uri mongodb://localhost:27017/?replicaSet=rs0

Dogs decides lock expiry with the claiming machine's clock, so the fast machine would take the
slow one's live locks for expired ones and run those jobs twice. Here each instance measures its
clock against the database's (``hello.localTime`` on MongoDB; the in-memory store's own clock
plays the server) and computes every lock and run time on it: each job runs once, and each
instance logs once how far off its machine's clock is. With ``--uri`` it uses a fresh database
on your server and drops it at the end. See docs/reliability.md, "Lock expiry on the database's
clock".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import DogsClient, JobContext, Jobs, Scheduled, Workers
from dogs_core.runtime import SkewedClock, SystemClock
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()
runs: Counter[str] = Counter()


@jobs.event(lock_time=3, heartbeat=True)
async def render_invoice(params: dict[str, int], ctx: JobContext) -> None:
    runs[ctx.job_id] += 1
    await anyio.sleep(3.5 if params["n"] % 10 == 0 else 0.01)  # some outlive their lock


async def run(example: Example) -> None:
    store = example.store
    ahead, behind = (
        SkewedClock(SystemClock(), timedelta(seconds=22.5)),
        SkewedClock(SystemClock(), timedelta(seconds=-22.5)),
    )
    client = DogsClient(store, jobs, clock=ahead)
    ids = [await client.schedule(render_invoice, {"n": n}) for n in range(40)]
    fleet = [
        Workers(store, jobs, clock=clock, workers_count=8, poll_interval="100ms")
        for clock in (ahead, behind)
    ]
    async with fleet[0], fleet[1]:
        for outcome in ids:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout="60s")
        for workers in fleet:
            await workers.stop()
    for name, workers in zip(("ahead", "behind"), fleet, strict=True):
        offset = workers.clock.offset.total_seconds()
        print(f"instance {name}: measured offset {offset:+.1f} s to the database's clock")
    print(f"jobs run: {len(runs)} of {len(ids)}")
    print(f"each job ran once: {set(runs.values()) == {1}}")
    assert len(runs) == len(ids)
    assert set(runs.values()) == {1}


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    runs.clear()
    run_example(
        run,
        argv,
        name="clocks",
        memory=lambda: InMemoryJobStore(clock=SystemClock()),
        description="Dogs: workers whose clocks disagree",
    )


if __name__ == "__main__":
    main()
