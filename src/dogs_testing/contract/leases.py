"""The contract suite, the leases role: named locks with fencing tokens, each operation on its
own and in the races that make them worth having: many owners taking a lease at once, a renewal
racing a take-over. Every time is explicit and nothing sleeps: a lapse is a later ``now``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial

from dogs_core.domain.controls import Lease
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

__all__ = ["LeaseContract"]


class LeaseContract(ContractBase):
    """The leases: ``acquire_lease``, ``renew_lease``, ``release_lease`` and ``get_lease``."""

    async def test_the_first_lease_has_token_one_and_is_not_reentrant(
        self, store: AsyncJobStore
    ) -> None:
        assert await store.get_lease("cleanup") is None
        until = T0 + 30 * _S + timedelta(microseconds=123_456)
        assert await store.acquire_lease("cleanup", owner="o1", until=until, now=T0) == 1
        lease = Lease(name="cleanup", owner="o1", token=1, expires_at=to_millis(until))
        assert await store.get_lease("cleanup") == lease
        assert await store.acquire_lease("cleanup", owner="o2", until=T0 + _H, now=T0) is None
        assert await store.acquire_lease("cleanup", owner="o1", until=T0 + _H, now=T0) is None
        assert await store.get_lease("cleanup") == lease
        assert await store.get_lease("other") is None

    async def test_a_released_lease_keeps_its_token_sequence(self, store: AsyncJobStore) -> None:
        assert await store.acquire_lease("x", owner="o1", until=T0 + _MIN, now=T0) == 1
        assert await store.release_lease("x", owner="o1", token=1) is True
        assert await store.get_lease("x") is None
        assert await store.release_lease("x", owner="o1", token=1) is False
        assert not await store.renew_lease("x", owner="o1", token=1, until=T0 + _H, now=T0)
        assert await store.acquire_lease("x", owner="o1", until=T0 + _MIN, now=T0) == 2
        assert await store.release_lease("x", owner="o1", token=2)
        assert await store.acquire_lease("x", owner="o2", until=T0 + _MIN, now=T0 + _S) == 3
        assert await store.get_lease("x") == Lease("x", "o2", 3, T0 + _MIN)

    async def test_a_lapsed_lease_is_taken_over_with_the_next_token(
        self, store: AsyncJobStore
    ) -> None:
        assert await store.acquire_lease("x", owner="o1", until=T0 + 10 * _S, now=T0) == 1
        before = T0 + 10 * _S - _MS
        assert await store.acquire_lease("x", owner="o2", until=T0 + _H, now=before) is None
        assert await store.get_lease("x") == Lease("x", "o1", 1, T0 + 10 * _S)  # as stored
        assert await store.acquire_lease("x", owner="o2", until=T0 + _MIN, now=T0 + 10 * _S) == 2
        assert not await store.renew_lease(
            "x", owner="o1", token=1, until=T0 + _H, now=T0 + 10 * _S
        )
        assert not await store.release_lease("x", owner="o1", token=1)
        assert await store.get_lease("x") == Lease("x", "o2", 2, T0 + _MIN)
        assert await store.renew_lease("x", owner="o2", token=2, until=T0 + _H, now=T0 + 20 * _S)
        assert await store.get_lease("x") == Lease("x", "o2", 2, T0 + _H)

    async def test_renew_lease_only_before_it_lapses(self, store: AsyncJobStore) -> None:
        """A renewal moves ``until`` while the lease holds at ``now``; at its ``until`` it has
        lapsed and the renewal fails, even though nobody took it over."""
        assert await store.acquire_lease("x", owner="o1", until=T0 + 10 * _S, now=T0) == 1
        until = T0 + 20 * _S + timedelta(microseconds=999)
        assert await store.renew_lease(
            "x", owner="o1", token=1, until=until, now=T0 + 10 * _S - _MS
        )
        assert await store.get_lease("x") == Lease("x", "o1", 1, to_millis(until))
        assert not await store.renew_lease(
            "x", owner="o1", token=1, until=T0 + _H, now=to_millis(until)
        )
        assert await store.get_lease("x") == Lease("x", "o1", 1, to_millis(until))  # unchanged
        assert await store.acquire_lease("x", owner="o2", until=T0 + _H, now=T0 + _MIN) == 2

    async def test_renew_and_release_need_the_owner_and_the_token(
        self, store: AsyncJobStore
    ) -> None:
        """A stale token fails even in the hands of the same owner (who acquired again)."""
        assert await store.acquire_lease("x", owner="o1", until=T0 + 10 * _S, now=T0) == 1
        assert await store.acquire_lease("x", owner="o1", until=T0 + _MIN, now=T0 + 10 * _S) == 2
        now = T0 + 20 * _S
        for owner, token in (("o1", 1), ("o1", 3), ("o2", 2)):
            assert not await store.renew_lease(
                "x", owner=owner, token=token, until=T0 + _H, now=now
            )
            assert not await store.release_lease("x", owner=owner, token=token)
        assert await store.get_lease("x") == Lease("x", "o1", 2, T0 + _MIN)
        assert await store.release_lease("x", owner="o1", token=2)

    async def test_leases_of_other_names_are_apart(self, store: AsyncJobStore) -> None:
        assert await store.acquire_lease("x", owner="o1", until=T0 + _MIN, now=T0) == 1
        assert await store.acquire_lease("y", owner="o1", until=T0 + _MIN, now=T0) == 1
        assert await store.release_lease("x", owner="o1", token=1)
        assert await store.acquire_lease("x", owner="o2", until=T0 + _MIN, now=T0) == 2
        assert await store.get_lease("y") == Lease("y", "o1", 1, T0 + _MIN)

    async def test_tokens_strictly_increase_and_are_never_reused(
        self, store: AsyncJobStore
    ) -> None:
        """Acquisitions after a release, after a lapse, by the same or another owner: the token
        is one more each time."""
        tokens: list[int] = []
        now = T0
        for n in range(10):
            owner = f"o{n % 3}"
            token = await store.acquire_lease("x", owner=owner, until=now + 10 * _S, now=now)
            assert token is not None, n
            tokens.append(token)
            if n % 2:
                assert await store.release_lease("x", owner=owner, token=token)
                now += _S
            else:
                now += 10 * _S  # it lapses
        assert tokens == list(range(1, 11))

    async def test_concurrent_acquires_have_one_holder(self, store: AsyncJobStore) -> None:
        """Many owners at once, on a lease never held, lapsed, then released: exactly one gets
        it each time, with the next token."""
        owners = _holders(_CROWD, "owner")

        async def race(now: datetime, label: str) -> tuple[str, int]:
            names = [f"{label}-{o}" for o in owners]
            got = await _at_once(
                [
                    partial(store.acquire_lease, "x", owner=o, until=now + 10 * _S, now=now)
                    for o in names
                ]
            )
            won = [(o, t) for o, t in zip(names, got, strict=True) if t is not None]
            assert len(won) == 1, (label, got)
            lease = await store.get_lease("x")
            assert lease is not None
            assert (lease.owner, lease.token) == won[0]
            return won[0]

        assert (await race(T0, "fresh"))[1] == 1
        owner, token = await race(T0 + 10 * _S, "lapsed")
        assert token == 2
        assert await store.release_lease("x", owner=owner, token=token)
        assert (await race(T0 + 11 * _S, "released"))[1] == 3

    async def test_a_lease_renewal_racing_a_take_over(self, store: AsyncJobStore) -> None:
        """The holder renews just before its ``until`` (its clock) while another takes the lease
        at ``until`` (its clock): exactly one wins, in either order."""
        for n in range(12):
            name = f"x{n}"
            assert await store.acquire_lease(name, owner="old", until=T0 + 10 * _S, now=T0) == 1
            renew = partial(
                store.renew_lease,
                name,
                owner="old",
                token=1,
                until=T0 + _MIN,
                now=T0 + 10 * _S - _MS,
            )
            take = partial(
                store.acquire_lease, name, owner="new", until=T0 + _MIN, now=T0 + 10 * _S
            )
            calls: list[Callable[[], Awaitable[object]]] = [renew, take] if n % 2 else [take, renew]
            results = await _at_once(calls)
            renewed, taken = (results[0], results[1]) if n % 2 else (results[1], results[0])
            assert (renewed is True) != (taken is not None), (renewed, taken)
            lease = await store.get_lease(name)
            expected = ("old", 1) if renewed else ("new", 2)
            assert lease is not None
            assert (lease.owner, lease.token, lease.expires_at) == (*expected, T0 + _MIN)
