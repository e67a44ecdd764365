"""Prometheus metrics (dogs_integrations.prometheus): counters and histograms from a worker run
on the in-memory store, read by scraping the real HTTP endpoint; the store gauges and their
bounded refresh under trio's virtual clock; ``dogs worker --metrics-port`` against the real
mongod in a subprocess."""

from __future__ import annotations

import logging
import random
import socket
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import trio.testing
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from dogs_core.domain.definitions import Discard
from dogs_core.domain.events import (
    ClaimSwept,
    JobClaimed,
    JobStarted,
    LockLost,
    StepEnded,
    StepReplayed,
    StoreErrored,
)
from dogs_core.domain.records import ClaimedJob, JobType, NameStatus
from dogs_core.errors import InvalidOptionError, TransientStoreError
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, LoopClock, Workers
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_integrations.prometheus import PrometheusMetrics, serve_metrics, worker_metrics
from dogs_testing.memory import InMemoryJobStore

START = datetime(2026, 1, 1, tzinfo=UTC)
Params = dict[str, Any] | None
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


def scrape(port: int) -> Samples:
    """GET the metrics page and parse it: ``{(sample name, sorted labels): value}``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return parse(text)


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def registry_samples(metrics: PrometheusMetrics) -> Samples:
    from prometheus_client import generate_latest

    return parse(generate_latest(metrics.registry).decode())


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def metrics() -> PrometheusMetrics:
    return PrometheusMetrics(registry=CollectorRegistry())


@pytest.fixture
def served(metrics: PrometheusMetrics) -> Iterator[int]:
    _, port, stop = serve_metrics(0, "127.0.0.1", registry=metrics.registry)
    yield port
    stop()


def parts(hub: Telemetry, jobs: Jobs, store: InMemoryJobStore) -> tuple[DogsClient, Workers]:
    clock = LoopClock(START)
    client = DogsClient(store, jobs, clock=clock, rng=random.Random(0), telemetry=hub)
    workers = Workers(
        store,
        jobs,
        clock=clock,
        rng=random.Random(0),
        telemetry=hub,
        poll_interval=1,
        watch_changes=False,
    )
    return client, workers


@pytest.mark.anyio
async def test_a_worker_run_is_counted_and_served(metrics: PrometheusMetrics, served: int) -> None:
    jobs = Jobs()

    @jobs.event
    async def ok(params: Params, ctx: JobContext) -> None:
        await anyio.sleep(2)

    async def give_up(error: Exception, params: Params, ctx: JobContext) -> Discard:
        return Discard()

    @jobs.event(on_error=give_up)
    async def bad(params: Params, ctx: JobContext) -> None:
        raise ValueError("no")

    hub = Telemetry()
    metrics.attach(hub)
    store = InMemoryJobStore()
    client, workers = parts(hub, jobs, store)
    for _ in range(3):
        await client.schedule(ok)
    await client.schedule(bad)
    await client.schedule(ok, unique_key="once")
    await client.schedule(ok, unique_key="once")  # a duplicate: not a new record
    async with workers:
        await anyio.sleep(10)
        await workers.stop()

    samples = scrape(served)
    assert value(samples, "dogs_jobs_scheduled_total", job_name="ok") == 4
    assert value(samples, "dogs_jobs_scheduled_total", job_name="bad") == 1
    assert value(samples, "dogs_executions_total", job_name="ok", outcome="succeeded") == 4
    assert value(samples, "dogs_executions_total", job_name="bad", outcome="failed") == 1
    assert value(samples, "dogs_execution_duration_seconds_count", job_name="ok") == 4
    # Virtual time: each ok run took its 2 s sleep, so its duration sits in the 2.5 s bucket.
    assert value(samples, "dogs_execution_duration_seconds_bucket", job_name="ok", le="1.0") == 0
    assert value(samples, "dogs_execution_duration_seconds_bucket", job_name="ok", le="2.5") == 4
    assert value(samples, "dogs_pickup_lag_seconds_count", job_name="ok") == 4
    claims = value(samples, "dogs_claim_duration_seconds_count")
    assert claims is not None
    assert claims >= 2
    assert value(samples, "dogs_lock_lost_total", job_name="ok") is None


def claimed(name: str = "nap") -> ClaimedJob:
    return ClaimedJob(
        job_id="j",
        execution_id="e",
        job_name=name,
        type=JobType.EVENT,
        params=None,
        tries=1,
        priority=0,
        locked_until=START,
    )


def test_lock_losses_store_errors_claims_and_lags_by_hand(metrics: PrometheusMetrics) -> None:
    hub = Telemetry()
    unsubscribe = metrics.attach(hub)
    hub.emit(LockLost(claimed(), reason="lost_lock"))
    hub.emit(StoreErrored("claim_many", TransientStoreError("blip"), transient=True))
    hub.emit(StoreErrored("schedule", RuntimeError("bad"), transient=False))
    hub.emit(ClaimSwept(("nap",), 0, "byJobName", requested=4, claimed=0, duration=0.003))
    hub.emit(JobClaimed(claimed(), pickup_lag=3.0))  # a claim is not a start: not observed
    hub.emit(JobStarted(claimed(), pickup_lag=None))
    hub.emit(JobStarted(claimed(), pickup_lag=-0.5))  # clocks disagree: counted as 0
    hub.emit(StepEnded(claimed(), "charge", 0, duration=0.004))
    hub.emit(StepEnded(claimed(), "ship", 1, duration=2.0, error=ValueError("503")))
    hub.emit(StepReplayed(claimed(), "charge", 0))
    unsubscribe()
    hub.emit(LockLost(claimed(), reason="watchdog"))  # not counted: unsubscribed
    samples = registry_samples(metrics)
    assert value(samples, "dogs_lock_lost_total", job_name="nap") == 1
    assert value(samples, "dogs_store_errors_total", operation="claim_many", transient="true") == 1
    assert value(samples, "dogs_store_errors_total", operation="schedule", transient="false") == 1
    assert value(samples, "dogs_claim_duration_seconds_bucket", le="0.005") == 1
    assert value(samples, "dogs_pickup_lag_seconds_count", job_name="nap") == 1
    assert value(samples, "dogs_pickup_lag_seconds_bucket", job_name="nap", le="0.01") == 1
    for outcome in ("recorded", "failed", "replayed"):
        assert value(samples, "dogs_steps_total", job_name="nap", outcome=outcome) == 1
    assert value(samples, "dogs_step_duration_seconds_count", job_name="nap") == 2
    assert value(samples, "dogs_step_duration_seconds_bucket", job_name="nap", le="0.01") == 1


# -- gauges ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_gauges_after_a_refresh_and_names_that_disappear(
    metrics: PrometheusMetrics,
) -> None:
    jobs = Jobs()

    @jobs.event
    async def mail(params: Params, ctx: JobContext) -> None:
        pass

    @jobs.event
    async def report(params: Params, ctx: JobContext) -> None:
        pass

    store = InMemoryJobStore()
    client = DogsClient(store, jobs, clock=LoopClock(START), telemetry=Telemetry())
    await client.schedule(mail)
    await client.schedule(mail)
    await client.schedule(mail, run_in=timedelta(hours=1))
    later = await client.schedule(report, run_in=timedelta(hours=1))
    await store.set_paused("report", True, now=START)

    assert await metrics.refresh(store, now=START + timedelta(seconds=30)) is True
    samples = registry_samples(metrics)
    assert value(samples, "dogs_jobs", job_name="mail", state="due") == 2
    assert value(samples, "dogs_jobs", job_name="mail", state="scheduled") == 1
    assert value(samples, "dogs_jobs", job_name="mail", state="running") == 0
    assert value(samples, "dogs_jobs", job_name="mail", state="stale") == 0
    assert value(samples, "dogs_jobs", job_name="mail", state="held") == 0
    assert value(samples, "dogs_jobs", job_name="mail", state="failed") == 0
    assert value(samples, "dogs_jobs", job_name="report", state="scheduled") == 1
    assert value(samples, "dogs_oldest_due_age_seconds", job_name="mail") == pytest.approx(30)
    assert value(samples, "dogs_oldest_due_age_seconds", job_name="report") == 0
    assert value(samples, "dogs_job_paused", job_name="report") == 1
    assert value(samples, "dogs_job_paused", job_name="mail") == 0
    refreshed = value(samples, "dogs_gauges_refreshed_timestamp_seconds")
    assert refreshed == (START + timedelta(seconds=30)).timestamp()

    # report's only record goes and its pause is lifted: its label sets go with them.
    await client.delete(later.id)  # type: ignore[union-attr]
    await store.set_paused("report", False, now=START)
    await store.set_paused("*", True, now=START)
    assert await metrics.refresh(store, now=START + timedelta(seconds=60)) is True
    samples = registry_samples(metrics)
    assert not [key for key in samples if ("job_name", "report") in key[1]]
    assert value(samples, "dogs_job_paused", job_name="mail") == 1, "'*' pauses every name"
    assert value(samples, "dogs_job_paused", job_name="*") == 1


class CountingStore(InMemoryJobStore):
    """Records the virtual time of each ``status_counts`` call; fails or lags on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[float] = []
        self.failing = False
        self.delay = 0.0

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        self.reads.append(anyio.current_time())
        if self.delay:
            await anyio.sleep(self.delay)
        if self.failing:
            raise TransientStoreError("the store is down")
        return await super().status_counts(now=now)


