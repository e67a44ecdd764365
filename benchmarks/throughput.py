"""End-to-end throughput of one :class:`~dogs_core.Workers` instance with no-op handlers.

Per scenario (a store and a handler kind) it schedules N event jobs with ``schedule_many``,
starts one ``Workers`` instance and measures the time until the store holds no record of that
job any more (every record claimed, run and deleted; the history rows are written too, as a
deployment would). It reports:

- jobs per second, end to end;
- claim latency p50 / p99: every ``claim`` call of the runtime, hits and misses, timed by a
  wrapper around the store;
- pickup lag: a few jobs scheduled one by one while the workers are idle, each after a random
  pause, and the time from ``schedule()`` returning to the handler starting. An idle instance
  sweeps its partitions once per ``poll_interval``, so the lag is about uniform in
  ``[0, poll_interval]`` plus one claim; the last column shows the same when the scheduling code
  calls ``workers.wake()`` (possible when it runs in the same process).

``--watch-changes on|off|both`` sets the workers' ``watch_changes`` (default: the runtime's);
``both`` runs every scenario with and without, so that the end-to-end rate with the change feed
can be compared with polling only in one run.

Stores: ``memory`` (the in-memory store), ``mongo`` (``AsyncMongoJobStore``) and ``mongo-sync``
(the generated ``MongoJobStore``, run in threads by ``ThreadedJobStore``). Handlers: ``async``
(a coroutine on the event loop) and ``sync`` (a plain function, run in a worker thread).

Run it as a module from the project root::

    python -m benchmarks.throughput                 # full size (10,000 / 5,000 jobs)
    python -m benchmarks.throughput --quick         # CI size
    python -m benchmarks.throughput --store mongo --handler async --claim-concurrency 16
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import anyio.from_thread
from pymongo import AsyncMongoClient, MongoClient
from pymongo.write_concern import WriteConcern
from rich.console import Console
from rich.progress import Progress

from benchmarks._common import (
    MongoServer,
    atomic_write,
    command_line,
    dump_json,
    fmt,
    machine_summary,
    markdown_table,
    median,
    mongo_server,
    new_console,
    new_progress,
    percentile,
    print_table,
)
from benchmarks._timed_store import TimedStore
from benchmarks.floor import claim_floor_async, claim_floor_sync, ratio, write_ceiling
from dogs_core import (
    DogsClient,
    EventJobDefinition,
    Jobs,
    ScheduleItem,
    Workers,
    WorkerSettings,
)
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.threaded import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_testing import InMemoryJobStore

__all__ = ["ScenarioResult", "TimedStore", "main"]

StoreKind = Literal["memory", "mongo", "mongo-sync"]
HandlerKind = Literal["async", "sync"]
STORES: Final[tuple[StoreKind, ...]] = ("memory", "mongo", "mongo-sync")
HANDLERS: Final[tuple[HandlerKind, ...]] = ("async", "sync")
JOB_NAME: Final = "noop"
SCHEDULE_BATCH: Final = 1_000


# -- the jobs ------------------------------------------------------------------------------------


class HandlerLog:
    """What the no-op handlers saw: a run count and the start time of each lag probe."""

    def __init__(self) -> None:
        self.runs = 0
        self.lag_started: dict[int, float] = {}
        self._lag_events: dict[int, anyio.Event] = {}

    def expect_lag_probe(self, key: int) -> anyio.Event:
        """An event set when the lag probe ``key`` starts (create it before scheduling)."""
        event = self._lag_events[key] = anyio.Event()
        return event

    def started(self, params: dict[str, Any], *, in_thread: bool = False) -> None:
        lag = params.get("lag")
        if lag is None:
            self.runs += 1  # sync handlers: the GIL is released between bytecodes, so the
            # count could in theory miss an increment; it is checked, and has never been off
        else:
            key = int(lag)
            self.lag_started[key] = time.perf_counter()
            event = self._lag_events.get(key)
            if event is not None:
                if in_thread:
                    anyio.from_thread.run_sync(event.set)
                else:
                    event.set()


def make_jobs(
    handler: HandlerKind, log: HandlerLog, history: bool
) -> tuple[Jobs, EventJobDefinition]:
    jobs = Jobs()
    options: dict[str, Any] = {} if history else {"save_executions_for": 0}
    if handler == "async":

        async def noop_async(params: dict[str, Any], ctx: object) -> None:
            log.started(params)

        definition = jobs.event(name=JOB_NAME, **options)(noop_async)
    else:

        def noop_sync(params: dict[str, Any], ctx: object) -> None:
            log.started(params, in_thread=True)

        definition = jobs.event(name=JOB_NAME, **options)(noop_sync)
    return jobs, definition


# -- one scenario --------------------------------------------------------------------------------


@dataclass(slots=True)
class Options:
    workers_count: int
    n_partitions: int
    claim_concurrency: int | None
    poll_interval: float
    lag_samples: int
    claim_batch_size: int | None
    history: bool
    profile_dir: Path | None
    write_concern: str = "default"
    #: The history rows' own write concern (``"default"``: as every other write).
    history_write_concern: str = "default"
    instances: int = 1
    #: ``watch_changes`` of the workers; ``None``: the runtime default.
    watch_changes: bool | None = None
    #: Called with the instances once they run (benchmarks/adaptive.py samples their pacers).
    on_started: Callable[[list[Workers]], None] | None = None

    def client_options(self) -> dict[str, Any]:
        """MongoClient options: ``w`` for every write (claims, fenced writes and history)."""
        if self.write_concern == "default":
            return {"tz_aware": True}
        return {"tz_aware": True, "w": "majority" if self.write_concern == "majority" else 1}

    def store_options(self) -> dict[str, Any]:
        """Keyword arguments of the Mongo stores: the history rows' write concern, if set."""
        if self.history_write_concern == "default":
            return {}
        w: int | str = "majority" if self.history_write_concern == "majority" else 1
        return {"history_write_concern": WriteConcern(w=w)}


