"""``client.archive``: batches until nothing is left, the report, a dry run, ``max_batches``,
progress callbacks and logs, refused input and stores without an archive, for the async, sync
and blocking clients over the in-memory store (and its sync face in threads)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import ClaimRequest, HistoryRecord, HistoryStatus, JobType, NewJob
from dogs_core.errors import InvalidOptionError, MissingRoleError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import REQUIRED_ROLES, Role
from dogs_core.runtime import DogsClient, SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.client.calls import ARCHIVE_LOG_EVERY
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_testing.fakes import ManualClock
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore
from dogs_testing.settling import settle_one_sync, terminal

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
_DAY = timedelta(days=1)
H = ArchiveKind.HISTORY
F = ArchiveKind.FAILED_RECORDS


def _row(n: int, age: timedelta) -> HistoryRecord:
    at = NOW - age
    return HistoryRecord(
        execution_id=f"e{n:03}",
        job_id=f"j{n}",
        job_name="send",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=at,
        ended_at=at + timedelta(seconds=1),
        status=HistoryStatus.SUCCESS,
        expires_at=NOW + 400 * _DAY,
    )


def _seed(store: SyncInMemoryJobStore, old: int, young: int = 2, failed: int = 0) -> None:
    rows = [_row(n, 40 * _DAY + n * timedelta(minutes=1)) for n in range(old)]
    rows += [_row(1000 + n, _DAY) for n in range(young)]
    store.write_history_many(rows)
    for _ in range(failed):
        job = NewJob(
            id=new_record_id(),
            job_name="send",
            params=None,
            next_run_at=NOW - 50 * _DAY,
            priority=100,
            partition=0,
        )
        store.insert_job(job)
        claimed = store.claim(
            ClaimRequest(
                job_names=("send",),
                partition=0,
                hint="byJobName",
                now=NOW - 45 * _DAY,
                locked_until=NOW - 44 * _DAY,
                lock_id=new_execution_id(),
            )
        )
        assert claimed is not None
        assert settle_one_sync(
            store, claimed.job_id, claimed.execution_id, terminal(NOW - 45 * _DAY)
        )


async def test_archive_moves_every_old_row_and_failed_record_in_batches() -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=7, failed=3)
    seen: list[tuple[ArchiveKind, int, int]] = []
    client = DogsClient(store, clock=ManualClock(NOW))
    report = await client.archive(
        older_than="30d", batch_size=3, on_batch=lambda *args: seen.append(args)
    )
    assert report.moved == {H: 7, F: 3}
    assert report.total == 10
    assert report.batches == 4 + 2  # 3, 3, 1, 0 then 3, 0
    assert report.cutoff == NOW - 30 * _DAY
    assert report.complete
    assert not report.dry_run
    assert seen == [(H, 3, 3), (H, 3, 6), (H, 1, 7), (H, 0, 7), (F, 3, 3), (F, 0, 3)]
    assert store.sync.count_archived(H) == 7
    assert store.sync.count_archived(F) == 3
    assert len(store.sync.read_history("send", limit=100)) == 2
    assert store.sync.all_records() == []
    assert all(
        copy.archived_at == NOW and not copy.pending for copy in store.sync.archived(H).values()
    )


async def test_a_dry_run_counts_and_moves_nothing() -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=5, failed=1)
    report = await DogsClient(store, clock=ManualClock(NOW)).archive(older_than="30d", dry_run=True)
    assert report.dry_run
    assert report.moved == {H: 5, F: 1}
    assert report.batches == 0
    assert store.sync.count_archived(H) == 0
    assert len(store.sync.read_history("send", limit=100)) == 7


async def test_max_batches_stops_and_a_second_run_goes_on() -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=5)
    client = DogsClient(store, clock=ManualClock(NOW))
    first = await client.archive(older_than="30d", batch_size=2, kinds=["history"], max_batches=2)
    assert first.moved == {H: 4}
    assert first.batches == 2
    assert not first.complete
    second = await client.archive(older_than="30d", batch_size=2, kinds=["history"])
    assert second.moved == {H: 1}
    assert second.complete


async def test_progress_is_logged_every_few_batches(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=ARCHIVE_LOG_EVERY + 1)
    client = DogsClient(store, clock=ManualClock(NOW))
    with caplog.at_level(logging.INFO, logger="dogs.archive"):
        await client.archive(older_than="30d", batch_size=1, kinds=[H])
    messages = [r.getMessage() for r in caplog.records if r.name == "dogs.archive"]
    assert (
        f"dogs: archive of history: {ARCHIVE_LOG_EVERY} moved in {ARCHIVE_LOG_EVERY} batches"
        in messages
    )
    assert any(m.startswith("dogs: archived 11 documents older than") for m in messages)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"older_than": "0s"}, "older_than"),
        ({"older_than": "30d", "batch_size": 0}, "batch_size"),
        ({"older_than": "30d", "kinds": []}, "kinds"),
        ({"older_than": "30d", "max_batches": 0}, "max_batches"),
        ({"older_than": "30d", "on_batch": "print"}, "on_batch"),
    ],
)
async def test_bad_input_writes_nothing(options: dict[str, object], field: str) -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=3)
    with pytest.raises(InvalidOptionError) as raised:
        await DogsClient(store, clock=ManualClock(NOW)).archive(**options)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert store.sync.count_archived(H) == 0


async def test_a_store_without_an_archive_is_named() -> None:
    class NoArchive(ForwardingJobStore):
        """Forwards every call, and says it has the required roles only."""

        def __init__(self, target: InMemoryJobStore) -> None:
            self._target = target

        @property
        def _wrapped(self) -> object:
            return self._target

        @property
        def roles(self) -> frozenset[Role]:
            return REQUIRED_ROLES

        async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
            return await getattr(self._target, method)(*args, **kwargs)

        def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._target, method)(*args, **kwargs)

    store = InMemoryJobStore()
    client = DogsClient(NoArchive(store), clock=ManualClock(NOW))
    with pytest.raises(MissingRoleError, match="archive needs the store's 'archive' role"):
        await client.archive(older_than="30d")


async def test_through_a_telemetry_wrapper_and_a_threaded_sync_store() -> None:
    sync = SyncInMemoryJobStore()
    _seed(sync, old=3)
    telemetry = Telemetry()
    telemetry.subscribe(lambda event: None)
    client = DogsClient(ThreadedJobStore(sync), clock=ManualClock(NOW), telemetry=telemetry)
    report = await client.archive(older_than="30d")
    assert report.moved == {H: 3, F: 0}
    assert sync.count_archived(H) == 3


def test_the_sync_client() -> None:
    sync = SyncInMemoryJobStore()
    _seed(sync, old=4, failed=1)
    report = SyncDogsClient(sync, clock=ManualClock(NOW)).archive(older_than="30d", batch_size=3)
    assert report.moved == {H: 4, F: 1}
    assert sync.count_archived(H) == 4


def test_the_blocking_client_over_an_async_store() -> None:
    store = InMemoryJobStore()
    _seed(store.sync, old=2)
    with BlockingDogsClient(store, clock=ManualClock(NOW)) as client:
        report = client.archive(older_than="30d")
    assert report.moved == {H: 2, F: 0}
