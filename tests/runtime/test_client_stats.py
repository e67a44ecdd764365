"""``client.stats``: the window before ``until`` (or the clock's now), one job or every job,
validated, for the async, sync and blocking clients over the in-memory store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_testing.fakes import ManualClock
from dogs_testing.memory import InMemoryJobStore

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
_MIN = timedelta(minutes=1)

jobs = Jobs()


@jobs.event()
async def send(params: None, ctx: JobContext) -> None:
    """A job whose definition names its stats."""


def _row(n: int, name: str, at: datetime, status: HistoryStatus) -> HistoryRecord:
    return HistoryRecord(
        execution_id=f"e{n}",
        job_id=f"j{n}",
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=at,
        ended_at=at + timedelta(milliseconds=10 * n),
        status=status,
        expires_at=at + timedelta(days=7),
    )


async def _store() -> InMemoryJobStore:
    store = InMemoryJobStore()
    await store.write_history_many(
        [
            _row(1, "send", NOW - 30 * _MIN, HistoryStatus.SUCCESS),
            _row(2, "send", NOW - 2 * _MIN, HistoryStatus.ERROR),
            _row(3, "other", NOW - 90 * _MIN, HistoryStatus.SUCCESS),
            _row(4, "other", NOW - _MIN, HistoryStatus.STALE),
        ]
    )
    return store


async def test_the_last_hour_of_every_job() -> None:
    client = DogsClient(await _store(), jobs, clock=ManualClock(NOW))
    stats = await client.stats()
    assert [(s.job_name, s.runs) for s in stats] == [("other", 1), ("send", 2)]
    assert stats[0].since == NOW - timedelta(hours=1)
    assert stats[0].until == NOW
    assert len(stats[0].throughput) == 60
    assert stats[1].success_rate == 0.5


async def test_one_job_by_definition_or_name_over_a_window() -> None:
    client = DogsClient(await _store(), jobs, clock=ManualClock(NOW))
    (by_definition,) = await client.stats(send, window="5m")
    assert by_definition.runs == 1
    assert by_definition.errors == 1
    assert by_definition.errors_by_type == {"unknown": 1}
    (by_name,) = await client.stats("other", window=timedelta(hours=2))
    assert by_name.runs == 2
    assert await client.stats("nothing") == []
    (earlier,) = await client.stats("send", window="10m", until=NOW - 20 * _MIN)
    assert earlier.runs == 1
    assert earlier.succeeded == 1


@pytest.mark.parametrize(
    ("job", "window", "until", "field"),
    [
        ("", timedelta(hours=1), None, "job"),
        (3, timedelta(hours=1), None, "job"),
        (None, timedelta(0), None, "window"),
        (None, "-1h", None, "window"),
        (None, timedelta(days=7, seconds=1), None, "window"),
        (None, "bogus", None, "window"),
        (None, timedelta(hours=1), "2030-01-01", "until"),
        (None, timedelta(hours=1), datetime(2030, 1, 1), "since"),
    ],
)
async def test_bad_arguments_name_their_field(
    job: object, window: object, until: object, field: str
) -> None:
    client = DogsClient(InMemoryJobStore(), jobs, clock=ManualClock(NOW))
    with pytest.raises(InvalidOptionError) as caught:
        await client.stats(job, window=window, until=until)  # type: ignore[arg-type]
    assert caught.value.field == field


async def test_seven_days_is_the_longest_window() -> None:
    client = DogsClient(await _store(), jobs, clock=ManualClock(NOW))
    stats = await client.stats(window=timedelta(days=7))
    assert sum(s.runs for s in stats) == 4
    assert len(stats[0].throughput) == 7 * 24 * 60


async def test_the_sync_and_blocking_clients() -> None:
    store = await _store()
    sync = SyncDogsClient(store.sync, jobs, clock=ManualClock(NOW))
    assert [s.runs for s in sync.stats(window="2h")] == [2, 2]
    with BlockingDogsClient(store, jobs, clock=ManualClock(NOW)) as blocking:
        assert [s.job_name for s in blocking.stats("send")] == ["send"]
