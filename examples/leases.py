"""Leases: a lock for your own code, kept in the job store, with a fencing token.

    python examples/leases.py                    # the in-memory store
    python examples/leases.py --uri mongodb://localhost:27017/?replicaSet=rs0

Three "hosts" (tasks here, processes or machines in real life) want to run the nightly cleanup;
``client.lock("nightly-cleanup")`` lets one at a time in, renewing the lease while its block runs
and giving it back at the end. A try while it is held raises ``LockHeldError``; ``wait=`` waits
for it instead. Each holder gets a fencing token, one more per acquisition, and writes the report
with it: a late write from an older holder is refused, which is what protects you from a holder
that stalled past its ttl. Last, a sync script takes the same lease with a plain ``with``. With
``--uri`` it uses a fresh database on your server and drops it at the end. See
docs/fleet-controls.md.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence

import anyio
import anyio.to_thread

from dogs_core import DogsClient, SyncDogsClient
from dogs_core.errors import LockHeldError
from dogs_core.ports import AsyncJobStore, JobStore

LEASE = "nightly-cleanup"


class FencedReport:
    """What the lease protects: it accepts a write only from a token at least as new as the last
    one it accepted (a database row with a ``fence`` column does the same)."""

    def __init__(self) -> None:
        self.fence = 0
        self.lines: list[str] = []

    def write(self, token: int, line: str) -> bool:
        if token < self.fence:
            return False
        self.fence = token
        self.lines.append(line)
        return True


holding = {"now": 0, "most": 0}


async def host(client: DogsClient, name: str, report: FencedReport, order: list[str]) -> None:
    async with client.lock(LEASE, ttl="5s", wait="10s") as lease:
        order.append(name)
        holding["now"] += 1
        holding["most"] = max(holding["most"], holding["now"])
        await anyio.sleep(0.05)  # the cleanup
        holding["now"] -= 1
        assert not lease.lost  # a long job checks this (or lease.raise_if_lost()) between steps
        report.write(lease.token, f"cleaned by {name} (token {lease.token})")


async def run(store: AsyncJobStore) -> FencedReport:
    client = DogsClient(store)
    report = FencedReport()
    async with client.lock(LEASE, ttl="5s") as first:
        print(f"took {first.name!r}: token {first.token}, lost: {first.lost}")
        try:
            async with client.lock(LEASE, ttl="5s"):
                pass
        except LockHeldError:
            print("a second try while it is held: LockHeldError")
        report.write(first.token, f"cleaned by the first holder (token {first.token})")
        stale_token = first.token
    order: list[str] = []
    async with anyio.create_task_group() as group:
        for name in ("host-a", "host-b", "host-c"):
            group.start_soon(host, client, name, report, order)
    print(f"three hosts took it in turn: {len(order)} holders, at most {holding['most']} at once")
    print(*report.lines, sep="\n")
    refused = not report.write(stale_token, "a late write of the first holder")
    print(f"a late write with the old token {stale_token} is refused: {refused}")
    return report


def run_blocking(store: JobStore, report: FencedReport) -> None:
    """A sync script (cron, a Django command): the same lease with a plain ``with``."""
    client = SyncDogsClient(store)
    with client.lock(LEASE, ttl="5s") as lease:
        written = report.write(lease.token, f"cleaned by a sync script (token {lease.token})")
        print(f"a sync script took it: token {lease.token}, its write accepted: {written}")


@contextlib.asynccontextmanager
async def mongodb_stores(uri: str) -> AsyncIterator[tuple[AsyncJobStore, JobStore]]:
    from pymongo import AsyncMongoClient, MongoClient

    from dogs_mongo import AsyncMongoJobStore, MongoJobStore

    database = f"dogs_leases_{uuid.uuid4().hex[:8]}"
    mongo: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri, tz_aware=True)
    sync_mongo: MongoClient[dict[str, object]] = MongoClient(uri, tz_aware=True)
    try:
        yield AsyncMongoJobStore(mongo, database), MongoJobStore(sync_mongo, database)
    finally:
        await mongo.drop_database(database)
        await mongo.close()
        sync_mongo.close()


@contextlib.contextmanager
def memory_stores() -> Iterator[tuple[AsyncJobStore, JobStore]]:
    from dogs_testing import InMemoryJobStore

    store = InMemoryJobStore()
    yield store, store.sync  # the async and the sync face of one store


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dogs: a lease with a fencing token")
    parser.add_argument("--uri", help="MongoDB URI (default: the in-memory store)")
    args = parser.parse_args(argv)
    holding.update(now=0, most=0)
    if args.uri:

        async def on_mongodb() -> None:
            async with mongodb_stores(args.uri) as (store, sync_store):
                report = await run(store)
                await anyio.to_thread.run_sync(run_blocking, sync_store, report)

        anyio.run(on_mongodb)
        return
    with memory_stores() as (store, sync_store):
        report = anyio.run(run, store)
        run_blocking(sync_store, report)


if __name__ == "__main__":
    main()