async def refresh_for(
    metrics: PrometheusMetrics, store: CountingStore, seconds: float, **options: Any
) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: metrics.refresh_gauges(store, **options))
        await anyio.sleep(seconds)
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_refresh_rate_is_bounded_by_the_interval(metrics: PrometheusMetrics) -> None:
    store = CountingStore()
    start = anyio.current_time()
    await refresh_for(metrics, store, 100, interval=15, clock=LoopClock(START))
    assert [t - start for t in store.reads] == [0, 15, 30, 45, 60, 75, 90]


@pytest.mark.anyio
async def test_a_refresh_slower_than_the_interval_is_followed_at_once_never_in_a_burst(
    metrics: PrometheusMetrics,
) -> None:
    store = CountingStore()
    store.delay = 20
    start = anyio.current_time()
    await refresh_for(metrics, store, 70, interval=15, clock=LoopClock(START))
    assert [t - start for t in store.reads] == [0, 20, 40, 60]


@pytest.mark.anyio
async def test_store_errors_keep_the_gauges_and_are_logged_once(
    metrics: PrometheusMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs()

    @jobs.event
    async def mail(params: Params, ctx: JobContext) -> None:
        pass

    store = CountingStore()
    await DogsClient(store, jobs, clock=LoopClock(START), telemetry=Telemetry()).schedule(mail)
    assert await metrics.refresh(store, now=START)
    store.failing = True
    store.reads.clear()
    with caplog.at_level(logging.INFO, logger="dogs.integrations.prometheus"):
        await refresh_for(metrics, store, 45, interval=10, clock=LoopClock(START))
        failures = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(failures) == 1, "one line per run of failures"
        assert len(store.reads) == 5
        assert value(registry_samples(metrics), "dogs_jobs", job_name="mail", state="due") == 1
        store.failing = False
        assert await metrics.refresh(store, now=START)
    assert "works again" in caplog.records[-1].getMessage()


# -- input checks -------------------------------------------------------------------------------


def test_a_second_instance_on_one_registry_is_refused() -> None:
    registry = CollectorRegistry()
    PrometheusMetrics(registry=registry)
    with pytest.raises(InvalidOptionError) as raised:
        PrometheusMetrics(registry=registry)
    assert raised.value.field == "registry"
    other = PrometheusMetrics(registry=registry, namespace="jobs")
    assert other.namespace == "jobs"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"registry": "x"}, "registry"),
        ({"namespace": "bad-name"}, "namespace"),
        ({"namespace": ""}, "namespace"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        PrometheusMetrics(**options)
    assert raised.value.field == field


@pytest.mark.parametrize("port", [-1, 70000, "9000", True])
def test_serve_metrics_refuses_a_bad_port(port: Any) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        serve_metrics(port)
    assert raised.value.field == "port"


def test_serve_metrics_on_a_taken_port_is_an_input_error(metrics: PrometheusMetrics) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidOptionError, match="cannot serve metrics"):
            serve_metrics(port, "127.0.0.1", registry=metrics.registry)


