"""The contract suite, the archive role (optional): the archive port
(:class:`~dogs_core.ports.AsyncArchiveStore`): old history rows and failed records moved in
batches, exactly once, also when a batch was interrupted between its copy and its deletes.

Not part of :class:`~dogs_testing.contract.JobStoreContract` (a store need not archive).
Subclass :class:`ArchiveContract` (name starting with ``Test``) and provide two fixtures:
``store``, the :class:`~dogs_core.ports.AsyncJobStore` the rows are written through, and
``archive``, its archive as an :class:`ArchiveUnderTest` (the port plus ``copy_batch``, the copy
step alone, and ``archived_keys``). A sync store's archive goes through :class:`ThreadedArchive`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread
import pytest

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import JobRecord, JobStatus
from dogs_core.domain.steering import retry_now_change
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncArchiveStore, AsyncJobStore
from dogs_testing.contract.base import _DAY, _S, T0, ContractBase, _history, _job
from dogs_testing.settling import settle_one, terminal

__all__ = ["ArchiveContract", "ArchiveUnderTest", "ThreadedArchive"]

CUTOFF = T0 - 30 * _DAY
"""The cutoff of the suite's runs: rows older than 30 days before :data:`T0`."""

H = ArchiveKind.HISTORY
F = ArchiveKind.FAILED_RECORDS


