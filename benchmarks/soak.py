"""Soak: many jobs through two worker processes for a long time, with faults injected at random.

It starts ``--workers`` processes of :mod:`benchmarks.soak_worker` (each a ``Workers`` instance on
``AsyncMongoJobStore`` under :class:`~dogs_testing.faults.FaultyJobStore`: transient errors
before the call, ambiguous ones after it, short delays), and a producer that schedules ``--jobs``
event jobs at a steady pace over ``--minutes`` (a small backlog first, then a batch every half
second), so the run lasts at least ``--minutes``. The jobs are a mix: no-ops, short sleeps (5-50
ms), jobs that fail on their first try and succeed on the retry, and a recurrent job every 3 s.

Every ``--sample-every`` seconds each worker reports its RSS, open file descriptors and asyncio
task count, and the soak reads the history collection's size (count and ``collStats`` size) and
the backlog. It checks, and exits 1 when one fails:

- **no growth after warm-up**: the first third of the run is warm-up; per worker, the RSS peak
  of the last third may not exceed the middle third's by more than 5% of it or 4 MiB (the
  larger), and the medians of descriptors and tasks (which go up and down with the executions
  in flight) by more than ``workers_count`` (at least 4: each execution in flight holds a task
  and may hold a pooled connection, which the pool opens the first time that many run at once,
  so a backlog that rises in the last third raises the median by up to that much while a leak
  keeps climbing). The slope over
  the second half (per minute, least squares) is reported beside each;
- no ERROR log line in the workers other than the flaky jobs' first tries;
- **0 lost**: every scheduled job has its success marker (``runs``, one per job key) and exactly
  one ``success`` history row, or ended known (``maxTriesReached``); no event record is left;
- **0 run twice**: no second success marker of a key (``doubles``) and no job with two success
  history rows.

The workers are never killed: after a SIGKILL a job may run twice by design (at-least-once, see
docs/reliability.md), which this soak would count as a failure. Crashes are the crash test's.

Run it as a module from the project root::

    python -m benchmarks.soak                   # 200,000 jobs, >= 20 minutes
    python -m benchmarks.soak --quick           # CI size: 2,000 jobs, 24 s
    python -m benchmarks.soak --json soak.json --chart docs/images/soak-rss.svg
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream
from pymongo import AsyncMongoClient
from rich.console import Console

from benchmarks import soak_worker
from benchmarks.support.cli import add_quick, add_uri, new_parser
from benchmarks.support.report import (
    announce,
    atomic_write,
    command_line,
    dump_json,
    machine_summary,
    new_console,
    print_table,
)
from benchmarks.support.server import scratch_database, serving
from dogs_core import DogsClient, ScheduleItem
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo.queries import DEFAULT_HISTORY_COLLECTION, DEFAULT_RECORDS_COLLECTION

__all__ = ["GrowthCheck", "SoakResult", "growth_check", "main", "rss_chart_svg"]

FULL_JOBS: Final = 200_000
FULL_MINUTES: Final = 20.0
QUICK_JOBS: Final = 2_000
QUICK_MINUTES: Final = 0.4
QUICK_SAMPLE_EVERY: Final = 3.0
BATCH_EVERY: Final = 0.5
MAX_BATCH: Final = 1_000
BACKLOG_FRACTION: Final = 0.02
MIX: Final = (("noop", 0.55), ("sleep", 0.35), ("flaky", 0.10))
WORKER_SCRIPT: Final = Path(soak_worker.__file__)
CHART_MIN_SPAN_MIB: Final = 20.0


# -- growth after warm-up ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrowthCheck:
    """One metric of one worker: the peaks of the middle and last thirds, and the verdict."""

    worker: int
    metric: str
    statistic: str
    warmup_end: float
    middle: float
    last: float
    margin: float
    slope_per_min: float
    ok: bool


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, value)`` points, per minute (NaN for < 2 points)."""
    if len(points) < 2:
        return float("nan")
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return float("nan")
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def growth_check(
    worker: int,
    metric: str,
    points: Sequence[tuple[float, float]],
    *,
    margin: float,
    relative: float = 0.0,
    statistic: str = "peak",
) -> GrowthCheck:
    """No growth after warm-up: ``points`` (seconds since start, value) split in three by
    time; the last third's ``statistic`` (``"peak"`` or ``"median"``) must stay within
    ``max(margin, relative * middle)`` of the middle third's."""
    if statistic not in ("peak", "median"):
        raise ValueError(f"statistic must be 'peak' or 'median', got {statistic!r}")
    if len(points) < 3:
        nan = math.nan
        return GrowthCheck(worker, metric, statistic, 0.0, nan, nan, margin, nan, False)
    start, end = points[0][0], points[-1][0]
    third = (end - start) / 3
    middle = [v for t, v in points if start + third <= t < start + 2 * third] or [points[1][1]]
    last = [v for t, v in points if t >= start + 2 * third]
    second_half = [(t, v) for t, v in points if t >= start + (end - start) / 2]
    summary = max if statistic == "peak" else statistics.median
    middle_value, last_value = float(summary(middle)), float(summary(last))
    margin = max(margin, relative * middle_value)
    return GrowthCheck(
        worker=worker,
        metric=metric,
        statistic=statistic,
        warmup_end=start + third,
        middle=middle_value,
        last=last_value,
        margin=margin,
        slope_per_min=slope_per_minute(second_half),
        ok=last_value <= middle_value + margin,
    )


