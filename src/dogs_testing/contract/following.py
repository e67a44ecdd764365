"""The contract suite, the following role (optional): the fenced progress write and what record
reads show of it, the history row's progress, log lines kept once and read in id order by job or
execution, the execution's job, and the two feeds
(:class:`~dogs_core.ports.AsyncFollowingStore`).

Not part of :class:`~dogs_testing.contract.JobStoreContract` (a store need not follow jobs).
Subclass :class:`FollowingContract` (name starting with ``Test``) and provide the ``store``
fixture: a set-up store that lists :attr:`~dogs_core.ports.Role.FOLLOWING` in its ``roles``
(its ``setup_following`` called). Feed tests end with a marker write, as the feeds part does.
"""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from datetime import datetime
from typing import cast

import pytest

from dogs_core.domain.log_lines import LogLine, line_id
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import to_millis
from dogs_core.errors import InvalidOptionError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncFollowingStore, AsyncJobStore, Role, has_role, store_roles
from dogs_testing.contract.base import _DAY, _MIN, _S, T0, ContractBase, _history, _job
from dogs_testing.contract.feeds import opened, read_until
from dogs_testing.settling import completed, rescheduled, settle_one

__all__ = ["FollowingContract", "log_line", "progress_of"]


def progress_of(
    execution_id: str,
    fraction: float | None = 0.5,
    *,
    message: str | None = "half",
    at: datetime = T0,
) -> Progress:
    return Progress(
        fraction=fraction,
        message=message,
        data={"rows": 12, "nested": {"ok": True}},
        updated_at=at,
        execution_id=execution_id,
    )


def log_line(
    execution_id: str, job_id: str, seq: int, *, at: datetime = T0, message: str = "line"
) -> LogLine:
    return LogLine(
        id=line_id(at, execution_id, seq),
        execution_id=execution_id,
        job_id=job_id,
        job_name="a",
        seq=seq,
        time=at,
        level=20,
        message=f"{message} {seq}",
        expires_at=at + 7 * _DAY,
        exception="Traceback ..." if seq == 1 else None,
        trace_id="0af7651916cd43dd8448eb211c80319c" if seq == 2 else None,
    )


def _following(store: AsyncJobStore) -> AsyncFollowingStore:
    assert has_role(store, Role.FOLLOWING), store_roles(store)
    return cast(AsyncFollowingStore, store)


