"""Stats: what the jobs did in the last hour, per job name, from the execution history.

    python examples/stats.py                    # the in-memory store
    python examples/stats.py --uri mongodb://localhost:27017/?replicaSet=rs0

Workers run 16 ``resize_image`` jobs (a few milliseconds each, one of them slow) and 8
``charge_card`` jobs (one try each; the cards of two of them are declined), then
``client.stats()`` says, per job name: the runs, the success rate, the failures by error type,
the nearest-rank p50 and p95 and the max duration, and the runs per minute (what ``dogs stats``
prints). With ``--uri`` it uses a fresh database on your server and drops it at the end. See
docs/stats.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import JobContext, Jobs, JobStats, Scheduled
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


class CardDeclinedError(Exception):
    """The bank said no."""


@jobs.event
async def resize_image(params: dict[str, int], ctx: JobContext) -> str:
    await anyio.sleep(0.3 if params["n"] == 0 else 0.005)  # image 0 is huge
    return f"resized image {params['n']}"


@jobs.event(max_tries=1)
async def charge_card(params: dict[str, int], ctx: JobContext) -> str:
    if params["n"] % 4 == 3:
        raise CardDeclinedError(f"card {params['n']} declined")
    return f"charged card {params['n']}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _line(stats: JobStats) -> str:
    errors = {kind.rsplit(".", 1)[-1]: n for kind, n in stats.errors_by_type.items()}
    return (
        f"{stats.job_name}: {stats.attempts} attempts, {stats.succeeded} succeeded, "
        f"{stats.errors} errors {errors}, {stats.failed} failed jobs, "
        f"attempt success {_rate(stats.attempt_success_rate)}, "
        f"job success {_rate(stats.job_success_rate)}"
    )


async def run(example: Example) -> None:
    client = example.client(jobs)
    ids = [await client.schedule(resize_image, {"n": n}) for n in range(16)]
    ids += [await client.schedule(charge_card, {"n": n}) for n in range(8)]
    async with example.workers(jobs, workers_count=8, poll_interval="100ms") as workers:
        for outcome in ids:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout="30s")
        await workers.stop()
    stats = await client.stats(window=timedelta(hours=1))
    for item in stats:
        print(_line(item))
    images = next(item for item in stats if item.job_name == "resize_image")
    assert images.duration_p50_ms is not None
    assert images.duration_max_ms is not None
    print(f"resize_image p50 below 300 ms: {images.duration_p50_ms < 300}")
    print(f"resize_image slowest at least 300 ms: {images.duration_max_ms >= 300}")
    counted = sum(count for _, count in images.throughput)
    print(f"resize_image attempts counted minute by minute: {counted}")
    (cards,) = await client.stats(charge_card, window="5m")
    print(f"charge_card over 5 minutes: {cards.attempts} attempts")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run, argv, name="stats", memory=InMemoryJobStore, description="Dogs: stats per job name"
    )


if __name__ == "__main__":
    main()
