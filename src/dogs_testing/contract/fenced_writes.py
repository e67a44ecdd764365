"""The contract suite, part 3: fenced writes. Every write of an execution matches its lock
id, completion included."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dogs_core.domain.records import Duplicate, JobState, JobStatus, to_millis
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

__all__ = ["FencedWriteContract"]


class FencedWriteContract(ContractBase):
    """Fenced writes: every write of an execution matches its lock id (completion included)."""

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
        assert await self.all_records(store) == []
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
        before = await self.all_records(store)
        claims = [
            (first.job_id, first.lock_id),
            (second.job_id, second.lock_id),
            (first.job_id, new_execution_id()),
        ]
        with pytest.raises(InvalidOptionError, match="repeated") as refused:
            await store.complete_many(claims)
        assert (refused.value.field, refused.value.value) == ("claims[2]", first.job_id)
        assert await self.all_records(store) == before

    async def test_complete_many_of_more_pairs_than_one_batch(self, store: AsyncJobStore) -> None:
        await store.schedule_many([_job(partition=p) for p in range(3)])
        owned = [await self.claim(store, partition=p) for p in range(2)]
        [unlocked] = [r for r in await self.all_records(store) if r.partition == 2]
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
        assert [r.id for r in await self.all_records(store)] == [unlocked.id]

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

    async def test_reschedule_with_tries_gives_the_try_back(self, store: AsyncJobStore) -> None:
        """A snoozed run: ``tries`` sets the count (here back to what it was before the
        claim), so the attempt limit does not count the run."""
        job_id = _scheduled_id(await store.schedule(_job()))
        claimed = await self.claim(store)
        assert claimed.tries == 1
        assert await store.reschedule(
            job_id, claimed.lock_id, next_run_at=T0 + _H, priority=None, reset_tries=False, tries=0
        )
        record = await self.record(store, job_id)
        assert (record.tries, record.next_run_at, record.lock_id) == (0, T0 + _H, None)
        again = await self.claim(store, now=T0 + _H)
        assert again.tries == 1
        assert await store.reschedule(
            job_id, again.lock_id, next_run_at=T0 + _H, priority=None, reset_tries=False, tries=4
        )
        assert (await self.record(store, job_id)).tries == 4

    async def test_releasing_writes_remove_every_lock_field(self, store: AsyncJobStore) -> None:
        """``reschedule`` and ``mark_max_tries_reached`` unset the lock id, deadline, stale
        mark, owner and release time (here after a ``release_lock``, whose lock id they match)."""
        ids = [_scheduled_id(await store.schedule(_job(partition=p))) for p in (0, 1)]
        locks = []
        for partition, job_id in enumerate(ids):
            claimed = await self.claim(store, partition=partition, owner=_owner())
            assert await store.release_lock(job_id, claimed.lock_id, now=T0 + _S)
            locks.append(claimed.lock_id)
        assert await store.reschedule(
            ids[0], locks[0], next_run_at=T0 + _H, priority=None, reset_tries=False
        )
        assert await store.mark_max_tries_reached(ids[1], locks[1], now=T0, expires_at=None)
        for job_id in ids:
            record = await self.record(store, job_id)
            assert (record.lock_id, record.locked_until, record.claim_was_stale) == (
                None,
                None,
                None,
            )
            assert (record.lock_owner, record.lock_released_at) == (None, None)
        assert (await self.record(store, ids[0])).state(T0) is JobState.RETRYING
        assert (await self.record(store, ids[1])).state(T0) is JobState.FAILED

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
        first = await self.claim(store, now=T0, owner=_owner("w1"))
        released_at = T0 + _S + timedelta(microseconds=1_500)
        assert await store.release_lock(job_id, first.lock_id, now=released_at)
        record = await self.record(store, job_id)
        assert (record.locked_until, record.lock_released_at) == (T0 + _S + _MS, T0 + _S + _MS)
        assert (record.lock_id, record.lock_owner) == (first.lock_id, _owner("w1"))
        assert record.lock_released
        second = await self.claim(store, now=T0 + _S + _MS)
        assert (second.job_id, second.was_stale, second.tries) == (job_id, False, 2)
        assert not await store.extend_lock(job_id, first.lock_id, T0 + _H)
        assert not await store.reschedule(
            job_id, first.lock_id, next_run_at=T0, priority=None, reset_tries=False
        )
