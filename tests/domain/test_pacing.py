"""The claim pacer: capacity reservations, hot and cold, batch partitions, idle, wakes and caps.

Examples for each rule of the module docstring, then a stateful hypothesis test that drives
``next`` / ``claimed`` / ``failed`` / ``wake`` / ``released`` and the loop clock in arbitrary
interleavings against a small model of the pacer. Times are integer-valued loop seconds.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dogs_core.domain.capacity import Reservation
from dogs_core.domain.pacing import (
    Claim,
    PacerStep,
    Sleep,
    WaitForCapacity,
)
from dogs_core.errors import InvalidOptionError, WorkersStateError
from tests.domain.pacing_helpers import (
    POLL,
    ScriptedRandom,
    adaptive,
    claim,
    claims_until_blocked,
    make_pacer,
)

# -- construction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [0, -1, True, 1.5, "2", None])
def test_rejects_a_bad_batch_size(batch_size: Any) -> None:
    with pytest.raises(InvalidOptionError) as info:
        make_pacer(batch_size=batch_size)
    assert info.value.field == "claim_batch_size"


@pytest.mark.parametrize("poll_interval", [0, 0.0, -1.0, math.nan])
def test_rejects_a_bad_poll_interval(poll_interval: float) -> None:
    with pytest.raises(InvalidOptionError) as info:
        make_pacer(poll_interval=poll_interval)
    assert info.value.field == "poll_interval"


@pytest.mark.parametrize("poll_interval", [None, "5"])
def test_rejects_a_non_numeric_poll_interval(poll_interval: Any) -> None:
    try:
        with pytest.raises(InvalidOptionError, match="poll_interval"):
            make_pacer(poll_interval=poll_interval)
    except TypeError as error:
        raise AssertionError(f"TypeError instead of InvalidOptionError: {error}") from error


def test_initial_state() -> None:
    pacer = make_pacer(partitions=3, workers=2)
    assert pacer.ledger.workers_count == 2
    assert not pacer.hot
    assert pacer.idle_until is None
    assert pacer.claims_in_flight == 0
    assert pacer.generation == 0
    assert pacer.sweep_remaining() == 3


# -- hot and cold ---------------------------------------------------------------------------------


def test_a_cold_pacer_sends_one_claim_per_partition_before_any_reply() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    sent = claims_until_blocked(pacer)
    assert len(sent) == 3
    assert {c.partition for c in sent} == {0, 1, 2}  # one sweep: each partition once
    assert all(len(c.reservations) == 1 and not c.batch for c in sent)
    assert pacer.claims_in_flight == 3
    assert pacer.ledger.reserved == 3


def test_a_single_partition_allows_one_cold_claim() -> None:
    pacer = make_pacer(partitions=1, workers=10)
    assert len(claims_until_blocked(pacer)) == 1


def test_a_hit_makes_the_pacer_hot_and_every_slot_may_claim() -> None:
    pacer = make_pacer(partitions=2, workers=6)
    first, _second = claims_until_blocked(pacer)
    pacer.claimed(first, ["a"], 1.0)
    assert pacer.hot
    assert pacer.ledger.active == 1
    more = claims_until_blocked(pacer, 1.0)
    # 6 slots: 1 running, 1 claim still in flight, 4 new claims; then the ledger is full.
    assert len(more) == 4
    assert pacer.claims_in_flight == 5
    assert pacer.ledger.free_slots == 0


def test_a_miss_makes_the_pacer_cold_again() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    sent = claims_until_blocked(pacer)
    assert len(sent) == 9
    pacer.claimed(sent[0], [], 0.0)
    assert not pacer.hot
    assert pacer.sweep_remaining() == 2
    # 8 claims still in flight, more than the sweep has left: nothing more until replies.
    assert pacer.next(0.0) == WaitForCapacity()


def test_misses_shrink_what_a_cold_sweep_still_sends() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    a, b, _c = claims_until_blocked(pacer)
    pacer.claimed(a, [], 0.0)
    assert pacer.sweep_remaining() == 2
    assert pacer.next(0.0) == WaitForCapacity()  # b and c are still reading the other two
    pacer.claimed(b, [], 0.0)
    assert pacer.sweep_remaining() == 1
    assert pacer.next(0.0) == WaitForCapacity()  # c reads the last one
    assert pacer.idle_until is None


# -- idle -----------------------------------------------------------------------------------------


def test_a_full_sweep_of_misses_sleeps_for_the_poll_interval() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    sent = claims_until_blocked(pacer)
    pacer.claimed(sent[0], [], 10.0)
    pacer.claimed(sent[1], [], 11.0)
    assert pacer.idle_until is None
    pacer.claimed(sent[2], [], 12.0)
    assert pacer.idle_until == 12.0 + POLL
    assert pacer.next(12.0) == Sleep(until=12.0 + POLL)
    assert pacer.next(16.9) == Sleep(until=12.0 + POLL)
    # Once the time has come, the lanes claim again (a new sweep) and the pacer is not idle.
    again = pacer.next(17.0)
    assert isinstance(again, Claim)
    assert pacer.idle_until is None
    assert pacer.sweep_remaining() == 3


def test_a_miss_sweep_needs_every_partition() -> None:
    pacer = make_pacer(partitions=2, workers=10)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    sent = claims_until_blocked(pacer)
    same = [c for c in sent if c.partition == first.partition]
    other = [c for c in sent if c.partition != first.partition]
    assert len(same) >= 2
    assert other
    for c in same:  # any number of misses of one partition is not a sweep
        pacer.claimed(c, [], 0.0)
    assert pacer.idle_until is None
    pacer.claimed(other[0], [], 0.0)
    assert pacer.idle_until == POLL


def test_a_hit_restarts_the_sweep() -> None:
    pacer = make_pacer(partitions=2, workers=10)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    sent = claims_until_blocked(pacer)
    p0 = [c for c in sent if c.partition == 0]
    p1 = [c for c in sent if c.partition == 1]
    pacer.claimed(p0[0], [], 0.0)
    pacer.claimed(p1[0], ["b"], 0.0)
    pacer.claimed(p0[1], [], 0.0)
    assert pacer.idle_until is None  # partition 0 missed twice, partition 1 not since the hit
    assert pacer.sweep_remaining() == 1


def test_a_failed_claim_sleeps_and_abandons_the_sweep() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    a, b, _c = claims_until_blocked(pacer)
    pacer.claimed(a, [], 0.0)
    pacer.failed(b, 3.0)
    assert not pacer.hot
    assert pacer.idle_until == 3.0 + POLL
    assert pacer.sweep_remaining() == 3
    assert pacer.ledger.reserved == 1  # c still holds its slot
    assert pacer.next(3.0) == Sleep(3.0 + POLL)


def test_a_second_failure_does_not_push_the_sleep_back() -> None:
    pacer = make_pacer(partitions=2, workers=10)
    a, b = claims_until_blocked(pacer)
    pacer.failed(a, 1.0)
    pacer.failed(b, 4.0)
    assert pacer.idle_until == 1.0 + POLL
    assert pacer.ledger.reserved == 0


def test_a_failure_after_a_hit_makes_the_pacer_cold() -> None:
    pacer = make_pacer(partitions=2, workers=10)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    second = claim(pacer)
    pacer.failed(second, 0.0)
    assert not pacer.hot
    assert pacer.ledger.active == 1


# -- wake -----------------------------------------------------------------------------------------


def test_wake_ends_the_sleep_and_bumps_the_generation() -> None:
    pacer = make_pacer(partitions=1, workers=2)
    pacer.claimed(claim(pacer), [], 0.0)
    assert pacer.next(1.0) == Sleep(POLL)
    pacer.wake()
    assert pacer.idle_until is None
    assert pacer.generation == 1
    woken = pacer.next(1.0)
    assert isinstance(woken, Claim)
    assert woken.generation == 1


def test_wake_starts_a_new_sweep() -> None:
    pacer = make_pacer(partitions=3, workers=10)
    a, b, _c = claims_until_blocked(pacer)
    pacer.claimed(a, [], 0.0)
    pacer.claimed(b, [], 0.0)
    assert pacer.sweep_remaining() == 1
    pacer.wake()
    assert pacer.sweep_remaining() == 3


def test_a_miss_of_a_claim_sent_before_a_wake_never_sleeps() -> None:
    pacer = make_pacer(partitions=2, workers=10)
    a, b = claims_until_blocked(pacer)
    assert (a.generation, b.generation) == (0, 0)
    pacer.wake()
    pacer.claimed(a, [], 1.0)
    pacer.claimed(b, [], 1.0)
    assert pacer.idle_until is None
    assert not pacer.hot
    assert pacer.sweep_remaining() == 2  # those misses do not count for the new sweep
    assert isinstance(pacer.next(1.0), Claim)


def test_only_a_miss_of_the_current_generation_completes_the_sweep() -> None:
    pacer = make_pacer(partitions=1, workers=10)
    old = claim(pacer)
    pacer.wake()
    # The old claim still counts as in flight for the cold limit of the new sweep.
    assert pacer.next(0.0) == WaitForCapacity()
    pacer.claimed(old, [], 0.0)
    assert pacer.idle_until is None
    new = claim(pacer)
    assert new.generation == 1
    pacer.claimed(new, [], 0.0)
    assert pacer.idle_until == POLL


def test_an_old_generation_hit_still_counts() -> None:
    pacer = make_pacer(partitions=1, workers=10)
    old = claim(pacer)
    pacer.wake()
    pacer.claimed(old, ["a"], 0.0)
    assert pacer.hot


# -- batch claims and partitions ------------------------------------------------------------------


def test_a_batch_claim_reserves_up_to_the_batch_size() -> None:
    pacer = make_pacer(partitions=2, workers=10, batch_size=4)
    batch = claim(pacer)
    assert batch.batch
    assert len(batch.reservations) == 4
    assert batch.names == ("a", "b")
    assert not batch.names_filtered
    assert all(r.names == batch.names for r in batch.reservations)
    assert pacer.ledger.reserved == 4


def test_a_batch_claim_takes_no_more_than_the_free_slots() -> None:
    pacer = make_pacer(partitions=2, workers=5, batch_size=4)
    first = claim(pacer)
    assert len(first.reservations) == 2  # cold: its share of the five slots
    second = claim(pacer)
    assert len(second.reservations) == 3  # the three left, fewer than the batch size
    assert pacer.ledger.free_slots == 0
    assert pacer.next(0.0) == WaitForCapacity()
    pacer.claimed(second, ["a", "a", "a"], 0.0)
    pacer.claimed(first, ["a"], 0.0)  # one of its two slots comes back
    last = claim(pacer)
    assert len(last.reservations) == 1  # one slot left: a single claim
    assert not last.batch


def test_a_cold_sweep_splits_the_free_slots_over_its_partitions() -> None:
    # 32 slots, 8 partitions, batches of up to 32: the sweep's eight claims go out together
    # (a first claim for all 32 slots would leave the other seven waiting for its reply).
    pacer = make_pacer(partitions=8, workers=32, sizing=adaptive(32, 8))
    sweep = claims_until_blocked(pacer)
    assert [len(c.reservations) for c in sweep] == [4] * 8
    assert sorted(c.partition for c in sweep) == list(range(8))
    pacer.claimed(sweep[0], ["a"] * 4, 0.0)  # a hit: hot, the batch asks for what is free
    for sent in sweep[1:]:
        pacer.claimed(sent, [], 0.0)
    assert len(claim(pacer).reservations) == 28


def test_a_partition_a_wake_announced_is_claimed_first_with_every_free_slot() -> None:
    pacer = make_pacer(partitions=8, workers=32, sizing=adaptive(32, 8))
    pacer.wake([3])
    first = claim(pacer)
    assert (first.partition, len(first.reservations)) == (3, 32)
    assert pacer.next(0.0) == WaitForCapacity()  # the rest of the sweep only if it misses
    pacer.claimed(first, [], 0.0)
    rest = claims_until_blocked(pacer)
    assert len({c.partition for c in rest}) == 7  # the sweep's other seven claims, together
    assert [len(c.reservations) for c in rest] == [4, 4, 4, 5, 5, 5, 5]


def test_a_cold_sweep_leaves_an_uneven_remainder_to_its_last_claim() -> None:
    pacer = make_pacer(partitions=3, workers=10, batch_size=8)
    sweep = claims_until_blocked(pacer)
    assert [len(c.reservations) for c in sweep] == [3, 3, 4]


def test_batch_claims_in_flight_never_share_a_partition() -> None:
    pacer = make_pacer(partitions=3, workers=30, batch_size=2)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)  # hot: only the partitions limit the batches now
    sent = claims_until_blocked(pacer)
    assert len(sent) == 3
    assert all(c.batch for c in sent)
    assert sorted(c.partition for c in sent) == [0, 1, 2]
    # Every partition has a batch claim: the lane waits, and gives its reservations back.
    reserved = pacer.ledger.reserved
    assert reserved == 6
    assert pacer.next(0.0) == WaitForCapacity()
    assert pacer.ledger.reserved == reserved
    assert pacer.claims_in_flight == 3
    # A reply frees its partition for the next batch.
    pacer.claimed(sent[1], ["a", "b"], 0.0)
    after = claim(pacer)
    assert after.partition == sent[1].partition


def test_one_partition_serialises_batch_claims() -> None:
    pacer = make_pacer(partitions=1, workers=10, batch_size=3)
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    second = claim(pacer)
    assert second.batch
    assert pacer.next(0.0) == WaitForCapacity()
    assert pacer.ledger.reserved == 3


def test_a_single_claim_may_share_a_partition_with_a_batch() -> None:
    pacer = make_pacer(partitions=1, workers=4, batch_size=2)
    first = claim(pacer)
    assert first.batch
    pacer.claimed(first, ["a"], 0.0)  # hot; 1 running, 3 free
    batch = claim(pacer)
    assert batch.batch
    single = claim(pacer)  # one free slot: a single claim, on the partition the batch reads
    assert not single.batch
    assert single.partition == batch.partition
    assert pacer.ledger.free_slots == 0


def test_a_batch_claim_reply_settles_every_reservation() -> None:
    pacer = make_pacer(partitions=2, workers=10, batch_size=3)
    batch = claim(pacer)
    pacer.claimed(batch, ["b", "a"], 0.0)  # two of three found
    assert pacer.ledger.active == 2
    assert pacer.ledger.active_by_name == {"a": 1, "b": 1}
    assert pacer.ledger.reserved == 0
    assert pacer.hot


def test_a_batch_claim_finds_the_free_partition_across_a_reshuffle() -> None:
    # Passes: [0, 1], then [0, 1], then [1, 0].
    rng = ScriptedRandom([0, 1], [0, 1], [1, 0])
    pacer = make_pacer(partitions=2, workers=20, batch_size=2, rng=rng)
    x = claim(pacer)
    y = claim(pacer)
    assert (x.partition, y.partition) == (0, 1)
    pacer.claimed(x, ["a"], 0.0)
    z = claim(pacer)  # second pass, its first partition
    assert z.partition == 0
    pacer.claimed(z, ["a"], 0.0)
    # Only partition 1 (y) has a batch claim in flight; the cursor is on 1, the next pass
    # starts with 1 again.
    step = pacer.next(0.0)
    assert isinstance(step, Claim)
    assert step.partition == 0


# -- capped names ---------------------------------------------------------------------------------


def test_a_batch_stops_where_a_cap_binds() -> None:
    pacer = make_pacer(partitions=2, workers=10, caps={"a": 2, "b": None}, batch_size=4)
    first = claim(pacer)
    assert len(first.reservations) == 2  # a third reservation could not offer "a"
    assert first.names == ("a", "b")
    assert pacer.ledger.reserved_by_name == {"a": 2, "b": 0}
    assert pacer.ledger.reserved == 2
    second = claim(pacer)
    assert second.names == ("b",)
    assert second.names_filtered
    assert len(second.reservations) == 4


def test_a_cap_of_zero_leaves_the_name_out() -> None:
    pacer = make_pacer(partitions=1, workers=4, caps={"a": 0, "b": None}, batch_size=2)
    batch = claim(pacer)
    assert batch.names == ("b",)
    assert batch.names_filtered


def test_nothing_to_claim_when_every_name_is_at_its_cap() -> None:
    pacer = make_pacer(partitions=2, workers=10, caps={"a": 1})
    only = claim(pacer)
    assert pacer.next(0.0) == WaitForCapacity()
    pacer.claimed(only, ["a"], 0.0)
    assert pacer.next(0.0) == WaitForCapacity()
    assert pacer.ledger.reserved == 0


def test_releasing_a_capped_name_wakes_the_lanes() -> None:
    pacer = make_pacer(partitions=1, workers=10, caps={"a": 1, "b": None})
    first = claim(pacer)
    pacer.claimed(first, ["a"], 0.0)
    pacer.claimed(claim(pacer), [], 0.0)  # a sweep without "a": idle
    assert pacer.idle_until == POLL
    assert pacer.released("a") is True
    assert pacer.idle_until is None
    assert pacer.generation == 1
    again = claim(pacer)
    assert again.names == ("a", "b")


def test_releasing_an_uncapped_name_does_not_wake() -> None:
    pacer = make_pacer(partitions=1, workers=10, caps={"a": 1, "b": None})
    first = claim(pacer)
    pacer.claimed(first, ["b"], 0.0)
    pacer.claimed(claim(pacer), [], 0.0)
    assert pacer.released("b") is False
    assert pacer.idle_until == POLL
    assert pacer.generation == 0
    assert pacer.ledger.active == 0


# -- misuse ---------------------------------------------------------------------------------------


def test_reporting_a_claim_twice_is_an_error() -> None:
    pacer = make_pacer()
    first = claim(pacer)
    pacer.claimed(first, [], 0.0)
    with pytest.raises(WorkersStateError):
        pacer.claimed(first, [], 0.0)
    with pytest.raises(WorkersStateError):
        pacer.failed(first, 0.0)
    second = claim(pacer)
    pacer.failed(second, 0.0)
    with pytest.raises(WorkersStateError):
        pacer.claimed(second, ["a"], 0.0)


def test_a_claim_of_another_pacer_is_an_error() -> None:
    other = claim(make_pacer())
    with pytest.raises(WorkersStateError):
        make_pacer().claimed(other, [], 0.0)


def test_more_jobs_than_reservations_is_rejected_and_changes_nothing() -> None:
    pacer = make_pacer(batch_size=2)
    batch = claim(pacer)
    with pytest.raises(InvalidOptionError) as info:
        pacer.claimed(batch, ["a", "a", "b"], 0.0)
    assert info.value.field == "job_names"
    assert pacer.claims_in_flight == 1
    assert pacer.ledger.reserved == 2
    pacer.claimed(batch, ["a", "a"], 0.0)  # the claim can still be reported
    assert pacer.ledger.active == 2


def test_a_job_name_the_claim_did_not_offer_is_rejected_and_changes_nothing() -> None:
    pacer = make_pacer(caps={"a": None, "b": None})
    single = claim(pacer)
    with pytest.raises(InvalidOptionError):
        pacer.claimed(single, ["not-offered"], 0.0)
    assert pacer.claims_in_flight == 1
    assert pacer.ledger.reserved == 1
    pacer.claimed(single, [], 0.0)
    assert pacer.ledger.free_slots == pacer.ledger.workers_count


def test_released_without_an_execution_is_an_error() -> None:
    pacer = make_pacer(caps={"a": 1})
    with pytest.raises(WorkersStateError):
        pacer.released("a")
    assert pacer.generation == 0


# -- stateful: arbitrary interleavings against a model --------------------------------------------

NAMES = ("a", "b", "c")
caps_strategy = st.fixed_dictionaries(
    {"a": st.one_of(st.none(), st.integers(0, 3))},
    optional={name: st.one_of(st.none(), st.integers(0, 3)) for name in NAMES[1:]},
)


class PacerMachine(RuleBasedStateMachine):
    """Lanes asking ``next``, replies in any order, wakes, releases and time passing."""

    def __init__(self) -> None:
        super().__init__()
        self.pacer = make_pacer()
        self.n = 3
        self.workers = 8
        self.caps: dict[str, int | None] = {"a": None, "b": None}
        self.batch_size = 1
        self.poll = POLL
        self.now = 0.0
        self.in_flight: list[Claim] = []
        self.running: Counter[str] = Counter()
        # The model: what the pacer should be in.
        self.hot = False
        self.idle_until: float | None = None
        self.generation = 0
        self.missed: set[int] = set()
        self.just_woke = False
        # Adaptive sizes: the model's batch size and claims in flight while hot.
        self.adapt = False
        self.concurrency = 1
        self.model_batch = 1
        self.model_concurrency = 1

    @initialize(
        n=st.integers(1, 4),
        workers=st.integers(1, 10),
        caps=caps_strategy,
        batch_size=st.integers(1, 4),
        poll=st.integers(1, 10),
        seed=st.integers(0, 2**16),
        adapt=st.booleans(),
        concurrency=st.integers(1, 4),
    )
    def start(
        self,
        n: int,
        workers: int,
        caps: dict[str, int | None],
        batch_size: int,
        poll: int,
        seed: int,
        adapt: bool,
        concurrency: int,
    ) -> None:
        self.n, self.workers, self.caps, self.batch_size = n, workers, caps, batch_size
        self.poll = float(poll)
        self.adapt, self.concurrency = adapt, concurrency
        self.model_batch = batch_size
        sizing = adaptive(batch_size, concurrency) if adapt else None
        self.pacer = make_pacer(
            partitions=n,
            workers=workers,
            caps=caps,
            batch_size=batch_size,
            poll_interval=self.poll,
            rng=random.Random(seed),
            sizing=sizing,
        )

    def _size_after_reply(self, asked: int, found: int) -> None:
        if not self.adapt:
            return
        if found >= asked and found > 0:
            fragment = asked < self.model_batch
            self.model_batch = min(self.batch_size, max(self.model_batch, 2 * asked))
            if fragment:
                self.model_concurrency = max(1, self.model_concurrency - 1)
            elif self.pacer.ledger.free_slots >= self.model_batch:
                self.model_concurrency = min(self.concurrency, self.model_concurrency + 1)
        elif found > 0:
            self.model_batch = found
            self.model_concurrency = 1

    # -- the expected next step -------------------------------------------------------------------

    def _batch_length(self) -> int:
        """How many reservations a claim sent now takes (0: none can be sent)."""
        ledger = self.pacer.ledger
        claimable = ledger.claimable()
        if not claimable.can_claim:
            return 0
        size = self.model_batch if self.adapt else self.batch_size
        unsent = max(1, self.n - len(self.missed)) - len(self.in_flight)
        if not self.hot and size > 1 and unsent > 1:
            # Cold: the free slots split over the partitions the sweep has still to try.
            size = max(1, min(size, claimable.free_slots // unsent))
        length = min(size, claimable.free_slots)
        active, reserved = ledger.active_by_name, ledger.reserved_by_name
        for name in claimable.names:
            cap = self.caps[name]
            if cap is not None:
                length = min(length, cap - active[name] - reserved[name])
        return length

    @rule()
    def step(self) -> None:
        ledger = self.pacer.ledger
        if self.idle_until is not None and self.now < self.idle_until:
            assert not self.just_woke
            assert self.pacer.next(self.now) == Sleep(self.idle_until)
            return
        self.idle_until = None
        remaining = max(1, self.n - len(self.missed))
        cold_blocked = not self.hot and len(self.in_flight) >= remaining
        hot_blocked = self.hot and self.adapt and len(self.in_flight) >= self.model_concurrency
        length = 0 if cold_blocked or hot_blocked else self._batch_length()
        busy = {c.partition for c in self.in_flight if c.batch}
        claimable = ledger.claimable()
        reserved = ledger.reserved

        result: PacerStep = self.pacer.next(self.now)
        self.just_woke = False

        assert not isinstance(result, Sleep)
        if isinstance(result, WaitForCapacity):
            # Nothing held by a claim that was not sent.
            assert ledger.reserved == reserved
            # Only a batch may wait for a partition, and only when every one has a batch.
            assert length != 1, (length, busy)
            assert length == 0 or len(busy) == self.n, (length, busy)
            return
        assert length > 0
        assert len(result.reservations) == length
        assert length <= self.batch_size
        assert length <= claimable.free_slots
        assert result.names == claimable.names
        assert result.names_filtered is claimable.names_filtered
        assert all(r.names == result.names for r in result.reservations)
        assert result.generation == self.generation
        assert 0 <= result.partition < self.n
        if result.batch:
            assert result.partition not in busy
        if not self.hot:
            assert len(self.in_flight) + 1 <= remaining
        elif self.adapt:
            assert len(self.in_flight) + 1 <= self.model_concurrency
        assert ledger.reserved == reserved + length
        self.in_flight.append(result)

    # -- replies ----------------------------------------------------------------------------------

    def _replied(self, sent: Claim, names: list[str]) -> None:
        self.just_woke = False
        self.in_flight.remove(sent)
        self.running.update(names)
        if names:
            self.hot = True
            self.missed.clear()
            self.idle_until = None  # jobs were found: a sleep begun meanwhile is over
            return
        self.hot = False
        if sent.generation == self.generation:
            self.missed.add(sent.partition)
            if len(self.missed) == self.n:
                self.missed.clear()
                self.model_concurrency = 1
                if self.idle_until is None:
                    self.idle_until = self.now + self.poll

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def reply(self, data: st.DataObject) -> None:
        sent = data.draw(st.sampled_from(self.in_flight), label="claim")
        names = data.draw(
            st.lists(st.sampled_from(sent.names), max_size=len(sent.reservations)),
            label="job names",
        )
        idle_before = self.pacer.idle_until
        self.pacer.claimed(sent, names, self.now)
        self._replied(sent, names)
        self._size_after_reply(len(sent.reservations), len(names))
        if idle_before is None and self.pacer.idle_until is not None:
            # Idle only after a current-generation miss completed a sweep.
            assert not names
            assert sent.generation == self.pacer.generation

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        sent = data.draw(st.sampled_from(self.in_flight), label="claim")
        self.pacer.failed(sent, self.now)
        self.in_flight.remove(sent)
        if self.adapt:
            self.model_concurrency = 1
        self.just_woke = False
        self.hot = False
        self.missed.clear()
        if self.idle_until is None:
            self.idle_until = self.now + self.poll

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data())
    def report_twice(self, data: st.DataObject) -> None:
        sent = data.draw(st.sampled_from(self.in_flight), label="claim")
        self.pacer.claimed(sent, [], self.now)
        self._replied(sent, [])
        self._size_after_reply(len(sent.reservations), 0)
        with pytest.raises(WorkersStateError):
            self.pacer.claimed(sent, [], self.now)
        with pytest.raises(WorkersStateError):
            self.pacer.failed(sent, self.now)

    # -- wakes, releases and time ----------------------------------------------------------------

    def _woken(self) -> None:
        self.idle_until = None
        self.generation += 1
        self.missed.clear()
        self.just_woke = True

    @rule()
    def wake(self) -> None:
        self.pacer.wake()
        self._woken()

    @precondition(lambda self: sum(self.running.values()) > 0)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(+self.running)), label="name")
        capped = self.caps[name] is not None
        assert self.pacer.released(name) is capped
        self.running[name] -= 1
        if capped:
            self._woken()

    @rule(dt=st.integers(0, 12))
    def advance(self, dt: int) -> None:
        self.now += dt

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        pacer = self.pacer
        assert pacer.hot is self.hot
        assert pacer.idle_until == self.idle_until
        assert pacer.generation == self.generation
        assert pacer.claims_in_flight == len(self.in_flight)
        assert pacer.sweep_remaining() == max(1, self.n - len(self.missed))
        if self.adapt:
            assert pacer.sizing.batch_size == self.model_batch
            assert pacer.sizing.concurrency == self.model_concurrency

    @invariant()
    def capacity_is_never_exceeded(self) -> None:
        ledger = self.pacer.ledger
        held: list[Reservation] = [r for c in self.in_flight for r in c.reservations]
        assert ledger.active == sum(self.running.values())
        assert ledger.reserved == len(held)
        assert ledger.active + ledger.reserved <= self.workers
        active, reserved = ledger.active_by_name, ledger.reserved_by_name
        for name, cap in self.caps.items():
            assert active[name] == self.running[name]
            if cap is not None:
                assert active[name] + reserved[name] <= cap

    @invariant()
    def batch_claims_in_flight_have_distinct_partitions(self) -> None:
        partitions = [c.partition for c in self.in_flight if c.batch]
        assert len(partitions) == len(set(partitions))

    @invariant()
    def each_claim_respects_the_batch_size(self) -> None:
        for c in self.in_flight:
            assert 1 <= len(c.reservations) <= self.batch_size


TestPacerMachine = PacerMachine.TestCase
TestPacerMachine.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
