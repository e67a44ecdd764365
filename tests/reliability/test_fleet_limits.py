"""The fleet controls hold across processes on the real mongod: 4 worker processes
(``fleet_worker.py``, ``workers_count=32`` each) share one database and these jobs:

- ``limited`` (``global_concurrency=5``, handlers sleeping 5-30 ms): from the history rows'
  ``started_at``/``ended_at``, at no instant do more than 5 executions overlap;
- ``keyed`` (``global_concurrency=2`` per key of 3): at most 2 per key at any instant;
- ``rated`` (``rate_limit=(10, 500 ms)``): at most 10 starts per fixed window. A start belongs
  to the window its token was counted in, which each process logs with the execution that got
  it; the row's ``started_at`` comes a moment later and may fall past the window's end, so the
  windows are those of the tokens, joined to the rows by execution id;
- a lease taken again and again by two tasks per process (one waiting for it, one trying once
  and backing off): the holdings (logged from acquired to released) never overlap, the fencing
  tokens strictly increase in that order, and every holder's fenced write is accepted;
- ``pausable`` (jobs falling due every 40 ms): paused, then resumed; no execution starts once
  the pause has reached every process (one poll interval, plus a generous allowance for a claim
  in flight) until it is resumed.

Every job runs exactly once, on its first try (a refusal gives the try back). The assertions are
the invariants only: no durations are asserted.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pymongo import AsyncMongoClient

from dogs_core import DogsClient, HistoryRecord, HistoryStatus, ScheduleItem
from dogs_core.domain.controls import rate_window
from dogs_mongo import AsyncMongoJobStore
from tests.reliability import fleet_worker as fw
from tests.reliability.children import ChildProcess

WORKER = Path(__file__).with_name("fleet_worker.py")
PROCESSES = 4
WORKERS_COUNT = 32
LEASE_ROUNDS = 8  # per task; two tasks per process
LIMITED_JOBS = 240
KEYS = ("a", "b", "c")
KEYED_JOBS = 60
RATED_JOBS = 45
PAUSABLE_JOBS = 150
PAUSABLE_EVERY = timedelta(milliseconds=40)
PAUSE_AFTER = 1.5  # seconds after the pausable jobs start falling due
PAUSE_FOR = 3.0
#: When a pause holds everywhere: each process reads the pauses every poll interval; a claim
#: already in flight may still start a job, a moment later. One second is far above both.
PAUSE_REACHES_ALL = fw.POLL_INTERVAL + 1.0
DONE_TIMEOUT = 60.0

pytestmark = [pytest.mark.mongo, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _worker(uri: str, database: str) -> ChildProcess:
    """A ``fleet_worker.py`` child; stopped with SIGTERM (killed if it hangs) and reaped."""
    options = ["--workers", str(WORKERS_COUNT), "--lease-rounds", str(LEASE_ROUNDS)]
    return ChildProcess([sys.executable, str(WORKER), uri, database, *options])


@contextmanager
def fleet(uri: str, database: str) -> Iterator[list[ChildProcess]]:
    with ExitStack() as stack:
        processes = []
        for _ in range(PROCESSES):
            process = _worker(uri, database)
            stack.callback(process.terminate)
            processes.append(process)
        for process in processes:
            process.wait_ready()
        yield processes


# -- the invariants ------------------------------------------------------------------------------


def most_at_once(rows: Sequence[HistoryRecord]) -> int:
    """The largest number of ``[started_at, ended_at)`` intervals that overlap at one instant
    (an end and a start at the same millisecond do not overlap)."""
    events = sorted(
        [(row.started_at, 1) for row in rows] + [(row.ended_at, -1) for row in rows],
        key=lambda event: (event[0], event[1]),
    )
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def check_ran_once(rows: Sequence[HistoryRecord], ids: Sequence[str]) -> None:
    assert sorted(row.job_id for row in rows) == sorted(ids), "every job ran exactly once"
    assert {row.status for row in rows} == {HistoryStatus.SUCCESS}
    assert {row.tries for row in rows} == {1}, "a refused job's try was given back"


def check_rate(
    rows: Sequence[HistoryRecord], tokens: Sequence[dict[str, Any]]
) -> tuple[Counter[datetime], int]:
    """At most ``RATE`` tokens granted per window across the processes, every start one of
    them, at most ``RATE`` starts per window. Returns the starts per window, and how many
    started after their token's window had ended (admitted at its end, started a round trip
    later: counted by ``started_at`` alone, they would land in the next window)."""
    granted = [token for token in tokens if token["granted"]]
    per_window = Counter(token["window_start"] for token in granted)
    assert max(per_window.values()) <= fw.RATE, per_window
    window_of = {token["execution_id"]: token["window_start"] for token in granted}
    assert len(window_of) == len(granted), "one token per execution"
    starts: Counter[datetime] = Counter()
    late = 0
    for row in rows:
        window = window_of.get(row.execution_id)
        assert window is not None, f"execution {row.execution_id} started without a token"
        assert row.started_at >= window, "started after its token was counted"
        starts[window] += 1
        late += row.started_at >= window + fw.RATE_PERIOD
    assert max(starts.values()) <= fw.RATE, starts
    return starts, late


def check_leases(holdings: Sequence[dict[str, Any]]) -> None:
    assert len(holdings) == PROCESSES * 2 * LEASE_ROUNDS
    assert not [h for h in holdings if h["lost"]], "no holder lost the lease"
    ordered = sorted(holdings, key=lambda h: h["acquired"])
    for before, after in itertools.pairwise(ordered):
        assert after["acquired"] >= before["released"], ("two holders at once", before, after)
        assert after["token"] > before["token"], ("tokens go back", before, after)
    assert all(h["fenced"] for h in holdings), "every holder's fenced write was accepted"
    assert len({h["pid"] for h in holdings}) == PROCESSES


def check_pause(rows: Sequence[HistoryRecord], paused_at: datetime, resumed_at: datetime) -> int:
    """No start from the moment the pause holds everywhere until the resume; returns how many
    started between the pause and that moment."""
    held_from = paused_at + timedelta(seconds=PAUSE_REACHES_ALL)
    during = [row for row in rows if held_from <= row.started_at < resumed_at]
    assert during == [], f"{len(during)} executions started while paused"
    return sum(1 for row in rows if paused_at <= row.started_at < held_from)


# -- the run ---------------------------------------------------------------------------------------


async def schedule(client: DogsClient, name: str, items: Sequence[ScheduleItem]) -> list[str]:
    outcome = await client.schedule_many(name, list(items))
    assert outcome.scheduled_count == len(items), outcome
    return [getattr(item, "id") for item in outcome.outcomes]  # noqa: B009


async def wait_until_done(
    database: Any, store: AsyncMongoJobStore, processes: Sequence[ChildProcess]
) -> None:
    records = store.records_collection
    leases_done = {"lease_done": True}

    async def done() -> bool:
        if await records.count_documents({}) > 0:
            return False
        finished: int = await database[fw.LEASE_LOG].count_documents(leases_done)
        return finished == PROCESSES * 2

    with anyio.move_on_after(DONE_TIMEOUT) as scope:
        while not await done():  # noqa: ASYNC110 - polls the database
            await anyio.sleep(0.1)
    if scope.cancel_called:
        left = await records.count_documents({})
        raise AssertionError(
            f"timed out: {left} records left\n" + "\n".join(p.stderr() for p in processes)
        )


async def history(store: AsyncMongoJobStore, name: str) -> list[HistoryRecord]:
    return await store.read_history(name, limit=10_000)


async def test_limits_leases_and_pauses_hold_across_four_processes(
    async_mongo_client: AsyncMongoClient[dict[str, Any]],
    mongo_database_name: str,
    mongodb_uri: str,
) -> None:
    database = async_mongo_client[mongo_database_name]
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    client = DogsClient(store, fw.build_jobs())
    await database[fw.FENCE].insert_one({"_id": "fence", "token": 0})
    with fleet(mongodb_uri, mongo_database_name) as processes:
        await database[fw.SIGNALS].insert_one({"_id": "go"})  # the leases' contention starts
        limited = await schedule(
            client, fw.LIMITED, [ScheduleItem(params={"i": i}) for i in range(LIMITED_JOBS)]
        )
        keyed_items = [ScheduleItem(params={"k": KEYS[i % 3]}) for i in range(KEYED_JOBS)]
        keyed = await schedule(client, fw.KEYED, keyed_items)
        rated = await schedule(
            client, fw.RATED, [ScheduleItem(params={"i": i}) for i in range(RATED_JOBS)]
        )
        start = datetime.now(UTC)
        pausable_items = [
            ScheduleItem(params={"i": i}, run_at=start + i * PAUSABLE_EVERY)
            for i in range(PAUSABLE_JOBS)
        ]
        pausable = await schedule(client, fw.PAUSABLE, pausable_items)
        await anyio.sleep(PAUSE_AFTER)
        assert await client.pause(fw.PAUSABLE)
        paused_at = datetime.now(UTC)
        await anyio.sleep(PAUSE_FOR)
        resumed_at = datetime.now(UTC)
        assert await client.resume(fw.PAUSABLE)
        await wait_until_done(database, store, processes)

    limited_rows = await history(store, fw.LIMITED)
    check_ran_once(limited_rows, limited)
    assert most_at_once(limited_rows) <= fw.LIMIT

    keyed_rows = await history(store, fw.KEYED)
    check_ran_once(keyed_rows, keyed)
    by_key: dict[str, list[HistoryRecord]] = defaultdict(list)
    for row in keyed_rows:
        assert row.params is not None
        by_key[row.params["k"]].append(row)
    assert {key: most_at_once(rows) <= fw.KEY_LIMIT for key, rows in by_key.items()} == {
        key: True for key in KEYS
    }

    rated_rows = await history(store, fw.RATED)
    check_ran_once(rated_rows, rated)
    tokens = await database[fw.TOKEN_LOG].find({"job_name": fw.RATED}).to_list()
    starts, late = check_rate(rated_rows, tokens)
    by_start = Counter(rate_window(row.started_at, fw.RATE_PERIOD)[0] for row in rated_rows)

    holdings = await database[fw.LEASE_LOG].find({"token": {"$exists": True}}).to_list()
    check_leases(holdings)

    pausable_rows = await history(store, fw.PAUSABLE)
    check_ran_once(pausable_rows, pausable)
    reaching = check_pause(pausable_rows, paused_at, resumed_at)

    print(
        f"\nfleet limits, {PROCESSES} processes x {WORKERS_COUNT} workers: "
        f"{fw.LIMITED} at most {most_at_once(limited_rows)} at once (limit {fw.LIMIT}); "
        f"{fw.KEYED} at most {max(most_at_once(r) for r in by_key.values())} per key "
        f"(limit {fw.KEY_LIMIT}); {fw.RATED} {sorted(starts.values())} starts per window "
        f"(limit {fw.RATE}; {late} started past their token's window, at most "
        f"{max(by_start.values())} per window by started_at); lease tokens "
        f"1..{max(h['token'] for h in holdings)}, {len(holdings)} holdings, no overlap; "
        f"{reaching} {fw.PAUSABLE} starts while the pause was reaching every process, "
        "none after"
    )
