"""Telemetry events from the runtime (virtual time, the in-memory store): which events each
path emits, in which order, with which values; trace contexts carried from the scheduling call
to the claimed job; store errors; failing subscribers; the optional job log lines."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import anyio
import pytest

from dogs_core import Snooze
from dogs_core.domain.events import (
    ClaimSwept,
    Event,
    ExecutionEnded,
    JobCancelled,
    JobClaimed,
    JobFailed,
    JobRetried,
    JobScheduled,
    JobSnoozed,
    JobStale,
    JobStarted,
    JobSucceeded,
    LockLost,
    LockRenewed,
    SchedulingEnded,
    SchedulingStarted,
    StoreErrored,
)
from dogs_core.errors import InvalidOptionError, TransientStoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, Workers
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_core.runtime.plumbing.wrappers import ObservedJobStore, observed
from dogs_testing.faults import FaultKind, FaultPlan, FaultyJobStore
from tests.runtime.conftest import Harness

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


class Recorder:
    """A subscriber that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Event]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]

    def kinds(self) -> list[str]:
        return [event.kind for event in self.events]


def observed_harness(jobs: Jobs) -> tuple[Harness, Telemetry, Recorder]:
    telemetry, recorder = Telemetry(), Recorder()
    telemetry.subscribe(recorder)
    return Harness(jobs), telemetry, recorder


def client(h: Harness, telemetry: Telemetry) -> DogsClient:
    return DogsClient(h.store, h.jobs, clock=h.clock, telemetry=telemetry)


def workers(h: Harness, telemetry: Telemetry, **options: Any) -> Workers:
    options.setdefault("poll_interval", 1)
    options.setdefault("watch_changes", False)
    return Workers(h.store, h.jobs, clock=h.clock, telemetry=telemetry, **options)


async def run_for(w: Workers, seconds: float) -> None:
    async with w:
        await anyio.sleep(seconds)
        await w.stop()


# -- the hub ----------------------------------------------------------------------------------


def test_a_hub_is_idle_until_someone_subscribes_and_again_after_they_leave() -> None:
    telemetry = Telemetry()
    assert not telemetry.active
    leave = telemetry.subscribe(Recorder())
    assert telemetry.active
    leave()
    assert not telemetry.active


def test_subscribing_to_some_kinds_filters_by_class_including_subclasses() -> None:
    telemetry, ended = Telemetry(), Recorder()
    telemetry.subscribe(ended, ExecutionEnded)
    assert telemetry.wants(JobFailed)
    assert not telemetry.wants(JobStarted)
    assert "job.stop" in {JobSucceeded.kind, JobFailed.kind}


