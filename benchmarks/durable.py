"""Durable jobs on the real mongod: recorded steps per second against plain jobs per second in
the same sitting, the writes a step costs, the replay of 100 recorded steps, what sleeping jobs
cost an idle fleet, and how late a sleep wakes.

Scenarios, one after the other on one server, each with one ``Workers`` instance
(``workers_count=32``, ``n_partitions=8``, change streams on) and no-op async work:

- ``plain jobs``: 10 x N event jobs, each doing one no-op unit of work, scheduled with
  ``schedule_many`` and drained: jobs/s.
- ``durable, 10 steps``: N event jobs, each doing the same 10 units as 10 ``ctx.step`` calls:
  recorded steps/s (the same work as the plain jobs), and the record writes per step, counted by
  a PyMongo command listener (target: one round trip per recorded step).
- ``replay of 100 steps``: M jobs of 100 steps that fail once after their last step; the retry
  replays all 100 from the record it claimed: the replay's time (the handler's start to its
  100th step returned, measured in the handler), the commands the client sent meanwhile, and
  the step writes during the retries (targets: none and none: the steps came with the claim).
- ``idle, sleeping``: the commands an idle fleet sends per second over T seconds with no record,
  then with K records sleeping for a day (``ctx.sleep``'s stored shape), and the start latency
  of one job scheduled into each (target: the sleeping records cost nothing: no per-job
  polling).
- ``sleep to resume``: S jobs sleep 1 s: each one's resumed run starts this long after its
  wake-up time (the history row's start minus the recorded wake-up).

Each scenario checks itself: every job succeeded once (one success row each), every step was
recorded exactly once, no record is left. Exit 1 when a check fails.

Run it as a module from the project root::

    python -m benchmarks.durable               # 10,000 plain, 1,000 x 10 steps, 20 x 100, 10,000
    python -m benchmarks.durable --quick       # CI size
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient
from pymongo.monitoring import CommandListener, CommandStartedEvent
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
from dogs_core.domain.records import JobRecord, JobType
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.domain.steps import RecordedStep
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.queries.steps import STEPS_FIELD

__all__ = ["main"]

WORKERS_COUNT: Final = 32
N_PARTITIONS: Final = 8
STEPS: Final = 10  # steps of a durable job (and plain jobs per durable job)
REPLAY: Final = 100  # steps replayed by a retry
SLEEP_SECONDS: Final = 1.0
TARGET_RATIO: Final = 0.5
TARGET_WRITES_PER_STEP: Final = 1.0

#: The ``comment`` of the benchmark's own reads: the command listener leaves them out.
OWN_READS: Final = "benchmarks.durable"

jobs = Jobs()
#: The replay's time of each job's second run (ms), and the commands the whole client sent
#: meanwhile (the fleet's own polls included), written by the handler.
REPLAYS_MS: list[float] = []
REPLAY_COMMANDS: list[int] = []


async def unit(n: int) -> dict[str, int]:
    """One unit of no-op work (what a step does, and what a plain job does once)."""
    return {"n": n}


@jobs.event
async def plain(params: Any, ctx: JobContext) -> None:
    await unit(int(params["n"]))


@jobs.event
async def durable(params: Any, ctx: JobContext) -> None:
    for n in range(STEPS):
        await ctx.step(f"unit {n}", unit, n)


@jobs.event(max_tries=2, retry=RetryPolicy(base=timedelta(milliseconds=10), jitter=0))
async def replayed(params: Any, ctx: JobContext) -> None:
    began, sent = time.perf_counter(), COMMANDS.total
    replaying = len(ctx.steps) == REPLAY
    for n in range(REPLAY):
        await ctx.step(f"unit {n}", unit, n)
    if replaying:
        REPLAYS_MS.append((time.perf_counter() - began) * 1000)
        REPLAY_COMMANDS.append(COMMANDS.total - sent)
        return
    raise RuntimeError("fail once after the last step: the retry replays them all")


@jobs.event
async def sleeper(params: Any, ctx: JobContext) -> None:
    await ctx.sleep(SLEEP_SECONDS)


class Commands(CommandListener):
    """Counts what the client sends: every command, and the updates that record a step (their
    update sets ``steps``)."""

    def __init__(self) -> None:
        self.total = 0
        self.step_writes = 0

    def reset(self) -> None:
        self.total = self.step_writes = 0

    def started(self, event: CommandStartedEvent) -> None:
        command = event.command
        if command.get("comment") == OWN_READS:
            return  # the benchmark watching for the end, not the fleet
        self.total += 1
        name = event.command_name
        if name == "update":
            for statement in command.get("updates", ()):
                update = statement.get("u")
                if isinstance(update, list) and any(
                    STEPS_FIELD in stage.get("$set", {}) for stage in update
                ):
                    self.step_writes += 1

    def succeeded(self, event: Any) -> None:
        return None

    def failed(self, event: Any) -> None:
        return None


COMMANDS: Final = Commands()


@dataclass
class Result:
    scenario: str
    units: int
    seconds: float | None = None
    step_writes: int | None = None
    replay_commands: int | None = None
    replay_ms: list[float] = field(default_factory=list)
    commands_per_second: float | None = None
    start_latency_ms: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return None if not self.seconds else self.units / self.seconds


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


async def _drained(store: AsyncMongoJobStore) -> None:
    while await store.records_collection.count_documents({}, limit=1, comment=OWN_READS):  # noqa: ASYNC110
        await anyio.sleep(0.05)


async def _schedule(client: DogsClient, job: Any, count: int) -> None:
    for start in range(0, count, 1000):
        items = [ScheduleItem(params={"n": n}) for n in range(start, min(count, start + 1000))]
        await client.schedule_many(job, items)


async def _check_successes(store: AsyncMongoJobStore, count: int, result: Result) -> None:
    rows = await store.history_collection.count_documents({"status": "success"})
    if rows != count:
        result.failures.append(f"{rows} success rows for {count} jobs")
    if await store.records_collection.count_documents({}, limit=1):
        result.failures.append("records left")


async def plain_jobs(store: AsyncMongoJobStore, commands: Commands, count: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result("plain jobs", count * STEPS)
    await _schedule(client, plain, count * STEPS)
    began = time.perf_counter()
    async with _workers(store) as workers:
        await _drained(store)
        result.seconds = time.perf_counter() - began
        await workers.stop()
    await _check_successes(store, count * STEPS, result)
    return result


async def durable_steps(store: AsyncMongoJobStore, commands: Commands, count: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result(f"durable, {STEPS} steps", count * STEPS)
    await _schedule(client, durable, count)
    commands.reset()
    began = time.perf_counter()
    async with _workers(store) as workers:
        await _drained(store)
        result.seconds = time.perf_counter() - began
        await workers.stop()
    result.step_writes = commands.step_writes
    await _check_successes(store, count, result)
    if commands.step_writes < count * STEPS:
        result.failures.append(f"{commands.step_writes} step writes for {count * STEPS} steps")
    return result


async def replay(store: AsyncMongoJobStore, commands: Commands, count: int) -> Result:
    """The first runs fail on purpose: their error logs are left out of the output."""
    dogs_logger = logging.getLogger("dogs")
    level = dogs_logger.level
    dogs_logger.setLevel(logging.CRITICAL)
    try:
        return await _replay(store, commands, count)
    finally:
        dogs_logger.setLevel(level)


async def _replay(store: AsyncMongoJobStore, commands: Commands, count: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result(f"replay of {REPLAY} steps", count * REPLAY)
    REPLAYS_MS.clear()
    REPLAY_COMMANDS.clear()
    await _schedule(client, replayed, count)
    async with _workers(store) as workers:
        with anyio.fail_after(300):
            errors = {"status": "error"}
            while await store.history_collection.count_documents(errors) < count:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            commands.reset()  # from here on: the retries
            await _drained(store)
        await workers.stop()
    result.step_writes = commands.step_writes
    result.replay_commands = max(REPLAY_COMMANDS, default=None)
    result.replay_ms = list(REPLAYS_MS)
    await _check_successes(store, count, result)
    if len(REPLAYS_MS) != count:
        result.failures.append(f"{len(REPLAYS_MS)} replays for {count} jobs")
    if commands.step_writes:
        result.failures.append(f"{commands.step_writes} step writes during the replays")
    return result


def _sleeping_documents(count: int, now: datetime) -> list[dict[str, Any]]:
    wake = now + timedelta(days=1)
    documents = []
    for n in range(count):
        lock = new_execution_id()
        record = JobRecord(
            id=new_record_id(),
            job_name="sleeper",
            type=JobType.EVENT,
            priority=100,
            next_run_at=wake,
            partition=n % N_PARTITIONS,
            params={"n": n},
            tries=0,
            last_run_at=now,
            steps=(RecordedStep("sleep:1", wake, now, lock),),
            sleeping_until=wake,
        )
        documents.append(q.document_from_record(record))
    return documents


async def _idle(
    store: AsyncMongoJobStore, commands: Commands, seconds: float
) -> tuple[float, float]:
    """Commands per second of an idle fleet over ``seconds``, then the start latency of one job
    scheduled into it (ms, from the schedule call to its handler's start)."""
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    async with _workers(store) as workers:
        await anyio.sleep(1)  # started: its first polls and streams are not idle cost
        commands.reset()
        await anyio.sleep(seconds)
        rate = commands.total / seconds
        began = datetime.now(UTC)
        outcome_ = await client.schedule(plain, {"n": -1})
        job_id = str(getattr(outcome_, "id", ""))
        with anyio.fail_after(60):
            ran = {"jobId": job_id}
            while not await store.history_collection.count_documents(ran, comment=OWN_READS):  # noqa: ASYNC110
                await anyio.sleep(0.005)
        await workers.stop()
    row = await store.history_collection.find_one({"jobId": job_id})
    assert row is not None
    started = row["startedAt"]
    return rate, (started - began).total_seconds() * 1000


async def idle_sleeping(
    store: AsyncMongoJobStore, commands: Commands, count: int, seconds: float
) -> list[Result]:
    empty = Result("idle, no record", 0)
    empty.commands_per_second, empty.start_latency_ms = await _idle(store, commands, seconds)
    await store.records_collection.delete_many({})
    documents = _sleeping_documents(count, datetime.now(UTC))
    for start in range(0, count, 5000):
        await store.records_collection.insert_many(documents[start : start + 5000], ordered=False)
    slept = Result(f"idle, {count:,} sleeping", count)
    slept.commands_per_second, slept.start_latency_ms = await _idle(store, commands, seconds)
    left = await store.records_collection.count_documents({"sleepingUntil": {"$exists": True}})
    if left != count:
        slept.failures.append(f"{left} of {count} sleeping records left")
    return [empty, slept]


async def sleep_to_resume(store: AsyncMongoJobStore, commands: Commands, count: int) -> Result:
    client = DogsClient(store, jobs, n_partitions=N_PARTITIONS)
    result = Result(f"sleep to resume ({SLEEP_SECONDS:g} s)", count)
    await _schedule(client, sleeper, count)
    began = time.perf_counter()
    async with _workers(store) as workers:
        await _drained(store)
        result.seconds = time.perf_counter() - began
        await workers.stop()
    await _check_successes(store, count, result)
    snoozed: dict[str, datetime] = {}
    async for row in store.history_collection.find({"status": "snoozed"}):
        snoozed[row["jobId"]] = row["startedAt"]
    async for row in store.history_collection.find({"status": "success"}):
        slept_at = snoozed.get(row["jobId"])
        if slept_at is not None:  # woke at the sleep's start + 1 s (or later)
            wake = slept_at + timedelta(seconds=SLEEP_SECONDS)
            result.latencies_ms.append((row["startedAt"] - wake).total_seconds() * 1000)
    if len(result.latencies_ms) != count:
        result.failures.append(f"{len(result.latencies_ms)} resumed sleeps for {count} jobs")
    return result


async def run_all(server: MongoServer, args: argparse.Namespace, console: Console) -> list[Result]:
    commands = COMMANDS
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        server.uri, tz_aware=True, event_listeners=[commands]
    )
    results: list[Result] = []
    scenarios: list[tuple[str, Any]] = [
        ("plain jobs", lambda s: plain_jobs(s, commands, args.jobs)),
        ("durable", lambda s: durable_steps(s, commands, args.jobs)),
        ("replay", lambda s: replay(s, commands, args.replays)),
        ("idle", lambda s: idle_sleeping(s, commands, args.sleeping, args.idle_seconds)),
        ("sleep to resume", lambda s: sleep_to_resume(s, commands, args.sleeps)),
    ]
    try:
        for label, scenario in scenarios:
            name = scratch_database("durable")
            try:
                store = AsyncMongoJobStore(mongo, name)
                await store.setup()
                with console.status(f"{label}..."):
                    done = await scenario(store)
                for result in done if isinstance(done, list) else [done]:
                    console.print(f"{result.scenario}: done")
                    results.append(result)
            finally:
                await mongo.drop_database(name)
    finally:
        await mongo.close()
    return results


