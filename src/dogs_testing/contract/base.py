"""The shared part of the contract suite: reference times, record builders, and the base class
with the fixtures, hooks and helpers every area of the suite uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

import anyio
import pytest

from dogs_core.domain.records import (
    ClaimedJob,
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobType,
    NewJob,
    Owner,
    PreviousAttempt,
    Scheduled,
    to_millis,
)
from dogs_core.domain.settle import Settlement
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_testing.settling import completed

__all__ = ["T0", "ContractBase", "defined_in"]

T = TypeVar("T")

#: How many calls each race runs at once.
_CROWD = 24


async def _at_once(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run every call at once and return their results in the order of ``calls``."""
    results: list[Any] = [None] * len(calls)

    async def run(index: int) -> None:
        results[index] = await calls[index]()

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(run, index)
    return results


def _holders(count: int, prefix: str = "holder") -> list[str]:
    return [f"{prefix}-{n}" for n in range(count)]


def defined_in(part: type, request: pytest.FixtureRequest) -> bool:
    """Whether the test ``request`` runs is one of ``part``'s own (or of its bases'), not of
    another part combined with it in one class (:class:`~dogs_testing.contract.StoreContract`)."""
    name = request.function.__name__
    return any(name in vars(klass) for klass in part.__mro__)


T0 = datetime(2100, 1, 1, tzinfo=UTC)
"""The reference time of the suite."""

_MS = timedelta(milliseconds=1)
_S = timedelta(seconds=1)
_MIN = timedelta(minutes=1)
_H = timedelta(hours=1)
_DAY = timedelta(days=1)


def _job(
    name: str = "a",
    *,
    at: datetime = T0 - _S,
    priority: int = 100,
    partition: int = 0,
    uid: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params=params,
        next_run_at=at,
        priority=priority,
        partition=partition,
        unique_identifier=uid,
    )


def _owner(instance: str = "w1", *, host: str = "host-a", pid: int = 4242) -> Owner:
    """The owner of a claim (a ``Workers`` instance ``instance`` on ``host``)."""
    return Owner(host=host, pid=pid, instance_id=instance)


def _scheduled_id(outcome: object) -> str:
    assert isinstance(outcome, Scheduled), outcome
    return outcome.id


def _as_stored(row: HistoryRecord) -> HistoryRecord:
    """A history row as a store returns it: its times truncated to milliseconds (BSON dates)."""
    return dataclasses.replace(
        row,
        started_at=to_millis(row.started_at),
        ended_at=to_millis(row.ended_at),
        expires_at=to_millis(row.expires_at),
    )


def _history(
    execution_id: str,
    *,
    name: str = "a",
    started_at: datetime = T0,
    status: HistoryStatus = HistoryStatus.SUCCESS,
    error_message: str | None = None,
    result: Any = None,
) -> HistoryRecord:
    return HistoryRecord(
        execution_id=execution_id,
        job_id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=started_at,
        ended_at=started_at + 50 * _MS,
        status=status,
        expires_at=started_at + 7 * _DAY,
        params={"n": 1},
        result=result,
        error_message=error_message,
    )


class ContractBase:
    """The fixtures, hooks and helpers of :class:`~dogs_testing.contract.JobStoreContract`; each
    area of the suite is a subclass holding its tests."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    hint: ClassVar[str] = "byJobName"
    """The hint passed in claim requests."""
    probe_hints: ClassVar[Sequence[str]] = ("byJobName", "globalPriority")
    """Every hint the store must be able to probe."""
    knows_previous_attempt: ClassVar[bool] = True
    """Whether a stale claim of this store always hands out its ``previous_attempt``. The port
    lets a store that cannot know it leave it ``None``: set this to ``False`` and the suite
    accepts ``None`` there (a value, when given, must still be exact)."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        """asyncio by default (PyMongo's async client runs on asyncio only); override it to run
        the suite on trio, or on several backends with a parametrized fixture."""
        return "asyncio"

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        """Insert ``record`` exactly as given. Override it to run the tests that need it."""
        pytest.skip("this store offers no raw seeding (override seed_record to enable)")

    # ---------------------------------------------------------------- helpers

    def request(
        self,
        *names: str,
        partition: int = 0,
        now: datetime = T0,
        lock_for: timedelta = _MIN,
        lock_id: str | None = None,
        owner: Owner | None = None,
    ) -> ClaimRequest:
        return ClaimRequest(
            job_names=names or ("a",),
            partition=partition,
            hint=self.hint,
            now=now,
            locked_until=now + lock_for,
            lock_id=lock_id or new_execution_id(),
            owner=owner,
        )

    def requests(
        self,
        count: int,
        *names: str,
        partition: int = 0,
        now: datetime = T0,
        lock_for: timedelta = _MIN,
        owner: Owner | None = None,
    ) -> list[ClaimRequest]:
        """``count`` requests of one ``claim_many``: the same but for their lock ids."""
        template = self.request(
            *names, partition=partition, now=now, lock_for=lock_for, owner=owner
        )
        return [dataclasses.replace(template, lock_id=new_execution_id()) for _ in range(count)]

    async def claim(
        self,
        store: AsyncJobStore,
        *names: str,
        partition: int = 0,
        now: datetime = T0,
        lock_for: timedelta = _MIN,
        owner: Owner | None = None,
    ) -> ClaimedJob:
        claimed = await store.claim(
            self.request(*names, partition=partition, now=now, lock_for=lock_for, owner=owner)
        )
        assert claimed is not None, "expected an eligible record"
        return claimed

    def check_previous_attempt(self, claimed: ClaimedJob, expected: PreviousAttempt | None) -> None:
        """``claimed.previous_attempt`` is ``expected``; ``None`` is also accepted for a stale
        claim when the store does not know it (:attr:`knows_previous_attempt`)."""
        if expected is None or self.knows_previous_attempt:
            assert claimed.previous_attempt == expected, claimed
        else:
            assert claimed.previous_attempt in (None, expected), claimed

    async def complete(self, store: AsyncJobStore, job_id: str, lock_id: str) -> bool:
        """One completion: a one-settlement ``settle_many``, whose verdict is exact (the port's
        leeway needs settlements applied and records gone in one call)."""
        verdicts = await store.settle_many([Settlement(job_id, lock_id, completed())])
        assert len(verdicts) == 1, verdicts
        assert isinstance(verdicts[0], bool), verdicts
        return verdicts[0]

    async def all_records(self, store: AsyncJobStore) -> list[JobRecord]:
        """Every record, in id order: ``find_records`` pages of 1,000 followed by their cursor."""
        records: list[JobRecord] = []
        while True:
            after = records[-1].id if records else None
            page = await store.find_records(after=after, limit=1_000)
            records.extend(page)
            if len(page) < 1_000:
                return records

    async def record(self, store: AsyncJobStore, job_id: str) -> JobRecord:
        record = await store.get_record(job_id)
        assert record is not None, f"record {job_id} is missing"
        return record
