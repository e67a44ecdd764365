"""What following a job costs: progress writes when a handler reports on every item, and the
price per job of keeping its log lines (``store_logs``).

Two tables:

1. **Progress writes.** One job of ``--items`` items (10,000), each taking ``--item-ms`` (0.5 ms:
   ``anyio.sleep`` in an async handler, ``time.sleep`` in a sync one), reports
   ``ctx.progress(i / n, ...)`` after every item. The store counts its ``write_progress`` calls
   (each one a lock renewal carrying the latest report) and ``extend_lock`` calls; the row checks
   the coalescing rule: at most ``T / progress_interval + 1`` progress writes for a job of ``T``
   seconds, the last report in the history row, and reports the handler's CPU µs per
   ``ctx.progress`` call. Per store (``memory``, ``mongo``), handler kind and interval.
2. **Log lines.** ``--jobs`` no-op async jobs that each log 10 INFO lines through ``ctx.logger``,
   drained by one ``Workers`` (workers_count 32, n_partitions 8), with ``store_logs`` off and on
   (same handler), modes alternating round by round (``--repeat``, best of): jobs/s, CPU µs per
   job of this process (and of mongod when it runs here), lines kept, ``write_log_lines`` calls;
   the cost per job is the difference of the two modes' CPU per job. Every run checks that each
   job ran once and that ``on`` kept exactly 10 lines per job.

Run it from the project root::

    python -m benchmarks.following                  # full size, a throw-away local mongod
    python -m benchmarks.following --quick          # CI size
    python -m benchmarks.following --uri mongodb://localhost:27017/?replicaSet=rs0
"""

from __future__ import annotations

import argparse
import collections
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient

from benchmarks.support.cli import add_out, add_quick, add_repeat, add_uri, new_parser
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
    report_header,
    spread,
    write_results,
)
from benchmarks.support.server import MongoServer, scratch_database, serving
from benchmarks.support.stores import TimedStore
from dogs_core import DogsClient, JobContext, Jobs, ScheduleItem, Workers
from dogs_core.domain.progress import Progress
from dogs_core.ports import AsyncJobStore
from dogs_mongo import AsyncMongoJobStore
from dogs_testing import InMemoryJobStore

__all__ = ["main"]

PROGRESS_HEADERS: Final = ("Store", "Handler", "Interval (s)", "Items (reports)", "Time (s)",
                           "Progress writes", "Bound T/interval+1", "Writes/s", "Renewals",
                           "µs per report", "Result")  # fmt: skip
LOGS_HEADERS: Final = ("Store", "store_logs", "Jobs", "Jobs/s", "CPU µs/job",
                       "mongod CPU µs/job", "Lines kept", "Line writes", "Jobs/s spread",
                       "Result")  # fmt: skip
LINES_PER_JOB: Final = 10
SCHEDULE_BATCH: Final = 1_000


# -- progress writes ------------------------------------------------------------------------


@dataclass(slots=True)
class ProgressRun:
    store: str
    handler: str
    interval: float
    items: int
    seconds: float | None = None
    progress_writes: int = 0
    renewals: int = 0
    report_us: float | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def bound(self) -> int | None:
        return None if self.seconds is None else int(self.seconds / self.interval) + 1


class CountingStore(TimedStore):
    """Counts the progress writes and the plain lock renewals (and times claims, unused)."""

    def __init__(self, inner: AsyncJobStore) -> None:
        super().__init__(inner)
        self.progress_writes = 0
        self.renewals = 0

    async def write_progress(
        self, job_id: str, lock_id: str, progress: Progress, *, locked_until: datetime | None
    ) -> bool:
        self.progress_writes += 1
        matched: bool = await self.inner.write_progress(  # type: ignore[attr-defined]
            job_id, lock_id, progress, locked_until=locked_until
        )
        return matched

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        self.renewals += 1
        return await self.inner.extend_lock(job_id, lock_id, locked_until)


