"""Pickup latency across processes: how long a job scheduled by one process waits for an idle
worker in another process to start it.

For each mode it starts ONE idle ``Workers`` instance in a subprocess (this module run with
``--worker``: ``AsyncMongoJobStore``, ``workers_count=4``, a no-op async handler that prints
``time.time()`` as its first statement, as one JSON line on stdout). Once the worker is ready
(and, with change streams, once ``workers.watching`` is true, where the runtime has it), this
process schedules jobs one at a time with ``DogsClient.schedule``, each after a random pause of
20–200 ms counted from the previous handler start, so that the worker is idle every time. The
latency of a sample is the handler's start minus the moment ``schedule()`` returned, both wall
clock on this one machine.

Modes:

- ``streams``: ``watch_changes=True`` (the runtime default), ``poll_interval=3 s``: the worker
  wakes on the records collection's change stream; polling is only the safety net.
- ``poll-1s``: ``watch_changes=False``, ``poll_interval=1 s``.
- ``poll-3s``: ``watch_changes=False``, ``poll_interval=3 s`` (the default interval).

An idle worker's poll sleep starts right after the miss that follows its last hit, so with
polling a job scheduled 20–200 ms after the previous one started waits about ``poll_interval``
minus that pause. Target: change streams p50 <= 20 ms and p99 <= 100 ms (reported as met or
missed; absolute times depend on the machine). The script fails (exit 1) when a sample is
lost, a job ran twice or on a later try, a record is left behind, or the history rows do not
match the runs.

Run it as a module from the project root::

    python -m benchmarks.pickup                    # 1,000 samples per mode (about an hour)
    python -m benchmarks.pickup --quick            # CI size
    python -m benchmarks.pickup --mode streams --samples 200 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream
from pymongo import AsyncMongoClient
from rich.console import Console
from rich.progress import Progress, TaskID

from benchmarks.support.cli import add_out, add_quick, add_uri, new_parser
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
from benchmarks.support.server import MongoServer, scratch_database, serving
from benchmarks.support.timing import difference, percentile, process_cpu_seconds
from dogs_core import (
    DogsClient,
    EventJobDefinition,
    JobContext,
    Jobs,
    Scheduled,
    Workers,
    WorkerSettings,
)
from dogs_mongo import AsyncMongoJobStore

__all__ = ["MODES", "Mode", "ModeResult", "main"]

JOB_NAME: Final = "pickup"
ROOT: Final = Path(__file__).resolve().parents[1]
FULL_SAMPLES: Final = 1_000
#: ``--quick``: the change-stream mode gets 20 samples; a polling sample sleeps about a whole
#: poll interval, so the polling modes get 2 each (the CI run proves the script works).
QUICK_SAMPLES: Final = {"streams": 20, "poll-1s": 2, "poll-3s": 2}
WARMUP: Final = 2  # samples run first and left out of the latencies (still checked)
PAUSE_SECONDS: Final = (0.020, 0.200)  # between the previous handler start and the next schedule
WORKERS_COUNT: Final = 4
READY_TIMEOUT: Final = 60.0  # seconds for the worker process to start and report ready
WATCH_TIMEOUT: Final = 15.0  # seconds the worker waits for workers.watching to turn true
SETTLE: Final = 1.0  # seconds after ready, so that the first idle sweep is over
LATE_RUN_WAIT: Final = 1.0  # seconds after the last sample, to see a job that runs twice
STOP_TIMEOUT: Final = 30.0
TARGET_P50_MS: Final = 20.0
TARGET_P99_MS: Final = 100.0
_STDERR_TAIL = 4_000  # characters of the worker's stderr kept for a failure message


@dataclass(frozen=True, slots=True)
class Mode:
    key: str
    label: str
    watch_changes: bool
    poll_interval: float


MODES: Final = {
    mode.key: mode
    for mode in (
        Mode("streams", "change streams", True, 3.0),
        Mode("poll-1s", "polling 1 s", False, 1.0),
        Mode("poll-3s", "polling 3 s", False, 3.0),
    )
}


def has_watch_option() -> bool:
    """Whether this runtime has the ``watch_changes`` worker option (it lands with the change
    feed; before it, every mode polls)."""
    return hasattr(WorkerSettings(), "watch_changes")


def worker_options(mode: Mode, workers_count: int, n_partitions: int) -> dict[str, Any]:
    options: dict[str, Any] = {
        "workers_count": workers_count,
        "n_partitions": n_partitions,
        "poll_interval": mode.poll_interval,
    }
    if has_watch_option():
        options["watch_changes"] = mode.watch_changes
    return options


def make_jobs(on_start: Any) -> tuple[Jobs, EventJobDefinition]:
    """The registry of the one job; ``on_start(params, ctx, started)`` runs in the handler."""
    jobs = Jobs()

    async def pickup(params: dict[str, Any], ctx: JobContext) -> None:
        started = time.time()  # first: this is the sample's end
        on_start(params, ctx, started)

    return jobs, jobs.event(name=JOB_NAME)(pickup)


# -- the worker process ----------------------------------------------------------------------------


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _report_run(params: dict[str, Any], ctx: JobContext, started: float) -> None:
    _emit(
        {"event": "run", "key": params["key"], "t": started, "job": ctx.job_id, "tries": ctx.tries}
    )


async def _until_stdin_closes(scope: anyio.CancelScope) -> None:
    await anyio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
    scope.cancel()


async def serve_worker(args: argparse.Namespace) -> int:
    """The worker process: one idle ``Workers`` until stdin closes, then a graceful stop."""
    mode = MODES[args.mode[0]]
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    store = AsyncMongoJobStore(client, args.database)
    jobs, _ = make_jobs(_report_run)
    options = worker_options(mode, args.workers_count, args.n_partitions)
    try:
        async with Workers(store, jobs, **options) as workers:
            watching = getattr(workers, "watching", None)
            if mode.watch_changes and watching is not None:
                with anyio.move_on_after(WATCH_TIMEOUT):
                    # The runtime has no event for it: poll the property.
                    while not getattr(workers, "watching", False):  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                watching = bool(getattr(workers, "watching", False))
            settings = workers.settings
            _emit(
                {
                    "event": "ready",
                    "pid": os.getpid(),
                    "watching": watching,
                    "watch_changes": getattr(settings, "watch_changes", None),
                    "poll_interval": settings.poll_interval.total_seconds(),
                    "workers_count": settings.workers_count,
                    "n_partitions": settings.n_partitions,
                }
            )
            # Serve until the parent closes stdin (so does its death), or the workers stop.
            async with anyio.create_task_group() as group:
                group.start_soon(_until_stdin_closes, group.cancel_scope)
                await workers.serve()
                group.cancel_scope.cancel()
            await workers.stop()
    finally:
        await client.close()
    _emit({"event": "stopped"})
    return 0


# -- one mode ------------------------------------------------------------------------------------


@dataclass(slots=True)
class ModeResult:
    mode: str
    label: str
    watch_changes: bool
    poll_interval: float
    samples: int
    workers_count: int
    n_partitions: int
    latencies_ms: list[float] = field(default_factory=list)
    schedule_ms: list[float] = field(default_factory=list)
    #: ``workers.watching`` as the worker reported it when ready (None: the runtime has no such
    #: attribute yet).
    watching: bool | None = None
    watch_option: bool | None = None
    seconds: float | None = None
    worker_cpu_seconds: float | None = None
    server_cpu_seconds: float | None = None
    status: str = "ok"
    failures: list[str] = field(default_factory=list)
    #: The end of what the worker process wrote on stderr (its warnings, a traceback).
    worker_stderr: str = ""

    def p(self, fraction: float) -> float | None:
        return percentile(self.latencies_ms, fraction) if self.latencies_ms else None

    @property
    def watching_text(self) -> str:
        if self.watching is None:
            return "no such attribute"
        return "yes" if self.watching else "no"


class WorkerProcess:
    """The events a worker process prints, as they arrive."""

    def __init__(self) -> None:
        self.ready = anyio.Event()
        self.ended = anyio.Event()
        self.heard = anyio.Event()  # ready, or stdout ended first
        self.ready_event: dict[str, Any] = {}
        self.runs: dict[int, list[dict[str, Any]]] = {}
        self.stray: list[str] = []
        self.stderr = ""
        self._waiting: dict[int, anyio.Event] = {}

    def expect(self, key: int) -> anyio.Event:
        """An event set when the handler of sample ``key`` starts (create it before scheduling)."""
        event = self._waiting[key] = anyio.Event()
        return event

    async def read_stdout(self, stream: anyio.abc.ByteReceiveStream) -> None:
        buffered = BufferedByteReceiveStream(stream)
        try:
            while True:
                try:
                    line = await buffered.receive_until(b"\n", 1 << 20)
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                try:
                    event = json.loads(line)
                except ValueError:
                    self.stray.append(line.decode(errors="replace"))
                    continue
                kind = event.get("event") if isinstance(event, dict) else None
                if kind == "run":
                    key = int(event["key"])
                    self.runs.setdefault(key, []).append(event)
                    waiting = self._waiting.get(key)
                    if waiting is not None:
                        waiting.set()
                elif kind == "ready":
                    self.ready_event = event
                    self.ready.set()
                    self.heard.set()
        finally:
            self.ended.set()
            self.heard.set()

    async def read_stderr(self, stream: anyio.abc.ByteReceiveStream) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stream:
                self.stderr = (self.stderr + chunk.decode(errors="replace"))[-_STDERR_TAIL:]


def worker_command(
    mode: Mode, uri: str, database: str, workers_count: int, n_partitions: int
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "benchmarks.pickup",
        "--worker",
        "--mode",
        mode.key,
        "--uri",
        uri,
        "--database",
        database,
        "--workers-count",
        str(workers_count),
        "--n-partitions",
        str(n_partitions),
    ]


async def run_mode(
    mode: Mode,
    server: MongoServer,
    samples: int,
    workers_count: int,
    n_partitions: int,
    rng: random.Random,
    progress: Progress,
) -> ModeResult:
    result = ModeResult(
        mode=mode.key,
        label=mode.label,
        watch_changes=mode.watch_changes,
        poll_interval=mode.poll_interval,
        samples=samples,
        workers_count=workers_count,
        n_partitions=n_partitions,
    )
    task = progress.add_task(f"{mode.label:<15} starting the worker", total=samples)
    database = scratch_database("pickup")
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(server.uri, tz_aware=True)
    store = AsyncMongoJobStore(client, database)
    jobs, definition = make_jobs(_never_here)
    dogs = DogsClient(store, jobs, n_partitions=n_partitions)
    worker = WorkerProcess()
    process: anyio.abc.Process | None = None
    try:
        await store.setup()  # the indexes exist before the worker starts
        command = worker_command(mode, server.uri, database, workers_count, n_partitions)
        process = await anyio.open_process(command, cwd=ROOT)
        assert process.stdout is not None
        assert process.stderr is not None
        async with anyio.create_task_group() as readers:
            readers.start_soon(worker.read_stdout, process.stdout)
            readers.start_soon(worker.read_stderr, process.stderr)
            sampler = _Sampler(worker, process, dogs, definition, rng, progress, task)
            await sampler.run(mode, samples, result, server)
            await _stop_worker(process, worker, result)
            progress.update(task, completed=len(result.latencies_ms))
            readers.cancel_scope.cancel()
        await _check_store(store, worker, result)
    except Exception as error:
        result.failures.extend(_describe(error))
    finally:
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with anyio.move_on_after(5), contextlib.suppress(Exception):
                await process.wait()
        with contextlib.suppress(Exception):
            await client.drop_database(database)
        await client.close()
    result.worker_stderr = worker.stderr
    if result.failures:
        result.status = "FAILED"
    return result


def _describe(error: BaseException) -> list[str]:
    """One line per leaf of ``error`` (task groups wrap what their tasks raised)."""
    if isinstance(error, BaseExceptionGroup):
        return [line for inner in error.exceptions for line in _describe(inner)]
    if isinstance(error, _Abort):
        return [str(error)]
    return [f"{type(error).__name__}: {error}"]


class _Abort(Exception):
    """Ends a mode early with a failure (the message)."""


def _never_here(params: dict[str, Any], ctx: JobContext, started: float) -> None:
    raise AssertionError("the scheduling process runs no jobs")


@dataclass(slots=True)
class _Sampler:
    """Schedules the samples of one mode and reads their latencies."""

    worker: WorkerProcess
    process: anyio.abc.Process
    dogs: DogsClient
    definition: EventJobDefinition
    rng: random.Random
    progress: Progress
    task: TaskID

    async def run(self, mode: Mode, samples: int, result: ModeResult, server: MongoServer) -> None:
        worker, process = self.worker, self.process
        with anyio.move_on_after(READY_TIMEOUT):
            await worker.heard.wait()
        if not worker.ready.is_set():
            code = process.returncode
            raise _Abort(
                f"the worker process did not report ready within {READY_TIMEOUT:g} s"
                + (f" (it exited with {code})" if code is not None else "")
            )
        ready = worker.ready_event
        self.progress.update(self.task, description=f"{mode.label:<15}")
        result.watching = ready.get("watching")
        result.watch_option = ready.get("watch_changes")
        if not mode.watch_changes and result.watching:
            result.failures.append("watch_changes=False, yet the worker reports watching")
        await anyio.sleep(SETTLE)
        timeout = mode.poll_interval * 2 + 10
        worker_pid = int(ready.get("pid") or process.pid)
        worker_cpu_began = process_cpu_seconds(worker_pid)
        server_cpu_began = server.cpu_seconds()
        began = time.perf_counter()
        last_start = time.time()
        for index in range(WARMUP + samples):
            started = worker.expect(index)
            delay = last_start + self.rng.uniform(*PAUSE_SECONDS) - time.time()
            if delay > 0:
                await anyio.sleep(delay)
            before = time.time()
            outcome = await self.dogs.schedule(self.definition, {"key": index})
            scheduled_at = time.time()
            if not isinstance(outcome, Scheduled):
                raise _Abort(f"sample {index}: schedule() returned {outcome!r}")
            with anyio.move_on_after(timeout):
                await started.wait()
            if not started.is_set():
                raise _Abort(f"sample {index} lost: its handler did not start within {timeout:g} s")
            last_start = float(worker.runs[index][0]["t"])
            if index >= WARMUP:
                result.latencies_ms.append((last_start - scheduled_at) * 1000)
                result.schedule_ms.append((scheduled_at - before) * 1000)
                self.progress.update(self.task, completed=len(result.latencies_ms))
        result.seconds = time.perf_counter() - began
        await anyio.sleep(LATE_RUN_WAIT)  # a job that runs twice shows up here
        result.worker_cpu_seconds = difference(worker_cpu_began, process_cpu_seconds(worker_pid))
        result.server_cpu_seconds = difference(server_cpu_began, server.cpu_seconds())


async def _stop_worker(
    process: anyio.abc.Process, worker: WorkerProcess, result: ModeResult
) -> None:
    """Close the worker's stdin (it stops gracefully) and wait until it has exited."""
    assert process.stdin is not None
    await process.stdin.aclose()
    with anyio.move_on_after(STOP_TIMEOUT):
        await process.wait()
        await worker.ended.wait()
    if process.returncode is None:
        raise _Abort(f"the worker did not stop within {STOP_TIMEOUT:g} s of its stdin closing")
    if process.returncode != 0:
        result.failures.append(f"the worker process exited with {process.returncode}")


