"""OpenTelemetry tracing (dogs_integrations.otel) with the SDK's in-memory exporter.

Workers run on the in-memory store under trio's virtual clock (as in tests/runtime); a few
tests emit events by hand into a ``Telemetry`` hub for the cases a run does not reach easily
(a stale execution, lock events, a scheduling call that raised).
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pymongo import AsyncMongoClient

from dogs_core.domain.definitions import Discard
from dogs_core.domain.events import (
    JobScheduled,
    JobStale,
    JobStarted,
    LockLost,
    LockRenewed,
    SchedulingEnded,
    SchedulingStarted,
)
from dogs_core.domain.records import ClaimedJob, JobType, Scheduled
from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, LoopClock, Workers
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_integrations.otel import OpenTelemetryTracing
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo.queries import DEFAULT_RECORDS_COLLECTION
from dogs_testing.memory import InMemoryJobStore

START = datetime(2026, 1, 1, tzinfo=UTC)
Params = dict[str, Any] | None


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


@dataclass
class Traced:
    """A hub with the tracing attached, its provider and what it exported."""

    hub: Telemetry
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [span for span in spans if name is None or span.name == name]

    def one(self, name: str) -> ReadableSpan:
        spans = self.spans(name)
        assert len(spans) == 1, [span.name for span in self.spans()]
        return spans[0]


def traced() -> Traced:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hub = Telemetry()
    tracing = OpenTelemetryTracing(
        tracer_provider=provider, propagator=TraceContextTextMapPropagator()
    )
    tracing.attach(hub)
    return Traced(hub, provider, exporter)


@pytest.fixture
def t() -> Iterator[Traced]:
    result = traced()
    yield result
    result.provider.shutdown()


def parts(
    t: Traced, jobs: Jobs, store: InMemoryJobStore | None = None
) -> tuple[DogsClient, Workers]:
    store = store or InMemoryJobStore()
    clock = LoopClock(START)
    client = DogsClient(store, jobs, clock=clock, rng=random.Random(0), telemetry=t.hub)
    workers = Workers(
        store,
        jobs,
        clock=clock,
        rng=random.Random(0),
        telemetry=t.hub,
        poll_interval=1,
        watch_changes=False,
    )
    return client, workers


async def run_for(workers: Workers, seconds: float) -> None:
    async with workers:
        await anyio.sleep(seconds)
        await workers.stop()


@pytest.mark.anyio
async def test_a_run_span_per_execution_linked_to_its_schedule_span(t: Traced) -> None:
    jobs = Jobs()
    tracer = t.provider.get_tracer("app")

    @jobs.event
    async def send_mail(params: Params, ctx: JobContext) -> None:
        with tracer.start_as_current_span("render"):
            await anyio.lowlevel.checkpoint()

    client, workers = parts(t, jobs)
    outcome = await client.schedule(send_mail, {"to": "a@example.com"}, priority=3)
    assert trace.get_current_span() is trace.INVALID_SPAN, "the schedule span was detached"
    await run_for(workers, 3)

    schedule = t.one("schedule send_mail")
    run = t.one("run send_mail")
    render = t.one("render")
    assert schedule.kind is SpanKind.PRODUCER
    assert schedule.attributes is not None
    assert schedule.attributes["dogs.job.id"] == outcome.id  # type: ignore[union-attr]
    assert schedule.attributes["dogs.job.duplicate"] is False
    assert schedule.attributes["dogs.schedule.scheduled"] == 1
    assert schedule.status.status_code is StatusCode.UNSET

    assert run.kind is SpanKind.CONSUMER
    assert run.parent is None, "an execution starts a trace of its own"
    assert run.context is not None
    assert schedule.context is not None
    [link] = run.links
    assert link.context.trace_id == schedule.context.trace_id
    assert link.context.span_id == schedule.context.span_id
    attributes = dict(run.attributes or {})
    assert attributes["dogs.job.name"] == "send_mail"
    assert attributes["dogs.job.id"] == outcome.id  # type: ignore[union-attr]
    assert isinstance(attributes["dogs.execution.id"], str)
    assert attributes["dogs.job.tries"] == 1
    assert attributes["dogs.job.priority"] == 3
    assert attributes["dogs.job.partition"] == 0
    assert attributes["dogs.job.type"] == "event"
    assert attributes["dogs.job.was_stale"] is False
    assert attributes["dogs.job.outcome"] == "succeeded"
    assert attributes["messaging.system"] == "dogs"
    assert attributes["messaging.destination.name"] == "send_mail"
    assert run.status.status_code is StatusCode.UNSET

    assert render.parent is not None, "a span the handler opens is a child of the run span"
    assert render.parent.span_id == run.context.span_id
    assert render.context is not None
    assert render.context.trace_id == run.context.trace_id


@pytest.mark.anyio
async def test_a_failed_try_is_an_error_with_the_exception_then_the_retry_succeeds(
    t: Traced,
) -> None:
    jobs = Jobs()

    @jobs.event(max_tries=3)
    async def flaky(params: Params, ctx: JobContext) -> None:
        if ctx.tries == 1:
            raise ValueError("not yet")

    client, workers = parts(t, jobs)
    await client.schedule(flaky)
    await run_for(workers, 30)

    first, second = sorted(t.spans("run flaky"), key=lambda span: span.start_time or 0)
    assert first.attributes is not None
    assert second.attributes is not None
    assert first.attributes["dogs.job.outcome"] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "retried: ValueError: not yet"
    [exception] = [event for event in first.events if event.name == "exception"]
    assert exception.attributes is not None
    assert exception.attributes["exception.type"] == "ValueError"
    assert exception.attributes["exception.message"] == "not yet"
    assert "dogs.job.retry_at" in first.attributes
    assert second.attributes["dogs.job.tries"] == 2
    assert second.attributes["dogs.job.outcome"] == "succeeded"
    assert second.status.status_code is StatusCode.UNSET
    schedule = t.one("schedule flaky")
    for span in (first, second):
        assert schedule.context is not None
        assert [link.context.span_id for link in span.links] == [schedule.context.span_id]


@pytest.mark.anyio
async def test_a_final_failure_is_an_error(t: Traced) -> None:
    jobs = Jobs()

    async def give_up(error: Exception, params: Params, ctx: JobContext) -> Discard:
        return Discard()

    @jobs.event(on_error=give_up)
    async def doomed(params: Params, ctx: JobContext) -> None:
        raise KeyError("gone")

    client, workers = parts(t, jobs)
    await client.schedule(doomed)
    await run_for(workers, 3)
    run = t.one("run doomed")
    assert run.attributes is not None
    assert run.attributes["dogs.job.outcome"] == "failed"
    assert run.status.status_code is StatusCode.ERROR
    assert [event.name for event in run.events] == ["exception"]


@pytest.mark.anyio
async def test_scheduling_inside_a_handler_is_a_child_of_its_run_span(t: Traced) -> None:
    jobs = Jobs()

    @jobs.event
    async def second(params: Params, ctx: JobContext) -> None:
        pass

    client: DogsClient

    @jobs.event
    async def first(params: Params, ctx: JobContext) -> None:
        await client.schedule(second)

    client, workers = parts(t, jobs)
    await client.schedule(first)
    await run_for(workers, 5)
    run_first = t.one("run first")
    schedule_second = t.one("schedule second")
    run_second = t.one("run second")
    assert run_first.context is not None
    assert schedule_second.context is not None
    assert schedule_second.parent is not None
    assert schedule_second.parent.span_id == run_first.context.span_id
    assert [link.context.span_id for link in run_second.links] == [schedule_second.context.span_id]


@pytest.mark.anyio
async def test_schedule_many_is_one_span_and_every_record_carries_its_context(
    t: Traced,
) -> None:
    jobs = Jobs()

    @jobs.event
    async def ping(params: Params, ctx: JobContext) -> None:
        pass

    store = InMemoryJobStore()
    client, workers = parts(t, jobs, store)
    await client.schedule_many(ping, [{"params": {"n": n}} for n in range(3)])
    schedule = t.one("schedule ping")
    assert schedule.attributes is not None
    assert schedule.attributes["dogs.schedule.count"] == 3
    assert schedule.attributes["messaging.batch.message_count"] == 3
    assert "dogs.job.id" not in schedule.attributes, "ids are per record, the span per call"
    records = store.sync.find_records(limit=10)
    assert len(records) == 3
    await run_for(workers, 3)
    runs = t.spans("run ping")
    assert len(runs) == 3
    assert schedule.context is not None
    assert {link.context.span_id for run in runs for link in run.links} == {
        schedule.context.span_id
    }


# -- events by hand ----------------------------------------------------------------------------


def claimed(trace_context: dict[str, str] | None = None) -> ClaimedJob:
    return ClaimedJob(
        job_id="job-1",
        execution_id="exec-1",
        job_name="nap",
        type=JobType.EVENT,
        params=None,
        tries=2,
        priority=0,
        locked_until=START + timedelta(minutes=1),
        partition=None,
        was_stale=True,
        trace_context=trace_context,
    )


def start_execution(t: Traced, job: ClaimedJob) -> None:
    """Emit ``JobStarted`` in a context copy of its own, as the runtime does for an execution
    (the run span made current there must not leak into the test's context)."""
    contextvars.copy_context().run(t.hub.emit, JobStarted(job))


def test_lock_events_and_a_stale_end(t: Traced) -> None:
    job = claimed()
    start_execution(t, job)
    assert trace.get_current_span() is trace.INVALID_SPAN
    t.hub.emit(LockRenewed(job, locked_until=START + timedelta(minutes=2)))
    t.hub.emit(LockLost(job, reason="lost_lock"))
    t.hub.emit(JobStale(job, duration=1.5, reason="lost_lock"))
    run = t.one("run nap")
    assert [event.name for event in run.events] == ["dogs.lock.renewed", "dogs.lock.lost"]
    renewed, lost = run.events
    assert renewed.attributes == {"dogs.lock.locked_until": "2026-01-01T00:02:00+00:00"}
    assert lost.attributes == {"dogs.lock.reason": "lost_lock"}
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "stale: lost_lock"
    assert run.attributes is not None
    assert run.attributes["dogs.job.was_stale"] is True
    assert "dogs.job.partition" not in run.attributes
    assert run.links == (), "a record without traceContext has no link"
    # Events of an execution it never saw started are ignored.
    t.hub.emit(LockLost(claimed(), reason="lost_lock"))
    t.hub.emit(JobStale(claimed(), duration=1.0, reason="watchdog"))
    assert len(t.spans()) == 1


def test_a_trace_context_that_is_not_one_gives_no_link(t: Traced) -> None:
    start_execution(t, claimed({"traceparent": "garbage"}))
    t.hub.emit(JobStale(claimed(), duration=1.0, reason="watchdog"))
    assert t.one("run nap").links == ()


def test_a_scheduling_call_that_raised_is_an_error_and_restores_the_context(t: Traced) -> None:
    started = SchedulingStarted(call_id=7, job_names=("a", "b"), count=2)
    before = trace.get_current_span()
    t.hub.emit(started)
    assert trace.get_current_span().get_span_context().is_valid, "current during the call"
    assert set(started.trace_context) == {"traceparent"}
    t.hub.emit(JobScheduled(call_id=7, job_name="a", job_id="x", run_at=START, priority=0))
    error = RuntimeError("store down")
    t.hub.emit(
        SchedulingEnded(
            call_id=7, job_names=("a", "b"), scheduled=1, duplicates=0, duration=0.1, error=error
        )
    )
    assert trace.get_current_span() is before
    span = t.one("schedule")
    assert span.attributes is not None
    assert span.attributes["dogs.job.names"] == ("a", "b")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "RuntimeError: store down"
    assert [event.name for event in span.events] == ["exception"]


def test_a_duplicate_is_an_attribute_of_its_schedule_span(t: Traced) -> None:
    t.hub.emit(SchedulingStarted(call_id=8, job_names=("a",), count=1))
    t.hub.emit(
        JobScheduled(
            call_id=8,
            job_name="a",
            job_id="old",
            run_at=START,
            priority=1,
            duplicate=True,
            unique_key="k",
        )
    )
    t.hub.emit(
        SchedulingEnded(call_id=8, job_names=("a",), scheduled=0, duplicates=1, duration=0.0)
    )
    attributes = dict(t.one("schedule a").attributes or {})
    assert attributes["dogs.job.duplicate"] is True
    assert attributes["dogs.job.id"] == "old"
    assert attributes["dogs.job.unique_key"] == "k"
    assert attributes["dogs.schedule.duplicates"] == 1


def test_the_global_provider_and_propagator_are_the_defaults() -> None:
    hub = Telemetry()
    unsubscribe = OpenTelemetryTracing().attach(hub)
    assert hub.active
    started = SchedulingStarted(call_id=9, job_names=("a",), count=1)
    hub.emit(started)  # the global no-op provider: a non-recording span, nothing injected
    hub.emit(SchedulingEnded(call_id=9, job_names=("a",), scheduled=1, duplicates=0, duration=0))
    assert trace.get_current_span() is trace.INVALID_SPAN
    unsubscribe()
    assert not hub.active


@pytest.mark.parametrize(
    ("options", "field"),
    [({"tracer_provider": "x"}, "tracer_provider"), ({"propagator": object()}, "propagator")],
)
def test_bad_options_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        OpenTelemetryTracing(**options)
    assert raised.value.field == field


def test_attach_refuses_what_is_not_a_hub() -> None:
    with pytest.raises(InvalidOptionError) as raised:
        OpenTelemetryTracing().attach("hub")  # type: ignore[arg-type]
    assert raised.value.field == "telemetry"


# -- across processes, on the real mongod --------------------------------------------------------


@pytest.mark.mongo
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_stored_trace_context_links_a_worker_in_another_process(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    """The scheduling side and the worker side share nothing but the database: separate hubs,
    separate tracer providers, separate stores, as two processes would."""
    jobs = Jobs()
    done = anyio.Event()

    @jobs.event
    async def invoice(params: Params, ctx: JobContext) -> None:
        done.set()

    producer, consumer = traced(), traced()
    scheduling_store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    working_store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    client = DogsClient(scheduling_store, jobs, telemetry=producer.hub)
    outcome = await client.schedule(invoice, {"n": 1})
    assert isinstance(outcome, Scheduled)
    schedule = producer.one("schedule invoice")
    assert schedule.context is not None

    raw = await async_mongo_client[mongo_database_name][DEFAULT_RECORDS_COLLECTION].find_one(
        {"_id": outcome.id}
    )
    assert raw is not None
    trace_id, span_id = f"{schedule.context.trace_id:032x}", f"{schedule.context.span_id:016x}"
    assert set(raw["traceContext"]) == {"traceparent"}
    assert raw["traceContext"]["traceparent"].startswith(f"00-{trace_id}-{span_id}-")

    workers = Workers(working_store, jobs, telemetry=consumer.hub, poll_interval=0.1)
    async with workers:
        with anyio.fail_after(20):
            await done.wait()
        await workers.stop()
    run = consumer.one("run invoice")
    assert producer.spans("run invoice") == [], "the worker side traced it with its own provider"
    [link] = run.links
    assert link.context.trace_id == schedule.context.trace_id
    assert link.context.span_id == schedule.context.span_id
    assert link.context.is_remote, "the context came back from the record"
    assert run.attributes is not None
    assert run.attributes["dogs.job.id"] == outcome.id
    assert run.attributes["dogs.job.outcome"] == "succeeded"


@pytest.mark.anyio
async def test_one_trace_per_workflow_each_step_run_a_child_of_its_span(t: Traced) -> None:
    from dogs_core.domain.workflows import Workflow

    jobs = Jobs()

    @jobs.event
    async def fetch(params: Params, ctx: JobContext) -> None:
        return None

    @jobs.event(max_tries=1)
    async def index(params: Params, ctx: JobContext) -> None:
        raise RuntimeError("down")

    client, workers = parts(t, jobs)
    wf = Workflow("import")
    first = wf.add(fetch)
    wf.add(index, after=[first], on_failure="continue")
    wf.add(fetch, after=[first])
    started = await client.start_workflow(wf)
    assert trace.get_current_span() is trace.INVALID_SPAN, "the workflow span was detached"
    await run_for(workers, 12)

    root = t.one("workflow import")
    runs = t.spans("run fetch") + t.spans("run index")
    assert root.kind is SpanKind.PRODUCER
    assert root.attributes is not None
    assert root.attributes["dogs.workflow.id"] == started.id
    assert root.attributes["dogs.workflow.released"] == 1
    assert len(runs) == 3
    assert root.context is not None
    for run in runs:
        assert run.context is not None
        assert run.context.trace_id == root.context.trace_id
        assert run.parent is not None
        assert run.parent.span_id == root.context.span_id
        assert run.attributes is not None
        assert run.attributes["dogs.workflow.id"] == started.id
    (failed,) = t.spans("run index")
    assert failed.status.status_code is StatusCode.ERROR


@pytest.mark.anyio
async def test_a_span_per_step_that_runs_under_its_run_and_an_event_per_replay(t: Traced) -> None:
    jobs = Jobs()
    tracer = t.provider.get_tracer("app")

    async def charge() -> str:
        with tracer.start_as_current_span("stripe.charge"):
            return "ch_1"

    def ship(tries: int) -> str:
        if tries == 1:
            raise ValueError("the shipping API answered 503")
        return "parcel-1"

    @jobs.event(max_tries=3)
    async def order(params: Params, ctx: JobContext) -> None:
        await ctx.step("charge", charge)
        await ctx.step("ship", ship, ctx.tries)

    client, workers = parts(t, jobs)
    await client.schedule(order)
    await run_for(workers, 30)

    first, second = sorted(t.spans("run order"), key=lambda span: span.start_time or 0)
    [charged] = t.spans("step charge")
    assert charged.parent is not None
    assert charged.parent.span_id == first.context.span_id
    assert charged.attributes is not None
    assert (charged.attributes["dogs.step.name"], charged.attributes["dogs.step.index"]) == (
        "charge",
        0,
    )
    [inner] = t.spans("stripe.charge")
    assert inner.parent is not None
    assert inner.parent.span_id == charged.context.span_id
    failed, shipped = sorted(t.spans("step ship"), key=lambda span: span.start_time or 0)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.parent is not None
    assert failed.parent.span_id == first.context.span_id
    assert shipped.status.status_code is StatusCode.UNSET
    assert shipped.parent is not None
    assert shipped.parent.span_id == second.context.span_id
    replays = [event for event in second.events if event.name == "dogs.step.replayed"]
    assert [dict(event.attributes or {}) for event in replays] == [
        {"dogs.step.name": "charge", "dogs.step.index": 0}
    ]
