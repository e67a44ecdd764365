"""Managing jobs: find them by state, cancel one, revive a failed one, read the history of one.

    python examples/managing_jobs.py                    # the in-memory store
    python examples/managing_jobs.py --uri mongodb://localhost:27017/?replicaSet=rs0

What an operator does with ``dogs jobs`` and ``dogs history``, from Python: a report scheduled
for later is found by its state and cancelled; an import fails until its attempt limit and ends
``failed``, the bug is "fixed" and ``retry_now`` revives it with a fresh budget of tries; a long
job is cancelled while it runs and stops at its next heartbeat; a job snoozes once without
using up an attempt. With ``--uri`` it uses a fresh database on your server and drops it at the
end. See docs/managing-jobs.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import anyio

from dogs_core import (
    Cancelled,
    DogsClient,
    HistoryRecord,
    JobContext,
    Jobs,
    Rescheduled,
    RetryPolicy,
    Scheduled,
    Snooze,
)
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()

#: What the handlers share with the script: the import's bug, who started and stopped, who snoozed.
broken_imports = {"on": True}
started: list[str] = []
stopped: list[str] = []
snoozed: set[str] = set()


@jobs.event(max_tries=2, retry=RetryPolicy(base=timedelta(milliseconds=10), jitter=0))
async def import_file(params: dict[str, str], ctx: JobContext) -> str:
    if broken_imports["on"]:
        raise ValueError(f"cannot parse {params['path']}")
    return f"imported {params['path']}"


@jobs.event
async def send_report(params: dict[str, str], ctx: JobContext) -> str:
    return f"report sent to {params['to']}"


@jobs.event(lock_time="1500ms", heartbeat=True)
async def crunch(params: None, ctx: JobContext) -> str:
    started.append(ctx.job_id)
    try:
        await anyio.sleep(60)
    finally:
        stopped.append(ctx.job_id)  # cancelled: its lock renewal found the record gone
    return "never gets here"


@jobs.event
async def poll_feed(params: None, ctx: JobContext) -> Snooze | str:
    if ctx.job_id not in snoozed:
        snoozed.add(ctx.job_id)
        return Snooze("50ms")  # not ready yet: run again soon, this try does not count
    return f"polled on try {ctx.tries}"


def _scheduled(outcome: object) -> str:
    assert isinstance(outcome, Scheduled)
    return outcome.id


def _row(row: HistoryRecord) -> str:
    error = f"{row.error_type}: {row.error_message}" if row.error_type else row.result
    return f"  try {row.tries}  {row.status.value:<9} {error}"


async def find_and_cancel(client: DogsClient) -> str:
    """Before any worker runs: find jobs by state, cancel the one scheduled for later; returns
    the id of the import."""
    report = _scheduled(await client.schedule(send_report, {"to": "ops"}, run_in="1h"))
    imported = _scheduled(await client.schedule(import_file, {"path": "a.csv"}))
    for state in ("scheduled", "due"):
        page = await client.find_jobs(state=state)
        print(f"find_jobs(state={state!r}): {[record.job_name for record in page.jobs]}")
    outcome = await client.cancel(report)
    assert isinstance(outcome, Cancelled)
    print(f"cancel send_report: Cancelled, was running: {outcome.was_running}")
    rows = await client.get_executions(job_id=report)
    print(f"history of send_report: {[row.status.value for row in rows]}")
    return imported


async def fail_then_revive(client: DogsClient, job_id: str) -> None:
    """The import fails twice and ends failed; retry_now revives it once the bug is fixed."""
    row = await client.wait_for(job_id, timeout="30s")
    print(
        f"import_file: {row.status.value} on try {row.tries}: {row.error_type}: {row.error_message}"
    )
    page = await client.find_jobs(import_file, state="failed")
    print(f"find_jobs(state='failed'): {[(r.job_name, r.tries) for r in page.jobs]}")
    broken_imports["on"] = False
    outcome = await client.retry_now(job_id)
    assert isinstance(outcome, Rescheduled)
    record = outcome.record
    print(f"retry_now import_file: {record.state(client.clock.now()).value}, tries {record.tries}")
    row = await client.wait_for(job_id, timeout="30s")
    print(f"import_file: {row.status.value} on try {row.tries}: {row.result}")
    print("history of import_file, newest first:")
    for row in await client.get_executions(job_id=job_id):
        print(_row(row))


async def cancel_running(client: DogsClient) -> None:
    """A long job is cancelled while it runs; it stops at its next heartbeat."""
    job_id = _scheduled(await client.schedule(crunch))
    with anyio.fail_after(30):
        # "running" is the claim; wait for the handler itself, or the cancel may land between the
        # claim and the start, and the worker rightly never starts it
        while job_id not in started:  # noqa: ASYNC110 - the handler's own list
            await anyio.sleep(0.02)
        outcome = await client.cancel(job_id)
        assert isinstance(outcome, Cancelled)
        print(f"cancel crunch while it runs: Cancelled, was running: {outcome.was_running}")
        while job_id not in stopped:  # noqa: ASYNC110 - the handler's own list
            await anyio.sleep(0.02)
    print(f"crunch stopped: {job_id in stopped}")
    result = await client.get_result(job_id)
    assert result is not None
    print(f"get_result(crunch): {result.status.value}")


async def snooze_once(client: DogsClient) -> None:
    job_id = _scheduled(await client.schedule(poll_feed))
    row = await client.wait_for(job_id, timeout="30s")
    statuses = [row.status.value for row in await client.get_executions(job_id=job_id)]
    print(f"poll_feed: {row.result}; history {statuses}")


async def run(example: Example) -> None:
    client = example.client(jobs)
    failing = await find_and_cancel(client)
    async with example.workers(jobs, workers_count=4, poll_interval="100ms") as workers:
        await fail_then_revive(client, failing)
        await cancel_running(client)
        await snooze_once(client)
        await workers.stop()


def main(argv: Sequence[str] | None = None) -> None:
    broken_imports["on"] = True
    stopped.clear()
    snoozed.clear()
    run_example(
        run,
        argv,
        name="managing",
        memory=InMemoryJobStore,
        description="Dogs: find, cancel, retry and read history",
    )


if __name__ == "__main__":
    main()
