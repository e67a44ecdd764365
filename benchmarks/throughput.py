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
import dataclasses
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

import anyio
from pymongo.write_concern import WriteConcern
from rich.console import Console
from rich.progress import Progress

from benchmarks.support.cli import (
    add_no_floor,
    add_out,
    add_quick,
    add_repeat,
    add_uri,
    add_write_concern,
    fill_sizes,
    new_parser,
)
from benchmarks.support.end_to_end import (
    HANDLERS,
    STORES,
    HandlerKind,
    Options,
    ScenarioResult,
    StoreKind,
    on_off,
    run_scenario,
    summarize,
)
from benchmarks.support.floors import (
    claim_floor_async,
    claim_floor_sync,
    job_cycle_floor,
    write_ceiling,
)
from benchmarks.support.report import (
    announce,
    command_line,
    exit_status,
    fmt,
    machine_summary,
    markdown_table,
    new_console,
    new_progress,
    outcome,
    print_table,
    report_header,
    targets_section,
    write_results,
)
from benchmarks.support.server import MongoServer, serving
from benchmarks.support.timing import median
from dogs_core import WorkerSettings

__all__ = ["HANDLERS", "STORES", "main"]


HEADERS: Final = (
    "Store",
    "Handler",
    "Watch changes",
    "Jobs",
    "Time (s)",
    "Jobs/s",
    "Floor claims/s",
    "Ratio to floor",
    "Cycle floor jobs/s",
    "Ratio to cycle floor",
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


def table_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    rows = []
    for r in results:
        lag = f"{median(r.lag_ms):.0f} / {max(r.lag_ms):.0f}" if r.lag_ms else "–"
        rows.append(
            [
                r.store,
                r.handler,
                on_off(r.watch_changes),
                f"{r.jobs:,}",
                fmt(r.seconds, ".2f"),
                fmt(r.jobs_per_second, ",.0f"),
                fmt(r.floor_claims_per_second, ",.0f"),
                fmt(r.floor_ratio, ".2f"),
                fmt(r.cycle_floor_jobs_per_second, ",.0f"),
                fmt(r.cycle_floor_ratio, ".2f"),
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
                outcome(r.failures, r.status),
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
                label = f", watch_changes {on_off(r.watch_changes)}" if both else ""
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
    values = sorted({on_off(r.watch_changes) for r in results})
    return " and ".join(values) + (" (see the column)" if len(values) > 1 else "")


FLOOR_NOTE: Final = (
    "Floor: Dogs' own findOneAndUpdate claim loop sent straight from pymongo "
    "(benchmarks/support/floors.py: Node Dogs 4.6.8's query, sort, hint and update), claims only, "
    "with workers_count × instances "
    "claimers (asyncio tasks beside `mongo`, threads beside `mongo-sync`) over the same number of "
    "due records and partitions, measured in the same run before the store's rows. Ratio: our "
    "jobs/s end to end (claim, run, delete, history row) over the floor's claims/s. "
    "Cycle floor: the fewest round trips a hand-written pymongo loop needs for the same "
    "guarantees (benchmarks/support/floors.py, job_cycle_floor): per batch of claim_batch_size "
    "jobs, one find of the best due records, one bulkWrite locking each while it is as read, one "
    "insert_many of their history rows (w: 1), one fenced deleteMany (the run's write concern), "
    "claim_concurrency × instances batches in flight; ratio: our jobs/s over its jobs/s."
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
    lines = report_header("End-to-end throughput benchmark", command, server)
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
    lines += targets_section(targets(results))
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("throughput", "End-to-end jobs/s of Workers instances with no-op handlers.")
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
    add_uri(parser)
    add_write_concern(parser, "every write")
    parser.add_argument(
        "--history-write-concern",
        choices=("default", "majority", "1"),
        default="default",
        help="the history rows' own write concern (default: as --write-concern)",
    )
    add_quick(parser)
    add_repeat(parser)
    add_out(parser, "throughput.md/.json")
    add_no_floor(parser)
    parser.add_argument(
        "--profile", type=Path, default=None, help="write a cProfile file per scenario here"
    )
    args = parser.parse_args(argv)
    fill_sizes(
        args,
        memory_jobs=(500, 10_000),
        mongo_jobs=(200, 5_000),
        poll_interval=(0.1, 1.0),
        lag_samples=(1, 5),
    )
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
                floor = cycle = None
                if server is not None and store != "memory" and not args.no_floor:
                    floor = await _claim_floor(store, args.mongo_jobs, server, options, progress)
                    cycle = await _cycle_floor(args.mongo_jobs, server, options, progress)
                for handler in handlers:
                    for watch in watch_values:
                        jobs = args.memory_jobs if store == "memory" else args.mongo_jobs
                        scenario_options = dataclasses.replace(options, watch_changes=watch)
                        result = await run_scenario(
                            store, handler, jobs, server, scenario_options, progress
                        )
                        result.run = run
                        result.floor_claims_per_second = floor
                        result.cycle_floor_jobs_per_second = cycle
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


async def _cycle_floor(
    jobs: int, server: MongoServer, options: Options, progress: Progress
) -> float | None:
    """The raw job-cycle loop beside the MongoDB rows, with the runtime's claim batch size and
    claims in flight for these settings. A failed floor check raises."""
    task = progress.add_task("cycle floor", total=jobs)
    settings = WorkerSettings(
        workers_count=options.workers_count,
        n_partitions=options.n_partitions,
        claim_concurrency=options.claim_concurrency,
        claim_batch_size=options.claim_batch_size,
    )
    w = options.client_options().get("w")
    floor = await job_cycle_floor(
        server.uri,
        jobs=jobs,
        loops=settings.claim_concurrency * options.instances,
        batch=settings.claim_batch_size,
        partitions=options.n_partitions,
        write_concern=None if w is None else WriteConcern(w=w),
    )
    if floor.failures:
        raise RuntimeError(f"the job-cycle floor failed its checks: {'; '.join(floor.failures)}")
    progress.update(task, completed=jobs)
    return floor.jobs_per_second


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
    announce(console)
    needs_mongo = any(store != "memory" for store in stores)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(serving(args.uri, console)) if needs_mongo else None
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
        write_results(
            args.out,
            "throughput",
            markdown_report(summary, server, options, command, ceiling, args.repeat),
            {
                "server": server.facts() if server else None,
                "machine": machine_summary(),
                "command": command,
                "write_ceiling": ceiling,
                "results": [asdict(r) for r in results],
            },
        )
        console.print(f"wrote {args.out / 'throughput.md'} and throughput.json")
    failed = sum(1 for r in results if r.status == "FAILED")
    return exit_status(console, failed, "scenario")


if __name__ == "__main__":
    raise SystemExit(main())
