"""Scheduling against its floor: ``schedule_many`` and ``schedule()`` beside raw inserts; then
what each option of ``schedule()`` costs beside the plain call, and the debounce storm.

Two measurements on ``DogsClient`` over ``AsyncMongoJobStore``, each beside the raw pymongo
write of the very same documents (:func:`benchmarks.support.floors.insert_floor`):

- bulk: one ``schedule_many`` call of N jobs (100,000; jobs/s, from the call to its result)
  against one unordered ``insert_many`` of the same documents;
- single: M sequential ``schedule()`` calls (2,000; each timed: p50 and p99) against M
  sequential ``insert_one`` calls of the same documents, call for call (each ``schedule()`` is
  followed by the raw insert of the document it wrote), so that both see the same load.

"The same documents": a wrapper between the client and the store keeps every ``NewJob`` the
client hands down, and the floor's documents are built from them with the store's own builder
(:func:`dogs_mongo.queries.document_from_new_job`), ids included, into fresh databases whose
indexes the store created. The client's items are built before the clock starts; the floor's
documents too. The bulk runs ours first, then the floor.

Checks: the client reports every job scheduled; the collection holds exactly N + M records,
one per ``params.i`` and one per ``params.single`` (no duplicates); the floors stored every
document.

Then (issue 27, :mod:`benchmarks.support.options`): ``schedule()`` with each option (tags and
a start deadline, Dogs' ``unique_key=``, ``Unique`` by params, by states, with a window, replace,
debounce, throttle), K rounds of every variant in turn in one sitting, p50 and p99 and the p50
over the plain call's (target: within 1.5x); and the debounce storm, S calls on 10 keys from 16
concurrent tasks, which must leave exactly 10 records. Run it as a module from the project
root::

    python -m benchmarks.scheduling                  # 100,000 / 2,000; K 500, S 10,000
    python -m benchmarks.scheduling --quick          # CI size: 5,000 / 200; K 10, S 300
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from benchmarks.support.cli import add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.floors import InsertFloor, insert_floor
from benchmarks.support.options import (
    OptionsResult,
    StormResult,
    TagClaims,
    claims_with_tags,
    measure_options,
    storm,
)
from benchmarks.support.report import (
    announce,
    command_line,
    fmt,
    new_console,
    outcome,
    print_table,
    ratio,
)
from benchmarks.support.server import scratch_database, serving
from benchmarks.support.timing import median, percentile
from dogs_core import DogsClient, EventJobDefinition, Jobs, ScheduleItem
from dogs_core.domain.records import BulkScheduleResult, NewJob, ScheduleOutcome
from dogs_core.ports import AsyncJobStore
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q
from dogs_testing.wrapper import JobStoreWrapper

__all__ = ["CapturingStore", "SchedulingResult", "main"]

JOB_NAME: Final = "scheduled"
N_PARTITIONS: Final = 8


class CapturingStore(JobStoreWrapper):
    """Keeps every ``NewJob`` the client schedules, so that the floor writes the same ones."""

    def __init__(self, inner: AsyncJobStore) -> None:
        super().__init__(inner)
        self.bulk: list[NewJob] = []
        self.single: list[NewJob] = []

    async def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        self.single.append(job)
        return await self.inner.insert_job(job, session=session)

    async def insert_jobs(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        self.bulk.extend(jobs)
        return await self.inner.insert_jobs(jobs, session=session)


@dataclass(slots=True)
class SchedulingResult:
    jobs: int
    singles: int
    bulk_seconds: float | None = None
    single_seconds: list[float] = field(default_factory=list)
    floor: InsertFloor | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def bulk_per_second(self) -> float | None:
        return self.jobs / self.bulk_seconds if self.bulk_seconds else None

    @property
    def single_per_second(self) -> float | None:
        total = sum(self.single_seconds)
        return len(self.single_seconds) / total if total > 0 else None


async def _check(
    client: AsyncMongoClient[dict[str, Any]], database: str, result: SchedulingResult
) -> None:
    records = client[database][q.DEFAULT_RECORDS_COLLECTION]
    total = await records.count_documents({})
    if total != result.jobs + result.singles:
        result.failures.append(f"{total} records, expected {result.jobs + result.singles}")
    for key, expected in (("params.i", result.jobs), ("params.single", result.singles)):
        groups = await (
            await records.aggregate(
                [
                    {"$match": {key: {"$exists": True}}},
                    {"$group": {"_id": f"${key}", "n": {"$sum": 1}}},
                ]
            )
        ).to_list(None)
        if len(groups) != expected:
            result.failures.append(f"{len(groups)} distinct {key}, expected {expected}")
        duplicated = sum(1 for group in groups if group["n"] != 1)
        if duplicated:
            result.failures.append(f"{duplicated} {key} value(s) stored more than once")


async def _bulk(dogs: DogsClient, definition: EventJobDefinition, result: SchedulingResult) -> None:
    items = [ScheduleItem(params={"i": i}) for i in range(result.jobs)]
    began = time.perf_counter()
    bulk = await dogs.schedule_many(definition, items)
    result.bulk_seconds = time.perf_counter() - began
    if bulk.scheduled_count != result.jobs or bulk.errors or bulk.skipped_count:
        result.failures.append(
            f"schedule_many: {bulk.scheduled_count} scheduled, {bulk.skipped_count} skipped, "
            f"{len(bulk.errors)} errors of {result.jobs}"
        )


async def _singles(
    dogs: DogsClient,
    definition: EventJobDefinition,
    store: CapturingStore,
    floor_records: AsyncCollection[dict[str, Any]],
    result: SchedulingResult,
) -> list[float]:
    """``schedule()`` and the raw ``insert_one`` of the document it wrote, call for call, so that
    both see the same load on a shared machine; returns the floor's times."""
    floor_seconds = []
    for i in range(result.singles):
        began = time.perf_counter()
        await dogs.schedule(definition, {"single": i})
        result.single_seconds.append(time.perf_counter() - began)
        document = q.document_from_new_job(store.single[-1])
        began = time.perf_counter()
        await floor_records.insert_one(document)
        floor_seconds.append(time.perf_counter() - began)
    return floor_seconds


