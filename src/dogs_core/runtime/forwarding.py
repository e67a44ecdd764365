"""A base for async stores that forward every port call somewhere else, through one hook.

:class:`ForwardingJobStore` writes each method of :class:`~dogs_core.ports.AsyncJobStore` once,
with its full signature, as a call of :meth:`ForwardingJobStore._forward` with the method's name
and its arguments exactly as received. A subclass implements only that hook: run the call in a
thread (:class:`~dogs_core.runtime.threaded.ThreadedJobStore`), wrap it
(:class:`dogs_testing.wrapper.JobStoreWrapper`), add a checkpoint before it
(:class:`dogs_testing.memory.InMemoryJobStore`), ... so a forwarding store cannot forget a
method when the port grows.

The change feeds (``watch_records``, ``watch_history``) are async iterators, not awaitables:
they go through a second hook, :meth:`ForwardingJobStore._forward_feed`, which returns the
feed (an async generator, typically) that the port method returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from dogs_core.domain.controls import Lease
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    NameStatus,
    NewJob,
    ScheduleOutcome,
)
from dogs_core.domain.stats import JobStats
from dogs_core.domain.steering import JobChange
from dogs_core.domain.wakeups import RecordChange
from dogs_core.ports import AsyncJobStore, StoreCapabilities

__all__ = ["ForwardingJobStore"]


class ForwardingJobStore(ABC):
    """An :class:`~dogs_core.ports.AsyncJobStore` whose every method (``close`` included) awaits
    ``self._forward(name, *args, **kwargs)``: the port method's name, then its arguments as the
    caller passed them (positional ones positionally, keyword-only ones by keyword; a defaulted
    parameter is always passed, with its value). The hook returns the method's result. The
    feeds return ``self._forward_feed(name, *args, **kwargs)`` the same way."""

    __slots__ = ()

    @abstractmethod
    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Perform the port call ``method(*args, **kwargs)`` and return its result."""

    @abstractmethod
    def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        """The feed of the port call ``method(*args, **kwargs)`` (``watch_records`` or
        ``watch_history``): an async iterator of its batches. Nothing need happen before its
        first ``__anext__``; closing it (``aclose``) closes the forwarded feed."""

    async def setup(self) -> None:
        await self._forward("setup")

    async def capabilities(self) -> StoreCapabilities:
        return cast(StoreCapabilities, await self._forward("capabilities"))

    async def server_time(self) -> datetime | None:
        return cast("datetime | None", await self._forward("server_time"))

    async def schedule(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        return cast(ScheduleOutcome, await self._forward("schedule", job, session=session))

    async def schedule_many(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        result = await self._forward("schedule_many", jobs, session=session)
        return cast(BulkScheduleResult, result)

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        await self._forward(
            "ensure_recurrent", job_name, priority=priority, partition=partition, now=now
        )

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        return cast("ClaimedJob | None", await self._forward("claim", request))

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        return cast("list[ClaimedJob]", await self._forward("claim_many", requests))

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        return cast(bool, await self._forward("extend_lock", job_id, lock_id, locked_until))

    async def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        return cast("list[bool]", await self._forward("complete_many", claims))

    async def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
        tries: int | None = None,
    ) -> bool:
        result = await self._forward(
            "reschedule",
            job_id,
            lock_id,
            next_run_at=next_run_at,
            priority=priority,
            reset_tries=reset_tries,
            tries=tries,
        )
        return cast(bool, result)

    async def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        result = await self._forward(
            "mark_max_tries_reached", job_id, lock_id, now=now, expires_at=expires_at
        )
        return cast(bool, result)

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        return cast(bool, await self._forward("demote_stale", job_id, lock_id))

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        return cast(bool, await self._forward("release_lock", job_id, lock_id, now=now))

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        result = await self._forward(
            "probe", hint=hint, job_names=job_names, partition=partition, now=now
        )
        return cast(float, result)

    async def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        result = await self._forward(
            "reconcile_partitions",
            job_names=job_names,
            n_partitions=n_partitions,
            now=now,
            limit=limit,
            choose_partition=choose_partition,
        )
        return cast(int, result)

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        return cast(int, await self._forward("backfill_retention", retention=retention, now=now))

    async def unlock_all(self) -> int:
        return cast(int, await self._forward("unlock_all"))

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        await self._forward("write_history_many", records)

    async def get_executions(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        result = await self._forward(
            "get_executions", job_name, job_id=job_id, status=status, limit=limit, skip=skip
        )
        return cast("list[HistoryRecord]", result)

    def watch_records(self, job_names: Sequence[str]) -> AsyncGenerator[list[RecordChange], None]:
        feed = self._forward_feed("watch_records", job_names)
        return cast("AsyncGenerator[list[RecordChange], None]", feed)

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        feed = self._forward_feed("watch_history", job_ids=job_ids, job_names=job_names)
        return cast("AsyncGenerator[list[HistoryRecord], None]", feed)

    async def get_job(self, job_id: str) -> JobRecord | None:
        return cast("JobRecord | None", await self._forward("get_job", job_id))

    async def find_jobs(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[JobRecord]:
        result = await self._forward(
            "find_jobs",
            job_name=job_name,
            state=state,
            unique_identifier=unique_identifier,
            after=after,
            limit=limit,
            now=now,
        )
        return cast("list[JobRecord]", result)

    async def delete_job(
        self,
        job_id: str,
        *,
        unless_running_at: datetime | None = None,
        unless_failed: bool = False,
    ) -> JobRecord | None:
        result = await self._forward(
            "delete_job", job_id, unless_running_at=unless_running_at, unless_failed=unless_failed
        )
        return cast("JobRecord | None", result)

    async def modify_job(
        self, job_id: str, change: JobChange, *, now: datetime
    ) -> JobRecord | None:
        result = await self._forward("modify_job", job_id, change, now=now)
        return cast("JobRecord | None", result)

    async def delete_jobs(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        result = await self._forward(
            "delete_jobs", job_name=job_name, state=state, now=now, dry_run=dry_run
        )
        return cast(int, result)

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        return cast("list[NameStatus]", await self._forward("status_counts", now=now))

    async def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]:
        result = await self._forward("job_stats", since=since, until=until, job_names=job_names)
        return cast("list[JobStats]", result)

    async def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool:
        return cast(bool, await self._forward("set_paused", job_name, paused, now=now))

    async def paused_names(self) -> frozenset[str]:
        return cast("frozenset[str]", await self._forward("paused_names"))

    def watch_pauses(self) -> AsyncGenerator[list[str], None]:
        return cast("AsyncGenerator[list[str], None]", self._forward_feed("watch_pauses"))

    async def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None:
        result = await self._forward(
            "acquire_slot", job_name, key, limit=limit, holder=holder, until=until, now=now
        )
        return cast("int | None", result)

    async def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool:
        result = await self._forward("renew_slot", job_name, key, index, holder=holder, until=until)
        return cast(bool, result)

    async def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool:
        return cast(bool, await self._forward("release_slot", job_name, key, index, holder=holder))

    async def held_slots(self, *, now: datetime) -> dict[str, int]:
        return cast("dict[str, int]", await self._forward("held_slots", now=now))

    async def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        result = await self._forward(
            "take_rate_token",
            job_name,
            key,
            limit=limit,
            window_start=window_start,
            window_end=window_end,
        )
        return cast(bool, result)

    async def acquire_lease(
        self, name: str, *, owner: str, until: datetime, now: datetime
    ) -> int | None:
        result = await self._forward("acquire_lease", name, owner=owner, until=until, now=now)
        return cast("int | None", result)

    async def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool:
        result = await self._forward(
            "renew_lease", name, owner=owner, token=token, until=until, now=now
        )
        return cast(bool, result)

    async def release_lease(self, name: str, *, owner: str, token: int) -> bool:
        return cast(bool, await self._forward("release_lease", name, owner=owner, token=token))

    async def get_lease(self, name: str) -> Lease | None:
        return cast("Lease | None", await self._forward("get_lease", name))

    async def close(self) -> None:
        await self._forward("close")


if TYPE_CHECKING:

    def _conforms(store: ForwardingJobStore) -> AsyncJobStore:
        """Static check (mypy): a forwarding store is an async job store."""
        return store
