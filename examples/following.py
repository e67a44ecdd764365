"""Following a running job: its progress, its log lines, live, from the caller.

    python examples/following.py                    # the in-memory store
    python examples/following.py --uri mongodb://localhost:27017/?replicaSet=rs0

``import_file`` reports its progress on every chunk and logs a line per chunk; with
``store_logs=True`` the lines are kept with the job. While it runs, the caller watches the
progress (``client.watch_progress``) and follows the lines (``client.follow_logs``) at once; both
end when the job ends. Afterwards the record is gone, but its history row keeps the final
progress and ``client.get_logs`` still reads the lines (by job id, or by execution id).
``render_report`` is a sync handler: ``ctx.progress(...)`` without ``await`` works there.

From the shell, with a worker running this module's jobs::

    dogs worker examples.following:jobs --progress-interval 1s
    dogs schedule examples.following:jobs import_file --params '{"chunks": 40, "pause": 0.5}'
    dogs jobs show ID                               # the progress row
    dogs jobs logs ID --follow                      # the lines, live, until the job ends

With ``--uri`` it uses a fresh database on your server and drops it at the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from dogs_core import DogsClient, JobContext, Jobs, Scheduled
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@dataclass
class Import:
    chunks: int = 10
    pause: float = 0.03


@jobs.event(store_logs=True, max_log_lines=500)
async def import_file(params: Import, ctx: JobContext) -> dict[str, int]:
    rows = 0
    for i in range(params.chunks):
        await anyio.sleep(params.pause)  # parse and store one chunk
        rows += 100
        await ctx.progress(
            (i + 1) / params.chunks, f"chunk {i + 1}/{params.chunks}", data={"rows": rows}
        )
        ctx.logger.info("chunk %d stored (%d rows so far)", i + 1, rows)
    ctx.logger.warning("3 rows skipped: no email")
    return {"rows": rows}


@jobs.event
def render_report(params: None, ctx: JobContext) -> str:
    for page in range(1, 6):
        time.sleep(0.01)  # render one page
        ctx.progress(page / 5, f"page {page}/5")
    return "report.pdf"


def _bar(fraction: float | None) -> str:
    if fraction is None:
        return "[" + "?" * 20 + "]"
    done = round(fraction * 20)
    return "[" + "#" * done + "." * (20 - done) + "]"


async def follow(client: DogsClient, job_id: str) -> None:
    """Watch the progress and follow the lines of one job, both until it ends."""

    async def progress() -> None:
        async for update in client.watch_progress(job_id, poll_interval="100ms"):
            print(f"progress {_bar(update.fraction)} {update.message} {dict(update.data or {})}")
        print("progress: the job has ended")

    async def lines() -> None:
        count = 0
        async for line in client.follow_logs(job_id, poll_interval="100ms"):
            count += 1
            if count <= 3 or line.level_name != "INFO":
                print(f"log {line.level_name} {line.message}")
        print(f"logs: {count} lines followed, the job has ended")

    async with anyio.create_task_group() as group:
        group.start_soon(progress)
        group.start_soon(lines)


async def run(example: Example) -> None:
    client = example.client(jobs)
    async with example.workers(jobs, poll_interval="100ms", progress_interval="100ms") as workers:
        outcome = await client.schedule(import_file, Import())
        assert isinstance(outcome, Scheduled)
        with anyio.fail_after(60):
            await follow(client, outcome.id)
        report = await client.schedule(render_report)
        assert isinstance(report, Scheduled)
        row = await client.wait_for(report.id, timeout="30s")
        final = row.progress
        print(f"render_report: {row.result}, last progress {final and final.message}")
        await workers.stop()
    print(f"get_job after the end: {await client.get_job(outcome.id)}")
    (row,) = await client.get_executions(job_id=outcome.id)
    final = row.progress
    assert final is not None
    print(f"history row: {row.status.value}, final progress {final.fraction:.0%} {final.message}")
    by_job = await client.get_logs(outcome.id)
    by_execution = await client.get_logs(row.execution_id)
    print(f"get_logs: {len(by_job)} lines by job id, {len(by_execution)} by execution id")
    print(f"last line: {by_job[-1].level_name} {by_job[-1].message}")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="following",
        memory=InMemoryJobStore,
        description="Dogs: follow a running job",
    )


if __name__ == "__main__":
    main()
