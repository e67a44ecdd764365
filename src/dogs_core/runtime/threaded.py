"""Adapt a sync :class:`~dogs_core.ports.JobStore` to the async port the runtime consumes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

import anyio
import anyio.to_thread

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
from dogs_core.ports import JobStore, StoreCapabilities

__all__ = ["ThreadedJobStore"]

_T = TypeVar("_T")


class ThreadedJobStore:
    """An :class:`~dogs_core.ports.AsyncJobStore` that runs each call of a sync store in a worker
    thread (``anyio.to_thread.run_sync``).

    ``limiter`` bounds how many calls run at once (anyio's default thread limiter when ``None``).
    A call that has started is not abandoned when its caller is cancelled: it completes and its
    result is returned, the cancellation being delivered at the caller's next checkpoint, so a
    claim made in a thread is never lost.
    """

    def __init__(self, sync_store: JobStore, limiter: anyio.CapacityLimiter | None = None) -> None:
        self._store = sync_store
        self._limiter = limiter

    @property
    def sync_store(self) -> JobStore:
        """The wrapped sync store."""
        return self._store

    async def _run(self, call: Callable[[], _T]) -> _T:
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def setup(self) -> None:
        await self._run(self._store.setup)

    async def capabilities(self) -> StoreCapabilities:
        return await self._run(self._store.capabilities)

    async def schedule(self, job: NewJob) -> ScheduleOutcome:
        return await self._run(partial(self._store.schedule, job))

    async def schedule_many(self, jobs: Sequence[NewJob]) -> BulkScheduleResult:
        return await self._run(partial(self._store.schedule_many, jobs))

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        await self._run(
            partial(
                self._store.ensure_recurrent,
                job_name,
                priority=priority,
                partition=partition,
                now=now,
            )
        )

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        return await self._run(partial(self._store.claim, request))

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        return await self._run(partial(self._store.claim_many, requests))

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        return await self._run(partial(self._store.extend_lock, job_id, lock_id, locked_until))

    async def complete(self, job_id: str, lock_id: str) -> bool:
        return await self._run(partial(self._store.complete, job_id, lock_id))

    async def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        return await self._run(partial(self._store.complete_many, claims))

    async def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
    ) -> bool:
        return await self._run(
            partial(
                self._store.reschedule,
                job_id,
                lock_id,
                next_run_at=next_run_at,
                priority=priority,
                reset_tries=reset_tries,
            )
        )

    async def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        return await self._run(
            partial(
                self._store.mark_max_tries_reached, job_id, lock_id, now=now, expires_at=expires_at
            )
        )

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        return await self._run(partial(self._store.demote_stale, job_id, lock_id))

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        return await self._run(partial(self._store.release_lock, job_id, lock_id, now=now))

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        return await self._run(
            partial(self._store.probe, hint=hint, job_names=job_names, partition=partition, now=now)
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
        return await self._run(
            partial(
                self._store.reconcile_partitions,
                job_names=job_names,
                n_partitions=n_partitions,
                now=now,
                limit=limit,
                choose_partition=choose_partition,
            )
        )

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        return await self._run(
            partial(self._store.backfill_retention, retention=retention, now=now)
        )

    async def unlock_all(self) -> int:
        return await self._run(self._store.unlock_all)

    async def write_history(self, record: HistoryRecord) -> None:
        await self._run(partial(self._store.write_history, record))

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        await self._run(partial(self._store.write_history_many, records))

    async def get_executions(
        self, job_name: str, *, limit: int = 20, skip: int = 0
    ) -> list[HistoryRecord]:
        return await self._run(
            partial(self._store.get_executions, job_name, limit=limit, skip=skip)
        )

    async def get_job(self, job_id: str) -> JobRecord | None:
        return await self._run(partial(self._store.get_job, job_id))

    async def find_jobs(
        self, *, job_name: str | None = None, limit: int | None = None
    ) -> list[JobRecord]:
        return await self._run(partial(self._store.find_jobs, job_name=job_name, limit=limit))

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        return await self._run(partial(self._store.status_counts, now=now))

    async def close(self) -> None:
        await self._run(self._store.close)