def margins(metric: str, workers_count: int) -> tuple[str, float, float]:
    """How a metric is compared from the middle to the last third: the statistic and the
    allowed rise (absolute, relative to the middle value; the larger applies). RSS hardly ever
    shrinks, so its peak is compared; descriptors and tasks go up and down with the executions
    in flight at the instant of a sample, so their medians are (a leak moves the median)."""
    if metric == "rss_mib":
        return "peak", 4.0, 0.05
    # Descriptors as tasks: each execution in flight may hold a pooled connection, and a pool
    # opens one more the first time that many run at once (it never closes them), which a
    # backlog peaking late does in the last third; a leak keeps climbing past that bound.
    return "median", max(4.0, float(workers_count)), 0.0


# -- the worker processes ------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    """One worker subprocess and what it reported."""

    index: int
    process: anyio.abc.Process
    samples: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    warnings: int = 0
    designed_failures: int = 0
    """ERROR lines of the flaky jobs' first tries (expected)."""
    errors: int = 0
    last_errors: list[str] = field(default_factory=list)

    async def read_stdout(self) -> None:
        assert self.process.stdout is not None
        buffer = ""
        async for chunk in TextReceiveStream(self.process.stdout):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                self._line(line)

    def _line(self, line: str) -> None:
        try:
            payload = json.loads(line)
        except json.JSONDecodeError:
            return
        kind = payload.get("type")
        if kind == "ready":
            self.ready.set()
        elif kind == "sample":
            self.samples.append(payload)
        elif kind == "final":
            self.final = payload

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(self.process.stderr, errors="replace"):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                if line.startswith("WARNING"):
                    self.warnings += 1
                elif line.startswith(("ERROR", "CRITICAL")) and soak_worker.FLAKY_MESSAGE in line:
                    self.designed_failures += 1
                elif line.startswith(("ERROR", "CRITICAL")):
                    self.errors += 1
                    self.last_errors = [*self.last_errors[-4:], line[:300]]


async def start_worker(
    index: int, uri: str, database: str, args: argparse.Namespace
) -> WorkerProcess:
    command = [
        sys.executable,
        str(WORKER_SCRIPT),
        uri,
        database,
        "--workers-count",
        str(args.workers_count),
        "--lock-time",
        str(args.lock_time),
        "--sample-every",
        str(args.sample_every),
        "--error-rate",
        str(args.error_rate),
        "--ambiguous-rate",
        str(args.ambiguous_rate),
        "--delay-rate",
        str(args.delay_rate),
        "--seed",
        str(args.seed + index),
    ]
    process = await anyio.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    return WorkerProcess(index, process)


