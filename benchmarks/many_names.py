"""Many job names: a worker registered for 200 names against one registered for 5.

The claim query carries every registered name in its ``jobName: {$in: [...]}``. With the
``byJobName`` index (partition, jobName, priority, nextRunAt) the server walks one index range
per name and merges them to sort; with ``globalPriority`` (partition, priority, nextRunAt) it
walks one range and filters the names. How much each costs depends on how many names there are,
which is what this benchmark shows. Per name count (5 and 200; the same number of due records in
total, spread round robin over the names, 8 partitions):

- explain of the claim query the store sends (``find(selector).sort(...).hint(h).limit(1)``,
  executionStats) with each hint, on every partition: keys and documents examined per claim;
- claims/s with each hint: C claimers (asyncio tasks) drain the records through
  ``AsyncMongoJobStore.claim`` with that hint forced, and every record is claimed exactly once;
- which hint the probe picks: :func:`dogs_core.runtime.worker.maintenance.probe_once` with a fresh
  :class:`~dogs_core.domain.hints.HintSelector` on the seeded collection (its medians too);
- jobs/s end to end: one ``Workers`` instance registered for every name (no-op handlers,
  workers_count 32) drains the records; the table shows which hint its claims carried and what
  its own probe logged (``dogs.workers``: "acquisition hint ... selected").

Run it as a module from the project root::

    python -m benchmarks.many_names                  # 10,000 records, 32 claimers
    python -m benchmarks.many_names --quick          # CI size: 400 records, 8 claimers
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient, MongoClient

from benchmarks.support.claiming import drain_by_claims, explain_claims, seed_due_records
from benchmarks.support.cli import add_quick, add_uri, fill_sizes, new_parser
from benchmarks.support.plans import stage_chain
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
from dogs_core import Jobs, Workers
from dogs_core.domain.hints import Hint, HintSelector
from dogs_core.domain.records import ClaimedJob, ClaimRequest
from dogs_core.runtime.plumbing.clock import SystemClock
from dogs_core.runtime.worker.maintenance import probe_once
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q

__all__ = ["NAME_COUNTS", "NamesResult", "main"]

NAME_COUNTS: Final = (5, 200)
N_PARTITIONS: Final = 8
Document = dict[str, Any]


@dataclass(slots=True)
class HintRow:
    """One name count and hint: the explain and the claim drain."""

    hint: str
    keys_per_claim: float | None = None
    docs_per_claim: float | None = None
    explain_ms: float | None = None
    plan: str = ""
    claims_per_second: float | None = None
    claim_calls: int = 0


@dataclass(slots=True)
class NamesResult:
    names: int
    jobs: int
    hints: list[HintRow] = field(default_factory=list)
    probe_pick: str = "–"
    probe_medians: str = ""
    workers_jobs_per_second: float | None = None
    workers_hints: Counter[str] = field(default_factory=Counter)
    workers_probe_log: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class HintCountingStore(TimedStore):
    """:class:`TimedStore` that also counts the hint of every claim request the runtime sends."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.hints: Counter[str] = Counter()

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        self.hints[request.hint] += 1
        return await super().claim(request)

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        self.hints.update(request.hint for request in requests)
        return await super().claim_many(requests)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "acquisition hint" in record.getMessage() or "hint probe" in record.getMessage():
            self.lines.append(record.getMessage())


@contextlib.contextmanager
def _probe_log() -> Iterator[_Lines]:
    """The runtime's probe decisions, as it logs them (``dogs.workers``, info)."""
    handler = _Lines()
    logger = logging.getLogger("dogs.workers")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _names(count: int) -> list[str]:
    return [f"name-{i:03d}" for i in range(count)]


def _seeded(uri: str, names: Sequence[str], jobs: int) -> tuple[str, set[str]]:
    database = scratch_database("names")
    admin: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    with admin:
        MongoJobStore(admin, database).setup()
        ids = seed_due_records(admin, database, jobs=jobs, partitions=N_PARTITIONS, job_names=names)
    return database, ids


async def _explain(
    client: AsyncMongoClient[Document], database: str, names: Sequence[str], row: HintRow
) -> None:
    """Keys and documents examined by the claim query with ``row.hint``, mean over partitions."""
    explained = await explain_claims(
        client, database, job_names=names, partitions=N_PARTITIONS, hint=row.hint
    )
    row.keys_per_claim = explained.keys_per_claim
    row.docs_per_claim = explained.docs_per_claim
    row.explain_ms = explained.millis_per_claim
    row.plan = " | ".join(sorted({stage_chain(plan) for plan in explained.winning_plans}))


