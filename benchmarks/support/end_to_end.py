"""One end-to-end run of ``Workers`` over a backlog of no-op jobs, as ``throughput`` and
``adaptive`` measure it.

A scenario (a store and a handler kind) schedules N event jobs with ``schedule_many``, starts
``Options.instances`` ``Workers`` instances sharing the store and measures the time until every
record of the job has been claimed, run and deleted (the history rows are written too, as a
deployment would): jobs/s, the latency of every claim call (a :class:`TimedStore` around the
store), CPU seconds of this process and of mongod; then the pickup lag of a few jobs scheduled
one by one while the workers are idle, with and without ``workers.wake()``. It checks its own
run: every job ran once, no record is left, one history row per run.

Stores: ``memory`` (the in-memory store), ``mongo`` (``AsyncMongoJobStore``) and ``mongo-sync``
(the generated ``MongoJobStore``, run in threads by ``ThreadedJobStore``). Handlers: ``async``
(a coroutine on the event loop) and ``sync`` (a plain function, run in a worker thread).
"""

from __future__ import annotations

import contextlib
import cProfile
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import anyio.from_thread
from pymongo import AsyncMongoClient, MongoClient
from pymongo.write_concern import WriteConcern
from rich.progress import Progress

from benchmarks.support.report import best_runs, ratio, spread
from benchmarks.support.server import MongoServer, scratch_database
from benchmarks.support.stores import TimedStore
from benchmarks.support.timing import median, percentile
from dogs_core import (
    DogsClient,
    EventJobDefinition,
    Jobs,
    ScheduleItem,
    Workers,
    WorkerSettings,
)
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.wrappers import ThreadedJobStore
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_testing import InMemoryJobStore

__all__ = [
    "HANDLERS",
    "JOB_NAME",
    "STORES",
    "HandlerKind",
    "Options",
    "ScenarioResult",
    "StoreKind",
    "on_off",
    "open_store",
    "run_scenario",
    "summarize",
]

StoreKind = Literal["memory", "mongo", "mongo-sync"]
HandlerKind = Literal["async", "sync"]
STORES: Final[tuple[StoreKind, ...]] = ("memory", "mongo", "mongo-sync")
HANDLERS: Final[tuple[HandlerKind, ...]] = ("async", "sync")
JOB_NAME: Final = "noop"
SCHEDULE_BATCH: Final = 1_000


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
    #: The raw pymongo claim loop of this run (:mod:`benchmarks.support.floors`); ``None`` in memory
    #: and with ``--no-floor``.
    floor_claims_per_second: float | None = None
    #: The raw pymongo job-cycle loop of this run (batched claim, history row, delete);
    #: ``None`` in memory and with ``--no-floor``.
    cycle_floor_jobs_per_second: float | None = None

    @property
    def floor_ratio(self) -> float | None:
        return ratio(self.jobs_per_second, self.floor_claims_per_second)

    @property
    def cycle_floor_ratio(self) -> float | None:
        return ratio(self.jobs_per_second, self.cycle_floor_jobs_per_second)

    @property
    def spread(self) -> str:
        return spread(self.all_jobs_per_second)


def summarize(results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """One row per store, handler and ``watch_changes``: the best run (highest jobs/s) with the
    spread of all ok runs; a scenario with a FAILED run is reported by that run."""
    rows = best_runs(
        results,
        key=lambda r: (r.store, r.handler, r.watch_changes),
        rate=lambda r: r.jobs_per_second,
        failed=lambda r: r.status == "FAILED",
        ok=lambda r: r.status == "ok",
    )
    for best, rates in rows:
        best.all_jobs_per_second = rates
    return [best for best, _ in rows]


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
    database = scratch_database("throughput")
    watch = "" if options.watch_changes is None else f" watch {on_off(options.watch_changes)}"
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


def on_off(watch_changes: bool | None) -> str:
    """A ``watch_changes`` as a table shows it (a dash: the runtime's default)."""
    return "–" if watch_changes is None else "on" if watch_changes else "off"
