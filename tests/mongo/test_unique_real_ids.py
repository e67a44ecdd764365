"""Every id a unique schedule returns names something that exists, on the real mongod, with 32
concurrent callers (issue 40, "real ids").

The race found by the fault harness: a key's record ends (its window's hold is written, then the
record is removed) while calls of the key are between their first look at the hold and their
parked insert. One of them parks its record, its second look finds the window and drops the
record again; the others, whose insert found that parked record holding the key, were told
``Duplicate`` naming it: an id that never ran and exists nowhere.

The store wrapper below pins that interleaving down on the server (each step is still a real
single-document operation, from 32 concurrent tasks): the parked inserts wait until the record
has ended, and the winner's drop waits until the 31 others have read its parked record. Without
the fix (a parked holder skipped at first sight) the 31 outcomes name the dropped record.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dogs_core import Duplicate, Jobs, Scheduled, Unique
from dogs_core.domain.records import JobRecord, NewJob, ScheduleOutcome
from dogs_core.runtime import DogsClient, Workers
from dogs_mongo import AsyncMongoJobStore
from dogs_testing import JobStoreWrapper

pytestmark = [pytest.mark.mongo, pytest.mark.anyio]

CALLS = 32
KEY = "cust:42"
GUARD = 120  # seconds: a bound on waiting for a condition, never a measured duration

jobs = Jobs()


@jobs.event
async def sync_customer(params: dict[str, Any], ctx: object) -> None: ...


class Pinned(JobStoreWrapper):
    """Parked inserts wait for ``ended``; a drop of a parked record waits until every other
    call has read that record."""

    def __init__(self, inner: AsyncMongoJobStore) -> None:
        super().__init__(inner)
        self.parked_waiting = 0
        self.parked_reads = 0
        self.ended = anyio.Event()
        self.changed = anyio.Event()

    def _poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def _until(self, condition: Any) -> None:
        with anyio.fail_after(GUARD):
            while not condition():
                await self.changed.wait()

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        if method == "insert_job" and isinstance(args[0], NewJob) and args[0].parked_at:
            self.parked_waiting += 1
            self._poke()
            await self.ended.wait()
        if method == "drop_parked":
            await self._until(lambda: self.parked_reads >= CALLS - 1)
        result = await getattr(self.inner, method)(*args, **kwargs)
        if method == "get_record" and isinstance(result, JobRecord) and result.parked_at:
            self.parked_reads += 1
            self._poke()
        return result


async def _exists(store: AsyncMongoJobStore, job_id: str) -> bool:
    record = await store.records_collection.find_one({"_id": job_id})
    row = await store.history_collection.find_one({"jobId": job_id})
    return record is not None or row is not None


async def test_no_duplicate_names_a_parked_record_that_its_call_dropped(
    async_store: AsyncMongoJobStore,
) -> None:
    unique = Unique(KEY, period="1h")
    first = await DogsClient(async_store, jobs, clock_sync_interval=None).schedule(
        sync_customer, {"n": -1}, unique=unique
    )
    assert isinstance(first, Scheduled)
    pinned = Pinned(async_store)
    client = DogsClient(pinned, jobs, clock_sync_interval=None)
    outcomes: list[ScheduleOutcome] = []

    async def call(number: int) -> None:
        outcomes.append(await client.schedule(sync_customer, {"n": number}, unique=unique))

    async def record_ended() -> bool:
        gone = await async_store.records_collection.find_one({"_id": first.id}) is None
        return gone and await _exists(async_store, first.id)

    async with anyio.create_task_group() as group:
        for number in range(CALLS):
            group.start_soon(call, number)
        # Every call has looked at the key's hold (none yet) and waits to insert its record.
        await pinned._until(lambda: pinned.parked_waiting == CALLS)
        async with Workers(async_store, jobs, poll_interval=0.05, watch_changes=False) as workers:
            with anyio.fail_after(GUARD):
                while not await record_ended():  # noqa: ASYNC110 - the state is in the database
                    await anyio.sleep(0.05)
            await workers.stop()
        pinned.ended.set()
    assert len(outcomes) == CALLS
    for outcome in outcomes:
        named = outcome.existing_id if isinstance(outcome, Duplicate) else outcome.id
        assert named is not None
        assert await _exists(async_store, named), outcome
    assert all(isinstance(o, Duplicate) and o.existing_id == first.id for o in outcomes)
    assert await async_store.records_collection.count_documents({}) == 0


LOAD_MODES = {
    "window": Unique(KEY, period="1h"),
    "debounce": Unique(KEY, on_conflict="debounce", delay="100ms", max_wait="1s"),
    "throttle": Unique(KEY, on_conflict="throttle", period="1h"),
    "pending-only": Unique(KEY, states="pending"),
}


@pytest.mark.parametrize("mode", sorted(LOAD_MODES))
async def test_32_callers_on_keys_whose_records_run_get_only_real_ids(
    mode: str, async_store: AsyncMongoJobStore
) -> None:
    """The fault harness's run without the pins: 32 concurrent callers, 20 calls each over 8
    keys, while a worker runs (and ends) the keys' records; every id any call was given names
    a record or a history row afterwards."""
    base = LOAD_MODES[mode]
    client = DogsClient(async_store, jobs, clock_sync_interval=None)
    named: list[str] = []

    async def caller(number: int) -> None:
        for call in range(20):
            key = f"cust:{(number + call) % 8}"
            unique = Unique(
                key,
                period=base.period,
                states=None if mode == "throttle" else base.states,
                on_conflict=base.on_conflict,
                delay=base.delay,
                max_wait=base.max_wait,
            )
            outcome = await client.schedule(sync_customer, {"n": number}, unique=unique)
            one = outcome.existing_id if isinstance(outcome, Duplicate) else outcome.id
            assert one is not None, outcome
            named.append(one)

    async with Workers(async_store, jobs, workers_count=8, poll_interval=0.02) as workers:
        async with anyio.create_task_group() as group:
            for number in range(CALLS):
                group.start_soon(caller, number)
        await workers.stop()
    missing = [one for one in set(named) if not await _exists(async_store, one)]
    assert not missing, f"{len(missing)} id(s) name nothing: {missing[:3]}"
    if mode in ("window", "throttle"):
        runs = await async_store.history_collection.count_documents({"jobName": "sync_customer"})
        assert runs <= 8  # one run per key at most: the window (the period) holds it after