def _progress_jobs(items: int, item_seconds: float, spent: list[float]) -> Jobs:
    jobs = Jobs()

    @jobs.event(name="crunch_async")
    async def crunch_async(params: None, ctx: JobContext) -> int:
        for i in range(items):
            await anyio.sleep(item_seconds)
            began = time.perf_counter()
            await ctx.progress((i + 1) / items, f"item {i + 1}/{items}", data={"i": i})
            spent.append(time.perf_counter() - began)
        return items

    @jobs.event(name="crunch_sync")
    def crunch_sync(params: None, ctx: JobContext) -> int:
        for i in range(items):
            time.sleep(item_seconds)
            began = time.perf_counter()
            ctx.progress((i + 1) / items, f"item {i + 1}/{items}", data={"i": i})
            spent.append(time.perf_counter() - began)
        return items

    return jobs


async def run_progress(
    store_kind: str, handler: str, interval: float, items: int, item_ms: float, uri: str | None
) -> ProgressRun:
    run = ProgressRun(store_kind, handler, interval, items)
    spent: list[float] = []
    jobs = _progress_jobs(items, item_ms / 1000, spent)
    async with _store(store_kind, uri) as inner:
        store = CountingStore(inner)
        client = DogsClient(store, jobs)
        outcome_ = await client.schedule(f"crunch_{handler}")
        job_id = outcome_.id  # type: ignore[union-attr]
        workers = Workers(store, jobs, poll_interval=0.05, progress_interval=interval)
        async with workers:
            row = await client.wait_for(job_id, timeout=600)
            await workers.stop()
    run.seconds = (row.ended_at - row.started_at).total_seconds()
    run.progress_writes, run.renewals = store.progress_writes, store.renewals
    run.report_us = sum(spent) / len(spent) * 1e6 if spent else None
    bound = run.bound or 0
    if run.progress_writes > bound:
        run.failures.append(f"{run.progress_writes} progress writes, over the bound {bound}")
    if run.progress_writes < 1:
        run.failures.append("no progress write")
    final = row.progress
    if row.result != items or final is None or final.fraction != 1.0:
        run.failures.append(f"the history row ({row.result}, {final}) is not the job's end")
    return run


# -- log lines ------------------------------------------------------------------------------


@dataclass(slots=True)
class LogsRun:
    store: str
    mode: str
    jobs: int
    round: int
    seconds: float | None = None
    jobs_per_second: float | None = None
    cpu_us_per_job: float | None = None
    server_cpu_us_per_job: float | None = None
    lines: int | None = None
    line_writes: int = 0
    failures: list[str] = field(default_factory=list)
    all_jobs_per_second: list[float] = field(default_factory=list)


class LineCountingStore(TimedStore):
    def __init__(self, inner: AsyncJobStore) -> None:
        super().__init__(inner)
        self.line_writes = 0

    async def write_log_lines(self, lines: Sequence[Any]) -> None:
        self.line_writes += 1
        await self.inner.write_log_lines(lines)  # type: ignore[attr-defined]


async def run_logs(
    store_kind: str, mode: str, jobs_count: int, round_: int, server: MongoServer | None
) -> LogsRun:
    run = LogsRun(store_kind, mode, jobs_count, round_)
    jobs = Jobs()
    seen: collections.Counter[int] = collections.Counter()

    @jobs.event(name="chatty", store_logs=mode == "on")
    async def chatty(params: dict[str, int], ctx: JobContext) -> None:
        seen[params["i"]] += 1
        for line in range(LINES_PER_JOB):
            ctx.logger.info("job %d line %d", params["i"], line)

    uri = None if server is None else server.uri
    if store_kind == "memory":
        server = None  # its rows have no mongod CPU to count
    async with _store(store_kind, uri) as inner:
        client = DogsClient(inner, jobs, n_partitions=8)
        for start in range(0, jobs_count, SCHEDULE_BATCH):
            stop = min(start + SCHEDULE_BATCH, jobs_count)
            items = [ScheduleItem(params={"i": i}) for i in range(start, stop)]
            await client.schedule_many(chatty, items)
        store = LineCountingStore(inner)
        store.expect(jobs_count)
        workers = Workers(store, jobs, workers_count=32, n_partitions=8, poll_interval=1)
        server_cpu = None if server is None else server.cpu_seconds()
        began, cpu_began = time.perf_counter(), time.process_time()
        async with workers:
            with anyio.move_on_after(300):
                await store.done.wait()
            await workers.stop()  # the last lines are written at the stop: counted in
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        server_after = None if server is None else server.cpu_seconds()
        run.lines = len(await _all_lines(inner, client, jobs_count)) if mode == "on" else 0
    run.seconds, run.line_writes = seconds, store.line_writes
    run.jobs_per_second = jobs_count / seconds
    run.cpu_us_per_job = cpu / jobs_count * 1e6
    if server_cpu is not None and server_after is not None:
        run.server_cpu_us_per_job = (server_after - server_cpu) / jobs_count * 1e6
    if len(seen) != jobs_count or any(count != 1 for count in seen.values()):
        run.failures.append(f"{len(seen)} of {jobs_count} jobs ran, some not exactly once")
    expected = jobs_count * LINES_PER_JOB if mode == "on" else 0
    if run.lines != expected:
        run.failures.append(f"{run.lines} lines kept, expected {expected}")
    return run


