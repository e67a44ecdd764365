"""The testing kit: ManualClock, FakeJobContext, inline runs, JobsHarness and the pytest plugin.

Async tests run on trio under ``MockClock(autojump_threshold=0)`` (the plugin's
``dogs_virtual_clock``): time jumps whenever every task waits, so minutes pass instantly.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import anyio.lowlevel
import pydantic
import pytest

import dogs_testing
from dogs_core import (
    Discard,
    DogsClient,
    EventJobDefinition,
    ExecutionCancelledError,
    HistoryStatus,
    InvalidOptionError,
    InvalidParamsError,
    JobContext,
    Jobs,
    JobStatus,
    JobTimeoutError,
    JobType,
    Retry,
    RetryPolicy,
    Scheduled,
    WorkersStateError,
    current_job,
    event_job,
)
from dogs_core.domain.records import JobRecord
from dogs_testing import (
    DEFAULT_START,
    FakeJobContext,
    HarnessFactory,
    InMemoryJobStore,
    JobsHarness,
    ManualClock,
    run_job_inline,
    run_job_inline_sync,
)

Params = dict[str, Any] | None
MINUTE = timedelta(minutes=1)


@pytest.fixture
def anyio_backend(dogs_virtual_clock: object) -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": dogs_virtual_clock})


@dataclass
class Welcome:
    user_id: int
    locale: str = "en"


class Resize(pydantic.BaseModel):
    width: int
    height: int = 0


# -- ManualClock ---------------------------------------------------------------------------------


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(datetime(2030, 1, 1, 1, tzinfo=ZoneInfo("Europe/Paris")))
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    assert clock.advance("90s") == datetime(2030, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert clock.advance(timedelta(hours=1)) == datetime(2030, 1, 1, 1, 1, 30, tzinfo=UTC)
    assert clock.advance(30) == datetime(2030, 1, 1, 1, 2, tzinfo=UTC)
    clock.set(datetime(2029, 12, 31, tzinfo=UTC))  # backwards is allowed: clock skew
    assert clock.now() == datetime(2029, 12, 31, tzinfo=UTC)
    assert ManualClock().now() == DEFAULT_START


def test_manual_clock_rejects_bad_input() -> None:
    with pytest.raises(InvalidOptionError, match="start"):
        ManualClock(datetime(2030, 1, 1))
    clock = ManualClock()
    with pytest.raises(InvalidOptionError, match="moment"):
        clock.set(datetime(2030, 1, 1))
    with pytest.raises(Exception, match="duration"):
        clock.advance(-1)
    assert clock.now() == DEFAULT_START


@pytest.mark.anyio
async def test_a_client_on_a_manual_clock_schedules_relative_to_it() -> None:
    jobs = Jobs()

    @jobs.event
    async def ping(params: Params, ctx: JobContext) -> None: ...

    clock = ManualClock()
    store = InMemoryJobStore()
    client = DogsClient(store, jobs, clock=clock)
    clock.advance("1d")
    await client.schedule(ping, run_in="5m")
    (record,) = (await client.find_jobs(ping)).jobs
    assert record.next_run_at == DEFAULT_START + timedelta(days=1, minutes=5)


# -- FakeJobContext ------------------------------------------------------------------------------


def test_fake_context_reports_what_it_was_built_with() -> None:
    ctx = FakeJobContext(params={"n": 1}, tries=3, was_stale=True, job_id="j1")
    assert isinstance(ctx, JobContext)
    assert (ctx.job_name, ctx.job_id, ctx.tries, ctx.was_stale) == ("job", "j1", 3, True)
    assert ctx.params == {"n": 1}
    assert len(ctx.execution_id) == 17
    assert ctx.record.lock_id == ctx.execution_id
    assert ctx.record.type is JobType.EVENT
    assert not ctx.cancelled
    with pytest.raises(AttributeError, match="definition"):
        _ = ctx.definition
    assert getattr(ctx, "definition", None) is None
    ctx.logger.info("a handler can log")


def test_fake_context_takes_name_type_priority_and_lock_time_from_a_definition() -> None:
    jobs = Jobs()

    @jobs.recurrent(run_every="1h", priority=7, lock_time="2m")
    def hourly(ctx: JobContext) -> None: ...

    clock = ManualClock()
    ctx = FakeJobContext(definition=hourly, clock=clock)
    assert ctx.definition is hourly
    assert (ctx.job_name, ctx.record.type, ctx.record.priority) == ("hourly", JobType.RECURRENT, 7)
    assert ctx.locked_until == DEFAULT_START + 2 * MINUTE


def test_fake_context_records_extensions_until_cleared() -> None:
    clock = ManualClock()
    ctx = FakeJobContext(clock=clock)
    assert ctx.locked_until == DEFAULT_START + timedelta(seconds=30)
    clock.advance(20)
    assert ctx.extend_lock_time_blocking("1m") is True
    assert ctx.locked_until == DEFAULT_START + timedelta(seconds=80)
    ctx.clear_stale_timeout()
    assert ctx.stale_timeout_cleared
    assert ctx.extend_lock_time_blocking(60) is False  # refused, as by the real context
    assert [(e.duration, e.granted, e.automatic) for e in ctx.lock_extensions] == [
        (MINUTE, True, False),
        (MINUTE, False, False),
    ]
    assert ctx.lock_extensions[0].at == DEFAULT_START + timedelta(seconds=20)
    assert ctx.granted_extensions == ctx.lock_extensions[:1]


@pytest.mark.anyio
async def test_fake_context_lost_lock_and_cancellation() -> None:
    ctx = FakeJobContext()
    assert await ctx.extend_lock_time(timedelta(minutes=5)) is True
    ctx.raise_if_cancelled()
    ctx.cancel()
    assert ctx.cancelled
    with pytest.raises(ExecutionCancelledError):
        ctx.raise_if_cancelled()
    assert await ctx.extend_lock_time(60) is True  # cancelled is not lost
    ctx.lose_lock()
    assert await ctx.extend_lock_time(60) is False


def test_fake_context_validates_tries() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidOptionError, match="tries"):
            FakeJobContext(tries=bad)  # type: ignore[arg-type]


# -- run_job_inline ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_inline_run_validates_and_loads_params_like_the_workers() -> None:
    received: list[object] = []
    stored: list[object] = []

    async def welcome(params: Welcome, ctx: JobContext) -> str:
        received.append(params)
        stored.append(ctx.params)
        assert current_job() is ctx
        return f"hello {params.user_id}"

    definition = event_job(welcome)
    run = await run_job_inline(definition, {"user_id": 42, "locale": "fr"})
    assert run.ok
    assert not run.cancelled
    assert run.result == "hello 42" == run.unwrap()
    assert received == [Welcome(42, "fr")]
    assert run.params == Welcome(42, "fr")
    assert stored == [{"user_id": 42, "locale": "fr"}], "ctx.params are the params as stored"
    assert run.on_error_decision is None
    assert current_job() is None, "the binding does not leak out of the run"
    # A model instance works as well; invalid params fail as schedule() would fail.
    assert (await run_job_inline(definition, Welcome(7))).result == "hello 7"
    with pytest.raises(InvalidParamsError, match="Welcome"):
        await run_job_inline(definition, {"user": 42})
    assert len(received) == 2


@pytest.mark.anyio
async def test_inline_run_coerces_with_pydantic_and_checks_bson() -> None:
    async def resize(params: Resize, ctx: JobContext) -> int:
        return params.width * 2

    run = await run_job_inline(event_job(resize), {"width": "10"})
    assert run.result == 20
    assert run.context.params == {"width": 10, "height": 0}

    async def untyped(params: Params, ctx: JobContext) -> None: ...

    with pytest.raises(InvalidParamsError, match=r"params\.when"):
        await run_job_inline(event_job(untyped), {"when": datetime(2030, 1, 1)})  # naive


@pytest.mark.anyio
async def test_inline_failure_asks_on_error() -> None:
    def on_error(error: Exception, params: Params, ctx: JobContext) -> Retry | Discard:
        assert isinstance(error, ConnectionError)
        assert params == {"to": "a@b.c"}
        return Discard() if ctx.tries >= 3 else Retry(run_in=timedelta(seconds=10))

    async def send(params: Params, ctx: JobContext) -> None:
        raise ConnectionError("smtp down")

    definition = event_job(send, on_error=on_error)
    first = await run_job_inline(definition, {"to": "a@b.c"})
    assert not first.ok
    assert isinstance(first.error, ConnectionError)
    assert first.on_error_decision == Retry(run_in=timedelta(seconds=10))
    with pytest.raises(ConnectionError):
        first.unwrap()
    last = await run_job_inline(definition, {"to": "a@b.c"}, tries=3)
    assert last.context.tries == 3
    assert last.on_error_decision == Discard()
    # No on_error: no decision (the workers retry with backoff).
    plain = await run_job_inline(event_job(send, name="plain"), {"to": "a@b.c"})
    assert plain.error is not None
    assert plain.on_error_decision is None


@pytest.mark.anyio
async def test_an_async_on_error_that_misbehaves_raises_in_the_test() -> None:
    async def on_error(error: Exception, params: Params, ctx: JobContext) -> object:
        assert current_job() is ctx
        return "later"

    async def fails(params: Params, ctx: JobContext) -> None:
        raise ValueError("boom")

    with pytest.raises(InvalidOptionError, match="on_error must return"):
        await run_job_inline(event_job(fails, on_error=on_error))


@pytest.mark.anyio
async def test_inline_sync_handler_runs_directly_and_can_extend() -> None:
    def crunch(params: Params, ctx: JobContext) -> int:
        assert current_job() is ctx
        for _ in range(3):
            assert ctx.extend_lock_time_blocking("1m")
        return 3

    run = await run_job_inline(event_job(crunch))
    assert run.result == 3
    assert [e.duration for e in run.context.lock_extensions] == [MINUTE] * 3
    # After the run, the context refuses extensions (as after a real execution).
    assert await run.context.extend_lock_time(60) is False


@pytest.mark.anyio
async def test_inline_heartbeat_renews_a_ten_minute_job(dogs_virtual_clock: Any) -> None:
    async def import_catalog(params: Params, ctx: JobContext) -> str:
        await anyio.sleep(600)
        return "imported"

    definition = event_job(import_catalog, heartbeat=True, lock_time="1m")
    started, real = anyio.current_time(), time.monotonic()
    run = await run_job_inline(definition)
    assert run.result == "imported"
    assert anyio.current_time() - started == pytest.approx(600)
    assert time.monotonic() - real < 5
    beats = run.context.lock_extensions
    assert 29 <= len(beats) <= 30  # every 20 s (a third of the lock time)
    assert all(b.automatic and b.granted and b.duration == MINUTE for b in beats)
    gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(beats)]
    assert gaps == pytest.approx([20] * len(gaps))


@pytest.mark.anyio
async def test_inline_manual_extension_in_a_long_job() -> None:
    async def migrate(params: Params, ctx: JobContext) -> None:
        for _ in range(10):
            await anyio.sleep(50)
            assert await ctx.extend_lock_time("1m")

    run = await run_job_inline(event_job(migrate, lock_time="1m"))
    assert run.ok
    assert len(run.context.granted_extensions) == 10
    assert not any(e.automatic for e in run.context.lock_extensions)


@pytest.mark.anyio
async def test_inline_timeout_fails_the_attempt() -> None:
    decisions: list[type[BaseException]] = []

    def on_error(error: Exception, params: Params, ctx: JobContext) -> None:
        decisions.append(type(error))

    async def slow(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(3600)

    run = await run_job_inline(event_job(slow, timeout="30s", on_error=on_error))
    assert isinstance(run.error, JobTimeoutError)
    assert run.on_error_decision == Retry()
    assert decisions == [JobTimeoutError]


@pytest.mark.anyio
async def test_inline_cancelled_context_stops_a_cooperative_handler() -> None:
    called: list[str] = []

    def batch(params: Params, ctx: JobContext) -> None:
        ctx.raise_if_cancelled()
        called.append("ran")

    def on_error(error: Exception, params: Params, ctx: JobContext) -> None:
        called.append("on_error")

    ctx = FakeJobContext(job_name="batch")
    ctx.cancel()
    run = await run_job_inline(event_job(batch, on_error=on_error), context=ctx)
    assert run.cancelled
    assert run.context is ctx
    assert called == []
    assert run.on_error_decision is None


@pytest.mark.anyio
async def test_inline_recurrent_job_takes_no_params() -> None:
    async def nightly(ctx: JobContext) -> str:
        assert ctx.params is None
        return ctx.job_name

    definition = Jobs().recurrent(cron="0 3 * * *", timezone="Europe/Paris")(nightly)
    assert (await run_job_inline(definition)).result == "nightly"
    with pytest.raises(InvalidParamsError, match="takes no params"):
        await run_job_inline(definition, {"n": 1})


def test_run_job_inline_sync_without_an_event_loop() -> None:
    def on_error(error: Exception, params: Params, ctx: JobContext) -> Retry:
        return Retry(run_in=timedelta(minutes=ctx.tries))

    def resize(params: Params, ctx: JobContext) -> None:
        assert current_job() is ctx
        ctx.extend_lock_time_blocking(120)
        raise OSError("disk full")

    run = run_job_inline_sync(event_job(resize, on_error=on_error), {"id": 1}, tries=2)
    assert isinstance(run.error, OSError)
    assert run.on_error_decision == Retry(run_in=2 * MINUTE)
    assert run.context.lock_extensions[0].duration == 2 * MINUTE
    assert current_job() is None


def test_run_job_inline_sync_runs_an_async_handler_in_a_loop() -> None:
    async def send(params: Welcome, ctx: JobContext) -> int:
        await anyio.lowlevel.checkpoint()
        return params.user_id

    assert run_job_inline_sync(event_job(send), {"user_id": 5}).result == 5
    assert run_job_inline_sync(event_job(send), {"user_id": 6}, backend="trio").result == 6


# -- JobsHarness ---------------------------------------------------------------------------------


def make_jobs() -> tuple[Jobs, EventJobDefinition, list[tuple[str, float]]]:
    """A registry with one job that logs (what, virtual time) when it runs."""
    jobs = Jobs()
    log: list[tuple[str, float]] = []

    @jobs.event
    async def send_welcome(params: Welcome, ctx: JobContext) -> str:
        log.append((f"welcome {params.user_id}", anyio.current_time()))
        return "sent"

    return jobs, send_welcome, log


@pytest.mark.anyio
async def test_schedule_run_until_idle_and_assert_ran() -> None:
    jobs, send_welcome, log = make_jobs()
    async with JobsHarness(jobs) as harness:
        start = anyio.current_time()
        assert harness.now() == DEFAULT_START
        outcome = await harness.schedule(send_welcome, {"user_id": 1})
        await harness.schedule("send_welcome", Welcome(2))
        assert isinstance(outcome, Scheduled)
        await harness.run_until_idle()
        assert sorted(entry for entry, _ in log) == ["welcome 1", "welcome 2"]
        assert anyio.current_time() - start < 1, "due jobs start at once (the workers are woken)"
        rows = harness.assert_ran(send_welcome, times=2, status="success")
        assert [row.result for row in rows] == ["sent", "sent"]
        assert harness.assert_ran("send_welcome") == rows
        assert harness.scheduled() == []
        assert harness.history(send_welcome) == rows


@pytest.mark.anyio
async def test_assert_scheduled_matches_params_as_stored() -> None:
    jobs, send_welcome, log = make_jobs()
    async with JobsHarness(jobs) as harness:
        await harness.schedule(send_welcome, {"user_id": 1}, run_in="1h")
        await harness.schedule(send_welcome, Welcome(2, "fr"), run_in="2h")
        assert len(harness.assert_scheduled(send_welcome)) == 2
        harness.assert_scheduled(send_welcome, count=2)
        (record,) = harness.assert_scheduled(send_welcome, Welcome(1))
        assert record.params == {"user_id": 1, "locale": "en"}
        harness.assert_scheduled("send_welcome", {"user_id": 2, "locale": "fr"}, count=1)
        with pytest.raises(AssertionError, match=r"expected 3 scheduled 'send_welcome'"):
            harness.assert_scheduled(send_welcome, count=3)
        with pytest.raises(AssertionError, match=r"found 0.*user_id"):
            harness.assert_scheduled(send_welcome, {"user_id": 3})
        with pytest.raises(AssertionError, match=r"expected at least one.*its executions: none"):
            harness.assert_ran(send_welcome)
        assert log == []


@pytest.mark.anyio
async def test_a_job_scheduled_later_is_not_due_until_time_advances() -> None:
    jobs, _, log = make_jobs()
    async with JobsHarness(jobs) as harness:
        start = anyio.current_time()
        await harness.schedule("send_welcome", {"user_id": 1}, run_in="5m")
        await harness.run_until_idle()
        assert log == []
        await harness.advance("5m")
        await harness.run_until_idle()
        ((_, ran_at),) = log
        assert 300 <= ran_at - start <= 301  # picked up within one poll interval (1 s)


@pytest.mark.anyio
async def test_failures_retries_and_the_attempt_limit() -> None:
    jobs = Jobs()
    attempts: list[int] = []

    @jobs.event(max_tries=3, retry=RetryPolicy(base=timedelta(seconds=10), jitter=0))
    async def flaky(params: Params, ctx: JobContext) -> None:
        attempts.append(ctx.tries)
        raise RuntimeError(f"try {ctx.tries}")

    async with JobsHarness(jobs) as harness:
        await harness.schedule(flaky)
        await harness.run_until_idle()
        assert attempts == [1], "the retry waits for its backoff: not due yet"
        (waiting,) = harness.assert_scheduled(flaky)
        assert waiting.tries == 1
        await harness.advance("1m")
        await harness.run_until_idle()
        assert attempts == [1, 2, 3]
        rows = harness.assert_ran(flaky, times=3, status=HistoryStatus.ERROR)
        assert [row.error_message for row in rows] == ["try 1", "try 2", "try 3"]
        assert harness.scheduled(flaky) == [], "a terminal record is not scheduled"
        (terminal,) = harness.store.sync.find_records(job_name="flaky")
        assert terminal.status is JobStatus.MAX_TRIES_REACHED
        with pytest.raises(AssertionError, match=r"error \(try 1\), error \(try 2\)"):
            harness.assert_ran(flaky, status="success")


@pytest.mark.anyio
async def test_a_run_every_job_runs_at_start_then_every_interval() -> None:
    jobs = Jobs()
    ticks: list[datetime] = []

    @jobs.recurrent(run_every="10m")
    async def tick(ctx: JobContext) -> None:
        ticks.append(harness.now())

    async with JobsHarness(jobs) as harness:
        (record,) = harness.assert_scheduled(tick, count=1)
        assert record.next_run_at == DEFAULT_START, "a new recurrent record is due at once"
        await harness.run_until_idle()
        assert ticks == [DEFAULT_START]
        await harness.advance("1h")
        await harness.run_until_idle()  # the run due exactly at the end of the hour
        offsets = [(t - DEFAULT_START).total_seconds() for t in ticks]
        assert offsets == pytest.approx([600.0 * k for k in range(7)], abs=0.001)
        harness.assert_ran(tick, times=7, status="success")


@pytest.mark.anyio
async def test_a_cron_job_follows_its_timezone_across_a_dst_change() -> None:
    jobs = Jobs()
    reports: list[datetime] = []

    @jobs.recurrent(cron="0 3 * * *", timezone="Europe/Paris")
    async def nightly(ctx: JobContext) -> None:
        reports.append(harness.now())

    # From Saturday 00:00 UTC (01:00 in Paris) to Sunday 02:00 UTC: both 03:00 runs, no more.
    async with JobsHarness(jobs, start=datetime(2030, 3, 30, 0, tzinfo=UTC)) as harness:
        await harness.advance("1d2h")
        await harness.run_until_idle()
    paris = [r.astimezone(ZoneInfo("Europe/Paris")) for r in reports[1:]]
    assert [(p.day, p.hour, p.minute, p.second) for p in paris] == [(30, 3, 0, 0), (31, 3, 0, 0)]
    # 2030-03-31 is the first day of summer time in Paris: 03:00 local is 01:00 UTC.
    assert [r.hour for r in reports[1:]] == [2, 1]


@pytest.mark.anyio
async def test_a_heartbeat_keeps_a_ten_minute_job_alive() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=True, lock_time="1m")
    async def long_import(params: Params, ctx: JobContext) -> str:
        await anyio.sleep(600)
        return "done"

    @jobs.event(lock_time="1m", max_tries=1)
    async def no_heartbeat(params: Params, ctx: JobContext) -> str:
        await anyio.sleep(600)
        return "done"

    async with JobsHarness(jobs) as harness:
        start = anyio.current_time()
        await harness.schedule(long_import)
        await harness.schedule(no_heartbeat)
        await harness.run_until_idle()
        assert 600 <= anyio.current_time() - start < 602
        harness.assert_ran(long_import, times=1, status="success")
        harness.assert_ran(no_heartbeat, times=1, status="stale")


@pytest.mark.anyio
async def test_run_until_idle_times_out_naming_what_is_still_busy() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=True)
    async def forever(params: Params, ctx: JobContext) -> None:
        await anyio.sleep_forever()

    async with JobsHarness(jobs) as harness:
        await harness.schedule(forever, {"n": 1})
        with pytest.raises(TimeoutError, match="1 execution"):
            await harness.run_until_idle(timeout="10m")
        harness.assert_scheduled(forever, {"n": 1})
    # Leaving the harness cancelled the handler and released its lock.
    (record,) = harness.store.sync.find_records()
    assert record.locked_until is not None
    assert record.locked_until <= harness.now()


@pytest.mark.anyio
async def test_start_workers_false_keeps_jobs_waiting_until_asked() -> None:
    jobs, _, log = make_jobs()
    async with JobsHarness(jobs, start_workers=False) as harness:
        await harness.schedule("send_welcome", {"user_id": 1})
        await anyio.sleep(60)
        harness.assert_scheduled("send_welcome", {"user_id": 1}, count=1)
        with pytest.raises(WorkersStateError):
            _ = harness.workers
        await harness.run_until_idle()
        assert [entry for entry, _ in log] == ["welcome 1"]
        assert harness.workers.claims_succeeded == 1


@pytest.mark.anyio
async def test_records_of_unknown_jobs_do_not_keep_the_harness_busy() -> None:
    jobs, _, _log = make_jobs()
    store = InMemoryJobStore()
    await store.insert_record(
        JobRecord(
            id="foreign",
            job_name="someone_else",
            type=JobType.EVENT,
            priority=100,
            next_run_at=DEFAULT_START - MINUTE,
            partition=0,
        )
    )
    async with JobsHarness(jobs, store=store, probe_enabled=False) as harness:
        await harness.run_until_idle()
        assert [r.id for r in harness.scheduled()] == ["foreign"]


@pytest.mark.anyio
async def test_capped_jobs_are_not_waited_for() -> None:
    jobs = Jobs()

    @jobs.event(max_parallel_executions_per_server=0)
    async def elsewhere(params: Params, ctx: JobContext) -> None: ...

    async with JobsHarness(jobs) as harness:
        await harness.schedule(elsewhere)
        await harness.run_until_idle(timeout=10)
        harness.assert_scheduled(elsewhere, count=1)


@pytest.mark.anyio
async def test_harness_misuse_is_reported() -> None:
    jobs, _, _ = make_jobs()
    harness = JobsHarness(jobs)
    with pytest.raises(WorkersStateError, match="async with"):
        await harness.run_until_idle()
    async with harness:
        pass
    with pytest.raises(WorkersStateError, match="already used"):
        async with harness:
            pass
    async with JobsHarness(jobs) as stopped:
        await stopped.workers.stop()
        await stopped.schedule("send_welcome", {"user_id": 1})
        with pytest.raises(WorkersStateError, match=r"stopped.*send_welcome"):
            await stopped.run_until_idle()
    with pytest.raises(InvalidOptionError, match="start"):
        JobsHarness(jobs, clock=ManualClock(), start=DEFAULT_START)
    with pytest.raises(InvalidOptionError, match="workers_count"):
        JobsHarness(jobs, workers_count=0)


@pytest.mark.anyio
async def test_the_harness_takes_definitions_without_a_registry() -> None:
    async def ping(params: Params, ctx: JobContext) -> str:
        return "pong"

    definition = event_job(ping)
    async with JobsHarness([definition]) as harness:
        await harness.schedule(definition)
        await harness.run_until_idle()
        assert [row.result for row in harness.assert_ran(definition, times=1)] == ["pong"]


# -- the pytest plugin ---------------------------------------------------------------------------


def test_memory_store_fixture_is_empty(dogs_memory_store: InMemoryJobStore) -> None:
    assert isinstance(dogs_memory_store, InMemoryJobStore)
    assert dogs_memory_store.sync.find_records() == []


def test_virtual_clock_fixture_is_an_autojumping_mock_clock(dogs_virtual_clock: Any) -> None:
    import trio.testing

    assert isinstance(dogs_virtual_clock, trio.testing.MockClock)
    assert dogs_virtual_clock.autojump_threshold == 0


@pytest.mark.anyio
async def test_harness_factory_builds_instances_sharing_one_store(
    dogs_harness_factory: HarnessFactory,
) -> None:
    jobs = Jobs()
    ran: list[int] = []

    @jobs.event
    async def work(params: Params, ctx: JobContext) -> None:
        assert params is not None
        ran.append(params["n"])
        await anyio.sleep(1)

    async with (
        dogs_harness_factory(jobs, workers_count=2) as first,
        dogs_harness_factory(jobs, workers_count=2) as second,
    ):
        assert first.store is second.store is dogs_harness_factory.store
        for n in range(8):
            await first.schedule(work, {"n": n})
        second.workers.wake()
        await first.run_until_idle()
        await second.run_until_idle()
        assert sorted(ran) == list(range(8)), "each job ran exactly once"
        assert first.workers.claims_succeeded > 0
        assert second.workers.claims_succeeded > 0
        second.assert_ran(work, times=8, status="success")


def test_the_kit_imports_without_pytest_and_exports_the_contract() -> None:
    code = (
        "import sys, dogs_testing; assert 'pytest' not in sys.modules, 'pytest imported'; "
        "dogs_testing.JobStoreContract; assert 'pytest' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    from dogs_testing.contract import JobStoreContract

    assert dogs_testing.JobStoreContract is JobStoreContract
    with pytest.raises(AttributeError, match="nope"):
        _ = dogs_testing.nope


@pytest.mark.anyio
async def test_an_error_in_the_harness_body_is_not_wrapped_in_a_group() -> None:
    jobs, _, _ = make_jobs()
    with pytest.raises(AssertionError, match="boom"):
        async with JobsHarness(jobs):
            raise AssertionError("boom")


@pytest.mark.anyio
async def test_exit_grace_none_lets_running_jobs_finish() -> None:
    jobs = Jobs()

    @jobs.event(heartbeat=True)
    async def slow(params: Params, ctx: JobContext) -> str:
        await anyio.sleep(100)
        return "finished"

    async with JobsHarness(jobs, exit_grace=None) as harness:
        await harness.schedule(slow)
        await harness.advance(1)
        assert harness.workers.running_executions == 1
    harness.assert_ran(slow, times=1, status="success")
