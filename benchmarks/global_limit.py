"""What a fleet-wide limit costs per claim: the same no-op workload without a limit, with a
global concurrency limit, with a rate limit and with both, on a real mongod.

Per scenario it schedules N event jobs of one name with ``schedule_many``, starts one
``Workers`` instance (``AsyncMongoJobStore``, ``workers_count=32``) and measures the time until
every job has completed. Every MongoDB command the store sends meanwhile is counted by a PyMongo
``CommandListener``, by collection (records, history, controls) and kind; a store wrapper
counts the jobs a limit refused (given back with their try, run later). The scenarios:

- ``no limit``: the baseline;
- ``global_concurrency=64``: a limit the workload never reaches (32 workers): the cost of taking
  and giving back a slot, alone;
- ``rate_limit=(1000000, 1s)``: a rate limit never reached: the cost of one token per start;
- ``both``: the two limits above;
- ``global_concurrency=1000``: a limit never reached, of many slots: whether the size of the
  limit costs anything (a slot is looked for among a few chosen by the taker's id first);
- ``global_concurrency=8``: a limit that is reached (8 slots for 32 workers): the refused jobs'
  claims and give-backs come on top.

The table shows jobs/s, the write commands (``insert``, ``update``, ``delete``,
``findAndModify``) per job and how many more than without a limit, and the server's write
conflicts per job (``serverStatus``, server-wide: run it on a quiet server). With ``--repeat N``
every scenario runs N times, interleaved, and the table shows the run with the most jobs/s and
the spread. It checks its own results:
every job ran exactly once, on its first try, and left one history row and no record; a
scenario that fails a check is reported FAILED and the script exits 1.

Run it as a module from the project root::

    python -m benchmarks.global_limit              # 5,000 jobs per scenario
    python -m benchmarks.global_limit --quick      # CI size (200)
    python -m benchmarks.global_limit --uri mongodb://localhost/?replicaSet=rs0 --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, TypeVar

import anyio
from pymongo import AsyncMongoClient, monitoring

from benchmarks.support.cli import add_out, add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.report import (
    announce,
    best_runs,
    command_line,
    fmt,
    markdown_table,
    new_console,
    outcome,
    print_table,
    report_header,
    spread,
    write_results,
)
from benchmarks.support.server import (
    MongoServer,
    async_write_conflicts,
    scratch_database,
    serving,
)
from dogs_core import DogsClient, EventJobDefinition, JobContext, Jobs, ScheduleItem, Workers
from dogs_core.domain.outcome import Delete
from dogs_core.domain.settle import Settlement
from dogs_core.ports import AsyncJobStore
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q
from dogs_testing.wrapper import JobStoreWrapper

__all__ = ["SCENARIOS", "Scenario", "ScenarioResult", "main"]

T = TypeVar("T")
JOB_NAME: Final = "noop"
SCHEDULE_BATCH: Final = 1_000
WRITE_COMMANDS: Final = frozenset({"insert", "update", "delete", "findAndModify"})
DONE_TIMEOUT: Final = 300.0


@dataclass(frozen=True, slots=True)
class Scenario:
    label: str
    options: dict[str, Any]


SCENARIOS: Final = (
    Scenario("no limit", {}),
    Scenario("global_concurrency=64", {"global_concurrency": 64}),
    Scenario("rate_limit=(1000000, 1s)", {"rate_limit": (1_000_000, "1s")}),
    Scenario("both", {"global_concurrency": 64, "rate_limit": (1_000_000, "1s")}),
    Scenario("global_concurrency=1000", {"global_concurrency": 1000}),
    Scenario("global_concurrency=8 (reached)", {"global_concurrency": 8}),
)


# -- what is counted ---------------------------------------------------------------------------


class CommandCounter(monitoring.CommandListener):
    """Counts the commands sent, by (collection kind, command name), while ``on``."""

    def __init__(self, collections: dict[str, str]) -> None:
        self.kinds = collections  # collection name -> records / history / controls
        self.counts: Counter[tuple[str, str]] = Counter()
        self.on = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if not self.on:
            return
        target = event.command.get(event.command_name)
        kind = self.kinds.get(target, "other") if isinstance(target, str) else "other"
        self.counts[(kind, event.command_name)] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def writes(self, kind: str | None = None) -> int:
        return sum(
            count
            for (where, name), count in self.counts.items()
            if name in WRITE_COMMANDS and (kind is None or where == kind)
        )


class CountingStore(JobStoreWrapper):
    """Counts completions (``done`` is set once ``target`` jobs completed) and refusals."""

    def __init__(self, inner: AsyncJobStore, target: int) -> None:
        super().__init__(inner)
        self.target = target
        self.completed = 0
        self.refused = 0
        self.done = anyio.Event()

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        verdicts = await super().settle_many(settlements)
        completions = (isinstance(s.command, Delete) for s in settlements)
        self.completed += sum(v and c for v, c in zip(verdicts, completions, strict=True))
        if self.completed >= self.target:
            self.done.set()
        return verdicts

    async def around(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        result = await call()
        if (method == "acquire_slot" and result is None) or (
            method == "take_rate_token" and result is False
        ):
            self.refused += 1
        return result


# -- one scenario ------------------------------------------------------------------------------


@dataclass(slots=True)
class ScenarioResult:
    scenario: str
    jobs: int
    workers_count: int
    poll_interval: float
    status: str = "ok"
    seconds: float | None = None
    jobs_per_second: float | None = None
    writes: int = 0
    controls_writes: int = 0
    commands: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    write_conflicts: int | None = None
    failures: list[str] = field(default_factory=list)
    #: Filled by :func:`best_of_scenarios`: jobs/s of every run of this scenario.
    all_jobs_per_second: list[float] = field(default_factory=list)

    def per_job(self, count: int) -> float:
        return count / self.jobs


def make_jobs(scenario: Scenario, runs: Counter[int]) -> tuple[Jobs, EventJobDefinition]:
    jobs = Jobs()

    async def noop(params: dict[str, int], ctx: JobContext) -> None:
        runs[params["i"]] += 1

    return jobs, jobs.event(name=JOB_NAME, **scenario.options)(noop)


async def check(
    result: ScenarioResult, store: AsyncMongoJobStore, runs: Counter[int], jobs: int
) -> None:
    """Every job ran exactly once, on its first try; one history row each, no record left."""
    if sorted(runs) != list(range(jobs)) or set(runs.values()) != {1}:
        twice = sum(1 for count in runs.values() if count > 1)
        result.failures.append(f"{len(runs)} of {jobs} jobs ran, {twice} more than once")
    left = await store.records_collection.count_documents({})
    if left:
        result.failures.append(f"{left} records left")
    rows = await store.read_history(JOB_NAME, limit=jobs + 1)
    if len(rows) != jobs or {row.tries for row in rows} != {1}:
        tries = sorted({row.tries for row in rows})
        result.failures.append(f"{len(rows)} history rows for {jobs} jobs, tries {tries}")


async def run_scenario(
    scenario: Scenario, server: MongoServer, jobs_count: int, workers_count: int, poll: float
) -> ScenarioResult:
    result = ScenarioResult(scenario.label, jobs_count, workers_count, poll)
    database = scratch_database("limit")
    counter = CommandCounter(
        {
            q.DEFAULT_RECORDS_COLLECTION: "records",
            q.DEFAULT_HISTORY_COLLECTION: "history",
            q.DEFAULT_CONTROLS_COLLECTION: "controls",
        }
    )
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        server.uri, tz_aware=True, event_listeners=[counter]
    )
    runs: Counter[int] = Counter()
    jobs, definition = make_jobs(scenario, runs)
    try:
        inner = AsyncMongoJobStore(mongo, database)
        await inner.setup()
        client = DogsClient(inner, jobs)
        for start in range(0, jobs_count, SCHEDULE_BATCH):
            stop = min(start + SCHEDULE_BATCH, jobs_count)
            items = [ScheduleItem(params={"i": i}) for i in range(start, stop)]
            outcome = await client.schedule_many(definition, items)
            if outcome.scheduled_count != stop - start:
                raise RuntimeError(f"schedule_many: {outcome}")
        store = CountingStore(inner, jobs_count)
        workers = Workers(store, jobs, workers_count=workers_count, poll_interval=poll)
        conflicts = await async_write_conflicts(mongo)
        counter.on = True
        began = time.perf_counter()
        async with workers:
            with anyio.move_on_after(DONE_TIMEOUT):
                await store.done.wait()
            result.seconds = time.perf_counter() - began
            await workers.stop()
        counter.on = False
        result.write_conflicts = await async_write_conflicts(mongo) - conflicts
        if not store.done.is_set():
            result.failures.append(f"timed out: {store.completed} of {jobs_count} completed")
        result.jobs_per_second = jobs_count / result.seconds
        result.refused = store.refused
        result.writes = counter.writes()
        result.controls_writes = counter.writes("controls")
        result.commands = {f"{kind} {name}": n for (kind, name), n in counter.counts.items()}
        await check(result, inner, runs, jobs_count)
    except Exception as error:
        result.failures.append(f"{type(error).__name__}: {error}")
    finally:
        await mongo.drop_database(database)
        await mongo.close()
    if result.failures:
        result.status = "FAILED"
    return result


def best_of_scenarios(results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """One row per scenario, in order: its best run (most jobs/s) with the spread of its ok
    runs; a scenario with a FAILED run is reported by that run."""
    rows = best_runs(
        results,
        key=lambda r: r.scenario,
        rate=lambda r: r.jobs_per_second,
        failed=lambda r: bool(r.failures),
        ok=lambda r: True,  # the spread counts the failed runs' rates too
    )
    for best, rates in rows:
        best.all_jobs_per_second = rates
    return [best for best, _ in rows]


# -- reporting ---------------------------------------------------------------------------------

HEADERS: Final = (
    "Scenario",
    "Jobs",
    "Time (s)",
    "Jobs/s",
    "vs no limit",
    "Writes/job",
    "Extra writes/job",
    "Controls writes/job",
    "Write conflicts/job",
    "Refused",
    "Jobs/s spread",
    "Result",
)


def table_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    base = next((r for r in results if r.scenario == SCENARIOS[0].label), None)
    rows = []
    for r in results:
        writes = r.per_job(r.writes)
        relative = (
            f"{r.jobs_per_second / base.jobs_per_second:.0%}"
            if base is not None and base.jobs_per_second and r.jobs_per_second
            else "–"
        )
        extra = f"{writes - base.per_job(base.writes):+.2f}" if base is not None else "–"
        rows.append(
            [
                r.scenario,
                f"{r.jobs:,}",
                fmt(r.seconds, ".2f"),
                fmt(r.jobs_per_second, ",.0f"),
                relative,
                f"{writes:.2f}",
                extra,
                f"{r.per_job(r.controls_writes):.2f}",
                "–" if r.write_conflicts is None else f"{r.per_job(r.write_conflicts):.2f}",
                f"{r.refused:,}",
                spread(r.all_jobs_per_second, count=False),
                outcome(r.failures, r.status),
            ]
        )
    return rows


def markdown_report(
    results: Sequence[ScenarioResult], server: MongoServer, command: str, repeat: int
) -> str:
    first = results[0]
    best = f" Each row is the best of {repeat} runs." if repeat > 1 else ""
    return "\n".join(
        [
            *report_header("What a global limit costs", command, server),
            f"One `Workers` instance: workers_count={first.workers_count}, "
            f"poll_interval={first.poll_interval:g} s, the other options at their defaults, "
            "history on. No-op async handlers. Writes are MongoDB write commands (one bulk "
            "command counts once) sent while the jobs ran; write conflicts are the server's "
            f"(serverStatus) over the same time.{best}",
            "",
            markdown_table(HEADERS, table_rows(results)),
            "",
        ]
    )


# -- command line ------------------------------------------------------------------------------


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "global_limit", "What a global concurrency limit and a rate limit cost per job."
    )
    parser.add_argument("--jobs", type=int, default=None, help="jobs per scenario (5000)")
    parser.add_argument("--workers-count", type=int, default=32)
    parser.add_argument("--poll-interval", type=float, default=0.5, help="seconds (0.5)")
    add_uri(parser)
    add_quick(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs of every scenario (1)")
    add_out(parser, "global_limit.md/.json")
    args = parser.parse_args(argv)
    fill_sizes(args, jobs=(200, 5_000))
    if min(args.jobs, args.workers_count, args.repeat) < 1 or args.poll_interval <= 0:
        parser.error("--jobs, --workers-count and --repeat must be at least 1, --poll-interval > 0")
    return args


async def _run_all(args: argparse.Namespace, server: MongoServer) -> list[ScenarioResult]:
    return [
        await run_scenario(scenario, server, args.jobs, args.workers_count, args.poll_interval)
        for _ in range(args.repeat)
        for scenario in SCENARIOS
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    command = command_line("benchmarks.global_limit", argv)
    console = new_console()
    announce(console)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(serving(args.uri, console))
        with console.status(f"{len(SCENARIOS)} scenarios of {args.jobs:,} jobs..."):
            results = best_of_scenarios(anyio.run(_run_all, args, server, backend="asyncio"))
    title = (
        f"What a global limit costs: workers_count={args.workers_count}, "
        f"poll_interval={args.poll_interval:g} s, {args.jobs:,} no-op jobs per scenario"
        + (f", best of {args.repeat} runs" if args.repeat > 1 else "")
    )
    print_table(console, title, HEADERS, table_rows(results))
    if args.out is not None:
        payload = {"command": command, "results": [asdict(r) for r in results]}
        markdown = markdown_report(results, server, command, args.repeat)
        write_results(args.out, "global_limit", markdown, payload)
        console.print(f"Wrote {args.out / 'global_limit.md'} and global_limit.json")
    failed = [r for r in results if r.failures]
    for r in failed:
        console.print(f"[red]FAILED[/] {r.scenario}: {'; '.join(r.failures)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