@dataclass(slots=True)
class ScenarioResult:
    store: str
    handler: str
    jobs: int
    workers_count: int
    n_partitions: int
    claim_concurrency: int
    poll_interval: float
    claim_batch_size: int = 1
    instances: int = 1
    #: The workers' ``watch_changes`` (``None``: this runtime has no such option).
    watch_changes: bool | None = None
    instance_jobs: list[int] = field(default_factory=list)
    status: str = "ok"
    schedule_seconds: float | None = None
    seconds: float | None = None
    jobs_per_second: float | None = None
    claim_calls: int | None = None
    claim_hits: int | None = None
    claim_p50_ms: float | None = None
    claim_p99_ms: float | None = None
    cpu_seconds: float | None = None
    server_cpu_seconds: float | None = None
    lag_ms: list[float] = field(default_factory=list)
    wake_lag_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    run: int = 1
    #: Filled by :func:`summarize`: jobs/s of every ok run of this store and handler.
    all_jobs_per_second: list[float] = field(default_factory=list)
    #: The raw pymongo claim loop of this run (:mod:`benchmarks.floor`); ``None`` in memory
    #: and with ``--no-floor``.
    floor_claims_per_second: float | None = None

    @property
    def floor_ratio(self) -> float | None:
        return ratio(self.jobs_per_second, self.floor_claims_per_second)

    @property
    def spread(self) -> str:
        rates = self.all_jobs_per_second
        if len(rates) < 2:
            return "–"
        return f"{min(rates):,.0f}–{max(rates):,.0f} ({len(rates)} runs)"


