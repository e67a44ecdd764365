"""The sync clients measure their clock against the store's too (the generated twin of the
async client's measurement, and the blocking facade over an async store)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime import SkewedClock, SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_testing.fakes import ManualClock
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore

SKEW = timedelta(seconds=-90)


def _jobs() -> Jobs:
    jobs = Jobs()

    @jobs.event
    def ping(params: None, ctx: object) -> None:
        pass

    return jobs


def test_the_sync_client_schedules_on_the_store_s_clock() -> None:
    server = ManualClock()
    client = SyncDogsClient(
        SyncInMemoryJobStore(clock=server), _jobs(), clock=SkewedClock(server, SKEW)
    )
    outcome = client.schedule("ping", run_in=5)
    record = client.get_job(outcome.id)  # type: ignore[union-attr]
    assert record is not None
    assert record.next_run_at == server.now() + timedelta(seconds=5)
    assert client.clock.offset == -SKEW


def test_the_blocking_client_over_an_async_store_too() -> None:
    server = ManualClock()
    store = InMemoryJobStore(clock=server)
    with BlockingDogsClient(store, _jobs(), clock=SkewedClock(server, SKEW)) as client:
        outcome = client.schedule("ping")
        record = client.get_job(outcome.id)  # type: ignore[union-attr]
        assert record is not None
        assert record.next_run_at == server.now()
        with client.lock("nightly-report", ttl=30) as lease:
            assert lease.expires_at == server.now() + timedelta(seconds=30)


def test_clock_sync_interval_is_checked() -> None:
    with pytest.raises(InvalidOptionError, match="clock_sync_interval"):
        SyncDogsClient(SyncInMemoryJobStore(), _jobs(), clock_sync_interval=-1)
