"""A custom store adapter: a metrics wrapper around any async store, checked by the contract.

    python examples/custom_adapter.py                    # wraps the in-memory store
    python examples/custom_adapter.py --uri mongodb://localhost:27017/?replicaSet=rs0

:class:`MetricsJobStore` implements :class:`~dogs_core.ports.AsyncJobStore` by delegating every
call to another store and timing it: call counts, latency, slow-call warnings. The workers and
the client take it like any store. A store of your own (a wrapper like this, or a new backend)
proves it meets the port by passing the adapter contract suite. In your tests::

    # tests/test_metrics_store.py
    import pytest
    from dogs_core.domain.records import JobRecord
    from dogs_testing import InMemoryJobStore, JobStoreContract

    class TestMetricsJobStore(JobStoreContract):  # the name must start with "Test"
        @pytest.fixture
        def store(self) -> MetricsJobStore:
            return MetricsJobStore(InMemoryJobStore())

        async def seed_record(self, store, record: JobRecord) -> None:  # optional
            await store.inner.insert_record(record)

That is some 70 tests of claims, fencing, uniqueness, retention and more (``tests/test_examples.py``
runs exactly this).
"""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import anyio

from dogs_core import DogsClient, JobContext, Jobs, ScheduleItem, Workers
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    ClaimRequest,
    HistoryRecord,
    JobRecord,
    NameStatus,
    NewJob,
    ScheduleOutcome,
)
from dogs_core.ports import AsyncJobStore, StoreCapabilities

T = TypeVar("T")
logger = logging.getLogger("myapp.store")


@dataclass
class CallStats:
    calls: int = 0
    errors: int = 0
    total_seconds: float = 0.0
    max_seconds: float = 0.0

    @property
    def mean_ms(self) -> float:
        return 1000 * self.total_seconds / self.calls if self.calls else 0.0


