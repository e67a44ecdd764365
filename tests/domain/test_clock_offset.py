"""The clock-offset estimate: within its uncertainty of the true offset, the tightest sample kept,
zero when it cannot be told from zero; the tracker's pacing and its warnings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.clock_offset import (
    SERVER_RESOLUTION,
    ClockOffsetTracker,
    ClockSample,
    best_estimate,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _millis(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@st.composite
def measurement(draw: st.DrawFn) -> tuple[timedelta, list[ClockSample]]:
    """A true offset and samples of it: each request takes ``out`` to reach the server and
    ``back`` to return, and the server's reading is truncated to the millisecond."""
    true_offset = timedelta(microseconds=draw(st.integers(-120_000_000, 120_000_000)))
    samples = []
    local = T0
    for _ in range(draw(st.integers(1, 5))):
        out = timedelta(microseconds=draw(st.integers(0, 50_000)))
        back = timedelta(microseconds=draw(st.integers(0, 50_000)))
        server = _millis(local + out + true_offset)
        samples.append(ClockSample(local, server, local + out + back))
        local += out + back + timedelta(milliseconds=draw(st.integers(0, 100)))
    return true_offset, samples


@given(measurement())
def test_the_true_offset_lies_within_the_estimate_s_uncertainty_or_near_zero(
    case: tuple[timedelta, list[ClockSample]],
) -> None:
    true_offset, samples = case
    estimate = best_estimate(samples)
    assert estimate is not None
    if estimate.offset:
        assert abs(estimate.offset - true_offset) <= estimate.uncertainty
    else:  # taken as zero: it was within its uncertainty of zero
        assert abs(true_offset) <= 2 * estimate.uncertainty


@given(measurement())
def test_the_sample_with_the_shortest_round_trip_wins(
    case: tuple[timedelta, list[ClockSample]],
) -> None:
    _, samples = case
    estimate = best_estimate(samples)
    tightest = min(sample.round_trip for sample in samples)
    assert estimate is not None
    assert estimate.uncertainty == tightest / 2 + SERVER_RESOLUTION


def test_clocks_that_agree_give_exactly_zero() -> None:
    sample = ClockSample(T0 + timedelta(microseconds=700), T0, T0 + timedelta(microseconds=900))
    estimate = best_estimate([sample])
    assert estimate is not None
    assert estimate.offset == timedelta(0)


def test_no_samples_no_estimate() -> None:
    assert best_estimate([]) is None


def test_the_tracker_is_due_first_then_every_interval() -> None:
    tracker = ClockOffsetTracker(timedelta(seconds=60))
    assert tracker.due(T0)
    tracker.adopt([ClockSample(T0, T0 - timedelta(seconds=60), T0)], T0)
    assert tracker.offset == timedelta(seconds=-60)
    assert not tracker.due(T0 + timedelta(seconds=59))
    assert tracker.due(T0 + timedelta(seconds=60))
    assert tracker.due(T0 - timedelta(seconds=1))  # the local clock stepped back


def test_a_tracker_without_an_interval_never_measures() -> None:
    tracker = ClockOffsetTracker(None)
    assert not tracker.due(T0)
    assert tracker.offset == timedelta(0)


def test_a_failed_measurement_keeps_the_offset() -> None:
    tracker = ClockOffsetTracker(timedelta(seconds=60))
    tracker.adopt([ClockSample(T0, T0 + timedelta(seconds=5), T0)], T0)
    assert not tracker.adopt([], T0 + timedelta(seconds=60))
    assert tracker.offset == timedelta(seconds=5)


def test_a_warning_once_per_offset_of_a_second_or_more() -> None:
    tracker = ClockOffsetTracker(timedelta(seconds=60))

    def adopt(seconds: float) -> bool:
        return tracker.adopt([ClockSample(T0, T0 + timedelta(seconds=seconds), T0)], T0)

    assert not adopt(0.5)
    assert adopt(60)
    assert not adopt(60.4)  # the same skew, measured again
    assert adopt(62)  # it moved by a second or more
    assert adopt(-3)
