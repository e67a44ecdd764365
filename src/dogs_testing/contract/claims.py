"""The contract suite, the claims role: claims (eligibility, order, staleness), ``claim_many``,
the fenced ``extend_lock`` and the probe."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import anyio
import pytest

from dogs_core.domain.records import (
    ClaimedJob,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    PreviousAttempt,
    to_millis,
)
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract.base import (
    _DAY,
    _H,
    _MIN,
    _MS,
    _S,
    T0,
    ContractBase,
    _job,
    _owner,
    _scheduled_id,
)
from dogs_testing.settling import released, settle_one, terminal

__all__ = ["ClaimContract"]


class ClaimContract(ContractBase):
    """Claims: eligibility, order, staleness, and batched claims (``claim_many``)."""

    # ---------------------------------------------------------------- claim

    async def test_claim_order_is_priority_desc_then_next_run_at_asc(
        self, store: AsyncJobStore
    ) -> None:
        ids = {
            key: _scheduled_id(await store.insert_job(job))
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
            await store.insert_job(_job(params={"n": 3}, priority=9, partition=2, uid="u"))
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
        await store.insert_job(_job())
        request = dataclasses.replace(self.request(), job_names=())
        assert await store.claim(request) is None

    async def test_claim_ignores_other_partitions(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(partition=1)))
        assert await store.claim(self.request(partition=0)) is None
        assert await store.claim(self.request(partition=2)) is None
        assert (await self.claim(store, partition=1)).job_id == job_id

    async def test_claim_ignores_other_job_names(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job("b")))
        assert await store.claim(self.request("a", "c")) is None
        assert (await self.claim(store, "a", "b")).job_id == job_id

    async def test_claim_ignores_future_jobs(self, store: AsyncJobStore) -> None:
        later = _scheduled_id(await store.insert_job(_job(at=T0 + _MS)))
        now = _scheduled_id(await store.insert_job(_job(at=T0, priority=1)))
        assert (await self.claim(store, now=T0)).job_id == now  # next_run_at == now is due
        assert await store.claim(self.request(now=T0)) is None
        assert (await self.claim(store, now=T0 + _MS)).job_id == later

    async def test_claim_ignores_locked_jobs(self, store: AsyncJobStore) -> None:
        await store.insert_job(_job())
        await self.claim(store, now=T0, lock_for=10 * _S)
        assert await store.claim(self.request(now=T0)) is None
        assert await store.claim(self.request(now=T0 + 10 * _S - _MS)) is None

    async def test_claim_takes_an_expired_lock_as_stale(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        first = await self.claim(store, now=T0, lock_for=10 * _S)
        assert (await self.record(store, job_id)).state(T0 + 10 * _S) is JobState.STALE
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

    async def test_claim_writes_the_owner_and_hands_it_out(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        first = await self.claim(store, owner=_owner("w1"))
        assert first.owner == _owner("w1")
        record = await self.record(store, job_id)
        assert (record.lock_owner, record.lock_released_at) == (_owner("w1"), None)
        # A claim without an owner (a Node Dogs worker writes none) removes the old one.
        second = await self.claim(store, now=T0 + _MIN)
        assert (second.job_id, second.owner) == (job_id, None)
        assert (await self.record(store, job_id)).lock_owner is None
        third = (await store.claim_many(self.requests(1, now=T0 + 2 * _MIN, owner=_owner("w2"))))[0]
        assert (third.job_id, third.owner) == (job_id, _owner("w2"))
        assert (await self.record(store, job_id)).lock_owner == _owner("w2")

    async def test_a_stale_claim_hands_over_the_previous_attempt(
        self, store: AsyncJobStore
    ) -> None:
        """The attempt whose lock expired: its lock id, start, deadline, tries and owner (a
        Node-like claim without an owner first, then one with an owner, through both paths)."""
        job_id = _scheduled_id(await store.insert_job(_job()))
        first = await self.claim(store, now=T0, lock_for=10 * _S)
        self.check_previous_attempt(first, None)
        second = await self.claim(store, now=T0 + 10 * _S, owner=_owner("w2"))
        assert (second.job_id, second.was_stale, second.tries) == (job_id, True, 2)
        self.check_previous_attempt(
            second,
            PreviousAttempt(
                execution_id=first.lock_id, started_at=T0, locked_until=T0 + 10 * _S, tries=1
            ),
        )
        later = T0 + 10 * _S + _MIN
        [third] = await store.claim_many(self.requests(3, now=later, owner=_owner("w3")))
        assert (third.job_id, third.was_stale, third.tries) == (job_id, True, 3)
        self.check_previous_attempt(
            third,
            PreviousAttempt(
                execution_id=second.lock_id,
                started_at=T0 + 10 * _S,
                locked_until=later,
                tries=2,
                owner=_owner("w2"),
            ),
        )
        record = await self.record(store, job_id)
        assert (record.lock_id, record.lock_owner) == (third.lock_id, _owner("w3"))

    async def test_a_released_lock_is_not_stale(self, store: AsyncJobStore) -> None:
        """A lock given back (``release_lock``) is claimable at once and not a stale takeover:
        no ``was_stale``, no previous attempt, through both claim paths."""
        ids = [_scheduled_id(await store.insert_job(_job(partition=p))) for p in (0, 1)]
        for partition, job_id in enumerate(ids):
            first = await self.claim(store, partition=partition, owner=_owner("w1"))
            assert await settle_one(store, job_id, first.lock_id, released(T0 + _S))
            record = await self.record(store, job_id)
            assert record.state(T0 + _S) is JobState.RETRYING
            assert record.state(T0 + _H) is JobState.RETRYING
        second = await self.claim(store, now=T0 + _S, owner=_owner("w2"))
        [batch] = await store.claim_many(self.requests(2, partition=1, now=T0 + _S))
        for claimed, job_id in zip((second, batch), ids, strict=True):
            assert (claimed.job_id, claimed.was_stale, claimed.tries) == (job_id, False, 2)
            self.check_previous_attempt(claimed, None)
            record = await self.record(store, job_id)
            assert (record.lock_id, record.lock_released_at) == (claimed.lock_id, None)
            assert not record.claim_was_stale
            assert record.lock_owner == claimed.owner

    async def test_a_lock_claimed_again_after_its_release_can_go_stale(
        self, store: AsyncJobStore
    ) -> None:
        """Released means ``lock_released_at >= locked_until``: a Node Dogs claim leaves the
        old ``lock_released_at`` behind and moves ``locked_until`` past it; when that lock
        expires the record is stale."""
        record = JobRecord(
            id=new_record_id(),
            job_name="a",
            type=JobType.EVENT,
            priority=100,
            next_run_at=T0 - _H,
            partition=0,
            last_run_at=T0 - _MIN,
            lock_id=new_execution_id(),
            locked_until=T0 - 30 * _S,
            lock_released_at=T0 - 2 * _MIN,
            tries=2,
        )
        await self.seed_record(store, record)
        assert record.state(T0) is JobState.STALE
        claimed = await self.claim(store)
        assert (claimed.job_id, claimed.was_stale, claimed.tries) == (record.id, True, 3)
        assert record.lock_id is not None
        self.check_previous_attempt(
            claimed,
            PreviousAttempt(
                execution_id=record.lock_id,
                started_at=T0 - _MIN,
                locked_until=T0 - 30 * _S,
                tries=2,
            ),
        )
        assert (await self.record(store, record.id)).lock_released_at is None

    async def test_claim_ignores_terminal_event_jobs(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        assert await settle_one(
            store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 + 7 * _DAY)
        )
        assert await store.claim(self.request(now=T0 + _H)) is None
        assert [r.id for r in await self.all_records(store)] == [job_id]

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
        assert (await store.insert_jobs(jobs)).scheduled_count == 200
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
        assert set(claimed) == {r.id for r in await self.all_records(store)}

    # ---------------------------------------------------------------- claim_many

    async def test_claim_many_takes_the_best_records_in_claim_order(
        self, store: AsyncJobStore
    ) -> None:
        ids = {
            key: _scheduled_id(await store.insert_job(job))
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
                index_of[_scheduled_id(await store.insert_job(job))] = index
            # The best record (priority 9) is claimed and its lock expires at T0: stale.
            await self.claim(store, "a", "b", partition=partition, now=T0 - _S, lock_for=_S)

        def shape_of(job: ClaimedJob) -> ClaimedJob:
            previous = job.previous_attempt
            return dataclasses.replace(
                job,
                job_id=str(index_of[job.job_id]),
                execution_id="",
                partition=None,
                previous_attempt=None
                if previous is None
                else (dataclasses.replace(previous, execution_id="")),
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
        for record in await self.all_records(store):
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
        ids = {_scheduled_id(await store.insert_job(_job(priority=p))) for p in (1, 2)}
        requests = self.requests(5)
        claimed = await store.claim_many(requests)
        assert {job.job_id for job in claimed} == ids
        assert [job.priority for job in claimed] == [2, 1]
        lock_ids = {job.lock_id for job in claimed}
        assert len(lock_ids) == 2
        assert lock_ids <= {request.lock_id for request in requests}
        assert await store.claim_many(self.requests(5)) == []

    async def test_claim_many_that_finds_nothing_writes_nothing(self, store: AsyncJobStore) -> None:
        await store.insert_jobs(
            [_job(at=T0 + _S), _job("b"), _job(partition=1), _job(priority=7, at=T0 + _H)]
        )
        before = await self.all_records(store)
        assert await store.claim_many(self.requests(4, "a", "c")) == []
        assert await self.all_records(store) == before

    async def test_claim_many_skips_held_locks_and_takes_expired_ones_as_stale(
        self, store: AsyncJobStore
    ) -> None:
        held = _scheduled_id(await store.insert_job(_job(priority=30)))
        expired = _scheduled_id(await store.insert_job(_job(priority=20)))
        free = _scheduled_id(await store.insert_job(_job(priority=10)))
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
        await store.insert_jobs([_job(), _job(partition=1)])
        before = await self.all_records(store)
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
            with pytest.raises(InvalidOptionError, match=field) as refused:
                await store.claim_many(requests)
            assert refused.value.field == f"requests[2].{field}"
        repeated = [template, dataclasses.replace(template, lock_id=new_execution_id()), template]
        with pytest.raises(InvalidOptionError, match="lock_id") as refused:
            await store.claim_many(repeated)
        assert (refused.value.field, refused.value.value) == (
            "requests[2].lock_id",
            template.lock_id,
        )
        assert await self.all_records(store) == before

    async def test_claim_many_of_nothing(self, store: AsyncJobStore) -> None:
        await store.insert_job(_job())
        before = await self.all_records(store)
        assert await store.claim_many([]) == []
        no_names = [dataclasses.replace(r, job_names=()) for r in self.requests(2)]
        assert await store.claim_many(no_names) == []
        assert await self.all_records(store) == before

    async def test_claim_many_of_more_than_a_thousand(self, store: AsyncJobStore) -> None:
        jobs = [_job(priority=i % 7, at=T0 - i * _MS) for i in range(1_500)]
        assert (await store.insert_jobs(jobs)).scheduled_count == 1_500
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
        assert all(record.tries == 1 for record in await self.all_records(store))

    async def test_concurrent_claim_many_calls_claim_each_job_exactly_once(
        self, store: AsyncJobStore
    ) -> None:
        jobs = [_job(priority=i % 3) for i in range(50)]
        assert (await store.insert_jobs(jobs)).scheduled_count == 50
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
        assert all(record.tries == 1 for record in await self.all_records(store))

    async def test_extend_lock(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        until = T0 + 5 * _MIN + timedelta(microseconds=123_456)
        assert await store.extend_lock(job_id, claimed.lock_id, until)
        record = await self.record(store, job_id)
        assert (record.locked_until, record.lock_id) == (to_millis(until), claimed.lock_id)
        assert await store.claim(self.request(now=T0 + 5 * _MIN)) is None

    async def test_probe_measures_every_hint(self, store: AsyncJobStore) -> None:
        if not (await store.capabilities()).supports_probe:
            pytest.skip("the store does not support probes")
        await store.insert_jobs([_job(partition=p % 2, priority=p) for p in range(6)])
        for hint in self.probe_hints:
            cost = await store.probe(hint=hint, job_names=["a", "b"], partition=0, now=T0)
            assert isinstance(cost, float | int)
            assert math.isfinite(cost)
            assert cost >= 0
