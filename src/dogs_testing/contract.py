"""The job-store contract: one pytest suite every store must pass (ours and a user's).

Subclass :class:`JobStoreContract` in a test module (the subclass name must start with ``Test``)
and provide a ``store`` fixture (``anyio_backend`` has a default):

``store``
    A fresh, empty, set-up :class:`~dogs_core.ports.AsyncJobStore` for each test (a sync
    :class:`~dogs_core.ports.JobStore` wrapped in
    :class:`~dogs_core.runtime.threaded.ThreadedJobStore`). May be an async (generator) fixture.
``anyio_backend``
    ``"asyncio"`` unless overridden (PyMongo's async client needs asyncio); override it with
    ``"trio"`` or a parametrized fixture to run the suite on other backends.

Optionally override :meth:`JobStoreContract.seed_record` to insert a raw record: a few tests need
shapes the port never writes (a missing partition, a recurrent record with a legacy
``maxTriesReached`` status, a terminal record without its retention anchor); they are skipped
when the store cannot seed. ``probe_hints`` lists the hint names the store must accept.

Example::

    class TestMyStore(JobStoreContract):
        @pytest.fixture
        async def store(self) -> AsyncIterator[AsyncJobStore]:
            store = MyStore(...)
            await store.setup()
            yield store
            await store.close()

Every test uses explicit times around :data:`T0` (far in the future, so a real TTL monitor never
deletes a row during a test) and never sleeps.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import anyio
import pytest

from dogs_core.domain.records import (
    ClaimedJob,
    ClaimRequest,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    NameStatus,
    NewJob,
    Scheduled,
    to_millis,
)
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore, StoreCapabilities

__all__ = ["T0", "JobStoreContract"]

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


class JobStoreContract:
    """The adapter contract suite. See the module documentation for how to run it."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    hint: ClassVar[str] = "byJobName"
    """The hint passed in claim requests."""
    probe_hints: ClassVar[Sequence[str]] = ("byJobName", "globalPriority")
    """Every hint the store must be able to probe."""

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
    ) -> ClaimRequest:
        return ClaimRequest(
            job_names=names or ("a",),
            partition=partition,
            hint=self.hint,
            now=now,
            locked_until=now + lock_for,
            lock_id=lock_id or new_execution_id(),
        )

    def requests(
        self,
        count: int,
        *names: str,
        partition: int = 0,
        now: datetime = T0,
        lock_for: timedelta = _MIN,
    ) -> list[ClaimRequest]:
        """``count`` requests of one ``claim_many``: the same but for their lock ids."""
        template = self.request(*names, partition=partition, now=now, lock_for=lock_for)
        return [dataclasses.replace(template, lock_id=new_execution_id()) for _ in range(count)]

    async def claim(
        self,
        store: AsyncJobStore,
        *names: str,
        partition: int = 0,
        now: datetime = T0,
        lock_for: timedelta = _MIN,
    ) -> ClaimedJob:
        claimed = await store.claim(
            self.request(*names, partition=partition, now=now, lock_for=lock_for)
        )
        assert claimed is not None, "expected an eligible record"
        return claimed

    async def complete(self, store: AsyncJobStore, job_id: str, lock_id: str) -> bool:
        """One completion as the runtime makes it: a one-pair ``complete_many``, whose verdict is
        exact (the port's leeway needs pairs deleted and pairs gone in one call)."""
        verdicts = await store.complete_many([(job_id, lock_id)])
        assert len(verdicts) == 1, verdicts
        assert isinstance(verdicts[0], bool), verdicts
        return verdicts[0]

    async def record(self, store: AsyncJobStore, job_id: str) -> JobRecord:
        record = await store.get_job(job_id)
        assert record is not None, f"record {job_id} is missing"
        return record

    # ---------------------------------------------------------------- setup

    async def test_setup_is_idempotent_and_capabilities_are_stable(
        self, store: AsyncJobStore
    ) -> None:
        await store.setup()
        capabilities = await store.capabilities()
        assert isinstance(capabilities, StoreCapabilities)
        assert capabilities.claim_path
        assert await store.capabilities() == capabilities

    # ---------------------------------------------------------------- schedule

    async def test_schedule_and_get_job_round_trip(self, store: AsyncJobStore) -> None:
        at = T0 + timedelta(microseconds=123_456)
        params = {"n": 1, "tags": ["x", "y"], "nested": {"ok": True}}
        job = _job("send", at=at, priority=7, partition=3, uid="u1", params=params)
        job_id = _scheduled_id(await store.schedule(job))
        assert job_id == job.id
        record = await self.record(store, job_id)
        assert not record.tries
        assert dataclasses.replace(record, tries=None) == JobRecord(
            id=job_id,
            job_name="send",
            type=JobType.EVENT,
            priority=7,
            next_run_at=T0 + 123 * _MS,
            partition=3,
            params=params,
            unique_identifier="u1",
        )
        other = _scheduled_id(await store.schedule(_job("send", priority=0)))
        assert other != job_id
        other_record = await self.record(store, other)
        assert other_record.params is None
        assert other_record.priority == 0
        assert other_record.unique_identifier is None

    async def test_schedule_of_a_known_id_is_idempotent(self, store: AsyncJobStore) -> None:
        job = _job(uid="u")
        assert await store.schedule(job) == Scheduled(job.id)
        before = await store.find_jobs()
        # A retry after an ambiguous failure (the first insert had landed) is not a duplicate.
        assert await store.schedule(job) == Scheduled(job.id)
        assert await store.find_jobs() == before

    async def test_get_job_of_an_unknown_id_is_none(self, store: AsyncJobStore) -> None:
        assert await store.get_job(new_record_id()) is None

    async def test_duplicate_unique_identifier_returns_existing_id_and_writes_nothing(
        self, store: AsyncJobStore
    ) -> None:
        first = _scheduled_id(await store.schedule(_job("a", uid="k", params={"v": 1})))
        before = await store.find_jobs()
        # One global namespace: another job name does not make the identifier free.
        outcome = await store.schedule(
            _job("b", uid="k", params={"v": 2}, priority=5, at=T0 + _H, partition=2)
        )
        assert outcome == Duplicate(existing_id=first, unique_identifier="k")
        assert await store.find_jobs() == before

    async def test_unique_identifier_is_free_again_after_completion(
        self, store: AsyncJobStore
    ) -> None:
        _scheduled_id(await store.schedule(_job(uid="once")))
        claimed = await self.claim(store)
        assert await self.complete(store, claimed.job_id, claimed.lock_id)
        _scheduled_id(await store.schedule(_job(uid="once")))

    async def test_schedule_many_counts(self, store: AsyncJobStore) -> None:
        jobs = [_job(partition=i, priority=i) for i in range(3)] + [_job("b", uid="u")]
        result = await store.schedule_many(jobs)
        assert (result.scheduled_count, result.skipped_count, result.errors) == (4, 0, ())
        assert result.outcomes == tuple(Scheduled(job.id) for job in jobs)
        assert {r.id for r in await store.find_jobs()} == {job.id for job in jobs}

    async def test_schedule_many_retry_of_a_landed_batch_writes_nothing(
        self, store: AsyncJobStore
    ) -> None:
        jobs = [_job(uid="u"), _job(partition=1)]
        await store.schedule_many(jobs)
        before = await store.find_jobs()
        result = await store.schedule_many(jobs)
        assert (result.scheduled_count, result.skipped_count, result.errors) == (2, 0, ())
        assert result.outcomes == tuple(Scheduled(job.id) for job in jobs)
        assert await store.find_jobs() == before

    async def test_schedule_many_of_nothing(self, store: AsyncJobStore) -> None:
        result = await store.schedule_many([])
        assert (result.scheduled_count, result.skipped_count, result.errors) == (0, 0, ())
        assert await store.find_jobs() == []

    async def test_schedule_many_skips_a_duplicate_inside_the_batch(
        self, store: AsyncJobStore
    ) -> None:
        result = await store.schedule_many(
            [_job(uid="a", params={"v": 1}), _job(uid="a", params={"v": 2}), _job(uid="b")]
        )
        assert (result.scheduled_count, result.skipped_count, result.errors) == (2, 1, ())
        records = await store.find_jobs()
        assert sorted(r.unique_identifier or "" for r in records) == ["a", "b"]
        assert len(result.outcomes) == 3
        assert sum(isinstance(outcome, Duplicate) for outcome in result.outcomes) == 1

    async def test_schedule_many_leaves_an_existing_record_untouched(
        self, store: AsyncJobStore
    ) -> None:
        existing = _scheduled_id(
            await store.schedule(_job(uid="x", params={"v": "orig"}, priority=5, partition=1))
        )
        before = await self.record(store, existing)
        result = await store.schedule_many(
            [
                _job(uid="x", params={"v": "new"}, priority=50, at=T0 + _H, partition=2),
                _job(uid="y"),
            ]
        )
        assert (result.scheduled_count, result.skipped_count, result.errors) == (1, 1, ())
        assert await self.record(store, existing) == before
        duplicate, scheduled = result.outcomes
        assert isinstance(duplicate, Duplicate)
        assert duplicate.unique_identifier == "x"
        assert duplicate.existing_id in (None, existing)  # a bulk upsert may not know it
        assert isinstance(scheduled, Scheduled)

    # ---------------------------------------------------------------- claim

    async def test_claim_order_is_priority_desc_then_next_run_at_asc(
        self, store: AsyncJobStore
    ) -> None:
        ids = {
            key: _scheduled_id(await store.schedule(job))
            for key, job in {
                "p100_t3": _job("a", priority=100, at=T0 - 3 * _S),
                "p100_t1": _job("a", priority=100, at=T0 - 1 * _S),
                "p200_t1": _job("b", priority=200, at=T0 - 1 * _S),
                "p0_t5": _job("a", priority=0, at=T0 - 5 * _S),
                "p100_t2": _job("b", priority=100, at=T0 - 2 * _S),
            }.items()
        }
        order = [(await self.claim(store, "a", "b")).job_id for _ in ids]
        assert order == [ids[k] for k in ("p200_t1", "p100_t3", "p100_t2", "p100_t1", "p0_t5")]
        assert await store.claim(self.request("a", "b")) is None

    async def test_claim_locks_the_record_and_counts_the_try(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(
            await store.schedule(_job(params={"n": 3}, priority=9, partition=2, uid="u"))
        )
        request = self.request("a", partition=2, lock_for=5 * _MIN)
        claimed = await store.claim(request)
        assert claimed is not None
        assert claimed.last_run_at in (None, T0)
        # next_run_at is optional in the port (fixed-rate schedules need it): None or the due time.
        assert claimed.next_run_at in (None, T0 - _S)
        assert dataclasses.replace(claimed, last_run_at=None, next_run_at=None) == ClaimedJob(
            job_id=job_id,
            execution_id=request.lock_id,
            job_name="a",
            type=JobType.EVENT,
            params={"n": 3},
            tries=1,
            priority=9,
            locked_until=T0 + 5 * _MIN,
            partition=2,
            unique_identifier="u",
            was_stale=False,
        )
        assert claimed.lock_id == request.lock_id
        record = await self.record(store, job_id)
        assert (record.lock_id, record.locked_until, record.last_run_at, record.tries) == (
            request.lock_id,
            T0 + 5 * _MIN,
            T0,
            1,
        )
        assert not record.claim_was_stale

    async def test_claim_with_no_job_names_finds_nothing(self, store: AsyncJobStore) -> None:
        await store.schedule(_job())
        request = dataclasses.replace(self.request(), job_names=())
        assert await store.claim(request) is None

    async def test_claim_ignores_other_partitions(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job(partition=1)))
        assert await store.claim(self.request(partition=0)) is None
        assert await store.claim(self.request(partition=2)) is None
        assert (await self.claim(store, partition=1)).job_id == job_id

    async def test_claim_ignores_other_job_names(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job("b")))
        assert await store.claim(self.request("a", "c")) is None
        assert (await self.claim(store, "a", "b")).job_id == job_id

    async def test_claim_ignores_future_jobs(self, store: AsyncJobStore) -> None:
        later = _scheduled_id(await store.schedule(_job(at=T0 + _MS)))
        now = _scheduled_id(await store.schedule(_job(at=T0, priority=1)))
        assert (await self.claim(store, now=T0)).job_id == now  # next_run_at == now is due
        assert await store.claim(self.request(now=T0)) is None
        assert (await self.claim(store, now=T0 + _MS)).job_id == later

    async def test_claim_ignores_locked_jobs(self, store: AsyncJobStore) -> None:
        await store.schedule(_job())
        await self.claim(store, now=T0, lock_for=10 * _S)
        assert await store.claim(self.request(now=T0)) is None
        assert await store.claim(self.request(now=T0 + 10 * _S - _MS)) is None

    async def test_claim_takes_an_expired_lock_as_stale(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        first = await self.claim(store, now=T0, lock_for=10 * _S)
        second = await self.claim(store, now=T0 + 10 * _S)  # locked_until <= now: expired
        assert (second.job_id, second.was_stale, second.tries) == (job_id, True, 2)
        assert second.lock_id != first.lock_id
        assert not await store.extend_lock(job_id, first.lock_id, T0 + _H)
        assert not await self.complete(store, job_id, first.lock_id)
        record = await self.record(store, job_id)
        assert (record.lock_id, record.tries, record.last_run_at) == (
            second.lock_id,
            2,
            T0 + 10 * _S,
        )
        assert await self.complete(store, job_id, second.lock_id)

    async def test_claim_ignores_terminal_event_jobs(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        claimed = await self.claim(store)
        assert await store.mark_max_tries_reached(
            job_id, claimed.lock_id, now=T0, expires_at=T0 + 7 * _DAY
        )
        assert await store.claim(self.request(now=T0 + _H)) is None
        assert [r.id for r in await store.find_jobs()] == [job_id]

    async def test_recurrent_record_with_legacy_terminal_status_is_claimable(
        self, store: AsyncJobStore
    ) -> None:
        record = JobRecord(
            id=new_record_id(),
            job_name="tick",
            type=JobType.RECURRENT,
            priority=100,
            next_run_at=T0 - _MIN,
            partition=0,
            status=JobStatus.MAX_TRIES_REACHED,
            tries=4,
        )
        await self.seed_record(store, record)
        claimed = await self.claim(store, "tick")
        assert (claimed.job_id, claimed.type, claimed.tries) == (record.id, JobType.RECURRENT, 5)

    async def test_record_without_partition_is_never_claimed(self, store: AsyncJobStore) -> None:
        record = JobRecord(
            id=new_record_id(),
            job_name="a",
            type=JobType.EVENT,
            priority=100,
            next_run_at=T0 - _MIN,
        )
        await self.seed_record(store, record)
        for partition in range(4):
            assert await store.claim(self.request(partition=partition)) is None

    async def test_concurrent_claimers_claim_each_job_exactly_once(
        self, store: AsyncJobStore
    ) -> None:
        jobs = [_job("ab"[i % 2], partition=i % 4, priority=i % 3) for i in range(200)]
        assert (await store.schedule_many(jobs)).scheduled_count == 200
        claimed: list[str] = []

        async def claimer(offset: int) -> None:
            misses = 0
            for partition in itertools.cycle(range(offset, offset + 4)):
                job = await store.claim(self.request("a", "b", partition=partition % 4))
                if job is None:
                    misses += 1
                    if misses == 4:
                        return
                else:
                    misses = 0
                    claimed.append(job.job_id)

        async with anyio.create_task_group() as tg:
            for offset in range(16):
                tg.start_soon(claimer, offset)
        assert len(claimed) == 200
        assert set(claimed) == {r.id for r in await store.find_jobs()}

    # ---------------------------------------------------------------- claim_many

    async def test_claim_many_takes_the_best_records_in_claim_order(
        self, store: AsyncJobStore
    ) -> None:
        ids = {
            key: _scheduled_id(await store.schedule(job))
            for key, job in {
                "p100_t3": _job("a", priority=100, at=T0 - 3 * _S, params={"n": 1}, uid="u"),
                "p100_t1": _job("a", priority=100, at=T0 - 1 * _S),
                "p200_t1": _job("b", priority=200, at=T0 - 1 * _S),
                "p0_t5": _job("a", priority=0, at=T0 - 5 * _S),
                "p100_t2": _job("b", priority=100, at=T0 - 2 * _S),
                "later": _job("a", priority=900, at=T0 + _MS),
                "other_name": _job("c", priority=900),
                "other_partition": _job("a", priority=900, partition=1),
            }.items()
        }
        untouched = {
            key: await self.record(store, ids[key])
            for key in ("later", "other_name", "other_partition")
        }
        requests = self.requests(3, "a", "b", lock_for=5 * _MIN)
        claimed = await store.claim_many(requests)
        assert [job.job_id for job in claimed] == [
            ids[k] for k in ("p200_t1", "p100_t3", "p100_t2")
        ]
        lock_ids = [job.lock_id for job in claimed]
        assert len(set(lock_ids)) == 3
        assert set(lock_ids) <= {request.lock_id for request in requests}
        for job in claimed:
            assert job.execution_id == job.lock_id
            assert (job.tries, job.was_stale, job.locked_until, job.partition) == (
                1,
                False,
                T0 + 5 * _MIN,
                0,
            )
            assert job.last_run_at in (None, T0)
            record = await self.record(store, job.job_id)
            assert (record.lock_id, record.locked_until, record.last_run_at, record.tries) == (
                job.lock_id,
                T0 + 5 * _MIN,
                T0,
                1,
            )
            assert not record.claim_was_stale
        best_a = claimed[1]
        assert (best_a.job_name, best_a.type, best_a.params, best_a.priority) == (
            "a",
            JobType.EVENT,
            {"n": 1},
            100,
        )
        assert (best_a.unique_identifier, best_a.next_run_at) == ("u", T0 - 3 * _S)
        for key, before in untouched.items():
            assert await self.record(store, ids[key]) == before, key
        # The next batch goes on where this one stopped.
        rest = await store.claim_many(self.requests(3, "a", "b"))
        assert [job.job_id for job in rest] == [ids["p100_t1"], ids["p0_t5"]]

    async def test_claim_many_returns_what_claims_in_a_row_return(
        self, store: AsyncJobStore
    ) -> None:
        """The same records in two partitions, one of them stale in each: one ``claim_many``
        in partition 0 and as many ``claim`` calls in partition 1 give the same jobs and leave
        the same records."""
        shapes: list[tuple[str, int, datetime, Mapping[str, Any] | None]] = [
            ("a", 5, T0 - 3 * _S, {"n": 1}),
            ("b", 5, T0 - 2 * _S, None),
            ("a", 1, T0 - 5 * _S, {"deep": {"x": [1]}}),
            ("b", 9, T0 - 1 * _S, None),
            ("a", 7, T0 - 4 * _S, None),
        ]
        index_of: dict[str, int] = {}
        for partition in (0, 1):
            for index, (name, priority, at, params) in enumerate(shapes):
                job = _job(name, priority=priority, at=at, partition=partition, params=params)
                index_of[_scheduled_id(await store.schedule(job))] = index
            # The best record (priority 9) is claimed and its lock expires at T0: stale.
            await self.claim(store, "a", "b", partition=partition, now=T0 - _S, lock_for=_S)

        def shape_of(job: ClaimedJob) -> ClaimedJob:
            return dataclasses.replace(
                job, job_id=str(index_of[job.job_id]), execution_id="", partition=None
            )

        many = await store.claim_many(self.requests(len(shapes) + 1, "a", "b"))
        one_by_one = [
            await store.claim(self.request("a", "b", partition=1)) for _ in range(len(shapes) + 1)
        ]
        assert one_by_one[-1] is None
        assert [shape_of(job) for job in many] == [
            shape_of(job) for job in one_by_one if job is not None
        ]
        assert [(index_of[job.job_id], job.tries, job.was_stale) for job in many] == [
            (3, 2, True),
            (4, 1, False),
            (0, 1, False),
            (1, 1, False),
            (2, 1, False),
        ]
        # (Not `claim_was_stale`: the findOneAndUpdate claim of Dogs does not store it.)
        stored: dict[int, dict[int, tuple[Any, ...]]] = {0: {}, 1: {}}
        for record in await store.find_jobs():
            assert record.partition is not None
            stored[record.partition][index_of[record.id]] = (
                record.tries,
                record.locked_until,
                record.last_run_at,
            )
        assert stored[0] == stored[1]

    async def test_claim_many_with_fewer_eligible_records_than_requests(
        self, store: AsyncJobStore
    ) -> None:
        ids = {_scheduled_id(await store.schedule(_job(priority=p))) for p in (1, 2)}
        requests = self.requests(5)
        claimed = await store.claim_many(requests)
        assert {job.job_id for job in claimed} == ids
        assert [job.priority for job in claimed] == [2, 1]
        lock_ids = {job.lock_id for job in claimed}
        assert len(lock_ids) == 2
        assert lock_ids <= {request.lock_id for request in requests}
        assert await store.claim_many(self.requests(5)) == []

    async def test_claim_many_that_finds_nothing_writes_nothing(self, store: AsyncJobStore) -> None:
        await store.schedule_many(
            [_job(at=T0 + _S), _job("b"), _job(partition=1), _job(priority=7, at=T0 + _H)]
        )
        before = await store.find_jobs()
        assert await store.claim_many(self.requests(4, "a", "c")) == []
        assert await store.find_jobs() == before

    async def test_claim_many_skips_held_locks_and_takes_expired_ones_as_stale(
        self, store: AsyncJobStore
    ) -> None:
        held = _scheduled_id(await store.schedule(_job(priority=30)))
        expired = _scheduled_id(await store.schedule(_job(priority=20)))
        free = _scheduled_id(await store.schedule(_job(priority=10)))
        first = await self.claim(store, now=T0, lock_for=_H)
        old = await self.claim(store, now=T0, lock_for=10 * _S)
        assert (first.job_id, old.job_id) == (held, expired)
        claimed = await store.claim_many(self.requests(3, now=T0 + 10 * _S - _MS))
        assert [(job.job_id, job.was_stale, job.tries) for job in claimed] == [(free, False, 1)]
        claimed = await store.claim_many(self.requests(3, now=T0 + 10 * _S))  # expired
        assert [(job.job_id, job.was_stale, job.tries) for job in claimed] == [(expired, True, 2)]
        assert not await store.extend_lock(expired, old.lock_id, T0 + _H)
        record = await self.record(store, expired)
        assert (record.lock_id, record.tries, record.last_run_at) == (
            claimed[0].lock_id,
            2,
            T0 + 10 * _S,
        )
        assert (await self.record(store, held)).lock_id == first.lock_id

    async def test_claim_many_refuses_requests_that_disagree(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(), _job(partition=1)])
        before = await store.find_jobs()
        template = self.request()
        other_hint = next(h for h in self.probe_hints if h != template.hint)
        differences: dict[str, Any] = {
            "job_names": ("a", "b"),
            "partition": 1,
            "hint": other_hint,
            "now": T0 + _S,
            "locked_until": template.locked_until + _S,
        }
        for field, value in differences.items():
            requests = [
                template,
                dataclasses.replace(template, lock_id=new_execution_id()),
                dataclasses.replace(template, lock_id=new_execution_id(), **{field: value}),
            ]
            with pytest.raises(ValueError, match=field):
                await store.claim_many(requests)
        repeated = [template, dataclasses.replace(template, lock_id=new_execution_id()), template]
        with pytest.raises(ValueError, match="lock_id"):
            await store.claim_many(repeated)
        assert await store.find_jobs() == before

    async def test_claim_many_of_nothing(self, store: AsyncJobStore) -> None:
        await store.schedule(_job())
        before = await store.find_jobs()
        assert await store.claim_many([]) == []
        no_names = [dataclasses.replace(r, job_names=()) for r in self.requests(2)]
        assert await store.claim_many(no_names) == []
        assert await store.find_jobs() == before

    async def test_claim_many_of_more_than_a_thousand(self, store: AsyncJobStore) -> None:
        jobs = [_job(priority=i % 7, at=T0 - i * _MS) for i in range(1_500)]
        assert (await store.schedule_many(jobs)).scheduled_count == 1_500
        claimed = await store.claim_many(self.requests(1_200))
        assert len(claimed) == 1_200
        assert len({job.job_id for job in claimed}) == 1_200
        assert len({job.lock_id for job in claimed}) == 1_200
        keys = [(-job.priority, job.next_run_at) for job in claimed]
        assert keys == sorted(keys)
        rest = await store.claim_many(self.requests(1_200))
        assert len(rest) == 300
        assert {job.job_id for job in claimed} | {job.job_id for job in rest} == {
            job.id for job in jobs
        }
        assert all(record.tries == 1 for record in await store.find_jobs())

    async def test_concurrent_claim_many_calls_claim_each_job_exactly_once(
        self, store: AsyncJobStore
    ) -> None:
        jobs = [_job(priority=i % 3) for i in range(50)]
        assert (await store.schedule_many(jobs)).scheduled_count == 50
        claimed: list[str] = []

        async def claimer() -> None:
            misses = 0
            while misses < 2:
                batch = await store.claim_many(self.requests(10))
                misses = 0 if batch else misses + 1
                claimed.extend(job.job_id for job in batch)

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(claimer)
        assert len(claimed) == 50
        assert set(claimed) == {job.id for job in jobs}
        assert all(record.tries == 1 for record in await store.find_jobs())

    # ---------------------------------------------------------------- fenced writes

    async def test_every_fenced_write_refuses_a_foreign_lock_id(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        await self.claim(store)
        before = await self.record(store, job_id)
        for lock_id, target in ((new_execution_id(), job_id), (before.lock_id, new_record_id())):
            assert lock_id is not None
            assert not await store.extend_lock(target, lock_id, T0 + _H)
            assert not await self.complete(store, target, lock_id)
            assert not await store.reschedule(
                target, lock_id, next_run_at=T0 + _H, priority=1, reset_tries=True
            )
            assert not await store.mark_max_tries_reached(
                target, lock_id, now=T0, expires_at=T0 + _DAY
            )
            assert not await store.demote_stale(target, lock_id)
            assert not await store.release_lock(target, lock_id, now=T0)
        assert await self.record(store, job_id) == before

    async def test_extend_lock(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        claimed = await self.claim(store)
        until = T0 + 5 * _MIN + timedelta(microseconds=123_456)
        assert await store.extend_lock(job_id, claimed.lock_id, until)
        record = await self.record(store, job_id)
        assert (record.locked_until, record.lock_id) == (to_millis(until), claimed.lock_id)
        assert await store.claim(self.request(now=T0 + 5 * _MIN)) is None

    async def test_complete_deletes_the_event_record(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        claimed = await self.claim(store)
        assert await self.complete(store, job_id, claimed.lock_id)
        assert await store.get_job(job_id) is None
        assert not await self.complete(store, job_id, claimed.lock_id)

    async def test_complete_refuses_a_recurrent_record(self, store: AsyncJobStore) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        claimed = await self.claim(store, "tick")
        assert not await self.complete(store, claimed.job_id, claimed.lock_id)
        assert (await self.record(store, claimed.job_id)).lock_id == claimed.lock_id

    async def test_complete_many_deletes_every_owned_record(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(3)])
        claimed = [await self.claim(store, partition=p) for p in range(3)]
        claims = [(job.job_id, job.lock_id) for job in claimed]
        assert await store.complete_many(claims) == [True, True, True]
        assert await store.find_jobs() == []
        # A second identical call (a retry after a lost reply) deletes nothing.
        assert await store.complete_many(claims) == [False, False, False]

    async def test_complete_many_verdicts_per_pair(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(3)])
        await store.ensure_recurrent("tick", priority=100, partition=3, now=T0)
        owned = await self.claim(store, partition=0)
        foreign = await self.claim(store, partition=1)
        recurrent = await self.claim(store, "tick", partition=3)
        [unlocked] = [r for r in await store.find_jobs(job_name="a") if r.partition == 2]
        foreign_before = await self.record(store, foreign.job_id)
        unlocked_before = await self.record(store, unlocked.id)
        recurrent_before = await self.record(store, recurrent.job_id)
        claims = [
            (foreign.job_id, new_execution_id()),  # locked by another claim
            (owned.job_id, owned.lock_id),
            (recurrent.job_id, recurrent.lock_id),  # recurrent records are never deleted
            (unlocked.id, new_execution_id()),  # not locked at all
        ]
        assert await store.complete_many(claims) == [False, True, False, False]
        assert await store.get_job(owned.job_id) is None
        assert await self.record(store, foreign.job_id) == foreign_before
        assert await self.record(store, unlocked.id) == unlocked_before
        assert await self.record(store, recurrent.job_id) == recurrent_before
        assert await store.complete_many(claims) == [False, False, False, False]
        # No such record (another worker finished the job after this lock was lost).
        assert await store.complete_many([(new_record_id(), new_execution_id())]) == [False]
        # A one-pair call is exact: True only when this call deleted the record.
        assert not await self.complete(store, owned.job_id, owned.lock_id)

    async def test_complete_many_of_nothing(self, store: AsyncJobStore) -> None:
        assert await store.complete_many([]) == []

    async def test_complete_many_refuses_a_repeated_job_id(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(2)])
        first = await self.claim(store, partition=0)
        second = await self.claim(store, partition=1)
        before = await store.find_jobs()
        claims = [
            (first.job_id, first.lock_id),
            (second.job_id, second.lock_id),
            (first.job_id, new_execution_id()),
        ]
        with pytest.raises(ValueError, match="repeated"):
            await store.complete_many(claims)
        assert await store.find_jobs() == before

    async def test_complete_many_of_more_pairs_than_one_batch(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(3)])
        owned = [await self.claim(store, partition=p) for p in range(2)]
        [unlocked] = [r for r in await store.find_jobs() if r.partition == 2]
        missing = [(new_record_id(), new_execution_id()) for _ in range(2_400)]
        claims = [
            (owned[0].job_id, owned[0].lock_id),
            *missing[:1_500],
            (unlocked.id, new_execution_id()),
            *missing[1_500:],
            (owned[1].job_id, owned[1].lock_id),
        ]
        verdicts = await store.complete_many(claims)
        assert len(verdicts) == len(claims)
        assert verdicts[0] is True
        assert verdicts[-1] is True
        assert verdicts[1_501] is False  # the unlocked record, which still exists
        # The missing ids share batches with deleted records: the port's leeway lets a
        # count-only store report them either way.
        assert [r.id for r in await store.find_jobs()] == [unlocked.id]

    async def test_reschedule_releases_the_lock_and_keeps_tries(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job(priority=40)))
        claimed = await self.claim(store)
        assert await store.reschedule(
            job_id, claimed.lock_id, next_run_at=T0 + _H, priority=None, reset_tries=False
        )
        record = await self.record(store, job_id)
        assert (record.next_run_at, record.priority, record.tries) == (T0 + _H, 40, 1)
        assert (record.lock_id, record.locked_until, record.claim_was_stale) == (None, None, None)
        assert await store.claim(self.request(now=T0 + _H - _MS)) is None
        again = await self.claim(store, now=T0 + _H)
        assert (again.job_id, again.was_stale, again.tries) == (job_id, False, 2)
        assert not await store.reschedule(
            job_id, claimed.lock_id, next_run_at=T0, priority=None, reset_tries=False
        )

    async def test_reschedule_resets_tries_and_sets_priority(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job(priority=40)))
        claimed = await self.claim(store)
        next_run_at = T0 + _H + timedelta(microseconds=999)
        assert await store.reschedule(
            job_id, claimed.lock_id, next_run_at=next_run_at, priority=5, reset_tries=True
        )
        record = await self.record(store, job_id)
        assert (record.next_run_at, record.priority, record.tries) == (T0 + _H, 5, 0)
        assert record.lock_id is None
        assert (await self.claim(store, now=T0 + _H)).tries == 1

    async def test_mark_max_tries_reached_with_expiry(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job(uid="dead")))
        claimed = await self.claim(store)
        now = T0 + _S + timedelta(microseconds=1_500)
        assert await store.mark_max_tries_reached(
            job_id, claimed.lock_id, now=now, expires_at=now + 7 * _DAY
        )
        record = await self.record(store, job_id)
        assert record.status is JobStatus.MAX_TRIES_REACHED
        assert (record.max_tries_reached_at, record.expires_at) == (
            T0 + _S + _MS,
            T0 + 7 * _DAY + _S + _MS,
        )
        assert (record.lock_id, record.locked_until) == (None, None)
        assert await store.schedule(_job(uid="dead")) == Duplicate(job_id, "dead")
        assert not await self.complete(store, job_id, claimed.lock_id)

    async def test_mark_max_tries_reached_without_expiry(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        claimed = await self.claim(store)
        assert await store.mark_max_tries_reached(job_id, claimed.lock_id, now=T0, expires_at=None)
        record = await self.record(store, job_id)
        assert (record.status, record.max_tries_reached_at, record.expires_at) == (
            JobStatus.MAX_TRIES_REACHED,
            T0,
            None,
        )
        assert (record.lock_id, record.locked_until) == (None, None)

    async def test_mark_max_tries_reached_refuses_a_recurrent_record(
        self, store: AsyncJobStore
    ) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        claimed = await self.claim(store, "tick")
        assert not await store.mark_max_tries_reached(
            claimed.job_id, claimed.lock_id, now=T0, expires_at=None
        )
        record = await self.record(store, claimed.job_id)
        assert (record.status, record.lock_id) == (None, claimed.lock_id)

    async def test_demote_stale_keeps_the_lock(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.schedule(_job(priority=100)))
        claimed = await self.claim(store)
        assert await store.demote_stale(job_id, claimed.lock_id)
        record = await self.record(store, job_id)
        assert (record.priority, record.lock_id, record.locked_until) == (
            0,
            claimed.lock_id,
            claimed.locked_until,
        )

    async def test_release_lock_makes_the_record_claimable_at_once(
        self, store: AsyncJobStore
    ) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        first = await self.claim(store, now=T0)
        assert await store.release_lock(job_id, first.lock_id, now=T0 + _S)
        record = await self.record(store, job_id)
        assert (record.locked_until, record.lock_id) == (T0 + _S, first.lock_id)
        second = await self.claim(store, now=T0 + _S)
        assert (second.job_id, second.was_stale, second.tries) == (job_id, True, 2)
        assert not await store.extend_lock(job_id, first.lock_id, T0 + _H)
        assert not await store.reschedule(
            job_id, first.lock_id, next_run_at=T0, priority=None, reset_tries=False
        )

    # ---------------------------------------------------------------- recurrent records

    async def test_ensure_recurrent_inserts_once_then_updates_priority_only(
        self, store: AsyncJobStore
    ) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=2, now=T0)
        [record] = await store.find_jobs(job_name="tick")
        assert not record.tries
        assert dataclasses.replace(record, tries=None) == JobRecord(
            id=record.id,
            job_name="tick",
            type=JobType.RECURRENT,
            priority=100,
            next_run_at=T0,
            partition=2,
        )
        await store.ensure_recurrent("tick", priority=7, partition=3, now=T0 + _H)
        [updated] = await store.find_jobs(job_name="tick")
        assert updated == dataclasses.replace(record, priority=7)

    async def test_ensure_recurrent_keeps_a_running_lock(self, store: AsyncJobStore) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        claimed = await self.claim(store, "tick")
        before = await self.record(store, claimed.job_id)
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0 + _H)
        assert await self.record(store, claimed.job_id) == before

    async def test_ensure_recurrent_clears_a_legacy_status(self, store: AsyncJobStore) -> None:
        record = JobRecord(
            id=new_record_id(),
            job_name="tick",
            type=JobType.RECURRENT,
            priority=50,
            next_run_at=T0 - _H,
            partition=1,
            status=JobStatus.MAX_TRIES_REACHED,
        )
        await self.seed_record(store, record)
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        updated = await self.record(store, record.id)
        assert (updated.status, updated.priority, updated.next_run_at, updated.partition) == (
            None,
            100,
            T0 - _H,
            1,
        )

    async def test_concurrent_ensure_recurrent_calls_all_succeed_with_one_record(
        self, store: AsyncJobStore
    ) -> None:
        async def ensure(partition: int) -> None:
            await store.ensure_recurrent("tick", priority=100, partition=partition, now=T0)

        async with anyio.create_task_group() as tg:
            for partition in range(8):
                tg.start_soon(ensure, partition)
        assert len(await store.find_jobs(job_name="tick")) == 1

    # ---------------------------------------------------------------- reconciler

    async def test_reconcile_fixes_invalid_partitions_only(self, store: AsyncJobStore) -> None:
        ids = {
            key: _scheduled_id(await store.schedule(job))
            for key, job in {
                "negative": _job(partition=-1),
                "too_high": _job(partition=4),
                "way_too_high": _job(partition=99),
                "valid": _job(partition=3),
                "other_name": _job("b", partition=-1),
                "locked": _job(partition=7),
                "lock_expired": _job(partition=8, at=T0 - 2 * _MIN),
                "terminal": _job(partition=9),
            }.items()
        }
        await self.claim(store, partition=7, now=T0)
        await self.claim(store, partition=8, now=T0 - _MIN, lock_for=30 * _S)
        terminal = await self.claim(store, partition=9, now=T0)
        assert await store.mark_max_tries_reached(
            ids["terminal"], terminal.lock_id, now=T0, expires_at=None
        )
        choices = itertools.cycle([1, 2])
        modified = await store.reconcile_partitions(
            job_names=["a"],
            n_partitions=4,
            now=T0 + _S,
            limit=500,
            choose_partition=lambda: next(choices),
        )
        assert modified == 4
        partitions = {key: (await self.record(store, i)).partition for key, i in ids.items()}
        for key in ("negative", "too_high", "way_too_high", "lock_expired"):
            assert partitions[key] in (1, 2), key
        assert (partitions["valid"], partitions["other_name"]) == (3, -1)
        assert (partitions["locked"], partitions["terminal"]) == (7, 9)

    async def test_reconcile_respects_the_limit(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=-1) for _ in range(5)])
        counts = [
            await store.reconcile_partitions(
                job_names=["a"], n_partitions=2, now=T0, limit=2, choose_partition=lambda: 0
            )
            for _ in range(4)
        ]
        assert counts == [2, 2, 1, 0]
        assert {r.partition for r in await store.find_jobs()} == {0}

    async def test_reconcile_gives_a_partition_to_a_record_without_one(
        self, store: AsyncJobStore
    ) -> None:
        record = JobRecord(
            id=new_record_id(), job_name="a", type=JobType.EVENT, priority=1, next_run_at=T0
        )
        await self.seed_record(store, record)
        modified = await store.reconcile_partitions(
            job_names=["a"], n_partitions=3, now=T0, limit=10, choose_partition=lambda: 2
        )
        assert modified == 1
        assert (await self.record(store, record.id)).partition == 2
        assert (await self.claim(store, partition=2)).job_id == record.id

    # ---------------------------------------------------------------- retention

    async def test_backfill_retention_recomputes_expiry_from_the_anchor(
        self, store: AsyncJobStore
    ) -> None:
        job_id = _scheduled_id(await store.schedule(_job()))
        pending = _scheduled_id(await store.schedule(_job(partition=1)))
        claimed = await self.claim(store)
        assert await store.mark_max_tries_reached(
            job_id, claimed.lock_id, now=T0 + _S, expires_at=T0 + _S + 7 * _DAY
        )
        pending_before = await self.record(store, pending)
        assert await store.backfill_retention(retention=_DAY, now=T0 + _H) == 1
        record = await self.record(store, job_id)
        assert (record.max_tries_reached_at, record.expires_at) == (T0 + _S, T0 + _S + _DAY)
        assert await self.record(store, pending) == pending_before

    async def test_backfill_retention_none_unsets_expiry(self, store: AsyncJobStore) -> None:
        ids = [_scheduled_id(await store.schedule(_job(partition=p))) for p in range(2)]
        for partition, expires_at in ((0, T0 + _DAY), (1, None)):
            claimed = await self.claim(store, partition=partition)
            assert await store.mark_max_tries_reached(
                claimed.job_id, claimed.lock_id, now=T0, expires_at=expires_at
            )
        assert await store.backfill_retention(retention=None, now=T0) == 1
        for job_id in ids:
            record = await self.record(store, job_id)
            assert (record.expires_at, record.max_tries_reached_at) == (None, T0)

    async def test_backfill_retention_without_an_anchor_uses_last_run_at_then_now(
        self, store: AsyncJobStore
    ) -> None:
        base = JobRecord(
            id="",
            job_name="a",
            type=JobType.EVENT,
            priority=100,
            next_run_at=T0 - _DAY,
            partition=0,
            status=JobStatus.MAX_TRIES_REACHED,
            tries=3,
        )
        ran = dataclasses.replace(base, id=new_record_id(), last_run_at=T0 - _H)
        never_ran = dataclasses.replace(base, id=new_record_id())
        legacy_recurrent = dataclasses.replace(
            base, id=new_record_id(), job_name="tick", type=JobType.RECURRENT
        )
        for record in (ran, never_ran, legacy_recurrent):
            await self.seed_record(store, record)
        assert await store.backfill_retention(retention=_DAY, now=T0) == 2
        ran_after = await self.record(store, ran.id)
        assert (ran_after.max_tries_reached_at, ran_after.expires_at) == (T0 - _H, T0 + _DAY - _H)
        never_after = await self.record(store, never_ran.id)
        assert (never_after.max_tries_reached_at, never_after.expires_at) == (T0, T0 + _DAY)
        legacy_after = await self.record(store, legacy_recurrent.id)
        assert (legacy_after.max_tries_reached_at, legacy_after.expires_at) == (None, None)

    # ---------------------------------------------------------------- administration

    async def test_unlock_all_releases_every_lock(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(3)])
        for partition in range(2):
            await self.claim(store, partition=partition)
        assert await store.unlock_all() == 2
        for record in await store.find_jobs():
            assert (record.lock_id, record.locked_until, record.claim_was_stale) == (
                None,
                None,
                None,
            )
        assert await store.unlock_all() == 0
        again = await self.claim(store, partition=0)
        assert (again.was_stale, again.tries) == (False, 2)

    # ---------------------------------------------------------------- history

    async def test_history_first_status_wins(self, store: AsyncJobStore) -> None:
        first = _history("e1", status=HistoryStatus.STALE)
        await store.write_history_many([first])
        late = dataclasses.replace(
            first,
            status=HistoryStatus.SUCCESS,
            ended_at=first.ended_at + _S,
            result={"late": True},
        )
        await store.write_history_many([late])
        assert await store.get_executions("a") == [
            dataclasses.replace(late, status=HistoryStatus.STALE)
        ]

    async def test_write_history_many(self, store: AsyncJobStore) -> None:
        rows = [
            _history(
                f"m{i}",
                started_at=T0 + i * _S + timedelta(microseconds=1_999),
                status=HistoryStatus.ERROR if i % 2 else HistoryStatus.SUCCESS,
                error_message="boom" if i % 2 else None,
                result=None if i % 2 else {"i": i},
            )
            for i in range(3)
        ]
        other = _history("other", name="b", started_at=T0 + _H)
        await store.write_history_many([rows[0], other, rows[1], rows[2]])
        stored = [_as_stored(row) for row in reversed(rows)]
        assert await store.get_executions("a") == stored
        assert await store.get_executions("b") == [other]

    async def test_write_history_many_first_status_wins(self, store: AsyncJobStore) -> None:
        first = _history("e1", status=HistoryStatus.STALE)
        await store.write_history_many([first])
        late = dataclasses.replace(
            first, status=HistoryStatus.SUCCESS, ended_at=first.ended_at + _S, result={"x": 1}
        )
        # Within one call too: the first record of an execution id sets its status, the later
        # ones its other fields, as writing them one by one would.
        fresh = _history("e2", started_at=T0 + _S, status=HistoryStatus.ERROR, error_message="a")
        fresh_late = dataclasses.replace(
            fresh, status=HistoryStatus.SUCCESS, error_message=None, result={"ok": True}
        )
        await store.write_history_many([late, fresh, fresh_late])
        assert await store.get_executions("a") == [
            dataclasses.replace(fresh_late, status=HistoryStatus.ERROR),
            dataclasses.replace(late, status=HistoryStatus.STALE),
        ]

    async def test_write_history_many_of_nothing(self, store: AsyncJobStore) -> None:
        await store.write_history_many([])
        assert await store.get_executions("a") == []

    async def test_get_executions_newest_first_with_limit_and_skip(
        self, store: AsyncJobStore
    ) -> None:
        rows = [
            _history(
                f"e{i}",
                started_at=T0 + i * _S + timedelta(microseconds=1_999),
                status=HistoryStatus.ERROR if i % 2 else HistoryStatus.SUCCESS,
                error_message="boom" if i % 2 else None,
                result=None if i % 2 else {"i": i},
            )
            for i in range(5)
        ]
        for row in rows:
            await store.write_history_many([row])
        await store.write_history_many([_history("other", name="b", started_at=T0 + _H)])
        stored = [_as_stored(row) for row in reversed(rows)]
        assert await store.get_executions("a") == stored
        assert await store.get_executions("a", limit=2) == stored[:2]
        assert await store.get_executions("a", limit=2, skip=1) == stored[1:3]
        assert await store.get_executions("a", skip=4) == stored[4:]
        assert await store.get_executions("nobody") == []

    # ---------------------------------------------------------------- views

    async def test_status_counts(self, store: AsyncJobStore) -> None:
        await store.schedule_many(
            [
                _job(partition=0, at=T0 - 2 * _S),  # due
                _job(partition=1, at=T0 - _S),  # due
                _job(partition=2, at=T0 + _H),  # scheduled later
                _job(partition=3, at=T0 - _S),  # running
                _job(partition=4, at=T0 - 20 * _S),  # stale
                _job(partition=5, at=T0 - 20 * _S),  # terminal
                _job("b", partition=0, at=T0),  # due
            ]
        )
        await self.claim(store, partition=3, now=T0)
        await self.claim(store, partition=4, now=T0 - 10 * _S, lock_for=5 * _S)
        terminal = await self.claim(store, partition=5, now=T0 - 10 * _S)
        assert await store.mark_max_tries_reached(
            terminal.job_id, terminal.lock_id, now=T0 - 10 * _S, expires_at=None
        )
        counts = sorted(await store.status_counts(now=T0), key=lambda s: s.job_name)
        assert counts == [
            NameStatus(
                job_name="a",
                due=2,
                scheduled_later=1,
                running=1,
                stale=1,
                terminal=1,
                oldest_due_at=T0 - 2 * _S,
            ),
            NameStatus(job_name="b", due=1, oldest_due_at=T0),
        ]

    async def test_find_jobs_in_claim_order(self, store: AsyncJobStore) -> None:
        ids = [
            _scheduled_id(await store.schedule(job))
            for job in (
                _job("a", priority=10, at=T0, partition=0),
                _job("b", priority=50, at=T0 + _H, partition=1),
                _job("a", priority=50, at=T0 - _H, partition=2),
                _job("b", priority=0, at=T0 - _DAY, partition=3),
            )
        ]
        assert [r.id for r in await store.find_jobs()] == [ids[2], ids[1], ids[0], ids[3]]
        assert [r.id for r in await store.find_jobs(job_name="b")] == [ids[1], ids[3]]
        assert [r.id for r in await store.find_jobs(limit=2)] == [ids[2], ids[1]]
        assert await store.find_jobs(job_name="nobody") == []

    async def test_probe_measures_every_hint(self, store: AsyncJobStore) -> None:
        if not (await store.capabilities()).supports_probe:
            pytest.skip("the store does not support probes")
        await store.schedule_many([_job(partition=p % 2, priority=p) for p in range(6)])
        for hint in self.probe_hints:
            cost = await store.probe(hint=hint, job_names=["a", "b"], partition=0, now=T0)
            assert isinstance(cost, float | int)
            assert math.isfinite(cost)
            assert cost >= 0
