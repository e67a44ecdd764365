"""The stats definitions both stores share: the window check, nearest-rank percentiles, minute
buckets and the counting of history rows into :class:`JobStats`."""

from __future__ import annotations

import dataclasses
import itertools
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.domain.stats import (
    MAX_STATS_WINDOW,
    JobStats,
    check_stats_names,
    check_stats_window,
    minute_buckets,
    minute_start,
    nearest_rank,
    nearest_rank_index,
    stats_from_history,
    stats_of_name,
)
from dogs_core.errors import InvalidOptionError

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
_MIN = timedelta(minutes=1)


def _row(
    n: int,
    *,
    name: str = "a",
    at: datetime = T0,
    ms: int = 10,
    status: HistoryStatus = HistoryStatus.SUCCESS,
    error_type: str | None = None,
) -> HistoryRecord:
    return HistoryRecord(
        execution_id=f"e{n}",
        job_id=f"j{n}",
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=at,
        ended_at=at + timedelta(milliseconds=ms),
        status=status,
        expires_at=at + timedelta(days=7),
        error_type=error_type,
    )


# -- percentiles ----------------------------------------------------------------------------


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=200), st.integers(1, 100))
def test_nearest_rank_is_the_smallest_value_covering_the_percent(
    values: list[int], percent: int
) -> None:
    """The definition: the smallest value such that at least ``percent``% of the values are
    at most it (an actual value, never interpolated)."""
    ordered = sorted(values)
    result = nearest_rank(ordered, percent)
    assert result in ordered
    covering = [v for v in ordered if sum(x <= v for x in ordered) * 100 >= percent * len(ordered)]
    assert result == min(covering)
    assert nearest_rank_index(len(ordered), percent) == math.ceil(percent * len(ordered) / 100) - 1


def test_nearest_rank_examples() -> None:
    assert nearest_rank([], 50) is None
    assert nearest_rank([7], 95) == 7.0
    ten = [float(v) for v in range(1, 11)]
    assert nearest_rank(ten, 50) == 5.0
    assert nearest_rank(ten, 95) == 10.0
    twenty = [float(v) for v in range(1, 21)]
    assert nearest_rank(twenty, 95) == 19.0  # 0.95 * 20 = 19 exactly: no float rounding up


# -- the window -----------------------------------------------------------------------------


def test_window_is_checked_and_truncated_to_milliseconds() -> None:
    since, until = check_stats_window(T0 + timedelta(microseconds=1_999), T0 + _MIN)
    assert since == T0 + timedelta(milliseconds=1)
    assert until == T0 + _MIN
    paris = timezone(timedelta(hours=1))
    assert check_stats_window(T0.astimezone(paris), T0 + _MIN)[0].tzinfo is UTC
    assert check_stats_window(T0, T0 + MAX_STATS_WINDOW) == (T0, T0 + MAX_STATS_WINDOW)


@pytest.mark.parametrize(
    ("since", "until", "field"),
    [
        (T0, T0, "since"),
        (T0 + _MIN, T0, "since"),
        (T0, T0 + MAX_STATS_WINDOW + timedelta(milliseconds=1), "until"),
        (T0.replace(tzinfo=None), T0 + _MIN, "since"),
        (T0, (T0 + _MIN).replace(tzinfo=None), "until"),
        ("2030-01-01", T0, "since"),
        (T0, None, "until"),
    ],
)
def test_a_bad_window_names_its_field(since: object, until: object, field: str) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        check_stats_window(since, until)
    assert caught.value.field == field


def test_names_are_checked() -> None:
    assert check_stats_names(None) is None
    assert check_stats_names(["b", "a", "b"]) == ("a", "b")
    assert check_stats_names([]) == ()
    for bad in ("a", ["a", ""], [1], 3):
        with pytest.raises(InvalidOptionError) as caught:
            check_stats_names(bad)
        assert caught.value.field == "job_names"


# -- minutes --------------------------------------------------------------------------------


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
    ),
    st.timedeltas(min_value=timedelta(milliseconds=1), max_value=timedelta(hours=3)),
)
def test_minute_buckets_tile_the_window(since: datetime, length: timedelta) -> None:
    until = since + length
    buckets = minute_buckets(since, until)
    assert buckets[0] == minute_start(since) <= since
    assert buckets[-1] < until <= buckets[-1] + _MIN
    assert all(b.second == 0 and b.microsecond == 0 for b in buckets)
    assert all(later - earlier == _MIN for earlier, later in itertools.pairwise(buckets))


# -- counting rows --------------------------------------------------------------------------


