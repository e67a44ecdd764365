"""The contract suite, the maintenance role: setup and capabilities, the server's clock, the
partition reconciler, the retention backfill and ``release_all_locks``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools

import pytest

from dogs_core.domain.records import JobRecord, JobStatus, JobType
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_record_id
from dogs_core.ports import AsyncJobStore, StoreCapabilities
from dogs_testing.contract.base import _DAY, _H, _MIN, _S, T0, ContractBase, _job, _scheduled_id
from dogs_testing.settling import settle_one, terminal

__all__ = ["MaintenanceContract"]


class MaintenanceContract(ContractBase):
    """Setup and capabilities, the clock, the partition reconciler, the retention backfill and
    ``release_all_locks``."""

    # ---------------------------------------------------------------- reconciler

    async def test_reconcile_fixes_invalid_partitions_only(self, store: AsyncJobStore) -> None:
        ids = {
            key: _scheduled_id(await store.insert_job(job))
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
        failed = await self.claim(store, partition=9, now=T0)
        assert await settle_one(store, ids["terminal"], failed.lock_id, terminal(T0))
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
        await store.insert_jobs([_job(partition=-1) for _ in range(5)])
        counts = [
            await store.reconcile_partitions(
                job_names=["a"], n_partitions=2, now=T0, limit=2, choose_partition=lambda: 0
            )
            for _ in range(4)
        ]
        assert counts == [2, 2, 1, 0]
        assert {r.partition for r in await self.all_records(store)} == {0}

    async def test_reconcile_refuses_bad_arguments_before_writing(
        self, store: AsyncJobStore
    ) -> None:
        await store.insert_jobs([_job(partition=-1) for _ in range(3)])
        before = await self.all_records(store)
        with pytest.raises(InvalidOptionError, match=r"^n_partitions=0: must be at least 1$"):
            await store.reconcile_partitions(
                job_names=["a"], n_partitions=0, now=T0, limit=10, choose_partition=lambda: 0
            )
        choices = iter([0, 1, 2])
        with pytest.raises(InvalidOptionError, match=r"returned 2, outside \[0, 2\)") as refused:
            await store.reconcile_partitions(
                job_names=["a"],
                n_partitions=2,
                now=T0,
                limit=10,
                choose_partition=lambda: next(choices),
            )
        assert (refused.value.field, refused.value.value) == ("choose_partition", 2)
        assert await self.all_records(store) == before

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
        job_id = _scheduled_id(await store.insert_job(_job()))
        pending = _scheduled_id(await store.insert_job(_job(partition=1)))
        claimed = await self.claim(store)
        assert await settle_one(
            store, job_id, claimed.lock_id, terminal(T0 + _S, expires_at=T0 + _S + 7 * _DAY)
        )
        pending_before = await self.record(store, pending)
        assert await store.backfill_retention(retention=_DAY, now=T0 + _H) == 1
        record = await self.record(store, job_id)
        assert (record.max_tries_reached_at, record.expires_at) == (T0 + _S, T0 + _S + _DAY)
        assert await self.record(store, pending) == pending_before

    async def test_backfill_retention_none_unsets_expiry(self, store: AsyncJobStore) -> None:
        ids = [_scheduled_id(await store.insert_job(_job(partition=p))) for p in range(2)]
        for partition, expires_at in ((0, T0 + _DAY), (1, None)):
            claimed = await self.claim(store, partition=partition)
            assert await settle_one(
                store, claimed.job_id, claimed.lock_id, terminal(T0, expires_at=expires_at)
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

    async def test_release_all_locks_releases_every_lock(self, store: AsyncJobStore) -> None:
        await store.insert_jobs([_job(partition=p) for p in range(3)])
        for partition in range(2):
            await self.claim(store, partition=partition)
        assert await store.release_all_locks() == 2
        for record in await self.all_records(store):
            assert (record.lock_id, record.locked_until, record.claim_was_stale) == (
                None,
                None,
                None,
            )
        assert await store.release_all_locks() == 0
        again = await self.claim(store, partition=0)
        assert (again.was_stale, again.tries) == (False, 2)

    # ---------------------------------------------------------------- views

    # ---------------------------------------------------------------- the store's clock

    async def test_server_time_is_none_or_an_aware_millisecond_clock(
        self, store: AsyncJobStore
    ) -> None:
        """What the runtime measures its clock's offset against (``None``: the store has no
        clock of its own, and the machine's clock is trusted)."""
        first = await store.server_time()
        second = await store.server_time()
        if first is None:
            assert second is None
            return
        assert second is not None
        for moment in (first, second):
            assert moment.utcoffset() == dt.timedelta(0)
            assert moment.microsecond % 1000 == 0
        assert second >= first

    async def test_setup_is_idempotent_and_capabilities_are_stable(
        self, store: AsyncJobStore
    ) -> None:
        await store.setup()
        capabilities = await store.capabilities()
        assert isinstance(capabilities, StoreCapabilities)
        assert capabilities.claim_path
        assert await store.capabilities() == capabilities