HEADERS: Final = (
    "Scenario",
    "Units",
    "Run (s)",
    "Units/s",
    "Ratio to plain jobs/s",
    "Step writes (per step)",
    "Commands while replaying (max)",
    "Replay p50 / max (ms)",
    "Idle commands/s",
    "Start latency (ms)",
    "Wake-up lateness p50 / p99 / max (ms)",
    "Result",
)


def _per_step(result: Result) -> str:
    if result.step_writes is None:
        return "–"
    if not result.units or result.scenario.startswith("replay"):
        return f"{result.step_writes:,}"
    return f"{result.step_writes:,} ({result.step_writes / result.units:.2f})"


def _spread(values: Sequence[float], points: Sequence[float]) -> str:
    if not values:
        return "–"
    return " / ".join(f"{percentile(values, p):.1f}" for p in points) + f" / {max(values):.1f}"


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    plain_rate = next((r.rate for r in results if r.scenario == "plain jobs"), None)
    rows = []
    for r in results:
        compared = r.scenario.startswith("durable") and r.rate and plain_rate
        rows.append(
            [
                r.scenario,
                f"{r.units:,}",
                fmt(r.seconds, ".2f"),
                fmt(r.rate, ",.0f"),
                fmt(r.rate / plain_rate if compared and r.rate and plain_rate else None, ".2f"),
                _per_step(r),
                "–" if r.replay_commands is None else f"{r.replay_commands:,}",
                _spread(r.replay_ms, (0.5,)),
                fmt(r.commands_per_second, ".1f"),
                fmt(r.start_latency_ms, ".1f"),
                _spread(r.latencies_ms, (0.5, 0.99)),
                outcome(r.failures),
            ]
        )
    return rows


