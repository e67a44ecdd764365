"""The contract suite, the scheduling role: inserts (single, bulk, unique identifiers) and
recurrent records."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import anyio

from dogs_core.domain.records import Duplicate, JobRecord, JobStatus, JobType, Scheduled
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract.base import _H, _MS, T0, ContractBase, _job, _scheduled_id

__all__ = ["SchedulingContract"]


class SchedulingContract(ContractBase):
    """Setup, scheduling (single and bulk, unique identifiers) and recurrent records."""

    # ---------------------------------------------------------------- setup

    # ---------------------------------------------------------------- schedule

    async def test_insert_job_and_get_record_round_trip(self, store: AsyncJobStore) -> None:
        at = T0 + timedelta(microseconds=123_456)
        params = {"n": 1, "tags": ["x", "y"], "nested": {"ok": True}}
        job = _job("send", at=at, priority=7, partition=3, uid="u1", params=params)
        job_id = _scheduled_id(await store.insert_job(job))
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
        other = _scheduled_id(await store.insert_job(_job("send", priority=0)))
        assert other != job_id
        other_record = await self.record(store, other)
        assert other_record.params is None
        assert other_record.priority == 0
        assert other_record.unique_identifier is None

    async def test_a_trace_context_is_stored_and_comes_back_on_the_claim(
        self, store: AsyncJobStore
    ) -> None:
        carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        job = dataclasses.replace(_job("traced"), trace_context=carrier)
        job_id = _scheduled_id(await store.insert_job(job))
        record = await self.record(store, job_id)
        assert record.trace_context == carrier
        claimed = await self.claim(store, "traced")
        assert claimed.trace_context == carrier
        plain = _scheduled_id(await store.insert_job(_job("traced")))
        assert (await self.record(store, plain)).trace_context is None

    async def test_insert_job_of_a_known_id_is_idempotent(self, store: AsyncJobStore) -> None:
        job = _job(uid="u")
        assert await store.insert_job(job) == Scheduled(job.id)
        before = await self.all_records(store)
        # A retry after an ambiguous failure (the first insert had landed) is not a duplicate.
        assert await store.insert_job(job) == Scheduled(job.id)
        assert await self.all_records(store) == before

    async def test_get_record_of_an_unknown_id_is_none(self, store: AsyncJobStore) -> None:
        assert await store.get_record(new_record_id()) is None

    async def test_duplicate_unique_identifier_returns_existing_id_and_writes_nothing(
        self, store: AsyncJobStore
    ) -> None:
        first = _scheduled_id(await store.insert_job(_job("a", uid="k", params={"v": 1})))
        before = await self.all_records(store)
        # One global namespace: another job name does not make the identifier free.
        outcome = await store.insert_job(
            _job("b", uid="k", params={"v": 2}, priority=5, at=T0 + _H, partition=2)
        )
        assert outcome == Duplicate(existing_id=first, unique_identifier="k")
        assert await self.all_records(store) == before

    async def test_unique_identifier_is_free_again_after_completion(
        self, store: AsyncJobStore
    ) -> None:
        _scheduled_id(await store.insert_job(_job(uid="once")))
        claimed = await self.claim(store)
        assert await self.complete(store, claimed.job_id, claimed.lock_id)
        _scheduled_id(await store.insert_job(_job(uid="once")))

    async def test_insert_jobs_counts(self, store: AsyncJobStore) -> None:
        jobs = [_job(partition=i, priority=i) for i in range(3)] + [_job("b", uid="u")]
        result = await store.insert_jobs(jobs)
        assert (result.scheduled_count, result.skipped_count, result.errors) == (4, 0, ())
        assert result.outcomes == tuple(Scheduled(job.id) for job in jobs)
        assert {r.id for r in await self.all_records(store)} == {job.id for job in jobs}

    async def test_insert_jobs_retry_of_a_landed_batch_writes_nothing(
        self, store: AsyncJobStore
    ) -> None:
        jobs = [_job(uid="u"), _job(partition=1)]
        await store.insert_jobs(jobs)
        before = await self.all_records(store)
        result = await store.insert_jobs(jobs)
        assert (result.scheduled_count, result.skipped_count, result.errors) == (2, 0, ())
        assert result.outcomes == tuple(Scheduled(job.id) for job in jobs)
        assert await self.all_records(store) == before

    async def test_insert_jobs_of_nothing(self, store: AsyncJobStore) -> None:
        result = await store.insert_jobs([])
        assert (result.scheduled_count, result.skipped_count, result.errors) == (0, 0, ())
        assert await self.all_records(store) == []

    async def test_insert_jobs_skips_a_duplicate_inside_the_batch(
        self, store: AsyncJobStore
    ) -> None:
        result = await store.insert_jobs(
            [_job(uid="a", params={"v": 1}), _job(uid="a", params={"v": 2}), _job(uid="b")]
        )
        assert (result.scheduled_count, result.skipped_count, result.errors) == (2, 1, ())
        records = await self.all_records(store)
        assert sorted(r.unique_identifier or "" for r in records) == ["a", "b"]
        assert len(result.outcomes) == 3
        assert sum(isinstance(outcome, Duplicate) for outcome in result.outcomes) == 1

    async def test_insert_jobs_leaves_an_existing_record_untouched(
        self, store: AsyncJobStore
    ) -> None:
        existing = _scheduled_id(
            await store.insert_job(_job(uid="x", params={"v": "orig"}, priority=5, partition=1))
        )
        before = await self.record(store, existing)
        result = await store.insert_jobs(
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

    async def test_session_none_is_scheduling_without_a_session(self, store: AsyncJobStore) -> None:
        """``session=None`` (the caller has no database session) is the call without it; a
        store that cannot join sessions must still accept ``None``."""
        job = _job(uid="s")
        assert await store.insert_job(job, session=None) == Scheduled(job.id)
        assert await store.insert_job(job, session=None) == Scheduled(job.id)  # a retry
        taken = await store.insert_job(_job(uid="s"), session=None)
        assert taken == Duplicate(existing_id=job.id, unique_identifier="s")
        batch = [_job(partition=1), _job(uid="s"), _job(uid="t")]
        result = await store.insert_jobs(batch, session=None)
        assert (result.scheduled_count, result.skipped_count, result.errors) == (2, 1, ())
        assert {r.id for r in await self.all_records(store)} == {job.id, batch[0].id, batch[2].id}

    # ---------------------------------------------------------------- recurrent records

    async def test_ensure_recurrent_inserts_once_then_updates_priority_only(
        self, store: AsyncJobStore
    ) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=2, now=T0)
        [record] = await store.find_records(job_name="tick")
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
        [updated] = await store.find_records(job_name="tick")
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
        assert len(await store.find_records(job_name="tick")) == 1