def summarize(results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """One row per store, handler and ``watch_changes``: the best run (highest jobs/s) with the
    spread of all ok runs; a scenario with a FAILED run is reported by that run."""
    groups: dict[tuple[str, str, bool | None], list[ScenarioResult]] = {}
    for r in results:
        groups.setdefault((r.store, r.handler, r.watch_changes), []).append(r)
    summary = []
    for runs in groups.values():
        failed = [r for r in runs if r.status == "FAILED"]
        ok = [r for r in runs if r.status == "ok"]
        best = failed[0] if failed else max(ok, key=lambda r: r.jobs_per_second or 0.0)
        best.all_jobs_per_second = [r.jobs_per_second for r in ok if r.jobs_per_second]
        summary.append(best)
    return summary


@contextlib.asynccontextmanager
async def open_store(
    kind: StoreKind,
    uri: str | None,
    database: str,
    client_options: dict[str, Any],
    store_options: dict[str, Any] | None = None,
) -> AsyncIterator[AsyncJobStore]:
    if kind == "memory":
        yield InMemoryJobStore()
        return
    assert uri is not None
    if kind == "mongo":
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, **client_options)
        store: AsyncJobStore = AsyncMongoJobStore(client, database, **(store_options or {}))
        try:
            yield store
        finally:
            await client.drop_database(database)
            await client.close()
        return
    sync_client: MongoClient[dict[str, Any]] = MongoClient(uri, **client_options)
    try:
        yield ThreadedJobStore(MongoJobStore(sync_client, database, **(store_options or {})))
    finally:
        sync_client.drop_database(database)
        sync_client.close()


async def run_scenario(
    store_kind: StoreKind,
    handler: HandlerKind,
    jobs_count: int,
    server: MongoServer | None,
    options: Options,
    progress: Progress,
) -> ScenarioResult:
    log = HandlerLog()
    jobs, definition = make_jobs(handler, log, options.history)
    worker_options: dict[str, Any] = {
        "workers_count": options.workers_count,
        "n_partitions": options.n_partitions,
        "poll_interval": options.poll_interval,
    }
    if options.claim_concurrency is not None:
        worker_options["claim_concurrency"] = options.claim_concurrency
    if options.claim_batch_size is not None:
        worker_options["claim_batch_size"] = options.claim_batch_size
    if options.watch_changes is not None:
        worker_options["watch_changes"] = options.watch_changes
    settings = WorkerSettings(**worker_options)
    result = ScenarioResult(
        store=store_kind,
        handler=handler,
        jobs=jobs_count,
        workers_count=options.workers_count,
        n_partitions=options.n_partitions,
        claim_concurrency=settings.claim_concurrency,
        poll_interval=options.poll_interval,
        claim_batch_size=settings.claim_batch_size,
        instances=options.instances,
        watch_changes=getattr(settings, "watch_changes", None),
    )
    database = f"dogs_bench_throughput_{uuid.uuid4().hex[:12]}"
    watch = "" if options.watch_changes is None else f" watch {_on_off(options.watch_changes)}"
    task = progress.add_task(f"{store_kind:<10} {handler:<5}{watch}", total=jobs_count)
    profiler = cProfile.Profile() if options.profile_dir is not None else None
    rng = random.Random()  # the pause before each lag probe: a random phase of the poll cycle
    try:
        uri = server.uri if server is not None else None
        server_cpu = server.cpu_seconds if server is not None and store_kind != "memory" else None
        opened = open_store(
            store_kind, uri, database, options.client_options(), options.store_options()
        )
        async with opened as inner:
            timed = TimedStore(inner)
            client = DogsClient(inner, jobs, n_partitions=options.n_partitions)
            began = time.perf_counter()
            for start in range(0, jobs_count, SCHEDULE_BATCH):
                stop = min(start + SCHEDULE_BATCH, jobs_count)
                scheduled = await client.schedule_many(
                    definition, [ScheduleItem(params={"i": i}) for i in range(start, stop)]
                )
                if scheduled.scheduled_count != stop - start or scheduled.errors:
                    raise RuntimeError(f"schedule_many: {scheduled}")
            result.schedule_seconds = time.perf_counter() - began
            timed.expect(jobs_count)

            async def report() -> None:
                while True:
                    progress.update(task, completed=timed.completed)
                    await anyio.sleep(0.1)

            async with anyio.create_task_group() as reporter:
                reporter.start_soon(report)
                if profiler is not None:
                    profiler.enable()
                began = time.perf_counter()
                cpu_began = time.process_time()
                server_cpu_began = server_cpu() if server_cpu else None
                async with contextlib.AsyncExitStack() as instances:
                    # Several instances share the store (and, on MongoDB, one client), as
                    # several processes would share the database.
                    every = [
                        await instances.enter_async_context(Workers(timed, jobs, **worker_options))
                        for _ in range(options.instances)
                    ]
                    if options.on_started is not None:
                        options.on_started(every)
                    await timed.done.wait()
                    result.seconds = time.perf_counter() - began
                    result.cpu_seconds = time.process_time() - cpu_began
                    if server_cpu is not None and server_cpu_began is not None:
                        server_cpu_now = server_cpu()
                        if server_cpu_now is not None:
                            result.server_cpu_seconds = server_cpu_now - server_cpu_began
                    if profiler is not None:
                        profiler.disable()
                    progress.update(task, completed=timed.completed)
                    result.jobs_per_second = jobs_count / result.seconds
                    result.claim_calls = len(timed.claim_seconds)
                    result.claim_hits = timed.claim_hits
                    result.instance_jobs = [w.claims_succeeded for w in every]
                    result.claim_p50_ms = median(timed.claim_seconds) * 1000
                    result.claim_p99_ms = percentile(timed.claim_seconds, 0.99) * 1000
                    left = await inner.find_records(job_name=JOB_NAME, limit=1)
                    if left:
                        result.failures.append("records are left after every job completed")
                    # Pickup lag: the workers are idle now (their sweeps find nothing).
                    await anyio.sleep(options.poll_interval)
                    timeout = options.poll_interval * 3 + 10
                    for woken in (False, True):
                        for sample in range(options.lag_samples):
                            key = sample + (1_000_000 if woken else 0)
                            started = log.expect_lag_probe(key)
                            await anyio.sleep(rng.uniform(0, options.poll_interval))
                            await client.schedule(definition, {"lag": key})
                            scheduled_at = time.perf_counter()
                            if woken:
                                for instance in every:
                                    instance.wake()
                            with anyio.move_on_after(timeout):
                                await started.wait()
                            if not started.is_set():
                                result.failures.append(f"lag probe {key} never started")
                                break
                            lag = (log.lag_started[key] - scheduled_at) * 1000
                            (result.wake_lag_ms if woken else result.lag_ms).append(lag)
                    for instance in every:
                        await instance.stop()
                reporter.cancel_scope.cancel()
            if log.runs != jobs_count:
                result.failures.append(f"{log.runs} handler runs for {jobs_count} jobs")
            if options.history:
                rows = await inner.read_history(JOB_NAME, limit=jobs_count + 1000)
                expected = jobs_count + len(result.lag_ms) + len(result.wake_lag_ms)
                if len(rows) != expected:
                    result.failures.append(f"{len(rows)} history rows, expected {expected}")
    except Exception as error:
        result.failures.append(f"{type(error).__name__}: {error}")
    finally:
        if profiler is not None and options.profile_dir is not None:
            profiler.disable()
            options.profile_dir.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(options.profile_dir / f"throughput-{store_kind}-{handler}.prof")
    if result.failures:
        result.status = "FAILED"
    return result


