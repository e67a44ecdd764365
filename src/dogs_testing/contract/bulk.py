"""The contract suite, the bulk role (optional): chunked reads of a selection in id order
(name, state, the newest execution's error type, time ranges) and writes fenced on each record
being unchanged since its snapshot (:class:`~dogs_core.ports.AsyncBulkStore`).

Not part of :class:`~dogs_testing.contract.JobStoreContract` (a store need not have it):
subclass :class:`BulkContract` (name starting with ``Test``) and provide ``store``, an
:class:`~dogs_core.ports.AsyncJobStore` that also has the bulk role.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from dogs_core.domain.bulk import BulkSelection, RecordKind, TimeField, bulk_selection
from dogs_core.domain.records import HistoryStatus, JobState, JobType
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.domain.steering import JobChange, retry_now_change
from dogs_core.ids import new_execution_id
from dogs_core.ports import AsyncArchiveStore, AsyncBulkStore, AsyncJobStore, AsyncScheduleStore
from dogs_testing.contract.base import _DAY, _H, _MIN, _S, T0, ContractBase, _history, _job
from dogs_testing.settling import settle_one, terminal

ERROR = HistoryStatus.ERROR

__all__ = ["BulkContract"]


def _bulk(store: AsyncJobStore) -> AsyncBulkStore:
    return cast(AsyncBulkStore, store)


class BulkContract(ContractBase):
    """The bulk role's contract."""

    async def _failed(self, store: AsyncJobStore, name: str, error_type: str | None) -> str:
        """A record of ``name`` at its attempt limit, its newest row failing with
        ``error_type``."""
        scheduled = await store.insert_job(_job(name, at=T0 - _S))
        job_id = cast(Any, scheduled).id
        claimed = await self.claim(store, name, now=T0)
        assert await settle_one(store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 + _DAY))
        row = dataclasses.replace(
            _history(claimed.lock_id, name=name, status=HistoryStatus.ERROR),
            job_id=job_id,
            error_type=error_type,
            error_message="boom",
        )
        await store.write_history_many([row])
        return str(job_id)

    async def _scheduled(self, store: AsyncJobStore, name: str, at: Any = None) -> str:
        scheduled = await store.insert_job(_job(name, at=T0 + _H if at is None else at))
        return str(cast(Any, scheduled).id)

    async def test_chunks_walk_the_selection_in_id_order(self, store: AsyncJobStore) -> None:
        failed = [await self._failed(store, "a", "builtins.ValueError") for _ in range(5)]
        await self._scheduled(store, "a")
        await self._failed(store, "b", "builtins.ValueError")
        selection = bulk_selection(job_name="a", state=JobState.FAILED)
        seen: list[str] = []
        after: str | None = None
        chunks = 0
        while True:
            chunk = await _bulk(store).select_for_bulk(selection, now=T0, after=after, limit=2)
            chunks += 1
            seen += [record.id for record in chunk.records]
            assert chunk.examined == len(chunk.records) <= 2
            if chunk.last_id is None:
                break
            assert chunk.last_id == chunk.records[-1].id
            after = chunk.last_id
        assert seen == sorted(failed)
        assert chunks == 3
        assert await _bulk(store).count_for_bulk(selection, now=T0) == 5
        everything = await _bulk(store).count_for_bulk(BulkSelection(), now=T0)
        assert everything == 7

    async def test_tags_select_the_records_carrying_all_of_them(self, store: AsyncJobStore) -> None:
        async def tagged(*tags: str) -> str:
            job = dataclasses.replace(_job("a", at=T0 + _H), tags=tags)
            return str(cast(Any, await store.insert_job(job)).id)

        acme = await tagged("tenant:acme", "report")
        await tagged("tenant:other")
        await self._scheduled(store, "a")
        one = bulk_selection(tags="tenant:acme")
        chunk = await _bulk(store).select_for_bulk(one, now=T0, after=None, limit=10)
        assert [record.id for record in chunk.records] == [acme]
        both = bulk_selection(tags=["tenant:acme", "report"], state="scheduled")
        assert await _bulk(store).count_for_bulk(both, now=T0) == 1
        none = bulk_selection(tags=["tenant:acme", "tenant:other"])
        assert await _bulk(store).count_for_bulk(none, now=T0) == 0
        assert BulkSelection.from_document(both.to_document()) == both

    async def test_error_type_of_the_newest_execution(self, store: AsyncJobStore) -> None:
        refused = await self._failed(store, "a", "ConnectionRefusedError")  # a built-in
        value = await self._failed(store, "a", "ValueError")
        bare = await self._failed(store, "a", None)  # a Node Dogs row has no error type
        # A later row of the second job, with another error, is the one that counts.
        newer = dataclasses.replace(
            _history(new_execution_id(), name="a", started_at=T0 + _MIN, status=ERROR),
            job_id=value,
            error_type="myapp.errors.ConnectionRefusedError",
        )
        await store.write_history_many([newer])
        selection = bulk_selection(state="failed", error_type="ConnectionRefusedError")
        chunk = await _bulk(store).select_for_bulk(selection, now=T0, after=None, limit=10)
        assert sorted(record.id for record in chunk.records) == sorted([refused, value])
        assert chunk.examined == 3
        assert chunk.last_id is None
        assert await _bulk(store).count_for_bulk(selection, now=T0) == 2
        for wanted, expected in (
            ("builtins.ConnectionRefusedError", [refused]),
            ("myapp.errors.ConnectionRefusedError", [value]),
            ("errors.ConnectionRefusedError", [value]),
            ("RefusedError", []),
        ):
            found = await _bulk(store).select_for_bulk(
                bulk_selection(error_type=wanted), now=T0, after=None, limit=10
            )
            assert [record.id for record in found.records] == expected, wanted
            assert bare not in [record.id for record in found.records]

    async def test_time_ranges(self, store: AsyncJobStore) -> None:
        early = await self._scheduled(store, "a", at=T0 + _H)
        late = await self._scheduled(store, "a", at=T0 + 3 * _H)
        by_next_run = bulk_selection(
            time_field=TimeField.NEXT_RUN, since=T0 + 2 * _H, until=T0 + 4 * _H
        )
        chunk = await _bulk(store).select_for_bulk(by_next_run, now=T0, after=None, limit=10)
        assert [record.id for record in chunk.records] == [late]
        # Created: read from the ids (UUIDv7), so a range around now holds both, one in the
        # far past neither.
        now_ids = bulk_selection(since=T0.replace(year=2000))
        both = await _bulk(store).select_for_bulk(now_ids, now=T0, after=None, limit=10)
        assert sorted(record.id for record in both.records) == sorted([early, late])
        none = bulk_selection(until=T0.replace(year=2000))
        assert await _bulk(store).count_for_bulk(none, now=T0) == 0

    async def test_modify_unchanged_applies_only_to_unchanged_records(
        self, store: AsyncJobStore
    ) -> None:
        failed = [await self._failed(store, "a", "builtins.ValueError") for _ in range(3)]
        chunk = await _bulk(store).select_for_bulk(
            bulk_selection(state="failed"), now=T0, after=None, limit=10
        )
        snapshots = {record.id: record for record in chunk.records}
        # One is retried by someone else (then claimed) after the snapshot: fenced off.
        other = failed[0]
        revived = retry_now_change(snapshots[other], T0)
        assert await store.modify_record(other, revived, now=T0) is not None
        claimed = await self.claim(store, "a", now=T0 + _S)
        assert claimed.job_id == other
        now = T0 + 2 * _S
        changes = [(snap, retry_now_change(snap, now)) for snap in snapshots.values()]
        assert await _bulk(store).modify_unchanged(changes, now=now) == 2
        for job_id in failed[1:]:
            record = await self.record(store, job_id)
            assert record.status is None
            assert record.tries == 0
            assert record.next_run_at == now
            assert record.state(now) is JobState.DUE
        assert (await self.record(store, other)).lock_id == claimed.lock_id
        # Again with the same (now stale) snapshots: nothing matches.
        assert await _bulk(store).modify_unchanged(changes, now=now) == 0

    async def test_modify_unchanged_never_touches_a_running_record(
        self, store: AsyncJobStore
    ) -> None:
        await self._scheduled(store, "a", at=T0 - _S)
        claimed = await self.claim(store, "a", lock_for=_MIN)
        snapshot = await self.record(store, claimed.job_id)
        change = JobChange(next_run_at=T0 + _H, priority=5)
        assert await _bulk(store).modify_unchanged([(snapshot, change)], now=T0) == 0
        assert await self.record(store, claimed.job_id) == snapshot
        # Past its deadline (stale, not running) the same snapshot is unchanged: it applies.
        after = T0 + 2 * _MIN
        assert await _bulk(store).modify_unchanged([(snapshot, change)], now=after) == 1
        assert (await self.record(store, claimed.job_id)).priority == 5

    async def test_delete_unchanged_reports_what_it_deleted(self, store: AsyncJobStore) -> None:
        ids = [await self._scheduled(store, "a") for _ in range(4)]
        await self._scheduled(store, "b", at=T0 - _S)
        running = await self.claim(store, "b", lock_for=_MIN)
        selection = bulk_selection()
        chunk = await _bulk(store).select_for_bulk(selection, now=T0, after=None, limit=10)
        snapshots = list(chunk.records)
        assert len(snapshots) == 5
        # One changes after the snapshot: it stays.
        moved = JobChange(next_run_at=T0 + 2 * _H)
        assert await store.modify_record(ids[0], moved, now=T0) is not None
        deleted = await _bulk(store).delete_unchanged(snapshots, unless_running_at=T0)
        assert sorted(record.id for record in deleted) == sorted(ids[1:])
        assert await store.get_record(ids[0]) is not None
        assert await store.get_record(running.job_id) is not None  # running, unless_running_at
        # A cancel (no unless_running_at) takes the running one, fencing its execution off.
        again = [record for record in snapshots if record.id == running.job_id]
        cancelled = await _bulk(store).delete_unchanged(again, unless_running_at=None)
        assert [record.id for record in cancelled] == [running.job_id]
        assert not await self.complete(store, running.job_id, running.lock_id)

    async def test_delete_unchanged_leaves_out_what_a_worker_finished(
        self, store: AsyncJobStore
    ) -> None:
        await self._scheduled(store, "a", at=T0 - _S)
        kept = await self._scheduled(store, "a", at=T0 + _H)
        claimed = await self.claim(store, "a", lock_for=_MIN)
        snapshots = (await _bulk(store).select_for_bulk(
            bulk_selection(), now=T0, after=None, limit=10
        )).records  # fmt: skip
        # The running job finishes (its row, then its record deleted) before the cancel.
        row = dataclasses.replace(_history(claimed.lock_id, name="a"), job_id=claimed.job_id)
        await store.write_history_many([row])
        assert await self.complete(store, claimed.job_id, claimed.lock_id)
        deleted = await _bulk(store).delete_unchanged(list(snapshots), unless_running_at=None)
        assert [record.id for record in deleted] == [kept]

    async def _kinds(self, store: AsyncJobStore) -> tuple[str, str, str]:
        """A plain job of ``a``, runtime schedule ``nightly`` (running ``a``) and a step of a
        workflow running ``a``: their ids."""
        plain = await self._scheduled(store, "a")
        spec = ScheduleSpec(job="a", every=_H)
        schedule = dataclasses.replace(
            _job("nightly", at=T0 + _H), type=JobType.RECURRENT, schedule=spec
        )
        assert await cast(AsyncScheduleStore, store).insert_schedule(schedule)
        step = dataclasses.replace(
            _job("a", at=T0 + _H), workflow={"id": "wf-1", "step": "b", "generation": 0}
        )
        step_id = str(cast(Any, await store.insert_job(step)).id)
        return plain, schedule.id, step_id

    async def test_schedules_and_steps_are_taken_only_when_asked(
        self, store: AsyncJobStore
    ) -> None:
        plain, schedule, step = await self._kinds(store)

        async def ids(selection: BulkSelection) -> list[str]:
            chunk = await _bulk(store).select_for_bulk(selection, now=T0, after=None, limit=10)
            assert await _bulk(store).count_for_bulk(selection, now=T0) == len(chunk.records)
            return sorted(record.id for record in chunk.records)

        assert await ids(bulk_selection(all=True)) == [plain]
        assert await ids(bulk_selection(job_name="a")) == [plain]  # a step is not named by it
        assert await ids(bulk_selection(job_name="nightly")) == [schedule]  # named: asked for
        with_schedules = bulk_selection(all=True, include_schedules=True)
        assert await ids(with_schedules) == sorted([plain, schedule])
        assert await ids(bulk_selection(all=True, include_steps=True)) == sorted([plain, step])
        everything = bulk_selection(all=True, include_schedules=True, include_steps=True)
        assert await ids(everything) == sorted([plain, schedule, step])
        for kind, wanted in (
            (RecordKind.JOB, plain),
            (RecordKind.SCHEDULE, schedule),
            (RecordKind.STEP, step),
        ):
            assert await ids(bulk_selection(all=True).of_kind(kind)) == [wanted]
        assert await ids(bulk_selection(job_name="a", kinds=["step"])) == [step]
        assert await ids(bulk_selection(state="scheduled", kinds=["job", "schedule"])) == sorted(
            [plain, schedule]
        )

    async def test_a_delete_with_archived_at_keeps_what_it_removed(
        self, store: AsyncJobStore
    ) -> None:
        kept, dropped = await self._scheduled(store, "a"), await self._scheduled(store, "b")
        changed = await self._scheduled(store, "a")
        chunk = await _bulk(store).select_for_bulk(
            bulk_selection(all=True), now=T0, after=None, limit=10
        )
        snapshots = {record.id: record for record in chunk.records}
        assert await store.modify_record(changed, JobChange(next_run_at=T0 + _DAY), now=T0)
        deleted = await _bulk(store).delete_unchanged(
            [snapshots[kept], snapshots[changed]], unless_running_at=T0, archived_at=T0
        )
        assert [record.id for record in deleted] == [kept]
        purged = await _bulk(store).delete_unchanged([snapshots[dropped]], unless_running_at=T0)
        assert [record.id for record in purged] == [dropped]
        archive = cast(AsyncArchiveStore, store)
        assert await archive.archived_at(kept) == T0  # settled, recoverable
        assert await archive.archived_at(changed) is None  # left live: no copy
        assert await store.get_record(changed) is not None
        assert await archive.archived_at(dropped) is None  # purged
