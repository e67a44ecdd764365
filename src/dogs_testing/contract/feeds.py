"""The contract suite, the feeds role: the change feeds (``watch_records``, ``watch_history``,
``watch_pauses``).

A feed is a notification: these tests check what must be reported (an insert after the feed
is open, a reschedule, a release, a history row as first written, a pause and a resume) and what
must not (another job name's insert, a lock renewal, a row's later writes, the rows other
filters exclude, a pause or resume that changed nothing, the other fleet controls), in
the order the store saw the writes (an insert also to a consumer that waived the heartbeats):
each test ends with a marker write and reads the feed up to it, so that nothing is asserted
about time. Every read is bounded by a generous safety
timeout (:data:`SAFETY_TIMEOUT`), which only turns a hang into a failure. The release tests use
the real current time (a MongoDB store recognises a release by ``lockedUntil`` not being in the
future of the server's clock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Final, TypeVar

import anyio
import pytest

from dogs_core.domain.controls import DEFAULT_KEY, EVERY_JOB
from dogs_core.domain.records import HistoryRecord, to_millis
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing.watching import without_heartbeats
from dogs_testing.contract.base import (
    _H,
    _MIN,
    _S,
    T0,
    ContractBase,
    _as_stored,
    _history,
    _job,
    _scheduled_id,
)
from dogs_testing.settling import released, rescheduled, settle_one

__all__ = ["SAFETY_TIMEOUT", "FeedContract", "opened", "read_until"]

T = TypeVar("T")

#: Seconds a feed may take to report what a test waits for before the test fails (generous:
#: a store's heartbeat is about a second; nothing is asserted about durations).
SAFETY_TIMEOUT: Final = 30.0


async def read_until(
    feed: AsyncGenerator[list[T], None], done: Callable[[list[T]], bool]
) -> list[T]:
    """The items of ``feed``'s batches, read until ``done`` of what was read is true."""
    items: list[T] = []
    with anyio.fail_after(SAFETY_TIMEOUT):
        while not done(items):
            items.extend(await feed.__anext__())
    return items


async def opened(feed: AsyncGenerator[list[T], None]) -> None:
    """Read the feed's first batch: ``[]``, once it is open."""
    with anyio.fail_after(SAFETY_TIMEOUT):
        assert await feed.__anext__() == []


def _up_to(marker: Callable[[T], bool]) -> Callable[[list[T]], bool]:
    return lambda items: any(marker(item) for item in items)


def _before(items: list[T], marker: Callable[[T], bool]) -> list[T]:
    """The items before the first one that ``marker`` recognises."""
    end = next(i for i, item in enumerate(items) if marker(item))
    return items[:end]


def _is_insert_at(at: datetime) -> Callable[[RecordChange], bool]:
    return lambda change: change.job_name == "a" and change.next_run_at == to_millis(at)


def _row_of(execution_id: str) -> Callable[[HistoryRecord], bool]:
    return lambda row: row.execution_id == execution_id


def _name(job_name: str) -> Callable[[str], bool]:
    return lambda name: name == job_name


def _real_now() -> datetime:
    return to_millis(datetime.now(UTC))


