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

from collections.abc import Sequence

import anyio
import anyio.to_thread

from dogs_core import DogsClient, SyncDogsClient
from dogs_core.errors import LockHeldError
from dogs_core.ports import JobStore
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

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


async def run(example: Example) -> FencedReport:
    client = example.client()
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


def sync_face(example: Example) -> JobStore:
    """The sync store of the example's database: the in-memory store's sync face, or the
    container's ``MongoJobStore``."""
    store = example.store
    if isinstance(store, InMemoryJobStore):
        return store.sync  # the async and the sync face of one store
    sync_store: JobStore = example.container.sync_store()
    return sync_store


async def run_both(example: Example) -> None:
    report = await run(example)
    await anyio.to_thread.run_sync(run_blocking, sync_face(example), report)


def main(argv: Sequence[str] | None = None) -> None:
    holding.update(now=0, most=0)
    run_example(
        run_both,
        argv,
        name="leases",
        memory=InMemoryJobStore,
        description="Dogs: a lease with a fencing token",
    )


if __name__ == "__main__":
    main()
