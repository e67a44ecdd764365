"""A worker process for the crash-history test (run with ``sys.executable``, not a test).

Usage::

    python crash_history_worker.py URI DATABASE --kill-after row|completion --nth N
        [--workers W] [--lock-time S]

It serves ``crash_worker.py``'s jobs on a :class:`~dogs_mongo.AsyncMongoJobStore` whose
history write (``row``) or completion (``completion``) kills the process with SIGKILL right
after the store call that carries the ``N``-th success row or completion returns: exactly the
window between an execution's row and its fenced completion, or just after the completion.
``--nth 0`` never kills. It prints ``ready`` on stdout once its workers have started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import anyio
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core.domain.outcome import Delete
from dogs_core.domain.records import HistoryRecord, HistoryStatus
from dogs_core.domain.settle import Settlement
from dogs_core.runtime import Workers
from dogs_mongo import AsyncMongoJobStore
from tests.reliability.crash_worker import RUNS, build_jobs


class KillingStore(AsyncMongoJobStore):
    """Dies by SIGKILL right after the store call that carries the ``nth`` item of ``window``."""

    def __init__(self, *args: Any, window: str, nth: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._window = window
        self._nth = nth
        self._seen = 0

    def _count(self, window: str, items: int) -> None:
        if window != self._window or self._nth <= 0:
            return
        self._seen += items
        if self._seen >= self._nth:
            os.kill(os.getpid(), signal.SIGKILL)

    async def _write_rows(
        self, collection: Any, records: Sequence[HistoryRecord], operation: str
    ) -> None:
        # Every history write, a settlement batch's rows included (written just before its
        # settlements, in the same settle_many): a kill here is the window between the two.
        await super()._write_rows(collection, records, operation)
        self._count("row", sum(r.status is HistoryStatus.SUCCESS for r in records))

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        done = await super().settle_many(settlements)
        completions = (isinstance(s.command, Delete) for s in settlements)
        self._count("completion", sum(d and c for d, c in zip(done, completions, strict=True)))
        return done


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("uri")
    parser.add_argument("database")
    parser.add_argument("--kill-after", choices=("row", "completion"), default="row")
    parser.add_argument("--nth", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--lock-time", type=float, default=2.0)
    args = parser.parse_args(argv)

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    runs = client[args.database].get_collection(RUNS, write_concern=WriteConcern("majority"))
    store = KillingStore(client, args.database, window=args.kill_after, nth=args.nth)
    workers = Workers(
        store,
        build_jobs(runs, hang=False),
        workers_count=args.workers,
        # One job at a time, locks included: a slot frees once its completion landed and no
        # job is claimed ahead of a free slot (a given batch size), so a kill hits the window
        # of one job only.
        completions_in_flight=0 if args.workers == 1 else None,
        claim_batch_size=1 if args.workers == 1 else None,
        default_lock_time=timedelta(seconds=args.lock_time),
        poll_interval=0.1,
        probe_enabled=False,
    )
    async with workers:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            print("ready", flush=True)
            async for _ in signals:
                await workers.stop(grace=0)
                break
    await client.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
