"""Floors: what this server does for the same work when Dogs' commands go straight from pymongo.

A benchmark row alone says little on a shared or slow machine: 500 claims/s is good on a server
that takes 550 and poor on one that takes 5,000. So each table measures, in the same process
invocation and against the same server, the floor of its work written directly against pymongo,
with none of this project's code on the path:

- the claim floor: Dogs' own ``findOneAndUpdate`` claim loop (the query, sort, hint and update
  Node Dogs 4.6.8 sends: ``../shared/reference/dogs-schema.json``, the findAndModify of
  ``commandsSeenByProfiler``), N claimers as asyncio tasks on one ``AsyncMongoClient`` or as
  threads on one ``MongoClient``, each walking the partitions in a shuffled order as Dogs'
  scheduler loop does and stopping once every partition has missed since its last hit;
- the insert floor: ``insert_one`` per document in a loop (each call timed) and one unordered
  ``insert_many`` of the same documents;
- the write ceiling: single-document ``update_one`` calls per second at concurrency 32.

The claim floor seeds Dogs documents (built by :func:`dogs_mongo.queries.document_from_new_job`)
into a fresh database whose indexes the store created, so that only the claim loop differs from
the store's claims. The functions are called by ``claims``, ``throughput`` and ``scheduling``;
run as a module it prints the floors alone::

    python -m benchmarks.floor                      # 10,000 jobs, 128 claimers, 1/8/32 partitions
    python -m benchmarks.floor --quick              # CI size
    python -m benchmarks.floor --uri mongodb://... --adapter async --partitions 8

Every floor checks itself (every job claimed exactly once, every document inserted); a floor that
fails a check is reported as FAILED and the exit status is 1.
"""

from __future__ import annotations

import argparse
import random
import secrets
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import anyio
from pymongo import AsyncMongoClient, MongoClient, ReturnDocument
from pymongo.write_concern import WriteConcern
from rich.console import Console

from benchmarks._common import (
    command_line,
    fmt,
    machine_summary,
    median,
    mongo_server,
    new_console,
    percentile,
    print_table,
)
from dogs_core.domain.records import NewJob
from dogs_core.ids import new_record_id
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q

__all__ = [
    "ClaimFloor",
    "InsertFloor",
    "claim_floor",
    "claim_floor_async",
    "claim_floor_sync",
    "insert_floor",
    "main",
    "node_claim_filter",
    "node_claim_update",
    "ratio",
    "seed_due_records",
    "write_ceiling",
]

Adapter = Literal["async", "sync"]
Document = dict[str, Any]

