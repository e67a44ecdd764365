"""Pacing of the partition reconciler."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.reconcile import (
    BATCH_SIZE,
    FULL_BATCH_PAUSE,
    IDLE_INTERVAL,
    MAX_JITTER,
    STARTUP_DELAY,
    next_reconcile_delay,
)
from dogs_core.errors import InvalidOptionError

fractions = st.floats(min_value=0, max_value=1, exclude_max=True)
batch_sizes = st.integers(min_value=1, max_value=10_000)


def test_constants_match_the_spec() -> None:
    assert BATCH_SIZE == 500
    assert timedelta(milliseconds=250) == FULL_BATCH_PAUSE
    assert timedelta(minutes=5) == IDLE_INTERVAL
    assert timedelta(seconds=30) == MAX_JITTER
    assert timedelta(0) == STARTUP_DELAY


@given(batch_sizes, st.data(), fractions)
def test_a_full_batch_continues_after_a_short_pause(
    batch_size: int, data: st.DataObject, fraction: float
) -> None:
    modified = data.draw(st.integers(min_value=batch_size, max_value=batch_size * 3))
    assert next_reconcile_delay(modified, fraction, batch_size) == FULL_BATCH_PAUSE


@given(batch_sizes, st.data(), fractions)
def test_a_partial_batch_waits_the_jittered_interval(
    batch_size: int, data: st.DataObject, fraction: float
) -> None:
    modified = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=batch_size - 1)))
    delay = next_reconcile_delay(modified, fraction, batch_size)
    assert IDLE_INTERVAL <= delay < IDLE_INTERVAL + MAX_JITTER
    # the jitter is the fraction of 30 s, truncated to whole microseconds
    jitter = (delay - IDLE_INTERVAL).total_seconds()
    assert jitter <= fraction * 30 + 1e-9
    assert jitter > fraction * 30 - 2e-6


@given(fractions)
def test_a_failure_counts_as_nothing_modified(fraction: float) -> None:
    assert next_reconcile_delay(None, fraction) == next_reconcile_delay(0, fraction)


@given(st.integers(min_value=0, max_value=2000), fractions, fractions)
def test_jitter_is_monotonic_in_the_fraction(modified: int, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert next_reconcile_delay(modified, low) <= next_reconcile_delay(modified, high)


def test_default_batch_size_is_500() -> None:
    assert next_reconcile_delay(500, 0.5) == FULL_BATCH_PAUSE
    assert next_reconcile_delay(499, 0.5) == IDLE_INTERVAL + timedelta(seconds=15)


def test_jitter_bounds() -> None:
    assert next_reconcile_delay(0, 0.0) == IDLE_INTERVAL
    largest_below_one = math.nextafter(1.0, 0.0)
    assert next_reconcile_delay(0, largest_below_one) < IDLE_INTERVAL + MAX_JITTER
    assert next_reconcile_delay(0, 0) == IDLE_INTERVAL  # an int 0 is a fine fraction


def test_random_random_feeds_it() -> None:
    rng = random.Random(5)
    for _ in range(100):
        assert IDLE_INTERVAL <= next_reconcile_delay(3, rng.random()) < IDLE_INTERVAL + MAX_JITTER


@pytest.mark.parametrize("fraction", [1.0, -0.1, 1.5, math.nan, math.inf, -math.inf, True, "0.5"])
def test_rejects_bad_jitter_fractions(fraction: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        next_reconcile_delay(0, fraction)  # type: ignore[arg-type]
    assert info.value.field == "jitter_fraction"


@pytest.mark.parametrize("modified", [-1, True, 1.5, "3"])
def test_rejects_bad_modified_counts(modified: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        next_reconcile_delay(modified, 0.5)  # type: ignore[arg-type]
    assert info.value.field == "modified"


@pytest.mark.parametrize("batch_size", [0, -5, False, 2.0])
def test_rejects_bad_batch_sizes(batch_size: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        next_reconcile_delay(0, 0.5, batch_size)  # type: ignore[arg-type]
    assert info.value.field == "batch_size"
