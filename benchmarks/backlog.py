"""Cost against the size of the work: the same drain on a small and a big collection, one run.

Each collection holds ``--drain`` due records at priority 1 (the ones every drain takes first:
claims sort by priority, then ``nextRunAt``), more due records at priority 0 that stay (the
rest of ``--due``), and records due in the future (the rest of the collection, spread over the
next 30 days), over ``--names`` job names and ``--partitions`` partitions. The big collection
is ``--records`` (1,000,000: 100,000 due now, 900,000 in the future); the small one is
``--small`` (10,000): the same drain, and 2,500 due records staying (half of the rest: with
the big one's proportion, 950, the workers would run out of due records before the drain ends
and wait on misses that the big one never sees), the rest due in the future. The
documents are the ones the store writes (:func:`dogs_mongo.queries.writes.document_from_new_job`),
loaded with raw unordered ``insert_many``; the store's setup then builds the indexes and an
``fsync`` writes a checkpoint, before anything is timed. Both sizes are loaded first, so their
claim loops can alternate. Per size:

- explain (``executionStats``) of the claim query the store sends, with each hint
  (``byJobName``, ``globalPriority``), on every partition: keys and documents examined per
  claim, and the index of the winning plan;
- claims/s: ``--claimers`` asyncio tasks claim through the store's ``claim_many`` (x16) and
  ``claim`` with each hint until the drain's count is claimed (no record twice, no future one);
  the claimed records are unlocked again after each loop; the small and the big size take
  turns, loop by loop, ``--rounds`` times (2), and a row is the best round;
- jobs/s end to end: one ``Workers`` instance (workers_count 32, no-op handlers, every name)
  until the drain's records are completed (every one ran once, no future record ran, nothing
  lost: the collection holds what it held minus what ran); ``--rounds`` drains per size, taking
  turns with the other size's, the drain records loaded again between them; the best drain,
  and the process's RSS before the first and after the last;
- big / small: the ratio of each rate (the target: within 15%).

``--fresh`` also measures a worker started on a freshly loaded big collection without indexes
(its setup builds them, logging each build): the time until its first claim (setup), the
drain's jobs/s after that, and both together.

Run it as a module from the project root::

    python -m benchmarks.backlog --fresh       # 1,000,000 against 10,000 records, 5,000 drained
    python -m benchmarks.backlog --quick       # CI size: 20,000 against 2,000 records, 500 drained
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient, MongoClient

from benchmarks.support.claiming import drain_by_claims, explain_claims
from benchmarks.support.cli import add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.plans import plan_indexes
from benchmarks.support.report import (
    announce,
    command_line,
    exit_status,
    fmt,
    new_console,
    outcome,
    print_table,
)
from benchmarks.support.server import scratch_database, serving
from benchmarks.support.stores import TimedStore
from benchmarks.support.timing import rss_mib
from dogs_core import Jobs, Workers
from dogs_core.domain.hints import Hint
from dogs_core.domain.outcome import Delete
from dogs_core.domain.records import ClaimedJob, ClaimRequest, NewJob
from dogs_core.domain.settle import Settlement
from dogs_core.ids import new_record_id
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo import queries as q

__all__ = ["SizeResult", "main"]

LOAD_BATCH: Final = 10_000
BATCH: Final = 16  # claim_many's requests per call
DRAIN_PRIORITY: Final = 1
FUTURE_SPREAD_SECONDS: Final = 30 * 86_400
CLAIM_MODES: Final = (("claim_many x16", BATCH), ("claim", 1))
Document = dict[str, Any]
#: What a claim loop leaves on a record; unset again so that the next loop finds it as loaded.
_CLAIM_FIELDS: Final = ("lockId", "lockedUntil", "lastRunAt", "tries", "claimWasStale",
                        "staleAttempt", "lockOwner")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Layout:
    """What one collection holds: its records, those due now, and the drain's share of them."""

    records: int
    due: int
    drain: int
    names: int
    partitions: int

    @property
    def future(self) -> int:
        return self.records - self.due