# -- the run -------------------------------------------------------------------------------------


@dataclass
class SoakResult:
    """Everything measured; :attr:`failures` lists the checks that failed."""

    jobs: int
    minutes: float
    workers: int
    started_at: float = 0.0
    """Unix time the producer started (sample times are relative to it)."""
    elapsed_s: float = 0.0
    scheduled: int = 0
    markers: int = 0
    doubles: int = 0
    success_rows: int = 0
    jobs_with_two_successes: int = 0
    max_tries_reached: int = 0
    records_left: int = 0
    lost: int = 0
    ticks: int = 0
    history_samples: list[dict[str, Any]] = field(default_factory=list)
    worker_samples: list[list[dict[str, Any]]] = field(default_factory=list)
    worker_finals: list[dict[str, Any] | None] = field(default_factory=list)
    worker_log_lines: list[dict[str, int]] = field(default_factory=list)
    growth: list[GrowthCheck] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def job_items(rng: random.Random, first_key: int, count: int) -> list[ScheduleItem]:
    kinds = [kind for kind, _ in MIX]
    weights = [weight for _, weight in MIX]
    items = []
    for key in range(first_key, first_key + count):
        kind = rng.choices(kinds, weights)[0]
        params: dict[str, Any] = {"k": key, "kind": kind}
        if kind == "sleep":
            params["s"] = round(rng.uniform(0.005, 0.05), 4)
        items.append(ScheduleItem(params=params))
    return items


async def produce(client: DogsClient, result: SoakResult, rng: random.Random) -> None:
    """Schedule ``result.jobs`` at a steady pace over ``result.minutes`` (a backlog first)."""
    total, duration = result.jobs, result.minutes * 60
    backlog = min(total, max(1, int(total * BACKLOG_FRACTION)))
    started = time.monotonic()
    while result.scheduled < total:
        elapsed = time.monotonic() - started
        target = min(total, backlog + int((total - backlog) * min(1.0, elapsed / duration)))
        count = min(MAX_BATCH, target - result.scheduled)
        if count > 0:
            outcome = await client.schedule_many(
                soak_worker.JOB_NAME, job_items(rng, result.scheduled, count)
            )
            if outcome.errors or outcome.scheduled_count != count:
                raise RuntimeError(f"schedule_many: {outcome}")
            result.scheduled += count
        if result.scheduled < target:
            continue
        await anyio.sleep(BATCH_EVERY)


async def history_sample(database: Any, started: float) -> dict[str, Any]:
    """The history's size, the backlog of event records and the markers so far."""
    stats = await database.command("collStats", DEFAULT_HISTORY_COLLECTION)
    records = database[DEFAULT_RECORDS_COLLECTION]
    return {
        "t": time.time() - started,
        "history_count": int(stats.get("count", 0)),
        "history_mib": float(stats.get("size", 0)) / (1024 * 1024),
        "history_storage_mib": float(stats.get("storageSize", 0)) / (1024 * 1024),
        "backlog": await records.count_documents({"jobName": soak_worker.JOB_NAME}),
        "markers": await database[soak_worker.RUNS].estimated_document_count(),
    }


async def watch(
    database: Any, result: SoakResult, started: float, every: float, deadline: float
) -> None:
    """Sample the history every ``every`` seconds until the run is over: at least
    ``minutes`` passed, everything was scheduled and ran, no event record is left."""
    while True:
        sample = await history_sample(database, started)
        result.history_samples.append(sample)
        done = (
            sample["t"] >= result.minutes * 60
            and result.scheduled == result.jobs
            and sample["markers"] >= result.jobs
            and sample["backlog"] == 0
        )
        if done:
            return
        if time.time() > deadline:
            result.failures.append(
                f"not settled after {deadline - started:.0f} s: "
                f"{sample['markers']} markers of {result.jobs}, backlog {sample['backlog']}"
            )
            return
        await anyio.sleep(every)


