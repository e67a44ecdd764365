"""The fleet controls on the real mongod, beyond the contract suite: the stored documents of
pauses, slots, rate windows and leases (their ``_id``, fields and BSON types), the indexes of
the controls collection (the TTL on ``purgeAt``), a lapsed slot or lease taken over, and the
races: many tasks of the async store and many threads of the sync store hitting
``acquire_slot``, ``take_rate_token`` and ``acquire_lease`` at once never get more than the
limit, and the fencing tokens only grow.

Times are in 2100 (a virtual ``now`` handed to the store), so the TTL never removes what a
test wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import pytest
from pymongo import MongoClient

from dogs_core.domain.controls import EVERY_JOB, Lease, rate_window
from dogs_core.errors import InvalidOptionError, TransientStoreError
from dogs_mongo import AsyncMongoJobStore, MongoJobStore
from dogs_mongo import queries as q
from dogs_mongo.settings import DogsSettings

pytestmark = [pytest.mark.mongo]

T0 = datetime(2100, 1, 1, tzinfo=UTC)
_S = timedelta(seconds=1)
_MIN = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
APP_NAME = "dogs-controls-test"

Document = dict[str, Any]
T = TypeVar("T")


def _types(store: MongoJobStore, document_id: Document) -> Document:
    """The BSON type name of each field of a controls document."""
    pipeline: list[Document] = [
        {"$match": {"_id": document_id}},
        {"$project": {"types": {"$arrayToObject": {"$map": {
            "input": {"$objectToArray": "$$ROOT"},
            "in": {"k": "$$this.k", "v": {"$type": "$$this.v"}},
        }}}}},
    ]  # fmt: skip
    rows = list(store.controls_collection.aggregate(pipeline))
    assert len(rows) == 1
    types: Document = rows[0]["types"]
    return types


def _at_once(count: int, call: Callable[[int], T]) -> list[T]:
    """``call(0) .. call(count - 1)`` in ``count`` threads released together."""
    barrier = threading.Barrier(count)

    def run(index: int) -> T:
        barrier.wait()
        return call(index)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


# ----------------------------------------------------------------------------------------------
# Setup, settings
# ----------------------------------------------------------------------------------------------


def test_setup_creates_the_ttl_and_the_kind_index(sync_store: MongoJobStore) -> None:
    indexes = sync_store.controls_collection.index_information()
    assert indexes[q.CONTROLS_PURGE_INDEX_NAME]["key"] == [("purgeAt", 1)]
    assert indexes[q.CONTROLS_PURGE_INDEX_NAME]["expireAfterSeconds"] == 0
    assert indexes[q.CONTROLS_KIND_INDEX_NAME]["key"] == [("kind", 1), ("jobName", 1)]
    assert set(indexes) == {"_id_", q.CONTROLS_PURGE_INDEX_NAME, q.CONTROLS_KIND_INDEX_NAME}
    assert (
        sync_store.controls_collection.name
        == q.DEFAULT_CONTROLS_COLLECTION
        == ("orionjs.jobs_dogs_controls")
    )


def test_the_controls_collection_is_a_setting(
    sync_mongo_client: MongoClient[Document], mongo_database_name: str
) -> None:
    settings = DogsSettings.from_config({"controls_collection": "my_controls"})
    assert settings.store_kwargs()["controls_collection"] == "my_controls"
    store = MongoJobStore(sync_mongo_client, mongo_database_name, **settings.store_kwargs())
    store.setup()
    assert store.set_paused("echo", True, now=T0)
    database = sync_mongo_client[mongo_database_name]
    assert database["my_controls"].count_documents({"kind": "pause"}) == 1
    assert q.CONTROLS_PURGE_INDEX_NAME in database["my_controls"].index_information()
    with pytest.raises(InvalidOptionError, match="controls_collection"):
        DogsSettings.from_config({"controls_collection": "system.x"})


def test_controls_leave_the_records_and_the_history_alone(sync_store: MongoJobStore) -> None:
    """What a Node Dogs worker reads is not touched: every control lives in its own collection."""
    sync_store.set_paused("echo", True, now=T0)
    sync_store.acquire_slot("echo", "", limit=2, holder="h", until=T0 + _MIN, now=T0)
    start, end = rate_window(T0, _MIN)
    sync_store.take_rate_token("echo", "", limit=2, window_start=start, window_end=end)
    sync_store.acquire_lease("nightly", owner="o", until=T0 + _MIN, now=T0)
    assert sync_store.records_collection.estimated_document_count() == 0
    assert sync_store.history_collection.estimated_document_count() == 0


# ----------------------------------------------------------------------------------------------
# Pauses
# ----------------------------------------------------------------------------------------------


def test_a_pause_is_one_document_and_resume_deletes_it(sync_store: MongoJobStore) -> None:
    assert sync_store.paused_names() == frozenset()
    assert sync_store.set_paused("echo", True, now=T0 + timedelta(microseconds=1500))
    assert not sync_store.set_paused("echo", True, now=T0 + _S)  # paused already
    assert sync_store.set_paused(EVERY_JOB, True, now=T0)
    assert sync_store.paused_names() == frozenset({"echo", EVERY_JOB})
    document = sync_store.controls_collection.find_one({"_id": {"pause": "echo"}})
    assert document == {
        "_id": {"pause": "echo"},
        "kind": "pause",
        "jobName": "echo",
        "pausedAt": T0 + timedelta(milliseconds=1),  # the first pause's, in milliseconds
    }
    assert _types(sync_store, {"pause": "echo"})["pausedAt"] == "date"
    assert sync_store.set_paused("echo", False, now=T0)
    assert not sync_store.set_paused("echo", False, now=T0)  # not paused
    assert sync_store.paused_names() == frozenset({EVERY_JOB})


def test_paused_names_reads_only_the_kind_index(sync_store: MongoJobStore) -> None:
    sync_store.set_paused("echo", True, now=T0)
    explain = sync_store.controls_collection.find(
        dict(q.PAUSED_NAMES_FILTER), dict(q.PAUSED_NAMES_PROJECTION)
    ).explain()
    plan = str(explain["queryPlanner"]["winningPlan"])
    assert q.CONTROLS_KIND_INDEX_NAME in plan
    assert "COLLSCAN" not in plan
    assert "FETCH" not in plan


def test_bad_arguments_are_refused_before_anything_is_sent(sync_store: MongoJobStore) -> None:
    with pytest.raises(InvalidOptionError, match="job_name"):
        sync_store.set_paused("", True, now=T0)
    with pytest.raises(InvalidOptionError, match="paused"):
        sync_store.set_paused("echo", 1, now=T0)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="limit"):
        sync_store.acquire_slot("echo", "", limit=0, holder="h", until=T0, now=T0)
    with pytest.raises(InvalidOptionError, match="key"):
        sync_store.acquire_slot("echo", 7, limit=1, holder="h", until=T0, now=T0)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="index"):
        sync_store.renew_slot("echo", "", -1, holder="h", until=T0)
    with pytest.raises(InvalidOptionError, match="window_end"):
        sync_store.take_rate_token("echo", "", limit=1, window_start=T0, window_end=T0)
    with pytest.raises(InvalidOptionError, match="owner"):
        sync_store.acquire_lease("nightly", owner="", until=T0, now=T0)
    with pytest.raises(InvalidOptionError, match="token"):
        sync_store.release_lease("nightly", owner="o", token=0)
    assert sync_store.controls_collection.estimated_document_count() == 0


# ----------------------------------------------------------------------------------------------
# Slots
# ----------------------------------------------------------------------------------------------


def test_slots_are_created_on_demand_and_stored_as_the_spec_says(
    sync_store: MongoJobStore,
) -> None:
    until = T0 + _MIN
    index = sync_store.acquire_slot("echo", "acct-1", limit=3, holder="h1", until=until, now=T0)
    assert index in (0, 1, 2)
    documents = {
        document["i"]: document
        for document in sync_store.controls_collection.find({"kind": "slot"})
    }
    assert sorted(documents) == [0, 1, 2]
    assert documents[index] == {
        "_id": {"slot": "echo", "key": "acct-1", "i": index},
        "kind": "slot",
        "jobName": "echo",
        "key": "acct-1",
        "i": index,
        "holder": "h1",
        "until": until,
        "purgeAt": until + timedelta(days=1),
    }
    free = documents[(index + 1) % 3]
    assert (free["holder"], free["until"], free["purgeAt"]) == (
        None,
        _EPOCH,
        T0 + timedelta(days=1),
    )
    types = _types(sync_store, {"slot": "echo", "key": "acct-1", "i": index})
    assert types == {
        "_id": "object",
        "kind": "string",
        "jobName": "string",
        "key": "string",
        "i": "int",
        "holder": "string",
        "until": "date",
        "purgeAt": "date",
    }


def test_slots_up_to_the_limit_then_none(sync_store: MongoJobStore) -> None:
    until = T0 + _MIN
    taken = [
        sync_store.acquire_slot("echo", "", limit=3, holder=f"h{i}", until=until, now=T0)
        for i in range(4)
    ]
    assert sorted(taken[:3]) == [0, 1, 2]  # type: ignore[type-var]
    assert taken[3] is None
    # Another key, another job name: slots of their own.
    assert sync_store.acquire_slot("echo", "k", limit=1, holder="x", until=until, now=T0) == 0
    assert sync_store.acquire_slot("tick", "", limit=1, holder="y", until=until, now=T0) == 0
    assert sync_store.held_slots(now=T0) == {"echo": 4, "tick": 1}
    assert sync_store.held_slots(now=until) == {}  # lapsed: until <= now is not held


def test_taking_a_slot_again_returns_the_one_held(sync_store: MongoJobStore) -> None:
    """Also when a slot of a lower index (the first in ``_id`` order) is free."""
    for holder in ("a", "b", "c"):
        sync_store.acquire_slot("echo", "", limit=5, holder=holder, until=T0 + _MIN, now=T0)
    held = {
        document["holder"]: document["i"]
        for document in sync_store.controls_collection.find({"holder": {"$ne": None}})
    }
    assert sync_store.release_slot("echo", "", held["a"], holder="a")
    assert sync_store.release_slot("echo", "", held["b"], holder="b")
    for _ in range(3):  # free slots are there, but the one held wins
        again = sync_store.acquire_slot(
            "echo", "", limit=5, holder="c", until=T0 + 2 * _MIN, now=T0 + _S
        )
        assert again == held["c"]
    assert sync_store.held_slots(now=T0 + _S) == {"echo": 1}
    assert sync_store.renew_slot("echo", "", held["c"], holder="c", until=T0 + 3 * _MIN)


def test_a_lapsed_slot_is_taken_over_and_its_old_holder_is_fenced_off(
    sync_store: MongoJobStore,
) -> None:
    until = T0 + _MIN
    assert sync_store.acquire_slot("echo", "", limit=1, holder="dead", until=until, now=T0) == 0
    assert sync_store.acquire_slot("echo", "", limit=1, holder="b", until=until, now=T0) is None
    # At its until, the slot is free again (a crashed worker's lock has expired).
    assert (
        sync_store.acquire_slot("echo", "", limit=1, holder="b", until=until + _MIN, now=until) == 0
    )
    assert not sync_store.renew_slot("echo", "", 0, holder="dead", until=until + _MIN)
    assert not sync_store.release_slot("echo", "", 0, holder="dead")
    document = sync_store.controls_collection.find_one({"_id": q.slot_id("echo", "", 0)})
    assert document is not None
    assert document["holder"] == "b"


def test_renew_and_release_are_fenced_by_the_holder(sync_store: MongoJobStore) -> None:
    index = sync_store.acquire_slot("echo", "", limit=1, holder="h", until=T0 + _MIN, now=T0)
    assert index == 0
    later = T0 + 10 * _MIN
    assert sync_store.renew_slot("echo", "", 0, holder="h", until=later)
    assert sync_store.renew_slot("echo", "", 0, holder="h", until=later)  # the same until: held
    assert sync_store.held_slots(now=T0 + 5 * _MIN) == {"echo": 1}
    document = sync_store.controls_collection.find_one({"_id": q.slot_id("echo", "", 0)})
    assert document is not None
    assert (document["until"], document["purgeAt"]) == (later, later + timedelta(days=1))
    assert not sync_store.renew_slot("echo", "", 0, holder="other", until=later)
    assert not sync_store.release_slot("echo", "", 0, holder="other")
    assert not sync_store.renew_slot("echo", "", 1, holder="h", until=later)  # no such slot
    assert sync_store.release_slot("echo", "", 0, holder="h")
    assert not sync_store.release_slot("echo", "", 0, holder="h")  # nobody holds it now
    assert not sync_store.renew_slot("echo", "", 0, holder="h", until=later)
    assert sync_store.held_slots(now=T0) == {}
    document = sync_store.controls_collection.find_one({"_id": q.slot_id("echo", "", 0)})
    assert document is not None
    assert (document["holder"], document["until"]) == (None, _EPOCH)
    assert document["purgeAt"] == later + timedelta(days=1)  # forgotten a day after its time
    assert sync_store.acquire_slot("echo", "", limit=1, holder="n", until=later, now=T0) == 0


def test_a_lowered_limit_never_hands_out_a_larger_index(sync_store: MongoJobStore) -> None:
    until = T0 + _MIN
    for i in range(4):
        sync_store.acquire_slot("echo", "", limit=4, holder=f"h{i}", until=until, now=T0)
    for i in range(4):
        document = sync_store.controls_collection.find_one({"holder": f"h{i}"})
        assert document is not None
        sync_store.release_slot("echo", "", document["i"], holder=f"h{i}")
    taken = {
        sync_store.acquire_slot("echo", "", limit=2, holder=f"n{i}", until=until, now=T0)
        for i in range(3)
    }
    assert taken == {0, 1, None}


def test_a_raised_limit_creates_the_new_slots(sync_store: MongoJobStore) -> None:
    until = T0 + _MIN
    assert sync_store.acquire_slot("echo", "", limit=1, holder="a", until=until, now=T0) == 0
    assert sync_store.acquire_slot("echo", "", limit=1, holder="b", until=until, now=T0) is None
    assert sync_store.acquire_slot("echo", "", limit=3, holder="b", until=until, now=T0) in (1, 2)
    assert sync_store.controls_collection.count_documents({"kind": "slot"}) == 3


# ----------------------------------------------------------------------------------------------
# Rate windows
# ----------------------------------------------------------------------------------------------


def test_rate_tokens_up_to_the_limit_per_window_and_key(sync_store: MongoJobStore) -> None:
    start, end = rate_window(T0 + 90 * _S, _MIN)
    assert (start, end) == (T0 + _MIN, T0 + 2 * _MIN)
    taken = [
        sync_store.take_rate_token("echo", "", limit=3, window_start=start, window_end=end)
        for _ in range(5)
    ]
    assert taken == [True, True, True, False, False]
    assert sync_store.take_rate_token("echo", "k", limit=3, window_start=start, window_end=end)
    assert sync_store.take_rate_token(
        "echo", "", limit=3, window_start=end, window_end=end + _MIN
    )  # the next window
    assert sync_store.take_rate_token(
        "echo", "", limit=4, window_start=start, window_end=end
    )  # a raised limit
    document = sync_store.controls_collection.find_one({"_id": q.rate_id("echo", "", start)})
    assert document == {
        "_id": {"rate": "echo", "key": "", "w": start},
        "count": 4,
        "kind": "rate",
        "jobName": "echo",
        "key": "",
        "purgeAt": end + timedelta(days=1),
    }
    types = _types(sync_store, {"rate": "echo", "key": "", "w": start})
    assert (types["count"], types["purgeAt"]) == ("int", "date")
    assert sync_store.held_slots(now=start) == {}


# ----------------------------------------------------------------------------------------------
# Leases
# ----------------------------------------------------------------------------------------------


def test_a_lease_is_held_once_and_its_token_grows(sync_store: MongoJobStore) -> None:
    until = T0 + _MIN
    assert sync_store.get_lease("nightly") is None
    assert sync_store.acquire_lease("nightly", owner="a", until=until, now=T0) == 1
    assert sync_store.acquire_lease("nightly", owner="b", until=until, now=T0) is None
    assert sync_store.acquire_lease("nightly", owner="a", until=until, now=T0) is None  # no reentry
    assert sync_store.get_lease("nightly") == Lease("nightly", "a", 1, until)
    assert _types(sync_store, {"lease": "nightly"}) == {
        "_id": "object",
        "kind": "string",
        "owner": "string",
        "until": "date",
        "token": "long",
    }
    assert sync_store.release_lease("nightly", owner="a", token=1)
    assert not sync_store.release_lease("nightly", owner="a", token=1)
    assert sync_store.get_lease("nightly") is None
    assert sync_store.acquire_lease("nightly", owner="b", until=until, now=T0) == 2
    assert sync_store.acquire_lease("other", owner="b", until=until, now=T0) == 1
    document = sync_store.controls_collection.find_one({"_id": {"lease": "nightly"}})
    assert document is not None
    assert "purgeAt" not in document


def test_a_lapsed_lease_is_taken_over_and_fences_its_old_owner(sync_store: MongoJobStore) -> None:
    until = T0 + _MIN
    assert sync_store.acquire_lease("nightly", owner="a", until=until, now=T0) == 1
    assert sync_store.renew_lease("nightly", owner="a", token=1, until=until + _S, now=T0)
    assert not sync_store.renew_lease(
        "nightly", owner="a", token=1, until=until + _MIN, now=until + _S
    )  # lapsed at now: not renewed, even though nobody took it yet
    assert sync_store.acquire_lease("nightly", owner="b", until=until, now=until) is None
    assert sync_store.acquire_lease("nightly", owner="b", until=until + _MIN, now=until + _S) == 2
    assert sync_store.get_lease("nightly") == Lease("nightly", "b", 2, until + _MIN)
    assert not sync_store.renew_lease("nightly", owner="a", token=1, until=until, now=T0)
    assert not sync_store.release_lease("nightly", owner="a", token=1)
    assert not sync_store.release_lease("nightly", owner="b", token=1)  # token fences too
    assert sync_store.release_lease("nightly", owner="b", token=2)


def test_get_lease_returns_a_lapsed_lease_as_stored(sync_store: MongoJobStore) -> None:
    sync_store.acquire_lease("nightly", owner="a", until=T0 + timedelta(microseconds=2999), now=T0)
    assert sync_store.get_lease("nightly") == Lease(
        "nightly", "a", 1, T0 + timedelta(milliseconds=2)
    )


# ----------------------------------------------------------------------------------------------
# Races: threads of the sync store
# ----------------------------------------------------------------------------------------------

_RACERS = 24


def _slot_taker(
    store: MongoJobStore, job_name: str, key: str, *, limit: int, prefix: str
) -> Callable[[int], int | None]:
    """Racer ``i`` takes a slot for ``f"{prefix}{i}"`` at ``T0`` for a minute."""

    def take(i: int) -> int | None:
        return store.acquire_slot(
            job_name, key, limit=limit, holder=f"{prefix}{i}", until=T0 + _MIN, now=T0
        )

    return take


def _token_taker(
    store: MongoJobStore, *, limit: int, window_start: datetime
) -> Callable[[int], bool]:
    def take(_i: int) -> bool:
        return store.take_rate_token(
            "echo", "", limit=limit, window_start=window_start, window_end=window_start + _MIN
        )

    return take


def _lease_taker(
    store: MongoJobStore, *, prefix: str, now: datetime
) -> Callable[[int], int | None]:
    def take(i: int) -> int | None:
        return store.acquire_lease("nightly", owner=f"{prefix}{i}", until=now + _MIN, now=now)

    return take


@pytest.mark.parametrize("limit", [1, 5])
def test_threads_racing_for_slots_never_get_more_than_the_limit(
    sync_store: MongoJobStore, limit: int
) -> None:
    """Fresh slots (created by the racers themselves), then slots freed and taken again."""
    for round_ in range(3):
        got = _at_once(
            _RACERS,
            _slot_taker(sync_store, "echo", "", limit=limit, prefix=f"r{round_}-"),
        )
        won = [(i, index) for i, index in enumerate(got) if index is not None]
        assert sorted(index for _, index in won) == list(range(limit))
        assert sync_store.held_slots(now=T0) == {"echo": limit}
        for i, index in won:
            assert sync_store.release_slot("echo", "", index, holder=f"r{round_}-{i}")
    assert sync_store.controls_collection.count_documents({"kind": "slot"}) == limit


def test_threads_racing_for_lapsed_slots_take_each_once(sync_store: MongoJobStore) -> None:
    for i in range(3):
        sync_store.acquire_slot("echo", "", limit=3, holder=f"dead{i}", until=T0, now=T0 - _S)
    got = _at_once(
        _RACERS,
        _slot_taker(sync_store, "echo", "", limit=3, prefix="r"),
    )
    assert sorted(index for index in got if index is not None) == [0, 1, 2]


def test_threads_racing_for_rate_tokens_take_exactly_the_limit(sync_store: MongoJobStore) -> None:
    """The first tokens of a window race to create its counter: a duplicate key then is not
    always a full window (another racer's insert won between this upsert's query and its
    insert; a few windows in a hundred), so exactly ``limit`` calls win in every window."""
    start, _ = rate_window(T0, _MIN)
    for round_ in range(40):
        limit = 1 + round_ % 8
        window = start + round_ * _MIN  # a fresh window each time
        got = _at_once(
            _RACERS,
            _token_taker(sync_store, limit=limit, window_start=window),
        )
        assert got.count(True) == limit
        document = sync_store.controls_collection.find_one({"_id": q.rate_id("echo", "", window)})
        assert document is not None
        assert document["count"] == limit


def test_threads_racing_for_a_lease_one_wins_and_tokens_grow(sync_store: MongoJobStore) -> None:
    tokens: list[int] = []
    now = T0
    for round_ in range(6):
        got = _at_once(
            _RACERS,
            _lease_taker(sync_store, prefix=f"r{round_}-", now=now),
        )
        winners = [(i, token) for i, token in enumerate(got) if token is not None]
        assert len(winners) == 1
        i, token = winners[0]
        tokens.append(token)
        if round_ % 2:  # released, or left to lapse
            assert sync_store.release_lease("nightly", owner=f"r{round_}-{i}", token=token)
        else:
            now += _MIN
    assert tokens == list(range(1, 7))


# ----------------------------------------------------------------------------------------------
# Races: tasks of the async store
# ----------------------------------------------------------------------------------------------


async def _gather(count: int, call: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    async def run(index: int) -> None:
        results[index] = await call(index)

    async with anyio.create_task_group() as group:
        for index in range(count):
            group.start_soon(run, index)
    return results


def _async_slot_taker(store: AsyncMongoJobStore, key: str) -> Callable[[int], Any]:
    async def take(i: int) -> int | None:
        return await store.acquire_slot(
            "echo", key, limit=4, holder=f"{key}{i}", until=T0 + _MIN, now=T0
        )

    return take


@pytest.mark.anyio
async def test_tasks_racing_for_slots_never_get_more_than_the_limit(
    async_store: AsyncMongoJobStore,
) -> None:
    for key in ("a", "b"):
        got = await _gather(
            40,
            _async_slot_taker(async_store, key),
        )
        assert sorted(index for index in got if index is not None) == [0, 1, 2, 3]
    assert await async_store.held_slots(now=T0) == {"echo": 8}


@pytest.mark.anyio
async def test_tasks_racing_for_rate_tokens_take_exactly_the_limit(
    async_store: AsyncMongoJobStore,
) -> None:
    start, end = rate_window(T0, _MIN)
    got = await _gather(
        40,
        lambda _i: async_store.take_rate_token(
            "echo", "", limit=9, window_start=start, window_end=end
        ),
    )
    assert got.count(True) == 9


@pytest.mark.anyio
async def test_tasks_racing_for_a_lease_get_strictly_increasing_tokens(
    async_store: AsyncMongoJobStore,
) -> None:
    """Every task loops: acquire (when free), check it is the only owner, release. Each
    acquisition's token is one more than the one before, whoever won it."""
    tokens: list[int] = []
    owners: set[str] = set()

    async def contend(i: int) -> None:
        wins = 0
        while wins < 2:
            token = await async_store.acquire_lease(
                "nightly", owner=f"t{i}", until=T0 + _MIN, now=T0
            )
            if token is None:
                await anyio.lowlevel.checkpoint()
                continue
            owners.add(f"t{i}")
            assert owners == {f"t{i}"}  # nobody else holds it meanwhile
            tokens.append(token)
            await anyio.lowlevel.checkpoint()
            owners.discard(f"t{i}")
            assert await async_store.release_lease("nightly", owner=f"t{i}", token=token)
            wins += 1

    await _gather(10, contend)
    assert tokens == list(range(1, 21))