#: The job names of the claim benchmark's records (Dogs' stress test uses 32).
JOB_NAMES: Final = tuple(f"stress-job-{i}" for i in range(32))
SEED_BATCH: Final = 1_000
LOCK_TIME: Final = timedelta(minutes=30)
#: Dogs' claim sort and its two hints, as the key documents Node sends them.
NODE_SORT: Final = (("priority", -1), ("nextRunAt", 1))
NODE_HINTS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = {
    "globalPriority": (("partition", 1), ("priority", -1), ("nextRunAt", 1)),
    "byJobName": (("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
}


def ratio(ours: float | None, floor: float | None) -> float | None:
    """``ours / floor`` (a rate: above 1 is faster than the floor), or ``None`` without both."""
    if ours is None or floor is None or floor <= 0:
        return None
    return ours / floor


# -- the records -----------------------------------------------------------------------------------


def seed_due_records(
    client: MongoClient[Document],
    database: str,
    *,
    jobs: int,
    partitions: int,
    job_names: Sequence[str] = JOB_NAMES,
) -> set[str]:
    """Insert ``jobs`` due Dogs documents (names round robin, priority 100, strictly increasing
    ``nextRunAt`` in the past, ``partition = i mod partitions``); return their ids."""
    start = datetime.now(UTC) - timedelta(hours=1)
    collection = client[database][q.DEFAULT_RECORDS_COLLECTION]
    ids: set[str] = set()
    batch: list[Document] = []
    for i in range(jobs):
        record_id = new_record_id()
        ids.add(record_id)
        job = NewJob(
            id=record_id,
            job_name=job_names[i % len(job_names)],
            params={"i": i},
            next_run_at=start + timedelta(milliseconds=i),
            priority=100,
            partition=i % partitions,
        )
        batch.append(q.document_from_new_job(job))
        if len(batch) == SEED_BATCH:
            collection.insert_many(batch, ordered=False)
            batch = []
    if batch:
        collection.insert_many(batch, ordered=False)
    return ids


# -- Dogs' claim, as Node sends it -----------------------------------------------------------------


def node_claim_filter(job_names: Sequence[str], partition: int, now: datetime) -> Document:
    """The findAndModify ``query`` of Node Dogs 4.6.8, key for key."""
    return {
        "partition": partition,
        "jobName": {"$in": list(job_names)},
        "nextRunAt": {"$lte": now},
        "$and": [
            {"$or": [{"lockedUntil": {"$exists": False}}, {"lockedUntil": {"$lte": now}}]},
            {"$or": [{"type": {"$ne": "event"}}, {"status": {"$ne": "maxTriesReached"}}]},
        ],
    }


def node_claim_update(now: datetime) -> Document:
    """The findAndModify ``update`` of Node Dogs 4.6.8: a fresh lock id, the lock, ``tries + 1``."""
    return {
        "$set": {"lockId": secrets.token_hex(9), "lockedUntil": now + LOCK_TIME, "lastRunAt": now},
        "$inc": {"tries": 1},
    }


class _Rotation:
    """Dogs' partition walk: a shuffled order, one step per attempt, reshuffled after a pass.
    Done once every partition has missed since the last hit (a drain stops there)."""

    def __init__(self, partitions: int, rng: random.Random) -> None:
        self._order = list(range(partitions))
        self._rng = rng
        rng.shuffle(self._order)
        self._cursor = 0
        self._missed: set[int] = set()

    def next_partition(self) -> int:
        if self._cursor == len(self._order):
            self._rng.shuffle(self._order)
            self._cursor = 0
        self._cursor += 1
        return self._order[self._cursor - 1]

    def record(self, partition: int, hit: bool) -> bool:
        """Note one attempt's outcome; ``True`` when the claimer is done."""
        if hit:
            self._missed.clear()
            return False
        self._missed.add(partition)
        return len(self._missed) == len(self._order)


@dataclass(frozen=True, slots=True)
class ClaimFloor:
    """One run of the raw claim loop."""

    adapter: str
    jobs: int
    claimers: int
    partitions: int
    hint: str
    seconds: float
    claim_calls: int
    failures: tuple[str, ...] = ()

    @property
    def claims_per_second(self) -> float | None:
        return self.jobs / self.seconds if self.seconds > 0 and not self.failures else None

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(slots=True)
class _Spec:
    uri: str
    database: str
    jobs: int
    claimers: int
    partitions: int
    hint: str
    write_concern: WriteConcern | None
    job_names: Sequence[str]


async def _drain_async(spec: _Spec) -> tuple[list[str], int, float]:
    client: AsyncMongoClient[Document] = AsyncMongoClient(
        spec.uri, tz_aware=True, maxPoolSize=max(spec.claimers, 10)
    )
    collection = client[spec.database][q.DEFAULT_RECORDS_COLLECTION]
    if spec.write_concern is not None:
        collection = collection.with_options(write_concern=spec.write_concern)
    claimed: list[str] = []
    calls = 0

    async def claimer(seed: int) -> None:
        nonlocal calls
        rotation = _Rotation(spec.partitions, random.Random(seed))
        while True:
            partition, now = rotation.next_partition(), datetime.now(UTC)
            before = await collection.find_one_and_update(
                node_claim_filter(spec.job_names, partition, now),
                node_claim_update(now),
                sort=list(NODE_SORT),
                hint=list(NODE_HINTS[spec.hint]),
                return_document=ReturnDocument.BEFORE,
            )
            calls += 1
            if before is not None:
                claimed.append(str(before["_id"]))
            if rotation.record(partition, before is not None):
                return

    try:
        await client.admin.command("ping")
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for seed in range(spec.claimers):
                group.start_soon(claimer, seed)
        return claimed, calls, time.perf_counter() - began
    finally:
        await client.close()


def _drain_sync(spec: _Spec) -> tuple[list[str], int, float]:
    client: MongoClient[Document] = MongoClient(
        spec.uri, tz_aware=True, maxPoolSize=max(spec.claimers, 10)
    )
    collection = client[spec.database][q.DEFAULT_RECORDS_COLLECTION]
    if spec.write_concern is not None:
        collection = collection.with_options(write_concern=spec.write_concern)
    claimed: list[str] = []  # list.append is atomic under the GIL
    calls: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(spec.claimers + 1)

    def claimer(seed: int) -> None:
        rotation = _Rotation(spec.partitions, random.Random(seed))
        mine = 0
        try:
            barrier.wait()
            while True:
                partition, now = rotation.next_partition(), datetime.now(UTC)
                before = collection.find_one_and_update(
                    node_claim_filter(spec.job_names, partition, now),
                    node_claim_update(now),
                    sort=list(NODE_SORT),
                    hint=list(NODE_HINTS[spec.hint]),
                    return_document=ReturnDocument.BEFORE,
                )
                mine += 1
                if before is not None:
                    claimed.append(str(before["_id"]))
                if rotation.record(partition, before is not None):
                    break
        except BaseException as error:  # reported after the run
            errors.append(error)
        calls.append(mine)

    try:
        client.admin.command("ping")
        threads = [
            threading.Thread(target=claimer, args=(seed,), name=f"floor-{seed}", daemon=True)
            for seed in range(spec.claimers)
        ]
        for thread in threads:
            thread.start()
        barrier.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        if errors:
            raise errors[0]
        return claimed, sum(calls), seconds
    finally:
        client.close()


def _check_claims(
    claimed: Sequence[str], seeded: set[str], admin: MongoClient[Document], database: str
) -> list[str]:
    failures = []
    if len(claimed) != len(seeded):
        failures.append(f"{len(claimed)} claims for {len(seeded)} jobs")
    if len(set(claimed)) != len(claimed):
        failures.append(f"{len(claimed) - len(set(claimed))} jobs were claimed twice")
    if set(claimed) != seeded:
        failures.append(f"{len(seeded - set(claimed))} jobs were never claimed")
    records = admin[database][q.DEFAULT_RECORDS_COLLECTION]
    locked = records.count_documents({"tries": 1, "lockId": {"$type": "string"}})
    if locked != len(seeded):
        failures.append(f"{locked} of {len(seeded)} stored records are locked with tries == 1")
    return failures


def _prepare(
    uri: str, jobs: int, partitions: int, job_names: Sequence[str]
) -> tuple[str, set[str]]:
    """A fresh database with the store's indexes and ``jobs`` due records."""
    database = f"dogs_bench_floor_{uuid.uuid4().hex[:12]}"
    admin: MongoClient[Document] = MongoClient(uri, tz_aware=True)
    with admin:
        MongoJobStore(admin, database).setup()
        seeded = seed_due_records(
            admin, database, jobs=jobs, partitions=partitions, job_names=job_names
        )
    return database, seeded


def _drop(uri: str, database: str) -> None:
    admin: MongoClient[Document] = MongoClient(uri)
    with admin:
        admin.drop_database(database)


def _finish(
    spec: _Spec, adapter: str, seeded: set[str], drained: tuple[list[str], int, float]
) -> ClaimFloor:
    claimed, calls, seconds = drained
    admin: MongoClient[Document] = MongoClient(spec.uri, tz_aware=True)
    with admin:
        try:
            failures = _check_claims(claimed, seeded, admin, spec.database)
        finally:
            admin.drop_database(spec.database)
    return ClaimFloor(
        adapter,
        spec.jobs,
        spec.claimers,
        spec.partitions,
        spec.hint,
        seconds,
        calls,
        tuple(failures),
    )


def _spec(
    uri: str,
    jobs: int,
    claimers: int,
    partitions: int,
    hint: str,
    write_concern: WriteConcern | None,
    job_names: Sequence[str],
) -> tuple[_Spec, set[str]]:
    if min(jobs, claimers, partitions) < 1:
        raise ValueError(
            f"jobs, claimers and partitions must be >= 1: {jobs}, {claimers}, {partitions}"
        )
    if hint not in NODE_HINTS:
        raise ValueError(f"hint must be one of {sorted(NODE_HINTS)}: {hint!r}")
    database, seeded = _prepare(uri, jobs, partitions, job_names)
    return _Spec(uri, database, jobs, claimers, partitions, hint, write_concern, job_names), seeded


async def claim_floor_async(
    uri: str,
    *,
    jobs: int,
    claimers: int,
    partitions: int,
    hint: str = "globalPriority",
    write_concern: WriteConcern | None = None,
    job_names: Sequence[str] = JOB_NAMES,
) -> ClaimFloor:
    """The raw claim loop on ``AsyncMongoClient`` (``claimers`` asyncio tasks), from a running
    event loop. The seed and the checks are blocking (they are not measured)."""
    spec, seeded = _spec(uri, jobs, claimers, partitions, hint, write_concern, job_names)
    try:
        drained = await _drain_async(spec)
    except BaseException:
        _drop(uri, spec.database)
        raise
    return _finish(spec, "async", seeded, drained)


def claim_floor_sync(
    uri: str,
    *,
    jobs: int,
    claimers: int,
    partitions: int,
    hint: str = "globalPriority",
    write_concern: WriteConcern | None = None,
    job_names: Sequence[str] = JOB_NAMES,
) -> ClaimFloor:
    """The raw claim loop on ``MongoClient`` (``claimers`` threads)."""
    spec, seeded = _spec(uri, jobs, claimers, partitions, hint, write_concern, job_names)
    try:
        drained = _drain_sync(spec)
    except BaseException:
        _drop(uri, spec.database)
        raise
    return _finish(spec, "sync", seeded, drained)


def claim_floor(
    uri: str,
    adapter: Adapter,
    *,
    jobs: int,
    claimers: int,
    partitions: int,
    hint: str = "globalPriority",
    write_concern: WriteConcern | None = None,
) -> ClaimFloor:
    """The raw claim loop of ``adapter``, from code that runs no event loop."""
    if adapter == "async":
        return anyio.run(
            lambda: claim_floor_async(
                uri,
                jobs=jobs,
                claimers=claimers,
                partitions=partitions,
                hint=hint,
                write_concern=write_concern,
            ),
            backend="asyncio",
        )
    return claim_floor_sync(
        uri,
        jobs=jobs,
        claimers=claimers,
        partitions=partitions,
        hint=hint,
        write_concern=write_concern,
    )


# -- inserts and single writes ---------------------------------------------------------------------


@dataclass(slots=True)
class InsertFloor:
    """``insert_one`` in a loop and one unordered ``insert_many``, of the same documents."""

    documents: int
    singles: int
    insert_many_seconds: float | None = None
    insert_one_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def insert_many_per_second(self) -> float | None:
        seconds = self.insert_many_seconds
        return self.documents / seconds if seconds and not self.failures else None

    @property
    def insert_one_per_second(self) -> float | None:
        total = sum(self.insert_one_seconds)
        return len(self.insert_one_seconds) / total if total > 0 and not self.failures else None

    @property
    def insert_one_p50_ms(self) -> float | None:
        return median(self.insert_one_seconds) * 1000 if self.insert_one_seconds else None

    @property
    def insert_one_p99_ms(self) -> float | None:
        values = self.insert_one_seconds
        return percentile(values, 0.99) * 1000 if values else None


async def insert_floor(
    uri: str,
    documents: Sequence[Document],
    *,
    singles: Sequence[Document] = (),
    client_options: Mapping[str, Any] | None = None,
) -> InsertFloor:
    """One unordered ``insert_many`` of ``documents`` and an ``insert_one`` loop of ``singles``
    (each into a fresh database whose indexes the store created, dropped afterwards); checks
    that every document arrived. The documents are copied first (pymongo would add ``_id``)."""
    floor = InsertFloor(documents=len(documents), singles=len(singles))
    options = {"tz_aware": True, **(client_options or {})}
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, **options)
    names = [f"dogs_bench_insert_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    try:
        for name in names:
            await _setup_indexes(uri, name)
        if documents:
            many = client[names[0]][q.DEFAULT_RECORDS_COLLECTION]
            batch = [dict(doc) for doc in documents]
            began = time.perf_counter()
            await many.insert_many(batch, ordered=False)
            floor.insert_many_seconds = time.perf_counter() - began
            stored = await many.count_documents({})
            if stored != len(documents):
                floor.failures.append(f"insert_many: {stored} of {len(documents)} stored")
        one = client[names[1]][q.DEFAULT_RECORDS_COLLECTION]
        for doc in [dict(doc) for doc in singles]:
            began = time.perf_counter()
            await one.insert_one(doc)
            floor.insert_one_seconds.append(time.perf_counter() - began)
        stored = await one.count_documents({})
        if stored != len(singles):
            floor.failures.append(f"insert_one: {stored} of {len(singles)} stored")
        return floor
    finally:
        for name in names:
            await client.drop_database(name)
        await client.close()


async def _setup_indexes(uri: str, database: str) -> None:
    def setup() -> None:
        admin: MongoClient[Document] = MongoClient(uri)
        with admin:
            MongoJobStore(admin, database).setup()

    await anyio.to_thread.run_sync(setup)


async def write_ceiling(
    uri: str, client_options: Mapping[str, Any], concurrency: int = 32, seconds: float = 2.0
) -> float:
    """Single-document ``update_one`` calls per second this server takes from this process at
    ``concurrency`` (same client options as the stores): the ceiling every job's writes share."""
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, **client_options)
    database = f"dogs_bench_ceiling_{uuid.uuid4().hex[:12]}"
    collection = client[database]["ceiling"]
    try:
        await collection.insert_many([{"_id": i, "n": 0} for i in range(concurrency)])
        count = 0
        deadline = time.perf_counter() + seconds

        async def writer(key: int) -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                await collection.update_one({"_id": key}, {"$inc": {"n": 1}})
                count += 1

        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for key in range(concurrency):
                group.start_soon(writer, key)
        return count / (time.perf_counter() - began)
    finally:
        await client.drop_database(database)
        await client.close()


# -- command line ----------------------------------------------------------------------------------


def _documents(count: int) -> list[Document]:
    now = datetime.now(UTC)
    return [
        q.document_from_new_job(
            NewJob(new_record_id(), "floor", {"i": i}, now, priority=0, partition=i % 8)
        )
        for i in range(count)
    ]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.floor",
        description="The raw pymongo floors: Dogs' claim loop, inserts and single writes.",
    )
    parser.add_argument("--jobs", type=int, default=None, help="records to claim (10000)")
    parser.add_argument("--claimers", type=int, default=None, help="concurrent claimers (128)")
    parser.add_argument(
        "--partitions", type=int, action="append", help="partition count (repeatable; 1, 8, 32)"
    )
    parser.add_argument("--adapter", choices=("async", "sync", "both"), default="both")
    parser.add_argument("--documents", type=int, default=None, help="documents inserted (10000)")
    parser.add_argument("--uri", default=None, help="MongoDB URI (default: a local mongod)")
    parser.add_argument("--quick", action="store_true", help="CI size")
    args = parser.parse_args(argv)
    args.jobs = args.jobs if args.jobs is not None else 300 if args.quick else 10_000
    args.claimers = args.claimers if args.claimers is not None else 16 if args.quick else 128
    args.partitions = args.partitions or ([1, 8] if args.quick else [1, 8, 32])
    args.documents = args.documents if args.documents is not None else 500 if args.quick else 10_000
    if min(args.jobs, args.claimers, args.documents, *args.partitions) < 1:
        parser.error("--jobs, --claimers, --partitions and --documents must be at least 1")
    return args