async def stop_workers(workers: Sequence[WorkerProcess]) -> None:
    for worker in workers:
        if worker.process.returncode is None:
            worker.process.send_signal(signal.SIGTERM)
    with anyio.move_on_after(60):
        for worker in workers:
            await worker.process.wait()
    for worker in workers:
        if worker.process.returncode is None:
            worker.process.kill()
            await worker.process.wait()


async def run_soak(args: argparse.Namespace, uri: str, console: Console) -> SoakResult:
    result = SoakResult(jobs=args.jobs, minutes=args.minutes, workers=args.workers)
    database_name = scratch_database("soak")
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    database = mongo[database_name]
    store = AsyncMongoJobStore(mongo, database_name)
    await store.setup()
    workers: list[WorkerProcess] = []
    started = result.started_at = time.time()
    try:
        async with anyio.create_task_group() as group:
            for index in range(args.workers):
                worker = await start_worker(index, uri, database_name, args)
                workers.append(worker)
                group.start_soon(worker.read_stdout)
                group.start_soon(worker.read_stderr)
            with anyio.fail_after(60):
                for worker in workers:
                    await worker.ready.wait()
            console.print(f"{len(workers)} workers ready; producing {args.jobs:,} jobs")
            started = result.started_at = time.time()
            deadline = started + args.minutes * 60 + args.drain_limit
            client = DogsClient(store, soak_worker.build_jobs(database, soak_worker.Counters()))
            group.start_soon(produce, client, result, random.Random(args.seed))
            await watch(database, result, started, args.sample_every, deadline)
            result.elapsed_s = time.time() - started
            await stop_workers(workers)
            group.cancel_scope.cancel()
        await verify(database, result)
    finally:
        await stop_workers(workers)
        if not args.keep:
            await mongo.drop_database(database_name)
        await mongo.close()
    collect(result, workers, started, args.workers_count)
    return result


async def verify(database: Any, result: SoakResult) -> None:
    """0 lost, 0 run twice: the markers, the doubles and the success history rows per job."""
    history = database[DEFAULT_HISTORY_COLLECTION]
    records = database[DEFAULT_RECORDS_COLLECTION]
    result.markers = await database[soak_worker.RUNS].count_documents({})
    result.doubles = await database[soak_worker.DOUBLES].count_documents({})
    result.ticks = await database[soak_worker.TICKS].count_documents({})
    successes = {"jobName": soak_worker.JOB_NAME, "status": "success"}
    result.success_rows = await history.count_documents(successes)
    twice = await history.aggregate(
        [
            {"$match": successes},
            {"$group": {"_id": "$jobId", "n": {"$sum": 1}}},
            {"$match": {"n": {"$gt": 1}}},
            {"$count": "jobs"},
        ]
    )
    result.jobs_with_two_successes = sum(doc["jobs"] for doc in await twice.to_list())
    result.max_tries_reached = await records.count_documents(
        {"jobName": soak_worker.JOB_NAME, "status": "maxTriesReached"}
    )
    result.records_left = await records.count_documents({"jobName": soak_worker.JOB_NAME})
    result.lost = result.scheduled - result.markers - result.max_tries_reached
    checks = [
        (result.lost == 0, f"{result.lost} jobs lost (no marker, not maxTriesReached)"),
        (result.markers == result.scheduled, f"{result.markers} markers of {result.scheduled}"),
        (result.success_rows == result.markers, f"{result.success_rows} success rows"),
        (result.doubles == 0, f"{result.doubles} jobs ran twice (second marker)"),
        (result.jobs_with_two_successes == 0, "jobs with two success history rows"),
        (result.records_left == result.max_tries_reached, f"{result.records_left} records left"),
        (result.ticks > 0, "the recurrent job never ran"),
    ]
    result.failures.extend(text for ok, text in checks if not ok)


