"""What telemetry costs the hot path: the in-memory throughput with and without subscribers.

Each scenario schedules N no-op event jobs on a fresh in-memory store, runs one ``Workers``
instance (workers_count 32, n_partitions 8, as ``benchmarks.throughput``) on a ``Telemetry`` hub
of its own until every record is gone, and reports jobs/s and CPU microseconds per job of that
run (scheduling is not timed). The modes differ only in what listens on the hub:

- ``none``: nobody (the hub is idle: the runtime checks ``hub.active`` and builds no event);
- ``noop``: one subscriber that counts the events it is given;
- ``prometheus``: :class:`dogs_integrations.prometheus.PrometheusMetrics` on a registry of its own;
- ``otel``: :class:`dogs_integrations.otel.OpenTelemetryTracing` on an SDK ``TracerProvider``
  whose ``SimpleSpanProcessor`` hands every span to an exporter that only counts them.

Every run checks that each job ran exactly once (the handler counts each job's index, no record
is left) and that the subscriber saw every execution. The modes are interleaved round by round
(``--repeat``) in one process, so a drift of the machine hits each alike; a row is the best run.
``--calls`` adds one run per mode under cProfile and reports the Python function calls per job:
a count of work that, unlike jobs/s on a shared machine, the machine's load does not change.

Run it from the project root::

    python -m benchmarks.telemetry_overhead --calls       # 10,000 jobs, best of 3
    python -m benchmarks.telemetry_overhead --quick       # CI size
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import anyio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

from benchmarks.support.cli import add_out, add_quick, new_parser
from benchmarks.support.report import (
    announce,
    best_runs,
    command_line,
    exit_status,
    fmt,
    machine_summary,
    markdown_table,
    new_console,
    outcome,
    print_table,
    spread,
    write_results,
)
from benchmarks.support.stores import TimedStore
from dogs_core import DogsClient, Jobs, ScheduleItem, Workers
from dogs_core.domain.events import Event
from dogs_core.runtime.plumbing.telemetry import Telemetry
from dogs_integrations.otel import OpenTelemetryTracing
from dogs_integrations.prometheus import PrometheusMetrics
from dogs_testing import InMemoryJobStore

__all__ = ["MODES", "Run", "main"]

MODES: Final = ("none", "noop", "prometheus", "otel")
JOB_NAME: Final = "noop"
SCHEDULE_BATCH: Final = 1_000
HEADERS: Final = ("Subscriber", "Jobs", "Time (s)", "Jobs/s", "vs none", "CPU µs/job",
                  "Events/job", "Calls/job", "Jobs/s spread", "Result")  # fmt: skip


@dataclass(slots=True)
class Run:
    mode: str
    jobs: int
    round: int
    seconds: float | None = None
    jobs_per_second: float | None = None
    cpu_us_per_job: float | None = None
    events: int | None = None
    calls_per_job: float | None = None
    failures: list[str] = field(default_factory=list)
    all_jobs_per_second: list[float] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "FAILED" if self.failures else "ok"


class CountingExporter(SpanExporter):
    """An exporter that keeps nothing: it counts the execution spans handed to it."""

    def __init__(self) -> None:
        self.runs = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.runs += sum(1 for span in spans if span.name.startswith("run "))
        return SpanExportResult.SUCCESS


class CountingSubscriber:
    """The trivial subscriber: one increment per event."""

    def __init__(self) -> None:
        self.events = 0

    def __call__(self, event: Event) -> None:
        self.events += 1


def subscribe(mode: str, hub: Telemetry, jobs: int) -> Callable[[Run], None]:
    """Put ``mode``'s subscriber on ``hub``; returns the check run after the workers stop."""
    counter = CountingSubscriber()
    if mode == "noop":
        hub.subscribe(counter)

    def check_counts(run: Run) -> None:
        if mode == "noop":
            run.events = counter.events
        if mode == "none" and hub.active:
            run.failures.append("the idle hub was active")

    if mode == "prometheus":
        metrics = PrometheusMetrics(registry=CollectorRegistry())
        metrics.attach(hub)

        def check(run: Run) -> None:
            check_counts(run)
            labels = {"job_name": JOB_NAME, "outcome": "succeeded"}
            seen = metrics.registry.get_sample_value("dogs_executions_total", labels)
            if seen != jobs:
                run.failures.append(f"dogs_executions_total is {seen}, expected {jobs}")

        return check
    if mode == "otel":
        exporter = CountingExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        OpenTelemetryTracing(tracer_provider=provider).attach(hub)

        def check_spans(run: Run) -> None:
            check_counts(run)
            if exporter.runs != jobs:
                run.failures.append(f"{exporter.runs} run spans, expected {jobs}")
            provider.shutdown()

        return check_spans
    return check_counts