@pytest.mark.anyio
async def test_the_async_store_controls_as_the_sync_one(async_store: AsyncMongoJobStore) -> None:
    assert await async_store.set_paused("echo", True, now=T0)
    assert await async_store.paused_names() == frozenset({"echo"})
    assert await async_store.set_paused("echo", False, now=T0)
    index = await async_store.acquire_slot("echo", "", limit=1, holder="h", until=T0 + _MIN, now=T0)
    assert index == 0
    assert await async_store.renew_slot("echo", "", 0, holder="h", until=T0 + 2 * _MIN)
    assert await async_store.held_slots(now=T0) == {"echo": 1}
    assert await async_store.release_slot("echo", "", 0, holder="h")
    assert await async_store.take_rate_token(
        "echo", "", limit=1, window_start=T0, window_end=T0 + _MIN
    )
    assert not await async_store.take_rate_token(
        "echo", "", limit=1, window_start=T0, window_end=T0 + _MIN
    )
    assert await async_store.acquire_lease("l", owner="o", until=T0 + _MIN, now=T0) == 1
    assert await async_store.renew_lease("l", owner="o", token=1, until=T0 + 2 * _MIN, now=T0)
    assert await async_store.get_lease("l") == Lease("l", "o", 1, T0 + 2 * _MIN)
    assert await async_store.release_lease("l", owner="o", token=1)