@runtime_checkable
class ArchiveUnderTest(AsyncArchiveStore, Protocol):
    """An archive as the suite drives it."""

    async def copy_batch(
        self, kind: ArchiveKind, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Read one batch and write its (pending) copies, and stop there: a batch interrupted
        before its deletes. The number copied."""

    async def archived_keys(self, kind: ArchiveKind) -> list[str]:
        """The archive's keys, sorted: execution ids (history), record ids (failed records)."""


class ThreadedArchive:
    """The async face of a sync archive: each method call runs in a worker thread."""

    def __init__(self, sync: object) -> None:
        self.sync = sync

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.sync, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await anyio.to_thread.run_sync(partial(method, *args, **kwargs))

        return call


async def _drain(
    archive: ArchiveUnderTest, kind: ArchiveKind, *, batch_size: int = 100
) -> list[int]:
    """Batches of ``kind`` until one moves nothing; what each moved."""
    step = archive.archive_history if kind is H else archive.archive_failed_records
    moves: list[int] = []
    while True:
        moved = await step(cutoff=CUTOFF, batch_size=batch_size, archived_at=T0)
        moves.append(moved)
        if moved == 0 or len(moves) > 1000:
            return moves


class ArchiveContract(ContractBase):
    """``archive_history``, ``archive_failed_records``, ``count_archivable``, ``count_archived``."""

    async def rows(self, store: AsyncJobStore, ages_in_days: Mapping[str, float]) -> None:
        """History rows by execution id, started (and ended 50 ms later) that many days before
        :data:`T0`."""
        await store.write_history_many(
            [
                _history(key, started_at=T0 - timedelta(days=days))
                for key, days in ages_in_days.items()
            ]
        )

    async def failed(self, store: AsyncJobStore, days: float, *, name: str = "f") -> str:
        """A failed event record marked ``days`` days before :data:`T0`; its id."""
        moment = T0 - timedelta(days=days)
        job = _job(name, at=moment - _S)
        await store.insert_job(job)
        claimed = await self.claim(store, name, now=moment)
        assert claimed.job_id == job.id
        assert await settle_one(
            store, job.id, claimed.execution_id, terminal(moment, expires_at=T0 + 400 * _DAY)
        )
        return job.id

    async def live_keys(self, store: AsyncJobStore) -> list[str]:
        rows = await store.read_history("a", limit=1000)
        return sorted(row.execution_id for row in rows)

    # ---------------------------------------------------------------- history

    async def test_archive_moves_only_older_history(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await archive.setup_archive()
        await self.rows(store, {"old1": 40, "old2": 30.01, "young": 29.99, "new": 1})
        assert await archive.count_archivable(H, cutoff=CUTOFF) == 2
        assert await _drain(archive, H) == [2, 0]
        assert await archive.archived_keys(H) == ["old1", "old2"]
        assert await archive.count_archived(H) == 2
        assert await self.live_keys(store) == ["new", "young"]
        assert await archive.count_archivable(H, cutoff=CUTOFF) == 0

    async def test_archive_history_in_batches(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await self.rows(store, {f"r{i}": 40 + i for i in range(7)} | {"keep": 2})
        assert await _drain(archive, H, batch_size=3) == [3, 3, 1, 0]
        assert await archive.archived_keys(H) == [f"r{i}" for i in range(7)]
        assert await self.live_keys(store) == ["keep"]

    async def test_archive_run_again_moves_nothing(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await self.rows(store, {"a": 40, "b": 50})
        await _drain(archive, H)
        assert await _drain(archive, H) == [0]
        assert await archive.archived_keys(H) == ["a", "b"]

    async def test_history_batch_interrupted_after_its_copy_is_finished_by_the_next(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await self.rows(store, {"a": 40, "b": 50, "c": 60, "young": 1})
        assert await archive.copy_batch(H, cutoff=CUTOFF, batch_size=2, archived_at=T0) == 2
        assert await archive.count_archived(H) == 2  # copied, originals still live
        assert len(await self.live_keys(store)) == 4
        assert sum(await _drain(archive, H)) == 3
        assert await archive.archived_keys(H) == ["a", "b", "c"]
        assert await self.live_keys(store) == ["young"]

    async def test_an_interrupted_batch_is_finished_by_a_run_with_another_cutoff(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await self.rows(store, {"a": 40, "b": 50})
        await archive.copy_batch(H, cutoff=CUTOFF, batch_size=10, archived_at=T0)
        earlier = T0 - 100 * _DAY  # this run would select nothing itself
        assert await archive.archive_history(cutoff=earlier, batch_size=10, archived_at=T0) == 2
        assert await archive.archived_keys(H) == ["a", "b"]
        assert await self.live_keys(store) == []

    # ---------------------------------------------------------------- failed records

    async def test_archive_moves_only_older_failed_records(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        old = await self.failed(store, 40)
        young = await self.failed(store, 20)
        pending = _job("p", at=T0 - 60 * _DAY)  # an old record that never failed
        await store.insert_job(pending)
        assert await archive.count_archivable(F, cutoff=CUTOFF) == 1
        assert await _drain(archive, F) == [1, 0]
        assert await archive.archived_keys(F) == [old]
        assert await store.get_record(old) is None
        assert await store.get_record(young) is not None
        assert await store.get_record(pending.id) is not None

    async def test_archive_failed_records_in_batches(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        ids = [await self.failed(store, 40 + i, name=f"f{i % 2}") for i in range(5)]
        assert await _drain(archive, F, batch_size=2) == [2, 2, 1, 0]
        assert await archive.archived_keys(F) == sorted(ids)
        assert [await store.get_record(record_id) for record_id in ids] == [None] * 5

    async def test_failed_batch_interrupted_after_its_copy_is_finished_by_the_next(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        ids = [await self.failed(store, 40 + i) for i in range(3)]
        assert await archive.copy_batch(F, cutoff=CUTOFF, batch_size=10, archived_at=T0) == 3
        assert sum(await _drain(archive, F)) == 3
        assert await archive.archived_keys(F) == sorted(ids)
        assert await archive.count_archived(F) == 3
        assert [await store.get_record(record_id) for record_id in ids] == [None] * 3

    async def test_a_record_revived_between_copy_and_delete_stays_live(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        revived = await self.failed(store, 40)
        other = await self.failed(store, 41)
        assert await archive.copy_batch(F, cutoff=CUTOFF, batch_size=10, archived_at=T0) == 2
        record = await store.get_record(revived)
        assert record is not None
        assert await store.modify_record(revived, retry_now_change(record, T0), now=T0) is not None
        assert sum(await _drain(archive, F)) == 1
        assert await archive.archived_keys(F) == [other]
        live = await store.get_record(revived)
        assert isinstance(live, JobRecord)
        assert live.status is not JobStatus.MAX_TRIES_REACHED

    async def test_a_record_failed_again_between_copy_and_delete_is_archived_once(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        record_id = await self.failed(store, 40)
        await archive.copy_batch(F, cutoff=CUTOFF, batch_size=10, archived_at=T0)
        record = await store.get_record(record_id)
        assert record is not None
        again = T0 - 35 * _DAY
        assert await store.modify_record(record_id, retry_now_change(record, again), now=again)
        claimed = await self.claim(store, "f", now=again)
        assert await settle_one(store, record_id, claimed.execution_id, terminal(again))
        await _drain(archive, F)
        assert await archive.archived_keys(F) == [record_id]
        assert await store.get_record(record_id) is None

    # ---------------------------------------------------------------- input

    @pytest.mark.parametrize("batch_size", [0, -1, 10_001, True, 2.0, "5"])
    async def test_a_bad_batch_size_writes_nothing(
        self, store: AsyncJobStore, archive: ArchiveUnderTest, batch_size: Any
    ) -> None:
        await self.rows(store, {"a": 40})
        await self.failed(store, 40)
        for step in (archive.archive_history, archive.archive_failed_records):
            with pytest.raises(InvalidOptionError) as raised:
                await step(cutoff=CUTOFF, batch_size=batch_size, archived_at=T0)
            assert raised.value.field == "batch_size"
        assert await archive.count_archived(H) == 0
        assert await archive.count_archived(F) == 0
        assert await self.live_keys(store) == ["a"]

    async def test_naive_times_and_unknown_kinds_are_refused(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        await self.rows(store, {"a": 40})
        naive = CUTOFF.replace(tzinfo=None)
        with pytest.raises(InvalidOptionError, match="cutoff"):
            await archive.archive_history(cutoff=naive, batch_size=10, archived_at=T0)
        with pytest.raises(InvalidOptionError, match="archived_at"):
            await archive.archive_history(cutoff=CUTOFF, batch_size=10, archived_at=naive)
        with pytest.raises(InvalidOptionError, match="kind"):
            await archive.count_archivable("rows", cutoff=CUTOFF)  # type: ignore[arg-type]
        assert await archive.count_archived(H) == 0
        assert await self.live_keys(store) == ["a"]

    # ---------------------------------------------------------------- one job (issue 29)

    async def test_archived_at_of_one_job(
        self, store: AsyncJobStore, archive: ArchiveUnderTest
    ) -> None:
        """When a job's failed record and rows went to the archive; nothing while pending."""
        await archive.setup_archive()
        job_id = await self.failed(store, 40)
        row = dataclasses.replace(_history("its-row", started_at=T0 - 40 * _DAY), job_id=job_id)
        await store.write_history_many([row])
        assert await archive.archived_at(job_id) is None
        await archive.copy_batch(F, cutoff=CUTOFF, batch_size=10, archived_at=T0 - _DAY)
        assert await archive.archived_at(job_id) is None  # pending: still live
        assert await _drain(archive, F) == [1, 0]
        # the copy keeps the stamp of the batch that made it
        assert await archive.archived_at(job_id) == T0 - _DAY
        assert await _drain(archive, H) == [1, 0]
        assert await archive.archived_at(job_id) == T0
        assert await archive.archived_at("never-archived") is None