def test_rows_are_counted_per_name_in_the_window() -> None:
    since, until = T0, T0 + 3 * _MIN
    rows = [
        _row(1, ms=100),
        _row(2, at=T0 + timedelta(seconds=30), ms=300),
        _row(3, at=T0 + _MIN, ms=200, status=HistoryStatus.ERROR, error_type="builtins.KeyError"),
        _row(4, at=T0 + _MIN, ms=50, status=HistoryStatus.ERROR),
        _row(5, at=T0 + _MIN, ms=400, status=HistoryStatus.ERROR, error_type="builtins.KeyError"),
        _row(6, at=T0 + 2 * _MIN, ms=20, status=HistoryStatus.STALE),
        _row(7, at=T0 + 2 * _MIN, ms=30, status=HistoryStatus.CANCELLED),
        _row(8, at=T0 + 2 * _MIN, ms=40, status=HistoryStatus.SNOOZED),
        _row(9, at=T0 - timedelta(milliseconds=1)),  # before the window
        _row(10, at=until),  # the end is excluded
        _row(11, name="b", at=T0 + _MIN, ms=5),
    ]
    stats = stats_from_history(rows, since=since, until=until)
    assert [s.job_name for s in stats] == ["a", "b"]
    a, b = stats
    assert a == JobStats(
        job_name="a",
        runs=8,
        succeeded=2,
        errors=3,
        stale=1,
        cancelled=1,
        snoozed=1,
        retried=0,
        failed=0,
        errors_by_type={"builtins.KeyError": 2, "unknown": 1},
        duration_p50_ms=50.0,  # of 20 30 40 50 100 200 300 400: rank ceil(0.5 * 8) = 4
        duration_p95_ms=400.0,  # rank ceil(0.95 * 8) = 8
        duration_max_ms=400.0,
        throughput=((T0, 2), (T0 + _MIN, 3), (T0 + 2 * _MIN, 3)),
        since=since,
        until=until,
        first_started_at=T0,
        last_started_at=T0 + 2 * _MIN,
    )
    assert a.success_rate == pytest.approx(2 / 6)
    assert a.per_minute == pytest.approx(8 / 2)  # over the two minutes it was active
    assert b.runs == 1
    assert b.errors_by_type == {}
    assert b.success_rate == 1.0
    assert b.per_minute is None  # one attempt has no rate
    assert b.throughput == ((T0, 0), (T0 + _MIN, 1), (T0 + 2 * _MIN, 0))


def test_snoozed_and_cancelled_rows_have_no_success_rate() -> None:
    rows = [_row(1, status=HistoryStatus.SNOOZED), _row(2, status=HistoryStatus.CANCELLED)]
    (stats,) = stats_from_history(rows, since=T0, until=T0 + _MIN)
    assert stats.runs == 2
    assert stats.succeeded == stats.errors == stats.stale == 0
    assert stats.success_rate is None


def test_job_stats_fills_every_minute_and_drops_minutes_outside() -> None:
    stats = stats_of_name(
        "a",
        since=T0 + timedelta(seconds=30),
        until=T0 + 2 * _MIN,
        runs=3,
        statuses={"success": 3},
        errors_by_type={},
        durations=(1.0, 2.0, 3.0),
        per_minute={T0 + timedelta(seconds=59): 1, T0 + _MIN: 2, T0 + 5 * _MIN: 9},
    )
    assert stats.throughput == ((T0, 1), (T0 + _MIN, 2))
    assert stats.success_rate == 1.0
    assert stats.duration_p50_ms == 1.0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 299),  # seconds after T0
            st.integers(0, 5_000),
            st.sampled_from(list(HistoryStatus)),
        ),
        max_size=60,
    )
)
def test_counts_add_up(spec: list[tuple[str, int, int, HistoryStatus]]) -> None:
    rows = [
        _row(i, name=name, at=T0 + timedelta(seconds=s), ms=ms, status=status)
        for i, (name, s, ms, status) in enumerate(spec)
    ]
    stats = stats_from_history(rows, since=T0, until=T0 + 5 * _MIN)
    assert sum(s.runs for s in stats) == len(rows)
    for s in stats:
        assert sum(count for _, count in s.throughput) == s.runs
        assert len(s.throughput) == 5
        assert s.succeeded + s.errors + s.stale + s.cancelled + s.expired <= s.runs
        assert sum(s.errors_by_type.values()) == s.errors
        if s.runs == s.expired:  # expired rows never ran: they have no duration
            assert s.duration_p50_ms is None
            continue
        assert (
            s.succeeded + s.errors + s.stale + s.cancelled + s.snoozed + s.expired + s.superseded
            == s.runs
        )
        assert sum(s.errors_by_type.values()) == s.errors
        assert s.retried + s.failed <= s.errors
        assert s.duration_p50_ms is not None
        assert s.duration_p95_ms is not None
        assert s.duration_p50_ms <= s.duration_p95_ms <= (s.duration_max_ms or 0)


# -- per attempt and per job (issue 29: "a job that failed twice then succeeded: 33.3 %") -----


def test_a_job_that_failed_twice_then_succeeded_is_one_job_success_in_one() -> None:
    """Per attempt it is one success in three; per job, one success in one (its two errors
    were retried). Before the rows said whether a retry followed, only 33.3 % could be told."""
    rows = [
        dataclasses.replace(
            _row(1, status=HistoryStatus.ERROR, error_type="app.Flaky"), outcome="retried"
        ),
        dataclasses.replace(
            _row(2, at=T0 + timedelta(seconds=1), status=HistoryStatus.ERROR), outcome="retried"
        ),
        dataclasses.replace(_row(3, at=T0 + timedelta(seconds=2)), outcome="succeeded"),
        dataclasses.replace(
            _row(4, at=T0 + timedelta(seconds=3), status=HistoryStatus.ERROR), outcome="failed"
        ),
    ]
    (stats,) = stats_from_history(rows[:3], since=T0, until=T0 + _MIN)
    assert stats.attempt_success_rate == pytest.approx(1 / 3)
    assert stats.job_success_rate == 1.0
    assert (stats.errors, stats.retried, stats.failed) == (2, 2, 0)
    (with_a_failed_job,) = stats_from_history(rows, since=T0, until=T0 + _MIN)
    assert with_a_failed_job.job_success_rate == pytest.approx(1 / 2)
    assert with_a_failed_job.failed == 1


def test_attempts_per_minute_are_over_the_active_span() -> None:
    """300 attempts started within 4 s are 4,500 a minute, not 300 over a 1 h window (5.00)."""
    rows = [_row(i, at=T0 + timedelta(milliseconds=4000 * i // 299)) for i in range(300)]
    (stats,) = stats_from_history(rows, since=T0, until=T0 + timedelta(hours=1))
    assert stats.active_span == timedelta(seconds=4)
    assert stats.per_minute == pytest.approx(4500)
