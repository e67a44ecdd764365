"""Unique schedules racing on the real mongod: 32 concurrent calls of one key, per mode, give
exactly one record and the right outcome for each call (the issue's acceptance). Each call is a
separate ``schedule`` on one client; every step is a single-document operation on the server,
so the calls interleave there as they would from 32 processes. The counts are printed (run with
``-s``) for the closing note; no assertion is made on time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import Debounced, Duplicate, Jobs, Replaced, Scheduled, Unique
from dogs_core.domain.records import ScheduleOutcome
from dogs_core.runtime import DogsClient
from dogs_mongo import AsyncMongoJobStore

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

CALLS = 32
jobs = Jobs()


@jobs.event
async def sync_customer(params: dict[str, Any], ctx: object) -> None: ...


MODES: dict[str, tuple[Unique, type]] = {
    "skip": (Unique("cust:42"), Duplicate),
    "pending-only": (Unique(by=("customer_id",), states="pending"), Duplicate),
    "window": (Unique("cust:42", period="10m"), Duplicate),
    "replace": (Unique("cust:42", on_conflict="replace"), Replaced),
    "debounce": (Unique("cust:42", on_conflict="debounce", delay="30s", max_wait="5m"), Debounced),
    "throttle": (Unique("cust:42", on_conflict="throttle", period="1m"), Duplicate),
}


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_32_concurrent_schedulers_of_one_key(
    mode: str, async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    unique, others = MODES[mode]
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    await store.setup()
    client = DogsClient(store, jobs, clock_sync_interval=None)
    outcomes: list[ScheduleOutcome] = []

    async def call(number: int) -> None:
        params = {"customer_id": 42, "n": number}
        later = None if unique.on_conflict == "debounce" else "1h"  # nothing runs meanwhile
        outcomes.append(await client.schedule(sync_customer, params, unique=unique, run_in=later))

    async with anyio.create_task_group() as group:
        for number in range(CALLS):
            group.start_soon(call, number)
    records = await store.records_collection.find({"jobName": "sync_customer"}).to_list(None)
    kinds = Counter(type(outcome).__name__ for outcome in outcomes)
    print(f"\n{mode}: {len(records)} record(s); outcomes {dict(sorted(kinds.items()))}")
    assert len(records) == 1
    record_id = records[0]["_id"]
    assert kinds == {"Scheduled": 1, others.__name__: CALLS - 1}
    for outcome in outcomes:
        named = outcome.existing_id if isinstance(outcome, Duplicate) else outcome.id
        assert named == record_id
    if mode == "throttle":
        assert all(o.reason == "throttle" for o in outcomes if isinstance(o, Duplicate))
        assert "uniqueIdentifier" not in records[0]
    else:
        assert records[0]["uniqueIdentifier"].startswith("by:" if unique.by else "cust:42")
    assert "parkedAt" not in records[0]
    if mode in ("replace", "debounce"):
        assert records[0]["params"]["n"] in range(CALLS)
    assert all(isinstance(o, Scheduled | others) for o in outcomes)