class FollowingContract(ContractBase):
    """Progress on records, log lines of executions."""

    # ---------------------------------------------------------------- progress

    async def test_write_progress_is_fenced_and_renews_the_lock(self, store: AsyncJobStore) -> None:
        following = _following(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        progress = progress_of(claimed.lock_id)
        until = T0 + 5 * _MIN
        stranger = new_execution_id()
        assert not await following.write_progress(
            claimed.job_id, stranger, progress_of(stranger), locked_until=until
        )
        assert (await self.record(store, claimed.job_id)).progress is None
        assert await following.write_progress(
            claimed.job_id, claimed.lock_id, progress, locked_until=until
        )
        record = await self.record(store, claimed.job_id)
        assert record.progress == progress
        assert record.locked_until == until

    async def test_write_progress_without_a_lock_time_keeps_the_lock(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        before = (await self.record(store, claimed.job_id)).locked_until
        later = progress_of(claimed.lock_id, 1.0, message=None, at=T0 + _S)
        assert await following.write_progress(
            claimed.job_id, claimed.lock_id, later, locked_until=None
        )
        record = await self.record(store, claimed.job_id)
        assert record.locked_until == before
        assert record.progress == later

    async def test_write_progress_of_another_execution_is_refused(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        with pytest.raises(InvalidOptionError, match="progress"):
            await following.write_progress(
                claimed.job_id, claimed.lock_id, progress_of("other"), locked_until=None
            )
        assert (await self.record(store, claimed.job_id)).progress is None

    async def test_progress_is_shown_only_to_its_lock(self, store: AsyncJobStore) -> None:
        following = _following(store)
        await store.insert_job(_job())
        first = await self.claim(store)
        progress = progress_of(first.lock_id)
        assert await following.write_progress(
            first.job_id, first.lock_id, progress, locked_until=None
        )
        assert [r.progress for r in await store.find_records()] == [progress]
        assert await settle_one(store, first.job_id, first.lock_id, rescheduled(T0 - _S))
        assert (await self.record(store, first.job_id)).progress is None
        second = await self.claim(store)
        assert second.job_id == first.job_id
        assert (await self.record(store, first.job_id)).progress is None

    async def test_history_rows_keep_their_progress(self, store: AsyncJobStore) -> None:
        execution = new_execution_id()
        row = dataclasses.replace(_history(execution), progress=progress_of(execution, 1.0))
        plain = _history(new_execution_id())
        await store.write_history_many([row, plain])
        (read,) = await store.read_history(job_id=row.job_id)
        assert read.progress == row.progress
        (read_plain,) = await store.read_history(job_id=plain.job_id)
        assert read_plain.progress is None

    # ---------------------------------------------------------------- log lines

    async def test_log_lines_read_by_job_and_by_execution_in_id_order(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        job_id, first, second = new_record_id(), new_execution_id(), new_execution_id()
        early = [log_line(first, job_id, seq, at=T0 + seq * _S) for seq in range(3)]
        late = [log_line(second, job_id, seq, at=T0 + _MIN + seq * _S) for seq in range(2)]
        other = log_line(new_execution_id(), new_record_id(), 0)
        await following.write_log_lines([*reversed(late), other, *early])
        expected = [_stored(line) for line in [*early, *late]]
        assert await following.read_log_lines(job_id) == expected
        assert await following.read_log_lines(second) == expected[3:]
        assert (
            await following.read_log_lines(job_id, after=expected[1].id, limit=2) == (expected[2:4])
        )
        assert await following.read_log_lines(job_id, after=expected[-1].id) == []
        assert await following.read_log_lines(new_record_id()) == []

    async def test_log_lines_are_kept_once(self, store: AsyncJobStore) -> None:
        following = _following(store)
        job_id, execution = new_record_id(), new_execution_id()
        lines = [log_line(execution, job_id, seq) for seq in range(3)]
        await following.write_log_lines(lines[:2])
        await following.write_log_lines(lines)  # a retried batch, and one more line
        await following.write_log_lines([])
        assert [line.seq for line in await following.read_log_lines(job_id)] == [0, 1, 2]

    async def test_log_line_reads_refuse_bad_input(self, store: AsyncJobStore) -> None:
        following = _following(store)
        for owner, after, limit in (("", None, 10), ("x", "", 10), ("x", None, 0)):
            with pytest.raises(InvalidOptionError):
                await following.read_log_lines(owner, after=after, limit=limit)

    async def test_execution_job_id_from_the_lock_or_the_history(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        await store.insert_job(_job())
        claimed = await self.claim(store)
        assert await following.execution_job_id(claimed.lock_id) == claimed.job_id
        row = _history(new_execution_id())
        await store.write_history_many([row])
        assert await following.execution_job_id(row.execution_id) == row.job_id
        assert await following.execution_job_id(new_execution_id()) is None

    # ---------------------------------------------------------------- feeds

    async def test_watch_log_lines_reports_the_lines_of_its_owner(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        job_id, execution = new_record_id(), new_execution_id()
        mine = [log_line(execution, job_id, seq) for seq in range(2)]
        marker = log_line(execution, job_id, 9)
        async with aclosing(following.watch_log_lines(job_id)) as feed:
            await opened(feed)
            await following.write_log_lines([log_line(new_execution_id(), new_record_id(), 0)])
            await following.write_log_lines(mine)
            await following.write_log_lines([marker])
            ids = await read_until(feed, lambda seen: marker.id in seen)
        assert ids == [line.id for line in [*mine, marker]]

    async def test_watch_progress_reports_the_changes_of_its_job(
        self, store: AsyncJobStore
    ) -> None:
        following = _following(store)
        await store.insert_job(_job())
        await store.insert_job(_job("b"))
        claimed = await self.claim(store)
        other = await self.claim(store, "b")
        async with aclosing(following.watch_progress(claimed.job_id)) as feed:
            await opened(feed)
            progress = progress_of(other.lock_id)
            await following.write_progress(other.job_id, other.lock_id, progress, locked_until=None)
            mine = progress_of(claimed.lock_id)
            await following.write_progress(claimed.job_id, claimed.lock_id, mine, locked_until=None)
            await read_until(feed, lambda seen: claimed.job_id in seen)
            assert await settle_one(store, claimed.job_id, claimed.lock_id, completed())
            ids = await read_until(feed, lambda seen: len(seen) >= 1)
        assert set(ids) == {claimed.job_id}


def _stored(line: LogLine) -> LogLine:
    return dataclasses.replace(
        line, time=to_millis(line.time), expires_at=to_millis(line.expires_at)
    )
