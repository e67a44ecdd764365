"""Generated histories of the fleet controls: several clients of one in-memory store take,
renew and give back concurrency slots, rate tokens and a lease, pause and resume names, crash
(stop renewing), come back (a paused process resuming with its old identity: a zombie) or
restart (a new identity), while limits change and a virtual clock moves on.

A model of what the store holds (each slot's holder and ``until``, each window's count, the
lease's owner, token and ``until``, the paused names) predicts every answer of the store, and
each client keeps what it believes it holds (what its last successful call told it). Checked
after every step:

* **Slots.** The store's live slots are the model's, each ``(key, index)`` held by one holder;
  a name's held slots are at most its limit (the largest limit any live holder took its slot
  under: a lowered limit does not take slots back, and never hands out a higher index).
* **Rate.** No window ever counts more tokens than its limit, also for a client whose clock lags
  into the previous window.
* **Lease.** At most one client believes it holds the lease at any instant (a belief lapses at
  its ``until``); the fencing tokens handed out strictly increase, one more per acquisition.
* **Crashes.** Nothing is held by a crashed holder after its ``until``: its slots are free for
  others, its lease can be taken over, and its late renewals fail once someone did.
* **Pause.** The paused names are the model's; each pause and resume says whether it changed
  anything.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from dogs_core.domain.controls import EVERY_JOB, Lease, RateLimit, rate_window
from dogs_testing.memory import SyncInMemoryJobStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
S = timedelta(seconds=1)
NAME = "report"
KEYS = ("", "account-1")
RATES = {"": RateLimit(3, 5 * S), "account-1": RateLimit(2, 2 * S)}
LEASE = "nightly-cleanup"
CLIENTS = 4

clients = st.integers(0, CLIENTS - 1)
keys = st.sampled_from(KEYS)
holding_for = st.integers(1, 10).map(lambda seconds: seconds * S)


@dataclass
class StoredSlot:
    """The model of one stored slot."""

    holder: str
    until: datetime
    limit: int  # the limit it was taken under


@dataclass
class StoredLease:
    owner: str | None  # None once released
    token: int
    until: datetime


@dataclass
class HeldSlot:
    """What a client believes of a slot it took."""

    key: str
    index: int
    until: datetime


@dataclass
class Client:
    """One client of the store (a worker process): its identity changes when it restarts."""

    number: int
    generation: int = 0
    crashed: bool = False
    sequence: int = 0
    slots: dict[str, HeldSlot] = field(default_factory=dict)  # holder -> slot
    lease: tuple[int, datetime] | None = None  # (token, until) it believes it holds
    tokens: list[int] = field(default_factory=list)  # every token it was given

    @property
    def owner(self) -> str:
        return f"client-{self.number}.{self.generation}"

    def new_holder(self) -> str:
        self.sequence += 1
        return f"{self.owner}/execution-{self.sequence}"


class ControlsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.store = SyncInMemoryJobStore()
        self.clients = [Client(n) for n in range(CLIENTS)]
        self.limits = {"": 2, "account-1": 3}
        self.slots: dict[tuple[str, int], StoredSlot] = {}
        self.windows: Counter[tuple[str, datetime]] = Counter()
        self.lease: StoredLease | None = None
        self.tokens: list[int] = []
        self.paused: set[str] = set()
        self.dead: set[str] = set()  # owners that crashed and never came back

    # ------------------------------------------------------------------ the clock and limits

    @rule(milliseconds=st.integers(1, 15_000))
    def tick(self, milliseconds: int) -> None:
        self.now += milliseconds * MS

    @rule(early=st.sampled_from([0, 0, 1]))
    def until_the_next_lapse(self, early: int) -> None:
        """Move to the instant the next slot or lease lapses (``early``: 1 ms before it)."""
        untils = [slot.until for slot in self.slots.values()]
        if self.lease is not None and self.lease.owner is not None:
            untils.append(self.lease.until)
        later = [until for until in untils if until - early * MS > self.now]
        if later:
            self.now = min(later) - early * MS

    @rule(key=keys, limit=st.integers(1, 4))
    def change_limit(self, key: str, limit: int) -> None:
        self.limits[key] = limit

    # ------------------------------------------------------------------ crashes

    @rule(n=clients)
    def crash(self, n: int) -> None:
        """The client stops: it renews and releases nothing until it resumes or restarts."""
        self.clients[n].crashed = True
        self.dead.add(self.clients[n].owner)

    @rule(n=clients)
    def resume(self, n: int) -> None:
        """A crashed client was only paused: it comes back with its identity and beliefs."""
        client = self.clients[n]
        client.crashed = False
        self.dead.discard(client.owner)

    @rule(n=clients)
    def restart(self, n: int) -> None:
        """A crashed client restarts as a new identity; whatever the old one held lapses."""
        client = self.clients[n]
        if not client.crashed:
            return
        client.generation += 1
        client.crashed = False
        client.slots.clear()
        client.lease = None

    # ------------------------------------------------------------------ slots

    def free_indexes(self, key: str, limit: int) -> set[int]:
        return {
            index
            for index in range(limit)
            if (slot := self.slots.get((key, index))) is None or slot.until <= self.now
        }

    def acquire(self, client: Client, holder: str, key: str, until: datetime) -> None:
        limit = self.limits[key]
        own = [i for i in range(limit) if (s := self.slots.get((key, i))) and s.holder == holder]
        free = self.free_indexes(key, limit)
        index = self.store.acquire_slot(
            NAME, key, limit=limit, holder=holder, until=until, now=self.now
        )
        if own:
            assert index == own[0], (own, index)
        elif index is None:
            assert not free, free
            event("every slot held")
            return
        else:
            assert index in free, (index, free)
            if (key, index) in self.slots:
                event("a lapsed slot taken over")
        assert index is not None
        assert 0 <= index < limit
        self.slots[(key, index)] = StoredSlot(holder, until, limit)
        client.slots[holder] = HeldSlot(key, index, until)

    @rule(n=clients, key=keys, holding=holding_for)
    def acquire_slot(self, n: int, key: str, holding: timedelta) -> None:
        client = self.clients[n]
        if not client.crashed:
            self.acquire(client, client.new_holder(), key, self.now + holding)

    @rule(n=clients, key=keys, holding=holding_for, early=st.sampled_from([0, 1]))
    def acquire_at_a_lapse(self, n: int, key: str, holding: timedelta, early: int) -> None:
        """Move to the instant the next slot of ``key`` lapses (or 1 ms before), and take a
        slot there."""
        client = self.clients[n]
        later = [
            slot.until - early * MS
            for (k, _), slot in self.slots.items()
            if k == key and slot.until - early * MS > self.now
        ]
        if client.crashed or not later:
            return
        self.now = min(later)
        self.acquire(client, client.new_holder(), key, self.now + holding)

    @rule(n=clients, data=st.data(), holding=holding_for)
    def acquire_again(self, n: int, data: st.DataObject, holding: timedelta) -> None:
        """A holder takes its slot again (under the current limit): the same slot, if it still
        has it."""
        client = self.clients[n]
        mine = sorted(
            holder for holder, slot in client.slots.items() if slot.index < self.limits[slot.key]
        )
        if client.crashed or not mine:
            return
        holder = data.draw(st.sampled_from(mine))
        self.acquire(client, holder, client.slots[holder].key, self.now + holding)

    def pick_slot(self, n: int, data: st.DataObject) -> tuple[Client, str, HeldSlot] | None:
        client = self.clients[n]
        if client.crashed or not client.slots:
            return None
        holder = data.draw(st.sampled_from(sorted(client.slots)))
        return client, holder, client.slots[holder]

    def holds(self, holder: str, slot: HeldSlot) -> bool:
        stored = self.slots.get((slot.key, slot.index))
        return stored is not None and stored.holder == holder

    def renew(self, client: Client, holder: str, until: datetime) -> None:
        slot = client.slots[holder]
        renewed = self.store.renew_slot(NAME, slot.key, slot.index, holder=holder, until=until)
        assert renewed == self.holds(holder, slot), (holder, slot)
        if renewed:
            self.slots[(slot.key, slot.index)].until = slot.until = until
        else:  # taken over while it lapsed: the client learns it lost the slot
            event("a slot's renewal refused after its take-over")
            del client.slots[holder]

    @rule(n=clients, data=st.data(), holding=holding_for)
    def renew_slot(self, n: int, data: st.DataObject, holding: timedelta) -> None:
        picked = self.pick_slot(n, data)
        if picked is not None:
            self.renew(picked[0], picked[1], self.now + holding)

    @rule(n=clients, holding=holding_for)
    def heartbeat(self, n: int, holding: timedelta) -> None:
        """The client renews everything it believes it holds: its slots, then its lease."""
        client = self.clients[n]
        if client.crashed:
            return
        for holder in sorted(client.slots):
            self.renew(client, holder, self.now + holding)
        if client.lease is not None:
            self.renew_lease_with(client, client.lease[0], self.now + holding)

    @rule(n=clients, data=st.data())
    def release_slot(self, n: int, data: st.DataObject) -> None:
        picked = self.pick_slot(n, data)
        if picked is None:
            return
        client, holder, slot = picked
        released = self.store.release_slot(NAME, slot.key, slot.index, holder=holder)
        assert released == self.holds(holder, slot), (holder, slot)
        if released:
            del self.slots[(slot.key, slot.index)]
        del client.slots[holder]

    # ------------------------------------------------------------------ rate tokens

    @rule(n=clients, key=keys, lag=st.sampled_from([0, 0, 0, 1_000, 4_000]))
    def take_rate_token(self, n: int, key: str, lag: int) -> None:
        """A start takes a token of the window its clock (``lag`` ms behind) is in."""
        if self.clients[n].crashed:
            return
        rate = RATES[key]
        start, end = rate_window(self.now - lag * MS, rate.period)
        expected = self.windows[(key, start)] < rate.limit
        taken = self.store.take_rate_token(
            NAME, key, limit=rate.limit, window_start=start, window_end=end
        )
        assert taken == expected, (key, start, self.windows[(key, start)])
        event("a rate token taken" if taken else "a full window refused a token")
        if taken:
            self.windows[(key, start)] += 1

    # ------------------------------------------------------------------ the lease

    def lease_is_free(self) -> bool:
        lease = self.lease
        return lease is None or lease.owner is None or lease.until <= self.now

    @rule(n=clients, holding=holding_for)
    def acquire_lease(self, n: int, holding: timedelta) -> None:
        client = self.clients[n]
        if client.crashed:
            return
        until = self.now + holding
        free = self.lease_is_free()
        token = self.store.acquire_lease(LEASE, owner=client.owner, until=until, now=self.now)
        if not free:
            assert token is None, token
            event("a held lease refused")
            return
        if self.lease is not None and self.lease.owner is not None:
            event("a lapsed lease taken over")
        assert token == (self.tokens[-1] + 1 if self.tokens else 1), (token, self.tokens)
        self.tokens.append(token)
        self.lease = StoredLease(client.owner, token, until)
        client.lease = (token, until)
        client.tokens.append(token)

    def lease_matches(self, owner: str, token: int) -> bool:
        lease = self.lease
        return lease is not None and lease.owner == owner and lease.token == token

    @rule(n=clients, holding=holding_for, stale=st.booleans())
    def renew_lease(self, n: int, holding: timedelta, stale: bool) -> None:
        """The holder renews (or, ``stale``, a client renews with its oldest token)."""
        client = self.clients[n]
        token = client.tokens[0] if stale and client.tokens else None
        if token is None and client.lease is not None:
            token = client.lease[0]
        if not client.crashed and token is not None:
            self.renew_lease_with(client, token, self.now + holding)

    def renew_lease_with(self, client: Client, token: int, until: datetime) -> None:
        expected = self.lease_matches(client.owner, token) and not self.lease_is_free()
        renewed = self.store.renew_lease(
            LEASE, owner=client.owner, token=token, until=until, now=self.now
        )
        assert renewed == expected, (client.owner, token, self.lease)
        if renewed:
            assert self.lease is not None
            self.lease.until = until
            client.lease = (token, until)
        else:
            event("a lease renewal refused")
            if client.lease is not None and client.lease[0] == token:
                client.lease = None  # the client learns it lost the lease

    @rule(n=clients, stale=st.booleans())
    def release_lease(self, n: int, stale: bool) -> None:
        """The holder gives the lease back (or, ``stale``, a client releases with its oldest
        token)."""
        client = self.clients[n]
        token = client.tokens[0] if stale and client.tokens else None
        if token is None and client.lease is not None:
            token = client.lease[0]
        if client.crashed or token is None:
            return
        expected = self.lease_matches(client.owner, token)
        released = self.store.release_lease(LEASE, owner=client.owner, token=token)
        assert released == expected, (client.owner, token, self.lease)
        if released:
            assert self.lease is not None
            self.lease.owner = None
        if released or (client.lease is not None and client.lease[0] == token):
            client.lease = None
        if not released:
            event("a lease release refused")

    # ------------------------------------------------------------------ pause

    @rule(name=st.sampled_from([NAME, "other", EVERY_JOB]), paused=st.booleans())
    def set_paused(self, name: str, paused: bool) -> None:
        changed = self.store.set_paused(name, paused, now=self.now)
        assert changed == ((name in self.paused) != paused)
        if paused:
            self.paused.add(name)
        else:
            self.paused.discard(name)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def the_slots_are_the_models(self) -> None:
        live = {
            (key, index): slot for (key, index), slot in self.slots.items() if slot.until > self.now
        }
        holders = self.store.slot_holders(now=self.now)
        assert holders == {(NAME, key, index): slot.holder for (key, index), slot in live.items()}
        assert self.store.held_slots(now=self.now) == ({NAME: len(live)} if live else {})
        for key in KEYS:
            of_key = [(index, slot) for (k, index), slot in live.items() if k == key]
            # Never more than the limit: the largest limit a live holder took its slot under
            # (a lowered limit takes nothing back), and each index below the limit it was
            # taken under.
            assert len(of_key) <= max((slot.limit for _, slot in of_key), default=0)
            assert all(index < slot.limit for index, slot in of_key)
            below = sum(1 for index, _ in of_key if index < self.limits[key])
            assert below <= self.limits[key]

    @invariant()
    def nothing_is_held_by_a_crashed_holder_after_its_until(self) -> None:
        holders = self.store.slot_holders(now=self.now)
        for (_, key, index), holder in holders.items():
            if holder.split("/")[0] in self.dead:
                assert self.slots[(key, index)].until > self.now
        lease = self.store.get_lease(LEASE)
        if lease is not None and lease.owner in self.dead and lease.expires_at <= self.now:
            assert self.lease_is_free()  # lapsed: the next acquisition takes it over

    @invariant()
    def no_window_counts_more_than_its_limit(self) -> None:
        assert all(count <= RATES[key].limit for (key, _), count in self.windows.items())

    @invariant()
    def at_most_one_client_holds_the_lease(self) -> None:
        believers = [c for c in self.clients if c.lease is not None and c.lease[1] > self.now]
        assert len(believers) <= 1, [(c.owner, c.lease) for c in believers]
        stored = self.store.get_lease(LEASE)
        if self.lease is None or self.lease.owner is None:
            assert stored is None
        else:
            assert stored == Lease(LEASE, self.lease.owner, self.lease.token, self.lease.until)
        if believers:
            (client,) = believers
            assert client.lease is not None
            assert stored is not None
            assert (stored.owner, stored.token) == (client.owner, client.lease[0])

    @invariant()
    def tokens_strictly_increase(self) -> None:
        assert self.tokens == list(range(1, len(self.tokens) + 1))
        for client in self.clients:
            assert client.tokens == sorted(set(client.tokens))

    @invariant()
    def the_paused_names_are_the_models(self) -> None:
        assert self.store.paused_names() == frozenset(self.paused)


TestControlsMachine = ControlsMachine.TestCase
TestControlsMachine.settings = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
