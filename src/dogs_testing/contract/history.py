"""The contract suite, the history role: execution history (rows keyed by execution id, the
first row wins whole, ``read_history`` newest first, by name, job or status)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from dogs_core.domain.records import HistoryStatus
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract.base import _H, _MIN, _S, T0, ContractBase, _as_stored, _history, _owner

__all__ = ["HistoryContract"]


class HistoryContract(ContractBase):
    """Execution history: rows keyed by execution id, the first row wins whole, newest-first
    reads."""

    async def test_history_first_row_wins_whole(self, store: AsyncJobStore) -> None:
        first = _history("e1", status=HistoryStatus.STALE)
        await store.write_history_many([first])
        late = dataclasses.replace(
            first,
            status=HistoryStatus.SUCCESS,
            ended_at=first.ended_at + _S,
            result={"late": True},
            tries=7,
            was_stale=True,
            owner=_owner(),
        )
        await store.write_history_many([late])
        assert await store.read_history("a") == [first]
        # Not even a later row of another job name moves it.
        await store.write_history_many([dataclasses.replace(late, job_name="b")])
        assert await store.read_history("a") == [first]
        assert await store.read_history("b") == []

    async def test_supersede_history_replaces_a_stale_row_only(self, store: AsyncJobStore) -> None:
        """A success refused because the lock moved on turns the claimer's ``stale`` row into
        its ``superseded`` row, keeping who took over; a row that is not ``stale`` (its own
        success won) and a missing row are left alone."""
        stale = dataclasses.replace(
            _history("e1", status=HistoryStatus.STALE, error_message="killed or hung"),
            superseded_by="taker",
        )
        success = _history("e2", started_at=T0 + _S, result={"kept": True})
        await store.write_history_many([stale, success])
        mine = dataclasses.replace(
            stale,
            status=HistoryStatus.SUPERSEDED,
            error_message=None,
            result={"ran": "to the end"},
            ended_at=stale.ended_at + _S,
            outcome="superseded",
            superseded_by=None,
        )
        assert await store.supersede_history(mine) is True
        assert await store.supersede_history(mine) is False, "no longer stale: once"
        refused = dataclasses.replace(success, status=HistoryStatus.SUPERSEDED)
        assert await store.supersede_history(refused) is False, "a success is never replaced"
        absent = dataclasses.replace(mine, execution_id="e3")
        assert await store.supersede_history(absent) is False
        expected = [success, dataclasses.replace(mine, superseded_by="taker")]
        assert await store.read_history("a") == [_as_stored(row) for row in expected]
        assert await store.read_history("a", status=HistoryStatus.SUPERSEDED) == [
            _as_stored(expected[1])
        ]

    async def test_write_history_many(self, store: AsyncJobStore) -> None:
        rows = [
            _history(
                f"m{i}",
                started_at=T0 + i * _S + timedelta(microseconds=1_999),
                status=HistoryStatus.ERROR if i % 2 else HistoryStatus.SUCCESS,
                error_message="boom" if i % 2 else None,
                result=None if i % 2 else {"i": i},
            )
            for i in range(3)
        ]
        other = _history("other", name="b", started_at=T0 + _H)
        await store.write_history_many([rows[0], other, rows[1], rows[2]])
        stored = [_as_stored(row) for row in reversed(rows)]
        assert await store.read_history("a") == stored
        assert await store.read_history("b") == [other]

    async def test_write_history_many_first_row_wins_whole(self, store: AsyncJobStore) -> None:
        first = _history("e1", status=HistoryStatus.STALE)
        await store.write_history_many([first])
        late = dataclasses.replace(
            first, status=HistoryStatus.SUCCESS, ended_at=first.ended_at + _S, result={"x": 1}
        )
        # Within one call too: the first record of an execution id is the row.
        fresh = _history("e2", started_at=T0 + _S, status=HistoryStatus.ERROR, error_message="a")
        fresh_late = dataclasses.replace(
            fresh, status=HistoryStatus.SUCCESS, error_message=None, result={"ok": True}
        )
        await store.write_history_many([late, fresh, fresh_late])
        assert await store.read_history("a") == [fresh, first]

    async def test_history_keeps_every_field(self, store: AsyncJobStore) -> None:
        """The additive fields (``was_stale``, ``error_type``, ``error_traceback``, ``owner``)
        and every status, ours included, round trip."""
        rows = [
            dataclasses.replace(
                _history(f"s{i}", started_at=T0 + i * _S, status=status),
                was_stale=i % 2 == 1,
                error_type="builtins.ValueError" if i % 2 else None,
                error_traceback="Traceback (most recent call last):\n  ...\nValueError: x\n"
                if i % 2
                else None,
                owner=_owner(f"w{i}") if i != 2 else None,
                error_message="x" if i % 2 else None,
            )
            for i, status in enumerate(HistoryStatus)
        ]
        await store.write_history_many(rows)
        assert await store.read_history("a") == list(reversed(rows))

    async def test_read_history_breaks_ties_by_the_newest_end(self, store: AsyncJobStore) -> None:
        rows = [dataclasses.replace(_history(f"t{i}"), ended_at=T0 + i * _S) for i in (2, 1, 3)]
        await store.write_history_many(rows)
        assert [row.execution_id for row in await store.read_history("a")] == [
            "t3",
            "t2",
            "t1",
        ]

    async def test_write_history_many_of_nothing(self, store: AsyncJobStore) -> None:
        await store.write_history_many([])
        assert await store.read_history("a") == []

    async def test_read_history_newest_first_with_limit_and_skip(
        self, store: AsyncJobStore
    ) -> None:
        rows = [
            _history(
                f"e{i}",
                started_at=T0 + i * _S + timedelta(microseconds=1_999),
                status=HistoryStatus.ERROR if i % 2 else HistoryStatus.SUCCESS,
                error_message="boom" if i % 2 else None,
                result=None if i % 2 else {"i": i},
            )
            for i in range(5)
        ]
        for row in rows:
            await store.write_history_many([row])
        await store.write_history_many([_history("other", name="b", started_at=T0 + _H)])
        stored = [_as_stored(row) for row in reversed(rows)]
        assert await store.read_history("a") == stored
        assert await store.read_history("a", limit=2) == stored[:2]
        assert await store.read_history("a", limit=2, skip=1) == stored[1:3]
        assert await store.read_history("a", skip=4) == stored[4:]
        assert await store.read_history("nobody") == []

    async def test_read_history_refuses_a_negative_limit_or_skip(
        self, store: AsyncJobStore
    ) -> None:
        assert await store.read_history("a", limit=0) == []
        for field in ("limit", "skip"):
            kwargs: dict[str, Any] = {field: -1}
            with pytest.raises(InvalidOptionError, match=f"^{field}=-1: must be at least 0$"):
                await store.read_history("a", **kwargs)

    async def test_read_history_by_job_id_newest_first(self, store: AsyncJobStore) -> None:
        first = _history("e1", started_at=T0)
        job_id = first.job_id
        retry = dataclasses.replace(_history("e2", started_at=T0 + _MIN), job_id=job_id)
        other = _history("e3", started_at=T0 + _H)
        renamed = dataclasses.replace(
            _history("e4", name="b", started_at=T0 + 2 * _MIN), job_id=job_id
        )
        await store.write_history_many([first, other, retry, renamed])
        stored = [_as_stored(row) for row in (renamed, retry, first)]
        assert await store.read_history(job_id=job_id) == stored
        assert await store.read_history(job_id=job_id, limit=1, skip=1) == stored[1:2]
        assert await store.read_history("a", job_id=job_id) == stored[1:]
        assert await store.read_history("b", job_id=other.job_id) == []
        assert await store.read_history(job_id="nobody") == []

    async def test_read_history_needs_a_filter(self, store: AsyncJobStore) -> None:
        with pytest.raises(InvalidOptionError, match=r"^job_name=None: "):
            await store.read_history()
        assert await store.read_history(job_id="x", limit=0) == []

    async def test_read_history_of_one_status(self, store: AsyncJobStore) -> None:
        statuses = [
            HistoryStatus.SUCCESS,
            HistoryStatus.ERROR,
            HistoryStatus.CANCELLED,
            HistoryStatus.SNOOZED,
            HistoryStatus.SUCCESS,
            HistoryStatus.STALE,
            HistoryStatus.SUCCESS,
        ]
        job_id = new_record_id()
        rows = [
            dataclasses.replace(
                _history(new_execution_id(), started_at=T0 + i * _S, status=status),
                job_id=job_id if i < 5 else new_record_id(),
            )
            for i, status in enumerate(statuses)
        ]
        other = _history(new_execution_id(), name="b", started_at=T0 + _H)
        await store.write_history_many([*rows, other])
        newest_first = list(reversed(rows))
        for status in HistoryStatus:
            wanted = [row for row in newest_first if row.status is status]
            assert await store.read_history("a", status=status) == wanted, status
            of_job = [row for row in wanted if row.job_id == job_id]
            assert await store.read_history(job_id=job_id, status=status) == of_job, status
        successes = [row for row in newest_first if row.status is HistoryStatus.SUCCESS]
        assert await store.read_history("a", status=HistoryStatus.SUCCESS, limit=1, skip=1) == [
            successes[1]
        ]
        assert await store.read_history("a", job_id=job_id, status=HistoryStatus.SUCCESS) == [
            rows[4],
            rows[0],
        ]
        assert await store.read_history("b", status=HistoryStatus.ERROR) == []
        assert await store.read_history("b", status=HistoryStatus.SUCCESS) == [other]