def _claim_rows(
    uri: str, args: argparse.Namespace, adapters: Sequence[Adapter], console: Console
) -> list[list[str]]:
    rows = []
    for partitions in args.partitions:
        for adapter in adapters:
            with console.status(f"claim floor: {adapter}, {partitions} partition(s)..."):
                floor = claim_floor(
                    uri, adapter, jobs=args.jobs, claimers=args.claimers, partitions=partitions
                )
            rows.append(
                [
                    f"findOneAndUpdate, {partitions} partition(s)",
                    adapter,
                    fmt(floor.seconds, ".2f"),
                    fmt(floor.claims_per_second, ",.0f"),
                    f"{floor.claim_calls:,}",
                    "ok" if floor.ok else f"FAILED: {'; '.join(floor.failures)}",
                ]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    console = new_console()
    adapters: list[Adapter] = ["async", "sync"] if args.adapter == "both" else [args.adapter]
    console.print(f"$ {command_line('benchmarks.floor', argv)}")
    console.print(f"[bold]Machine:[/] {machine_summary()}")
    failed = 0
    with mongo_server(args.uri, console) as server:
        console.print(f"[bold]Server:[/] {server.describe()}")
        rows = _claim_rows(server.uri, args, adapters, console)
        failed += sum(1 for row in rows if row[-1] != "ok")
        title = (
            f"Claim floor: {args.jobs:,} jobs, {args.claimers} claimers, MongoDB {server.version}"
        )
        headers = ("Raw loop", "Adapter", "Time (s)", "Claims/s", "Claim calls", "Result")
        print_table(console, title, headers, rows)
        documents = _documents(args.documents)
        with console.status("insert floor..."):
            inserts = anyio.run(
                lambda: insert_floor(server.uri, documents, singles=documents), backend="asyncio"
            )
            ceiling = anyio.run(lambda: write_ceiling(server.uri, {}), backend="asyncio")
        failed += bool(inserts.failures)
        status = "ok" if not inserts.failures else f"FAILED: {'; '.join(inserts.failures)}"
        print_table(
            console,
            f"Insert floor: {args.documents:,} Dogs documents, async client",
            ("Raw write", "Docs/s", "p50 (ms)", "p99 (ms)", "Result"),
            [
                [
                    "insert_many, unordered",
                    fmt(inserts.insert_many_per_second, ",.0f"),
                    "–",
                    "–",
                    status,
                ],
                [
                    "insert_one, one at a time",
                    fmt(inserts.insert_one_per_second, ",.0f"),
                    fmt(inserts.insert_one_p50_ms, ".2f"),
                    fmt(inserts.insert_one_p99_ms, ".2f"),
                    status,
                ],
                ["update_one ×32 concurrent (write ceiling)", fmt(ceiling, ",.0f"), "–", "–", "ok"],
            ],
        )
    if failed:
        console.print(f"[bold red]{failed} floor(s) FAILED[/]")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
