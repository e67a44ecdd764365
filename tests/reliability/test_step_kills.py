"""Durable steps across SIGKILLs on the real mongod (issue 37, items 1 and 2).

A worker process (``steps_worker.py``) runs a job whose transactional step ``charge`` writes a
payment through its session and whose plain step ``ship`` counts its runs. It is killed:

- inside ``charge``, its transaction open: neither the payment nor the step is kept, and the
  next worker charges once;
- inside ``ship``, ``charge`` committed: the payment and the step are both kept, and the next
  worker replays ``charge`` (no second payment) and runs ``ship``.

Either way the order ends with exactly one payment, the one its recorded step names.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from pymongo import AsyncMongoClient

from dogs_core.domain.records import HistoryStatus, Scheduled
from dogs_core.runtime import DogsClient
from dogs_mongo import AsyncMongoJobStore
from tests.reliability.children import ChildProcess, wait_until
from tests.reliability.steps_worker import PAYMENTS, SHIPMENTS, build_jobs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _worker(uri: str, database: str, hang_in: str) -> ChildProcess:
    command = [sys.executable, "-m", "tests.reliability.steps_worker", uri, database]
    return ChildProcess([*command, "--hang-in", hang_in], cwd=ROOT)


def _read_until(child: ChildProcess, wanted: str) -> None:
    assert child.process.stdout is not None
    while True:
        line = child.process.stdout.readline()
        if line.strip() == wanted:
            return
        if not line:
            raise AssertionError(f"the worker exited before {wanted!r}:\n{child.stderr()}")


@pytest.mark.parametrize("killed_in", ["charge", "ship"])
async def test_a_kill_leaves_one_payment_whatever_the_moment(
    killed_in: str,
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    mongodb_uri: str,
) -> None:
    database = async_mongo_client[mongo_database_name]
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    # Made before: a collection created inside the killed process's open transaction would
    # hold up the next one's (MongoDB creates it implicitly, uncommitted).
    await database.create_collection(PAYMENTS)
    client = DogsClient(store, build_jobs(database, "nowhere"))
    outcome = await client.schedule("order", {"order": 7})
    assert isinstance(outcome, Scheduled)
    first = _worker(mongodb_uri, mongo_database_name, killed_in)
    try:
        first.wait_ready()
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(_read_until, first, f"inside {killed_in}")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
        assert first.process.returncode == -signal.SIGKILL
    finally:
        first.stop()
    record = await store.get_record(outcome.id)
    assert record is not None
    committed = [step.name for step in record.steps]
    assert committed == ([] if killed_in == "charge" else ["charge"])
    payments = await database[PAYMENTS].count_documents({"order": 7})
    assert payments == (0 if killed_in == "charge" else 1), "the step and its writes, or neither"

    second = _worker(mongodb_uri, mongo_database_name, "nowhere")
    try:
        second.wait_ready()

        async def succeeded() -> bool:
            rows = await store.read_history(job_id=outcome.id)
            return any(row.status is HistoryStatus.SUCCESS for row in rows)

        await wait_until(succeeded, 60, "the second worker ends the order")
    finally:
        second.terminate()
        # The killed process's transaction stays open until MongoDB's lifetime limit (60 s);
        # the order did not wait for it, but dropping the test's database would.
        await _kill_open_transactions(async_mongo_client)
    paid = [doc async for doc in database[PAYMENTS].find({"order": 7})]
    assert len(paid) == 1, "charged exactly once"
    rows = await store.read_history(job_id=outcome.id)
    (success,) = [row for row in rows if row.status is HistoryStatus.SUCCESS]
    assert success.result == {"payment": paid[0]["_id"], "shipped": 7}
    shipments = await database[SHIPMENTS].find_one({"_id": 7})
    assert shipments is not None
    # ship ran in the killed process (its run counted, its step never recorded) and once after
    assert shipments["runs"] == (1 if killed_in == "charge" else 2)


async def _kill_open_transactions(client: AsyncMongoClient[dict[str, Any]]) -> None:
    """End the sessions that hold an open transaction (the killed process's)."""
    stage = {"$currentOp": {"idleSessions": True, "allUsers": True}}
    match = {"$match": {"transaction": {"$exists": True}, "lsid": {"$exists": True}}}
    cursor = await client.admin.aggregate([stage, match])
    sessions = [op["lsid"] async for op in cursor]
    if sessions:
        await client.admin.command("killSessions", sessions)
