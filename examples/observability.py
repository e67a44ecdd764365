"""Tracing and metrics together: OpenTelemetry spans and Prometheus metrics of one worker run.

    pip install 'dogs-py[otel,prometheus]' opentelemetry-sdk
    python examples/observability.py                 # the in-memory store
    python examples/observability.py --uri mongodb://localhost:27017/?replicaSet=rs0

Both integrations subscribe to one telemetry hub that the client and the workers share (an
application would use the process-wide one: ``OpenTelemetryTracing().attach()``). Spans go to
an in-memory exporter here, to print them; in production the SDK would export them with OTLP.
The metrics are served on a free local port and scraped once, as Prometheus would, after one
refresh of the store gauges. With ``--uri`` it uses a fresh database on your server and drops it
at the end. See docs/tracing-and-metrics.md.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import anyio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from dogs_core import JobContext, Jobs, telemetry
from dogs_integrations.otel import OpenTelemetryTracing
from dogs_integrations.prometheus import PrometheusMetrics, serve_metrics
from dogs_mongo import Example, run_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()
provider = TracerProvider()
exporter = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("example")


@jobs.event(max_tries=1)
async def render_invoice(params: dict[str, int], ctx: JobContext) -> None:
    with tracer.start_as_current_span("render pdf"):  # a child of the execution's span
        await anyio.sleep(0.01)
    if params["order"] == 3:
        raise ValueError("order 3 has no address")


def runs_ended() -> int:
    return sum(1 for span in exporter.get_finished_spans() if span.name.startswith("run "))


def describe(spans: Sequence[ReadableSpan]) -> None:
    by_id = {span.context.span_id: span for span in spans if span.context is not None}
    runs = [span for span in spans if span.name.startswith("run ")]
    schedules = [span for span in spans if span.name.startswith("schedule ")]
    print(f"spans: {len(schedules)} schedule, {len(runs)} run")
    linked = all(len(run.links) == 1 and run.links[0].context.span_id in by_id for run in runs)
    print(f"every run span links to its schedule span: {linked}")
    children = [span for span in spans if span.name == "render pdf"]
    parented = all(
        child.parent is not None and by_id[child.parent.span_id].name == "run render_invoice"
        for child in children
    )
    print(f"every 'render pdf' span is a child of a run span: {parented}")
    for run in sorted(runs, key=lambda span: span.start_time or 0):
        attributes = run.attributes or {}
        print(
            f"  {run.name} tries={attributes.get('dogs.job.tries')} "
            f"outcome={attributes.get('dogs.job.outcome')} status={run.status.status_code.name}"
        )


def scrape(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    shown = (
        "dogs_executions_total{",
        "dogs_jobs_scheduled_total{",
        'dogs_jobs{job_name="later",state="scheduled"}',
        'dogs_jobs{job_name="render_invoice",state="failed"}',
    )
    for line in sorted(text.splitlines()):
        if line.startswith(shown):
            print(f"  {line}")


async def run(example: Example) -> None:
    hub = telemetry.Telemetry()
    OpenTelemetryTracing(tracer_provider=provider).attach(hub)
    metrics = PrometheusMetrics(registry=CollectorRegistry())
    metrics.attach(hub)

    later = Jobs()

    @later.event(name="later")
    async def later_job(params: object, ctx: JobContext) -> None:
        pass

    example.container.telemetry.override(hub)  # the container's clients and workers report there
    client = example.client(jobs)
    for order in (1, 2, 3):
        await client.schedule(render_invoice, {"order": order})
    await example.client(later).schedule(later_job, run_in=timedelta(hours=1))
    async with example.workers(jobs, poll_interval="100ms") as workers:
        with anyio.fail_after(30):
            while runs_ended() < 3:  # noqa: ASYNC110 - the exporter's count
                await anyio.sleep(0.02)
        await workers.stop()
    await metrics.refresh(example.store, now=datetime.now(UTC))
    describe(exporter.get_finished_spans())
    _, port, stop = serve_metrics(0, "127.0.0.1", registry=metrics.registry)
    try:
        print("scraped http://127.0.0.1:<port>/metrics:")
        await anyio.to_thread.run_sync(scrape, port)
    finally:
        stop()


def main(argv: Sequence[str] | None = None) -> None:
    exporter.clear()
    run_example(
        run,
        argv,
        name="observability",
        memory=InMemoryJobStore,
        description="Dogs: OpenTelemetry spans and Prometheus metrics",
    )


if __name__ == "__main__":
    main()
