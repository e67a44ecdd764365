"""Adaptive claim sizes (:class:`~dogs_core.domain.pacing.ClaimSizing`): the batch starts at its
ceiling, shrinks to what a partial claim found and doubles back on full replies; claims in
flight grow while a batch's worth of slots is free and shrink on fragments; a miss changes
neither; going idle starts the claims in flight from one; fixed values never change. The
stateful test of ``test_pacing`` drives the adaptive pacer against its model too."""

from __future__ import annotations

import random

import pytest

from dogs_core.domain.capacity import CapacityLedger
from dogs_core.domain.pacing import Claim, ClaimPacer, ClaimSizing, Sleep
from dogs_core.domain.partitions import PartitionRotation
from dogs_core.errors import InvalidOptionError
from tests.domain.pacing_helpers import POLL, adaptive, claim, claims_until_blocked, make_pacer


@pytest.mark.parametrize(
    ("field", "args"), [("claim_batch_size", (0, 1)), ("claim_concurrency", (1, 0))]
)
def test_sizing_rejects_a_bad_ceiling(field: str, args: tuple[int, int]) -> None:
    with pytest.raises(InvalidOptionError) as info:
        ClaimSizing(*args, adapt_batch=True)
    assert info.value.field == field


def test_sizing_or_batch_size_not_both() -> None:
    with pytest.raises(InvalidOptionError) as info:
        ClaimPacer(
            CapacityLedger(4, {"a": None}),
            PartitionRotation(1, random.Random(1)),
            batch_size=2,
            poll_interval=POLL,
            sizing=adaptive(),
        )
    assert info.value.field == "batch_size"


def test_fixed_sizes_never_change() -> None:
    sizing = ClaimSizing(16, 8)
    assert not sizing.adaptive
    for asked, found, free in ((16, 16, 4), (16, 3, 0), (4, 0, 10)):
        sizing.replied(asked, found, free)
        assert (sizing.batch_size, sizing.concurrency) == (16, 8)
    sizing.reset()
    assert (sizing.batch_size, sizing.concurrency) == (16, 8)


def test_an_adaptive_batch_starts_at_its_ceiling() -> None:
    sizing = adaptive(batch=20)
    assert (sizing.batch_size, sizing.concurrency) == (20, 1)


def test_a_partial_reply_shrinks_the_batch_and_full_replies_double_it_back() -> None:
    sizing = adaptive(batch=20)
    sizing.replied(20, 3, 0)
    assert sizing.batch_size == 3  # what was found
    seen = []
    for _ in range(4):
        asked = sizing.batch_size
        sizing.replied(asked, asked, 0)
        seen.append(sizing.batch_size)
    assert seen == [6, 12, 20, 20]  # up to its ceiling


def test_a_full_reply_to_a_smaller_claim_does_not_shrink_the_batch() -> None:
    sizing = adaptive(batch=16)
    sizing.replied(3, 3, 0)  # only three slots were free: full, says nothing against 16
    assert sizing.batch_size == 16


def test_a_miss_changes_neither_size() -> None:
    sizing = ClaimSizing(4, 8, adapt_batch=True, adapt_concurrency=True)
    sizing.replied(4, 4, 10)
    assert (sizing.batch_size, sizing.concurrency) == (4, 2)
    sizing.replied(4, 0, 10)  # one partition ran dry: others may still be full
    assert (sizing.batch_size, sizing.concurrency) == (4, 2)


def test_claims_in_flight_grow_while_replies_are_full_and_a_batch_of_slots_is_free() -> None:
    sizing = ClaimSizing(16, 3, adapt_batch=True, adapt_concurrency=True)
    steps = [
        ((16, 16, 0), (16, 1)),  # full, but no slot left: one claim in flight is enough
        ((16, 16, 20), (16, 2)),  # full, and room for a whole batch more
        ((16, 16, 20), (16, 3)),
        ((16, 16, 20), (16, 3)),  # the ceiling
        ((5, 5, 20), (16, 2)),  # a fragment: the free slots bound it, not the batch size
        ((16, 8, 20), (8, 1)),  # partial: the backlog is thin, back to one
    ]
    for (asked, found, free), expected in steps:
        sizing.replied(asked, found, free)
        assert (sizing.batch_size, sizing.concurrency) == expected, (asked, found, free)


def test_a_reset_starts_claims_in_flight_from_one_and_keeps_the_batch() -> None:
    sizing = ClaimSizing(4, 8, adapt_batch=True, adapt_concurrency=True)
    for _ in range(3):
        sizing.replied(4, 4, 8)
    sizing.replied(4, 2, 8)
    sizing.replied(2, 2, 8)
    assert (sizing.batch_size, sizing.concurrency) == (4, 2)
    sizing.reset()
    assert (sizing.batch_size, sizing.concurrency) == (4, 1)


@pytest.mark.parametrize("how", ["sweep of misses", "failure"])
def test_going_idle_resets_an_adaptive_pacers_claims_in_flight(how: str) -> None:
    pacer = make_pacer(partitions=2, workers=32, sizing=adaptive(batch=4))
    for _ in range(3):
        sent = claim(pacer)
        pacer.claimed(sent, ["a"] * len(sent.reservations), 0.0)
    assert pacer.sizing.concurrency > 1
    pending = claims_until_blocked(pacer)
    if how == "failure":
        pacer.failed(pending[0], 0.0)
    else:
        for c in pending:
            pacer.claimed(c, [], 0.0)
        while isinstance(step := pacer.next(0.0), Claim):
            pacer.claimed(step, [], 0.0)
    assert pacer.idle_until is not None
    assert (pacer.sizing.batch_size, pacer.sizing.concurrency) == (4, 1)


def test_an_adaptive_pacer_claims_every_free_slot_then_what_a_thin_backlog_holds() -> None:
    pacer = make_pacer(partitions=1, workers=32, sizing=adaptive())
    first = claim(pacer)
    assert len(first.reservations) == 32  # the ceiling is the free slots
    pacer.claimed(first, ["a"] * 5, 0.0)  # partial: five jobs were left
    for _ in range(5):
        pacer.released("a")
    assert len(claim(pacer).reservations) == 5


def test_an_adaptive_pacer_limits_hot_claims_in_flight() -> None:
    sizing = ClaimSizing(2, 2, adapt_batch=True, adapt_concurrency=True)
    pacer = make_pacer(partitions=4, workers=32, sizing=sizing)
    first = claim(pacer)
    pacer.claimed(first, ["a", "a"], 0.0)  # full with free slots: two claims in flight now
    assert pacer.hot
    assert pacer.sizing.concurrency == 2
    sent = claims_until_blocked(pacer)
    assert len(sent) == 2
    assert pacer.claims_in_flight == 2
    assert pacer.ledger.free_slots > 0  # capacity is free, the limit binds


def test_an_idle_adaptive_pacer_sweeps_once_per_poll_interval() -> None:
    pacer = make_pacer(partitions=3, workers=32, sizing=adaptive())
    for now in (0.0, POLL):
        partitions = []
        while isinstance(step := pacer.next(now), Claim):
            partitions.append(step.partition)
            pacer.claimed(step, [], now)
        assert sorted(partitions) == [0, 1, 2]  # one sweep: each partition once
        assert step == Sleep(now + POLL)