def targets(results: Sequence[Result]) -> list[str]:
    lines = []
    plain_rate = next((r.rate for r in results if r.scenario == "plain jobs"), None)
    for r in results:
        if r.scenario.startswith("durable") and r.rate and plain_rate:
            ratio = r.rate / plain_rate
            met = "met" if ratio >= TARGET_RATIO else "NOT met"
            lines.append(
                f"durable steps: {r.rate:,.0f} steps/s, {ratio:.2f}x the plain {plain_rate:,.0f} "
                f"jobs/s (target >= {TARGET_RATIO}x): {met}"
            )
            if r.step_writes is not None and r.units:
                per_step = r.step_writes / r.units
                met = "met" if per_step <= TARGET_WRITES_PER_STEP else "NOT met"
                lines.append(
                    f"record writes per recorded step: {per_step:.2f} "
                    f"(target <= {TARGET_WRITES_PER_STEP:g}): {met}"
                )
        if r.scenario.startswith("replay") and r.replay_commands is not None:
            met = "met" if r.replay_commands == 0 and not r.step_writes else "NOT met"
            lines.append(
                f"replay of {REPLAY} steps: at most {r.replay_commands} commands sent while a "
                f"handler replayed them, {r.step_writes} step writes by the retries "
                f"(p50 / max {_spread(r.replay_ms, (0.5,))} ms per replay; target: none, the "
                f"steps came with the claim): {met}"
            )
    idle = [r for r in results if r.scenario.startswith("idle")]
    if len(idle) == 2 and all(r.commands_per_second is not None for r in idle):
        empty, slept = idle
        assert empty.commands_per_second is not None
        assert slept.commands_per_second is not None
        met = (
            "met" if slept.commands_per_second <= empty.commands_per_second * 1.5 + 1 else "NOT met"
        )
        lines.append(
            f"idle fleet: {empty.commands_per_second:.1f} commands/s with no record, "
            f"{slept.commands_per_second:.1f} with {slept.units:,} sleeping "
            f"(target: no per-job polling, within 1.5x + 1): {met}"
        )
    return lines