# -- reporting -------------------------------------------------------------------------------------

HEADERS: Final = (
    "Store",
    "Handler",
    "Watch changes",
    "Jobs",
    "Time (s)",
    "Jobs/s",
    "Floor claims/s",
    "Ratio to floor",
    "Claim p50 (ms)",
    "Claim p99 (ms)",
    "Claim calls (jobs)",
    "CPU s: client / mongod",
    "Pickup lag p50 / max (ms)",
    "Lag with wake() p50 (ms)",
    "Jobs/s spread",
    "Jobs per instance",
    "Result",
)


def _on_off(watch_changes: bool | None) -> str:
    return "–" if watch_changes is None else "on" if watch_changes else "off"


def table_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    rows = []
    for r in results:
        lag = f"{median(r.lag_ms):.0f} / {max(r.lag_ms):.0f}" if r.lag_ms else "–"
        rows.append(
            [
                r.store,
                r.handler,
                _on_off(r.watch_changes),
                f"{r.jobs:,}",
                fmt(r.seconds, ".2f"),
                fmt(r.jobs_per_second, ",.0f"),
                fmt(r.floor_claims_per_second, ",.0f"),
                fmt(r.floor_ratio, ".2f"),
                fmt(r.claim_p50_ms, ".2f"),
                fmt(r.claim_p99_ms, ".2f"),
                "–" if r.claim_calls is None else f"{r.claim_calls:,} ({r.claim_hits:,})",
                f"{fmt(r.cpu_seconds, '.1f')} / {fmt(r.server_cpu_seconds, '.1f')}",
                lag,
                f"{median(r.wake_lag_ms):.1f}" if r.wake_lag_ms else "–",
                r.spread,
                (
                    f"{min(r.instance_jobs):,}–{max(r.instance_jobs):,} of {r.instances}"
                    if len(r.instance_jobs) > 1
                    else "–"
                ),
                r.status if not r.failures else f"FAILED: {'; '.join(r.failures)}",
            ]
        )
    return rows