async def run_one(
    mode: str, jobs_count: int, round_: int, workers_count: int, *, profile: bool = False
) -> Run:
    """One run of ``mode``; ``profile``: under cProfile, to count the Python function calls
    per job (a measure of work that the load of the machine does not change)."""
    run = Run(mode, jobs_count, round_)
    profiler = cProfile.Profile() if profile else None
    jobs = Jobs()
    seen: collections.Counter[int] = collections.Counter()

    @jobs.event(name=JOB_NAME)
    async def noop(params: dict[str, Any], ctx: object) -> None:
        seen[params["i"]] += 1

    hub = Telemetry()
    check = subscribe(mode, hub, jobs_count)
    store = InMemoryJobStore()
    client = DogsClient(store, jobs, n_partitions=8, telemetry=hub)
    for start in range(0, jobs_count, SCHEDULE_BATCH):
        stop = min(start + SCHEDULE_BATCH, jobs_count)
        await client.schedule_many(
            noop, [ScheduleItem(params={"i": i}) for i in range(start, stop)]
        )
    timed = TimedStore(store)  # as benchmarks.throughput: done when every record is deleted
    timed.expect(jobs_count)
    workers = Workers(
        timed, jobs, workers_count=workers_count, n_partitions=8, poll_interval=1, telemetry=hub
    )
    began, cpu_began = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    async with workers:
        with anyio.move_on_after(120):
            await timed.done.wait()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        if profiler is not None:
            profiler.disable()
            run.calls_per_job = pstats.Stats(profiler).total_calls / jobs_count  # type: ignore[attr-defined]
        await workers.stop()
    run.seconds = seconds
    run.jobs_per_second = jobs_count / seconds
    run.cpu_us_per_job = cpu / jobs_count * 1e6
    if await store.find_records(job_name=JOB_NAME, limit=1):
        run.failures.append("records are left")
    if len(seen) != jobs_count or any(count != 1 for count in seen.values()):
        twice = sum(1 for count in seen.values() if count != 1)
        run.failures.append(f"{len(seen)} of {jobs_count} jobs ran, {twice} more than once")
    check(run)
    return run


def best_of_modes(runs: Sequence[Run]) -> list[Run]:
    """Per mode, in the order of :data:`MODES`, the run with the most jobs/s (a FAILED run wins,
    to be seen)."""
    rows = best_runs(
        runs,
        key=lambda r: r.mode,
        rate=lambda r: r.jobs_per_second,
        failed=lambda r: bool(r.failures),
    )
    for best, rates in rows:
        best.all_jobs_per_second = rates
    return sorted((best for best, _ in rows), key=lambda r: MODES.index(r.mode))


def table_rows(rows: Sequence[Run], calls: dict[str, float]) -> list[list[str]]:
    base = next((r.jobs_per_second for r in rows if r.mode == "none"), None)
    out = []
    for r in rows:
        ratio = (r.jobs_per_second / base) if base and r.jobs_per_second else None
        per_job = (r.events / r.jobs) if r.events is not None else None
        out.append(
            [
                r.mode,
                f"{r.jobs:,}",
                fmt(r.seconds, ".2f"),
                fmt(r.jobs_per_second, ",.0f"),
                "–" if ratio is None else f"{ratio:.0%}",
                fmt(r.cpu_us_per_job, ",.0f"),
                fmt(per_job, ".1f"),
                fmt(calls.get(r.mode), ".1f"),
                spread(r.all_jobs_per_second, fewest=1),
                outcome(r.failures, r.status),
            ]
        )
    return out


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "telemetry_overhead",
        "In-memory jobs/s and CPU per job with no, a trivial, the Prometheus and the "
        "OpenTelemetry subscriber.",
    )
    parser.add_argument("--jobs", type=int, default=None, help="jobs per run (10000)")
    parser.add_argument("--workers-count", type=int, default=32)
    parser.add_argument("--mode", action="append", choices=MODES, help="repeatable; default all")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every mode (3)")
    add_quick(parser, "1,000 jobs, 1 round")
    parser.add_argument(
        "--calls",
        action="store_true",
        help="one more run per mode under cProfile: Python function calls per job",
    )
    add_out(parser, "telemetry_overhead.md/.json")
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs = 1_000 if args.quick else 10_000
    if args.quick:
        args.repeat = 1
    if args.jobs < 1 or args.repeat < 1 or args.workers_count < 1:
        parser.error("--jobs, --repeat and --workers-count must be at least 1")
    return args


async def _run_all(
    args: argparse.Namespace, modes: Sequence[str]
) -> tuple[list[Run], dict[str, float]]:
    runs = []
    for round_ in range(1, args.repeat + 1):
        for mode in modes:
            runs.append(await run_one(mode, args.jobs, round_, args.workers_count))
    calls: dict[str, float] = {}
    if args.calls:
        for mode in modes:
            profiled = await run_one(mode, args.jobs, 0, args.workers_count, profile=True)
            runs.append(profiled)
            if profiled.calls_per_job is not None:
                calls[mode] = profiled.calls_per_job
    return runs, calls


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    modes = list(dict.fromkeys(args.mode or MODES))
    console = new_console()
    announce(console)
    runs, calls = anyio.run(_run_all, args, modes, backend="asyncio")
    rows = best_of_modes([r for r in runs if r.calls_per_job is None])
    title = (
        f"Telemetry overhead: in-memory store, workers_count={args.workers_count}, "
        f"n_partitions=8, async no-op handler, best of {args.repeat}"
    )
    print_table(console, title, HEADERS, table_rows(rows, calls))
    if args.out is not None:
        command = command_line("benchmarks.telemetry_overhead", argv)
        report = "\n\n".join(
            [
                "# Telemetry overhead",
                f"Command: `{command}`",
                f"Machine: {machine_summary()}.",
                title + ". Rounds interleave the modes in one process.",
                markdown_table(HEADERS, table_rows(rows, calls)),
            ]
        )
        write_results(
            args.out,
            "telemetry_overhead",
            report + "\n",
            {"machine": machine_summary(), "command": command, "runs": [asdict(r) for r in runs]},
        )
        console.print(f"wrote {args.out / 'telemetry_overhead.md'} and telemetry_overhead.json")
    return exit_status(console, sum(1 for r in runs if r.failures), "run")


if __name__ == "__main__":
    raise SystemExit(main())