async def _check_store(
    store: AsyncMongoJobStore, worker: WorkerProcess, result: ModeResult
) -> None:
    """Every sample ran exactly once, on its first try, and left one history row and no record."""
    expected = WARMUP + result.samples
    missing = [key for key in range(expected) if key not in worker.runs]
    if missing:
        result.failures.append(f"{len(missing)} sample(s) never ran: {missing[:10]}")
    twice = {key: len(runs) for key, runs in worker.runs.items() if len(runs) > 1}
    if twice:
        result.failures.append(
            f"{len(twice)} job(s) ran more than once: {dict(list(twice.items())[:10])}"
        )
    unknown = sorted(key for key in worker.runs if not 0 <= key < expected)
    if unknown:
        result.failures.append(f"runs of jobs never scheduled: {unknown[:10]}")
    retried = sorted(
        key for key, runs in worker.runs.items() if any(int(run["tries"]) != 1 for run in runs)
    )
    if retried:
        result.failures.append(f"{len(retried)} job(s) ran on a later try: {retried[:10]}")
    left = await store.find_records(job_name=JOB_NAME, limit=5)
    if left:
        result.failures.append(f"{len(left)} record(s) left after every job ran")
    rows = await store.read_history(JOB_NAME, limit=expected + 100)
    runs = sum(len(r) for r in worker.runs.values())
    if len(rows) != runs:
        result.failures.append(f"{len(rows)} history rows for {runs} runs")
    if worker.stray:
        result.failures.append(f"the worker printed {len(worker.stray)} unexpected line(s)")


