"""The claim side that several benchmarks share: due records seeded for claims, claim requests,
concurrent claimers draining a store through its real ``claim``/``claim_many``, and the explain
of the claim query the store sends.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
from pymongo import AsyncMongoClient, MongoClient

from dogs_core.domain.partitions import PartitionRotation
from dogs_core.domain.records import ClaimedJob, ClaimRequest, NewJob
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_mongo import queries as q

__all__ = [
    "JOB_NAMES",
    "LOCK_TIME",
    "ClaimDrain",
    "ClaimExplain",
    "claim_requests",
    "drain_by_claims",
    "explain_claims",
    "seed_due_records",
]

Document = dict[str, Any]

#: The job names of the claim benchmark's records (Dogs' stress test uses 32).
JOB_NAMES: Final = tuple(f"stress-job-{i}" for i in range(32))
#: The lock of a benchmark's claim: long enough that no drain sees a lock expire.
LOCK_TIME: Final = timedelta(minutes=30)
SEED_BATCH: Final = 1_000


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


def claim_requests(
    job_names: Sequence[str], partition: int, hint: str, count: int = 1
) -> list[ClaimRequest]:
    """One claim call's requests: the same partition and times, a lock id each."""
    now = datetime.now(UTC)
    return [
        ClaimRequest(
            job_names=tuple(job_names),
            partition=partition,
            hint=hint,
            now=now,
            locked_until=now + LOCK_TIME,
            lock_id=new_execution_id(),
        )
        for _ in range(count)
    ]


@dataclass(slots=True)
class ClaimDrain:
    """What the claimers of one drain did; readable while they run (a progress bar)."""

    claimed: list[ClaimedJob] = field(default_factory=list)
    #: Seconds of every claim call, hits and misses.
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.latencies)


async def _claimer(
    store: AsyncJobStore,
    rotation: PartitionRotation,
    drain: ClaimDrain,
    *,
    job_names: Sequence[str],
    hint: str,
    batch: int,
    enough: int | None,
) -> None:
    """Claim partition after partition (``claim``, or ``claim_many`` of ``batch``) until every
    partition missed since the last hit, or until ``enough`` jobs are claimed."""
    while enough is None or len(drain.claimed) < enough:
        requests = claim_requests(job_names, rotation.next_partition(), hint, batch)
        began = time.perf_counter()
        if batch == 1:
            job = await store.claim(requests[0])
            jobs = [] if job is None else [job]
        else:
            jobs = await store.claim_many(requests)
        drain.latencies.append(time.perf_counter() - began)
        if not jobs:
            if rotation.record_miss():
                return
        else:
            rotation.record_hit()
            drain.claimed.extend(jobs)


async def drain_by_claims(
    store: AsyncJobStore,
    *,
    claimers: int,
    partitions: int,
    job_names: Sequence[str],
    hint: str,
    batch: int = 1,
    enough: int | None = None,
    drain: ClaimDrain | None = None,
) -> ClaimDrain:
    """``claimers`` asyncio tasks, each with its own seeded partition rotation (as each Dogs
    scheduler has), claim until they are done (see :func:`_claimer`); timed from the first
    claim to the last. Pass ``drain`` to watch it fill."""
    drain = drain if drain is not None else ClaimDrain()
    claim = functools.partial(
        _claimer, drain=drain, job_names=job_names, hint=hint, batch=batch, enough=enough
    )
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for seed in range(claimers):
            group.start_soon(claim, store, PartitionRotation(partitions, random.Random(seed)))
    drain.seconds = time.perf_counter() - began
    return drain


@dataclass(frozen=True, slots=True)
class ClaimExplain:
    """``explain`` (executionStats) of the claim query on every partition: means per claim."""

    keys_per_claim: float
    docs_per_claim: float
    millis_per_claim: float
    winning_plans: tuple[dict[str, Any], ...]


async def explain_claims(
    client: AsyncMongoClient[Document],
    database: str,
    *,
    job_names: Sequence[str],
    partitions: int,
    hint: str,
) -> ClaimExplain:
    """The claim query the store sends (:func:`dogs_mongo.queries.probe_explain_command`) with
    ``hint``, explained on each partition in turn."""
    keys, docs, millis, plans = [], [], [], []
    for partition in range(partitions):
        command = q.probe_explain_command(
            q.DEFAULT_RECORDS_COLLECTION,
            hint=hint,
            job_names=job_names,
            partition=partition,
            now=datetime.now(UTC),
        )
        result = await client[database].command(command)
        stats = result["executionStats"]
        keys.append(int(stats["totalKeysExamined"]))
        docs.append(int(stats["totalDocsExamined"]))
        millis.append(float(stats["executionTimeMillis"]))
        plans.append(dict(result["queryPlanner"]["winningPlan"]))
    count = len(keys)
    return ClaimExplain(sum(keys) / count, sum(docs) / count, sum(millis) / count, tuple(plans))
