"""Workflows on the real mongod: workflow steps per second against plain jobs per second in the
same sitting, and the release latency (a dependency's end to its dependent's start).

Scenarios, one after the other on one server, each with one ``Workers`` instance
(``workers_count=32``, ``n_partitions=8``, change streams on) and no-op async handlers:

- ``plain jobs``: N event jobs scheduled with ``schedule_many``, then drained: jobs/s.
- ``fan-out/fan-in``: W workflows of 10 steps each (one root, 8 steps after it, one join after
  the 8), all started first (``start_workflows``, 100 a call, timed apart), then run: steps/s
  from the workers' start to the end of the last workflow; every release goes through the
  settle path's hand-over, the step lookup, the end's compare-and-set, the dependents and a
  release transaction.
- ``batch``: one batch of B items and one callback (``Batch.then``): started in one call (its
  time reported), then run: steps/s, and the callback's delay after the last item's end.
- ``chain (idle)``: C steps one after another, so that exactly one step runs at a time: the
  release latency of an idle fleet, from a step's end (``endedAt`` of its history row) to its
  dependent's start (``startedAt`` of the dependent's row), both on this machine's clock.

The latency of every non-root step is also reported for ``fan-out/fan-in`` (a loaded fleet:
a released step may wait for a free slot). Targets: steps/s of each workflow scenario at least
0.5x the plain jobs/s; idle release latency p50 <= 20 ms and p99 <= 100 ms. Each scenario checks
itself: every workflow ended ``succeeded``, every step ran exactly once (one success row per
step, none other), no record is left. Exit 1 when a check fails.

Run it as a module from the project root::

    python -m benchmarks.workflows               # 10,000 jobs, 1,000 x 10 steps, 10,000 + 1
    python -m benchmarks.workflows --quick       # CI size
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient
from rich.console import Console

from benchmarks.support.cli import add_out, add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.report import (
    announce,
    command_line,
    exit_status,
    fmt,
    markdown_table,
    new_console,
    outcome,
    publish,
    report_header,
    targets_section,
)
from benchmarks.support.server import MongoServer, scratch_database, serving
from benchmarks.support.timing import percentile
from dogs_core import DogsClient, JobContext, Jobs, ScheduleItem, Workers
from dogs_core.domain.workflow_records import WorkflowState
from dogs_core.domain.workflows import Batch, Workflow
from dogs_mongo import AsyncMongoJobStore

__all__ = ["main"]

WORKERS_COUNT: Final = 32
N_PARTITIONS: Final = 8
FAN_OUT: Final = 8  # steps between the root and the join of a fan-out/fan-in workflow
START_CHUNK: Final = 100  # fan-out/fan-in workflows started by one start_workflows call
TARGET_RATIO: Final = 0.5
TARGET_P50_MS: Final = 20.0
TARGET_P99_MS: Final = 100.0

jobs = Jobs()


@jobs.event
async def noop(params: Any, ctx: JobContext) -> None:
    return None


@dataclass
class Result:
    scenario: str
    units: int
    seconds: float | None = None
    start_seconds: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    callback_delay_ms: float | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return None if not self.seconds else self.units / self.seconds


async def _drained(store: AsyncMongoJobStore) -> None:
    while await store.records_collection.count_documents({}, limit=1):  # noqa: ASYNC110
        await anyio.sleep(0.05)


def _workers(store: AsyncMongoJobStore) -> Workers:
    return Workers(
        store,
        jobs,
        workers_count=WORKERS_COUNT,
        n_partitions=N_PARTITIONS,
        poll_interval=1,
        watch_changes=True,
        probe_enabled=False,
    )


async def plain_jobs(store: AsyncMongoJobStore, count: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result("plain jobs", count)
    for start in range(0, count, 1000):
        items = [ScheduleItem(params={"n": n}) for n in range(start, min(count, start + 1000))]
        await client.schedule_many(noop, items)
    began = time.perf_counter()
    async with _workers(store) as workers:
        await _drained(store)
        result.seconds = time.perf_counter() - began
        await workers.stop()
    rows = await store.history_collection.count_documents({"status": "success"})
    if rows != count:
        result.failures.append(f"{rows} success rows for {count} jobs")
    return result


async def _run_workflows(
    store: AsyncMongoJobStore, client: DogsClient, ids: Sequence[str], result: Result
) -> list[Any]:
    """Run the workers until no workflow is running, watched as ``plain jobs`` watches its
    records (a count every 50 ms, so that both sides pay the same for being watched), then
    read the workflows with ``wait_for_workflows``."""
    began = time.perf_counter()
    async with _workers(store) as workers:
        running = {"state": WorkflowState.RUNNING.value}
        while await store.workflows_collection.count_documents(running, limit=1):  # noqa: ASYNC110
            await anyio.sleep(0.05)
        result.seconds = time.perf_counter() - began
        await workers.stop()
    return await client.wait_for_workflows(ids, timeout=60)


async def _check(store: AsyncMongoJobStore, views: Sequence[Any], result: Result) -> None:
    """Every workflow succeeded; every step ran once; nothing is left."""
    states = {view.state for view in views}
    if states != {WorkflowState.SUCCEEDED}:
        result.failures.append(f"workflow states {sorted(s.value for s in states)}")
    steps = sum(len(view.steps) for view in views)
    rows = await store.history_collection.count_documents({"status": "success"})
    others = await store.history_collection.count_documents({"status": {"$ne": "success"}})
    if rows != steps or others:
        result.failures.append(f"{rows} success and {others} other rows for {steps} steps")
    if await store.records_collection.count_documents({}, limit=1):
        result.failures.append("records left")


async def _latencies(store: AsyncMongoJobStore, views: Sequence[Any]) -> list[float]:
    """For each step with dependencies: its start minus its dependencies' last end (ms)."""
    rows: dict[str, tuple[datetime, datetime]] = {}
    async for doc in store.history_collection.find({}, {"jobId": 1, "startedAt": 1, "endedAt": 1}):
        rows[doc["jobId"]] = (doc["startedAt"], doc["endedAt"])
    latencies = []
    for view in views:
        records = {step.id: step.record_id for step in view.steps}
        for step in view.steps:
            if not step.after or step.record_id not in rows:
                continue
            ends = [rows[records[p]][1] for p in step.after if records.get(p) in rows]
            if ends:
                delay = rows[step.record_id][0] - max(ends)
                latencies.append(delay.total_seconds() * 1000)
    return latencies