# -- reporting -------------------------------------------------------------------------------------

HEADERS: Final = (
    "Mode",
    "watch_changes",
    "poll_interval (s)",
    "Samples",
    "p50 (ms)",
    "p95 (ms)",
    "p99 (ms)",
    "Max (ms)",
    "schedule() p50 (ms)",
    "CPU s: worker / mongod",
    "Change feed open",
    "Result",
)


def table_rows(results: Sequence[ModeResult]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                r.label,
                ("on" if r.watch_changes else "off")
                + (" (no such option)" if r.watch_option is None and r.samples else ""),
                f"{r.poll_interval:g}",
                f"{len(r.latencies_ms):,}",
                fmt(r.p(0.50), ".1f"),
                fmt(r.p(0.95), ".1f"),
                fmt(r.p(0.99), ".1f"),
                fmt(max(r.latencies_ms) if r.latencies_ms else None, ".1f"),
                fmt(percentile(r.schedule_ms, 0.5) if r.schedule_ms else None, ".1f"),
                f"{fmt(r.worker_cpu_seconds, '.1f')} / {fmt(r.server_cpu_seconds, '.1f')}",
                r.watching_text,
                outcome(r.failures, r.status),
            ]
        )
    return rows


def targets(results: Sequence[ModeResult]) -> list[str]:
    lines = []
    for r in results:
        p50, p99 = r.p(0.50), r.p(0.99)
        if r.mode != "streams" or r.status != "ok" or p50 is None or p99 is None:
            continue
        met = p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS
        line = (
            f"change streams: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
            f"(target p50 <= {TARGET_P50_MS:g} ms and p99 <= {TARGET_P99_MS:g} ms): "
            f"{'met' if met else 'missed'}"
        )
        if not r.watching:
            line += (
                f" (the change feed was not open: workers.watching is "
                f"{'missing' if r.watching is None else 'false'}, so the worker polled)"
            )
        lines.append(line)
    return lines