@dataclass(slots=True)
class ExplainRow:
    hint: str
    keys: float
    docs: float
    index: str


@dataclass(slots=True)
class ClaimRow:
    mode: str
    hint: str
    claims_per_second: float | None = None  # the best round
    rounds: list[float] = field(default_factory=list)


@dataclass(slots=True)
class SizeResult:
    layout: Layout
    label: str
    load_seconds: float = 0.0
    setup_seconds: float = 0.0
    explains: list[ExplainRow] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)
    jobs_per_second: float | None = None  # the best drain
    drain_rates: list[float] = field(default_factory=list)
    runs: int = 0
    rss_before: float | None = None
    rss_after: float | None = None
    first_claim_seconds: float | None = None  # --fresh: from the worker's start
    drain_seconds: float | None = None
    build_log: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


# -- the data ------------------------------------------------------------------------------------


def _names(count: int) -> list[str]:
    return [f"name-{i:02d}" for i in range(count)]


def _documents(layout: Layout) -> Iterator[list[Document]]:
    """The records in batches: drain (due, priority 1), staying due (priority 0), future. Record
    ``i`` is on partition ``i mod partitions`` with name ``(i div partitions) mod names``, so
    that every partition holds every name; ``params.i`` says which record ran."""
    now = datetime.now(UTC)
    names = _names(layout.names)
    batch: list[Document] = []
    for i in range(layout.records):
        if i < layout.due:
            at = now - timedelta(hours=1) + timedelta(milliseconds=i)
        else:
            at = now + timedelta(days=1, seconds=(i * 7_919) % FUTURE_SPREAD_SECONDS)
        priority = DRAIN_PRIORITY if i < layout.drain else 0
        job = NewJob(
            id=new_record_id(), job_name=names[(i // layout.partitions) % layout.names],
            params={"i": i}, next_run_at=at, priority=priority, partition=i % layout.partitions,
        )  # fmt: skip
        batch.append(q.document_from_new_job(job))
        if len(batch) == LOAD_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _load(uri: str, database: str, layout: Layout) -> float:
    """Insert the records with raw unordered ``insert_many`` (no index but ``_id``)."""
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    began = time.perf_counter()
    with client:
        collection = client[database][q.DEFAULT_RECORDS_COLLECTION]
        for batch in _documents(layout):
            collection.insert_many(batch, ordered=False)
    return time.perf_counter() - began


def _reload_drain(uri: str, database: str, layout: Layout) -> None:
    """Insert the drain records again (new ids, the same params, names and partitions) for
    another drain."""
    drain_only = Layout(layout.drain, layout.drain, layout.drain, layout.names, layout.partitions)
    client: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    with client:
        collection = client[database][q.DEFAULT_RECORDS_COLLECTION]
        for batch in _documents(drain_only):
            collection.insert_many(batch, ordered=False)


# -- explain -------------------------------------------------------------------------------------


async def _explain(
    client: AsyncMongoClient[Document], database: str, layout: Layout, hint: str
) -> ExplainRow:
    """Keys and documents examined by the claim query with ``hint``, mean over partitions."""
    explained = await explain_claims(
        client, database, job_names=_names(layout.names), partitions=layout.partitions, hint=hint
    )
    indexes = sorted({_index_names(plan) for plan in explained.winning_plans})
    return ExplainRow(hint, explained.keys_per_claim, explained.docs_per_claim, " | ".join(indexes))


def _index_names(plan: dict[str, Any]) -> str:
    """The index names of a winning plan's index scans."""
    return ", ".join(sorted(set(plan_indexes(plan)))) or "none (COLLSCAN)"


# -- the claim loops -----------------------------------------------------------------------------


async def _claim_rows(
    client: AsyncMongoClient[Document],
    sizes: Sequence[tuple[SizeResult, str]],
    claimers: int,
    rounds: int,
) -> None:
    """One claim loop per mode and hint, on each size in turn, ``rounds`` times: the sizes
    alternate loop by loop so that a drift of the machine falls on both alike. The claimed
    records are unlocked after each loop; a row keeps its best round."""
    for mode, batch in CLAIM_MODES:
        for hint in Hint:
            rows = [ClaimRow(mode, str(hint)) for _ in sizes]
            for (result, _), row in zip(sizes, rows, strict=True):
                result.claims.append(row)
            for _ in range(rounds):
                for (result, database), row in zip(sizes, rows, strict=True):
                    await _claim_round(client, database, result, row, batch, claimers)


async def _claim_round(
    client: AsyncMongoClient[Document],
    database: str,
    result: SizeResult,
    row: ClaimRow,
    batch: int,
    claimers: int,
) -> None:
    store = AsyncMongoJobStore(client, database)
    records = client[database][q.DEFAULT_RECORDS_COLLECTION]
    drain = await drain_by_claims(
        store,
        claimers=claimers,
        partitions=result.layout.partitions,
        job_names=tuple(_names(result.layout.names)),
        hint=row.hint,
        batch=batch,
        enough=result.layout.drain,
    )
    claimed, seconds = drain.claimed, drain.seconds
    ids = [job.job_id for job in claimed]
    what = f"{row.mode} {row.hint}"
    if len(ids) != len(set(ids)):
        result.failures.append(f"{what}: {len(ids) - len(set(ids))} claimed twice")
    future = await records.count_documents(
        {"_id": {"$in": ids}, "nextRunAt": {"$gt": datetime.now(UTC)}}
    )
    if future:
        result.failures.append(f"{what}: {future} future records claimed")
    if len(ids) < result.layout.drain:
        result.failures.append(f"{what}: {len(ids)} of {result.layout.drain}")
    if seconds > 0:
        row.rounds.append(len(ids) / seconds)
        row.claims_per_second = max(row.rounds)
    unset = dict.fromkeys(_CLAIM_FIELDS, "")
    await records.update_many({"lockId": {"$exists": True}}, {"$unset": unset})


# -- the workers ---------------------------------------------------------------------------------


class DrainStore(TimedStore):
    """:class:`TimedStore` whose ``done`` is set when every drain record was completed, and
    which notes when the runtime's first claim call came (the end of its setup)."""

    def __init__(self, inner: Any, drain_ids: set[str]) -> None:
        super().__init__(inner)
        self.drain_ids = drain_ids
        self.drained = 0
        self.first_claim: float | None = None

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        if self.first_claim is None:
            self.first_claim = time.perf_counter()
        return await super().claim(request)

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        if self.first_claim is None:
            self.first_claim = time.perf_counter()
        return await super().claim_many(requests)

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        verdicts = await super().settle_many(settlements)
        self.drained += sum(
            1
            for settlement, ok in zip(settlements, verdicts, strict=True)
            if ok and isinstance(settlement.command, Delete) and settlement.job_id in self.drain_ids
        )
        if self.drained >= len(self.drain_ids):
            self.done.set()
        return verdicts


class _BuildLog(logging.Handler):
    """The store's INFO lines about index builds."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "index" in message and record.levelno >= logging.INFO:
            self.lines.append(message)


async def _drain_ids(client: AsyncMongoClient[Document], database: str) -> set[str]:
    cursor = client[database][q.DEFAULT_RECORDS_COLLECTION].find(
        {"priority": DRAIN_PRIORITY}, {"_id": 1}
    )
    return {str(doc["_id"]) async for doc in cursor}


async def _workers_row(uri: str, database: str, result: SizeResult) -> None:
    """One ``Workers`` instance drains the drain records end to end; then the checks."""
    layout = result.layout
    runs: Counter[int] = Counter()
    registry = Jobs()
    for name in _names(layout.names):

        async def noop(params: dict[str, Any], ctx: object) -> None:
            runs[int(params["i"])] += 1

        registry.event(name=name)(noop)
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    store = DrainStore(AsyncMongoJobStore(client, database), await _drain_ids(client, database))
    handler = _BuildLog()
    logging.getLogger("dogs.mongo.store").addHandler(handler)
    logging.getLogger("dogs.mongo.store").setLevel(logging.INFO)
    try:
        records_before = await client[database][q.DEFAULT_RECORDS_COLLECTION].count_documents({})
        gc.collect()
        if result.rss_before is None:  # the first drain's: the table shows the growth over all
            result.rss_before = rss_mib()
        began = time.perf_counter()
        async with Workers(store, registry, workers_count=32, n_partitions=layout.partitions) as w:
            with anyio.move_on_after(1800):
                await store.done.wait()
            ended = time.perf_counter()
            result.runs = sum(runs.values())
            await w.stop()
        result.rss_after = rss_mib()
        result.build_log = handler.lines
        first = store.first_claim if store.first_claim is not None else began
        result.first_claim_seconds = first - began
        result.drain_seconds = ended - first
        if store.done.is_set():
            result.drain_rates.append(result.runs / (ended - first))
            result.jobs_per_second = max(result.drain_rates)
        await _check_runs(client, database, result, runs, len(store.drain_ids), records_before)
    finally:
        logging.getLogger("dogs.mongo.store").removeHandler(handler)
        await client.close()


async def _check_runs(
    client: AsyncMongoClient[Document],
    database: str,
    result: SizeResult,
    runs: Counter[int],
    drain: int,
    records_before: int,
) -> None:
    layout = result.layout
    twice = [i for i, n in runs.items() if n > 1]
    future = [i for i in runs if i >= layout.due]
    drained = sum(1 for i in runs if i < layout.drain)
    left = await client[database][q.DEFAULT_RECORDS_COLLECTION].count_documents({})
    if drain != layout.drain or drained != layout.drain:
        result.failures.append(f"workers: {drained} of {layout.drain} drain records ran")
    if twice:
        result.failures.append(f"workers: {len(twice)} records ran twice")
    if future:
        result.failures.append(f"workers: {len(future)} future records ran")
    if left != records_before - len(runs):
        expected = records_before - len(runs)
        result.failures.append(f"workers: {left} records left, {expected} expected")


# -- the runs ------------------------------------------------------------------------------------


async def _prepare(
    client: AsyncMongoClient[Document], uri: str, layout: Layout, label: str
) -> tuple[SizeResult, str]:
    """Load, build the indexes (timed apart), checkpoint, explain: a size ready to measure."""
    result = SizeResult(layout=layout, label=label)
    database = scratch_database("backlog")
    result.load_seconds = await anyio.to_thread.run_sync(_load, uri, database, layout)
    began = time.perf_counter()
    await AsyncMongoJobStore(client, database).setup()
    result.setup_seconds = time.perf_counter() - began
    # A checkpoint now: the load's dirty pages are written before anything is timed, instead
    # of during the big size's claim loops (WiredTiger checkpoints every 60 s).
    await client.admin.command("fsync")
    for hint in Hint:
        result.explains.append(await _explain(client, database, layout, str(hint)))
    return result, database


async def _measure_fresh(uri: str, layout: Layout) -> SizeResult:
    """Load without indexes and start the worker at once: its setup builds them."""
    result = SizeResult(layout=layout, label=f"{layout.records:,} fresh")
    database = scratch_database("backlog")
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    try:
        result.load_seconds = await anyio.to_thread.run_sync(_load, uri, database, layout)
        await _workers_row(uri, database, result)
    finally:
        await client.drop_database(database)
        await client.close()
    return result


async def _warm_up(uri: str, args: argparse.Namespace) -> None:
    """A short drain first, not reported: the first ``Workers`` instance of the process pays
    for connections and first calls that would count against whichever size ran first."""
    layout = Layout(400, 300, 200, args.names, args.partitions)
    database = scratch_database("backlog")
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    try:
        await anyio.to_thread.run_sync(_load, uri, database, layout)
        await AsyncMongoJobStore(client, database).setup()
        await _workers_row(uri, database, SizeResult(layout=layout, label="warm-up"))
    finally:
        await client.drop_database(database)
        await client.close()


async def run(uri: str, args: argparse.Namespace) -> list[SizeResult]:
    def layout(records: int) -> Layout:
        # Both sizes drain the same records, and both keep due records beyond them (the big
        # one's proportion, at least as many as the drain, at most half of what is left): no
        # drain ends on the misses of a partition that ran dry, which would slow the small.
        proportional = round(records * (args.due - args.drain) / args.records)
        staying = min(max(proportional, args.drain), (records - args.drain) // 2)
        return Layout(records, args.drain + staying, args.drain, args.names, args.partitions)

    await _warm_up(uri, args)
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    sizes: list[tuple[SizeResult, str]] = []
    try:
        for records in (args.small, args.records):
            sizes.append(await _prepare(client, uri, layout(records), f"{records:,}"))
        await _claim_rows(client, sizes, args.claimers, args.rounds)
        for round_ in range(args.rounds):  # the drains alternate too, the drained reloaded
            for result, database in sizes:
                if round_:
                    await anyio.to_thread.run_sync(_reload_drain, uri, database, result.layout)
                await _workers_row(uri, database, result)
    finally:
        for _, database in sizes:
            await client.drop_database(database)
        await client.close()
    results = [result for result, _ in sizes]
    if args.fresh:
        results.append(await _measure_fresh(uri, layout(args.records)))
    return results


# -- the tables ----------------------------------------------------------------------------------


def _status(result: SizeResult) -> str:
    return outcome(result.failures)


#: The target of the issue: big within 15% of small.
TOLERANCE: Final = 0.15


def _ratio(big: float | None, small: float | None) -> list[str]:
    """The ratio big / small, and whether the big rate is within :data:`TOLERANCE` of the
    small one (a faster big run is within it too)."""
    if big is None or small is None or small == 0:
        return ["–", "–"]
    ratio = big / small
    return [f"{ratio:.2f} ({(ratio - 1) * 100:+.0f}%)", "yes" if ratio >= 1 - TOLERANCE else "no"]


def _tables(results: Sequence[SizeResult]) -> dict[str, list[list[str]]]:
    small, big = results[0], results[1]
    sizes = [
        [r.label, f"{r.layout.due:,}", f"{r.layout.future:,}", f"{r.layout.drain:,}",
         f"{r.load_seconds:.1f}", fmt(r.setup_seconds or None, ".1f"), _status(r)]
        for r in results[:2]
    ]  # fmt: skip
    explains = [
        [r.label, e.hint, fmt(e.keys, ",.1f"), fmt(e.docs, ",.1f"), e.index]
        for r in results[:2] for e in r.explains
    ]  # fmt: skip
    rates = [
        [f"{s.mode}, {s.hint}", fmt(s.claims_per_second, ",.0f"), fmt(b.claims_per_second, ",.0f"),
         *_ratio(b.claims_per_second, s.claims_per_second)]
        for s, b in zip(small.claims, big.claims, strict=True)
    ]  # fmt: skip
    rates.append(["jobs/s end to end (Workers)", fmt(small.jobs_per_second, ",.0f"),
                  fmt(big.jobs_per_second, ",.0f"),
                  *_ratio(big.jobs_per_second, small.jobs_per_second)])  # fmt: skip
    memory = [
        [r.label, f"{r.runs:,}", fmt(r.rss_before, ".1f"), fmt(r.rss_after, ".1f"),
         fmt(None if r.rss_before is None or r.rss_after is None else r.rss_after - r.rss_before,
             "+.1f"), _status(r)]
        for r in results
    ]  # fmt: skip
    fresh = [
        [r.label, f"{r.load_seconds:.1f}", fmt(r.first_claim_seconds, ".1f"),
         fmt(r.jobs_per_second, ",.0f"),
         fmt(r.runs / (r.first_claim_seconds + r.drain_seconds)
             if r.first_claim_seconds is not None and r.drain_seconds else None, ",.0f"),
         _status(r)]
        for r in results[2:]
    ]  # fmt: skip
    return {"sizes": sizes, "explains": explains, "rates": rates, "memory": memory, "fresh": fresh}


def _print(console: Any, args: argparse.Namespace, results: Sequence[SizeResult]) -> None:
    tables = _tables(results)
    shape = f"{args.names} names, {args.partitions} partitions"
    print_table(console, f"Collections ({shape}; indexes built by setup after the load)",
                ("Records", "Due now", "Due later", "Drained", "Load s", "Index build s",
                 "Result"), tables["sizes"])  # fmt: skip
    print_table(console, "Explain of the claim query (executionStats, mean per partition, "
                "before the drain)", ("Records", "Hint", "Keys examined per claim",
                "Docs examined per claim", "Winning plan's index"), tables["explains"])  # fmt: skip
    print_table(console, f"Drain of {args.drain:,} due records: small against big "
                f"({args.claimers} claimers, best of {args.rounds} rounds, the sizes "
                "alternating; Workers: workers_count 32)",
                ("Rate", f"{args.small:,} records", f"{args.records:,} records", "Big / small",
                 "Within 15%"),
                tables["rates"])  # fmt: skip
    print_table(console, "Workers: runs (the last drain) and this process's RSS (MiB) before "
                "the first drain and after the last",
                ("Records", "Runs", "RSS before", "RSS after", "Growth", "Result"),
                tables["memory"])  # fmt: skip
    if tables["fresh"]:
        print_table(console, "A worker started on a freshly loaded collection (no indexes)",
                    ("Records", "Load s", "Setup s (to the first claim)", "Jobs/s after setup",
                     "Jobs/s from the start", "Result"),
                    tables["fresh"])  # fmt: skip
        console.print("What its setup logged (dogs.mongo.store, INFO):")
        for line in (line for r in results[2:] for line in r.build_log):
            console.print(f"  {line}", soft_wrap=True, markup=False)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "backlog", "The same drain on a small and a big backlog: claims, jobs, RSS, explain."
    )
    parser.add_argument("--records", type=int, default=None, help="big collection (1000000)")
    parser.add_argument("--small", type=int, default=None, help="small collection (10000)")
    parser.add_argument("--due", type=int, default=None, help="due now in the big one (100000)")
    parser.add_argument("--drain", type=int, default=None, help="records drained (5000)")
    parser.add_argument("--names", type=int, default=50, help="job names (50)")
    parser.add_argument("--partitions", type=int, default=16, help="partitions (16)")
    parser.add_argument("--claimers", type=int, default=None, help="claim loop tasks (32)")
    parser.add_argument("--rounds", type=int, default=None, help="claim loops per row (2)")
    parser.add_argument("--fresh", action="store_true", help="also a worker on a fresh load")
    add_uri(parser)
    add_quick(parser, "20,000 against 2,000")
    args = parser.parse_args(argv)
    fill_sizes(
        args,
        records=(20_000, 1_000_000),
        small=(2_000, 10_000),
        due=(2_000, 100_000),
        drain=(500, 5_000),
        claimers=(8, 32),
        rounds=(1, 2),
    )
    if not 1 <= args.drain < args.due <= args.records or not args.drain <= args.small // 2:
        parser.error("need 1 <= --drain < --due <= --records and --drain <= --small / 2")
    if args.small >= args.records or min(args.names, args.partitions, args.claimers) < 1:
        parser.error("need --small < --records, and --names, --partitions, --claimers >= 1")
    if args.rounds < 1:
        parser.error("need --rounds >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.backlog", argv))
    with serving(args.uri, console) as server:
        with console.status("loading, building, explaining, claiming and draining..."):
            results = anyio.run(run, server.uri, args, backend="asyncio")
        _print(console, args, results)
    return exit_status(console, sum(1 for r in results if r.failures), "run")


if __name__ == "__main__":
    raise SystemExit(main())
