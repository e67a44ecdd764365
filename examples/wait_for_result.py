"""Push: an idle worker woken by the change feed, a caller that waits for the outcome.

    python examples/wait_for_result.py                    # the in-memory store
    python examples/wait_for_result.py --uri mongodb://localhost:27017/?replicaSet=rs0

The workers poll only once an hour here: every job below is started because the store's change
feed (MongoDB change streams; the in-memory store's own) woke them, and each caller learns the
outcome from the history feed instead of polling for it. With ``--uri`` it uses a fresh
database on your server and drops it at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import HistoryStatus, JobContext, Jobs, RetryPolicy, Scheduled
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event(max_tries=2, retry=RetryPolicy(base=timedelta(milliseconds=10), jitter=0))
async def resize(params: dict[str, int], ctx: JobContext) -> str:
    """Fails on its first try for odd widths, to show that a retried failure is not the end."""
    if params["width"] % 2 and ctx.tries == 1:
        raise ValueError(f"odd width {params['width']}, retrying")
    if params["width"] <= 0:
        raise ValueError("no such width")
    return f"resized to {params['width']}px"


async def run(example: Example) -> None:
    client = example.client(jobs)
    async with example.workers(jobs, workers_count=4, poll_interval="1h") as workers:
        with anyio.fail_after(30):
            while not workers.watching:  # noqa: ASYNC110 - a property, not an event
                await anyio.sleep(0.01)
        print(f"change feed open: {workers.watching}")
        for width in (640, 1025, -1):
            outcome = await client.schedule(resize, {"width": width})
            assert isinstance(outcome, Scheduled)
            row = await client.wait_for(outcome.id, timeout="30s")
            if row.status is HistoryStatus.SUCCESS:
                print(f"width {width}: {row.result} (try {row.tries})")
            else:
                print(f"width {width}: failed for good on try {row.tries}: {row.error_message}")
        await workers.stop()


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="wait_for",
        memory=InMemoryJobStore,
        description="Dogs: wake-ups and wait_for",
    )


if __name__ == "__main__":
    main()
