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
- the write ceiling: single-document ``update_one`` calls per second at concurrency 32;
- the job-cycle floor: the fewest round trips a hand-written pymongo loop needs to run no-op
  jobs with this project's guarantees, a batch of N at a time: one ``find`` of the N best due
  records (Dogs' filter, sort and hint), one unordered ``bulkWrite`` locking each while it is
  as read (fenced), one ``insert_many`` of their history rows (``w: 1``), one ``deleteMany`` of
  the records fenced by their lock ids (the run's write concern, majority by default: the rows
  before it are then as durable). Four round trips per batch, ``loops`` batches in flight.

The claim floor seeds Dogs documents (built by :func:`dogs_mongo.queries.document_from_new_job`)
into a fresh database whose indexes the store created, so that only the claim loop differs from
the store's claims. ``claims``, ``throughput`` and ``scheduling`` put these beside their rows;
``python -m benchmarks.floor`` prints them alone. Every floor checks itself (every job claimed
exactly once, every document inserted).
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import anyio
from pymongo import AsyncMongoClient, MongoClient, ReturnDocument, UpdateOne
from pymongo.write_concern import WriteConcern

from benchmarks.support.claiming import JOB_NAMES, LOCK_TIME, seed_due_records
from benchmarks.support.server import scratch_database
from benchmarks.support.timing import median, percentile
from dogs_mongo import MongoJobStore
from dogs_mongo import queries as q

__all__ = [
    "NODE_HINTS",
    "Adapter",
    "ClaimFloor",
    "InsertFloor",
    "JobCycleFloor",
    "claim_floor",
    "claim_floor_async",
    "claim_floor_sync",
    "insert_floor",
    "job_cycle_floor",
    "node_claim_filter",
    "node_claim_update",
    "write_ceiling",
]

Adapter = Literal["async", "sync"]
Document = dict[str, Any]

#: Dogs' claim sort and its two hints, as the key documents Node sends them.
NODE_SORT: Final = (("priority", -1), ("nextRunAt", 1))
NODE_HINTS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = {
    "globalPriority": (("partition", 1), ("priority", -1), ("nextRunAt", 1)),
    "byJobName": (("partition", 1), ("jobName", 1), ("priority", -1), ("nextRunAt", 1)),
}


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
    database = scratch_database("floor")
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
    names = [scratch_database("insert") for _ in range(2)]
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
    database = scratch_database("ceiling")
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


# -- the job cycle ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobCycleFloor:
    """One run of the raw job-cycle loop (claim, history row, delete: a batch at a time)."""

    jobs: int
    loops: int
    batch: int
    partitions: int
    seconds: float
    round_trips: int
    failures: tuple[str, ...] = ()

    @property
    def jobs_per_second(self) -> float | None:
        return self.jobs / self.seconds if self.seconds > 0 and not self.failures else None


async def job_cycle_floor(
    uri: str,
    *,
    jobs: int,
    loops: int,
    batch: int,
    partitions: int,
    hint: str = "globalPriority",
    write_concern: WriteConcern | None = None,
    job_names: Sequence[str] = JOB_NAMES,
) -> JobCycleFloor:
    """``jobs`` no-op jobs run by ``loops`` concurrent hand-written loops (see the module)."""
    if min(jobs, loops, batch, partitions) < 1:
        raise ValueError(f"jobs, loops, batch, partitions must be >= 1: {jobs, loops, batch}")
    database, seeded = _prepare(uri, jobs, partitions, job_names)
    client: AsyncMongoClient[Document] = AsyncMongoClient(
        uri, tz_aware=True, maxPoolSize=max(loops, 10)
    )
    records = client[database][q.DEFAULT_RECORDS_COLLECTION]
    if write_concern is not None:
        records = records.with_options(write_concern=write_concern)
    rows = client[database].get_collection(
        q.DEFAULT_HISTORY_COLLECTION, write_concern=WriteConcern(w=1)
    )
    round_trips = 0

    async def cycle(partition: int) -> bool:
        """One batch of one partition; whether it found any job."""
        nonlocal round_trips
        now = datetime.now(UTC)
        cursor = records.find(node_claim_filter(job_names, partition, now))
        found = (
            await cursor.sort(list(NODE_SORT))
            .hint(list(NODE_HINTS[hint]))
            .limit(batch)
            .to_list(None)
        )
        round_trips += 1
        if not found:
            return False
        locks = {str(doc["_id"]): secrets.token_hex(8) for doc in found}
        until = now + LOCK_TIME
        updates = [
            UpdateOne(
                {f: doc.get(f) for f in ("_id", "lockId", "lockedUntil", "tries", "nextRunAt")},
                {
                    "$set": {
                        "lockId": locks[str(doc["_id"])],
                        "lockedUntil": until,
                        "lastRunAt": now,
                    },
                    "$inc": {"tries": 1},
                },
            )
            for doc in found
        ]
        result = await records.bulk_write(updates, ordered=False)
        round_trips += 1
        taken = found
        if result.modified_count < len(found):  # another loop took some in between
            mine = await records.find(
                {"lockId": {"$in": list(locks.values())}}, {"_id": 1}
            ).to_list(None)
            round_trips += 1
            ids = {str(doc["_id"]) for doc in mine}
            taken = [doc for doc in found if str(doc["_id"]) in ids]
        if not taken:
            return True
        ended = datetime.now(UTC)
        await rows.insert_many(
            [
                {
                    "executionId": locks[str(doc["_id"])],
                    "jobId": doc["_id"],
                    "jobName": doc["jobName"],
                    "type": "event",
                    "priority": doc.get("priority"),
                    "tries": (doc.get("tries") or 0) + 1,
                    "startedAt": now,
                    "endedAt": ended,
                    "status": "success",
                    "params": doc.get("params"),
                }
                for doc in taken
            ],
            ordered=False,
        )
        await records.delete_many(
            {
                "_id": {"$in": [doc["_id"] for doc in taken]},
                "lockId": {"$in": [locks[str(doc["_id"])] for doc in taken]},
            }
        )
        round_trips += 2
        return True

    async def loop(seed: int) -> None:
        rotation = _Rotation(partitions, random.Random(seed))
        while True:
            partition = rotation.next_partition()
            if rotation.record(partition, await cycle(partition)):
                return

    try:
        await client.admin.command("ping")
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for seed in range(loops):
                group.start_soon(loop, seed)
        seconds = time.perf_counter() - began
        left = await records.count_documents({})
        written = await rows.count_documents({})
        distinct = len(await rows.distinct("jobId"))
    finally:
        await client.drop_database(database)
        await client.close()
    failures = []
    if left:
        failures.append(f"{left} of {len(seeded)} records were left")
    if written != len(seeded) or distinct != len(seeded):
        failures.append(f"{written} history rows for {distinct} of {len(seeded)} jobs")
    return JobCycleFloor(jobs, loops, batch, partitions, seconds, round_trips, tuple(failures))