@pytest.mark.anyio
@pytest.mark.parametrize("interval", [0, -1, float("nan"), "15"])
async def test_a_bad_interval_is_refused(metrics: PrometheusMetrics, interval: Any) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        await metrics.refresh_gauges(InMemoryJobStore(), interval=interval)
    assert raised.value.field == "interval"


@pytest.mark.anyio
async def test_worker_metrics_serves_beside_the_workers(metrics: PrometheusMetrics) -> None:
    jobs = Jobs()

    @jobs.event
    async def mail(params: Params, ctx: JobContext) -> None:
        pass

    hub = Telemetry()
    store = InMemoryJobStore()
    client, workers = parts(hub, jobs, store)
    await client.schedule(mail, run_in=timedelta(hours=1))
    async with worker_metrics(workers, port=0, host="127.0.0.1", metrics=metrics) as served:
        assert served is metrics
        assert hub.active
        await anyio.sleep(1)
    assert not hub.active, "unsubscribed on exit"
    samples = registry_samples(metrics)
    assert value(samples, "dogs_jobs", job_name="mail", state="scheduled") == 1


# -- dogs worker --metrics-port -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.mongo
@pytest.mark.slow
def test_dogs_worker_serves_metrics(mongodb_uri: str, mongo_database_name: str) -> None:
    from tests.cli.test_cli import Process, _schedule_naps

    _schedule_naps(mongodb_uri, mongo_database_name, ("quick", 0.0))
    port = free_port()
    worker = Process(
        *("worker", "tests.cli.cli_jobs:jobs", "--uri", mongodb_uri),
        *("--database", mongo_database_name, "--poll-interval", "0.1", "--log-level", "INFO"),
        *("--metrics-port", str(port)),
    )
    try:
        worker.wait_for("serving Prometheus metrics")
        worker.wait_for("job quick finished")
        deadline = time.monotonic() + 15
        while True:
            samples = scrape(port)
            done = value(samples, "dogs_executions_total", job_name="nap", outcome="succeeded")
            if done == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert done == 1, worker.text()
        assert value(samples, "dogs_execution_duration_seconds_count", job_name="nap") == 1
        assert value(samples, "dogs_jobs_scheduled_total", job_name="nap") is None, (
            "scheduled by another process"
        )
        refreshed = value(samples, "dogs_gauges_refreshed_timestamp_seconds")
        assert refreshed is not None
        assert refreshed > 0, "the gauges were read from the store at start"
        assert any(name == "process_cpu_seconds_total" for name, _ in samples), (
            "the default registry, with the process metrics"
        )
    finally:
        worker.signal(2)
        code = worker.wait(timeout=15)
        worker.kill()
    assert code == 0, worker.text()


