"""The operator's console from Python: the workers that run, a bulk retry by error type with
its progress, the audit trail, and a worker asked to quiet.

    python examples/operators_console.py                    # the in-memory store
    python examples/operators_console.py --uri mongodb://localhost:27017/?replicaSet=rs0

An outage: the SMTP server refused connections for a while, and every ``send_email`` of that
time failed for good (``max_tries=1``). Once it is back, an operator counts the failed jobs
whose last error was ``ConnectionRefusedError`` (a dry run), retries them all in chunks as
``alice``, and reads the audit trail; the workers run the retried jobs. Meanwhile the registry
shows the worker and what it runs, and the operator asks it to quiet. What ``dogs workers``,
``dogs bulk`` and ``dogs audit`` do from the shell. With ``--uri`` it uses a fresh database on
your server and drops it at the end. See docs/bulk-actions.md, docs/workers.md, docs/audit.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from dogs_core import JobContext, Jobs, Scheduled
from dogs_core.domain.bulk import BulkReport, bulk_selection
from dogs_core.domain.registry import shown_state
from dogs_core.runtime.plumbing.actors import acting_as
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()
smtp = {"up": False}


@jobs.event(max_tries=1)
async def send_email(params: dict[str, str], ctx: JobContext) -> str:
    if not smtp["up"]:
        raise ConnectionRefusedError("SMTP server refused the connection")
    return f"sent to {params['to']}"


@jobs.event(max_tries=1)
async def resize_image(params: dict[str, int], ctx: JobContext) -> str:
    if params["width"] > 4000:
        raise ValueError(f"{params['width']} px is too wide")
    return f"resized to {params['width']} px"


def progress(report: BulkReport) -> None:
    print(f"  retried {report.changed} of {report.matched} (chunk {report.chunks})")


async def outage(example: Example) -> None:
    smtp["up"] = False  # the outage begins
    client = example.client(jobs)
    ids = [await client.schedule(send_email, {"to": f"user{n}@example.com"}) for n in range(7)]
    ids.append(await client.schedule(resize_image, {"width": 9000}))
    async with example.workers(jobs, workers_count=4, poll_interval="100ms") as workers:
        for outcome in ids:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout=30)
        with anyio.fail_after(10):  # its first beat is written beside its first claims
            while not (listed := await client.workers()):  # noqa: ASYNC110 - a store read
                await anyio.sleep(0.05)
        [info] = listed
        print(f"worker {info.host}:{info.pid} is {shown_state(info, client.clock.now())}, "
              f"{info.workers_count} slots, jobs {', '.join(info.job_names)}")  # fmt: skip

        selection = bulk_selection(state="failed", error_type="ConnectionRefusedError")
        print(
            f"failed with ConnectionRefusedError: {await client.bulk_count(selection)} (a dry run)"
        )
        smtp["up"] = True  # the outage is over
        with acting_as("alice", source="api"):
            report = await client.bulk("retry", selection, chunk_size=3, on_progress=progress)
        audited = report.audit_id is not None
        print(f"retried {report.changed}, skipped {report.skipped_total}, audited {audited}")
        await anyio.sleep(1)  # the workers run the retried jobs
        failed = await client.find_jobs(state="failed")
        print(f"still failed: {[record.job_name for record in failed]}")

        with acting_as("alice", source="api"):
            asked = await client.quiet_worker(workers.owner.instance_id)
        assert asked is not None
        print(f"asked to quiet: now {shown_state(asked, client.clock.now())} (taken within 10 s)")
        await workers.stop()

    for entry in reversed(await client.audit_log()):
        print(f"audit: {entry.action} of {entry.target!r} by {entry.actor}: {entry.count}")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        outage,
        argv,
        name="console",
        memory=InMemoryJobStore,
        description="Dogs: the operator's console from Python",
    )


if __name__ == "__main__":
    main()