async def fan_out_fan_in(store: AsyncMongoJobStore, workflows: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result("fan-out/fan-in", workflows * (FAN_OUT + 2))
    began = time.perf_counter()
    ids = []
    flows = []
    for n in range(workflows):
        wf = Workflow(f"fan-{n}")
        root = wf.add(noop, {"n": n}, name="root")
        middle = [wf.add(noop, {"k": k}, after=[root]) for k in range(FAN_OUT)]
        wf.add(noop, name="join", after=middle)
        flows.append(wf)
    for start in range(0, workflows, START_CHUNK):
        started = await client.start_workflows(flows[start : start + START_CHUNK])
        ids += [workflow.id for workflow in started]
    result.start_seconds = time.perf_counter() - began
    views = await _run_workflows(store, client, ids, result)
    await _check(store, views, result)
    result.latencies_ms = await _latencies(store, views)
    return result


async def batch(store: AsyncMongoJobStore, items: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result("batch", items + 1)
    work = Batch("bench")
    for n in range(items):
        work.add(noop, {"n": n})
    work.then(noop, name="callback")
    began = time.perf_counter()
    started = await client.start_workflow(work)
    result.start_seconds = time.perf_counter() - began
    views = await _run_workflows(store, client, [started.id], result)
    await _check(store, views, result)
    latencies = await _latencies(store, views)
    result.callback_delay_ms = latencies[0] if latencies else None
    return result


async def chain(store: AsyncMongoJobStore, length: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result("chain (idle)", length)
    wf = Workflow("chain")
    previous = None
    for n in range(length):
        previous = wf.add(noop, {"n": n}, after=previous)
    began = time.perf_counter()
    started = await client.start_workflow(wf)
    result.start_seconds = time.perf_counter() - began
    views = await _run_workflows(store, client, [started.id], result)
    await _check(store, views, result)
    result.latencies_ms = await _latencies(store, views)
    return result


async def run_all(server: MongoServer, args: argparse.Namespace, console: Console) -> list[Result]:
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(server.uri, tz_aware=True)
    results = []
    scenarios = [
        ("plain jobs", plain_jobs, args.jobs),
        ("fan-out/fan-in", fan_out_fan_in, args.workflows),
        ("batch", batch, args.batch),
        ("chain (idle)", chain, args.chain),
    ]
    try:
        for label, scenario, size in scenarios:
            name = scratch_database("workflows")
            try:
                store = AsyncMongoJobStore(mongo, name)
                await store.setup()
                await store.setup_workflows()
                with console.status(f"{label}: {size:,}..."):
                    result = await scenario(store, int(size))
                console.print(f"{label}: {fmt(result.rate, ',.0f')} /s")
                results.append(result)
            finally:
                await mongo.drop_database(name)
    finally:
        await mongo.close()
    return results


HEADERS: Final = (
    "Scenario",
    "Steps (jobs)",
    "Start (s)",
    "Run (s)",
    "Steps/s",
    "Ratio to plain jobs/s",
    "Release latency p50 / p90 / p99 / max (ms)",
    "Result",
)


def _latency_cell(result: Result) -> str:
    if result.callback_delay_ms is not None:
        return f"callback {result.callback_delay_ms:.1f} after the last item"
    values = result.latencies_ms
    if not values:
        return "–"
    points = [percentile(values, q) for q in (0.5, 0.9, 0.99)]
    return " / ".join(f"{p:.1f}" for p in [*points, max(values)])


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    plain = next((r.rate for r in results if r.scenario == "plain jobs"), None)
    rows = []
    for r in results:
        ratio = (
            None if r.rate is None or not plain or r.scenario == "plain jobs" else r.rate / plain
        )
        rows.append(
            [
                r.scenario,
                f"{r.units:,}",
                fmt(r.start_seconds, ".2f"),
                fmt(r.seconds, ".2f"),
                fmt(r.rate, ",.0f"),
                fmt(ratio, ".2f"),
                _latency_cell(r),
                outcome(r.failures),
            ]
        )
    return rows


def targets(results: Sequence[Result]) -> list[str]:
    lines = []
    plain = next((r.rate for r in results if r.scenario == "plain jobs"), None)
    for r in results:
        if r.scenario in ("fan-out/fan-in", "batch") and r.rate and plain:
            ratio = r.rate / plain
            met = "met" if ratio >= TARGET_RATIO else "NOT met"
            lines.append(
                f"{r.scenario}: {r.rate:,.0f} steps/s, {ratio:.2f}x the plain {plain:,.0f} "
                f"jobs/s (target >= {TARGET_RATIO}x): {met}"
            )
        if r.scenario == "chain (idle)" and r.latencies_ms:
            p50 = percentile(r.latencies_ms, 0.5)
            p99 = percentile(r.latencies_ms, 0.99)
            met = "met" if p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS else "NOT met"
            lines.append(
                f"idle release latency: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                f"(target p50 <= {TARGET_P50_MS:g} ms and p99 <= {TARGET_P99_MS:g} ms): {met}"
            )
    return lines


def markdown_report(results: Sequence[Result], server: MongoServer, command: str) -> str:
    lines = report_header("Workflows benchmark", command, server)
    lines += [
        f"One `Workers` instance (workers_count={WORKERS_COUNT}, n_partitions={N_PARTITIONS}, "
        "change streams on), no-op async handlers, every scenario in this one sitting. "
        "Release latency: a step's start minus its dependencies' last end, from their history "
        "rows.",
        "",
        markdown_table(HEADERS, table_rows(results)),
        "",
    ]
    lines += targets_section(targets(results))
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("workflows", "Workflow steps/s against plain jobs/s; release latency.")
    parser.add_argument("--jobs", type=int, default=None, help="plain jobs (10000)")
    parser.add_argument("--workflows", type=int, default=None, help="10-step workflows (1000)")
    parser.add_argument("--batch", type=int, default=None, help="batch items (10000)")
    parser.add_argument("--chain", type=int, default=None, help="chain steps (300)")
    add_uri(parser)
    add_quick(parser)
    add_out(parser, "workflows.md/.json")
    args = parser.parse_args(argv)
    fill_sizes(
        args, jobs=(200, 10_000), workflows=(10, 1_000), batch=(100, 10_000), chain=(20, 300)
    )
    if min(args.jobs, args.workflows, args.batch, args.chain) < 1:
        parser.error("--jobs, --workflows, --batch and --chain must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    command = command_line("benchmarks.workflows", argv)
    console = new_console()
    announce(console, command)
    with serving(args.uri, console) as server:
        results = anyio.run(run_all, server, args, console, backend="asyncio")
        publish(
            console,
            "workflows",
            title=f"Workflows, MongoDB {server.version}",
            headers=HEADERS,
            rows=table_rows(results),
            targets=targets(results),
            server=server,
            command=command,
            out=args.out,
            markdown=lambda: markdown_report(results, server, command),
            results=[asdict(r) for r in results],
        )
    return exit_status(console, sum(bool(r.failures) for r in results), "scenario")


if __name__ == "__main__":
    raise SystemExit(main())
