"""Nothing lost at a crash, history included (issue 16, item 10), on the real mongod.

A worker process (``crash_history_worker.py``) is killed with SIGKILL exactly in a window of an
execution's ending: right after its history row is written (before its fenced completion), or
right after its completion. Another worker then recovers. Every job ends with exactly one
``success`` row, and a job whose row was written before the kill is completed by the recovering
worker without running its handler again.
"""

from __future__ import annotations

import random
import signal
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core.domain.records import HistoryStatus, Scheduled
from dogs_core.runtime import DogsClient, Workers
from dogs_mongo import AsyncMongoJobStore
from tests.reliability.children import ChildProcess, wait_until
from tests.reliability.crash_worker import RUNS, build_jobs

ROOT = Path(__file__).resolve().parents[2]
LOCK_TIME = 1.5
JOBS = 12
NTH = 5

pytestmark = pytest.mark.mongo


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _worker(uri: str, database: str, *options: str) -> ChildProcess:
    """A ``crash_history_worker`` child process; killed and reaped by ``stop``."""
    command = [sys.executable, "-m", "tests.reliability.crash_history_worker", uri, database]
    return ChildProcess([*command, *options], cwd=ROOT)


async def _success_rows(store: AsyncMongoJobStore, job_ids: list[str]) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for job_id in job_ids:
        history = await store.read_history(job_id=job_id, limit=100)
        rows[job_id] = [r.execution_id for r in history if r.status is HistoryStatus.SUCCESS]
    return rows


@pytest.mark.anyio
@pytest.mark.parametrize("window", ["row", "completion"])
async def test_a_kill_right_after_the_row_or_the_completion_loses_nothing(
    window: str,
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    mongodb_uri: str,
) -> None:
    database = async_mongo_client[mongo_database_name]
    runs = database.get_collection(RUNS, write_concern=WriteConcern("majority"))
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    jobs = build_jobs(runs, hang=False)
    client = DogsClient(store, jobs)
    job_ids: list[str] = []
    for _ in range(JOBS):
        outcome = await client.schedule("quick")
        assert isinstance(outcome, Scheduled)
        job_ids.append(outcome.id)

    # One execution at a time, so the kill lands in the window of exactly one job.
    options = ("--kill-after", window, "--nth", str(NTH), "--lock-time", str(LOCK_TIME))
    first = _worker(mongodb_uri, mongo_database_name, *options)
    try:
        first.wait_ready()
        with anyio.fail_after(60):
            while first.process.poll() is None:  # noqa: ASYNC110 - a child process
                await anyio.sleep(0.05)
        assert first.process.returncode == -signal.SIGKILL, first.stderr()
    finally:
        first.stop()
    left = await store.find_records(limit=1_000)
    if window == "row":
        locked = [r for r in left if r.locked_until is not None]
        assert len(locked) == 1, "the killed job's record is left locked, its row written"
    assert len(left) == JOBS - NTH + (1 if window == "row" else 0)

    workers = Workers(
        store,
        jobs,
        default_lock_time=timedelta(seconds=LOCK_TIME),
        poll_interval=0.1,
        probe_enabled=False,
    )
    async with workers:

        async def drained() -> bool:
            return await store.find_records(limit=1) == []

        await wait_until(drained, 30, "the second worker completes every job")
        await workers.stop(grace=1)

    done = Counter([row["job_id"] async for row in runs.find({"phase": "done"})])
    assert {job_id: done[job_id] for job_id in job_ids} == dict.fromkeys(job_ids, 1), (
        "every handler ran exactly once: the job killed after its row was completed, not rerun"
    )
    rows = await _success_rows(store, job_ids)
    assert all(len(ids) == 1 for ids in rows.values()), rows
    killed_pid = first.process.pid
    ran_in_first = {row["job_id"] async for row in runs.find({"pid": killed_pid})}
    assert len(ran_in_first) == NTH


@pytest.mark.anyio
async def test_random_kills_of_two_workers_lose_no_job_and_no_row(
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    mongodb_uri: str,
) -> None:
    database = async_mongo_client[mongo_database_name]
    runs = database.get_collection(RUNS, write_concern=WriteConcern("majority"))
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    client = DogsClient(store, build_jobs(runs, hang=False))
    job_ids: list[str] = []
    for _ in range(300):
        outcome = await client.schedule("victim", {"seconds": 0.02})
        assert isinstance(outcome, Scheduled)
        job_ids.append(outcome.id)
    rng = random.Random(16)
    options = ("--workers", "4", "--lock-time", str(LOCK_TIME))
    workers = [_worker(mongodb_uri, mongo_database_name, *options) for _ in range(2)]
    killed: set[int] = set()
    try:
        for worker in workers:
            worker.wait_ready()
        for _ in range(4):
            await anyio.sleep(rng.uniform(0.3, 1.0))
            index = rng.randrange(2)
            victim = workers[index]
            killed.add(victim.process.pid)
            victim.stop()
            workers[index] = _worker(mongodb_uri, mongo_database_name, *options)
            workers[index].wait_ready()

        async def drained() -> bool:
            return await store.find_records(limit=1) == []

        await wait_until(drained, 40, "the workers complete every job", workers[0])
    finally:
        for worker in workers:
            worker.stop()

    rows = await _success_rows(store, job_ids)
    assert [job_id for job_id, ids in rows.items() if not ids] == [], "a job without a row"
    every = [execution for ids in rows.values() for execution in ids]
    assert len(every) == len(set(every)), "a duplicate success row of one execution"
    successes = {execution for ids in rows.values() for execution in ids}
    async for row in runs.find({"phase": "done"}):
        if row["execution_id"] not in successes:
            # A handler that ended without its own success row: its process was killed
            # between the handler's return and the row write (the job then ran again).
            assert row["pid"] in killed, row
    print(f"\ncrash history: 300 jobs, {len(killed)} kills, 0 lost, 0 without a row")