def test_dogs_worker_metrics_port_out_of_range() -> None:
    from typer.testing import CliRunner

    from dogs_cli import app

    result = CliRunner().invoke(
        app, ["worker", "tests.cli.cli_jobs:jobs", "--database", "app", "--metrics-port", "70000"]
    )
    assert result.exit_code == 2, result.output
    assert "--metrics-port 70000" in result.stderr


def test_workflows_are_counted(metrics: PrometheusMetrics) -> None:
    from dogs_core.domain.events import WorkflowFinished, WorkflowStartEnded, WorkflowStepReleased

    hub = Telemetry()
    metrics.attach(hub)
    hub.emit(WorkflowStartEnded(1, "w1", "import", 4, released=1, duration=0.01))
    hub.emit(WorkflowStartEnded(2, "w2", None, 4, 0, 0.01, error=RuntimeError("down")))
    for step in ("s2", "s3"):
        hub.emit(WorkflowStepReleased("w1", step, f"r-{step}"))
    hub.emit(WorkflowFinished("w1", "completed"))
    samples = registry_samples(metrics)
    assert value(samples, "dogs_workflows_started_total") == 1
    assert value(samples, "dogs_workflow_steps_released_total") == 2
    assert value(samples, "dogs_workflows_finished_total", state="completed") == 1


def test_expired_jobs_are_counted() -> None:
    """Issue 27: a job discarded at its start deadline counts in ``dogs_jobs_expired_total``;
    a replace or a debounce is not a scheduled record."""
    from dogs_core.domain.events import JobExpired, JobScheduled
    from dogs_core.domain.records import ClaimedJob, JobType

    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    job = ClaimedJob("j", "e", "send_report", JobType.EVENT, None, 1, 100, at)
    metrics(JobExpired(job, at))
    metrics(JobScheduled(1, "send_report", "j", at, 100, outcome="debounced"))
    metrics(JobScheduled(1, "send_report", "k", at, 100))
    labels = {"job_name": "send_report"}
    assert registry.get_sample_value("dogs_jobs_expired_total", labels) == 1
    assert registry.get_sample_value("dogs_jobs_scheduled_total", labels) == 1