def targets(results: Sequence[ScenarioResult]) -> list[str]:
    lines = []
    both = len({r.watch_changes for r in results}) > 1
    for store, goal in (("memory", 10_000), ("mongo", 1_000)):
        for r in results:
            rate = r.jobs_per_second
            if r.store == store and r.handler == "async" and r.status == "ok" and rate:
                label = f", watch_changes {_on_off(r.watch_changes)}" if both else ""
                lines.append(
                    f"{store} store, async handler{label}: {rate:,.0f} jobs/s end to end "
                    f"(target >= {goal:,}): {'met' if rate >= goal else 'NOT met'}"
                )
    # With --watch-changes both: the default (watching) must not fall below polling only.
    rates = {
        (r.store, r.handler, r.watch_changes): r.jobs_per_second
        for r in results
        if r.status == "ok" and r.jobs_per_second
    }
    for (store, handler, watch), rate in rates.items():
        polling = rates.get((store, handler, False))
        if watch and polling:
            lines.append(
                f"{store} store, {handler} handler: {rate:,.0f} jobs/s watching changes, "
                f"{polling:,.0f} polling only (target: not below polling): "
                f"{'met' if rate >= polling else 'NOT met'}"
            )
    return lines


def _watch_text(results: Sequence[ScenarioResult]) -> str:
    values = sorted({_on_off(r.watch_changes) for r in results})
    return " and ".join(values) + (" (see the column)" if len(values) > 1 else "")


FLOOR_NOTE: Final = (
    "Floor: Dogs' own findOneAndUpdate claim loop sent straight from pymongo (benchmarks/floor.py: "
    "Node Dogs 4.6.8's query, sort, hint and update), claims only, with workers_count × instances "
    "claimers (asyncio tasks beside `mongo`, threads beside `mongo-sync`) over the same number of "
    "due records and partitions, measured in the same run before the store's rows. Ratio: our "
    "jobs/s end to end (claim, run, delete, history row) over the floor's claims/s."
)


