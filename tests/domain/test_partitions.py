"""Partition assignment, validation and the shuffled rotation with idle detection."""

from __future__ import annotations

import random
from collections.abc import MutableSequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dogs_core.domain.partitions import (
    PartitionRotation,
    assign_partition,
    is_valid_partition,
    validate_n_partitions,
)
from dogs_core.errors import InvalidOptionError

seeds = st.integers(min_value=0, max_value=2**32)
counts = st.integers(min_value=1, max_value=64)


class CountingRandom(random.Random):
    """A seeded Random that counts shuffles, to observe when the rotation reshuffles."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.shuffles = 0

    def shuffle(self, x: MutableSequence[Any]) -> None:
        self.shuffles += 1
        super().shuffle(x)


# -- validate_n_partitions -------------------------------------------------------------------


@given(counts)
def test_validate_accepts_positive_ints(n: int) -> None:
    assert validate_n_partitions(n) == n


@pytest.mark.parametrize("bad", [0, -1, -100, True, False, 1.0, 2.5, "3", None, [1]])
def test_validate_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        validate_n_partitions(bad)
    assert info.value.field == "n_partitions"
    assert info.value.value is bad
    assert "n_partitions" in str(info.value)
    reason = "must be at least 1" if isinstance(bad, int) and not isinstance(bad, bool) else ">="
    assert reason in info.value.reason


def test_validate_says_at_least_one_like_every_other_partition_check() -> None:
    with pytest.raises(InvalidOptionError, match=r"^n_partitions=0: must be at least 1$"):
        validate_n_partitions(0)


# -- assign_partition ------------------------------------------------------------------------


@given(counts, seeds)
def test_assign_partition_stays_in_range(n: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        p = assign_partition(n, rng)
        assert isinstance(p, int)
        assert 0 <= p < n


@given(counts, seeds)
def test_assign_partition_is_deterministic_given_the_rng(n: int, seed: int) -> None:
    first = [assign_partition(n, random.Random(seed)) for _ in range(3)]
    assert first == [first[0]] * 3


def test_assign_partition_reaches_every_partition() -> None:
    rng = random.Random(7)
    assert {assign_partition(8, rng) for _ in range(500)} == set(range(8))


def test_assign_partition_validates_the_count() -> None:
    with pytest.raises(InvalidOptionError):
        assign_partition(0, random.Random(1))


# -- is_valid_partition ----------------------------------------------------------------------


@given(counts, st.integers(min_value=-1000, max_value=1000))
def test_is_valid_partition_for_ints(n: int, p: int) -> None:
    assert is_valid_partition(p, n) is (0 <= p < n)


@given(counts, st.floats(allow_nan=True, allow_infinity=True))
def test_is_valid_partition_for_floats_matches_mongo_equality(n: int, p: float) -> None:
    # a claim sends {partition: k} for an int k in range; MongoDB matches 2.0 for k == 2
    reachable = any(p == k for k in range(n))
    assert is_valid_partition(p, n) is reachable


@pytest.mark.parametrize("bad", [None, True, False, "1", b"1", [0], {"p": 0}, 0.5])
def test_is_valid_partition_rejects_non_numbers(bad: object) -> None:
    assert is_valid_partition(bad, 4) is False


def test_is_valid_partition_validates_the_count() -> None:
    with pytest.raises(InvalidOptionError):
        is_valid_partition(0, 0)


# -- PartitionRotation -----------------------------------------------------------------------


@given(counts, seeds, st.integers(min_value=1, max_value=5))
def test_every_pass_visits_every_partition_once(n: int, seed: int, passes: int) -> None:
    rotation = PartitionRotation(n, random.Random(seed))
    assert rotation.n_partitions == n
    for _ in range(passes):
        visited = [rotation.next_partition() for _ in range(n)]
        assert sorted(visited) == list(range(n))


@given(counts, seeds)
def test_rotation_reshuffles_after_each_full_pass(n: int, seed: int) -> None:
    rng = CountingRandom(seed)
    rotation = PartitionRotation(n, rng)
    # the initial shuffle; each reshuffle shuffles the unvisited and the visited part, lazily
    # on the first attempt of the next pass
    assert rng.shuffles == 1
    for _ in range(n):
        rotation.next_partition()
    assert rng.shuffles == 1
    rotation.next_partition()
    assert rng.shuffles == 3
    for _ in range(n):
        rotation.next_partition()
    assert rng.shuffles == 5


def test_rotation_order_changes_between_passes() -> None:
    rotation = PartitionRotation(16, random.Random(3))
    passes = {tuple(rotation.next_partition() for _ in range(16)) for _ in range(10)}
    assert len(passes) > 1


def test_different_schedulers_start_in_different_places() -> None:
    starts = {PartitionRotation(32, random.Random(seed)).next_partition() for seed in range(50)}
    assert len(starts) > 10


@given(counts, seeds)
def test_idle_is_reported_exactly_after_n_consecutive_misses(n: int, seed: int) -> None:
    rotation = PartitionRotation(n, random.Random(seed))
    for _ in range(3):
        verdicts = [rotation.record_miss() for _ in range(n)]
        assert verdicts == [False] * (n - 1) + [True]
        assert rotation.consecutive_misses == 0


@given(st.integers(min_value=2, max_value=32), seeds, st.data())
def test_a_hit_or_reset_restarts_the_miss_count(n: int, seed: int, data: st.DataObject) -> None:
    rotation = PartitionRotation(n, random.Random(seed))
    before = data.draw(st.integers(min_value=1, max_value=n - 1))
    for _ in range(before):
        assert rotation.record_miss() is False
    assert rotation.consecutive_misses == before
    if data.draw(st.booleans()):
        rotation.record_hit()
    else:
        rotation.reset_misses()
    assert rotation.consecutive_misses == 0
    assert [rotation.record_miss() for _ in range(n)][-1] is True


@given(counts, seeds, st.lists(st.booleans(), max_size=300))
def test_an_idle_sweep_visited_every_partition_exactly_once(
    n: int, seed: int, outcomes: list[bool]
) -> None:
    """Sequential loop: the misses that report idle covered the whole partition space.

    This holds across reshuffles because a pass ending inside a miss streak starts the next
    permutation with the partitions that streak has not visited yet.
    """
    rotation = PartitionRotation(n, random.Random(seed))
    streak: list[int] = []
    for hit in [*outcomes, *([False] * n)]:
        p = rotation.next_partition()
        if hit:
            rotation.record_hit()
            streak = []
            continue
        streak.append(p)
        if rotation.record_miss():
            assert sorted(streak) == list(range(n))
            streak = []
        assert len(streak) == rotation.consecutive_misses


class RotationMachine(RuleBasedStateMachine):
    """Drives a rotation with arbitrary hits, misses and resets against a tiny model."""

    def __init__(self) -> None:
        super().__init__()
        self.rotation = PartitionRotation(1, random.Random(0))
        self.n = 1
        self.misses = 0
        self.current_pass: list[int] = []

    @initialize(n=counts, seed=seeds)
    def start(self, n: int, seed: int) -> None:
        self.rotation = PartitionRotation(n, random.Random(seed))
        self.n = n

    @rule()
    def attempt(self) -> None:
        p = self.rotation.next_partition()
        assert 0 <= p < self.n
        assert p not in self.current_pass
        self.current_pass.append(p)
        if len(self.current_pass) == self.n:
            self.current_pass = []

    @rule()
    def hit(self) -> None:
        self.rotation.record_hit()
        self.misses = 0

    @rule()
    def miss(self) -> None:
        idle = self.rotation.record_miss()
        self.misses += 1
        assert idle is (self.misses == self.n)
        if idle:
            self.misses = 0

    @precondition(lambda self: self.misses > 0)
    @rule()
    def reset(self) -> None:
        self.rotation.reset_misses()
        self.misses = 0

    @invariant()
    def counter_matches(self) -> None:
        assert self.rotation.consecutive_misses == self.misses
        assert 0 <= self.misses < self.n


TestRotationMachine = RotationMachine.TestCase


def test_rotation_rejects_a_bad_count() -> None:
    with pytest.raises(InvalidOptionError):
        PartitionRotation(0, random.Random(0))


def test_single_partition_rotation() -> None:
    rotation = PartitionRotation(1, random.Random(0))
    assert [rotation.next_partition() for _ in range(3)] == [0, 0, 0]
    assert rotation.record_miss() is True


# -- misses recorded by partition (several claims in flight) ------------------------------------


@given(st.integers(1, 12), st.data())
def test_idle_by_partition_needs_a_miss_in_every_partition(n: int, data: st.DataObject) -> None:
    rotation = PartitionRotation(n, random.Random(data.draw(st.integers(0, 2**32))))
    missed: set[int] = set()
    for _ in range(data.draw(st.integers(0, 4 * n))):
        partition = data.draw(st.integers(0, n - 1))
        if data.draw(st.booleans()):
            rotation.record_hit()
            missed.clear()
            continue
        missed.add(partition)
        idle = rotation.record_miss(partition)
        assert idle == (len(missed) == n)  # repeats of one partition never make a sweep
        if idle:
            missed.clear()
        assert rotation.consecutive_misses == len(missed)


def test_the_next_pass_starts_with_the_partitions_not_yet_missed() -> None:
    rotation = PartitionRotation(6, random.Random(3))
    first_pass = [rotation.next_partition() for _ in range(6)]
    for partition in first_pass[:2]:
        assert not rotation.record_miss(partition)
    rest = [rotation.next_partition() for _ in range(4)]
    assert set(rest) == set(range(6)) - set(first_pass[:2])


def test_record_miss_rejects_a_partition_out_of_range() -> None:
    rotation = PartitionRotation(4, random.Random(0))
    with pytest.raises(InvalidOptionError, match="partition"):
        rotation.record_miss(4)
    assert rotation.consecutive_misses == 0
