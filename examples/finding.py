"""Finding jobs and errors: a job by its unique key once it is over, the errors of the last
hour grouped, the executions of one host, the records whose params hold a value.

    python examples/finding.py                    # the in-memory store
    python examples/finding.py --uri mongodb://localhost:27017/?replicaSet=rs0

Workers run 6 ``send_receipt`` jobs (two mailboxes are full: they fail for good) and 4
``import_orders`` jobs that are still waiting; then the client's finding calls say where
each is (``lookup``), what failed and why (``errors``: "mailbox 17 full" and "mailbox 42 full"
are one group), what the workers' host ran (``find_executions``), and which records hold a
params value (``search_jobs``). With ``--uri`` it uses a fresh database on your server and
drops it at the end. See docs/finding.md.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from dogs_core import JobContext, Jobs, Scheduled
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()

FULL = (17, 42)


class MailboxFullError(Exception):
    """The receiving server said no."""


@jobs.event(max_tries=1)
async def send_receipt(params: dict[str, int], ctx: JobContext) -> str:
    if params["user_id"] in FULL:
        raise MailboxFullError(f"mailbox {params['user_id']} full")
    return f"sent to user {params['user_id']}"


@jobs.event
async def import_orders(params: dict[str, str], ctx: JobContext) -> None:
    pass


async def run(example: Example) -> None:
    client = example.client(jobs)
    receipts = [
        await client.schedule(send_receipt, {"user_id": n}, unique_key=f"receipt-{n}")
        for n in (3, 17, 25, 42, 51, 60)
    ]
    for plan in ("free", "pro", "pro", "team"):
        await client.schedule(import_orders, {"plan": plan}, run_in="1h")
    async with example.workers(jobs, workers_count=4, poll_interval="100ms") as workers:
        for outcome in receipts:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout="30s")
        await workers.stop()

    found = await client.lookup("receipt-25")
    (job,) = found.jobs
    status = job.newest.status.value if job.newest else "-"
    print(f"receipt-25: found by its {found.matched_by}, {job.where}, last run {status}")

    report = await client.errors(window="1h")
    for group in report.groups:
        kind = group.error_type.rsplit(".", 1)[-1]
        print(
            f"errors: {group.count} x {kind} {group.fingerprint!r} in {', '.join(group.job_names)}"
        )

    here = socket.gethostname()
    ran_here = await client.find_executions(owner=here, limit=100)
    failed_here = await client.find_executions(owner=here, status="error")
    print(f"run on this host: {len(ran_here)} executions, {len(failed_here)} errors")

    pro = await client.search_jobs(import_orders, params="plan=pro")
    print(f"import_orders waiting with plan=pro: {len(pro)}")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="finding",
        memory=InMemoryJobStore,
        description="Dogs: finding jobs and errors",
    )


if __name__ == "__main__":
    main()