def markdown_report(
    results: Sequence[ModeResult], server: MongoServer, command: str, seed: int
) -> str:
    first = results[0] if results else None
    lines = report_header("Pickup latency across processes", command, server)
    if first is not None:
        lines += [
            f"One idle `Workers` instance in another process per mode "
            f"(workers_count={first.workers_count}, n_partitions={first.n_partitions}, "
            "a no-op async handler). Jobs scheduled one at a time with `DogsClient.schedule`, "
            f"each {PAUSE_SECONDS[0] * 1000:g}–{PAUSE_SECONDS[1] * 1000:g} ms after the previous "
            f"handler started (random, seed {seed}; {WARMUP} warm-up samples first, left out). "
            "Latency: the handler's start minus `schedule()` returning (wall clock, one machine).",
            "",
        ]
    lines += [markdown_table(HEADERS, table_rows(results)), ""]
    lines += targets_section(targets(results))
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "pickup", "Pickup latency of an idle worker in another process, per wake-up mode."
    )
    parser.add_argument(
        "--mode", action="append", choices=list(MODES), help="a mode to run (repeatable; all)"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help=f"samples per mode ({FULL_SAMPLES:,}; --quick: 20 with streams, 2 when polling)",
    )
    parser.add_argument("--workers-count", type=int, default=WORKERS_COUNT)
    parser.add_argument("--n-partitions", type=int, default=None, help="default: the runtime's (1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random pauses (1)")
    add_uri(parser)
    add_quick(parser)
    add_out(parser, "pickup.md/.json")
    # The worker process: ``--worker --mode M --uri U --database D``.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.n_partitions is None:
        args.n_partitions = WorkerSettings().n_partitions
    if args.samples is not None and args.samples < 1:
        parser.error("--samples must be at least 1")
    if args.workers_count < 1 or args.n_partitions < 1:
        parser.error("--workers-count and --n-partitions must be at least 1")
    if args.worker and (not args.uri or not args.database or not args.mode):
        parser.error("--worker needs --uri, --database and --mode")
    return args


