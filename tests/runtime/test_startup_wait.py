"""Workers started while the store does not answer wait for it, for ``startup_timeout``
(issue 40: a ``dogs worker`` started just before a mongod kill exited at once): they retry,
logging a WARNING line per failed attempt, and start normally when the store comes back in
time; past the bound they stop with :class:`StartupTimeoutError`, having claimed nothing.
Virtual time (trio's MockClock): the waits are the runtime's own, in seconds that cost
nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from dogs_core import (
    DogsClient,
    JobContext,
    Jobs,
    LoopClock,
    StartupTimeoutError,
    TransientStoreError,
    Workers,
    WorkerSettings,
)
from dogs_core.errors import InvalidOptionError
from dogs_testing import InMemoryJobStore
from dogs_testing.faults import FaultyJobStore

pytestmark = pytest.mark.anyio

START = datetime(2030, 1, 1, tzinfo=UTC)


def _jobs(ran: list[float]) -> Jobs:
    jobs = Jobs()

    @jobs.event
    async def job(params: dict[str, Any], ctx: JobContext) -> None:
        ran.append(anyio.current_time())

    return jobs


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def test_workers_give_up_after_the_startup_timeout_having_claimed_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = InMemoryJobStore()
    clock = LoopClock(START)
    ran: list[float] = []
    jobs = _jobs(ran)
    await DogsClient(inner, jobs, clock=clock).schedule("job")
    faulty = FaultyJobStore(inner)
    faulty.disconnect()
    began = anyio.current_time()
    caplog.set_level(logging.WARNING, logger="dogs")
    with anyio.fail_after(600), pytest.raises(BaseException) as raised:  # noqa: PT011 - a group
        async with Workers(faulty, jobs, clock=clock, startup_timeout="12s") as workers:
            await workers.serve()
    error = _leaf(raised.value)
    assert isinstance(error, StartupTimeoutError)
    assert error.startup_timeout == 12
    assert isinstance(error.last_error, TransientStoreError)
    assert "within 12s of starting" in str(error)
    assert anyio.current_time() - began >= 12
    assert ran == []
    retries = [
        r for r in caplog.records if "store setup (workers starting: up to 12s)" in r.message
    ]
    assert len(retries) >= 5  # one line per failed attempt, backed off up to 2 s
    assert all(r.levelno == logging.WARNING for r in retries)
    assert any(
        r.levelno == logging.ERROR and "stopped before claiming anything" in r.message
        for r in caplog.records
    )
    assert not any(r.exc_info for r in caplog.records)  # no traceback for an outage


async def test_workers_whose_store_comes_back_in_time_start_normally() -> None:
    inner = InMemoryJobStore()
    clock = LoopClock(START)
    ran: list[float] = []
    jobs = _jobs(ran)
    await DogsClient(inner, jobs, clock=clock).schedule("job")
    faulty = FaultyJobStore(inner)
    faulty.disconnect()
    began = anyio.current_time()

    async def outage_ends() -> None:
        await anyio.sleep(20)
        faulty.reconnect()

    async with anyio.create_task_group() as group:
        group.start_soon(outage_ends)
        async with Workers(faulty, jobs, clock=clock, poll_interval=1) as workers:  # 30 s
            with anyio.fail_after(120):
                while not ran:  # noqa: ASYNC110 - set by the handler
                    await anyio.sleep(0.5)
            assert workers.running
            await workers.stop()
    assert len(ran) == 1
    assert ran[0] - began >= 20


async def test_no_startup_timeout_waits_until_stopped() -> None:
    inner = InMemoryJobStore()
    jobs = _jobs([])
    faulty = FaultyJobStore(inner)
    faulty.disconnect()
    async with Workers(faulty, jobs, clock=LoopClock(START), startup_timeout=None) as workers:
        await anyio.sleep(3600)
        assert workers.running
        await workers.stop()


def test_the_startup_timeout_is_validated_and_defaults_to_server_selection() -> None:
    assert WorkerSettings().startup_timeout == timedelta(seconds=30)
    assert WorkerSettings(startup_timeout=None).startup_timeout is None
    with pytest.raises(InvalidOptionError, match="startup_timeout"):
        WorkerSettings(startup_timeout="0s")
