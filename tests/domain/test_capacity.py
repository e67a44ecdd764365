"""The capacity ledger: worker slots, per-name caps, and reservations for claims in flight."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from dogs_core.domain.capacity import CapacityLedger, Claimable, Reservation
from dogs_core.errors import InvalidOptionError, UnknownJobError, WorkersStateError

NAMES = ("a", "b", "c", "d")


def ledger(workers: int = 4, **caps: int | None) -> CapacityLedger:
    return CapacityLedger(workers, caps)


# -- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, -1, True, 1.0, "4", None])
def test_rejects_bad_workers_count(workers: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        CapacityLedger(workers, {"a": None})  # type: ignore[arg-type]
    assert info.value.field == "workers_count"


@pytest.mark.parametrize("cap", [-1, True, 1.5, "2"])
def test_rejects_bad_caps(cap: object) -> None:
    with pytest.raises(InvalidOptionError) as info:
        CapacityLedger(2, {"a": cap})  # type: ignore[dict-item]
    assert info.value.field == "max_parallel_executions_per_server"
    assert "'a'" in str(info.value)


@pytest.mark.parametrize("name", ["", 3, None])
def test_rejects_bad_names(name: object) -> None:
    with pytest.raises(InvalidOptionError):
        CapacityLedger(2, {name: None})  # type: ignore[dict-item]


def test_initial_state() -> None:
    cap = ledger(3, a=None, b=2)
    assert cap.workers_count == 3
    assert cap.caps == {"a": None, "b": 2}
    assert (cap.active, cap.reserved, cap.free_slots) == (0, 0, 3)
    assert cap.active_by_name == {"a": 0, "b": 0}
    assert cap.reserved_by_name == {"a": 0, "b": 0}
    assert not cap.is_full
    assert not cap.all_capped
    assert cap.claimable() == Claimable(("a", "b"), False, 3)
    assert cap.claimable().can_claim


def test_caps_are_copied_and_read_only() -> None:
    caps: dict[str, int | None] = {"a": 1}
    cap = CapacityLedger(2, caps)
    caps["b"] = None
    assert cap.caps == {"a": 1}
    with pytest.raises(TypeError):
        cap.caps["a"] = 3  # type: ignore[index]


# -- examples --------------------------------------------------------------------------------


def test_a_claim_of_a_capped_name_moves_its_slot_from_reserved_to_active() -> None:
    cap = ledger(4, a=1, b=None)
    res = cap.reserve()
    assert res is not None
    assert (res.names, res.held, res.names_filtered) == (("a", "b"), ("a",), False)
    assert cap.reserved_by_name == {"a": 1, "b": 0}
    # "a" is tentatively full: a second claim in flight may not ask for it
    assert cap.claimable() == Claimable(("b",), True, 3)
    second = cap.reserve()
    assert second is not None
    assert second.names == ("b",)
    assert second.names_filtered
    cap.settle(res, "a")
    cap.settle(second, None)
    assert cap.active_by_name == {"a": 1, "b": 0}
    assert cap.reserved_by_name == {"a": 0, "b": 0}
    assert (cap.active, cap.reserved) == (1, 0)
    assert cap.claimable().names == ("b",)
    cap.release("a")
    assert cap.claimable().names == ("a", "b")


def test_a_claim_of_another_name_gives_the_tentative_slot_back() -> None:
    cap = ledger(4, a=1, b=None)
    res = cap.reserve()
    assert res is not None
    cap.settle(res, "b")
    assert cap.active_by_name == {"a": 0, "b": 1}
    assert cap.claimable().names == ("a", "b")


def test_reservations_fill_the_worker_slots() -> None:
    cap = ledger(2, a=None)
    first, second = cap.reserve(), cap.reserve()
    assert first is not None
    assert second is not None
    assert cap.is_full
    assert cap.free_slots == 0
    assert not cap.claimable().can_claim
    assert cap.reserve() is None
    cap.settle(first, "a")
    assert cap.is_full
    cap.settle(second, None)
    assert not cap.is_full
    assert cap.free_slots == 1


def test_all_capped_waits_only_when_held_capacity_can_come_back() -> None:
    cap = ledger(4, a=1, b=0)
    assert cap.claimable() == Claimable(("a",), True, 4)
    res = cap.reserve()
    assert res is not None
    # nothing claimable, but the claim in flight will settle
    assert cap.claimable().names == ()
    assert cap.all_capped
    cap.settle(res, "a")
    assert cap.all_capped  # an active execution will be released
    cap.release("a")
    assert not cap.all_capped


def test_only_zero_caps_never_wait_for_capacity() -> None:
    cap = ledger(4, a=0)
    assert cap.claimable() == Claimable((), True, 4)
    assert not cap.claimable().can_claim
    assert not cap.all_capped
    assert cap.reserve() is None


def test_no_names_at_all() -> None:
    cap = CapacityLedger(1, {})
    assert cap.claimable() == Claimable((), False, 1)
    assert not cap.all_capped
    assert cap.reserve() is None


def test_reserve_for_given_names() -> None:
    cap = ledger(4, a=1, b=None, c=2)
    res = cap.reserve(["c", "a", "c"])
    assert res is not None
    assert res.names == ("c", "a")  # deduplicated, caller's order
    assert res.held == ("c", "a")
    assert res.names_filtered
    other = cap.reserve(["a", "b"])
    assert other is not None
    assert other.names == ("b",)  # "a" is at its cap, left out
    assert cap.reserve(["a"]) is None


def test_reserve_rejects_unknown_names_without_changing_anything() -> None:
    cap = ledger(4, a=1)
    with pytest.raises(UnknownJobError):
        cap.reserve(["a", "zzz"])
    with pytest.raises(InvalidOptionError):
        cap.reserve("a")
    assert (cap.reserved, cap.reserved_by_name) == (0, {"a": 0})


def test_settle_rejects_misuse() -> None:
    cap = ledger(4, a=None, b=None)
    res = cap.reserve(["a"])
    assert res is not None
    with pytest.raises(InvalidOptionError) as info:
        cap.settle(res, "b")
    assert info.value.field == "claimed_name"
    assert cap.reserved == 1  # unchanged after the rejected call
    cap.settle(res, "a")
    with pytest.raises(WorkersStateError):
        cap.settle(res, None)
    foreign = ledger(4, a=None).reserve()
    assert foreign is not None
    with pytest.raises(WorkersStateError):
        cap.settle(foreign, None)


def test_reservations_are_one_shot_tokens() -> None:
    cap = ledger(4, a=None)
    first, second = cap.reserve(), cap.reserve()
    assert first is not None
    assert second is not None
    assert first != second  # identical contents, distinct reservations
    cap.settle(first, None)
    cap.settle(second, None)
    assert cap.reserved == 0


def test_release_rejects_misuse() -> None:
    cap = ledger(4, a=None)
    with pytest.raises(UnknownJobError):
        cap.release("zzz")
    with pytest.raises(UnknownJobError):
        cap.release(None)  # type: ignore[arg-type]
    with pytest.raises(WorkersStateError):
        cap.release("a")
    assert cap.active == 0


@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=8))
def test_a_capped_name_is_offered_to_at_most_cap_claims_in_flight(workers: int, c: int) -> None:
    cap = CapacityLedger(workers, {"capped": c, "free": None})
    reservations = [r for r in (cap.reserve() for _ in range(workers)) if r is not None]
    assert len(reservations) == workers  # the unlimited name keeps every slot usable
    offered = sum(1 for r in reservations if "capped" in r.names)
    assert offered == min(c, workers)


def _one_by_one(ledger: CapacityLedger, size: int) -> list[Reservation]:
    """What reserve_batch stands for: reserve() again with the first names while it offers them."""
    first = ledger.reserve()
    if first is None:
        return []
    batch = [first]
    while len(batch) < size:
        more = ledger.reserve(first.names)
        if more is None:
            break
        if more.names != first.names:
            ledger.settle(more, None)
            break
        batch.append(more)
    return batch


@given(
    workers=st.integers(1, 12),
    caps=st.fixed_dictionaries(
        {}, optional={name: st.one_of(st.none(), st.integers(0, 5)) for name in NAMES}
    ),
    running=st.lists(st.sampled_from(NAMES), max_size=8),
    in_flight=st.integers(0, 4),
    size=st.integers(1, 16),
)
def test_reserve_batch_is_reserve_again_and_again(
    workers: int, caps: dict[str, int | None], running: list[str], in_flight: int, size: int
) -> None:
    """Two ledgers in the same state (executions running, claims in flight) give batches of the
    same length and names, and end in the same state."""
    ledgers = (CapacityLedger(workers, caps), CapacityLedger(workers, caps))
    for each in ledgers:
        for name in running:
            if name in caps:
                held = each.reserve([name])
                if held is not None and name in held.names:
                    each.settle(held, name)
                elif held is not None:
                    each.settle(held, None)
        for _ in range(in_flight):
            each.reserve()
    batch, expected = ledgers[0].reserve_batch(size), _one_by_one(ledgers[1], size)
    assert [r.names for r in batch] == [r.names for r in expected]
    assert [r.held for r in batch] == [r.held for r in expected]
    assert len({id(r) for r in batch}) == len(batch)  # distinct one-shot tokens
    assert ledgers[0].reserved == ledgers[1].reserved
    assert ledgers[0].reserved_by_name == ledgers[1].reserved_by_name
    for reservation in batch:
        ledgers[0].settle(reservation, None)  # each one settles once


@pytest.mark.parametrize("size", [0, -1, True, 1.5, "2"])
def test_reserve_batch_rejects_a_bad_size_without_changing_anything(size: object) -> None:
    cap = ledger(a=None)
    with pytest.raises(InvalidOptionError, match="size"):
        cap.reserve_batch(size)  # type: ignore[arg-type]
    assert cap.reserved == 0


# -- stateful: the invariants under arbitrary interleavings ----------------------------------

caps_strategy = st.fixed_dictionaries(
    {}, optional={name: st.one_of(st.none(), st.integers(0, 3)) for name in NAMES}
)


class LedgerMachine(RuleBasedStateMachine):
    """Random reserve / settle / release sequences with several claims in flight."""

    reservations = Bundle("reservations")

    def __init__(self) -> None:
        super().__init__()
        self.ledger = CapacityLedger(1, {})
        self.caps: dict[str, int | None] = {}
        self.workers = 1
        self.running: Counter[str] = Counter()
        self.in_flight: list[Reservation] = []

    @initialize(workers=st.integers(1, 6), caps=caps_strategy)
    def start(self, workers: int, caps: dict[str, int | None]) -> None:
        self.ledger = CapacityLedger(workers, caps)
        self.caps = caps
        self.workers = workers

    @rule(target=reservations, subset=st.one_of(st.none(), st.lists(st.sampled_from(NAMES))))
    def reserve(self, subset: list[str] | None) -> Reservation | None:
        before = self.ledger.claimable()
        if subset is not None:
            subset = [name for name in subset if name in self.caps]
        res = self.ledger.reserve(subset)
        wanted = before.names if subset is None else [n for n in subset if n in before.names]
        if res is None:
            assert before.free_slots == 0 or not wanted
        else:
            assert before.free_slots > 0
            assert set(res.names) == set(wanted)
            assert res.names_filtered is (len(res.names) < len(self.caps))
            assert set(res.held) == {n for n in res.names if self.caps[n] is not None}
            self.in_flight.append(res)
        return res

    @rule(res=consumes(reservations), data=st.data())
    def settle(self, res: Reservation | None, data: st.DataObject) -> None:
        if res is None:
            return
        claimed = data.draw(st.one_of(st.none(), st.sampled_from(res.names)))
        self.ledger.settle(res, claimed)
        self.in_flight.remove(res)
        if claimed is not None:
            self.running[claimed] += 1

    @precondition(lambda self: sum(self.running.values()) > 0)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(+self.running)))
        self.ledger.release(name)
        self.running[name] -= 1

    @invariant()
    def totals_never_exceed_workers(self) -> None:
        active, reserved = self.ledger.active, self.ledger.reserved
        assert active == sum(self.running.values())
        assert reserved == len(self.in_flight)
        assert active + reserved <= self.workers
        assert self.ledger.free_slots == self.workers - active - reserved
        assert self.ledger.is_full is (active + reserved == self.workers)

    @invariant()
    def caps_are_never_exceeded(self) -> None:
        active = self.ledger.active_by_name
        reserved = self.ledger.reserved_by_name
        for name, cap in self.caps.items():
            assert active[name] == self.running[name]
            held = sum(1 for r in self.in_flight if name in r.held)
            assert reserved[name] == held
            if cap is not None:
                assert active[name] + reserved[name] <= cap
            else:
                assert reserved[name] == 0

    @invariant()
    def claimable_is_consistent(self) -> None:
        snapshot = self.ledger.claimable()
        active = self.ledger.active_by_name
        reserved = self.ledger.reserved_by_name
        expected = tuple(
            n for n, c in self.caps.items() if c is None or active[n] + reserved[n] < c
        )
        assert snapshot.names == expected
        assert snapshot.names_filtered is (len(expected) < len(self.caps))
        assert snapshot.free_slots == self.ledger.free_slots
        held = self.ledger.active + self.ledger.reserved
        assert self.ledger.all_capped is (not expected and held > 0)


TestLedgerMachine = LedgerMachine.TestCase