def markdown_report(
    results: Sequence[ScenarioResult],
    server: MongoServer | None,
    options: Options,
    command: str,
    ceiling: float | None,
    repeat: int = 1,
) -> str:
    settings = results[0] if results else None
    lines = [
        "# End-to-end throughput benchmark",
        "",
        f"Command: `{command}`",
        "",
        f"Server: {server.describe() if server else 'none (in-memory only)'}. "
        f"Machine: {machine_summary()}.",
        "",
    ]
    if settings is not None:
        lines += [
            (
                "One `Workers` instance"
                if options.instances == 1
                else f"{options.instances} `Workers` instances sharing the store, each"
            )
            + f": workers_count={settings.workers_count}, "
            f"n_partitions={settings.n_partitions}, "
            f"claim_concurrency={settings.claim_concurrency}, "
            f"claim_batch_size={settings.claim_batch_size}, "
            f"poll_interval={settings.poll_interval:g} s, "
            f"history {'on' if options.history else 'off'}, "
            f"watch_changes {_watch_text(results)}, "
            f"write concern {options.write_concern} (history "
            f"{options.history_write_concern}). No-op handlers."
            + (f" Each row is the best of {repeat} runs." if repeat > 1 else ""),
            "",
        ]
    if ceiling is not None:
        lines += [
            f"Write ceiling of this server from one process: {ceiling:,.0f} single-document "
            "`update_one`/s at concurrency 32. Claimed one at a time, a job costs three writes "
            "(claim, delete, history row); batch claims and batched completions and history "
            "rows share each write among the jobs of a batch.",
            "",
        ]
    if any(r.floor_claims_per_second for r in results):
        lines += [FLOOR_NOTE, ""]
    lines += [markdown_table(HEADERS, table_rows(results)), ""]
    target_lines = targets(results)
    if target_lines:
        lines += ["Targets:", "", *(f"- {line}" for line in target_lines), ""]
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.throughput",
        description="End-to-end jobs/s of Workers instances with no-op handlers.",
    )
    parser.add_argument(
        "--store", action="append", choices=STORES, help="a store to run (repeatable; default all)"
    )
    parser.add_argument("--handler", choices=("async", "sync", "both"), default="both")
    parser.add_argument("--memory-jobs", type=int, default=None, help="jobs on memory (10000)")
    parser.add_argument("--mongo-jobs", type=int, default=None, help="jobs on MongoDB (5000)")
    parser.add_argument("--workers-count", type=int, default=32)
    parser.add_argument("--n-partitions", type=int, default=8)
    parser.add_argument(
        "--claim-concurrency", type=int, default=None, help="default: the runtime's"
    )
    parser.add_argument("--claim-batch-size", type=int, default=None, help="default: the runtime's")
    parser.add_argument(
        "--instances",
        type=int,
        default=1,
        help="Workers instances sharing the store, as processes share a database (1)",
    )
    parser.add_argument("--poll-interval", type=float, default=None, help="seconds (1.0)")
    parser.add_argument(
        "--watch-changes",
        choices=("on", "off", "both"),
        default=None,
        help="wake the workers from the change feed (default: the runtime's); both: run each "
        "scenario with and without, to compare",
    )
    parser.add_argument("--lag-samples", type=int, default=None, help="pickup-lag samples (5)")
    parser.add_argument(
        "--no-history", action="store_true", help="do not write execution history rows"
    )
    parser.add_argument(
        "--uri", default=None, help="MongoDB URI (default: start a local mongod, then stop it)"
    )
    parser.add_argument(
        "--write-concern",
        choices=("default", "majority", "1"),
        default="default",
        help="write concern of every write (default: the client's, majority on a replica set)",
    )
    parser.add_argument(
        "--history-write-concern",
        choices=("default", "majority", "1"),
        default="default",
        help="the history rows' own write concern (default: as --write-concern)",
    )
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run everything N times; report best and spread"
    )
    parser.add_argument("--out", type=Path, default=None, help="write throughput.md/.json here")
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the raw pymongo claim loop (floor.py)"
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="write a cProfile file per scenario here"
    )
    args = parser.parse_args(argv)
    if args.memory_jobs is None:
        args.memory_jobs = 500 if args.quick else 10_000
    if args.mongo_jobs is None:
        args.mongo_jobs = 200 if args.quick else 5_000
    if args.poll_interval is None:
        args.poll_interval = 0.1 if args.quick else 1.0
    if args.lag_samples is None:
        args.lag_samples = 1 if args.quick else 5
    if min(args.memory_jobs, args.mongo_jobs, args.workers_count, args.n_partitions) < 1:
        parser.error("job counts, --workers-count and --n-partitions must be at least 1")
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.watch_changes is not None and not hasattr(WorkerSettings(), "watch_changes"):
        parser.error("--watch-changes: this runtime has no watch_changes worker option")
    if args.poll_interval <= 0 or args.lag_samples < 0:
        parser.error("--poll-interval must be > 0 and --lag-samples >= 0")
    return args


async def _run_all(
    args: argparse.Namespace,
    server: MongoServer | None,
    stores: Sequence[StoreKind],
    handlers: Sequence[HandlerKind],
    options: Options,
    console: Console,
) -> tuple[list[ScenarioResult], float | None]:
    results = []
    ceiling = None
    if server is not None and not args.quick:
        with console.status("measuring the server's single-document write rate..."):
            ceiling = await write_ceiling(server.uri, options.client_options())
        console.print(
            f"Write ceiling: {ceiling:,.0f} single-document update_one/s at concurrency 32 "
            f"(write concern {options.write_concern})"
        )
    watch_values: list[bool | None] = (
        [None]
        if args.watch_changes is None
        else [True, False]
        if args.watch_changes == "both"
        else [args.watch_changes == "on"]
    )
    with new_progress(console) as progress:
        for run in range(1, args.repeat + 1):
            for store in stores:
                floor = None
                if server is not None and store != "memory" and not args.no_floor:
                    floor = await _claim_floor(store, args.mongo_jobs, server, options, progress)
                for handler in handlers:
                    for watch in watch_values:
                        jobs = args.memory_jobs if store == "memory" else args.mongo_jobs
                        scenario_options = dataclasses.replace(options, watch_changes=watch)
                        result = await run_scenario(
                            store, handler, jobs, server, scenario_options, progress
                        )
                        result.run = run
                        result.floor_claims_per_second = floor
                        results.append(result)
    return results, ceiling


