"""A base for store adapters that wrap another store: every port call goes through one hook.

Subclass :class:`JobStoreWrapper` and override :meth:`JobStoreWrapper.around` to time calls,
inject faults, count or log them; every method of :class:`~dogs_core.ports.AsyncJobStore` is
forwarded to ``inner`` through it, so a wrapper cannot forget one when the port grows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

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

__all__ = ["JobStoreWrapper"]

T = TypeVar("T")


class JobStoreWrapper:
    """An :class:`~dogs_core.ports.AsyncJobStore` that forwards every call to ``inner`` through
    :meth:`around`. ``close`` closes ``inner`` and is not routed through the hook."""

    def __init__(self, inner: AsyncJobStore) -> None:
        self.inner = inner

    async def around(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run one port call; ``method`` is its name. Override to add behaviour."""
        return await call()

    async def setup(self) -> None:
        await self.around("setup", self.inner.setup)

    async def capabilities(self) -> StoreCapabilities:
        return await self.around("capabilities", self.inner.capabilities)

    async def schedule(self, job: NewJob) -> ScheduleOutcome:
        return await self.around("schedule", lambda: self.inner.schedule(job))

    async def schedule_many(self, jobs: Sequence[NewJob]) -> BulkScheduleResult:
        return await self.around("schedule_many", lambda: self.inner.schedule_many(jobs))

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        await self.around(
            "ensure_recurrent",
            lambda: self.inner.ensure_recurrent(
                job_name, priority=priority, partition=partition, now=now
            ),
        )

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        return await self.around("claim", lambda: self.inner.claim(request))

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        return await self.around("claim_many", lambda: self.inner.claim_many(requests))

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        return await self.around(
            "extend_lock", lambda: self.inner.extend_lock(job_id, lock_id, locked_until)
        )

    async def complete(self, job_id: str, lock_id: str) -> bool:
        return await self.around("complete", lambda: self.inner.complete(job_id, lock_id))

    async def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        return await self.around("complete_many", lambda: self.inner.complete_many(claims))

    async def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
    ) -> bool:
        return await self.around(
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
        return await self.around(
            "mark_max_tries_reached",
            lambda: self.inner.mark_max_tries_reached(
                job_id, lock_id, now=now, expires_at=expires_at
            ),
        )

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        return await self.around("demote_stale", lambda: self.inner.demote_stale(job_id, lock_id))

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        return await self.around(
            "release_lock", lambda: self.inner.release_lock(job_id, lock_id, now=now)
        )

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        return await self.around(
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
        return await self.around(
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
        return await self.around(
            "backfill_retention",
            lambda: self.inner.backfill_retention(retention=retention, now=now),
        )

    async def unlock_all(self) -> int:
        return await self.around("unlock_all", self.inner.unlock_all)

    async def write_history(self, record: HistoryRecord) -> None:
        await self.around("write_history", lambda: self.inner.write_history(record))

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        await self.around("write_history_many", lambda: self.inner.write_history_many(records))

    async def get_executions(
        self, job_name: str, *, limit: int = 20, skip: int = 0
    ) -> list[HistoryRecord]:
        return await self.around(
            "get_executions", lambda: self.inner.get_executions(job_name, limit=limit, skip=skip)
        )

    async def get_job(self, job_id: str) -> JobRecord | None:
        return await self.around("get_job", lambda: self.inner.get_job(job_id))

    async def find_jobs(
        self, *, job_name: str | None = None, limit: int | None = None
    ) -> list[JobRecord]:
        return await self.around(
            "find_jobs", lambda: self.inner.find_jobs(job_name=job_name, limit=limit)
        )

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        return await self.around("status_counts", lambda: self.inner.status_counts(now=now))

    async def close(self) -> None:
        await self.inner.close()