class MetricsJobStore:
    """An :class:`~dogs_core.ports.AsyncJobStore` that times every call of ``inner``.

    ``stats`` maps a method name to its :class:`CallStats`; calls slower than ``slow`` seconds
    are logged as warnings. Errors are counted and re-raised unchanged (a
    :class:`~dogs_core.errors.TransientStoreError` must stay one, the runtime retries it).
    """

    def __init__(self, inner: AsyncJobStore, *, slow: float = 0.5) -> None:
        self.inner = inner
        self.slow = slow
        self.stats: dict[str, CallStats] = {}

    async def _timed(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        stats = self.stats.setdefault(name, CallStats())
        started = time.perf_counter()
        try:
            return await call()
        except Exception:
            stats.errors += 1
            raise
        finally:
            elapsed = time.perf_counter() - started
            stats.calls += 1
            stats.total_seconds += elapsed
            stats.max_seconds = max(stats.max_seconds, elapsed)
            if elapsed > self.slow:
                logger.warning("slow store call %s: %.0f ms", name, elapsed * 1000)

    async def setup(self) -> None:
        await self._timed("setup", self.inner.setup)

    async def capabilities(self) -> StoreCapabilities:
        return await self._timed("capabilities", self.inner.capabilities)

    async def schedule(self, job: NewJob) -> ScheduleOutcome:
        return await self._timed("schedule", lambda: self.inner.schedule(job))

    async def schedule_many(self, jobs: Sequence[NewJob]) -> BulkScheduleResult:
        return await self._timed("schedule_many", lambda: self.inner.schedule_many(jobs))

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        await self._timed(
            "ensure_recurrent",
            lambda: self.inner.ensure_recurrent(
                job_name, priority=priority, partition=partition, now=now
            ),
        )

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        return await self._timed("claim", lambda: self.inner.claim(request))

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        return await self._timed(
            "extend_lock", lambda: self.inner.extend_lock(job_id, lock_id, locked_until)
        )

    async def complete(self, job_id: str, lock_id: str) -> bool:
        return await self._timed("complete", lambda: self.inner.complete(job_id, lock_id))

    async def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
    ) -> bool:
        return await self._timed(
            "reschedule",
            lambda: self.inner.reschedule(
                job_id,
                lock_id,
                next_run_at=next_run_at,
                priority=priority,
                reset_tries=reset_tries,
            ),
        )

    async def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        return await self._timed(
            "mark_max_tries_reached",
            lambda: self.inner.mark_max_tries_reached(
                job_id, lock_id, now=now, expires_at=expires_at
            ),
        )

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        return await self._timed("demote_stale", lambda: self.inner.demote_stale(job_id, lock_id))

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        return await self._timed(
            "release_lock", lambda: self.inner.release_lock(job_id, lock_id, now=now)
        )

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        return await self._timed(
            "probe",
            lambda: self.inner.probe(hint=hint, job_names=job_names, partition=partition, now=now),
        )

    async def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        return await self._timed(
            "reconcile_partitions",
            lambda: self.inner.reconcile_partitions(
                job_names=job_names,
                n_partitions=n_partitions,
                now=now,
                limit=limit,
                choose_partition=choose_partition,
            ),
        )

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        return await self._timed(
            "backfill_retention",
            lambda: self.inner.backfill_retention(retention=retention, now=now),
        )

    async def unlock_all(self) -> int:
        return await self._timed("unlock_all", self.inner.unlock_all)

    async def write_history(self, record: HistoryRecord) -> None:
        await self._timed("write_history", lambda: self.inner.write_history(record))

    async def get_executions(
        self, job_name: str, *, limit: int = 20, skip: int = 0
    ) -> list[HistoryRecord]:
        return await self._timed(
            "get_executions", lambda: self.inner.get_executions(job_name, limit=limit, skip=skip)
        )

    async def get_job(self, job_id: str) -> JobRecord | None:
        return await self._timed("get_job", lambda: self.inner.get_job(job_id))

    async def find_jobs(
        self, *, job_name: str | None = None, limit: int | None = None
    ) -> list[JobRecord]:
        return await self._timed(
            "find_jobs", lambda: self.inner.find_jobs(job_name=job_name, limit=limit)
        )

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        return await self._timed("status_counts", lambda: self.inner.status_counts(now=now))

    async def close(self) -> None:
        await self._timed("close", self.inner.close)

    def report(self) -> str:
        lines = [f"{'store call':<24}{'calls':>7}{'errors':>8}{'mean ms':>9}{'max ms':>9}"]
        for name, stats in sorted(self.stats.items(), key=lambda item: -item[1].calls):
            lines.append(
                f"{name:<24}{stats.calls:>7}{stats.errors:>8}"
                f"{stats.mean_ms:>9.2f}{stats.max_seconds * 1000:>9.2f}"
            )
        return "\n".join(lines)


# -- a small workload through the wrapper ---------------------------------------------------------

jobs = Jobs()


@jobs.event
async def thumbnail(params: dict[str, Any], ctx: JobContext) -> str:
    await anyio.sleep(0.005)
    return f"thumb-{params['image']}.jpg"


async def run(inner: AsyncJobStore, count: int = 20) -> MetricsJobStore:
    store = MetricsJobStore(inner)  # the only line that changes in the application
    client = DogsClient(store, jobs)
    await client.schedule_many(thumbnail, [ScheduleItem({"image": i}) for i in range(count)])
    async with Workers(store, jobs, workers_count=8, poll_interval=0.1) as workers:
        while await client.find_jobs(thumbnail, limit=1):  # noqa: ASYNC110 - poll the store
            await anyio.sleep(0.02)
        await workers.stop()
    done = len(await client.get_executions(thumbnail, limit=count))
    print(f"{done} thumbnails made through {type(store).__name__}")
    print(store.report())
    return store


async def run_on_mongodb(uri: str) -> None:
    from pymongo import AsyncMongoClient

    from dogs_mongo import AsyncMongoJobStore

    database = f"dogs_custom_adapter_{uuid.uuid4().hex[:8]}"
    mongo: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri, tz_aware=True)
    try:
        await run(AsyncMongoJobStore(mongo, database))
    finally:
        await mongo.drop_database(database)
        await mongo.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A metrics wrapper as a custom store")
    parser.add_argument("--uri", help="MongoDB URI (default: wrap the in-memory store)")
    args = parser.parse_args(argv)
    if args.uri:
        anyio.run(run_on_mongodb, args.uri)
    else:
        from dogs_testing import InMemoryJobStore

        anyio.run(run, InMemoryJobStore())


if __name__ == "__main__":
    main()