def collect(
    result: SoakResult, workers: Sequence[WorkerProcess], started: float, workers_count: int
) -> None:
    """The workers' samples into the result, and the growth checks on them."""
    for worker in workers:
        result.worker_samples.append(worker.samples)
        result.worker_finals.append(worker.final)
        result.worker_log_lines.append(
            {
                "warnings": worker.warnings,
                "designed_failures": worker.designed_failures,
                "errors": worker.errors,
            }
        )
        if worker.final is None:
            result.failures.append(f"worker {worker.index} sent no final report")
        if worker.errors:
            result.failures.append(
                f"worker {worker.index} logged {worker.errors} ERROR lines: {worker.last_errors}"
            )
        for metric in ("rss_mib", "fds", "tasks"):
            points = [(s["t"] - started, float(s[metric])) for s in worker.samples]
            statistic, margin, relative = margins(metric, workers_count)
            check = growth_check(
                worker.index, metric, points, margin=margin, relative=relative, statistic=statistic
            )
            result.growth.append(check)
            if not check.ok:
                result.failures.append(
                    f"worker {worker.index} {metric} grew after warm-up: last third's "
                    f"{statistic} {check.last:g} > middle third's {check.middle:g} "
                    f"+ {check.margin:g}"
                )


# -- the report ----------------------------------------------------------------------------------


def _nearest(samples: Sequence[dict[str, Any]], at: float) -> dict[str, Any] | None:
    """The worker sample taken closest to the unix time ``at``."""
    return min(samples, key=lambda s: abs(float(s["t"]) - at), default=None)


def sample_rows(result: SoakResult, started: float) -> tuple[list[str], list[list[str]]]:
    """The samples table: per history sample, each worker's nearest sample beside it."""
    headers = ["Elapsed"]
    for index in range(len(result.worker_samples)):
        headers += [f"w{index} RSS MiB", f"w{index} fds", f"w{index} tasks"]
    headers += ["History rows", "History MiB", "Backlog", "Done"]
    rows = []
    for sample in result.history_samples:
        minutes, seconds = divmod(round(sample["t"]), 60)
        row = [f"{minutes}:{seconds:02d}"]
        for samples in result.worker_samples:
            near = _nearest(samples, started + sample["t"])
            row += (
                ["–"] * 3
                if near is None
                else [f"{near['rss_mib']:.1f}", str(near["fds"]), str(near["tasks"])]
            )
        row += [
            f"{sample['history_count']:,}",
            f"{sample['history_mib']:.1f}",
            f"{sample['backlog']:,}",
            f"{sample['markers']:,}",
        ]
        rows.append(row)
    return headers, rows


GROWTH_HEADERS: Final = (
    "Worker",
    "Metric",
    "Compared",
    "Middle third",
    "Last third",
    "Margin",
    "Slope, 2nd half (/min)",
    "Verdict",
)


def growth_rows(result: SoakResult) -> list[list[str]]:
    return [
        [
            f"w{check.worker}",
            check.metric,
            check.statistic,
            f"{check.middle:g}",
            f"{check.last:g}",
            f"{check.margin:.3g}",
            f"{check.slope_per_min:+.3f}",
            "ok" if check.ok else "FAILED",
        ]
        for check in result.growth
    ]


