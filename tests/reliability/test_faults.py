"""The fault-injecting store itself: what each kind of fault does, the rules' knobs, the counts,
and (with no fault planned) the store contract."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.domain.records import (
    ClaimRequest,
    HistoryStatus,
    JobRecord,
    JobState,
    NewJob,
    Scheduled,
)
from dogs_core.domain.steering import JobChange
from dogs_core.errors import InvalidOptionError, TransientStoreError
from dogs_core.ports import AsyncJobStore
from dogs_testing.contract import JobStoreContract
from dogs_testing.faults import (
    FEED_METHODS,
    PORT_METHODS,
    READ_METHODS,
    WRITE_METHODS,
    FaultKind,
    FaultPlan,
    FaultRule,
    FaultStats,
    FaultyJobStore,
)
from dogs_testing.memory import InMemoryJobStore
from dogs_testing.settling import rescheduled, settle_one, terminal

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class TestFaultyStoreWithoutFaults(JobStoreContract):
    """A wrapper with nothing planned is the store it wraps (on this module's virtual clock,
    not the suite's default asyncio: the feeds' heartbeats then cost no real second)."""

    @pytest.fixture
    def anyio_backend(self) -> tuple[str, dict[str, Any]]:
        return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})

    @pytest.fixture
    def store(self) -> FaultyJobStore:
        return FaultyJobStore(InMemoryJobStore())

    async def seed_record(self, store: AsyncJobStore, record: JobRecord) -> None:
        assert isinstance(store, FaultyJobStore)
        inner = store.inner
        assert isinstance(inner, InMemoryJobStore)
        await inner.insert_record(record)


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


def new_job(n: int = 0) -> NewJob:
    return NewJob(
        id=f"job-{n}", job_name="j", params=None, next_run_at=NOW, priority=1, partition=0
    )


def claim_request(lock_id: str = "lock-1") -> ClaimRequest:
    return ClaimRequest(
        job_names=("j",),
        partition=0,
        hint="byJobName",
        now=NOW,
        locked_until=NOW + timedelta(seconds=30),
        lock_id=lock_id,
    )


pytestmark = pytest.mark.anyio


async def test_an_error_before_the_call_writes_nothing() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    store.fail_next("insert_job", FaultKind.ERROR_BEFORE)
    with pytest.raises(TransientStoreError) as caught:
        await store.insert_job(new_job())
    assert caught.value.write_may_have_applied is False
    assert await inner.find_records() == []
    assert await store.insert_job(new_job()) == Scheduled("job-0")  # one-shot
    assert store.stats.count("insert_job", FaultKind.ERROR_BEFORE) == 1


async def test_an_error_after_the_call_applies_the_write_and_says_so() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    await store.insert_job(new_job())
    store.fail_next("claim", FaultKind.ERROR_AFTER)
    with pytest.raises(TransientStoreError) as caught:
        await store.claim(claim_request())
    assert caught.value.write_may_have_applied is True
    [record] = await inner.find_records()
    assert record.lock_id == "lock-1"  # the claim landed, its reply was lost
    assert record.tries == 1


async def test_an_error_after_a_batch_claim_applies_it_and_says_so() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    await store.insert_jobs([new_job(0), new_job(1)])
    requests = [claim_request(f"lock-{i}") for i in range(3)]
    store.fail_next("claim_many", FaultKind.ERROR_AFTER)
    with pytest.raises(TransientStoreError) as caught:
        await store.claim_many(requests)
    assert caught.value.write_may_have_applied is True
    records = await inner.find_records()
    assert {record.lock_id for record in records} == {requests[0].lock_id, requests[1].lock_id}
    assert await store.claim_many(requests) == []  # the retry finds them locked
    assert store.stats.count("claim_many", FaultKind.ERROR_AFTER) == 1


async def test_an_error_after_a_read_is_not_an_ambiguous_write() -> None:
    store = FaultyJobStore(InMemoryJobStore())
    store.fail_next("get_record", FaultKind.ERROR_AFTER)
    with pytest.raises(TransientStoreError) as caught:
        await store.get_record("x")
    assert caught.value.write_may_have_applied is False


async def test_delays_take_virtual_time_before_or_after_the_call() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    await store.insert_job(new_job())
    store.fail_next("claim", FaultKind.DELAY_BEFORE, delay=3.0)
    store.fail_next("claim", FaultKind.DELAY_AFTER, delay=2.0)
    seen_by_store: list[str | None] = []
    start = anyio.current_time()

    async def watch() -> None:
        for at in (2.9, 3.1):
            await anyio.sleep_until(start + at)
            seen_by_store.append((await inner.find_records())[0].lock_id)

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        claimed = await store.claim(claim_request())
    assert claimed is not None
    assert anyio.current_time() - start == pytest.approx(5.0)
    assert seen_by_store == [None, "lock-1"]  # the store saw the claim at 3 s


async def test_probability_count_and_skip_calls() -> None:
    stats = FaultStats()
    plan = FaultPlan(
        FaultRule(FaultKind.ERROR_BEFORE, frozenset({"get_record"}), 1.0, max_count=2, skip_calls=3)
    )
    store = FaultyJobStore(InMemoryJobStore(), plan, stats=stats)
    outcomes = []
    for _ in range(8):
        try:
            await store.get_record("x")
            outcomes.append("ok")
        except TransientStoreError:
            outcomes.append("fault")
    assert outcomes == ["ok", "ok", "ok", "fault", "fault", "ok", "ok", "ok"]
    assert stats.calls["get_record"] == 8
    assert stats.total == 2


def test_random_faults_follow_the_rate_and_the_seed() -> None:
    def run(seed: int) -> list[bool]:
        plan = FaultPlan.random(error_rate=0.3, methods=["get_record"])
        store = FaultyJobStore(InMemoryJobStore(), plan, rng=random.Random(seed))
        result = []

        async def go() -> None:
            for _ in range(400):
                try:
                    await store.get_record("x")
                    result.append(False)
                except TransientStoreError:
                    result.append(True)

        anyio.run(go, backend="trio")
        return result

    first, again = run(7), run(7)
    assert first == again
    assert 80 < sum(first) < 160


async def test_disabling_keeps_the_plan_and_disconnect_cuts_the_store_off() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner, FaultPlan(FaultRule(FaultKind.ERROR_BEFORE)))
    store.enabled = False
    assert await store.insert_job(new_job(1)) == Scheduled("job-1")
    store.enabled = True
    with pytest.raises(TransientStoreError):
        await store.insert_job(new_job(2))
    store.plan = FaultPlan()
    store.disconnect()
    with pytest.raises(TransientStoreError, match="disconnected"):
        await store.insert_job(new_job(3))
    assert [r.id for r in await inner.find_records()] == ["job-1"]
    store.reconnect()
    assert await store.insert_job(new_job(3)) == Scheduled("job-3")
    assert store.stats.count(kind=FaultKind.DISCONNECTED) == 1
    await store.close()  # never faulted


async def test_a_reply_on_its_way_when_the_store_is_cut_off_is_lost() -> None:
    inner = InMemoryJobStore()
    store = FaultyJobStore(inner)
    store.fail_next("insert_job", FaultKind.DELAY_AFTER, delay=1.0)
    async with anyio.create_task_group() as group:

        async def cut() -> None:
            await anyio.sleep(0.5)
            store.disconnect()

        group.start_soon(cut)
        with pytest.raises(TransientStoreError) as caught:
            await store.insert_job(new_job())
    assert caught.value.write_may_have_applied is True
    assert len(await inner.find_records()) == 1


async def test_the_report_counts_per_method_and_kind() -> None:
    store = FaultyJobStore(InMemoryJobStore())
    assert store.stats.report() == "no faults injected (0 calls)"
    store.fail_next("get_record", FaultKind.ERROR_BEFORE, count=2)
    store.fail_next("get_record", FaultKind.DELAY_AFTER, delay=0.1)
    for _ in range(3):
        with contextlib.suppress(TransientStoreError):
            await store.get_record("x")
    report = store.stats.report()
    assert "get_record" in report
    assert "3 faults injected in 3 calls" in report
    assert store.stats.by_kind() == {FaultKind.ERROR_BEFORE: 2, FaultKind.DELAY_AFTER: 1}
    assert store.stats.by_method() == {"get_record": 3}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"kind": "boom"}, "kind"),
        ({"kind": FaultKind.DISCONNECTED}, "kind"),
        ({"methods": frozenset({"claim", "nope"})}, "methods"),
        ({"probability": 1.5}, "probability"),
        ({"probability": float("nan")}, "probability"),
        ({"max_count": -1}, "max_count"),
        ({"skip_calls": 1.5}, "skip_calls"),
        ({"delay": -1.0}, "delay"),
        ({"delay": (2.0, 1.0)}, "delay"),
        ({"kind": FaultKind.DELAY_BEFORE}, "delay"),
    ],
)
async def test_bad_rules_are_refused(options: dict[str, Any], field: str) -> None:
    options.setdefault("kind", FaultKind.ERROR_BEFORE)
    with pytest.raises(InvalidOptionError, match=field):
        FaultRule(**options)


async def test_every_port_method_is_wrapped() -> None:
    store = FaultyJobStore(InMemoryJobStore(), FaultPlan(FaultRule(FaultKind.ERROR_BEFORE)))
    for method in sorted(PORT_METHODS):
        assert method in dir(store)
    # Every method of every role but close (never faulted) can be named in a plan: the lists
    # are read off the role protocols, and split into reads, writes and feeds.
    roles = [
        role for role in AsyncJobStore.__mro__ if role.__module__.startswith("dogs_core.ports")
    ]
    declared = {name for role in roles for name in vars(role) if not name.startswith("_")}
    assert declared - {"close"} <= PORT_METHODS
    assert {"settle_many", "watch_records", "archive_history"} <= PORT_METHODS
    assert READ_METHODS <= PORT_METHODS, "a read the port no longer has"
    assert {"watch_records", "watch_history", "watch_pauses"} == FEED_METHODS
    assert not (READ_METHODS & WRITE_METHODS)
    assert not (FEED_METHODS & WRITE_METHODS)
    assert READ_METHODS | WRITE_METHODS | FEED_METHODS == PORT_METHODS
    with pytest.raises(InvalidOptionError):
        FaultyJobStore(object())  # type: ignore[arg-type]


async def steered_store() -> tuple[InMemoryJobStore, FaultyJobStore, list[str]]:
    """An in-memory store with two records scheduled in an hour and one failed ("job-2")."""
    inner = InMemoryJobStore()
    await inner.insert_jobs([new_job(n) for n in range(3)])
    later = NOW + timedelta(hours=1)
    for n in range(3):
        claimed = await inner.claim(claim_request(f"lock-{n}"))
        assert claimed is not None
        assert claimed.job_id == f"job-{n}"
        if n == 2:
            assert await settle_one(inner, "job-2", claimed.lock_id, terminal(NOW))
        else:
            assert await settle_one(
                inner, claimed.job_id, claimed.lock_id, rescheduled(later, reset_tries=True)
            )
    return inner, FaultyJobStore(inner), ["job-0", "job-1", "job-2"]


STEERING_CALLS: dict[str, Callable[[AsyncJobStore], Awaitable[object]]] = {
    "delete_record": lambda store: store.delete_record("job-0"),
    "modify_record": lambda store: store.modify_record("job-0", JobChange(priority=9), now=NOW),
    "delete_records": lambda store: store.delete_records(
        job_name="j", state=JobState.FAILED, now=NOW
    ),
}


@pytest.mark.parametrize("method", sorted(STEERING_CALLS))
async def test_the_operators_writes_fault_like_every_write(method: str) -> None:
    """``delete_job``, ``modify_job`` and ``delete_jobs`` are writes: an error before them
    writes nothing, an error after them was applied and says so."""
    inner, store, _ = await steered_store()
    before = await inner.find_records()
    store.fail_next(method, FaultKind.ERROR_BEFORE)
    with pytest.raises(TransientStoreError) as caught:
        await STEERING_CALLS[method](store)
    assert caught.value.write_may_have_applied is False
    assert await inner.find_records() == before
    store.fail_next(method, FaultKind.ERROR_AFTER)
    with pytest.raises(TransientStoreError) as caught:
        await STEERING_CALLS[method](store)
    assert caught.value.write_may_have_applied is True
    assert await inner.find_records() != before  # applied, its reply lost
    assert store.stats.count(method) == 2


async def test_plans_target_the_operators_methods_and_reads_pass_their_filters() -> None:
    inner, store, ids = await steered_store()
    targets = frozenset({"delete_record", "modify_record", "delete_records", "find_records"})
    store.plan = FaultPlan(FaultRule(FaultKind.ERROR_BEFORE, targets, max_count=4))
    for method in sorted(STEERING_CALLS):
        with pytest.raises(TransientStoreError):
            await STEERING_CALLS[method](store)
    with pytest.raises(TransientStoreError):
        await store.find_records()
    assert store.stats.by_method() == dict.fromkeys(targets, 1)
    # With the rule spent, the calls reach the store with every argument.
    [failed] = await store.find_records(job_name="j", state=JobState.FAILED, now=NOW, limit=5)
    assert failed.id == ids[2]
    assert [r.id for r in await store.find_records(after=ids[0], limit=1)] == [ids[1]]
    assert (
        await store.delete_records(job_name="j", state=JobState.FAILED, now=NOW, dry_run=True) == 1
    )
    deleted = await store.delete_record(ids[2], unless_failed=True)
    assert deleted is None
    change = JobChange(next_run_at=NOW, tries=0, revive=True)
    modified = await store.modify_record(ids[2], change, now=NOW)
    assert modified is not None
    assert modified.state(NOW) is JobState.DUE
    assert await store.read_history("j", status=HistoryStatus.CANCELLED) == []
    assert set(await inner.find_records()) == set(await store.find_records())
    ambiguous = FaultPlan.random(ambiguous_rate=1.0, methods=targets)
    assert ambiguous.rules[0].methods == targets - {"find_records"}


# -- the fleet controls ---------------------------------------------------------------------------

LATER = NOW + timedelta(hours=1)


async def controlled_store() -> tuple[InMemoryJobStore, FaultyJobStore]:
    """An in-memory store where "h" holds slot 0 of "j" and "o" holds lease "x" (token 1),
    both until NOW + 30 s."""
    inner = InMemoryJobStore()
    until = NOW + timedelta(seconds=30)
    assert await inner.acquire_slot("j", "", limit=2, holder="h", until=until, now=NOW) == 0
    assert await inner.acquire_lease("x", owner="o", until=until, now=NOW) == 1
    return inner, FaultyJobStore(inner)


async def _expires_at(store: AsyncJobStore, name: str) -> datetime | None:
    lease = await store.get_lease(name)
    return None if lease is None else lease.expires_at


Call = Callable[[AsyncJobStore], Awaitable[object]]

#: Each write of the controls, and whether it landed (read from the inner store).
CONTROL_WRITES: dict[str, tuple[Call, Callable[[InMemoryJobStore], Awaitable[bool]]]] = {
    "set_paused": (
        lambda s: s.set_paused("j", True, now=NOW),
        lambda inner: _contains(inner.paused_names(), "j"),
    ),
    "acquire_slot": (
        lambda s: s.acquire_slot("j", "", limit=2, holder="h2", until=LATER, now=NOW),
        lambda inner: _contains(inner.slot_holders(now=NOW), ("j", "", 1)),
    ),
    "renew_slot": (
        lambda s: s.renew_slot("j", "", 0, holder="h", until=LATER),
        lambda inner: _contains(inner.held_slots(now=LATER - timedelta(seconds=1)), "j"),
    ),
    "release_slot": (
        lambda s: s.release_slot("j", "", 0, holder="h"),
        lambda inner: _lacks(inner.held_slots(now=NOW), "j"),
    ),
    "take_rate_token": (
        lambda s: s.take_rate_token("j", "", limit=1, window_start=NOW, window_end=LATER),
        lambda inner: _lacks_token(inner),
    ),
    "acquire_lease": (
        lambda s: s.acquire_lease("y", owner="p", until=LATER, now=NOW),
        lambda inner: _is_not_none(inner.get_lease("y")),
    ),
    "renew_lease": (
        lambda s: s.renew_lease("x", owner="o", token=1, until=LATER, now=NOW),
        lambda inner: _equals(_expires_at(inner, "x"), LATER),
    ),
    "release_lease": (
        lambda s: s.release_lease("x", owner="o", token=1),
        lambda inner: _equals(inner.get_lease("x"), None),
    ),
}


async def _contains(found: Awaitable[Any], item: object) -> bool:
    return item in await found


async def _lacks(found: Awaitable[Any], item: object) -> bool:
    return item not in await found


async def _is_not_none(found: Awaitable[object]) -> bool:
    return await found is not None


async def _equals(found: Awaitable[object], expected: object) -> bool:
    return await found == expected


async def _lacks_token(inner: InMemoryJobStore) -> bool:
    """Whether the window's one token is gone (asking takes it when it is not)."""
    return not await inner.take_rate_token("j", "", limit=1, window_start=NOW, window_end=LATER)


