"""Contention on the real mongod: 64 concurrent claimers drain 5,000 jobs in 8 partitions.

The shape of Dogs' acquisition stress test (spec §4.1), scaled to CI: each claimer walks its own
shuffled partition rotation (reshuffled every pass) and stops after 8 consecutive misses. It
checks that every job was claimed exactly once, with unique lock ids and ``tries == 1``, and
that a final sweep finds nothing. It prints claims per second and the server's write-conflict
count; no assertion is made on time.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core.domain.records import ClaimedJob, ClaimRequest, NewJob
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import AsyncMongoJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio, pytest.mark.slow]

JOBS = 5_000
PARTITIONS = 8
CLAIMERS = 64
JOB_NAMES = tuple(f"job{i}" for i in range(32))


async def _write_conflicts(client: AsyncMongoClient[dict[str, Any]]) -> int:
    status = await client.admin.command("serverStatus")
    return int(status["metrics"]["operation"]["writeConflicts"])


async def test_64_claimers_claim_5000_jobs_exactly_once(
    async_store: AsyncMongoJobStore, async_mongo_client: AsyncMongoClient[dict[str, Any]]
) -> None:
    start = datetime.now(UTC) - timedelta(hours=1)
    jobs = [
        NewJob(
            id=new_record_id(),
            job_name=JOB_NAMES[i % len(JOB_NAMES)],
            params={"i": i},
            next_run_at=start + timedelta(milliseconds=i),  # strictly increasing, in the past
            priority=100,
            partition=i % PARTITIONS,
        )
        for i in range(JOBS)
    ]
    result = await async_store.insert_jobs(jobs)
    assert (result.scheduled_count, result.errors) == (JOBS, ())
    path = (await async_store.capabilities()).claim_path

    claimed: list[ClaimedJob] = []

    def request(partition: int) -> ClaimRequest:
        now = datetime.now(UTC)
        return ClaimRequest(
            job_names=JOB_NAMES,
            partition=partition,
            hint="globalPriority",
            now=now,
            locked_until=now + timedelta(minutes=30),
            lock_id=new_execution_id(),
        )

    async def claimer(seed: int) -> None:
        rng = random.Random(seed)
        misses = 0
        while True:
            rotation = list(range(PARTITIONS))
            rng.shuffle(rotation)
            for partition in rotation:
                job = await async_store.claim(request(partition))
                if job is None:
                    misses += 1
                    if misses >= PARTITIONS:
                        return
                else:
                    misses = 0
                    claimed.append(job)

    conflicts_before = await _write_conflicts(async_mongo_client)
    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for seed in range(CLAIMERS):
            tg.start_soon(claimer, seed)
    elapsed = time.perf_counter() - began
    conflicts = await _write_conflicts(async_mongo_client) - conflicts_before
    print(
        f"\n{CLAIMERS} claimers, {JOBS} jobs, {PARTITIONS} partitions, path {path}: "
        f"{elapsed:.2f} s, {JOBS / elapsed:,.0f} claims/s, {conflicts} write conflicts"
    )

    assert len(claimed) == JOBS
    assert {job.job_id for job in claimed} == {job.id for job in jobs}  # each exactly once
    assert len({job.lock_id for job in claimed}) == JOBS
    assert {job.tries for job in claimed} == {1}
    assert not any(job.was_stale for job in claimed)
    records = async_store.records_collection
    assert await records.count_documents({"tries": 1, "lockId": {"$exists": True}}) == JOBS
    assert len(await records.distinct("lockId")) == JOBS
    for partition in range(PARTITIONS):  # the final sweep claims nothing
        assert await async_store.claim(request(partition)) is None