# ----------------------------------------------------------------------------------------------
# Transient errors
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def own_client(mongodb_uri: str) -> Iterator[MongoClient[Document]]:
    """A client of its own (``appName``), so that a fail point can target it alone."""
    client: MongoClient[Document] = MongoClient(mongodb_uri, tz_aware=True, appname=APP_NAME)
    yield client
    client.close()


@pytest.fixture
def fail_point(sync_mongo_client: MongoClient[Document]) -> Iterator[Callable[..., None]]:
    """Fails the next ``times`` of ``commands`` of :data:`APP_NAME`'s client with
    ``ExceededTimeLimit`` (262: retryable, so the driver's one retry fails too)."""

    def arm(commands: list[str], *, times: int = 2) -> None:
        sync_mongo_client.admin.command(
            "configureFailPoint",
            "failCommand",
            mode={"times": times},
            data={"failCommands": commands, "errorCode": 262, "appName": APP_NAME},
        )

    yield arm
    sync_mongo_client.admin.command("configureFailPoint", "failCommand", mode="off")


def test_transient_errors_are_transient_store_errors(
    own_client: MongoClient[Document],
    mongo_database_name: str,
    fail_point: Callable[..., None],
) -> None:
    store = MongoJobStore(own_client, mongo_database_name)
    store.setup()
    calls: list[tuple[str, Callable[[], object], bool]] = [
        ("insert", lambda: store.set_paused("echo", True, now=T0), True),
        ("find", store.paused_names, False),
        (
            "findAndModify",
            lambda: store.acquire_slot("echo", "", limit=1, holder="h", until=T0, now=T0),
            True,
        ),
        ("aggregate", lambda: store.held_slots(now=T0), False),
        (
            "update",
            lambda: store.take_rate_token(
                "echo", "", limit=1, window_start=T0, window_end=T0 + _MIN
            ),
            True,
        ),
        ("findAndModify", lambda: store.acquire_lease("l", owner="o", until=T0, now=T0), True),
    ]
    for command, call, write in calls:
        fail_point([command])
        with pytest.raises(TransientStoreError) as caught:
            call()
        assert caught.value.write_may_have_applied is write, command
    assert store.controls_collection.estimated_document_count() == 0


def test_a_fresh_limit_whose_slots_cannot_be_created_raises(
    own_client: MongoClient[Document],
    mongo_database_name: str,
    fail_point: Callable[..., None],
) -> None:
    store = MongoJobStore(own_client, mongo_database_name)
    store.setup()
    fail_point(["update"])
    with pytest.raises(TransientStoreError):
        store.acquire_slot("echo", "", limit=2, holder="h", until=T0 + _MIN, now=T0)
    assert store.acquire_slot("echo", "", limit=2, holder="h", until=T0 + _MIN, now=T0) in (0, 1)
