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

import logging
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import (
    JobContext,
    Jobs,
    RetryPolicy,
    telemetry,
)
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

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


async def run(example: Example) -> None:
    hub = telemetry.Telemetry()  # an application would use the process-wide one: subscribe()
    outcomes = Outcomes()
    hub.subscribe(outcomes)
    alerts: list[str] = []
    hub.subscribe(lambda e: alerts.append(str(getattr(e, "error", ""))), telemetry.JobFailed)

    example.container.telemetry.override(hub)  # the container's clients and workers report there
    client = example.client(jobs)
    await client.schedule_many(resize_image, [{"params": {"ms": ms}} for ms in (5, 10, 20, 50)])
    async with example.workers(
        jobs, workers_count=4, poll_interval="100ms", log_jobs=True
    ) as workers:
        with anyio.fail_after(30):
            while sum(outcomes.counts.values()) < 5:  # noqa: ASYNC110 - the subscriber's count
                await anyio.sleep(0.02)
        await workers.stop()
    print(f"scheduled: {outcomes.scheduled}")
    for (name, outcome), count in sorted(outcomes.counts.items()):
        print(f"{name} {outcome}: {count}")
    print(f"slowest run took at least 50 ms: {outcomes.slowest >= 0.05}")
    print(f"alerts: {alerts}")


def main(argv: Sequence[str] | None = None) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JobFields())
    job_lines = logging.getLogger("dogs.jobs")
    job_lines.addHandler(handler)
    job_lines.setLevel(logging.INFO)
    try:
        run_example(
            run,
            argv,
            name="telemetry",
            memory=InMemoryJobStore,
            description="Dogs: telemetry events and job log lines",
        )
    finally:
        job_lines.removeHandler(handler)


if __name__ == "__main__":
    main()
