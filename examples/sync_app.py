"""A sync application (a Django or Flask app, a script): blocking workers and client.

    python examples/sync_app.py                      # the in-memory store (its sync face)
    python examples/sync_app.py --uri mongodb://localhost:27017/?replicaSet=rs0

No ``async`` anywhere in the application: :class:`~dogs_core.BlockingWorkers` runs the runtime
in a background event-loop thread, ``def`` handlers run in worker threads, and a view schedules
jobs through :class:`~dogs_core.BlockingDogsClient`, which calls the store in the view's own
thread (no event loop: one ``schedule()`` is one insert). The store is a sync one
(:class:`~dogs_testing.SyncInMemoryJobStore`, or :class:`~dogs_mongo.MongoJobStore` with
PyMongo's ``MongoClient``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dogs_core import (
    BlockingDogsClient,
    JobContext,
    Jobs,
    Scheduled,
)
from dogs_mongo import Example, run_blocking_example
from dogs_testing import SyncInMemoryJobStore

jobs = Jobs()
_threads: set[str] = set()


@dataclass
class Invoice:
    order_id: int
    amount_cents: int


@jobs.event(max_parallel_executions_per_server=2, lock_time="1m")
def render_invoice(params: Invoice, ctx: JobContext) -> str:
    """Blocking work is fine: it runs in a worker thread (at most 2 at once per instance)."""
    _threads.add(threading.current_thread().name)
    time.sleep(0.05)  # render a PDF...
    ctx.extend_lock_time_blocking("1m")  # a long sync job keeps its lock like this
    return f"invoice-{params.order_id}.pdf ({params.amount_cents / 100:.2f} EUR)"


def checkout_view(client: BlockingDogsClient, order_id: int, amount_cents: int) -> str:
    """What a web view does: schedule and answer at once; a retried request is harmless."""
    outcome = client.schedule(
        render_invoice, Invoice(order_id, amount_cents), unique_key=f"invoice:{order_id}"
    )
    return "invoice queued" if isinstance(outcome, Scheduled) else "invoice already queued"


def run(example: Example) -> None:
    with (
        example.blocking_client(jobs) as client,
        example.blocking_workers(jobs, workers_count=4, poll_interval=0.1) as workers,
    ):
        for order_id, amount in [(1, 1999), (2, 4500), (1, 1999), (3, 990), (4, 12000)]:
            print(f"POST /checkout order={order_id}: {checkout_view(client, order_id, amount)}")
        deadline = time.monotonic() + 30
        while client.find_jobs(render_invoice) and time.monotonic() < deadline:
            time.sleep(0.05)
        workers.stop(grace=5)
        for execution in reversed(client.get_executions(render_invoice)):
            print(f"{execution.status.value}: {execution.result} in {execution.duration_ms} ms")
    print(f"handlers ran in worker threads: {all(not n.startswith('Main') for n in _threads)}")


def main(argv: Sequence[str] | None = None) -> None:
    run_blocking_example(
        run,
        argv,
        name="sync_app",
        memory=SyncInMemoryJobStore,
        description="Dogs in a sync application",
    )


if __name__ == "__main__":
    main()
