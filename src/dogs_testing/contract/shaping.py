"""The contract suite, issue 27's parts: the additive record fields every store keeps (tags, a
start deadline, a unique key's window, a debounce cap, a parked record) and the
``find_records(tags=...)`` filter (:class:`ShapedFieldsContract`, part of
:class:`~dogs_testing.contract.JobStoreContract`); and the two optional roles,
:class:`UniquenessContract` (:mod:`dogs_core.ports.uniqueness`) and :class:`SchedulesContract`
(:mod:`dogs_core.ports.schedules`), for a store that lists them in its ``roles``: subclass them
(name starting with ``Test``) with a ``store`` fixture, as for the whole suite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import cast

from dogs_core.domain.records import JobState, JobType, NewJob, Scheduled, to_millis
from dogs_core.domain.runtime_schedules import schedule_spec
from dogs_core.domain.uniqueness import PARKED_AT, HoldState, PendingUpdate, UniqueHold
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncJobStore, AsyncScheduleStore, AsyncUniquenessStore
from dogs_testing.contract.base import _H, _MIN, _S, T0, ContractBase, _at_once, _job

__all__ = ["SchedulesContract", "ShapedFieldsContract", "UniquenessContract"]


class ShapedFieldsContract(ContractBase):
    """The additive fields of a record, written, read and claimed."""

    async def test_the_additive_fields_are_kept_and_claimed(self, store: AsyncJobStore) -> None:
        job = dataclasses.replace(
            _job(uid="k"),
            tags=("tenant:acme", "report"),
            start_before=T0 + _H,
            unique_window=10 * _MIN,
            debounce_until=T0 + 5 * _MIN,
        )
        await store.insert_job(job)
        record = await self.record(store, job.id)
        assert record.tags == ("tenant:acme", "report")
        assert record.start_before == T0 + _H
        assert record.unique_window == 10 * _MIN
        assert record.debounce_until == T0 + 5 * _MIN
        claimed = await self.claim(store)
        assert (claimed.tags, claimed.start_before, claimed.unique_window) == (
            ("tenant:acme", "report"),
            T0 + _H,
            10 * _MIN,
        )
        plain = _job()
        await store.insert_job(plain)
        assert (await self.record(store, plain.id)).tags == ()

    async def test_find_records_by_tags(self, store: AsyncJobStore) -> None:
        tagged = {
            "a": ("tenant:acme",),
            "b": ("tenant:acme", "report"),
            "c": ("report",),
            "d": (),
        }
        ids = {}
        for name, tags in tagged.items():
            job = dataclasses.replace(_job(), tags=tags)
            ids[name] = job.id
            await store.insert_job(job)
        acme = await store.find_records(tags=["tenant:acme"])
        assert {r.id for r in acme} == {ids["a"], ids["b"]}
        both = await store.find_records(tags=["tenant:acme", "report"])
        assert [r.id for r in both] == [ids["b"]]
        due = await store.find_records(tags=["report"], state=JobState.DUE, now=T0)
        assert {r.id for r in due} == {ids["b"], ids["c"]}
        page = await store.find_records(tags=["tenant:acme"], limit=1)
        rest = await store.find_records(tags=["tenant:acme"], after=page[0].id)
        assert [r.id for r in page + rest] == sorted([ids["a"], ids["b"]])

    async def test_a_parked_record_is_never_claimed(self, store: AsyncJobStore) -> None:
        parked = dataclasses.replace(
            _job(uid="k"), next_run_at=PARKED_AT, parked_at=T0, parked_run_at=T0 - _S
        )
        await store.insert_job(parked)
        assert await store.claim(self.request(now=T0 + _H)) is None
        record = await self.record(store, parked.id)
        assert (record.parked_at, record.parked_run_at) == (T0, T0 - _S)


class UniquenessContract(ContractBase):
    """The uniqueness role: holds of keys, and the compare-and-set steps on records."""

    def keys(self, store: AsyncJobStore) -> AsyncUniquenessStore:
        assert isinstance(store, AsyncUniquenessStore)
        return cast(AsyncUniquenessStore, store)

    async def test_a_hold_is_taken_once_per_period(self, store: AsyncJobStore) -> None:
        keys = self.keys(store)
        assert await keys.read_unique_hold("k") is None
        assert await keys.take_unique_hold("k", "j1", until=T0 + _MIN, now=T0) is None
        held = await keys.take_unique_hold("k", "j2", until=T0 + 2 * _MIN, now=T0 + _S)
        assert held is not None
        assert (held.key, held.job_id, held.until) == ("k", "j1", T0 + _MIN)
        # At its end, the next call takes it.
        assert await keys.take_unique_hold("k", "j3", until=T0 + 3 * _MIN, now=T0 + _MIN) is None
        stored = await keys.read_unique_hold("k")
        assert stored is not None
        assert (stored.job_id, stored.until) == ("j3", T0 + 3 * _MIN)

    async def test_racing_takes_of_one_key_give_it_to_one(self, store: AsyncJobStore) -> None:
        keys = self.keys(store)

        def take(n: int) -> Callable[[], Awaitable[UniqueHold | None]]:
            return lambda: keys.take_unique_hold("race", f"j{n}", until=T0 + _MIN, now=T0)

        results = await _at_once([take(n) for n in range(24)])
        winners = [result for result in results if result is None]
        assert len(winners) == 1
        holders = {result.job_id for result in results if result is not None}
        assert len(holders) == 1

    async def test_a_window_extends_and_keeps_the_later_end(self, store: AsyncJobStore) -> None:
        keys = self.keys(store)
        await keys.extend_unique_hold("w", "j1", until=T0 + 10 * _MIN)
        await keys.extend_unique_hold("w", "j1", until=T0 + 5 * _MIN)
        held = await keys.read_unique_hold("w")
        assert held is not None
        assert held.until == T0 + 10 * _MIN
        await keys.extend_unique_hold("w", "j2", until=T0 + 20 * _MIN)
        held = await keys.read_unique_hold("w")
        assert held is not None
        assert (held.job_id, held.until) == ("j2", T0 + 20 * _MIN)

    async def test_the_identifier_is_released_only_in_the_state_asked(
        self, store: AsyncJobStore
    ) -> None:
        keys = self.keys(store)
        job = _job(uid="k")
        await store.insert_job(job)
        assert not await keys.release_unique_identifier(
            job.id, "k", state=HoldState.RUNNING, now=T0
        )
        assert not await keys.release_unique_identifier(
            job.id, "other", state=HoldState.PENDING, now=T0
        )
        await self.claim(store, now=T0)  # running until T0 + 1 min
        assert not await keys.release_unique_identifier(
            job.id, "k", state=HoldState.PENDING, now=T0
        )
        assert await keys.release_unique_identifier(job.id, "k", state=HoldState.RUNNING, now=T0)
        record = await self.record(store, job.id)
        assert record.unique_identifier is None
        assert record.lock_id is not None  # the running execution is untouched
        again = _job(uid="k")
        assert isinstance(await store.insert_job(again), Scheduled)

    async def test_update_pending_applies_to_a_pending_holder_only(
        self, store: AsyncJobStore
    ) -> None:
        keys = self.keys(store)
        job = dataclasses.replace(_job(uid="k", at=T0 + _MIN, params={"n": 1}), tags=("x",))
        await store.insert_job(job)
        update = PendingUpdate({"n": 2, "s": "$literal"}, T0 + 2 * _MIN, 7, ("y", "z"), T0 + _H)
        written = await keys.update_pending(job.id, "k", update, now=T0)
        assert written is not None
        assert (written.params, written.next_run_at) == ({"n": 2, "s": "$literal"}, T0 + 2 * _MIN)
        assert (written.priority, written.tags, written.start_before) == (7, ("y", "z"), T0 + _H)
        # By the key alone (whichever record holds it), as a replace or a debounce tries first.
        again = PendingUpdate({"n": 3}, T0 + 3 * _MIN, 7)
        by_key = await keys.update_pending(None, "k", again, now=T0)
        assert by_key is not None
        assert (by_key.id, by_key.params, by_key.tags) == (job.id, {"n": 3}, ())
        assert await keys.update_pending(None, "nobody", again, now=T0) is None
        await self.claim(store, now=T0 + 3 * _MIN)
        assert await keys.update_pending(job.id, "k", update, now=T0 + 3 * _MIN) is None
        assert await keys.update_pending(None, "k", update, now=T0 + 3 * _MIN) is None

    async def test_a_replace_keeps_a_record_behind_its_running_sibling(
        self, store: AsyncJobStore
    ) -> None:
        keys = self.keys(store)
        job = dataclasses.replace(_job(uid="b", at=T0 + _MIN), behind_until=T0 + _MIN)
        await store.insert_job(job)
        stored = await store.get_record(job.id)
        assert stored is not None
        assert stored.behind_until == T0 + _MIN
        sooner = await keys.update_pending(None, "b", PendingUpdate({"n": 1}, T0, 100), now=T0)
        assert sooner is not None  # asked to run now: still not before the running one's lock
        assert (sooner.next_run_at, sooner.params) == (T0 + _MIN, {"n": 1})
        later = await keys.update_pending(None, "b", PendingUpdate({}, T0 + _H, 100), now=T0)
        assert later is not None
        assert later.next_run_at == T0 + _H

    async def test_a_debounce_moves_the_run_later_up_to_its_cap(self, store: AsyncJobStore) -> None:
        keys = self.keys(store)
        job = dataclasses.replace(_job(uid="d", at=T0 + 30 * _S), debounce_until=T0 + 90 * _S)
        await store.insert_job(job)

        def debounce(n: int) -> PendingUpdate:
            return PendingUpdate({"n": n}, T0, 100, debounce=30 * _S)

        pushed = await keys.update_pending(None, "d", debounce(1), now=T0 + 20 * _S)
        assert pushed is not None
        assert (pushed.next_run_at, pushed.params) == (T0 + 50 * _S, {"n": 1})
        late = await keys.update_pending(None, "d", debounce(2), now=T0 + 10 * _S)
        assert late is not None  # an older call: the params are its, the time stays later
        assert (late.next_run_at, late.params) == (T0 + 50 * _S, {"n": 2})
        capped = await keys.update_pending(None, "d", debounce(3), now=T0 + 80 * _S)
        assert capped is not None
        assert capped.next_run_at == T0 + 90 * _S

    async def test_a_parked_record_is_published_or_dropped_once(self, store: AsyncJobStore) -> None:
        keys = self.keys(store)
        parked = dataclasses.replace(
            _job(uid="k"), next_run_at=PARKED_AT, parked_at=T0, parked_run_at=T0
        )
        await store.insert_job(parked)
        update = PendingUpdate({"n": 2}, T0, 100)
        assert await keys.update_pending(parked.id, "k", update, now=T0) is None
        assert not await keys.release_unique_identifier(
            parked.id, "k", state=HoldState.PENDING, now=T0
        )
        assert not await keys.publish_parked(parked.id, parked_at=T0 + _S, run_at=T0)
        assert await keys.publish_parked(parked.id, parked_at=T0, run_at=T0 - _S)
        assert not await keys.publish_parked(parked.id, parked_at=T0, run_at=T0)
        record = await self.record(store, parked.id)
        assert (record.next_run_at, record.parked_at, record.parked_run_at) == (T0 - _S, None, None)
        other = dataclasses.replace(
            _job(uid="k2"), next_run_at=PARKED_AT, parked_at=T0, parked_run_at=T0
        )
        await store.insert_job(other)
        assert await keys.drop_parked(other.id, parked_at=T0)
        assert await store.get_record(other.id) is None


class SchedulesContract(ContractBase):
    """The schedules role: runtime schedules as recurrent records."""

    def schedules(self, store: AsyncJobStore) -> AsyncScheduleStore:
        assert isinstance(store, AsyncScheduleStore)
        return cast(AsyncScheduleStore, store)

    def schedule_job(self, name: str, *, job: str = "report", at: timedelta = _MIN) -> NewJob:
        spec = schedule_spec(job, every="1h", updated_at=T0)
        return NewJob(
            id=new_record_id(),
            job_name=name,
            params={"tenant": name},
            next_run_at=T0 + at,
            priority=1000,
            partition=0,
            type=JobType.RECURRENT,
            schedule=spec,
        )

    async def test_insert_get_and_names_are_unique(self, store: AsyncJobStore) -> None:
        schedules = self.schedules(store)
        job = self.schedule_job("nightly-acme")
        assert await schedules.insert_schedule(job)
        assert not await schedules.insert_schedule(self.schedule_job("nightly-acme"))
        record = await schedules.get_schedule_record("nightly-acme")
        assert record is not None
        assert (record.id, record.type, record.params) == (job.id, JobType.RECURRENT, job.params)
        assert record.schedule == job.schedule
        await store.ensure_recurrent("from-code", priority=1000, partition=0, now=T0)
        assert not await schedules.insert_schedule(self.schedule_job("from-code"))
        code = await schedules.get_schedule_record("from-code")
        assert code is not None
        assert code.schedule is None
        assert await schedules.get_schedule_record("nothing") is None

    async def test_find_pages_by_name(self, store: AsyncJobStore) -> None:
        schedules = self.schedules(store)
        for name in ("c", "a", "b"):
            await schedules.insert_schedule(self.schedule_job(name))
        await store.insert_job(_job("an-event"))
        first = await schedules.find_schedule_records(limit=2)
        assert [r.job_name for r in first] == ["a", "b"]
        rest = await schedules.find_schedule_records(after="b")
        assert [r.job_name for r in rest] == ["c"]

    async def test_update_is_a_compare_and_set(self, store: AsyncJobStore) -> None:
        schedules = self.schedules(store)
        job = self.schedule_job("s")
        await schedules.insert_schedule(job)
        assert job.schedule is not None
        paused = dataclasses.replace(job.schedule, paused=True, updated_at=T0 + _S)
        written = await schedules.update_schedule(
            job.id, expected=T0, spec=paused, params={"n": 2}, priority=5, next_run_at=PARKED_AT
        )
        assert written is not None
        assert written.schedule is not None
        assert (written.schedule.paused, written.params, written.priority) == (True, {"n": 2}, 5)
        assert written.next_run_at == to_millis(PARKED_AT)
        stale = await schedules.update_schedule(
            job.id, expected=T0, spec=paused, params=None, priority=5, next_run_at=None
        )
        assert stale is None
        kept = await schedules.update_schedule(
            job.id, expected=T0 + _S, spec=paused, params=None, priority=5, next_run_at=None
        )
        assert kept is not None
        assert kept.next_run_at == to_millis(PARKED_AT)

    async def test_delete_takes_runtime_schedules_only(self, store: AsyncJobStore) -> None:
        schedules = self.schedules(store)
        job = self.schedule_job("s")
        await schedules.insert_schedule(job)
        await store.ensure_recurrent("from-code", priority=1000, partition=0, now=T0)
        deleted = await schedules.delete_schedule("s")
        assert deleted is not None
        assert deleted.id == job.id
        assert await schedules.delete_schedule("s") is None
        assert await schedules.delete_schedule("from-code") is None
        assert await schedules.get_schedule_record("from-code") is not None

    async def test_due_schedules_of_known_jobs(self, store: AsyncJobStore) -> None:
        schedules = self.schedules(store)
        await schedules.insert_schedule(self.schedule_job("late", at=2 * _MIN))
        await schedules.insert_schedule(self.schedule_job("soon", at=_MIN))
        await schedules.insert_schedule(self.schedule_job("far", at=_H))
        await schedules.insert_schedule(self.schedule_job("other-job", job="cleanup"))
        await store.ensure_recurrent("from-code", priority=1000, partition=0, now=T0)
        due = await schedules.due_schedules(["report"], until=T0 + 5 * _MIN, limit=10)
        assert due == [("soon", T0 + _MIN), ("late", T0 + 2 * _MIN)]
        assert await schedules.due_schedules(["report"], until=T0 + 5 * _MIN, limit=1) == [
            ("soon", T0 + _MIN)
        ]
        assert await schedules.due_schedules([], until=T0 + _H, limit=10) == []

    async def test_a_claimed_schedule_carries_its_spec_and_params(
        self, store: AsyncJobStore
    ) -> None:
        schedules = self.schedules(store)
        job = self.schedule_job("nightly-acme", at=-_S)
        await schedules.insert_schedule(job)
        claimed = await self.claim(store, "nightly-acme")
        assert (claimed.type, claimed.params, claimed.schedule) == (
            JobType.RECURRENT,
            {"tenant": "nightly-acme"},
            job.schedule,
        )