@pytest.mark.parametrize("method", sorted(CONTROL_WRITES))
async def test_the_controls_writes_fault_like_every_write(method: str) -> None:
    """An error before a control's write writes nothing; an error after it was applied and
    says so (``write_may_have_applied``): a slot, token or lease may be held by a caller that
    never learned it."""
    call, landed = CONTROL_WRITES[method]
    assert method in WRITE_METHODS
    inner, store = await controlled_store()
    store.fail_next(method, FaultKind.ERROR_BEFORE)
    with pytest.raises(TransientStoreError) as caught:
        await call(store)
    assert caught.value.write_may_have_applied is False
    assert not await landed(inner)
    inner, store = await controlled_store()
    store.fail_next(method, FaultKind.ERROR_AFTER)
    with pytest.raises(TransientStoreError) as caught:
        await call(store)
    assert caught.value.write_may_have_applied is True
    assert await landed(inner)  # applied, its reply lost
    assert store.stats.count(method, FaultKind.ERROR_AFTER) == 1


async def test_the_controls_reads_are_never_ambiguous_and_pass_their_arguments() -> None:
    inner, store = await controlled_store()
    reads = {"paused_names", "held_slots", "get_lease"}
    assert reads <= READ_METHODS
    for method in sorted(reads):
        store.fail_next(method, FaultKind.ERROR_AFTER)
    for call in (
        store.paused_names(),
        store.held_slots(now=NOW),
        store.get_lease("x"),
    ):
        with pytest.raises(TransientStoreError) as caught:
            await call
        assert caught.value.write_may_have_applied is False
    assert store.stats.by_method() == dict.fromkeys(reads, 1)
    assert await store.held_slots(now=NOW) == {"j": 1}
    assert await store.held_slots(now=NOW + timedelta(seconds=30)) == {}
    lease = await store.get_lease("x")
    assert lease is not None
    assert (lease.owner, lease.token) == ("o", 1)
    assert await store.set_paused("*", True, now=NOW)
    assert await store.paused_names() == await inner.paused_names() == frozenset({"*"})
    ambiguous = FaultPlan.random(ambiguous_rate=1.0, methods=reads | set(CONTROL_WRITES))
    assert ambiguous.rules[0].methods == frozenset(CONTROL_WRITES)