async def _hint_rows(uri: str, names: Sequence[str], args: argparse.Namespace) -> NamesResult:
    result = NamesResult(names=len(names), jobs=args.jobs)
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    try:
        for hint in Hint:
            row = HintRow(hint=str(hint))
            result.hints.append(row)
            database, seeded = _seeded(uri, names, args.jobs)
            store = AsyncMongoJobStore(client, database)
            try:
                await _explain(client, database, names, row)
                if hint is Hint.BY_JOB_NAME:  # the probe, on the same fresh collection
                    selector = HintSelector()
                    await probe_once(
                        store, names, selector, n_partitions=N_PARTITIONS, clock=SystemClock(),
                        rng=random.Random(1),
                    )  # fmt: skip
                    result.probe_pick = str(selector.current)
                drain = await drain_by_claims(
                    store,
                    claimers=args.claimers,
                    partitions=N_PARTITIONS,
                    job_names=tuple(names),
                    hint=row.hint,
                )
                claimed = [job.job_id for job in drain.claimed]
                row.claim_calls = drain.calls
                seconds = drain.seconds
                row.claims_per_second = len(claimed) / seconds if seconds > 0 else None
                if len(claimed) != len(set(claimed)):
                    result.failures.append(
                        f"{hint}: {len(claimed) - len(set(claimed))} claimed twice"
                    )
                if set(claimed) != seeded:
                    result.failures.append(f"{hint}: {len(seeded - set(claimed))} never claimed")
            finally:
                await client.drop_database(database)
    finally:
        await client.close()
    return result


async def _workers_row(uri: str, names: Sequence[str], result: NamesResult) -> None:
    """One ``Workers`` instance registered for every name drains the records end to end."""
    registry = Jobs()
    runs = Counter[str]()
    for name in names:

        async def noop(params: dict[str, Any], ctx: object, name: str = name) -> None:
            runs[name] += 1

        registry.event(name=name)(noop)
    database, seeded = _seeded(uri, names, result.jobs)
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    timed = HintCountingStore(AsyncMongoJobStore(client, database))
    timed.expect(len(seeded))
    try:
        with _probe_log() as log:
            began = time.perf_counter()
            async with Workers(timed, registry, workers_count=32, n_partitions=N_PARTITIONS) as w:
                with anyio.move_on_after(600):
                    await timed.done.wait()
                seconds = time.perf_counter() - began
                await w.stop()
        result.workers_probe_log = log.lines
        result.workers_hints = timed.hints
        if timed.done.is_set():
            result.workers_jobs_per_second = len(seeded) / seconds
        left = await client[database][q.DEFAULT_RECORDS_COLLECTION].count_documents({})
        if sum(runs.values()) != len(seeded) or left:
            result.failures.append(f"workers: {sum(runs.values())} runs, {left} records left")
        if len(runs) != len(names):
            result.failures.append(f"workers: {len(runs)} of {len(names)} names ran")
    finally:
        await client.drop_database(database)
        await client.close()


async def run(uri: str, args: argparse.Namespace) -> list[NamesResult]:
    results = []
    for count in NAME_COUNTS:
        names = _names(count)
        result = await _hint_rows(uri, names, args)
        await _workers_row(uri, names, result)
        results.append(result)
    return results


def _status(result: NamesResult) -> str:
    return outcome(result.failures)


def _tables(results: Sequence[NamesResult]) -> tuple[list[list[str]], list[list[str]]]:
    claims = [
        [f"{r.names}", row.hint, fmt(row.claims_per_second, ",.0f"), f"{row.claim_calls:,}",
         fmt(row.keys_per_claim, ",.1f"), fmt(row.docs_per_claim, ",.1f"),
         fmt(row.explain_ms, ".1f"), row.plan, _status(r)]
        for r in results for row in r.hints
    ]  # fmt: skip
    workers = [
        [f"{r.names}", f"{r.jobs:,}", fmt(r.workers_jobs_per_second, ",.0f"), r.probe_pick,
         ", ".join(f"{hint}: {n:,}" for hint, n in sorted(r.workers_hints.items())) or "–",
         " / ".join(r.workers_probe_log) or "no decision logged", _status(r)]
        for r in results
    ]  # fmt: skip
    return claims, workers


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(
        "many_names", "A worker for 200 job names against one for 5: claims, keys, the probe."
    )
    parser.add_argument("--jobs", type=int, default=None, help="due records (10000)")
    parser.add_argument("--claimers", type=int, default=None, help="concurrent claimers (32)")
    add_uri(parser)
    add_quick(parser, "400 records, 8 claimers")
    args = parser.parse_args(argv)
    fill_sizes(args, jobs=(400, 10_000), claimers=(8, 32))
    if args.jobs < max(NAME_COUNTS) or args.claimers < 1:
        parser.error(f"--jobs must be at least {max(NAME_COUNTS)} and --claimers at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    announce(console, command_line("benchmarks.many_names", argv))
    with serving(args.uri, console) as server:
        with console.status("seeding, explaining, probing and draining..."):
            results = anyio.run(run, server.uri, args, backend="asyncio")
        claims, workers = _tables(results)
        print_table(
            console,
            f"Claims by hint: {args.jobs:,} due records, {N_PARTITIONS} partitions, "
            f"{args.claimers} claimers, MongoDB {server.version} (explain: mean per partition)",
            ("Names", "Hint", "Claims/s", "Claim calls", "Keys examined per claim",
             "Docs examined per claim", "Explain ms", "Winning plan", "Result"),
            claims,
        )  # fmt: skip
        print_table(
            console,
            f"Workers registered for every name: {args.jobs:,} records, workers_count 32",
            ("Names", "Jobs", "Jobs/s", "Probe picks", "Hints the claims carried",
             "The workers' probe logged", "Result"),
            workers,
        )  # fmt: skip
    return exit_status(console, sum(1 for r in results if r.failures), "name count")


if __name__ == "__main__":
    raise SystemExit(main())