def test_bad_subscriptions_are_refused_naming_the_argument() -> None:
    telemetry = Telemetry()
    with pytest.raises(InvalidOptionError, match="subscriber"):
        telemetry.subscribe("not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="kinds"):
        telemetry.subscribe(Recorder(), int)  # type: ignore[arg-type]
    assert not telemetry.active


def test_an_idle_hub_leaves_the_store_unwrapped() -> None:
    h = Harness(Jobs())
    assert observed(h.store, Telemetry()) is h.store
    busy = Telemetry()
    busy.subscribe(Recorder())
    assert isinstance(observed(h.store, busy), ObservedJobStore)


# -- one job's trip ---------------------------------------------------------------------------


async def test_a_successful_job_emits_its_trip_in_order() -> None:
    jobs = Jobs()

    @jobs.event
    async def greet(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(2)

    h, telemetry, recorder = observed_harness(jobs)
    scheduled = await client(h, telemetry).schedule(greet, {"n": 1}, run_in=5)
    await run_for(workers(h, telemetry), 30)

    trip = [e for e in recorder.events if not isinstance(e, ClaimSwept)]
    assert [e.kind for e in trip] == [
        "schedule.start",
        "job.scheduled",
        "schedule.stop",
        "job.claimed",
        "job.start",
        "job.stop",
    ]
    started, scheduled_event, ended = trip[0], trip[1], trip[2]
    assert isinstance(started, SchedulingStarted)
    assert started.job_names == ("greet",)
    assert isinstance(scheduled_event, JobScheduled)
    assert scheduled_event.job_id == scheduled.id  # type: ignore[union-attr]
    assert not scheduled_event.duplicate
    assert isinstance(ended, SchedulingEnded)
    assert ended.scheduled == 1
    assert ended.error is None
    assert ended.call_id == started.call_id == scheduled_event.call_id
    claimed = recorder.of(JobClaimed)[0]
    assert claimed.job.job_id == scheduled.id  # type: ignore[union-attr]
    assert claimed.pickup_lag is not None
    assert claimed.pickup_lag >= 0
    succeeded = recorder.of(JobSucceeded)
    assert len(succeeded) == 1
    assert succeeded[0].outcome == "succeeded"
    assert succeeded[0].duration == pytest.approx(2, abs=0.01)
    sweeps = recorder.of(ClaimSwept)
    assert sum(s.claimed for s in sweeps) == 1
    assert all(s.requested >= s.claimed and s.duration >= 0 for s in sweeps)


async def test_a_duplicate_unique_key_is_reported_with_the_existing_id() -> None:
    jobs = Jobs()

    @jobs.event
    async def once(params: Params, ctx: JobContext) -> None:
        pass

    h, telemetry, recorder = observed_harness(jobs)
    c = client(h, telemetry)
    first = await c.schedule(once, run_in=60, unique_key="k")
    await c.schedule(once, run_in=60, unique_key="k")
    scheduled = recorder.of(JobScheduled)
    assert [s.duplicate for s in scheduled] == [False, True]
    assert {s.job_id for s in scheduled} == {first.id}  # type: ignore[union-attr]
    assert [e.duplicates for e in recorder.of(SchedulingEnded)] == [0, 1]


async def test_schedule_many_is_one_call_with_an_event_per_record() -> None:
    jobs = Jobs()

    @jobs.event
    async def bulk(params: Params, ctx: JobContext) -> None:
        pass

    h, telemetry, recorder = observed_harness(jobs)
    items = [{"params": {"i": i}} for i in range(3)] + [{"params": {"i": 0}, "run_in": -1}]
    await client(h, telemetry).schedule_many(bulk, items)
    (started,) = recorder.of(SchedulingStarted)
    assert started.count == 3  # the invalid item never reaches the store
    assert len(recorder.of(JobScheduled)) == 3
    (ended,) = recorder.of(SchedulingEnded)
    assert (ended.scheduled, ended.call_id) == (3, started.call_id)


async def test_the_trace_context_a_subscriber_gives_comes_back_on_the_claimed_job() -> None:
    jobs = Jobs()

    @jobs.event
    async def traced(params: Params, ctx: JobContext) -> None:
        pass

    h, telemetry, recorder = observed_harness(jobs)

    def carrier(event: Event) -> None:
        if isinstance(event, SchedulingStarted):
            event.trace_context["traceparent"] = f"00-{event.call_id:032x}-{1:016x}-01"

    telemetry.subscribe(carrier, SchedulingStarted)
    scheduled = await client(h, telemetry).schedule(traced)
    record = await h.store.get_record(scheduled.id)  # type: ignore[union-attr]
    assert record is not None
    assert record.trace_context is not None
    call_id = recorder.of(SchedulingStarted)[0].call_id
    assert record.trace_context == {"traceparent": f"00-{call_id:032x}-{1:016x}-01"}
    await run_for(workers(h, telemetry), 10)
    (started,) = recorder.of(JobStarted)
    assert started.job.trace_context == record.trace_context


async def test_without_a_subscriber_no_trace_context_is_stored() -> None:
    jobs = Jobs()

    @jobs.event
    async def plain(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    scheduled = await client(h, Telemetry()).schedule(plain)
    record = await h.store.get_record(scheduled.id)  # type: ignore[union-attr]
    assert record is not None
    assert record.trace_context is None


# -- how executions end -----------------------------------------------------------------------


async def test_a_failure_that_will_be_retried_then_the_last_one() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=2)
    async def flaky(params: Params, ctx: JobContext) -> None:
        raise ValueError(f"try {ctx.tries}")

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule(flaky)
    await run_for(workers(h, telemetry), 60)
    ended = recorder.of(ExecutionEnded)
    assert [type(e) for e in ended] == [JobRetried, JobFailed]
    retried, failed = ended
    assert str(retried.error) == "try 1"
    assert retried.retry_at > h.at(0)
    assert str(failed.error) == "try 2"
    assert failed.next_run_at is None
    assert [e.job.tries for e in ended] == [1, 2]


async def test_a_recurrent_failure_is_failed_with_its_next_run() -> None:
    jobs = Jobs()

    @jobs.recurrent(run_every=timedelta(minutes=1))
    async def tick(ctx: JobContext) -> None:
        raise RuntimeError("down")

    h, telemetry, recorder = observed_harness(jobs)
    await run_for(workers(h, telemetry), 30)
    failed = recorder.of(JobFailed)
    assert failed
    assert all(f.next_run_at is not None for f in failed)
    assert not recorder.of(JobRetried)


async def test_a_snoozed_run_tells_when_it_runs_again() -> None:
    jobs = Jobs()

    @jobs.event
    async def later(params: Params, ctx: JobContext) -> Snooze | None:
        return Snooze(run_in=timedelta(hours=1)) if ctx.tries == 1 else None

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule(later)
    await run_for(workers(h, telemetry), 30)
    (snoozed,) = recorder.of(JobSnoozed)
    assert snoozed.run_at >= h.at(3600)
    assert not recorder.of(JobSucceeded)


async def test_shutdown_cancels_with_by_shutdown() -> None:
    jobs = Jobs()

    @jobs.event
    async def long(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(3600)

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule(long)
    w = workers(h, telemetry)
    async with w:
        await anyio.sleep(5)
        await w.stop(grace=1)
    (cancelled,) = recorder.of(JobCancelled)
    assert cancelled.by == "shutdown"
    assert len(recorder.of(ExecutionEnded)) == 1


async def test_an_operator_cancel_of_a_running_job() -> None:
    jobs = Jobs()

    @jobs.event
    async def long(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(3600)

    h, telemetry, recorder = observed_harness(jobs)
    c = client(h, telemetry)
    scheduled = await c.schedule(long)
    w = workers(h, telemetry, default_lock_time=10)
    async with w:
        await anyio.sleep(2)
        await c.cancel(scheduled.id)  # type: ignore[union-attr]
        await anyio.sleep(30)
        await w.stop()
    ended = recorder.of(ExecutionEnded)
    assert [(type(e), getattr(e, "by", None)) for e in ended] == [(JobCancelled, "operator")]
    assert recorder.of(LockLost)


async def test_a_stale_execution_loses_its_lock_then_ends_stale_once() -> None:
    jobs = Jobs()

    @jobs.event(cancel_on_stale=False)
    async def stuck(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(100)

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule(stuck)
    await run_for(workers(h, telemetry, default_lock_time=10, poll_interval=1000), 150)
    (lost,) = recorder.of(LockLost)
    assert lost.reason == "watchdog_expired"
    ended = recorder.of(ExecutionEnded)
    assert [type(e) for e in ended] == [JobStale]
    assert ended[0].reason == "watchdog_expired"


async def test_renewals_are_reported() -> None:
    jobs = Jobs()

    @jobs.event(lock_time=timedelta(seconds=10), heartbeat=True)
    async def beating(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(25)

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule(beating)
    await run_for(workers(h, telemetry), 60)
    renewed = recorder.of(LockRenewed)
    assert len(renewed) >= 2
    assert all(r.locked_until > h.at(0) for r in renewed)
    assert recorder.of(JobSucceeded)


async def test_every_started_execution_ends_exactly_once() -> None:
    jobs = Jobs()

    @jobs.event(max_tries=3)
    async def mixed(params: Params, ctx: JobContext) -> None:
        n = params["n"] if params else 0
        await anyio.sleep(n % 4)
        if n % 3 == 0 and ctx.tries < 2:
            raise ValueError(n)

    h, telemetry, recorder = observed_harness(jobs)
    await client(h, telemetry).schedule_many(mixed, [{"params": {"n": n}} for n in range(40)])
    await run_for(workers(h, telemetry, workers_count=8), 120)
    started = [e.job.execution_id for e in recorder.of(JobStarted)]
    ended = [e.job.execution_id for e in recorder.of(ExecutionEnded)]
    assert len(started) == len(set(started)) == 40 + 14
    assert sorted(ended) == sorted(started)


# -- store errors and failing subscribers -----------------------------------------------------


async def test_store_errors_are_reported_with_their_operation() -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    h, telemetry, recorder = observed_harness(jobs)
    faulty = FaultyJobStore(h.store, FaultPlan())
    faulty.fail_next("insert_job", FaultKind.ERROR_BEFORE)
    c = DogsClient(faulty, jobs, clock=h.clock, telemetry=telemetry)
    await c.schedule(job)
    (error,) = recorder.of(StoreErrored)
    assert error.operation == "insert_job"
    assert error.transient
    assert isinstance(error.error, TransientStoreError)
    assert recorder.of(SchedulingEnded)[0].error is None  # retried, then written


async def test_a_failing_subscriber_is_logged_once_and_never_fails_a_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    h, telemetry, recorder = observed_harness(jobs)

    def broken(event: Event) -> None:
        raise RuntimeError("subscriber bug")

    telemetry.subscribe(broken)
    with caplog.at_level(logging.ERROR, logger="dogs.telemetry"):
        await client(h, telemetry).schedule_many(job, [{} for _ in range(5)])
        await run_for(workers(h, telemetry), 10)
    assert len(recorder.of(JobSucceeded)) == 5
    failures = [r for r in caplog.records if r.name == "dogs.telemetry"]
    assert len(failures) == 1
    assert "subscriber bug" in (failures[0].exc_text or "")


# -- log lines --------------------------------------------------------------------------------


async def test_log_jobs_writes_start_and_end_lines_with_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = Jobs()

    @jobs.event(max_tries=1)
    async def job(params: Params, ctx: JobContext) -> None:
        if params and params.get("fail"):
            raise ValueError("boom")

    h = Harness(jobs)
    telemetry = Telemetry()
    await client(h, telemetry).schedule(job)
    failing = await client(h, telemetry).schedule(job, {"fail": True})
    with caplog.at_level(logging.INFO, logger="dogs"):
        await run_for(workers(h, telemetry, log_jobs=True), 10)
    assert not telemetry.active, "the log subscriber leaves with the workers"
    lines = [r for r in caplog.records if r.name == "dogs.jobs"]
    assert [r.getMessage().split(" ")[0] for r in lines if r.levelno == logging.INFO].count(
        "started"
    ) == 2
    assert all(getattr(r, "job_name", None) == "job" for r in lines)
    assert all({"job_id", "execution_id", "tries"} <= set(vars(r)) for r in lines)
    outcomes = sorted(getattr(r, "outcome", "") for r in lines if hasattr(r, "outcome"))
    assert outcomes == ["failed", "succeeded"]
    (failure,) = [r for r in caplog.records if r.name == "dogs.execution" and "failed" in r.msg]
    assert failure.exc_info is not None
    assert "boom" in (failure.exc_text or failure.getMessage())
    assert getattr(failure, "job_id", None) == failing.id  # type: ignore[union-attr]


async def test_without_log_jobs_nothing_is_logged_per_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = Jobs()

    @jobs.event
    async def job(params: Params, ctx: JobContext) -> None:
        pass

    h = Harness(jobs)
    await client(h, Telemetry()).schedule(job)
    with caplog.at_level(logging.DEBUG, logger="dogs"):
        await run_for(workers(h, Telemetry()), 10)
    assert not [r for r in caplog.records if r.name == "dogs.jobs"]


def h_now() -> datetime:
    return Harness(Jobs()).at(0)


def test_the_sync_client_reports_store_errors_too() -> None:
    from dogs_core.runtime import SyncDogsClient
    from dogs_core.runtime.plumbing.wrappers import ObservedSyncJobStore, observed_sync
    from dogs_testing.memory import SyncInMemoryJobStore

    jobs = Jobs()

    @jobs.event
    def job(params: Params, ctx: JobContext) -> None:
        pass

    telemetry, recorder = Telemetry(), Recorder()
    store = SyncInMemoryJobStore()
    assert observed_sync(store, telemetry) is store, "idle: unwrapped"
    telemetry.subscribe(recorder)
    wrapped = observed_sync(store, telemetry)
    assert isinstance(wrapped, ObservedSyncJobStore)
    assert observed_sync(wrapped, telemetry) is wrapped
    client = SyncDogsClient(store, jobs, telemetry=telemetry)
    scheduled = client.schedule(job)
    assert client.get_job(scheduled.id) is not None  # type: ignore[union-attr]
    with pytest.raises(InvalidOptionError):
        wrapped.acquire_slot("job", "", limit=0, holder="h", until=h_now(), now=h_now())
    (error,) = recorder.of(StoreErrored)
    assert error.operation == "acquire_slot"
    assert not error.transient
    assert [e.kind for e in recorder.events[:3]] == [
        "schedule.start",
        "job.scheduled",
        "schedule.stop",
    ]


async def test_a_feed_error_is_reported_and_the_feed_closed() -> None:
    jobs = Jobs()
    h, telemetry, recorder = observed_harness(jobs)
    faulty = FaultyJobStore(h.store, FaultPlan())
    faulty.fail_next("watch_records", FaultKind.ERROR_BEFORE, skip_calls=1)
    store = ObservedJobStore(faulty, telemetry)
    feed = store.watch_records(["a"])
    assert await feed.__anext__() == []  # the open signal
    with pytest.raises(TransientStoreError):
        await feed.__anext__()
    await feed.aclose()
    (error,) = recorder.of(StoreErrored)
    assert error.operation == "watch_records"
    assert error.transient