async def _claim_floor(
    store: StoreKind, jobs: int, server: MongoServer, options: Options, progress: Progress
) -> float | None:
    """The raw claim loop beside ``store``'s rows: async tasks for ``mongo``, threads for
    ``mongo-sync``; ``workers_count`` claimers per instance. A failed floor check raises."""
    task = progress.add_task(f"{store:<10} floor", total=jobs)
    w = options.client_options().get("w")
    arguments: dict[str, Any] = {
        "jobs": jobs,
        "claimers": options.workers_count * options.instances,
        "partitions": options.n_partitions,
        "write_concern": None if w is None else WriteConcern(w=w),
    }
    if store == "mongo":
        floor = await claim_floor_async(server.uri, **arguments)
    else:
        floor = await anyio.to_thread.run_sync(lambda: claim_floor_sync(server.uri, **arguments))
    if floor.failures:
        raise RuntimeError(f"the claim floor failed its checks: {'; '.join(floor.failures)}")
    progress.update(task, completed=jobs)
    return floor.claims_per_second


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    command = command_line("benchmarks.throughput", argv)
    console = new_console()
    stores: list[StoreKind] = list(dict.fromkeys(args.store or STORES))
    handlers: list[HandlerKind] = list(HANDLERS) if args.handler == "both" else [args.handler]
    options = Options(
        workers_count=args.workers_count,
        n_partitions=args.n_partitions,
        claim_concurrency=args.claim_concurrency,
        claim_batch_size=args.claim_batch_size,
        instances=args.instances,
        poll_interval=args.poll_interval,
        lag_samples=args.lag_samples,
        history=not args.no_history,
        profile_dir=args.profile,
        write_concern=args.write_concern,
        history_write_concern=args.history_write_concern,
    )
    console.print(f"[bold]Machine:[/] {machine_summary()}")
    needs_mongo = any(store != "memory" for store in stores)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(mongo_server(args.uri, console)) if needs_mongo else None
        if server is not None:
            console.print(f"[bold]Server:[/] {server.describe()}")
        results, ceiling = anyio.run(
            _run_all, args, server, stores, handlers, options, console, backend="asyncio"
        )
    summary = summarize(results)
    first = summary[0] if summary else None
    title = "Throughput"
    if first is not None:
        title += (
            f": instances={first.instances}, "
            f"workers_count={first.workers_count}, n_partitions={first.n_partitions}, "
            f"claim_concurrency={first.claim_concurrency}, "
            f"claim_batch_size={first.claim_batch_size}, poll_interval={first.poll_interval:g} s, "
            f"watch_changes {_watch_text(summary)}"
        )
    if args.repeat > 1:
        title += f", best of {args.repeat} runs"
    print_table(console, title, HEADERS, table_rows(summary))
    for line in targets(summary):
        console.print(line)
    if args.out is not None:
        atomic_write(
            args.out / "throughput.md",
            markdown_report(summary, server, options, command, ceiling, args.repeat),
        )
        dump_json(
            args.out / "throughput.json",
            {
                "server": asdict(server) if server else None,
                "machine": machine_summary(),
                "command": command,
                "write_ceiling": ceiling,
                "results": [asdict(r) for r in results],
            },
        )
        console.print(f"wrote {args.out / 'throughput.md'} and throughput.json")
    failed = [r for r in results if r.status == "FAILED"]
    if failed:
        console.print(f"[bold red]{len(failed)} scenario(s) FAILED[/]")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