def summary_rows(result: SoakResult) -> list[list[str]]:
    faults: dict[str, int] = {}
    calls = 0
    for final in result.worker_finals:
        if final is not None:
            calls += int(final.get("calls", 0))
            for kind, count in final.get("by_kind", {}).items():
                faults[kind] = faults.get(kind, 0) + int(count)
    handled = sum(int(f.get("handled", 0)) for f in result.worker_finals if f is not None)
    warnings = sum(lines["warnings"] for lines in result.worker_log_lines)
    designed = sum(lines["designed_failures"] for lines in result.worker_log_lines)
    errors = sum(lines["errors"] for lines in result.worker_log_lines)
    fault_text = ", ".join(f"{kind} {count:,}" for kind, count in sorted(faults.items()))
    return [
        ["Jobs scheduled", f"{result.scheduled:,}", f"over {result.minutes:g} min, 2% first"],
        ["Run time", f"{result.elapsed_s / 60:.1f} min", "until every job ran"],
        ["Handler runs", f"{handled:,}", "first tries of flaky jobs included"],
        ["Success markers", f"{result.markers:,}", "one per job key (unique _id)"],
        ["Success history rows", f"{result.success_rows:,}", "one per job expected"],
        ["Run twice (2nd marker)", f"{result.doubles:,}", "target 0"],
        ["Jobs with 2 success rows", f"{result.jobs_with_two_successes:,}", "target 0"],
        ["maxTriesReached", f"{result.max_tries_reached:,}", "ended known"],
        ["Lost", f"{result.lost:,}", "target 0"],
        ["Recurrent runs", f"{result.ticks:,}", f"every {soak_worker.TICK_EVERY.seconds} s"],
        ["Faults injected", f"{sum(faults.values()):,}", f"in {calls:,} store calls: {fault_text}"],
        ["WARNING log lines", f"{warnings:,}", "one per retried transient error"],
        ["ERROR lines, flaky jobs", f"{designed:,}", "their first tries fail by design"],
        ["ERROR lines, other", f"{errors:,}", "target 0"],
    ]