async def _all_lines(store: AsyncJobStore, client: DogsClient, jobs_count: int) -> list[Any]:
    """Every kept line: the in-memory store's, or the logs collection's count on MongoDB."""
    if isinstance(store, AsyncMongoJobStore):
        count = await store.logs_collection.count_documents({})
        return [None] * count
    assert isinstance(store, InMemoryJobStore)
    return list(store.sync._lines.values())


# -- stores ---------------------------------------------------------------------------------


class _store:
    """A fresh store of ``kind``: in memory, or a scratch database dropped at the end."""

    def __init__(self, kind: str, uri: str | None) -> None:
        self._kind, self._uri = kind, uri
        self._client: AsyncMongoClient[dict[str, Any]] | None = None
        self._database = scratch_database("following")

    async def __aenter__(self) -> AsyncJobStore:
        if self._kind == "memory":
            return InMemoryJobStore()
        assert self._uri is not None
        self._client = AsyncMongoClient(self._uri, tz_aware=True)
        store = AsyncMongoJobStore(self._client, self._database)
        await store.setup()
        await store.setup_following()
        return store

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.drop_database(self._database)
            await self._client.close()


# -- the report -----------------------------------------------------------------------------


def progress_rows(runs: Sequence[ProgressRun]) -> list[list[str]]:
    return [
        [
            r.store,
            r.handler,
            f"{r.interval:g}",
            f"{r.items:,}",
            fmt(r.seconds, ".1f"),
            str(r.progress_writes),
            "–" if r.bound is None else str(r.bound),
            fmt(r.progress_writes / r.seconds if r.seconds else None, ".2f"),
            str(r.renewals),
            fmt(r.report_us, ".1f"),
            outcome(r.failures),
        ]
        for r in runs
    ]


def logs_rows(runs: Sequence[LogsRun]) -> list[list[str]]:
    return [
        [
            r.store,
            r.mode,
            f"{r.jobs:,}",
            fmt(r.jobs_per_second, ",.0f"),
            fmt(r.cpu_us_per_job, ",.0f"),
            fmt(r.server_cpu_us_per_job, ",.0f"),
            "–" if r.lines is None else f"{r.lines:,}",
            f"{r.line_writes:,}",
            spread(r.all_jobs_per_second, fewest=1),
            outcome(r.failures),
        ]
        for r in runs
    ]


def cost_lines(runs: Sequence[LogsRun]) -> list[str]:
    """Per store: what ``on`` costs per job over ``off`` (CPU of this process, and of mongod)."""
    lines = []
    by = {(r.store, r.mode): r for r in runs}
    for store in dict.fromkeys(r.store for r in runs):
        off, on = by.get((store, "off")), by.get((store, "on"))
        if off is None or on is None or off.cpu_us_per_job is None or on.cpu_us_per_job is None:
            continue
        text = (
            f"{store}: store_logs with {LINES_PER_JOB} lines per job costs "
            f"{on.cpu_us_per_job - off.cpu_us_per_job:+,.0f} µs of worker CPU per job "
            f"({on.cpu_us_per_job:,.0f} against {off.cpu_us_per_job:,.0f})"
        )
        if on.server_cpu_us_per_job is not None and off.server_cpu_us_per_job is not None:
            extra = on.server_cpu_us_per_job - off.server_cpu_us_per_job
            text += f" and {extra:+,.0f} µs of mongod CPU"
        if on.jobs_per_second and off.jobs_per_second:
            text += f"; jobs/s {on.jobs_per_second / off.jobs_per_second:.0%} of off"
        lines.append(text + ".")
    return lines


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("following", "Progress writes per job, and the cost of store_logs.")
    parser.add_argument("--items", type=int, default=None, help="items of the progress job")
    parser.add_argument("--item-ms", type=float, default=0.5, help="ms per item (0.5)")
    parser.add_argument("--jobs", type=int, default=None, help="jobs of the log-lines runs")
    parser.add_argument(
        "--store", action="append", choices=("memory", "mongo"), help="repeatable; default both"
    )
    add_uri(parser)
    add_quick(parser, "1,000 items, 500 jobs")
    add_repeat(parser, default=3)
    add_out(parser, "following.md/.json")
    args = parser.parse_args(argv)
    if args.items is None:
        args.items = 1_000 if args.quick else 10_000
    if args.jobs is None:
        args.jobs = 500 if args.quick else 5_000
    if args.quick:
        args.repeat = 1
    if min(args.items, args.jobs, args.repeat) < 1 or args.item_ms < 0:
        parser.error("--items, --jobs and --repeat must be at least 1, --item-ms >= 0")
    return args