async def run(uri: str, jobs: int, singles: int) -> SchedulingResult:
    """The bulk (ours, then the floor's ``insert_many``), then the single calls (ours and the
    floor's alternately); every database is dropped at the end."""
    result = SchedulingResult(jobs=jobs, singles=singles)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    database = scratch_database("scheduling")
    floor_database = f"{database}_floor"
    store = CapturingStore(AsyncMongoJobStore(client, database))
    registry = Jobs()

    async def handler(params: dict[str, Any], ctx: object) -> None:
        """Never runs: no worker is started."""

    definition = registry.event(name=JOB_NAME)(handler)
    try:
        await store.setup()  # the indexes exist before the clock starts, as in a deployment
        await AsyncMongoJobStore(client, floor_database).setup()
        dogs = DogsClient(store, registry, n_partitions=N_PARTITIONS)
        await _bulk(dogs, definition, result)
        result.floor = await insert_floor(uri, [q.document_from_new_job(j) for j in store.bulk])
        floor_records = client[floor_database][q.DEFAULT_RECORDS_COLLECTION]
        floor_seconds = await _singles(dogs, definition, store, floor_records, result)
        result.floor.singles, result.floor.insert_one_seconds = len(floor_seconds), floor_seconds
        await _check(client, database, result)
        if (stored := await floor_records.count_documents({})) != result.singles:
            result.floor.failures.append(f"insert_one: {stored} of {result.singles} stored")
        result.failures += [f"floor: {failure}" for failure in result.floor.failures]
    finally:
        await client.drop_database(database)
        await client.drop_database(floor_database)
        await client.close()
    return result


def table_rows(result: SchedulingResult) -> list[list[str]]:
    floor = result.floor
    status = outcome(result.failures)
    p50 = median(result.single_seconds) * 1000 if result.single_seconds else None
    p99 = percentile(result.single_seconds, 0.99) * 1000 if result.single_seconds else None
    floor_rate = floor.insert_many_per_second if floor else None
    floor_one = floor.insert_one_per_second if floor else None
    floor_p50 = floor.insert_one_p50_ms if floor else None
    floor_p99 = floor.insert_one_p99_ms if floor else None
    return [
        [f"schedule_many of {result.jobs:,} (jobs/s)", "insert_many, unordered",
         fmt(result.bulk_per_second, ",.0f"), fmt(floor_rate, ",.0f"),
         fmt(ratio(result.bulk_per_second, floor_rate), ".2f"), status],
        [f"schedule() ×{result.singles:,}, sequential (calls/s)", "insert_one",
         fmt(result.single_per_second, ",.0f"), fmt(floor_one, ",.0f"),
         fmt(ratio(result.single_per_second, floor_one), ".2f"), status],
        ["schedule() p50 (ms)", "insert_one p50", fmt(p50, ".2f"), fmt(floor_p50, ".2f"),
         fmt(ratio(p50, floor_p50), ".2f"), status],
        ["schedule() p99 (ms)", "insert_one p99", fmt(p99, ".2f"), fmt(floor_p99, ".2f"),
         fmt(ratio(p99, floor_p99), ".2f"), status],
    ]  # fmt: skip


HEADERS: Final = ("Measure", "Floor (raw pymongo)", "Ours", "Floor", "Ratio ours / floor", "Result")