class FeedContract(ContractBase):
    """Change feeds and the history of one job."""

    # ---------------------------------------------------------------- watch_records

    async def test_watch_records_opens_then_reports_an_insert(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_records(["a"])) as feed:
            await opened(feed)
            await store.insert_job(_job("b", at=T0 + _S))  # another name: not reported
            await store.insert_job(_job("a", at=T0 + 2 * _S, partition=2))
            changes = await read_until(feed, _up_to(_is_insert_at(T0 + 2 * _S)))
        assert RecordChange(job_name="a", partition=2, next_run_at=T0 + 2 * _S) in changes
        assert all(change.job_name in ("a", None) for change in changes), changes

    async def test_watch_records_reports_inserts_of_insert_jobs(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_records(["a", "c"])) as feed:
            await opened(feed)
            await store.insert_jobs(
                [_job("c", at=T0 + _S), _job("b", at=T0 + _S), _job("a", at=T0 + 3 * _S, uid="u")]
            )
            changes = await read_until(feed, _up_to(_is_insert_at(T0 + 3 * _S)))
        names = [change.job_name for change in changes]
        assert "c" in names
        assert "b" not in names

    async def test_watch_records_reports_a_reschedule(self, store: AsyncJobStore) -> None:
        await store.insert_job(_job("a"))
        claimed = await self.claim(store, "a")
        async with aclosing(store.watch_records(["a"])) as feed:
            await opened(feed)
            assert await settle_one(
                store, claimed.job_id, claimed.execution_id, rescheduled(T0 + _H)
            )
            changes = await read_until(feed, _up_to(lambda change: change.next_run_at == T0 + _H))
        change = next(change for change in changes if change.next_run_at == T0 + _H)
        assert change.job_name in ("a", None)
        assert change.partition in (0, None)

    async def test_watch_records_reports_a_release_and_not_a_renewal(
        self, store: AsyncJobStore
    ) -> None:
        now = _real_now()
        job_id = _scheduled_id(await store.insert_job(_job("a", at=now - _S)))
        claimed = await self.claim(store, "a", now=now)
        async with aclosing(store.watch_records(["a"])) as feed:
            await opened(feed)
            assert await store.extend_lock(job_id, claimed.execution_id, now + 5 * _MIN)
            assert await settle_one(store, job_id, claimed.execution_id, released(_real_now()))
            marker = T0 + 7 * _S
            await store.insert_job(_job("a", at=marker))
            changes = await read_until(feed, _up_to(_is_insert_at(marker)))
        before = _before(changes, _is_insert_at(marker))
        assert len(before) == 1, f"expected the release alone, got {before}"
        assert before[0].job_name in ("a", None)
        assert before[0].next_run_at in (now - _S, None)

    async def test_watch_records_reports_release_all_locks(self, store: AsyncJobStore) -> None:
        await store.insert_job(_job("a"))
        await self.claim(store, "a")
        async with aclosing(store.watch_records(["a"])) as feed:
            await opened(feed)
            assert await store.release_all_locks() == 1
            marker = T0 + 9 * _S
            await store.insert_job(_job("a", at=marker))
            changes = await read_until(feed, _up_to(_is_insert_at(marker)))
        assert len(_before(changes, _is_insert_at(marker))) == 1, changes

    async def test_watch_records_heartbeats_while_idle(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_records(["a"])) as feed:
            await opened(feed)
            for _ in range(2):
                with anyio.fail_after(SAFETY_TIMEOUT):
                    assert await feed.__anext__() == []

    async def test_watch_records_without_heartbeats_still_opens_and_reports(
        self, store: AsyncJobStore
    ) -> None:
        """A consumer without deadlines may waive the heartbeats, never the open or a change."""
        with without_heartbeats():
            async with aclosing(store.watch_records(["a"])) as feed:
                await opened(feed)
                marker = T0 + 9 * _S
                await store.insert_job(_job("a", at=marker))
                await read_until(feed, _up_to(_is_insert_at(marker)))

    async def test_watch_records_refuses_a_bare_string(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_records("a")) as feed:
            with pytest.raises(InvalidOptionError, match=r"^job_names='a': "):
                await feed.__anext__()

    # ---------------------------------------------------------------- watch_history

    async def test_watch_history_reports_rows_as_first_written(self, store: AsyncJobStore) -> None:
        first = _history("e1")
        async with aclosing(store.watch_history()) as feed:
            await opened(feed)
            await store.write_history_many([first])
            await store.write_history_many([dataclasses.replace(first, result={"late": 1})])
            await store.write_history_many([_history("e2", name="b")])
            rows = await read_until(feed, _up_to(_row_of("e2")))
        assert [row.execution_id for row in rows] == ["e1", "e2"]
        assert rows[0] == _as_stored(first)

    async def test_watch_history_by_job_id(self, store: AsyncJobStore) -> None:
        mine, other, marker = _history("e1"), _history("e2"), _history("e3")
        marker = dataclasses.replace(marker, job_id=mine.job_id, started_at=T0 + _S)
        async with aclosing(store.watch_history(job_ids=[mine.job_id])) as feed:
            await opened(feed)
            await store.write_history_many([other])
            await store.write_history_many([mine])
            await store.write_history_many([marker])
            rows = await read_until(feed, _up_to(_row_of("e3")))
        assert rows == [_as_stored(mine), _as_stored(marker)]

    async def test_watch_history_by_job_name_and_both_filters(self, store: AsyncJobStore) -> None:
        a1, b1, a2 = _history("a1"), _history("b1", name="b"), _history("a2")
        async with (
            aclosing(store.watch_history(job_names=["a"])) as by_name,
            aclosing(store.watch_history(job_ids=[a2.job_id, b1.job_id], job_names=["a"])) as both,
        ):
            await opened(by_name)
            await opened(both)
            for row in (a1, b1, a2):
                await store.write_history_many([row])
            named = await read_until(by_name, _up_to(_row_of("a2")))
            filtered = await read_until(both, _up_to(_row_of("a2")))
        assert sorted(row.execution_id for row in named) == ["a1", "a2"]
        assert [row.execution_id for row in filtered] == ["a2"]

    async def test_watch_history_heartbeats_while_idle(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_history(job_ids=["nobody"])) as feed:
            await opened(feed)
            with anyio.fail_after(SAFETY_TIMEOUT):
                assert await feed.__anext__() == []

    # ---------------------------------------------------------------- watch_pauses

    async def test_watch_pauses_reports_a_pause_and_a_resume(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_pauses()) as feed:
            await opened(feed)
            assert await store.set_paused("a", True, now=T0)
            assert await read_until(feed, _up_to(_name("a"))) == ["a"]
            assert await store.set_paused("a", False, now=T0 + _S)
            assert await read_until(feed, _up_to(_name("a"))) == ["a"]
        assert await store.paused_names() == frozenset()

    async def test_watch_pauses_reports_every_job_and_not_what_changed_nothing(
        self, store: AsyncJobStore
    ) -> None:
        async with aclosing(store.watch_pauses()) as feed:
            await opened(feed)
            assert await store.set_paused("a", True, now=T0)
            assert await read_until(feed, _up_to(_name("a"))) == ["a"]
            assert not await store.set_paused("a", True, now=T0 + _S)  # already paused
            assert not await store.set_paused("b", False, now=T0)  # not paused
            assert await store.set_paused(EVERY_JOB, True, now=T0)
            assert await read_until(feed, _up_to(_name(EVERY_JOB))) == [EVERY_JOB]

    async def test_watch_pauses_leaves_out_the_other_controls(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_pauses()) as feed:
            await opened(feed)
            await store.insert_job(_job("a"))
            index = await store.acquire_slot(
                "a", DEFAULT_KEY, limit=1, holder="h", until=T0 + _MIN, now=T0
            )
            assert index == 0
            assert await store.renew_slot("a", DEFAULT_KEY, 0, holder="h", until=T0 + _H)
            assert await store.release_slot("a", DEFAULT_KEY, 0, holder="h")
            assert await store.take_rate_token(
                "a", DEFAULT_KEY, limit=1, window_start=T0, window_end=T0 + _MIN
            )
            token = await store.acquire_lease("a", owner="o", until=T0 + _MIN, now=T0)
            assert token is not None
            assert await store.renew_lease("a", owner="o", token=token, until=T0 + _H, now=T0)
            assert await store.release_lease("a", owner="o", token=token)
            assert await store.set_paused("marker", True, now=T0)
            assert await read_until(feed, _up_to(_name("marker"))) == ["marker"]

    async def test_watch_pauses_heartbeats_while_idle(self, store: AsyncJobStore) -> None:
        async with aclosing(store.watch_pauses()) as feed:
            await opened(feed)
            with anyio.fail_after(SAFETY_TIMEOUT):
                assert await feed.__anext__() == []

    # ---------------------------------------------------------------- get_executions(job_id=)