def markdown_report(results: Sequence[Result], server: MongoServer, command: str) -> str:
    lines = report_header("Durable jobs benchmark", command, server)
    lines += [
        f"One `Workers` instance (workers_count={WORKERS_COUNT}, n_partitions={N_PARTITIONS}, "
        "change streams on), no-op async work, every scenario in this one sitting. Step writes "
        "and commands counted by a PyMongo command listener on the benchmark's client.",
        "",
        markdown_table(HEADERS, table_rows(results)),
        "",
    ]
    lines += targets_section(targets(results))
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser("durable", "Durable steps/s against plain jobs/s; replay; sleeps.")
    parser.add_argument(
        "--jobs", type=int, default=None, help=f"durable jobs of {STEPS} steps (1000)"
    )
    parser.add_argument("--replays", type=int, default=None, help=f"jobs replaying {REPLAY} (20)")
    parser.add_argument("--sleeping", type=int, default=None, help="sleeping records (10000)")
    parser.add_argument("--sleeps", type=int, default=None, help="jobs sleeping 1 s (200)")
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="idle time measured (10; --quick 2)"
    )
    add_uri(parser)
    add_quick(parser, "20 x 10 steps, 3 replays, 1,000 sleeping, 20 sleeps")
    add_out(parser, "durable.md/.json")
    args = parser.parse_args(argv)
    fill_sizes(
        args,
        jobs=(20, 1_000),
        replays=(3, 20),
        sleeping=(1_000, 10_000),
        sleeps=(20, 200),
        idle_seconds=(2, 10),
    )
    if min(args.jobs, args.replays, args.sleeping, args.sleeps) < 1 or args.idle_seconds <= 0:
        parser.error("--jobs, --replays, --sleeping, --sleeps and --idle-seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    command = command_line("benchmarks.durable", argv)
    console = new_console()
    announce(console, command)
    with serving(args.uri, console) as server:
        results = anyio.run(run_all, server, args, console, backend="asyncio")
        publish(
            console,
            "durable",
            title=f"Durable jobs, MongoDB {server.version}",
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