async def _shaping(
    uri: str, option_calls: int, storm_calls: int, tag_jobs: int, rounds: int
) -> tuple[OptionsResult, StormResult, TagClaims]:
    """The option rows, the storm and the tag claims, each in scratch databases dropped at the
    end."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    databases = [scratch_database("options"), scratch_database("storm")]
    tag_databases = [scratch_database(f"tags{n}") for n in range(rounds * 3)]
    try:
        options = await measure_options(client, databases[0], option_calls)
        stormed = await storm(client, databases[1], storm_calls, STORM_KEYS, STORM_TASKS)
        tags = await claims_with_tags(client, tag_databases, tag_jobs, rounds=rounds)
    finally:
        for database in databases + tag_databases:
            await client.drop_database(database)
        await client.close()
    return options, stormed, tags


#: Interleaved drains per case of the tag claims (the best is reported); one with --quick.
ROUNDS: Final = 2
STORM_KEYS: Final = 10
STORM_TASKS: Final = 16
OPTION_HEADERS: Final = (
    "schedule() with",
    "Calls",
    "p50 (ms)",
    "p99 (ms)",
    "p50 / plain",
    "Result",
)
STORM_HEADERS: Final = ("Storm", "Calls", "Calls/s", "Records", "Outcomes", "Result")


def option_rows(result: OptionsResult) -> list[list[str]]:
    plain = median(result.seconds.get("plain", [])) * 1000
    status = outcome(result.failures)
    rows = []
    for label, seconds in result.seconds.items():
        p50 = median(seconds) * 1000
        rows.append([label, f"{len(seconds):,}", fmt(p50, ".2f"),
                     fmt(percentile(seconds, 0.99) * 1000, ".2f"), fmt(ratio(p50, plain), ".2f"),
                     status])  # fmt: skip
    return rows


TAG_HEADERS: Final = ("Claims of", "Records", "Claims/s", "Ratio to untagged", "Result")


def tag_rows(result: TagClaims) -> list[list[str]]:
    rates = result.per_second
    base = next(iter(rates.values()), None)
    status = outcome(result.failures)
    return [[label, f"{result.jobs:,}", fmt(rate, ",.0f"), fmt(ratio(rate, base), ".2f"), status]
            for label, rate in rates.items()]  # fmt: skip


def storm_rows(result: StormResult) -> list[list[str]]:
    what = f"debounce, {result.keys} keys, {result.tasks} tasks"
    shown = ", ".join(f"{count:,} {kind}" for kind, count in sorted(result.outcomes.items()))
    return [[what, f"{result.calls:,}", fmt(result.per_second, ",.0f"), str(result.records),
             shown, outcome(result.failures)]]  # fmt: skip


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "scheduling", "schedule_many and schedule() against raw inserts of the same documents."
    )
    parser.add_argument("--jobs", type=int, default=None, help="jobs in schedule_many (100000)")
    parser.add_argument("--singles", type=int, default=None, help="schedule() calls (2000)")
    parser.add_argument("--option-calls", type=int, default=None, help="rounds per option (500)")
    parser.add_argument("--storm-calls", type=int, default=None, help="debounce storm (10000)")
    parser.add_argument("--tag-jobs", type=int, default=None, help="records per tag drain (5000)")
    add_uri(parser)
    add_quick(parser, "5,000 / 200; 10 rounds per option; a storm of 300; 200 tagged records")
    args = parser.parse_args(argv)
    fill_sizes(
        args,
        jobs=(5_000, 100_000),
        singles=(200, 2_000),
        option_calls=(10, 500),
        storm_calls=(300, 10_000),
        tag_jobs=(200, 5_000),
    )
    if args.jobs < 1 or args.singles < 1:
        parser.error("--jobs and --singles must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.scheduling", argv))
    with serving(args.uri, console) as server:
        with console.status(f"scheduling {args.jobs:,} + {args.singles:,} jobs, then the floors"):
            result = anyio.run(run, server.uri, args.jobs, args.singles, backend="asyncio")
        title = (
            f"Scheduling: DogsClient over AsyncMongoJobStore, {N_PARTITIONS} partitions, "
            f"MongoDB {server.version}; floors write the same documents"
        )
        print_table(console, title, HEADERS, table_rows(result))
        console.print(
            "Ratio: rates are ours over the floor's (1.00 = as fast as the raw write); "
            "latencies are ours over the floor's (1.00 = no added latency)."
        )
        with console.status("schedule() with each option, the debounce storm, tagged claims"):
            options, storm_result, tags = anyio.run(
                _shaping,
                server.uri,
                args.option_calls,
                args.storm_calls,
                args.tag_jobs,
                1 if args.quick else ROUNDS,
                backend="asyncio",
            )
        print_table(
            console, "schedule() per option, one sitting", OPTION_HEADERS, option_rows(options)
        )
        print_table(console, "Debounce storm", STORM_HEADERS, storm_rows(storm_result))
        rounds = 1 if args.quick else ROUNDS
        title = f"Claims of tagged records: 8 claimers, 4 partitions, best of {rounds} drain(s)"
        print_table(console, title, TAG_HEADERS, tag_rows(tags))
        result.failures += options.failures + storm_result.failures + tags.failures
    if result.failures:
        console.print(f"[bold red]FAILED: {'; '.join(result.failures)}[/]")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
