"""Claiming ahead: slots beyond workers_count while jobs are shorter than a claim's round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.lookahead import MIN_CLAIM_SECONDS, Lookahead
from dogs_core.errors import InvalidOptionError

seconds = st.floats(min_value=0, max_value=60, allow_nan=False)


def test_nothing_ahead_before_both_durations_were_seen() -> None:
    ahead = Lookahead(32)
    assert ahead.extra_slots == 0
    ahead.claim_took(0.01)
    assert ahead.extra_slots == 0
    ahead.job_took(0.001)
    assert ahead.extra_slots == 32


@given(claim=seconds, job=seconds, ceiling=st.integers(0, 256))
def test_ahead_exactly_while_jobs_are_shorter_than_claims(
    claim: float, job: float, ceiling: int
) -> None:
    ahead = Lookahead(ceiling)
    ahead.claim_took(claim)
    ahead.job_took(job)
    assert ahead.extra_slots == (ceiling if job < claim and claim >= MIN_CLAIM_SECONDS else 0)


@given(first=seconds, steady=seconds)
def test_the_averages_follow_what_is_observed(first: float, steady: float) -> None:
    ahead = Lookahead(8)
    ahead.job_took(first)
    for _ in range(200):
        ahead.job_took(steady)
    assert ahead.job_seconds == pytest.approx(steady, abs=1e-6 * max(1.0, first))


def test_claims_of_an_in_process_store_are_not_worth_claiming_ahead_of() -> None:
    ahead = Lookahead(32)
    ahead.claim_took(MIN_CLAIM_SECONDS / 4)
    ahead.job_took(0.0)
    assert ahead.extra_slots == 0


def test_jobs_that_grow_longer_than_claims_stop_the_lookahead() -> None:
    ahead = Lookahead(16)
    ahead.claim_took(0.01)
    for _ in range(10):
        ahead.job_took(0.001)
    assert ahead.extra_slots == 16
    for _ in range(30):
        ahead.job_took(1.0)  # the handlers started to take seconds
    assert ahead.extra_slots == 0


@pytest.mark.parametrize("ceiling", [-1, True, 1.5, "8", None])
def test_rejects_a_bad_ceiling(ceiling: object) -> None:
    with pytest.raises(InvalidOptionError, match="ceiling"):
        Lookahead(ceiling)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-0.1, math.nan, math.inf, True, "1", None])
def test_rejects_a_bad_duration_and_keeps_what_it_had(value: object) -> None:
    ahead = Lookahead(4)
    ahead.claim_took(0.5)
    with pytest.raises(InvalidOptionError, match="seconds"):
        ahead.claim_took(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="seconds"):
        ahead.job_took(value)  # type: ignore[arg-type]
    assert ahead.claim_seconds == 0.5
    assert ahead.job_seconds is None


def test_the_ledger_reserves_slots_claimed_ahead_and_stops_when_they_shrink() -> None:
    ledger = CapacityLedger(2, {"a": None})
    ledger.set_extra_slots(2)
    held = ledger.reserve_batch(8)
    assert len(held) == 4  # two worker slots and two ahead
    for reservation in held:
        ledger.settle(reservation, "a")
    assert ledger.active == 4
    assert ledger.free_slots == 0
    ledger.set_extra_slots(0)
    assert ledger.free_slots == -2
    assert ledger.is_full
    for _ in range(3):
        ledger.release("a")
    assert ledger.reserve() is not None  # one worker slot free again


@pytest.mark.parametrize("extra", [-1, True, 2.0, "2"])
def test_the_ledger_rejects_bad_extra_slots(extra: object) -> None:
    ledger = CapacityLedger(2, {"a": None})
    with pytest.raises(InvalidOptionError, match="extra_slots"):
        ledger.set_extra_slots(extra)  # type: ignore[arg-type]
    assert ledger.extra_slots == 0