async def _run_all(
    args: argparse.Namespace, stores: Sequence[str], server: MongoServer | None
) -> tuple[list[ProgressRun], list[LogsRun]]:
    uri = None if server is None else server.uri
    progress = []
    for store in stores:
        for handler, interval in (("async", 1.0), ("async", 0.25), ("sync", 1.0)):
            progress.append(
                await run_progress(store, handler, interval, args.items, args.item_ms, uri)
            )
    logs = []
    for round_ in range(1, args.repeat + 1):
        for store in stores:
            for mode in ("off", "on") if round_ % 2 else ("on", "off"):
                logs.append(await run_logs(store, mode, args.jobs, round_, server))
    return progress, logs


def _best(runs: Sequence[LogsRun]) -> list[LogsRun]:
    rows = best_runs(
        runs,
        key=lambda r: (r.store, r.mode),
        rate=lambda r: r.jobs_per_second,
        failed=lambda r: bool(r.failures),
    )
    for best, rates in rows:
        best.all_jobs_per_second = rates
    return sorted((best for best, _ in rows), key=lambda r: (r.store != "memory", r.mode))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    stores = list(dict.fromkeys(args.store or ("memory", "mongo")))
    console = new_console()
    announce(console)
    logging.getLogger("dogs.job").setLevel(logging.WARNING)  # the lines go to the store only
    if "mongo" in stores:
        with serving(args.uri, console) as server:
            progress, logs = anyio.run(_run_all, args, stores, server, backend="asyncio")
    else:
        server = None
        progress, logs = anyio.run(_run_all, args, stores, None, backend="asyncio")
    best = _best(logs)
    progress_title = (
        f"Progress writes: one job of {args.items:,} items of {args.item_ms:g} ms, "
        "ctx.progress after every item"
    )
    logs_title = (
        f"store_logs: {args.jobs:,} no-op jobs of {LINES_PER_JOB} INFO lines each, "
        f"workers_count=32, best of {args.repeat}"
    )
    print_table(console, progress_title, PROGRESS_HEADERS, progress_rows(progress))
    print_table(console, logs_title, LOGS_HEADERS, logs_rows(best))
    costs = cost_lines(best)
    for line in costs:
        console.print(line)
    if args.out is not None:
        command = command_line("benchmarks.following", argv)
        report = "\n".join(
            [
                *report_header("Following a job: what it costs", command, server),
                progress_title + ".",
                "",
                markdown_table(PROGRESS_HEADERS, progress_rows(progress)),
                "",
                logs_title + ". Modes alternate round by round in one process.",
                "",
                markdown_table(LOGS_HEADERS, logs_rows(best)),
                "",
                *[f"- {line}" for line in costs],
            ]
        )
        payload = {
            "machine": machine_summary(),
            "command": command,
            "progress": [asdict(r) for r in progress],
            "logs": [asdict(r) for r in logs],
        }
        write_results(args.out, "following", report + "\n", payload)
        console.print(f"wrote {args.out / 'following.md'} and following.json")
    failed = sum(1 for r in progress if r.failures) + sum(1 for r in logs if r.failures)
    return exit_status(console, failed, "run")


if __name__ == "__main__":
    raise SystemExit(main())
