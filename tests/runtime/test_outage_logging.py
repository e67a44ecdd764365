"""Logging during a store outage: a transient claim failure is one WARNING line (no traceback),
an unexpected one keeps its traceback; retry_transient's deadline bounds a call in total.

Virtual time (trio's MockClock): the store's "outage" is a hook that raises, and a slow attempt
is a virtual sleep, so these tests take no real time and assert no durations of the machine.
"""

from __future__ import annotations

import logging

import anyio
import pytest

from dogs_core import JobContext, Jobs
from dogs_core.errors import StoreUnavailableError, TransientStoreError
from dogs_core.runtime.plumbing._async.retry import retry_transient
from tests.runtime.conftest import Harness, now

pytestmark = pytest.mark.anyio

OUTAGE = "claim: no MongoDB server reachable at mongodb://db:27017/ within 5.0s: db:27017 (refused)"


def _jobs(ran: list[float]) -> Jobs:
    jobs = Jobs()

    @jobs.event(name="job")
    async def job(params: None, ctx: JobContext) -> None:
        ran.append(now())

    return jobs


def _claim_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("claim failed")]


async def test_a_transient_claim_failure_logs_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[float] = []
    h = Harness(_jobs(ran))
    await h.client.schedule("job")
    failures = iter(range(3))

    def down_three_times(request: object) -> None:
        if next(failures, None) is not None:
            raise StoreUnavailableError(OUTAGE)

    h.store.hooks.before_claim = down_three_times
    with caplog.at_level(logging.WARNING, logger="dogs"):
        async with h.workers(workers_count=1, poll_interval=1) as workers:
            await anyio.sleep(10)
            await workers.stop()
    assert len(ran) == 1, "the job ran once the store was back"
    records = _claim_failures(caplog)
    assert len(records) == 3, "one line per failed claim"
    for record in records:
        assert record.levelno == logging.WARNING
        assert record.exc_info is None, "no traceback for a transient error"
        assert "\n" not in record.getMessage()
        assert record.getMessage().endswith(OUTAGE)


async def test_an_unexpected_claim_failure_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(_jobs([]))
    await h.client.schedule("job")
    failures = iter(range(1))

    def bug_once(request: object) -> None:
        if next(failures, None) is not None:
            raise RuntimeError("a bug in the store")

    h.store.hooks.before_claim = bug_once
    with caplog.at_level(logging.WARNING, logger="dogs"):
        async with h.workers(workers_count=1, poll_interval=1) as workers:
            await anyio.sleep(3)
            await workers.stop()
    [record] = _claim_failures(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


async def test_the_deadline_starts_no_attempt_that_would_end_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each attempt waits 5 virtual seconds (a server selection timeout) and fails: with a
    15 s deadline the second attempt ends at about 10 s and a third would end past 15 s."""
    attempts: list[float] = []

    async def unreachable() -> None:
        attempts.append(now())
        await anyio.sleep(5)
        raise StoreUnavailableError("schedule: no MongoDB server reachable")

    started = now()
    with (
        caplog.at_level(logging.WARNING, logger="dogs.retry"),
        pytest.raises(StoreUnavailableError),
    ):
        await retry_transient(unreachable, what="schedule job", deadline=15)
    assert len(attempts) == 2
    assert now() - started <= 15
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert all("\n" not in line for line in lines)
    assert lines[-1].startswith("schedule job gave up after 2 attempt(s) in 10.1s (deadline 15s)")


async def test_without_a_deadline_the_attempts_limit_applies() -> None:
    calls: list[float] = []

    async def failing() -> None:
        calls.append(now())
        await anyio.sleep(5)
        raise TransientStoreError("no primary", write_may_have_applied=False)

    with pytest.raises(TransientStoreError):
        await retry_transient(failing, what="read", attempts=4)
    assert len(calls) == 4


async def test_schedule_gives_up_within_the_clients_operation_timeout() -> None:
    h = Harness(_jobs([]))
    client = h.client
    client.operation_timeout = 3.0
    tries: list[float] = []

    async def down(*args: object, **kwargs: object) -> None:
        tries.append(now())
        await anyio.sleep(1)
        raise StoreUnavailableError("schedule: no MongoDB server reachable")

    h.store.setup = down  # type: ignore[method-assign]
    started = now()
    with pytest.raises(StoreUnavailableError):
        await client.schedule("job")
    assert now() - started <= 3.0
    assert len(tries) == 2, "1 s attempts: a third would end after 3 s"
