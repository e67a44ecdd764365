"""A worker process killed with SIGKILL mid-job, on the real mongod: its jobs are recovered by
another worker once their locks expire, with ``tries`` incremented and ``was_stale`` set, and
nothing is lost.

The worker is ``crash_worker.py`` run with ``sys.executable`` against the session's mongod and a
fresh database, with a 2 s default lock time. Its ``victim`` jobs keep their lock alive with the
heartbeat until the process dies; its ``quick`` jobs finish before the kill.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pymongo import AsyncMongoClient, WriteConcern

from dogs_core.domain.records import Scheduled
from dogs_core.runtime import DogsClient, Workers
from dogs_mongo import AsyncMongoJobStore
from tests.reliability.children import ChildProcess, wait_until
from tests.reliability.crash_worker import RUNS, build_jobs

WORKER = Path(__file__).with_name("crash_worker.py")
LOCK_TIME = 2.0
VICTIMS = 3
QUICK = 3

pytestmark = pytest.mark.mongo


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _worker(uri: str, database: str, *options: str) -> ChildProcess:
    """A ``crash_worker.py`` child."""
    return ChildProcess([sys.executable, str(WORKER), uri, database, *options])


@contextmanager
def worker_process(uri: str, database: str, *options: str) -> Iterator[ChildProcess]:
    worker = _worker(uri, database, *options)
    try:
        yield worker
    finally:
        worker.stop()


async def test_a_killed_worker_s_jobs_are_recovered_after_their_locks_expire(
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    mongodb_uri: str,
) -> None:
    database = async_mongo_client[mongo_database_name]
    runs = database.get_collection(RUNS, write_concern=WriteConcern("majority"))
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    jobs = build_jobs(runs, hang=True)  # the second worker runs the same application
    client = DogsClient(store, jobs)
    scheduled: dict[str, str] = {}
    for name, how_many in (("victim", VICTIMS), ("quick", QUICK)):
        for _ in range(how_many):
            outcome = await client.schedule(name, {"seconds": 0.2})
            assert isinstance(outcome, Scheduled)
            scheduled[outcome.id] = name

    async def count(**query: Any) -> int:
        found: int = await runs.count_documents(query)
        return found

    with worker_process(
        mongodb_uri, mongo_database_name, "--hang", "--lock-time", str(LOCK_TIME)
    ) as first:
        first.wait_ready()

        async def all_running() -> bool:
            started = await count(job_name="victim", phase="started", tries=1)
            if started != VICTIMS or await count(job_name="quick", phase="done") != QUICK:
                return False
            # Completed too: the row is written after the handler and before the delete.
            left = await store.find_records(limit=1_000_000)
            return not any(record.job_name == "quick" for record in left)

        await wait_until(all_running, 20, "the first worker runs every job", first)
        first.kill()
        killed_at = datetime.now(UTC)
        assert first.process.returncode == -signal.SIGKILL

    # The dead worker's locks are still held: nobody released them.
    locked = [
        record
        for record in await store.find_records(limit=1_000_000)
        if record.locked_until is not None
    ]
    assert len(locked) == VICTIMS
    assert all(record.job_name == "victim" for record in locked)

    workers = Workers(
        store,
        jobs,
        default_lock_time=timedelta(seconds=LOCK_TIME),
        poll_interval=0.1,
        probe_enabled=False,
    )
    async with workers:

        async def all_done() -> bool:
            return await count(phase="done") == VICTIMS + QUICK

        await wait_until(all_done, 15, "the second worker recovers every job")
        await workers.stop(grace=1)

    rows = [row async for row in runs.find({}, sort=[("_id", 1)])]
    first_pid = first.pid
    for job_id, name in scheduled.items():
        mine = [
            (r["pid"] == first_pid, r["tries"], r["was_stale"], r["phase"])
            for r in rows
            if r["job_id"] == job_id
        ]
        if name == "quick":
            assert mine == [(True, 1, False, "started"), (True, 1, False, "done")]
        else:
            assert mine == [
                (True, 1, False, "started"),  # killed here
                (False, 2, True, "started"),  # recovered: one more try, seen as interrupted
                (False, 2, True, "done"),
            ]
    assert await store.find_records(limit=1_000_000) == [], (
        "every job completed: nothing is left, nothing lost"
    )
    recovered_at = min(
        r["_id"].generation_time for r in rows if r["pid"] == os.getpid() and r["tries"] == 2
    )
    print(
        f"\ncrash: killed a worker with {VICTIMS} jobs in flight; recovered "
        f"{(recovered_at - killed_at).total_seconds():.1f}s later (lock time {LOCK_TIME}s); "
        f"jobs lost: 0"
    )
