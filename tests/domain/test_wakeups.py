"""plan_wakeups: which changes wake an instance now, get a timer, or wait for the poll."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.wakeups import RecordChange, WakePlan, plan_wakeups

NOW = datetime(2030, 1, 1, tzinfo=UTC)
HORIZON = timedelta(seconds=3)
NAMES = frozenset({"a", "b"})


def plan(*changes: RecordChange, max_later: int = 1_000) -> WakePlan:
    return plan_wakeups(changes, job_names=NAMES, now=NOW, horizon=HORIZON, max_later=max_later)


def test_no_change_no_wake() -> None:
    assert plan() == WakePlan()


def test_a_due_change_wakes_now_at_its_partition() -> None:
    assert plan(RecordChange("a", 3, NOW)) == WakePlan(now=True, partitions=(3,))


def test_a_change_of_unknown_fields_wakes_now_everywhere() -> None:
    assert plan(RecordChange()) == WakePlan(now=True)


def test_another_job_name_is_ignored() -> None:
    assert plan(RecordChange("other", 1, NOW)) == WakePlan()


def test_a_change_due_soon_gets_a_timer_and_a_later_one_is_left_to_the_poll() -> None:
    soon = NOW + timedelta(seconds=1)
    later = NOW + HORIZON + timedelta(milliseconds=1)
    assert plan(RecordChange("a", 0, soon), RecordChange("b", 1, later)) == WakePlan(later=(soon,))


def test_the_horizon_itself_is_soon() -> None:
    assert plan(RecordChange("a", 0, NOW + HORIZON)).later == (NOW + HORIZON,)


def test_a_burst_is_one_wake_with_each_partition_once_in_order() -> None:
    changes = [RecordChange("a", p % 4, NOW - timedelta(seconds=1)) for p in (2, 0, 2, 1, 0)]
    assert plan(*changes) == WakePlan(now=True, partitions=(2, 0, 1))


def test_timers_are_distinct_soonest_first_and_bounded() -> None:
    times = [NOW + timedelta(milliseconds=ms) for ms in (30, 10, 20, 10)]
    result = plan(*(RecordChange("a", 0, t) for t in times), max_later=2)
    assert result.later == (NOW + timedelta(milliseconds=10), NOW + timedelta(milliseconds=20))


changes = st.builds(
    RecordChange,
    st.sampled_from([None, "a", "b", "other"]),
    st.none() | st.integers(0, 7),
    st.none() | st.integers(-5_000, 5_000).map(lambda ms: NOW + timedelta(milliseconds=ms)),
)


@settings(derandomize=True, max_examples=300)
@given(st.lists(changes, max_size=30))
def test_every_change_of_these_names_is_woken_for_timed_or_beyond_the_horizon(
    batch: list[RecordChange],
) -> None:
    result = plan(*batch)
    mine = [c for c in batch if c.job_name is None or c.job_name in NAMES]
    due_now = [c for c in mine if c.next_run_at is None or c.next_run_at <= NOW]
    assert result.now == bool(due_now)
    assert set(result.partitions) == {c.partition for c in due_now if c.partition is not None}
    soon = {
        c.next_run_at
        for c in mine
        if c.next_run_at is not None and NOW < c.next_run_at <= NOW + HORIZON
    }
    assert result.later == tuple(sorted(soon))
