"""Quickstart (async): define jobs, schedule them, run workers, read the results.

    python examples/quickstart_async.py                    # the in-memory store
    python examples/quickstart_async.py --uri mongodb://localhost:27017/?replicaSet=rs0

With ``--uri`` it uses a fresh database on your server and drops it at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from dogs_core import Duplicate, JobContext, Jobs
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@dataclass
class Welcome:
    user_id: int
    name: str


@jobs.event(max_tries=3, lock_time="30s")
async def send_welcome(params: Welcome, ctx: JobContext) -> str:
    """An event job: one record per call to schedule(), params checked against Welcome."""
    ctx.logger.info("welcoming %s", params.name)
    await anyio.sleep(0.01)  # call the mail API here
    return f"welcomed {params.name}"


@jobs.recurrent(run_every="1h")
async def purge_sessions(ctx: JobContext) -> int:
    """A recurrent job: one record, run at start and then an hour after each run."""
    return 0


async def run(example: Example) -> None:
    # -- the wiring: a client schedules, workers run (both from example.container) ------------
    client = example.client(jobs)
    for user_id, name in enumerate(["ada", "grace", "linus"], start=1):
        await client.schedule(send_welcome, Welcome(user_id, name), unique_key=f"welcome:{user_id}")
    again = await client.schedule(send_welcome, Welcome(1, "ada"), unique_key="welcome:1")
    assert isinstance(again, Duplicate)  # the same unique key is scheduled only once
    async with example.workers(jobs, workers_count=4, poll_interval=0.1) as workers:
        while await client.find_jobs(send_welcome):  # noqa: ASYNC110 - done jobs are deleted
            await anyio.sleep(0.05)
        await workers.stop()
    # -- the results -----------------------------------------------------------------------------
    print(f"second 'welcome:1' was a duplicate of {again.existing_id}")
    for execution in reversed(await client.get_executions(send_welcome)):
        print(f"{execution.job_name}: {execution.status.value} -> {execution.result}")
    for execution in await client.get_executions(purge_sessions):
        print(f"{execution.job_name}: {execution.status.value} -> {execution.result}")
    (record,) = await client.find_jobs(purge_sessions)
    print(f"{record.job_name} runs next at {record.next_run_at:%H:%M} UTC")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run, argv, name="quickstart", memory=InMemoryJobStore, description="Dogs quickstart (async)"
    )


if __name__ == "__main__":
    main()
