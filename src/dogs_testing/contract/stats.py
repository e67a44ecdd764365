"""The contract suite, the stats role: ``status_counts`` (records by state) and ``job_stats``,
the counts of the history rows of a window per job name (:mod:`dogs_core.domain.stats` defines
them; every store must give the same)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import (
    HistoryRecord,
    HistoryStatus,
    Hold,
    HoldReason,
    JobState,
    NameStatus,
)
from dogs_core.domain.stats import MAX_STATS_WINDOW, JobStats
from dogs_core.errors import InvalidOptionError
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract.base import _H, _MIN, _MS, _S, T0, ContractBase, _history, _job
from dogs_testing.settling import released, rescheduled, settle_one, terminal

__all__ = ["StatsContract"]

ERROR = HistoryStatus.ERROR


def _row(
    execution_id: str,
    *,
    name: str = "a",
    at: timedelta = timedelta(0),
    ms: int = 10,
    status: HistoryStatus = HistoryStatus.SUCCESS,
    error_type: str | None = None,
    outcome: str | None = None,
) -> HistoryRecord:
    """A row of ``name`` started ``at`` after :data:`T0` that lasted ``ms`` milliseconds."""
    row = _history(execution_id, name=name, started_at=T0 + at, status=status)
    return dataclasses.replace(
        row, ended_at=row.started_at + ms * _MS, error_type=error_type, outcome=outcome
    )


class StatsContract(ContractBase):
    """``job_stats``: rows whose ``started_at`` is in ``[since, until)``, per name, sorted."""

    async def test_stats_count_the_window_per_name(self, store: AsyncJobStore) -> None:
        await store.write_history_many(
            [
                _row("s1", ms=100),
                _row("s2", at=30 * _S, ms=300),
                _row("e1", at=_MIN, ms=200, status=ERROR, error_type="app.Boom", outcome="retried"),
                _row("e2", at=_MIN, ms=50, status=ERROR),  # a Node Dogs row: no outcome
                _row("e3", at=_MIN, ms=400, status=ERROR, error_type="app.Boom", outcome="failed"),
                _row("st", at=2 * _MIN, ms=20, status=HistoryStatus.STALE),
                _row("c", at=2 * _MIN, ms=30, status=HistoryStatus.CANCELLED),
                _row("z", at=2 * _MIN, ms=40, status=HistoryStatus.SNOOZED),
                _row("sup", at=2 * _MIN, ms=50, status=HistoryStatus.SUPERSEDED),
                _row("before", at=-_MS),
                _row("end", at=3 * _MIN),  # until is excluded
                _row("b1", name="b", at=_MIN + _S, ms=5),
                _row("late", name="c", at=_MIN * 10),  # no row of "c" in the window
            ]
        )
        stats = await store.job_stats(since=T0, until=T0 + 3 * _MIN)
        assert [s.job_name for s in stats] == ["a", "b"]
        assert stats[0] == JobStats(
            job_name="a",
            runs=9,
            succeeded=2,
            errors=3,
            stale=1,
            cancelled=1,
            snoozed=1,
            superseded=1,  # ran, but not a success: another attempt's is the job's
            retried=1,
            failed=1,
            errors_by_type={"app.Boom": 2, "unknown": 1},
            duration_p50_ms=50.0,
            duration_p95_ms=400.0,
            duration_max_ms=400.0,
            throughput=((T0, 2), (T0 + _MIN, 3), (T0 + 2 * _MIN, 4)),
            since=T0,
            until=T0 + 3 * _MIN,
            first_started_at=T0,
            last_started_at=T0 + 2 * _MIN,
        )
        assert stats[0].attempt_success_rate == pytest.approx(2 / 6)
        assert stats[0].job_success_rate == pytest.approx(2 / 3)
        assert stats[0].per_minute == pytest.approx(9 / 2)  # over the 2 active minutes
        assert stats[1].throughput == ((T0, 0), (T0 + _MIN, 1), (T0 + 2 * _MIN, 0))

    async def test_stats_of_some_names(self, store: AsyncJobStore) -> None:
        await store.write_history_many(
            [_row("a1"), _row("b1", name="b"), _row("c1", name="c", at=_S)]
        )
        window = {"since": T0, "until": T0 + _MIN}
        chosen = await store.job_stats(**window, job_names=["c", "a", "missing"])
        assert [(s.job_name, s.runs) for s in chosen] == [("a", 1), ("c", 1)]
        assert await store.job_stats(**window, job_names=[]) == []
        assert await store.job_stats(**window, job_names=["missing"]) == []
        assert await store.job_stats(since=T0 + _S + _MS, until=T0 + _MIN) == []

    async def test_stats_percentiles_are_nearest_rank(self, store: AsyncJobStore) -> None:
        await store.write_history_many(
            [_row(f"r{ms}", at=ms * _MS, ms=ms) for ms in range(20, 0, -1)]
        )
        (stats,) = await store.job_stats(since=T0, until=T0 + _MIN)
        assert stats.runs == 20
        assert (stats.duration_p50_ms, stats.duration_p95_ms, stats.duration_max_ms) == (
            10.0,
            19.0,
            20.0,
        )

    async def test_stats_minutes_cover_the_window(self, store: AsyncJobStore) -> None:
        """A window that does not start on a minute: its first minute starts before ``since``
        and counts only the rows in the window; the times are truncated to milliseconds."""
        await store.write_history_many(
            [_row("early", at=10 * _S), _row("in", at=40 * _S), _row("next", at=_MIN + _S)]
        )
        since = T0 + 30 * _S + timedelta(microseconds=500)
        (stats,) = await store.job_stats(since=since, until=T0 + _MIN + 2 * _S)
        assert stats.since == T0 + 30 * _S
        assert stats.throughput == ((T0, 1), (T0 + _MIN, 1))
        assert stats.runs == 2

    async def test_stats_snoozed_rows_count_in_runs_only(self, store: AsyncJobStore) -> None:
        await store.write_history_many([_row("z", status=HistoryStatus.SNOOZED)])
        (stats,) = await store.job_stats(since=T0, until=T0 + _MIN)
        assert stats.runs == 1
        assert stats.succeeded + stats.errors + stats.stale + stats.cancelled == 0
        assert stats.snoozed == 1
        assert stats.success_rate is None
        assert stats.errors_by_type == {}
        assert stats.per_minute is None  # one attempt: no rate
        assert stats.duration_max_ms == 10.0

    async def test_stats_window_is_checked(self, store: AsyncJobStore) -> None:
        assert await store.job_stats(since=T0, until=T0 + MAX_STATS_WINDOW) == []
        bad = [
            (T0, T0 + MAX_STATS_WINDOW + _MS, "until"),
            (T0, T0, "since"),
            (T0 + _S, T0, "since"),
            (T0.replace(tzinfo=None), T0 + _S, "since"),
        ]
        for since, until, field in bad:
            with pytest.raises(InvalidOptionError) as caught:
                await store.job_stats(since=since, until=until)
            assert caught.value.field == field
        with pytest.raises(InvalidOptionError) as caught:
            await store.job_stats(since=T0, until=T0 + _S, job_names="a")
        assert caught.value.field == "job_names"

    async def test_status_counts(self, store: AsyncJobStore) -> None:
        await store.insert_jobs(
            [
                _job(partition=0, at=T0 - 2 * _S),  # due
                _job(partition=1, at=T0 - _S),  # due
                _job(partition=2, at=T0 + _H),  # scheduled later
                _job(partition=3, at=T0 - _S),  # running
                _job(partition=4, at=T0 - 20 * _S),  # stale
                _job(partition=5, at=T0 - 20 * _S),  # terminal
                _job(partition=6, at=T0 - 3 * _S),  # released at shutdown: due (retrying)
                _job(partition=7, at=T0 - _S),  # retrying later
                _job("b", partition=0, at=T0),  # due
            ]
        )
        await self.claim(store, partition=3, now=T0)
        await self.claim(store, partition=4, now=T0 - 10 * _S, lock_for=5 * _S)
        at_limit = await self.claim(store, partition=5, now=T0 - 10 * _S)
        assert await settle_one(store, at_limit.job_id, at_limit.lock_id, terminal(T0 - 10 * _S))
        given_back = await self.claim(store, partition=6, now=T0 - _S)
        assert await settle_one(store, given_back.job_id, given_back.lock_id, released(T0 - _S))
        failed = await self.claim(store, partition=7, now=T0 - _S)
        assert await settle_one(store, failed.job_id, failed.lock_id, rescheduled(T0 + _MIN))
        counts = sorted(await store.status_counts(now=T0), key=lambda s: s.job_name)
        assert counts == [
            NameStatus(
                job_name="a",
                due=3,
                scheduled_later=2,
                running=1,
                stale=1,
                terminal=1,
                oldest_due_at=T0 - 20 * _S,  # the stale record waits for recovery
            ),
            NameStatus(job_name="b", due=1, oldest_due_at=T0),
        ]
        for status in counts:  # each record is counted once, by its state
            records = await store.find_records(job_name=status.job_name)
            assert len(records) == (
                status.due
                + status.scheduled_later
                + status.running
                + status.stale
                + status.terminal
            )

    async def test_status_counts_held_records(self, store: AsyncJobStore) -> None:
        """A record a fleet limit gave back is ``held`` while its hold is in force, and counts
        as waiting since the hold began (not from its new next run); once its next run has
        passed it is due again, still waiting since then."""
        await store.insert_jobs([_job(partition=0, at=T0 - 30 * _S)])
        claimed = await self.claim(store, partition=0, now=T0 - 20 * _S)
        hold = Hold(HoldReason.CONCURRENCY, since=T0 - 30 * _S, until=T0 + _S)
        give_back = Defer(T0 + _S, tries=0, hold=hold)
        assert await settle_one(store, claimed.job_id, claimed.lock_id, give_back)
        (held,) = await store.status_counts(now=T0)
        assert (held.held, held.due, held.scheduled_later) == (1, 0, 0)
        assert held.oldest_due_at == T0 - 30 * _S
        (record,) = await store.find_records(job_name="a", state=JobState.HELD, now=T0)
        assert record.holding == hold
        assert await store.find_records(job_name="a", state=JobState.SCHEDULED, now=T0) == []
        (later,) = await store.status_counts(now=T0 + 2 * _S)
        assert (later.held, later.due, later.oldest_due_at) == (0, 1, T0 - 30 * _S)
        again = await self.claim(store, partition=0, now=T0 + 2 * _S)
        assert again.held_since == T0 - 30 * _S  # a refusal again keeps the hold's start

    async def test_status_counts_of_nothing(self, store: AsyncJobStore) -> None:
        assert await store.status_counts(now=T0) == []
