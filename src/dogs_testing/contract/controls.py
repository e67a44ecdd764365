"""The contract suite, the controls role: the fleet controls (:mod:`dogs_core.domain.controls`):
pause and resume, concurrency slots and rate tokens, each operation on its own and in the races
that make them worth having: many holders taking slots or tokens at once, a renewal racing a
take-over.

Every time is explicit (around :data:`~dogs_testing.contract.base.T0`) and nothing sleeps: a
lapse is a later ``now``. The races run many port calls at once in a task group and accept any
interleaving; each asserts what every interleaving must give (how many won, which indexes,
which tokens).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

from dogs_core.domain.controls import DEFAULT_KEY, EVERY_JOB
from dogs_core.domain.records import to_millis
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract.base import (
    _CROWD,
    _H,
    _MIN,
    _MS,
    _S,
    T0,
    ContractBase,
    _at_once,
    _holders,
)

__all__ = ["ControlsContract"]


class ControlsContract(ContractBase):
    """The fleet controls: ``set_paused``/``paused_names``, ``acquire_slot``, ``renew_slot``,
    ``release_slot``, ``held_slots`` and ``take_rate_token``."""

    async def take_slot(
        self,
        store: AsyncJobStore,
        holder: str,
        *,
        name: str = "a",
        key: str = DEFAULT_KEY,
        limit: int = 1,
        until: datetime = T0 + 10 * _S,
        now: datetime = T0,
    ) -> int:
        index = await store.acquire_slot(
            name, key, limit=limit, holder=holder, until=until, now=now
        )
        assert index is not None, f"{holder} expected a slot of {name!r}/{key!r}"
        return index

    # ---------------------------------------------------------------- pause

    async def test_pause_and_resume_are_idempotent(self, store: AsyncJobStore) -> None:
        assert await store.paused_names() == frozenset()
        assert await store.set_paused("a", True, now=T0) is True
        assert await store.set_paused("a", True, now=T0 + _S) is False  # already paused
        assert await store.set_paused("b", True, now=T0) is True
        assert await store.paused_names() == frozenset({"a", "b"})
        assert await store.set_paused("a", False, now=T0) is True
        assert await store.set_paused("a", False, now=T0) is False  # already running
        assert await store.set_paused("never-paused", False, now=T0) is False
        assert await store.paused_names() == frozenset({"b"})
        assert await store.set_paused("a", True, now=T0 + _MIN) is True  # paused again
        assert await store.paused_names() == frozenset({"a", "b"})

    async def test_every_name_is_paused_as_the_name_star(self, store: AsyncJobStore) -> None:
        """``"*"`` is a paused name of its own: it neither adds nor removes the pauses of single
        names."""
        assert await store.set_paused("a", True, now=T0)
        assert await store.set_paused(EVERY_JOB, True, now=T0) is True
        assert await store.set_paused(EVERY_JOB, True, now=T0) is False
        assert await store.paused_names() == frozenset({EVERY_JOB, "a"})
        assert await store.set_paused(EVERY_JOB, False, now=T0) is True
        assert await store.set_paused(EVERY_JOB, False, now=T0) is False
        assert await store.paused_names() == frozenset({"a"})

    async def test_concurrent_pauses_change_it_once(self, store: AsyncJobStore) -> None:
        for paused in (True, False, True):
            changed = await _at_once([partial(store.set_paused, "a", paused, now=T0)] * _CROWD)
            assert changed.count(True) == 1, (paused, changed)
            assert await store.paused_names() == (frozenset({"a"}) if paused else frozenset())

    # ---------------------------------------------------------------- slots

    async def test_each_slot_is_handed_out_once_up_to_the_limit(self, store: AsyncJobStore) -> None:
        holders = _holders(4)
        indexes = [
            await store.acquire_slot("a", DEFAULT_KEY, limit=3, holder=h, until=T0 + _MIN, now=T0)
            for h in holders
        ]
        assert sorted(i for i in indexes[:3] if i is not None) == [0, 1, 2], indexes
        assert indexes[3] is None  # all three are held
        assert await store.held_slots(now=T0) == {"a": 3}

    async def test_a_holder_taking_its_slot_again_gets_it_back(self, store: AsyncJobStore) -> None:
        """Taking a slot its holder holds returns that slot (moving its ``until``), not another
        free one, also when a lower index is free."""
        first = await self.take_slot(store, "h1", limit=3)
        second = await self.take_slot(store, "h2", limit=3)
        assert await store.release_slot("a", DEFAULT_KEY, first, holder="h1")
        again = await self.take_slot(store, "h2", limit=3, until=T0 + _MIN)
        assert again == second
        assert await store.held_slots(now=T0) == {"a": 1}
        assert await store.held_slots(now=T0 + 30 * _S) == {"a": 1}  # its until moved
        # Its own lapsed slot too.
        assert await self.take_slot(store, "h2", limit=3, now=T0 + 2 * _MIN) == second

    async def test_slots_of_other_keys_and_names_are_apart(self, store: AsyncJobStore) -> None:
        """Each ``(job_name, key)`` has its own ``limit`` slots; ``held_slots`` counts a name's
        slots of every key together and leaves out names holding none."""
        for name, key in (("a", DEFAULT_KEY), ("a", "account-1"), ("a", "account-2"), ("b", "")):
            assert await self.take_slot(store, f"{name}/{key}/1", name=name, key=key) == 0
            assert (
                await store.acquire_slot(
                    name, key, limit=1, holder=f"{name}/{key}/2", until=T0 + _S, now=T0
                )
                is None
            )
        assert await store.held_slots(now=T0) == {"a": 3, "b": 1}
        assert await store.release_slot("b", "", 0, holder="b//1")
        assert await store.held_slots(now=T0) == {"a": 3}
        assert not await store.release_slot("a", "account-3", 0, holder="a/account-1/1")
        assert await store.release_slot("a", "account-1", 0, holder="a/account-1/1")
        assert await store.held_slots(now=T0) == {"a": 2}

    async def test_a_released_slot_goes_to_the_next_holder(self, store: AsyncJobStore) -> None:
        index = await self.take_slot(store, "h1")
        assert await store.release_slot("a", DEFAULT_KEY, index, holder="h1") is True
        assert await store.release_slot("a", DEFAULT_KEY, index, holder="h1") is False
        assert not await store.renew_slot("a", DEFAULT_KEY, index, holder="h1", until=T0 + _H)
        assert await store.held_slots(now=T0) == {}
        assert await self.take_slot(store, "h2") == index
        assert not await store.release_slot("a", DEFAULT_KEY, index, holder="h1")
        assert await store.held_slots(now=T0) == {"a": 1}

    async def test_renew_slot_moves_its_until(self, store: AsyncJobStore) -> None:
        index = await self.take_slot(store, "h1", until=T0 + 10 * _S)
        until = T0 + _MIN + timedelta(microseconds=456)  # kept in milliseconds
        assert await store.renew_slot("a", DEFAULT_KEY, index, holder="h1", until=until) is True
        later = T0 + 30 * _S
        assert await store.held_slots(now=later) == {"a": 1}
        assert (
            await store.acquire_slot(
                "a", DEFAULT_KEY, limit=1, holder="h2", until=T0 + _H, now=later
            )
            is None
        )
        assert await store.held_slots(now=to_millis(until) - _MS) == {"a": 1}
        assert await store.held_slots(now=to_millis(until)) == {}
        assert await self.take_slot(store, "h2", now=to_millis(until)) == index

    async def test_a_lapsed_slot_is_taken_over(self, store: AsyncJobStore) -> None:
        """A slot is free once its holder's ``until`` is ``<= now``; the new holder has it, and
        the old holder's renewal and release then fail."""
        index = await self.take_slot(store, "old", until=T0 + 10 * _S)
        before = T0 + 10 * _S - _MS
        assert (
            await store.acquire_slot(
                "a", DEFAULT_KEY, limit=1, holder="new", until=T0 + _H, now=before
            )
            is None
        )
        assert await self.take_slot(store, "new", now=T0 + 10 * _S, until=T0 + _MIN) == index
        assert not await store.renew_slot("a", DEFAULT_KEY, index, holder="old", until=T0 + _H)
        assert not await store.release_slot("a", DEFAULT_KEY, index, holder="old")
        assert await store.held_slots(now=T0 + 30 * _S) == {"a": 1}
        assert await store.renew_slot("a", DEFAULT_KEY, index, holder="new", until=T0 + _H)
        assert await store.release_slot("a", DEFAULT_KEY, index, holder="new")

    async def test_a_lapsed_slot_nobody_took_is_still_its_holders(
        self, store: AsyncJobStore
    ) -> None:
        """``renew_slot`` and ``release_slot`` are fenced by the holder alone: until another
        holder takes it over, a lapsed slot is renewed and released by its holder."""
        index = await self.take_slot(store, "h1", until=T0 + 10 * _S)
        assert await store.held_slots(now=T0 + _MIN) == {}
        assert await store.renew_slot("a", DEFAULT_KEY, index, holder="h1", until=T0 + _H)
        assert await store.held_slots(now=T0 + _MIN) == {"a": 1}
        assert (
            await store.acquire_slot(
                "a", DEFAULT_KEY, limit=1, holder="h2", until=T0 + _H, now=T0 + _MIN
            )
            is None
        )
        assert await store.release_slot("a", DEFAULT_KEY, index, holder="h1")

    async def test_renew_and_release_of_another_slot_fail(self, store: AsyncJobStore) -> None:
        index = await self.take_slot(store, "h1", key="k", limit=2)
        other = 1 - index
        for name, key, at, holder in (
            ("a", "k", other, "h1"),  # a slot never taken
            ("a", "k", 7, "h1"),  # beyond the limit
            ("a", "", index, "h1"),  # another key
            ("b", "k", index, "h1"),  # another name
            ("a", "k", index, "h2"),  # another holder
        ):
            assert not await store.renew_slot(name, key, at, holder=holder, until=T0 + _H)
            assert not await store.release_slot(name, key, at, holder=holder)
        assert await store.held_slots(now=T0 + 10 * _S - _MS) == {"a": 1}  # not renewed
        assert await store.release_slot("a", "k", index, holder="h1")

    async def test_a_lowered_limit_never_hands_out_a_higher_index(
        self, store: AsyncJobStore
    ) -> None:
        indexes = {h: await self.take_slot(store, h, limit=3) for h in _holders(3)}
        assert sorted(indexes.values()) == [0, 1, 2]
        top = next(h for h, i in indexes.items() if i == 2)
        assert await store.release_slot("a", DEFAULT_KEY, 2, holder=top)
        # Slot 2 is free, but outside a limit of 2; slots 0 and 1 are held.
        assert (
            await store.acquire_slot(
                "a", DEFAULT_KEY, limit=2, holder="new", until=T0 + _MIN, now=T0
            )
            is None
        )
        assert await self.take_slot(store, "new", limit=3) == 2
        # Once everything is free, a limit of 1 hands out slot 0 only.
        for holder, index in [*((h, i) for h, i in indexes.items() if h != top), ("new", 2)]:
            assert await store.release_slot("a", DEFAULT_KEY, index, holder=holder)
        got = [
            await store.acquire_slot("a", DEFAULT_KEY, limit=1, holder=h, until=T0 + _MIN, now=T0)
            for h in _holders(3, "again")
        ]
        assert got == [0, None, None]
        # A raised limit hands out the new slots.
        more = [await self.take_slot(store, h, limit=4) for h in _holders(3, "more")]
        assert sorted(more) == [1, 2, 3]
        assert await store.held_slots(now=T0) == {"a": 4}

    async def test_held_slots_counts_the_live_slots_per_name(self, store: AsyncJobStore) -> None:
        assert await store.held_slots(now=T0) == {}
        for n, until in enumerate((T0 + 10 * _S, T0 + 20 * _S, T0 + 30 * _S)):
            await self.take_slot(store, f"a{n}", name="a", limit=3, until=until)
        await self.take_slot(store, "b0", name="b", key="k", until=T0 + 20 * _S)
        assert await store.held_slots(now=T0) == {"a": 3, "b": 1}
        assert await store.held_slots(now=T0 + 10 * _S) == {"a": 2, "b": 1}
        assert await store.held_slots(now=T0 + 20 * _S) == {"a": 1}
        assert await store.held_slots(now=T0 + 30 * _S) == {}

    async def test_concurrent_acquires_never_exceed_the_limit(self, store: AsyncJobStore) -> None:
        """Many holders at once, on a fresh key, on lapsed slots, and on a key with some slots
        free: never more than ``limit`` winners, never one slot twice."""
        limit = 5

        async def race(label: str, *, now: datetime, until: datetime) -> dict[str, int]:
            holders = _holders(_CROWD, label)
            got = await _at_once(
                [
                    partial(
                        store.acquire_slot, "a", "k", limit=limit, holder=h, until=until, now=now
                    )
                    for h in holders
                ]
            )
            won = {h: i for h, i in zip(holders, got, strict=True) if i is not None}
            assert len(set(won.values())) == len(won), (label, got)  # no slot twice
            assert set(won.values()) <= set(range(limit)), (label, got)
            assert await store.held_slots(now=now) == {"a": limit}
            for holder, index in won.items():  # each winner holds what it was given
                assert await store.renew_slot("a", "k", index, holder=holder, until=until)
            return won

        assert len(await race("fresh", now=T0, until=T0 + 10 * _S)) == limit
        # Every slot of the first round has lapsed.
        won = await race("lapsed", now=T0 + 10 * _S, until=T0 + 20 * _S)
        assert len(won) == limit
        # Two of the five are released: exactly those two are taken, once each.
        freed = sorted(won.values())[1:3]
        for holder, index in won.items():
            if index in freed:
                assert await store.release_slot("a", "k", index, holder=holder)
        third = await race("third", now=T0 + 15 * _S, until=T0 + _MIN)
        assert sorted(third.values()) == freed, third

    async def test_a_renewal_racing_a_take_over(self, store: AsyncJobStore) -> None:
        """At the instant a slot lapses its holder renews it while another takes it over:
        exactly one of them wins, in either order."""
        for n in range(12):
            key = f"k{n}"
            index = await self.take_slot(store, "old", key=key, until=T0 + 10 * _S)
            renew = partial(store.renew_slot, "a", key, index, holder="old", until=T0 + _MIN)
            take = partial(
                store.acquire_slot,
                "a",
                key,
                limit=1,
                holder="new",
                until=T0 + _MIN,
                now=T0 + 10 * _S,
            )
            calls: list[Callable[[], Awaitable[object]]] = [renew, take] if n % 2 else [take, renew]
            results = await _at_once(calls)
            renewed, taken = (results[0], results[1]) if n % 2 else (results[1], results[0])
            assert (renewed is True) != (taken is not None), (renewed, taken)
            winner = "old" if renewed else "new"
            assert not await store.release_slot("a", key, index, holder="new" if renewed else "old")
            assert await store.release_slot("a", key, index, holder=winner)

    # ---------------------------------------------------------------- rate tokens

    async def test_rate_tokens_up_to_the_limit_per_window(self, store: AsyncJobStore) -> None:
        window = (T0, T0 + _MIN)
        nxt = (T0 + _MIN, T0 + 2 * _MIN)

        async def take(
            name: str, key: str, span: tuple[datetime, datetime], limit: int = 3
        ) -> bool:
            start, end = span
            return await store.take_rate_token(
                name, key, limit=limit, window_start=start, window_end=end
            )

        assert [await take("a", DEFAULT_KEY, window) for _ in range(4)] == [True] * 3 + [False]
        assert await take("a", DEFAULT_KEY, window) is False  # still full
        assert [await take("a", "k", window) for _ in range(4)] == [True] * 3 + [False]
        assert [await take("b", DEFAULT_KEY, window) for _ in range(4)] == [True] * 3 + [False]
        # The next window starts fresh.
        assert [await take("a", DEFAULT_KEY, nxt) for _ in range(4)] == [True] * 3 + [False]

    async def test_a_changed_rate_limit_counts_what_was_taken(self, store: AsyncJobStore) -> None:
        async def take(limit: int) -> bool:
            return await store.take_rate_token(
                "a", DEFAULT_KEY, limit=limit, window_start=T0, window_end=T0 + _S
            )

        assert [await take(5) for _ in range(3)] == [True] * 3
        assert await take(2) is False  # three counted: over a limit of two
        assert await take(3) is False
        assert [await take(5) for _ in range(3)] == [True, True, False]

    async def test_concurrent_tokens_never_exceed_the_limit(self, store: AsyncJobStore) -> None:
        """Many starts at once, in a fresh window (created by the race), then in a window with
        some tokens taken: exactly the tokens left are handed out."""
        limit = 5

        async def race(start: datetime, count: int = _CROWD) -> int:
            take = partial(
                store.take_rate_token,
                "a",
                "k",
                limit=limit,
                window_start=start,
                window_end=start + _MIN,
            )
            return (await _at_once([take] * count)).count(True)

        for n in range(3):  # fresh windows
            assert await race(T0 + n * _MIN) == limit, n
        start = T0 + _H
        for _ in range(2):
            assert await store.take_rate_token(
                "a", "k", limit=limit, window_start=start, window_end=start + _MIN
            )
        assert await race(start) == limit - 2
        assert await race(start, 3) == 0  # full
