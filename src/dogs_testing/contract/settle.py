"""The contract suite, the settle role: every final write of an execution
(:mod:`dogs_core.ports.settle`), each matching its lock id, in batches of mixed commands."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from dogs_core.domain.outcome import Command
from dogs_core.domain.records import Duplicate, HistoryStatus, JobState, JobStatus
from dogs_core.domain.settle import Settlement
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
    _as_stored,
    _history,
    _job,
    _owner,
    _scheduled_id,
)
from dogs_testing.settling import (
    completed,
    deferred,
    demoted,
    released,
    rescheduled,
    settle_one,
    terminal,
)

__all__ = ["SettleContract"]


class SettleContract(ContractBase):
    """The settle role: every write of an execution matches its lock id."""

    async def test_every_fenced_write_refuses_a_foreign_lock_id(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        await self.claim(store)
        before = await self.record(store, job_id)
        for lock_id, target in ((new_execution_id(), job_id), (before.lock_id, new_record_id())):
            assert lock_id is not None
            assert not await store.extend_lock(target, lock_id, T0 + _H)
            assert not await self.complete(store, target, lock_id)
            assert not await settle_one(
                store, target, lock_id, rescheduled(T0 + _H, priority=1, reset_tries=True)
            )
            assert not await settle_one(store, target, lock_id, terminal(T0, expires_at=T0 + _DAY))
            assert not await settle_one(store, target, lock_id, demoted())
            assert not await settle_one(store, target, lock_id, released(T0))
        assert await self.record(store, job_id) == before

    async def test_complete_deletes_the_event_record(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        assert await self.complete(store, job_id, claimed.lock_id)
        assert await store.get_record(job_id) is None
        assert not await self.complete(store, job_id, claimed.lock_id)

    async def test_complete_refuses_a_recurrent_record(self, store: AsyncJobStore) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        claimed = await self.claim(store, "tick")
        assert not await self.complete(store, claimed.job_id, claimed.lock_id)
        assert (await self.record(store, claimed.job_id)).lock_id == claimed.lock_id

    async def test_settle_many_completes_every_owned_record(self, store: AsyncJobStore) -> None:
        await store.insert_jobs([_job(partition=p) for p in range(3)])
        claimed = [await self.claim(store, partition=p) for p in range(3)]
        batch = [Settlement(job.job_id, job.lock_id, completed()) for job in claimed]
        assert await store.settle_many(batch) == [True, True, True]
        assert await self.all_records(store) == []
        # A second identical call (a retry after a lost reply) writes nothing.
        assert await store.settle_many(batch) == [False, False, False]

    async def test_settle_many_verdicts_per_settlement(self, store: AsyncJobStore) -> None:
        await store.insert_jobs([_job(partition=p) for p in range(3)])
        await store.ensure_recurrent("tick", priority=100, partition=3, now=T0)
        owned = await self.claim(store, partition=0)
        foreign = await self.claim(store, partition=1)
        recurrent = await self.claim(store, "tick", partition=3)
        [unlocked] = [r for r in await store.find_records(job_name="a") if r.partition == 2]
        foreign_before = await self.record(store, foreign.job_id)
        unlocked_before = await self.record(store, unlocked.id)
        recurrent_before = await self.record(store, recurrent.job_id)
        batch = [
            Settlement(foreign.job_id, new_execution_id(), completed()),  # another claim's
            Settlement(owned.job_id, owned.lock_id, completed()),
            Settlement(recurrent.job_id, recurrent.lock_id, completed()),  # never deleted
            Settlement(unlocked.id, new_execution_id(), completed()),  # not locked at all
        ]
        assert await store.settle_many(batch) == [False, True, False, False]
        assert await store.get_record(owned.job_id) is None
        assert await self.record(store, foreign.job_id) == foreign_before
        assert await self.record(store, unlocked.id) == unlocked_before
        assert await self.record(store, recurrent.job_id) == recurrent_before
        assert await store.settle_many(batch) == [False, False, False, False]
        # No such record (another worker finished the job after this lock was lost).
        gone = Settlement(new_record_id(), new_execution_id(), completed())
        assert await store.settle_many([gone]) == [False]
        # A one-settlement call is exact: True only when this call applied it.
        assert not await self.complete(store, owned.job_id, owned.lock_id)

    async def test_settle_many_mixes_commands_in_one_batch(self, store: AsyncJobStore) -> None:
        """Each settlement gets its own command and verdict, whatever the others in the batch
        (a store may send the completions and the updates as separate writes of one call)."""
        await store.insert_jobs([_job(partition=p, priority=50) for p in range(7)])
        claimed = [await self.claim(store, partition=p) for p in range(7)]
        foreign = new_execution_id()
        commands: list[Command] = [
            completed(),
            rescheduled(T0 + _H, priority=7, reset_tries=True),
            terminal(T0, expires_at=T0 + _DAY),
            released(T0 + _S),
            demoted(),
            deferred(T0 + _MIN, tries=0),
        ]
        batch = [
            Settlement(job.job_id, job.lock_id, command)
            for job, command in zip(claimed[:6], commands, strict=True)
        ]
        taken = claimed[6]  # held by another claim: its settlement matches nothing
        batch.append(Settlement(taken.job_id, foreign, demoted()))
        assert await store.settle_many(batch) == [True] * 6 + [False]
        ids = [job.job_id for job in claimed]
        assert await store.get_record(ids[0]) is None
        retry = await self.record(store, ids[1])
        assert (retry.next_run_at, retry.priority, retry.tries, retry.lock_id) == (
            T0 + _H,
            7,
            0,
            None,
        )
        assert (await self.record(store, ids[2])).state(T0) is JobState.FAILED
        released_record = await self.record(store, ids[3])
        assert (released_record.lock_id, released_record.lock_released_at) == (
            claimed[3].lock_id,
            T0 + _S,
        )
        demoted_record = await self.record(store, ids[4])
        assert (demoted_record.priority, demoted_record.lock_id) == (0, claimed[4].lock_id)
        deferred_record = await self.record(store, ids[5])
        assert (deferred_record.next_run_at, deferred_record.priority, deferred_record.tries) == (
            T0 + _MIN,
            50,
            0,
        )
        assert deferred_record.lock_id is None
        assert (await self.record(store, taken.job_id)).priority == 50
        # Once ended, no write of the batch matches again; the live locks still refuse others.
        assert await store.settle_many(batch[:3] + batch[5:6]) == [False] * 4
        again = [Settlement(ids[3], foreign, demoted()), Settlement(ids[4], foreign, released(T0))]
        assert await store.settle_many(again) == [False, False]

    async def test_settle_many_writes_the_rows_it_carries(self, store: AsyncJobStore) -> None:
        """Each settlement's row is stored, whatever becomes of its settlement (a lost lock's
        row still tells how the run ended), and the first row of an execution wins whole."""
        await store.insert_jobs([_job(partition=p) for p in range(2)])
        owned = await self.claim(store, partition=0)
        lost = await self.claim(store, partition=1)
        done = _as_stored(
            dataclasses.replace(
                _history(owned.execution_id, result={"made": 1}), job_id=owned.job_id
            )
        )
        late = _as_stored(
            dataclasses.replace(
                _history(lost.execution_id, status=HistoryStatus.ERROR), job_id=lost.job_id
            )
        )
        batch = [
            Settlement(owned.job_id, owned.lock_id, completed(), done),
            Settlement(lost.job_id, new_execution_id(), rescheduled(T0 + _H), late),
        ]
        assert await store.settle_many(batch) == [True, False]
        assert await store.read_history(job_id=owned.job_id) == [done]
        assert await store.read_history(job_id=lost.job_id) == [late]
        # A retry carrying another row of the same execution writes nothing more.
        other = dataclasses.replace(late, status=HistoryStatus.STALE)
        assert await store.settle_many([Settlement(lost.job_id, lost.lock_id, demoted(), other)])
        assert await store.read_history(job_id=lost.job_id) == [late]

    async def test_settle_many_of_nothing(self, store: AsyncJobStore) -> None:
        assert await store.settle_many([]) == []

    async def test_settle_many_refuses_a_repeated_record(self, store: AsyncJobStore) -> None:
        await store.insert_jobs([_job(partition=p) for p in range(2)])
        first = await self.claim(store, partition=0)
        second = await self.claim(store, partition=1)
        before = await self.all_records(store)
        batch = [
            Settlement(first.job_id, first.lock_id, completed()),
            Settlement(second.job_id, second.lock_id, demoted()),
            Settlement(first.job_id, new_execution_id(), released(T0)),
        ]
        with pytest.raises(InvalidOptionError, match="repeated") as refused:
            await store.settle_many(batch)
        assert (refused.value.field, refused.value.value) == (
            "settlements[2].job_id",
            first.job_id,
        )
        assert await self.all_records(store) == before

    async def test_settle_many_refuses_what_is_not_a_settlement(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        before = await self.all_records(store)
        pair = (job_id, claimed.lock_id)
        with pytest.raises(InvalidOptionError, match="Settlement") as refused:
            await store.settle_many([Settlement(job_id, claimed.lock_id, demoted()), pair])  # type: ignore[list-item]
        assert refused.value.field == "settlements[1]"
        assert await self.all_records(store) == before

    async def test_settle_many_of_more_than_one_batch(self, store: AsyncJobStore) -> None:
        await store.insert_jobs([_job(partition=p) for p in range(3)])
        owned = [await self.claim(store, partition=p) for p in range(2)]
        [unlocked] = [r for r in await self.all_records(store) if r.partition == 2]
        missing = [
            Settlement(new_record_id(), new_execution_id(), completed()) for _ in range(2_400)
        ]
        batch = [
            Settlement(owned[0].job_id, owned[0].lock_id, completed()),
            *missing[:1_500],
            Settlement(unlocked.id, new_execution_id(), rescheduled(T0 + _H)),
            *missing[1_500:],
            Settlement(owned[1].job_id, owned[1].lock_id, rescheduled(T0 + _H)),
        ]
        verdicts = await store.settle_many(batch)
        assert len(verdicts) == len(batch)
        assert verdicts[0] is True
        assert verdicts[-1] is True
        assert verdicts[1_501] is False  # the unlocked record, which still exists
        # The missing ids share batches with deleted records: the port's leeway lets a
        # count-only store report them either way.
        assert {r.id for r in await self.all_records(store)} == {unlocked.id, owned[1].job_id}
        assert (await self.record(store, owned[1].job_id)).lock_id is None

    async def test_reschedule_releases_the_lock_and_keeps_tries(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(priority=40)))
        claimed = await self.claim(store)
        assert await settle_one(store, job_id, claimed.lock_id, rescheduled(T0 + _H))
        record = await self.record(store, job_id)
        assert (record.next_run_at, record.priority, record.tries) == (T0 + _H, 40, 1)
        assert (record.lock_id, record.locked_until, record.claim_was_stale) == (None, None, None)
        assert await store.claim(self.request(now=T0 + _H - _MS)) is None
        again = await self.claim(store, now=T0 + _H)
        assert (again.job_id, again.was_stale, again.tries) == (job_id, False, 2)
        assert not await settle_one(store, job_id, claimed.lock_id, rescheduled(T0))

    async def test_reschedule_with_tries_gives_the_try_back(self, store: AsyncJobStore) -> None:
        """A snoozed run: ``tries`` sets the count (here back to what it was before the
        claim), so the attempt limit does not count the run."""
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        assert claimed.tries == 1
        assert await settle_one(store, job_id, claimed.lock_id, rescheduled(T0 + _H, tries=0))
        record = await self.record(store, job_id)
        assert (record.tries, record.next_run_at, record.lock_id) == (0, T0 + _H, None)
        again = await self.claim(store, now=T0 + _H)
        assert again.tries == 1
        assert await settle_one(store, job_id, again.lock_id, rescheduled(T0 + _H, tries=4))
        assert (await self.record(store, job_id)).tries == 4

    async def test_releasing_writes_remove_every_lock_field(self, store: AsyncJobStore) -> None:
        """``Reschedule`` and ``MarkTerminal`` unset the lock id, deadline, stale mark, owner
        and release time (here after a ``Release``, whose lock id they match)."""
        ids = [_scheduled_id(await store.insert_job(_job(partition=p))) for p in (0, 1)]
        locks = []
        for partition, job_id in enumerate(ids):
            claimed = await self.claim(store, partition=partition, owner=_owner())
            assert await settle_one(store, job_id, claimed.lock_id, released(T0 + _S))
            locks.append(claimed.lock_id)
        assert await settle_one(store, ids[0], locks[0], rescheduled(T0 + _H))
        assert await settle_one(store, ids[1], locks[1], terminal(T0))
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
        job_id = _scheduled_id(await store.insert_job(_job(priority=40)))
        claimed = await self.claim(store)
        next_run_at = T0 + _H + timedelta(microseconds=999)
        assert await settle_one(
            store, job_id, claimed.lock_id, rescheduled(next_run_at, priority=5, reset_tries=True)
        )
        record = await self.record(store, job_id)
        assert (record.next_run_at, record.priority, record.tries) == (T0 + _H, 5, 0)
        assert record.lock_id is None
        assert (await self.claim(store, now=T0 + _H)).tries == 1

    async def test_mark_terminal_with_expiry(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(uid="dead")))
        claimed = await self.claim(store)
        now = T0 + _S + timedelta(microseconds=1_500)
        assert await settle_one(
            store, job_id, claimed.lock_id, terminal(now, expires_at=now + 7 * _DAY)
        )
        record = await self.record(store, job_id)
        assert record.status is JobStatus.MAX_TRIES_REACHED
        assert (record.max_tries_reached_at, record.expires_at) == (
            T0 + _S + _MS,
            T0 + 7 * _DAY + _S + _MS,
        )
        assert (record.lock_id, record.locked_until) == (None, None)
        assert await store.insert_job(_job(uid="dead")) == Duplicate(job_id, "dead")
        assert not await self.complete(store, job_id, claimed.lock_id)

    async def test_mark_terminal_without_expiry(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        assert await settle_one(store, job_id, claimed.lock_id, terminal(T0))
        record = await self.record(store, job_id)
        assert (record.status, record.max_tries_reached_at, record.expires_at) == (
            JobStatus.MAX_TRIES_REACHED,
            T0,
            None,
        )
        assert (record.lock_id, record.locked_until) == (None, None)

    async def test_mark_terminal_refuses_a_recurrent_record(self, store: AsyncJobStore) -> None:
        await store.ensure_recurrent("tick", priority=100, partition=0, now=T0)
        claimed = await self.claim(store, "tick")
        assert not await settle_one(store, claimed.job_id, claimed.lock_id, terminal(T0))
        record = await self.record(store, claimed.job_id)
        assert (record.status, record.lock_id) == (None, claimed.lock_id)

    async def test_demote_stale_keeps_the_lock(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(priority=100)))
        claimed = await self.claim(store)
        assert await settle_one(store, job_id, claimed.lock_id, demoted())
        record = await self.record(store, job_id)
        assert (record.priority, record.lock_id, record.locked_until) == (
            0,
            claimed.lock_id,
            claimed.locked_until,
        )

    async def test_release_makes_the_record_claimable_at_once(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        first = await self.claim(store, now=T0, owner=_owner("w1"))
        released_at = T0 + _S + timedelta(microseconds=1_500)
        assert await settle_one(store, job_id, first.lock_id, released(released_at))
        record = await self.record(store, job_id)
        assert (record.locked_until, record.lock_released_at) == (T0 + _S + _MS, T0 + _S + _MS)
        assert (record.lock_id, record.lock_owner) == (first.lock_id, _owner("w1"))
        assert record.lock_released
        second = await self.claim(store, now=T0 + _S + _MS)
        assert (second.job_id, second.was_stale, second.tries) == (job_id, False, 2)
        assert not await store.extend_lock(job_id, first.lock_id, T0 + _H)
        assert not await settle_one(store, job_id, first.lock_id, rescheduled(T0))