def rss_chart_svg(series: Sequence[Sequence[tuple[float, float]]], title: str) -> str:
    """A small hand-written SVG line chart: RSS (MiB) over minutes, one line per worker."""
    width, height, left, right, top, bottom = 720, 360, 60, 20, 40, 50
    points = [p for line in series for p in line] or [(0.0, 0.0)]
    max_t = max(max(t for t, _ in points), 1e-9)
    low = min(v for _, v in points)
    high = max(v for _, v in points)
    # At least CHART_MIN_SPAN_MIB tall, so that a flat line with a few hundred KiB of noise
    # does not look like growth; never below 0.
    spare = max(0.0, CHART_MIN_SPAN_MIB - (high - low)) / 2
    low, high = max(0.0, low - spare), high + spare
    step = _nice_step((high - low) or 1.0)
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step

    def x(t: float) -> float:
        return left + (width - left - right) * t / max_t

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - (v - low) / (high - low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
    ]
    value = low
    while value <= high + step / 2:
        parts.append(
            f'<line x1="{left}" y1="{y(value):.1f}" x2="{width - right}" y2="{y(value):.1f}" '
            f'stroke="#ddd"/><text x="{left - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{value:g}</text>'
        )
        value += step
    t_step = _nice_step(max_t)
    tick = 0.0
    while tick <= max_t + 1e-9:
        parts.append(
            f'<text x="{x(tick):.1f}" y="{height - bottom + 18}" '
            f'text-anchor="middle">{tick:g}</text>'
        )
        tick += t_step
    parts.append(
        f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">minutes</text>'
        f'<text x="16" y="{height / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {height / 2})">RSS (MiB)</text>'
    )
    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for index, line in enumerate(series):
        colour = colours[index % len(colours)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in line)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts.append(
            f'<text x="{width - right - 90}" y="{top + 16 * (index + 1)}" fill="{colour}">'
            f"worker {index}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _nice_step(span: float) -> float:
    """A round grid step giving about five lines over ``span``."""
    raw = span / 5
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(float(m * magnitude) for m in (1, 2, 5, 10) if m * magnitude >= raw)


def rss_series(result: SoakResult) -> list[list[tuple[float, float]]]:
    """Per worker: (minutes since the producer started, RSS MiB); the sample each worker took
    as it started, a second or two before the producer, is drawn at 0 (the warm-up's start)."""
    origin = result.started_at
    return [
        [(max(0.0, float(s["t"]) - origin) / 60, float(s["rss_mib"])) for s in samples]
        for samples in result.worker_samples
    ]


# -- the command ---------------------------------------------------------------------------------


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value < 0.5:
        raise argparse.ArgumentTypeError(f"must be within [0, 0.5), got {text}")
    return value


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("soak", __doc__.splitlines()[0])
    parser.add_argument("--jobs", type=_positive(int), default=None, help="default 200,000")
    parser.add_argument("--minutes", type=_positive(float), default=None, help="default 20")
    parser.add_argument("--workers", type=_positive(int), default=2, help="worker processes")
    parser.add_argument("--workers-count", type=_positive(int), default=16, help="per process")
    parser.add_argument("--sample-every", type=_positive(float), default=None, help="default 60 s")
    parser.add_argument("--error-rate", type=_rate, default=0.01, help="errors before the call")
    parser.add_argument("--ambiguous-rate", type=_rate, default=0.005, help="after a write")
    parser.add_argument("--delay-rate", type=_rate, default=0.01, help="delays up to 0.2 s")
    parser.add_argument("--lock-time", type=_positive(float), default=None, help="seconds")
    parser.add_argument("--drain-limit", type=_positive(float), default=None, help="seconds")
    parser.add_argument("--seed", type=int, default=16)
    add_quick(parser, "2,000 jobs in 24 s")
    add_uri(parser)
    parser.add_argument("--json", type=Path, help="write every sample and check as JSON")
    parser.add_argument("--chart", type=Path, help="write the RSS-over-time chart (SVG)")
    parser.add_argument("--keep", action="store_true", help="keep the soak's database")
    parser.add_argument("--replot", type=Path, help="only redraw --chart from a --json report")
    args = parser.parse_args(argv)
    args.jobs = args.jobs or (QUICK_JOBS if args.quick else FULL_JOBS)
    args.minutes = args.minutes or (QUICK_MINUTES if args.quick else FULL_MINUTES)
    args.sample_every = args.sample_every or (QUICK_SAMPLE_EVERY if args.quick else 60.0)
    args.lock_time = args.lock_time or (4.0 if args.quick else 10.0)
    args.drain_limit = args.drain_limit or (30.0 if args.quick else 600.0)
    return args


def report(result: SoakResult, args: argparse.Namespace, console: Console) -> None:
    headers, rows = sample_rows(result, result.started_at)
    print_table(console, "Soak samples", headers, rows)
    print_table(console, "Growth after warm-up (first third)", GROWTH_HEADERS, growth_rows(result))
    print_table(console, "Soak results", ["Check", "Value", "Note"], summary_rows(result))
    for failure in result.failures:
        console.print(f"[bold red]FAILED[/]: {failure}")
    if result.passed:
        console.print("[bold green]passed[/]: no growth after warm-up, 0 lost, 0 run twice")
    if args.json is not None:
        dump_json(args.json, {"machine": machine_summary(), **asdict(result)})
        console.print(f"wrote {args.json}")
    if args.chart is not None:
        title = chart_title(result.scheduled, args.workers)
        atomic_write(args.chart, rss_chart_svg(rss_series(result), title))
        console.print(f"wrote {args.chart}")


def chart_title(scheduled: int, workers: int) -> str:
    return f"Soak: worker RSS, {scheduled:,} jobs, {workers} processes"


def replot(source: Path, chart: Path) -> None:
    """The chart again from a ``--json`` report (a new look without a new 20-minute run)."""
    saved = json.loads(source.read_text())
    result = SoakResult(jobs=saved["jobs"], minutes=saved["minutes"], workers=saved["workers"])
    result.started_at = saved["started_at"]
    result.scheduled = saved["scheduled"]
    result.worker_samples = saved["worker_samples"]
    atomic_write(
        chart, rss_chart_svg(rss_series(result), chart_title(result.scheduled, result.workers))
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    if args.replot is not None:
        if args.chart is None:
            raise SystemExit("--replot needs --chart PATH")
        replot(args.replot, args.chart)
        console.print(f"wrote {args.chart} from {args.replot}")
        return 0
    announce(console, command_line("benchmarks.soak", argv))
    console.print(
        f"[bold]Faults:[/] {args.error_rate:g} of the calls fail before, {args.ambiguous_rate:g}"
        f" of the writes after (ambiguous), {args.delay_rate:g} delayed; no process is killed"
    )
    with serving(args.uri, console) as server:
        result = anyio.run(run_soak, args, server.uri, console, backend="asyncio")
    report(result, args, console)
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