def samples_for(mode: Mode, args: argparse.Namespace) -> int:
    if args.samples is not None:
        return int(args.samples)
    return QUICK_SAMPLES[mode.key] if args.quick else FULL_SAMPLES


async def run_all(
    modes: Sequence[Mode], server: MongoServer, args: argparse.Namespace, console: Console
) -> list[ModeResult]:
    results = []
    with new_progress(console) as progress:
        for mode in modes:
            rng = random.Random(f"{args.seed}:{mode.key}")
            samples = samples_for(mode, args)
            results.append(
                await run_mode(
                    mode, server, samples, args.workers_count, args.n_partitions, rng, progress
                )
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.worker:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        return anyio.run(serve_worker, args, backend="asyncio")
    command = command_line("benchmarks.pickup", argv)
    console = new_console()
    modes = [MODES[key] for key in dict.fromkeys(args.mode or MODES)]
    announce(console)
    if not has_watch_option():
        console.print("this runtime has no watch_changes option: every mode polls")
    with serving(args.uri, console) as server:
        results = anyio.run(run_all, modes, server, args, console, backend="asyncio")
        title = (
            f"Pickup latency across processes: one idle worker "
            f"(workers_count={args.workers_count}, n_partitions={args.n_partitions}), "
            f"MongoDB {server.version}"
        )
        print_table(console, title, HEADERS, table_rows(results))
        for line in targets(results):
            console.print(line)
        for r in results:
            if r.status == "FAILED" and r.worker_stderr.strip():
                console.print(f"[bold]{r.label}: the end of the worker's stderr:[/]")
                console.print(r.worker_stderr.strip()[-2_000:], markup=False, highlight=False)
        if args.out is not None:
            write_results(
                args.out,
                "pickup",
                markdown_report(results, server, command, args.seed),
                {
                    "server": server.facts(),
                    "machine": machine_summary(),
                    "command": command,
                    "seed": args.seed,
                    "warmup": WARMUP,
                    "pause_seconds": PAUSE_SECONDS,
                    "results": [asdict(r) for r in results],
                },
            )
            console.print(f"wrote {args.out / 'pickup.md'} and pickup.json")
    return exit_status(console, sum(1 for r in results if r.status == "FAILED"), "mode")


if __name__ == "__main__":
    raise SystemExit(main())
