"""The contract suite, the inspection role (optional): the operators' searches
(:class:`~dogs_core.ports.AsyncInspectionStore`): executions across jobs newest first with a
stable cursor, every filter of :class:`~dogs_core.domain.finding.ExecutionQuery` and
:class:`~dogs_core.domain.finding.RecordQuery`, the newest error of each job, the error
report's exact groups and bound, the archive searched the same ways, and the slot holders.

Not part of :class:`~dogs_testing.contract.JobStoreContract` (a store need not inspect).
Subclass :class:`InspectionContract` (name starting with ``Test``) and provide ``store``: an
:class:`~dogs_core.ports.AsyncJobStore` that also has the inspection and archive roles.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, cast

import pytest

from dogs_core.domain.finding import (
    ExecutionCursor,
    ExecutionQuery,
    OwnerMatch,
    ParamsMatch,
    RecordQuery,
)
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobState
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncArchiveStore, AsyncInspectionStore, AsyncJobStore
from dogs_testing.contract.base import (
    _DAY,
    _MIN,
    _MS,
    _S,
    T0,
    ContractBase,
    _as_stored,
    _history,
    _job,
    _owner,
    _scheduled_id,
)
from dogs_testing.settling import settle_one, terminal

__all__ = ["InspectionContract"]

ERROR = HistoryStatus.ERROR


def _inspect(store: AsyncJobStore) -> AsyncInspectionStore:
    return cast(AsyncInspectionStore, store)


def _row(
    execution_id: str,
    *,
    name: str = "a",
    at: timedelta = timedelta(0),
    status: HistoryStatus = HistoryStatus.SUCCESS,
    **fields: Any,
) -> HistoryRecord:
    row = _history(execution_id, name=name, started_at=T0 + at, status=status)
    return dataclasses.replace(row, **fields)


class InspectionContract(ContractBase):
    """The searches every store with the inspection role answers alike."""

    async def test_executions_newest_first_across_jobs_with_a_stable_cursor(
        self, store: AsyncJobStore
    ) -> None:
        """Rows of several names merge newest first; a page that ends inside a millisecond
        shared by several rows is followed by the rest of them, none twice, none lost."""
        rows = [
            _row("e1", name="a", at=_S),
            _row("e2", name="b", at=2 * _S),
            _row("e3", name="c", at=3 * _S),
            _row("t1", name="a", at=4 * _S),
            _row("t2", name="b", at=4 * _S),
            _row("t3", name="c", at=4 * _S),
            _row("e4", name="b", at=5 * _S),
        ]
        await store.write_history_many(rows)
        search = _inspect(store)
        everything = await search.find_executions(ExecutionQuery(), limit=100)
        assert [r.started_at for r in everything] == sorted(
            (r.started_at for r in everything), reverse=True
        )
        assert {r.execution_id for r in everything} == {r.execution_id for r in rows}
        seen: list[str] = []
        before: ExecutionCursor | None = None
        while True:
            page = await search.find_executions(ExecutionQuery(), limit=2, before=before)
            if not page:
                break
            seen += [row.execution_id for row in page]
            following = ExecutionCursor.after_page(page, before)
            before = ExecutionCursor.decode(following.encode())
        assert sorted(seen) == sorted(r.execution_id for r in rows)
        assert len(seen) == len(set(seen))
        assert seen[0] == "e4"
        assert seen[-1] == "e1"

    async def test_execution_filters(self, store: AsyncJobStore) -> None:
        owner = _owner("w9", host="web-3", pid=77)
        rows = [
            _row("ok", at=_S, unique_identifier="order-1", params={"user": {"id": 42}}),
            _row("boom", at=2 * _S, status=ERROR, error_type="app.Boom", error_message="x"),
            _row("other", name="b", at=3 * _S, status=ERROR, error_type="app.Other"),
            _row("gone", at=4 * _S, status=HistoryStatus.STALE, owner=owner),
            _row("late", at=_DAY, params={"user": {"id": 7}, "plan": "pro"}),
        ]
        await store.write_history_many(rows)
        search = _inspect(store)

        async def ids(**filters: Any) -> list[str]:
            found = await search.find_executions(ExecutionQuery(**filters), limit=50)
            return [row.execution_id for row in found]

        assert await ids(status=ERROR) == ["other", "boom"]
        assert await ids(status=ERROR, job_name="a") == ["boom"]
        assert await ids(error_type="app.Boom") == ["boom"]
        assert await ids(status=HistoryStatus.SUCCESS) == ["late", "ok"]
        assert await ids(job_id=rows[3].job_id) == ["gone"]
        assert await ids(unique_identifier="order-1") == ["ok"]
        assert await ids(owner=OwnerMatch.parse("web-3")) == ["gone"]
        assert await ids(owner=OwnerMatch.parse("w9")) == ["gone"]
        assert await ids(owner=OwnerMatch.parse("web-3:77")) == ["gone"]
        assert await ids(owner=OwnerMatch.parse("web-3:78")) == []
        assert await ids(params=ParamsMatch.parse("user.id=42")) == ["ok"]
        assert await ids(params=ParamsMatch.parse("plan=pro")) == ["late"]
        assert await ids(params=ParamsMatch.parse('user.id="42"')) == []
        assert await ids(since=T0 + 2 * _S, until=T0 + 4 * _S) == ["other", "boom"]
        assert await ids(since=T0 + 4 * _S, job_name="a") == ["late", "gone"]
        (stored,) = await search.find_executions(ExecutionQuery(error_type="app.Boom"), limit=1)
        assert stored == _as_stored(rows[1])
        with pytest.raises(InvalidOptionError):
            await search.find_executions(ExecutionQuery(), limit=0)

    async def test_records_by_params_owner_creation_and_ids(self, store: AsyncJobStore) -> None:
        tagged = dataclasses.replace(_job(params={"user": 1, "tags": ["x"]}), tags=("eu", "vip"))
        first = _scheduled_id(await store.insert_job(tagged))
        second = _scheduled_id(await store.insert_job(_job("b", params={"user": 2})))
        claimed = await self.claim(store, "b", now=T0, owner=_owner("w2", host="web-2"))
        assert claimed.job_id == second
        search = _inspect(store)

        async def ids(**filters: Any) -> list[str]:
            found = await search.find_matching_records(RecordQuery(**filters), now=T0, limit=50)
            return [record.id for record in found]

        assert await ids() == [first, second]
        assert await ids(params=ParamsMatch.parse("user=2")) == [second]
        assert await ids(params=ParamsMatch.parse("tags=x")) == [first]
        assert await ids(owner=OwnerMatch.parse("web-2")) == [second]
        assert await ids(state=JobState.RUNNING) == [second]
        assert await ids(state=JobState.DUE, job_name="a") == [first]
        assert await ids(job_ids=(second,)) == [second]
        assert await ids(created_since=T0 + 365 * _DAY) == []
        assert await ids(created_until=T0 + 365 * _DAY) == [first, second]
        assert await ids(tags=("eu",)) == [first]
        assert await ids(tags=("vip", "eu"), params=ParamsMatch.parse("user=1")) == [first]
        assert await ids(tags=("eu", "us")) == []
        assert await ids(tags=("x",)) == []  # a tag, not a value inside params
        page = await search.find_matching_records(RecordQuery(), now=T0, limit=1, after=first)
        assert [record.id for record in page] == [second]

    async def test_latest_errors_of_jobs(self, store: AsyncJobStore) -> None:
        older = _row("e1", at=_S, status=ERROR, error_message="first")
        newer = dataclasses.replace(
            _row("e2", at=2 * _S, status=ERROR, error_message="second"), job_id=older.job_id
        )
        fine = _row("ok", at=3 * _S)
        await store.write_history_many([older, newer, fine])
        found = await _inspect(store).latest_errors([older.job_id, fine.job_id, "nobody"])
        assert set(found) == {older.job_id}
        assert found[older.job_id].error_message == "second"
        assert await _inspect(store).latest_errors([]) == {}

    async def test_error_groups_count_exact_messages_and_keep_the_newest(
        self, store: AsyncJobStore
    ) -> None:
        rows = [
            _row("b1", at=_S, status=ERROR, error_type="app.Boom", error_message="user 1"),
            _row(
                "b2",
                name="b",
                at=2 * _S,
                status=ERROR,
                error_type="app.Boom",
                error_message="user 1",
            ),
            _row("b3", at=3 * _S, status=ERROR, error_type="app.Boom", error_message="user 2"),
            _row("n1", at=4 * _S, status=ERROR, error_message="no type"),
            _row("ok", at=5 * _S),
            _row("old", at=-_MIN, status=ERROR, error_type="app.Boom", error_message="user 1"),
        ]
        await store.write_history_many(rows)
        scan = await _inspect(store).error_groups(
            since=T0, until=T0 + _MIN, job_name=None, max_rows=100
        )
        assert (scan.examined, scan.truncated) == (4, False)
        by_key = {(g.error_type, g.message): g for g in scan.groups}
        assert set(by_key) == {("app.Boom", "user 1"), ("app.Boom", "user 2"), (None, "no type")}
        user_1 = by_key[("app.Boom", "user 1")]
        assert (user_1.count, user_1.job_names) == (2, ("a", "b"))
        assert (user_1.first_seen, user_1.last_seen) == (T0 + _S, T0 + 2 * _S)
        assert user_1.newest_execution_id == "b2"
        # "user 1" and "user 2" are one group ("user <n>"): the row of its newest is read.
        newest = by_key[("app.Boom", "user 2")].newest
        assert newest is not None
        assert newest.execution_id == "b3"
        of_a = await _inspect(store).error_groups(
            since=T0, until=T0 + _MIN, job_name="a", max_rows=100
        )
        assert sum(g.count for g in of_a.groups) == 3
        newest_two = await _inspect(store).error_groups(
            since=T0, until=T0 + _MIN, job_name=None, max_rows=2
        )
        assert (newest_two.examined, newest_two.truncated) == (2, True)
        assert {g.newest_execution_id for g in newest_two.groups} == {"n1", "b3"}

    async def test_archived_rows_and_records_are_found(self, store: AsyncJobStore) -> None:
        archive = cast(AsyncArchiveStore, store)
        await archive.setup_archive()
        old = T0 - 60 * _DAY
        row = dataclasses.replace(
            _history("old-run", started_at=old), unique_identifier="k-1", params={"user": 5}
        )
        await store.write_history_many([row, _history("new-run")])
        job_id = _scheduled_id(await store.insert_job(_job(at=old - _S, uid="k-2")))
        claimed = await self.claim(store, now=old)
        assert await settle_one(store, job_id, claimed.lock_id, terminal(old))
        assert await archive.archive_history(cutoff=T0 - _DAY, batch_size=10, archived_at=T0) == 1
        assert (
            await archive.archive_failed_records(cutoff=T0 - _DAY, batch_size=10, archived_at=T0)
            == 1
        )
        search = _inspect(store)
        (found,) = await search.find_archived_executions(ExecutionQuery(), limit=10)
        assert found.item == _as_stored(row)
        assert found.archived_at == T0
        for query in (
            ExecutionQuery(job_id=row.job_id),
            ExecutionQuery(unique_identifier="k-1"),
            ExecutionQuery(job_name="a", params=ParamsMatch.parse("user=5")),
        ):
            assert [
                r.item.execution_id for r in await search.find_archived_executions(query, limit=5)
            ] == ["old-run"]
        assert await search.find_archived_executions(ExecutionQuery(job_name="b"), limit=5) == []
        (record,) = await search.find_archived_records(RecordQuery(job_ids=(job_id,)), limit=5)
        assert (record.item.id, record.item.unique_identifier, record.archived_at) == (
            job_id,
            "k-2",
            T0,
        )
        assert [r.item.id for r in await search.find_archived_records(
            RecordQuery(unique_identifier="k-2"), limit=5)] == [job_id]  # fmt: skip
        with pytest.raises(InvalidOptionError):
            await search.find_archived_records(RecordQuery(state=JobState.FAILED), limit=5)

    async def test_held_slot_holders(self, store: AsyncJobStore) -> None:
        for holder in ("lock-1", "lock-2"):
            assert await store.acquire_slot(
                "a", "", limit=3, holder=holder, until=T0 + _MIN, now=T0
            ) is not None  # fmt: skip
        taken = await store.acquire_slot("b", "k", limit=1, holder="lock-3", until=T0 + _S, now=T0)
        assert taken is not None
        holders = await _inspect(store).held_slot_holders(now=T0 + 500 * _MS)
        assert holders == {"a": frozenset({"lock-1", "lock-2"}), "b": frozenset({"lock-3"})}
        assert await _inspect(store).held_slot_holders(now=T0 + 2 * _S) == {
            "a": frozenset({"lock-1", "lock-2"})
        }
