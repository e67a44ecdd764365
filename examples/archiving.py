"""Archiving: old history rows and failed records moved out of the live collections (and out
of TTL's reach) into archive collections, in small batches.

    python examples/archiving.py                    # the in-memory store
    python examples/archiving.py --uri mongodb://localhost:27017/?replicaSet=rs0

Workers run 24 ``send_receipt`` jobs and 3 ``sync_ledger`` jobs that fail on their one try
(failed records, status ``maxTriesReached``). A moment later ``client.archive()`` first counts
(``dry_run=True``), then moves everything older than one second in batches of 10, as
``dogs archive --older-than 30d`` does with real thresholds. With ``--uri`` it uses a fresh
database on your server (the archive collections are ``<history>_archive`` and
``<records>_archive``) and drops it at the end. See docs/archiving.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from dogs_core import JobContext, Jobs, Scheduled
from dogs_core.domain.archiving import ArchiveKind
from dogs_core.ports import AsyncArchiveStore
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


class LedgerDownError(Exception):
    """The ledger service did not answer."""


@jobs.event
async def send_receipt(params: dict[str, int], ctx: JobContext) -> str:
    return f"receipt {params['n']} sent"


@jobs.event(max_tries=1)
async def sync_ledger(params: dict[str, int], ctx: JobContext) -> None:
    raise LedgerDownError(f"ledger {params['n']} unreachable")


async def run(example: Example) -> None:
    client = example.client(jobs)
    receipts = [await client.schedule(send_receipt, {"n": n}) for n in range(24)]
    ledgers = [await client.schedule(sync_ledger, {"n": n}) for n in range(3)]
    async with example.workers(jobs, workers_count=8, poll_interval="100ms") as workers:
        for outcome in [*receipts, *ledgers]:
            assert isinstance(outcome, Scheduled)
            await client.wait_for(outcome.id, timeout="30s")
        await workers.stop()
    await anyio.sleep(1.1)  # everything is now more than a second old

    counted = await client.archive(older_than="1s", dry_run=True)
    print(
        f"would archive: {counted.moved[ArchiveKind.HISTORY]} history rows, "
        f"{counted.moved[ArchiveKind.FAILED_RECORDS]} failed records"
    )

    def progress(kind: ArchiveKind, moved: int, total: int) -> None:
        if moved:
            print(f"  {kind.value}: a batch of {moved} ({total} so far)")

    report = await client.archive(older_than="1s", batch_size=10, on_batch=progress)
    print(f"archived {report.total} documents in {report.batches} batches")
    left = await client.get_executions(send_receipt.name, limit=100)
    print(f"history rows of send_receipt left in the live collection: {len(left)}")
    store = example.store
    assert isinstance(store, AsyncArchiveStore)
    print(f"in the history archive: {await store.count_archived(ArchiveKind.HISTORY)}")
    print(f"in the records archive: {await store.count_archived(ArchiveKind.FAILED_RECORDS)}")
    again = await client.archive(older_than="1s")
    print(f"a second run moves {again.total}")


def main(argv: Sequence[str] | None = None) -> None:
    run_example(
        run,
        argv,
        name="archive",
        memory=InMemoryJobStore,
        description="Dogs: archive old history and failed records",
    )


if __name__ == "__main__":
    main()
