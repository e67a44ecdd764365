"""The fault-injecting store's change feeds: each batch asked for is one call of the feed's
method for the plan; an error ends the feed, FEED_UNAVAILABLE plays a standalone server,
a disconnected store fails the next batch, delays follow the (virtual) clock."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.domain.records import NewJob
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import ChangeFeedUnavailableError, InvalidOptionError, TransientStoreError
from dogs_core.ids import new_record_id
from dogs_testing.faults import (
    FEED_METHODS,
    PORT_METHODS,
    FaultKind,
    FaultPlan,
    FaultRule,
    FaultyJobStore,
)
from dogs_testing.memory import InMemoryJobStore

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


def _job() -> NewJob:
    return NewJob(
        id=new_record_id(), job_name="a", params=None, next_run_at=NOW, priority=1, partition=0
    )


async def test_feeds_are_port_methods_a_plan_may_name() -> None:
    assert {"watch_records", "watch_history", "watch_pauses"} == FEED_METHODS
    assert FEED_METHODS <= PORT_METHODS


@pytest.mark.parametrize("method", sorted(FEED_METHODS))
async def test_feed_unavailable_at_the_first_batch(method: str) -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    store.fail_next(method, FaultKind.FEED_UNAVAILABLE)
    feeds: dict[str, Callable[[], AsyncGenerator[list[Any], None]]] = {
        "watch_records": lambda: store.watch_records(["a"]),
        "watch_history": store.watch_history,
        "watch_pauses": store.watch_pauses,
    }
    async with aclosing(feeds[method]()) as feed:
        with pytest.raises(ChangeFeedUnavailableError, match="injected"):
            await feed.__anext__()
    assert not inner.sync._feeds.watched  # the inner feed was never opened
    assert store.stats.count(method, FaultKind.FEED_UNAVAILABLE) == 1


async def test_a_transient_error_ends_the_feed_at_a_chosen_batch() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    store.fail_next("watch_records", FaultKind.ERROR_BEFORE, skip_calls=2)
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []  # open
        await store.insert_job(_job())
        assert await feed.__anext__() == [RecordChange("a", 0, NOW)]
        with pytest.raises(TransientStoreError) as caught:
            await feed.__anext__()
    assert not caught.value.write_may_have_applied
    assert not inner.sync._feeds.watched  # the inner feed was closed with it


async def test_error_after_loses_the_batch() -> None:
    store = FaultyJobStore(InMemoryJobStore())
    async with aclosing(store.watch_records(["a"])) as feed:
        assert await feed.__anext__() == []
        store.fail_next("watch_records", FaultKind.ERROR_AFTER)
        await store.insert_job(_job())
        with pytest.raises(TransientStoreError, match="lost a batch"):
            await feed.__anext__()


async def test_the_pause_feed_is_faulted_batch_by_batch() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    store.fail_next("watch_pauses", FaultKind.ERROR_BEFORE, skip_calls=2)
    async with aclosing(store.watch_pauses()) as feed:
        assert await feed.__anext__() == []  # open
        assert await store.set_paused("a", True, now=NOW)
        assert await feed.__anext__() == ["a"]
        with pytest.raises(TransientStoreError):
            await feed.__anext__()
    assert not inner.sync._feeds.watched
    assert store.stats.count("watch_pauses", FaultKind.ERROR_BEFORE) == 1


async def test_a_disconnected_store_fails_the_next_batch() -> None:
    store = FaultyJobStore(InMemoryJobStore())
    async with aclosing(store.watch_history()) as feed:
        assert await feed.__anext__() == []
        store.disconnect()
        with pytest.raises(TransientStoreError, match="disconnected"):
            await feed.__anext__()
    assert store.stats.count("watch_history", FaultKind.DISCONNECTED) == 1


async def test_delays_slow_each_batch_in_virtual_time() -> None:
    plan = FaultPlan(FaultRule(FaultKind.DELAY_BEFORE, frozenset({"watch_records"}), delay=5.0))
    store = FaultyJobStore(InMemoryJobStore(), plan)
    async with aclosing(store.watch_records(["a"])) as feed:
        start = anyio.current_time()
        assert await feed.__anext__() == []
        assert anyio.current_time() - start >= 5.0


async def test_feed_unavailable_rules_name_feeds_only() -> None:
    with pytest.raises(InvalidOptionError, match="FEED_UNAVAILABLE faults only feeds"):
        FaultRule(FaultKind.FEED_UNAVAILABLE, frozenset({"claim"}))
    rule = FaultRule(FaultKind.FEED_UNAVAILABLE)  # every method: only feeds get it
    assert rule.applies_to("watch_history")
    assert not rule.applies_to("claim")
    store = FaultyJobStore(InMemoryJobStore(), FaultPlan(rule))
    await store.insert_job(_job())  # not a feed: not faulted
