"""The contract suite, the steering role (what an operator's ``cancel``, ``retry_now``,
``reschedule``, ``delete`` and queries stand on): ``get_record``, ``find_records`` by state with
a stable cursor, ``delete_record``, ``modify_record``, ``delete_records``, and their races
with claims, renewals and each other.

The races run two port calls at once in a task group, in both start orders, and accept either
interleaving; each asserts that exactly one side won and what the other then saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import (
    Duplicate,
    Hold,
    HoldReason,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    PreviousAttempt,
    Scheduled,
)
from dogs_core.domain.steering import JobChange
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
from dogs_testing.settling import released, rescheduled, settle_one, terminal

__all__ = ["SteeringContract"]

#: The moments at which the state filters are checked against ``JobRecord.state``.
_MOMENTS = (T0 - 2 * _H, T0 - 30 * _S, T0, T0 + 2 * _H)


async def _both(
    first: Callable[[], Coroutine[Any, Any, None]], second: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """Run two calls at once (started in this order) and wait for both."""
    async with anyio.create_task_group() as group:
        group.start_soon(first)
        group.start_soon(second)


class SteeringContract(ContractBase):
    """Steering: ``find_jobs`` by state and cursor, ``delete_job``, ``modify_job``,
    ``delete_jobs``, ``get_executions(status=)`` and the races of operators with workers."""

    async def one_of_each_state(
        self, store: AsyncJobStore, name: str = "a", *, base: int = 0
    ) -> dict[str, str]:
        """Records of ``name`` made through the port, one per case (in partitions ``base`` to
        ``base + 8``), keyed by what they are at :data:`T0`: ``scheduled``, ``due``,
        ``running``, ``retrying`` (due), ``retrying_later``, ``released`` (retrying: its lock
        was given back), ``stale``, ``failed`` and ``held`` (given back by a fleet limit until
        ``T0 + 1 min``)."""
        keys = (
            *("scheduled", "due", "running", "retrying"),
            *("retrying_later", "released", "stale", "failed", "held"),
        )
        ids: dict[str, str] = {}
        for offset, key in enumerate(keys):
            at = T0 + _H if key == "scheduled" else T0 - _H + offset * _S
            ids[key] = _scheduled_id(
                await store.insert_job(_job(name, at=at, partition=base + offset))
            )

        async def claim(key: str, *, now: datetime, lock_for: timedelta = _MIN) -> str:
            job = await self.claim(
                store, name, partition=base + keys.index(key), now=now, lock_for=lock_for
            )
            assert job.job_id == ids[key]
            return job.lock_id

        await claim("running", now=T0 - 30 * _S)  # locked until T0 + 30 s
        lock = await claim("retrying", now=T0 - _MIN)
        assert await settle_one(store, ids["retrying"], lock, rescheduled(T0 - _S))
        lock = await claim("retrying_later", now=T0 - _MIN)
        assert await settle_one(store, ids["retrying_later"], lock, rescheduled(T0 + _H))
        lock = await claim("released", now=T0 - _MIN)
        assert await settle_one(store, ids["released"], lock, released(T0 - 50 * _S))
        await claim("stale", now=T0 - _MIN, lock_for=10 * _S)  # expired at T0 - 50 s
        lock = await claim("failed", now=T0 - _MIN)
        assert await settle_one(
            store, ids["failed"], lock, terminal(T0 - _MIN, expires_at=T0 + 7 * _DAY)
        )
        lock = await claim("held", now=T0 - _MIN)
        hold = Hold(HoldReason.RATE, since=T0 - _H, until=T0 + _MIN)
        assert await settle_one(store, ids["held"], lock, Defer(T0 + _MIN, tries=0, hold=hold))
        return ids

    # ---------------------------------------------------------------- find_jobs

    async def test_find_records_by_state(self, store: AsyncJobStore) -> None:
        ids = await self.one_of_each_state(store)
        expected = {
            JobState.SCHEDULED: ["scheduled"],
            JobState.DUE: ["due"],
            JobState.RUNNING: ["running"],
            JobState.RETRYING: ["retrying", "retrying_later", "released"],
            JobState.STALE: ["stale"],
            JobState.FAILED: ["failed"],
            JobState.HELD: ["held"],
        }
        for state, keys in expected.items():
            found = await store.find_records(state=state, now=T0)
            assert [r.id for r in found] == sorted(ids[key] for key in keys), state
            for record in found:
                assert record == await self.record(store, record.id)

    async def test_every_state_filter_agrees_with_record_state(self, store: AsyncJobStore) -> None:
        """At several moments, for two names and every state: ``find_jobs(state=...)`` returns
        exactly the records whose :meth:`JobRecord.state` it is, in id order."""
        await self.one_of_each_state(store, "a")
        await self.one_of_each_state(store, "b", base=10)
        records = await store.find_records(limit=1_000)
        assert len(records) == 18
        for now in _MOMENTS:
            seen = 0
            for state in JobState:
                for name in (None, "a", "b"):
                    found = await store.find_records(job_name=name, state=state, now=now)
                    wanted = [
                        r.id
                        for r in records
                        if r.state(now) is state and name in (None, r.job_name)
                    ]
                    assert [r.id for r in found] == wanted, (now, state, name)
                    seen += len(found) if name is None else 0
            assert seen == len(records), now  # every record is in exactly one state

    async def test_state_filters_of_shapes_only_other_writers_leave(
        self, store: AsyncJobStore
    ) -> None:
        """A recurrent record with a legacy ``maxTriesReached`` status is not failed; a lock
        claimed again by a Node Dogs worker after its release (``lock_released_at`` left
        behind, earlier than ``locked_until``) is running, then stale."""
        base = JobRecord(
            id="", job_name="a", type=JobType.EVENT, priority=1, next_run_at=T0 - _H, partition=0
        )
        legacy = dataclasses.replace(
            base, id=new_record_id(), type=JobType.RECURRENT, status=JobStatus.MAX_TRIES_REACHED
        )
        reclaimed = dataclasses.replace(
            base,
            id=new_record_id(),
            last_run_at=T0 - _MIN,
            lock_id=new_execution_id(),
            locked_until=T0,
            lock_released_at=T0 - 2 * _MIN,
            tries=2,
        )
        seeded = (legacy, reclaimed)
        for record in seeded:
            await self.seed_record(store, record)
        assert [reclaimed.state(now) for now in (T0 - _S, T0)] == [JobState.RUNNING, JobState.STALE]
        for now in (T0 - _S, T0, T0 + _S):
            for state in JobState:
                found = [r.id for r in await store.find_records(state=state, now=now)]
                wanted = [r.id for r in seeded if r.state(now) is state]
                assert sorted(found) == sorted(wanted), (now, state)
        assert await store.delete_records(job_name=None, state=JobState.FAILED, now=T0) == 0

    async def test_find_records_by_unique_identifier(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job("a", uid="k1")))
        await store.insert_jobs([_job("a", uid="k2"), _job("b")])
        [record] = await store.find_records(unique_identifier="k1")
        assert record == await self.record(store, job_id)
        assert await store.find_records(unique_identifier="k1", job_name="b") == []
        assert await store.find_records(unique_identifier="k1", after=job_id) == []
        assert await store.find_records(unique_identifier="nobody") == []
        assert await store.find_records(unique_identifier="k1", state=JobState.DUE, now=T0) == [
            record
        ]
        assert await store.find_records(unique_identifier="k1", state=JobState.FAILED, now=T0) == []

    async def test_find_records_needs_now_with_a_state(self, store: AsyncJobStore) -> None:
        await store.insert_job(_job())
        with pytest.raises(InvalidOptionError) as refused:
            await store.find_records(state=JobState.DUE)
        assert refused.value.field == "now"

    async def test_find_records_pages_with_a_stable_cursor(self, store: AsyncJobStore) -> None:
        """Paging by ``after`` while records are inserted and deleted: no duplicates, no gaps
        (every record that existed throughout is seen once), ids ascending."""
        first = [_job(partition=i % 3) for i in range(23)]
        assert (await store.insert_jobs(first)).scheduled_count == 23
        deleted = {first[4].id, first[5].id, first[13].id}
        inserted: list[str] = []
        pages: list[list[str]] = []
        changes_done = anyio.Event()

        async def change() -> None:
            for i in range(12):
                inserted.append(_scheduled_id(await store.insert_job(_job(partition=i % 3))))
                if i < len(deleted):
                    assert await store.delete_record(sorted(deleted)[i]) is not None
            changes_done.set()

        async def page() -> None:
            after: str | None = None
            while True:
                done = changes_done.is_set()  # before the read: then it sees every change
                found = [r.id for r in await store.find_records(after=after, limit=4)]
                pages.append(found)
                if not found and done:
                    return
                after = found[-1] if found else after
                await anyio.lowlevel.checkpoint()

        await _both(page, change)
        seen = [job_id for one in pages for job_id in one]
        assert seen == sorted(seen)
        assert len(seen) == len(set(seen))
        assert {job.id for job in first} - deleted <= set(seen)
        assert set(seen) <= {job.id for job in first} | set(inserted)
        assert all(len(one) <= 4 for one in pages)
        # Once the changes are over the last pages see every inserted record.
        assert set(inserted) <= set(seen)

    async def test_find_records_pages_of_one_state(self, store: AsyncJobStore) -> None:
        jobs = [_job(partition=i % 2, at=T0 + (_H if i % 3 == 0 else -_H)) for i in range(20)]
        await store.insert_jobs(jobs)
        due = sorted(job.id for job in jobs if job.next_run_at <= T0)
        pages: list[list[str]] = []
        after: str | None = None
        while True:
            found = await store.find_records(state=JobState.DUE, now=T0, after=after, limit=5)
            if not found:
                break
            pages.append([r.id for r in found])
            after = found[-1].id
        assert [job_id for one in pages for job_id in one] == due
        assert [len(one) for one in pages] == [5, 5, 3]

    async def test_find_records_after_a_deleted_record_goes_on(self, store: AsyncJobStore) -> None:
        jobs = [_job() for _ in range(6)]
        await store.insert_jobs(jobs)
        ids = sorted(job.id for job in jobs)
        assert await store.delete_record(ids[2]) is not None
        assert [r.id for r in await store.find_records(after=ids[2])] == ids[3:]
        assert [r.id for r in await store.find_records(after=ids[1], limit=2)] == ids[3:5]

    # ---------------------------------------------------------------- delete_job

    async def test_delete_record_returns_the_record_as_it_was(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(uid="k", params={"n": 1})))
        before = await self.record(store, job_id)
        assert await store.delete_record(job_id) == before
        assert await store.get_record(job_id) is None
        assert await store.delete_record(job_id) is None
        assert await store.delete_record(new_record_id()) is None
        # The unique key is free again.
        assert isinstance(await store.insert_job(_job(uid="k")), Scheduled)

    async def test_delete_record_of_a_running_record_fences_its_execution_off(
        self, store: AsyncJobStore
    ) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store, owner=_owner())
        deleted = await store.delete_record(job_id)
        assert deleted is not None
        assert (deleted.lock_id, deleted.locked_until, deleted.lock_owner, deleted.tries) == (
            claimed.lock_id,
            claimed.locked_until,
            _owner(),
            1,
        )
        assert deleted.state(T0) is JobState.RUNNING
        lock_id = claimed.lock_id
        assert not await store.extend_lock(job_id, lock_id, T0 + _H)
        assert not await self.complete(store, job_id, lock_id)
        assert not await settle_one(store, job_id, lock_id, rescheduled(T0))
        assert not await settle_one(store, job_id, lock_id, terminal(T0))
        assert not await settle_one(store, job_id, lock_id, released(T0))
        assert await store.get_record(job_id) is None

    async def test_delete_record_unless_running(self, store: AsyncJobStore) -> None:
        ids = await self.one_of_each_state(store)
        running = await self.record(store, ids["running"])
        assert running.locked_until == T0 + 30 * _S
        assert await store.delete_record(ids["running"], unless_running_at=T0) is None
        assert await self.record(store, ids["running"]) == running
        assert (
            await store.delete_record(ids["running"], unless_running_at=T0 + 30 * _S - _MS) is None
        )
        # At its deadline the lock is no longer live.
        assert await store.delete_record(ids["running"], unless_running_at=T0 + 30 * _S) == running
        for key in ("scheduled", "due", "retrying", "released", "stale", "failed", "held"):
            before = await self.record(store, ids[key])
            assert await store.delete_record(ids[key], unless_running_at=T0) == before, key
        assert [r.id for r in await store.find_records()] == [ids["retrying_later"]]

    async def test_delete_record_unless_failed(self, store: AsyncJobStore) -> None:
        ids = await self.one_of_each_state(store)
        failed = await self.record(store, ids["failed"])
        assert await store.delete_record(ids["failed"], unless_failed=True) is None
        assert await self.record(store, ids["failed"]) == failed
        assert await store.delete_record(ids["due"], unless_failed=True) is not None
        assert await store.delete_record(ids["failed"]) == failed

    async def test_delete_record_against_a_claim_in_flight(self, store: AsyncJobStore) -> None:
        """Cancel racing a claim: either the claim wins (the delete returns the record with the
        claim's live lock, and the claimed execution is fenced off) or the delete wins (the
        claim gets nothing)."""
        for partition in range(12):
            job_id = _scheduled_id(await store.insert_job(_job(partition=partition)))
            request = self.request(partition=partition, owner=_owner())
            seen: dict[str, Any] = {}

            async def claim() -> None:
                seen["claimed"] = await store.claim(request)  # noqa: B023

            async def delete() -> None:
                seen["deleted"] = await store.delete_record(job_id)  # noqa: B023

            await (_both(claim, delete) if partition % 2 else _both(delete, claim))
            claimed, deleted = seen["claimed"], seen["deleted"]
            assert deleted is not None
            assert deleted.id == job_id
            assert await store.get_record(job_id) is None
            if claimed is None:
                assert deleted.lock_id is None
                assert not deleted.tries
                continue
            assert claimed.job_id == job_id
            assert (deleted.lock_id, deleted.locked_until, deleted.lock_owner) == (
                request.lock_id,
                request.locked_until,
                _owner(),
            )
            assert not await store.extend_lock(job_id, claimed.lock_id, T0 + _H)
            assert not await self.complete(store, job_id, claimed.lock_id)

    async def test_delete_record_unless_running_against_a_claim_in_flight(
        self, store: AsyncJobStore
    ) -> None:
        """An operator's delete (never of a running job) racing a claim: either the delete
        wins and the claim gets nothing, or the claim wins and the record stays, locked."""
        for partition in range(12):
            job_id = _scheduled_id(await store.insert_job(_job(partition=partition)))
            seen: dict[str, Any] = {}

            async def claim() -> None:
                seen["claimed"] = await store.claim(self.request(partition=partition))  # noqa: B023

            async def delete() -> None:
                seen["deleted"] = await store.delete_record(job_id, unless_running_at=T0)  # noqa: B023

            await (_both(claim, delete) if partition % 2 else _both(delete, claim))
            claimed, deleted = seen["claimed"], seen["deleted"]
            assert (claimed is None) != (deleted is None), seen
            if claimed is not None:
                assert (await self.record(store, job_id)).lock_id == claimed.lock_id
            else:
                assert await store.get_record(job_id) is None

    async def test_delete_record_during_a_renewal(self, store: AsyncJobStore) -> None:
        """Cancel racing a lock renewal: a renewal that lands before the delete is in the
        record the delete returns; one that comes after fails its fence, and so does the
        next."""
        for partition in range(12):
            job_id = _scheduled_id(await store.insert_job(_job(partition=partition)))
            claimed = await self.claim(store, partition=partition)
            seen: dict[str, Any] = {}

            async def renew() -> None:
                seen["renewed"] = await store.extend_lock(job_id, claimed.lock_id, T0 + _H)  # noqa: B023

            async def delete() -> None:
                seen["deleted"] = await store.delete_record(job_id)  # noqa: B023

            await (_both(renew, delete) if partition % 2 else _both(delete, renew))
            deleted = seen["deleted"]
            assert deleted is not None
            assert deleted.lock_id == claimed.lock_id
            assert deleted.locked_until == (T0 + _H if seen["renewed"] else claimed.locked_until)
            assert not await store.extend_lock(job_id, claimed.lock_id, T0 + 2 * _H)
            assert await store.get_record(job_id) is None

    async def test_two_operators_deleting_at_once(self, store: AsyncJobStore) -> None:
        """Exactly one of many concurrent deletes of a record gets it."""
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store)
        results: list[JobRecord | None] = []

        async def delete() -> None:
            results.append(await store.delete_record(job_id))

        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(delete)
        taken = [record for record in results if record is not None]
        assert len(results) == 8
        assert len(taken) == 1
        assert taken[0].lock_id == claimed.lock_id

    # ---------------------------------------------------------------- modify_job

    async def test_modify_record_applies_the_change(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(priority=5, params={"n": 1})))
        before = await self.record(store, job_id)
        change = JobChange(next_run_at=T0 + _H + timedelta(microseconds=1_999), priority=9)
        after = await store.modify_record(job_id, change, now=T0)
        assert after == dataclasses.replace(before, next_run_at=T0 + _H + _MS, priority=9)
        assert await self.record(store, job_id) == after
        assert await store.claim(self.request(now=T0 + _H)) is None
        claimed = await self.claim(store, now=T0 + _H + _MS)
        assert (claimed.job_id, claimed.priority, claimed.tries) == (job_id, 9, 1)
        assert await store.modify_record(new_record_id(), change, now=T0) is None

    async def test_modify_record_sets_tries(self, store: AsyncJobStore) -> None:
        ids = await self.one_of_each_state(store)
        before = await self.record(store, ids["retrying"])
        after = await store.modify_record(ids["retrying"], JobChange(tries=0), now=T0)
        assert after == dataclasses.replace(before, tries=0)
        assert after.state(T0) is JobState.DUE
        # An empty change changes nothing and still reports the record.
        due = await self.record(store, ids["due"])
        assert await store.modify_record(ids["due"], JobChange(), now=T0) == due

    async def test_modify_record_revives_a_failed_record(self, store: AsyncJobStore) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(uid="k")))
        claimed = await self.claim(store)
        assert await settle_one(
            store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 + 7 * _DAY)
        )
        assert await store.claim(self.request(now=T0 + _S)) is None
        change = JobChange(next_run_at=T0 + _S, tries=0, revive=True)
        after = await store.modify_record(job_id, change, now=T0 + _S)
        assert after is not None
        assert (after.status, after.max_tries_reached_at, after.expires_at) == (None, None, None)
        assert (after.tries, after.next_run_at, after.unique_identifier) == (0, T0 + _S, "k")
        assert after.state(T0 + _S) is JobState.DUE
        # Its unique key is still held by it.
        duplicate = await store.insert_job(_job(uid="k"))
        assert isinstance(duplicate, Duplicate)
        assert duplicate.existing_id == job_id
        again = await self.claim(store, now=T0 + _S)
        assert (again.job_id, again.tries) == (job_id, 1)

    async def test_modify_record_of_a_running_record_changes_nothing(
        self, store: AsyncJobStore
    ) -> None:
        job_id = _scheduled_id(await store.insert_job(_job()))
        claimed = await self.claim(store, lock_for=10 * _S)
        before = await self.record(store, job_id)
        change = JobChange(next_run_at=T0 + _H, priority=1)
        for now in (T0, T0 + 10 * _S - _MS):
            assert await store.modify_record(job_id, change, now=now) is None
        assert await self.record(store, job_id) == before
        assert await store.extend_lock(job_id, claimed.lock_id, T0 + _MIN)

    async def test_modify_record_of_a_stale_record_keeps_its_lock(
        self, store: AsyncJobStore
    ) -> None:
        """Past its deadline the record is not running: the change applies, the lock fields
        stay, and the next claim takes it over as stale."""
        job_id = _scheduled_id(await store.insert_job(_job()))
        stale = await self.claim(store, lock_for=10 * _S, owner=_owner("w1"))
        before = await self.record(store, job_id)
        now = T0 + 10 * _S
        after = await store.modify_record(job_id, JobChange(next_run_at=now, priority=3), now=now)
        assert after is not None
        assert after == dataclasses.replace(before, next_run_at=now, priority=3)
        assert (after.lock_id, after.locked_until, after.lock_owner) == (
            stale.lock_id,
            T0 + 10 * _S,
            _owner("w1"),
        )
        assert after.state(now) is JobState.STALE
        claimed = await self.claim(store, now=now)
        assert (claimed.job_id, claimed.was_stale, claimed.priority) == (job_id, True, 3)
        self.check_previous_attempt(
            claimed,
            PreviousAttempt(
                execution_id=stale.lock_id,
                started_at=T0,
                locked_until=T0 + 10 * _S,
                tries=1,
                owner=_owner("w1"),
            ),
        )

    async def test_modify_record_racing_a_claim(self, store: AsyncJobStore) -> None:
        """``retry_now`` of a due record racing a claim: either the change lands first (the
        claim then takes the changed record) or the claim does (the change finds it running
        and writes nothing)."""
        for partition in range(12):
            job_id = _scheduled_id(await store.insert_job(_job(partition=partition, priority=50)))
            seen: dict[str, Any] = {}
            change = JobChange(next_run_at=T0 - _MIN, priority=70)

            async def claim() -> None:
                seen["claimed"] = await store.claim(self.request(partition=partition))  # noqa: B023

            async def modify() -> None:
                seen["modified"] = await store.modify_record(job_id, change, now=T0)  # noqa: B023

            await (_both(claim, modify) if partition % 2 else _both(modify, claim))
            claimed, modified = seen["claimed"], seen["modified"]
            assert claimed is not None
            assert claimed.job_id == job_id
            record = await self.record(store, job_id)
            assert record.lock_id == claimed.lock_id
            if modified is None:  # the claim won: nothing changed
                assert (claimed.priority, record.priority, record.next_run_at) == (
                    50,
                    50,
                    T0 - _S,
                )
            else:  # the change won: the claim took the changed record
                assert (modified.lock_id, modified.priority) == (None, 70)
                assert (claimed.priority, record.priority, record.next_run_at) == (
                    70,
                    70,
                    T0 - _MIN,
                )

    async def test_reschedule_racing_a_claim(self, store: AsyncJobStore) -> None:
        """Moving a due record to later, racing a claim: exactly one of them wins."""
        for partition in range(12):
            job_id = _scheduled_id(await store.insert_job(_job(partition=partition)))
            seen: dict[str, Any] = {}
            change = JobChange(next_run_at=T0 + _H)

            async def claim() -> None:
                seen["claimed"] = await store.claim(self.request(partition=partition))  # noqa: B023

            async def modify() -> None:
                seen["modified"] = await store.modify_record(job_id, change, now=T0)  # noqa: B023

            await (_both(claim, modify) if partition % 2 else _both(modify, claim))
            claimed, modified = seen["claimed"], seen["modified"]
            assert (claimed is None) != (modified is None), seen
            record = await self.record(store, job_id)
            if claimed is not None:
                assert (record.lock_id, record.next_run_at) == (claimed.lock_id, T0 - _S)
            else:
                assert (record.lock_id, record.next_run_at) == (None, T0 + _H)

    # ---------------------------------------------------------------- delete_jobs

    async def test_delete_records_by_state_with_a_dry_run(self, store: AsyncJobStore) -> None:
        await self.one_of_each_state(store, "a")
        await self.one_of_each_state(store, "b", base=10)
        remaining = {r.id: r for r in await store.find_records()}
        # a sleeping record needs the optional steps role: StepsContract covers that state
        for state in (s for s in JobState if s not in (JobState.RUNNING, JobState.SLEEPING)):
            of_a = [r.id for r in remaining.values() if r.state(T0) is state and r.job_name == "a"]
            of_all = [r.id for r in remaining.values() if r.state(T0) is state]
            assert of_a, state
            assert await store.delete_records(
                job_name="a", state=state, now=T0, dry_run=True
            ) == len(of_a)
            assert await store.delete_records(
                job_name=None, state=state, now=T0, dry_run=True
            ) == len(of_all)
            assert {r.id for r in await store.find_records()} == set(remaining)  # nothing deleted
            assert await store.delete_records(job_name="a", state=state, now=T0) == len(of_a)
            for job_id in of_a:
                del remaining[job_id]
            assert {r.id for r in await store.find_records()} == set(remaining)
            assert await store.delete_records(job_name="nobody", state=state, now=T0) == 0
        assert {r.job_name for r in remaining.values() if r.state(T0) is not JobState.RUNNING} == {
            "b"
        }
        assert await store.delete_records(job_name=None, state=JobState.RETRYING, now=T0) == 3
        assert len(await store.find_records()) == len(remaining) - 3

    async def test_delete_records_never_deletes_a_running_record(
        self, store: AsyncJobStore
    ) -> None:
        ids = await self.one_of_each_state(store)
        before = await store.find_records()
        with pytest.raises(InvalidOptionError) as refused:
            await store.delete_records(job_name=None, state=JobState.RUNNING, now=T0)
        assert refused.value.field == "state"
        assert await store.find_records() == before
        assert await store.delete_records(job_name="a", state=JobState.STALE, now=T0) == 1
        assert await store.get_record(ids["running"]) is not None
        # At T0 + 2 h the running record's lock has expired: it is stale, and deleted as such.
        assert await store.delete_records(job_name="a", state=JobState.STALE, now=T0 + 2 * _H) == 1
        assert await store.get_record(ids["running"]) is None

    async def test_delete_records_of_failed_records_frees_their_keys(
        self, store: AsyncJobStore
    ) -> None:
        job_id = _scheduled_id(await store.insert_job(_job(uid="k")))
        claimed = await self.claim(store)
        assert await settle_one(store, job_id, claimed.lock_id, terminal(T0))
        assert not isinstance(await store.insert_job(_job(uid="k", partition=1)), Scheduled)
        assert await store.delete_records(job_name="a", state=JobState.FAILED, now=T0) == 1
        assert isinstance(await store.insert_job(_job(uid="k", partition=1)), Scheduled)

    # ---------------------------------------------------------------- get_executions(status=)

    async def test_find_records_in_id_order(self, store: AsyncJobStore) -> None:
        jobs = [
            _job("a", priority=10, at=T0, partition=0),
            _job("b", priority=50, at=T0 + _H, partition=1),
            _job("a", priority=50, at=T0 - _H, partition=2),
            _job("b", priority=0, at=T0 - _DAY, partition=3),
        ]
        for job in reversed(jobs):  # the insertion order does not matter, the ids do
            await store.insert_job(job)
        ids = sorted(job.id for job in jobs)
        assert [r.id for r in await store.find_records()] == ids
        b_ids = sorted(job.id for job in jobs if job.job_name == "b")
        assert [r.id for r in await store.find_records(job_name="b")] == b_ids
        assert [r.id for r in await store.find_records(limit=2)] == ids[:2]
        assert [r.id for r in await store.find_records(after=ids[1])] == ids[2:]
        assert [r.id for r in await store.find_records(after=ids[0], limit=2)] == ids[1:3]
        assert await store.find_records(after=ids[-1]) == []
        assert await store.find_records(job_name="nobody") == []
        for limit in (0, -1):
            with pytest.raises(InvalidOptionError, match=rf"^limit={limit}: must be at least 1$"):
                await store.find_records(limit=limit)

    async def test_find_records_returns_a_hundred_by_default(self, store: AsyncJobStore) -> None:
        jobs = [_job(partition=i % 4) for i in range(105)]
        assert (await store.insert_jobs(jobs)).scheduled_count == 105
        ids = sorted(job.id for job in jobs)
        assert [r.id for r in await store.find_records()] == ids[:100]
        assert [r.id for r in await store.find_records(after=ids[99])] == ids[100:]
        assert len(await store.find_records(limit=105)) == 105
