"""Tests specific to the in-memory store: its claim index against a brute-force selector, TTL
emulation, copies, thread safety and the testing helpers. The shared semantics are covered by the
contract suite (tests/test_memory_store_contract.py)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.claimable import ClaimScope, is_claimable
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import (
    ClaimRequest,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    Hold,
    HoldReason,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    NewJob,
    Owner,
    Scheduled,
)
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.domain.steering import JobChange
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError, StoreError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_core.ports import AsyncJobStore, JobStore, StoreCapabilities
from dogs_testing.memory import InMemoryJobStore, SyncInMemoryJobStore
from dogs_testing.settling import (
    completed,
    demoted,
    released,
    rescheduled,
    settle_one_sync,
    terminal,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
DAY = timedelta(days=1)


class ManualClock:
    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current


def new_job(
    name: str = "a",
    *,
    at: datetime = T0,
    priority: int = 100,
    partition: int = 0,
    uid: str | None = None,
    params: dict[str, Any] | None = None,
    type: JobType = JobType.EVENT,
) -> NewJob:
    return NewJob(
        id=new_record_id(),
        job_name=name,
        params=params,
        next_run_at=at,
        priority=priority,
        partition=partition,
        unique_identifier=uid,
        type=type,
    )


def request(
    *names: str, partition: int = 0, now: datetime = T0, lock_for: timedelta = 60 * S
) -> ClaimRequest:
    return ClaimRequest(
        job_names=names or ("a",),
        partition=partition,
        hint="byJobName",
        now=now,
        locked_until=now + lock_for,
        lock_id=new_execution_id(),
    )


def scheduled_id(outcome: object) -> str:
    assert isinstance(outcome, Scheduled)
    return outcome.id


def test_both_faces_satisfy_their_ports() -> None:
    async_store: AsyncJobStore = InMemoryJobStore()
    sync_store: JobStore = SyncInMemoryJobStore()
    assert isinstance(async_store, AsyncJobStore)
    assert isinstance(sync_store, JobStore)
    assert sync_store.capabilities() == StoreCapabilities(claim_path="memory", supports_probe=True)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_all_records_has_no_page_limit(anyio_backend: str) -> None:
    store = InMemoryJobStore()
    jobs = [new_job("ab"[i % 2]) for i in range(150)]
    store.sync.insert_jobs(list(reversed(jobs)))
    assert [r.id for r in await store.all_records()] == sorted(job.id for job in jobs)
    assert [r.id for r in store.sync.all_records("b")] == sorted(j.id for j in jobs[1::2])
    assert len(await store.find_records()) == 100


def test_the_sync_face_shares_the_state_of_the_async_face() -> None:
    shared = SyncInMemoryJobStore()
    store = InMemoryJobStore(sync=shared)
    assert store.sync is shared
    with pytest.raises(InvalidOptionError, match="not both") as refused:
        InMemoryJobStore(sync=shared, clock=ManualClock(T0))
    assert (refused.value.field, refused.value.value) == ("sync", shared)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_async_face_reads_what_the_sync_face_wrote(anyio_backend: str) -> None:
    store = InMemoryJobStore()
    job_id = scheduled_id(store.sync.insert_job(new_job()))
    claimed = await store.claim(request())
    assert claimed is not None
    assert claimed.job_id == job_id
    assert settle_one_sync(store.sync, job_id, claimed.lock_id, completed())
    assert await store.get_record(job_id) is None


def test_ties_are_broken_by_insertion_order() -> None:
    store = SyncInMemoryJobStore()
    ids = [scheduled_id(store.insert_job(new_job())) for _ in range(20)]
    claimed = [store.claim(request()) for _ in ids]
    assert [c.job_id for c in claimed if c is not None] == ids
    assert [r.id for r in store.find_records()] == ids


def test_params_are_copied_in_and_out() -> None:
    store = SyncInMemoryJobStore()
    params: dict[str, Any] = {"items": [1, 2]}
    job_id = scheduled_id(store.insert_job(new_job(params=params)))
    params["items"].append(3)
    record = store.get_record(job_id)
    assert record is not None
    assert record.params == {"items": [1, 2]}
    assert isinstance(record.params, dict)
    record.params["items"].append(4)
    claimed = store.claim(request())
    assert claimed is not None
    assert claimed.params == {"items": [1, 2]}


def test_claim_request_times_are_truncated_to_the_millisecond() -> None:
    store = SyncInMemoryJobStore()
    job_id = scheduled_id(store.insert_job(new_job()))
    now = T0 + timedelta(microseconds=2_999)
    claimed = store.claim(
        dataclasses.replace(request(now=now), locked_until=now + timedelta(microseconds=500))
    )
    assert claimed is not None
    assert (claimed.last_run_at, claimed.locked_until) == (
        T0 + timedelta(milliseconds=2),
        T0 + timedelta(milliseconds=3),
    )
    record = store.get_record(job_id)
    assert record is not None
    assert record.claim_was_stale is False


def test_insert_record_refuses_to_break_a_unique_index() -> None:
    store = SyncInMemoryJobStore()
    base = JobRecord(
        id=new_record_id(), job_name="tick", type=JobType.RECURRENT, priority=1, next_run_at=T0
    )
    store.insert_record(dataclasses.replace(base, unique_identifier="u"))
    with pytest.raises(StoreError, match="duplicate id"):
        store.insert_record(base)
    with pytest.raises(StoreError, match="unique_identifier"):
        store.insert_record(
            dataclasses.replace(base, id=new_record_id(), type=JobType.EVENT, unique_identifier="u")
        )
    with pytest.raises(StoreError, match="recurrent record"):
        store.insert_record(dataclasses.replace(base, id=new_record_id()))


def test_a_second_recurrent_record_is_an_item_error_in_bulk() -> None:
    store = SyncInMemoryJobStore()
    store.ensure_recurrent("tick", priority=1, partition=0, now=T0)
    with pytest.raises(StoreError):
        store.insert_job(new_job("tick", type=JobType.RECURRENT))
    result = store.insert_jobs([new_job(), new_job("tick", type=JobType.RECURRENT), new_job()])
    assert (result.scheduled_count, result.skipped_count) == (2, 0)
    [error] = result.errors
    assert error.index == 1
    assert isinstance(error.error, StoreError)
    assert result.outcomes[1] is None


def test_probe_counts_examined_entries_and_never_other_names() -> None:
    store = SyncInMemoryJobStore()
    store.insert_jobs([new_job("b") for _ in range(100)])
    store.insert_jobs([new_job("a", at=T0 + S) for _ in range(50)])  # one future level
    store.insert_jobs([new_job("a", priority=1) for _ in range(4)])
    for _ in range(3):
        assert store.claim(request("a")) is not None
    # the head of the future level, then 3 locked entries, then the candidate
    assert store.probe(hint="byJobName", job_names=["a"], partition=0, now=T0) == 5.0
    assert store.probe(hint="globalPriority", job_names=["c"], partition=0, now=T0) == 0.0


def test_ttl_purges_expired_records_and_history_lazily() -> None:
    clock = ManualClock(T0)
    store = SyncInMemoryJobStore(clock=clock)
    job_id = scheduled_id(store.insert_job(new_job(uid="u")))
    claimed = store.claim(request())
    assert claimed is not None
    assert settle_one_sync(store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 + DAY))
    # a later retention moves the deadline: the first heap entry must not purge the record
    assert store.backfill_retention(retention=3 * DAY, now=T0) == 1
    clock.current = T0 + 2 * DAY
    assert store.get_record(job_id) is not None
    assert isinstance(store.insert_job(new_job(uid="u")), Duplicate)
    clock.current = T0 + 3 * DAY
    assert store.get_record(job_id) is None
    assert store.find_records() == []
    assert isinstance(store.insert_job(new_job(uid="u")), Scheduled)

    row = HistoryRecord(
        execution_id="e1",
        job_id=job_id,
        job_name="a",
        type=JobType.EVENT,
        priority=1,
        tries=1,
        started_at=T0,
        ended_at=T0 + S,
        status=HistoryStatus.SUCCESS,
        expires_at=T0 + 4 * DAY,
    )
    store.write_history_many([row])
    assert len(store.read_history("a")) == 1
    clock.current = T0 + 4 * DAY
    assert store.read_history("a") == []
    store.write_history_many([row])  # the execution id is free again: a fresh insert
    assert store.read_history("a") == []  # ... already expired


def test_without_a_clock_nothing_expires() -> None:
    store = SyncInMemoryJobStore()
    job_id = scheduled_id(store.insert_job(new_job()))
    claimed = store.claim(request())
    assert claimed is not None
    assert settle_one_sync(store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 - DAY))
    assert store.get_record(job_id) is not None


def test_a_later_history_row_moves_nothing() -> None:
    """The first row wins whole: a later row of the execution under another name or job id
    neither replaces it nor moves it in the name and job indexes."""
    store = SyncInMemoryJobStore()
    row = HistoryRecord(
        execution_id="e1",
        job_id="j",
        job_name="a",
        type=JobType.EVENT,
        priority=1,
        tries=1,
        started_at=T0,
        ended_at=T0 + S,
        status=HistoryStatus.ERROR,
        expires_at=T0 + DAY,
    )
    store.write_history_many([row])
    late = dataclasses.replace(row, job_name="b", job_id="k", status=HistoryStatus.SUCCESS)
    store.write_history_many([late])
    assert store.read_history("a") == [row]
    assert store.read_history(job_id="j") == [row]
    assert store.read_history("b") == []
    assert store.read_history(job_id="k") == []


def test_threads_claim_each_job_exactly_once() -> None:
    store = SyncInMemoryJobStore()
    store.insert_jobs([new_job(partition=i % 3, priority=i % 5) for i in range(600)])
    claimed: list[str] = []
    claimed_lock = threading.Lock()

    def worker() -> None:
        misses = 0
        partition = 0
        while misses < 3:
            job = store.claim(request(partition=partition % 3))
            partition += 1
            if job is None:
                misses += 1
                continue
            misses = 0
            with claimed_lock:
                claimed.append(job.job_id)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == 600
    assert len(set(claimed)) == 600


# ---------------------------------------------------------------------- claim index vs brute force

NAMES = ("a", "b", "c")

record_specs = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from([JobType.EVENT, JobType.EVENT, JobType.RECURRENT]),
    st.sampled_from([0, 1, 5]),  # priority
    st.integers(-3, 3),  # next_run_at offset (s)
    st.sampled_from([None, 0, 1]),  # partition
    st.booleans(),  # terminal status
    st.one_of(st.none(), st.integers(-2, 2)),  # locked_until offset (s)
)

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("claim"),
            st.frozensets(st.sampled_from(NAMES), min_size=1),
            st.sampled_from([0, 1]),
            st.integers(-3, 3),
            st.integers(1, 3),
        ),
        st.tuples(
            st.just("claim_many"),
            st.frozensets(st.sampled_from(NAMES), min_size=1),
            st.sampled_from([0, 1]),
            st.integers(-3, 3),
            st.integers(1, 6),
        ),
        st.tuples(
            st.just("reschedule"),
            st.integers(0, 50),
            st.integers(-3, 3),
            st.sampled_from([None, 0, 1, 5, 7]),
            st.booleans(),
        ),
        st.tuples(st.sampled_from(["demote", "complete", "mark"]), st.integers(0, 50)),
        st.tuples(st.just("release"), st.integers(0, 50), st.integers(-3, 3)),
        st.tuples(st.just("reconcile"), st.sampled_from([1, 2]), st.integers(0, 3)),
        st.tuples(st.just("ensure"), st.sampled_from(NAMES), st.sampled_from([0, 1, 5, 9])),
        st.tuples(st.just("delete"), st.integers(0, 50), st.one_of(st.none(), st.integers(-3, 3))),
        st.tuples(
            st.just("modify"),
            st.integers(0, 50),
            st.one_of(st.none(), st.integers(-3, 3)),  # next_run_at offset
            st.sampled_from([None, 0, 5, 7]),  # priority
            st.booleans(),  # revive
            st.integers(-3, 3),  # now offset
        ),
        st.tuples(
            st.just("delete_jobs"),
            st.sampled_from([s for s in JobState if s is not JobState.RUNNING]),
            st.integers(-3, 3),
        ),
    ),
    max_size=40,
)


def constant(value: int) -> Callable[[], int]:
    return lambda: value


def brute_force_claims(
    store: SyncInMemoryJobStore, order: dict[str, int], req: ClaimRequest, count: int = 1
) -> list[str]:
    """The ids the next ``count`` claims of ``req`` take."""
    scope = ClaimScope(partition=req.partition, job_names=req.job_names, now=req.now)
    candidates = [r for r in store.find_records() if is_claimable(r, scope)]
    candidates.sort(key=lambda r: (-r.priority, r.next_run_at, order[r.id]))
    return [r.id for r in candidates[:count]]


def brute_force_claim(
    store: SyncInMemoryJobStore, order: dict[str, int], req: ClaimRequest
) -> str | None:
    ids = brute_force_claims(store, order, req)
    return ids[0] if ids else None


def index_entries(store: SyncInMemoryJobStore) -> Iterator[tuple[int, str, str]]:
    for (partition, name), keys in store._index.items():
        assert keys == sorted(keys)
        for key in keys:
            yield partition, name, key[3]


def check_index(store: SyncInMemoryJobStore) -> None:
    expected = sorted(
        (r.partition, r.job_name, r.id)
        for r in store.find_records()
        if r.partition is not None
        and not (r.type is JobType.EVENT and r.status is JobStatus.MAX_TRIES_REACHED)
    )
    assert sorted(index_entries(store)) == expected


def records_from_specs(
    specs: list[tuple[str, JobType, int, int, int | None, bool, int | None]],
    *,
    with_params: bool = False,
) -> list[JobRecord]:
    """The records of the property tests (one recurrent record per name at most, as stores
    keep it): a locked spec carries a lock id and, ``with_params``, params and ``tries``."""
    records = []
    recurrent_names: set[str] = set()
    for name, job_type, priority, offset, partition, is_terminal, lock_offset in specs:
        if job_type is JobType.RECURRENT:
            if name in recurrent_names:
                job_type = JobType.EVENT
            recurrent_names.add(name)
        locked = lock_offset is not None
        records.append(
            JobRecord(
                id=new_record_id(),
                job_name=name,
                type=job_type,
                priority=priority,
                next_run_at=T0 + offset * S,
                partition=partition,
                params={"n": offset} if with_params else None,
                status=JobStatus.MAX_TRIES_REACHED if is_terminal else None,
                locked_until=T0 + lock_offset * S if lock_offset is not None else None,
                lock_id=new_execution_id() if locked else None,
                tries=2 if locked and with_params else None,
            )
        )
    return records


def check_claim(store: SyncInMemoryJobStore, order: dict[str, int], op: tuple[Any, ...]) -> None:
    """A ``claim`` or ``claim_many`` operation takes what the brute-force selector says."""
    _, names, partition, now_offset, size = op
    req = request(*sorted(names), partition=partition, now=T0 + now_offset * S)
    if op[0] == "claim":
        req = dataclasses.replace(req, locked_until=req.now + size * S)
        expected = brute_force_claim(store, order, req)
        claimed = store.claim(req)
        assert (claimed.job_id if claimed else None) == expected
        return
    requests = [dataclasses.replace(req, lock_id=new_execution_id()) for _ in range(size)]
    expected_ids = brute_force_claims(store, order, req, size)
    claimed_jobs = store.claim_many(requests)
    assert [job.job_id for job in claimed_jobs] == expected_ids
    assert [job.lock_id for job in claimed_jobs] == [
        r.lock_id for r in requests[: len(expected_ids)]
    ]


def apply_steering(
    store: SyncInMemoryJobStore, op: tuple[Any, ...], target: JobRecord | None
) -> None:
    """An operator's ``delete_job``, ``modify_job`` or ``delete_jobs`` (the index must follow)."""
    if op[0] == "delete_jobs":
        store.delete_records(job_name=None, state=op[1], now=T0 + op[2] * S)
    elif op[0] == "delete" and target is not None:
        at = None if op[2] is None else T0 + op[2] * S
        store.delete_record(target.id, unless_running_at=at)
    elif op[0] == "modify" and target is not None:
        _, _, offset, priority, revive, now_offset = op
        change = JobChange(
            next_run_at=None if offset is None else T0 + offset * S,
            priority=priority,
            revive=revive,
        )
        store.modify_record(target.id, change, now=T0 + now_offset * S)


@settings(max_examples=250, deadline=None)
@given(specs=st.lists(record_specs, max_size=25), ops=operations)
def test_claims_match_a_brute_force_selector(
    specs: list[tuple[str, JobType, int, int, int | None, bool, int | None]],
    ops: list[tuple[Any, ...]],
) -> None:
    store = SyncInMemoryJobStore()
    order: dict[str, int] = {}
    for record in records_from_specs(specs):
        store.insert_record(record)
        order[record.id] = len(order)
    check_index(store)

    for op in ops:
        records = store.find_records()
        target = records[op[1] % len(records)] if records and isinstance(op[1], int) else None
        lock_id = target.lock_id if target is not None and target.lock_id else "nobody"
        kind = op[0]
        if kind in ("claim", "claim_many"):
            check_claim(store, order, op)
        elif kind in ("delete", "modify", "delete_jobs"):
            apply_steering(store, op, target)
        elif kind == "reschedule" and target is not None:
            _, _, offset, priority, reset = op
            settle_one_sync(
                store,
                target.id,
                lock_id,
                rescheduled(T0 + offset * S, priority=priority, reset_tries=reset),
            )
        elif kind == "demote" and target is not None:
            settle_one_sync(store, target.id, lock_id, demoted())
        elif kind == "complete" and target is not None:
            settle_one_sync(store, target.id, lock_id, completed())
        elif kind == "mark" and target is not None:
            settle_one_sync(store, target.id, lock_id, terminal(T0))
        elif kind == "release" and target is not None:
            settle_one_sync(store, target.id, lock_id, released(T0 + op[2] * S))
        elif kind == "reconcile":
            _, n_partitions, choice = op
            store.reconcile_partitions(
                job_names=NAMES,
                n_partitions=n_partitions,
                now=T0,
                limit=10,
                choose_partition=constant(choice % n_partitions),
            )
        elif kind == "ensure":
            _, name, priority = op
            store.ensure_recurrent(name, priority=priority, partition=0, now=T0)
            for record in store.find_records():
                order.setdefault(record.id, len(order))
        check_index(store)


@settings(max_examples=150, deadline=None)
@given(
    specs=st.lists(record_specs, max_size=25),
    names=st.frozensets(st.sampled_from(NAMES), min_size=1),
    partition=st.sampled_from([0, 1]),
    now_offset=st.integers(-3, 3),
    count=st.integers(1, 8),
)
def test_claim_many_is_claims_in_a_row(
    specs: list[tuple[str, JobType, int, int, int | None, bool, int | None]],
    names: frozenset[str],
    partition: int,
    now_offset: int,
    count: int,
) -> None:
    """One ``claim_many`` returns, and leaves, exactly what ``count`` claims in a row do."""
    batch, one_by_one = SyncInMemoryJobStore(), SyncInMemoryJobStore()
    for record in records_from_specs(specs, with_params=True):
        batch.insert_record(record)
        one_by_one.insert_record(record)
    req = request(*sorted(names), partition=partition, now=T0 + now_offset * S)
    requests = [dataclasses.replace(req, lock_id=new_execution_id()) for _ in range(count)]
    claimed = batch.claim_many(requests)
    in_a_row = [one_by_one.claim(r) for r in requests]
    assert claimed == [job for job in in_a_row if job is not None]
    assert in_a_row[len(claimed) :] == [None] * (count - len(claimed))
    assert batch.find_records() == one_by_one.find_records()
    check_index(batch)


def test_claim_many_hands_out_copies_of_params() -> None:
    store = SyncInMemoryJobStore()
    store.insert_job(new_job(params={"list": [1]}))
    [claimed] = store.claim_many([request()])
    assert claimed.params is not None
    claimed.params["list"].append(2)
    [record] = store.find_records()
    assert record.params == {"list": [1]}


def test_hand_built_copies_keep_every_field() -> None:
    """The store builds claimed records and history rows field by field (for speed): a field
    added to JobRecord or HistoryRecord must be added there too, or this fails."""
    from dogs_testing import _memory_state as memory

    assert {f.name for f in dataclasses.fields(JobRecord)} == {
        "id", "job_name", "type", "priority", "next_run_at", "partition", "params",
        "unique_identifier", "last_run_at", "locked_until", "lock_id", "claim_was_stale",
        "tries", "status", "max_tries_reached_at", "expires_at", "lock_owner",
        "lock_released_at", "trace_context", "progress", "workflow",
        # Issue 27's additive fields, copied by the claim too (_memory_state.MemoryState._take).
        "tags", "start_before", "unique_window", "debounce_until", "parked_at", "parked_run_at",
        "schedule", "behind_until",
        "held",
        # Issue 37: durable steps, copied by the claim (and handed to the execution), and the
        # wake-up of a durable sleep.
        "steps", "sleeping_until",
    }  # fmt: skip
    row = HistoryRecord(
        execution_id="e",
        job_id="j",
        job_name="n",
        type=JobType.EVENT,
        priority=3,
        tries=2,
        started_at=datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
        ended_at=datetime(2030, 1, 1, 0, 0, 1, tzinfo=UTC),
        status=HistoryStatus.ERROR,
        expires_at=datetime(2030, 1, 2, tzinfo=UTC),
        params={"nested": {"a": [1, 2]}, "plain": 1},
        result={"list": [1]},
        error_message="boom",
        unique_identifier="u",
        was_stale=True,
        error_type="builtins.ValueError",
        error_traceback="Traceback ...",
        owner=Owner(host="h", pid=1, instance_id="i"),
        progress=Progress(0.5, "half", {"rows": [1]}, datetime(2030, 1, 1, 0, 0, 1, 999, UTC), "e"),
        workflow_id="w",
        outcome="failed",
        ran=False,
        superseded_by="taker",
    )
    assert {f.name for f in dataclasses.fields(HistoryRecord)} == {
        f.name
        for f in dataclasses.fields(row)
        if getattr(row, f.name) is not None and getattr(row, f.name) != f.default
    }, "give every field a value that is not its default"
    stored = memory._history_row(row)
    expected = dataclasses.replace(
        row,
        started_at=datetime(2030, 1, 1, 0, 0, 0, 123000, tzinfo=UTC),
        progress=Progress(0.5, "half", {"rows": [1]}, datetime(2030, 1, 1, 0, 0, 1, 0, UTC), "e"),
    )
    assert stored == expected
    assert stored.progress is not None
    assert stored.progress.data is not row.progress.data  # type: ignore[union-attr]
    assert stored.params is not row.params
    assert stored.params["nested"] is not row.params["nested"]  # type: ignore[index]
    assert stored.result is not row.result


def test_a_claim_keeps_every_other_field() -> None:
    """The claimed record is built field by field: every field it does not set survives."""
    owner = Owner(host="h", pid=7, instance_id="new")
    record = JobRecord(
        id=new_record_id(),
        job_name="a",
        type=JobType.RECURRENT,
        priority=3,
        next_run_at=T0 - S,
        partition=0,
        params={"n": 1},
        unique_identifier="u",
        last_run_at=T0 - 2 * S,
        locked_until=T0 - S,
        lock_id="old",
        claim_was_stale=False,
        tries=4,
        status=JobStatus.MAX_TRIES_REACHED,  # legacy: recurrent records stay claimable
        max_tries_reached_at=T0 - DAY,
        expires_at=T0 + DAY,
        lock_owner=Owner(host="h", pid=6, instance_id="old"),
        lock_released_at=T0 - 3 * S,  # before locked_until: a stale lock
        trace_context={"traceparent": "00-1-2-01"},
        progress=Progress(0.5, "the old execution's", None, T0 - 2 * S, "old"),
        workflow={"id": "w", "step": "s", "name": "a"},
        tags=("tenant:acme",),
        start_before=T0 + DAY,
        unique_window=60 * S,
        debounce_until=T0 + DAY,
        behind_until=T0 + DAY,
        parked_at=T0 - DAY,
        parked_run_at=T0 - S,
        schedule=ScheduleSpec(job="report", every=3600 * S),
        held=Hold(HoldReason.RATE, since=T0 - DAY, until=T0 - S),
        steps=(RecordedStep("charge", "ch_1", T0 - DAY, "old", 3),),
        sleeping_until=T0 - S,  # it woke: the sleep is over
    )
    assert {f.name for f in dataclasses.fields(record)} == {
        f.name for f in dataclasses.fields(record) if getattr(record, f.name) is not None
    }
    store = SyncInMemoryJobStore()
    store.insert_record(record)
    claim = dataclasses.replace(request(), owner=owner)
    claimed = store.claim(claim)
    assert claimed is not None
    assert claimed.previous_attempt is not None
    assert claimed.previous_attempt.owner == record.lock_owner
    assert claimed.held_since == T0 - DAY  # its hold was in force (until is its next run)
    assert store.get_record(record.id) == dataclasses.replace(
        record,
        last_run_at=T0,
        locked_until=claim.locked_until,
        lock_id=claim.lock_id,
        claim_was_stale=True,
        tries=5,
        lock_owner=owner,
        lock_released_at=None,
        progress=None,  # kept, but not shown: another execution's
    )


# ---------------------------------------------------------------------- fleet controls


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"])
def test_controls_refuse_a_bad_limit_and_write_nothing(limit: Any) -> None:
    store = SyncInMemoryJobStore()
    with pytest.raises(InvalidOptionError) as refused:
        store.acquire_slot("a", "", limit=limit, holder="h", until=T0 + S, now=T0)
    assert refused.value.field == "limit"
    with pytest.raises(InvalidOptionError) as refused:
        store.take_rate_token("a", "", limit=limit, window_start=T0, window_end=T0 + S)
    assert refused.value.field == "limit"
    assert store.held_slots(now=T0) == {}
    assert store.take_rate_token("a", "", limit=1, window_start=T0, window_end=T0 + S)
    with pytest.raises(InvalidOptionError, match="paused"):
        store.set_paused("a", 1, now=T0)  # type: ignore[arg-type]
    assert store.paused_names() == frozenset()


BAD_CONTROL_CALLS: dict[str, tuple[str, Callable[[SyncInMemoryJobStore], object]]] = {
    "empty name": ("job_name", lambda s: s.set_paused("", True, now=T0)),
    "blank name": (
        "job_name",
        lambda s: s.acquire_slot(" ", "", limit=1, holder="h", until=T0, now=T0),
    ),
    "key too long": (
        "key",
        lambda s: s.acquire_slot("a", "k" * 257, limit=1, holder="h", until=T0, now=T0),
    ),
    "key not a str": ("key", lambda s: s.release_slot("a", 1, 0, holder="h")),  # type: ignore[arg-type]
    "empty holder": (
        "holder",
        lambda s: s.acquire_slot("a", "", limit=1, holder="", until=T0, now=T0),
    ),
    "negative index": ("index", lambda s: s.renew_slot("a", "", -1, holder="h", until=T0)),
    "bool index": ("index", lambda s: s.release_slot("a", "", True, holder="h")),
    "window ends first": (
        "window_end",
        lambda s: s.take_rate_token("a", "", limit=1, window_start=T0, window_end=T0),
    ),
    "empty lease": ("name", lambda s: s.acquire_lease("", owner="o", until=T0, now=T0)),
    "empty owner": ("owner", lambda s: s.renew_lease("x", owner="", token=1, until=T0, now=T0)),
    "token 0": ("token", lambda s: s.release_lease("x", owner="o", token=0)),
    "lease name read": ("name", lambda s: s.get_lease("")),
}


@pytest.mark.parametrize("case", sorted(BAD_CONTROL_CALLS))
def test_controls_refuse_bad_input_as_the_mongodb_store_does(case: str) -> None:
    field, call = BAD_CONTROL_CALLS[case]
    store = SyncInMemoryJobStore()
    with pytest.raises(InvalidOptionError) as refused:
        call(store)
    assert refused.value.field == field
    assert (store.paused_names(), store.held_slots(now=T0), store.get_lease("x")) == (
        frozenset(),
        {},
        None,
    )


def test_the_lowest_free_slot_is_handed_out() -> None:
    store = SyncInMemoryJobStore()

    def take(holder: str, *, limit: int = 4, now: datetime = T0) -> int | None:
        return store.acquire_slot("a", "", limit=limit, holder=holder, until=now + S, now=now)

    assert [take(h) for h in "pqrs"] == [0, 1, 2, 3]
    assert store.release_slot("a", "", 2, holder="r")
    assert store.release_slot("a", "", 0, holder="p")
    assert [take("t"), take("u"), take("v")] == [0, 2, None]
    assert take("w", now=T0 + S) == 0  # every slot lapsed: the lowest again
    assert store.slot_holders(now=T0 + S) == {("a", "", 0): "w"}


def test_slot_holders_shows_who_holds_what() -> None:
    store = SyncInMemoryJobStore()
    store.acquire_slot("a", "k", limit=2, holder="h1", until=T0 + 10 * S, now=T0)
    store.acquire_slot("a", "k", limit=2, holder="h2", until=T0 + 20 * S, now=T0)
    store.acquire_slot("b", "", limit=2, holder="h3", until=T0 + 10 * S, now=T0)
    assert store.slot_holders(now=T0) == {
        ("a", "k", 0): "h1",
        ("a", "k", 1): "h2",
        ("b", "", 0): "h3",
    }
    assert store.slot_holders(now=T0 + 10 * S) == {("a", "k", 1): "h2"}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_async_face_shows_slot_holders(anyio_backend: str) -> None:
    store = InMemoryJobStore()
    assert await store.acquire_slot("a", "", limit=1, holder="h", until=T0 + S, now=T0) == 0
    assert await store.slot_holders(now=T0) == {("a", "", 0): "h"}
    assert store.sync.held_slots(now=T0) == {"a": 1}


def test_a_rate_window_is_forgotten_a_day_after_its_end() -> None:
    store = SyncInMemoryJobStore()

    def take(start: datetime) -> bool:
        return store.take_rate_token("a", "k", limit=1, window_start=start, window_end=start + S)

    assert take(T0)
    assert not take(T0)
    assert take(T0 + DAY)  # another window, less than a day after the first one's end
    assert not take(T0)  # the first window is remembered
    assert take(T0 + DAY + S)  # a day after the first one's end: it is forgotten
    assert take(T0)  # a window nobody remembers starts afresh
    assert not take(T0 + DAY)  # still remembered


def test_a_lapsed_lease_nobody_took_is_released_by_its_owner() -> None:
    """As MongoDB's release (fenced by owner and token, not by time)."""
    store = SyncInMemoryJobStore()
    assert store.acquire_lease("x", owner="o", until=T0 + S, now=T0) == 1
    assert store.release_lease("x", owner="o", token=1)
    assert store.get_lease("x") is None
    assert store.acquire_lease("x", owner="o", until=T0 + 3 * S, now=T0 + 2 * S) == 2


def test_controls_times_are_kept_in_milliseconds() -> None:
    store = SyncInMemoryJobStore()
    until = T0 + S + timedelta(microseconds=999)
    assert store.acquire_slot("a", "", limit=1, holder="h", until=until, now=T0) == 0
    assert store.held_slots(now=T0 + S + timedelta(microseconds=500)) == {}  # both in ms
    assert store.acquire_lease("x", owner="o", until=until, now=T0) == 1
    lease = store.get_lease("x")
    assert lease is not None
    assert lease.expires_at == T0 + S
    assert store.acquire_lease("x", owner="p", until=T0 + DAY, now=until) == 2


def test_threads_never_share_a_slot_a_token_or_a_lease() -> None:
    """Threads taking and giving back slots, rate tokens and a lease: never more than the
    limit held at once, never more tokens than the window's limit, tokens never repeated."""
    store = SyncInMemoryJobStore()
    limit, rounds = 3, 150
    guard = threading.Lock()
    holding: set[int] = set()
    leases: list[int] = []
    most = [0]  # slots held at once
    tokens: list[bool] = []
    lease_holders = [0]  # 1 while a thread holds the lease

    def worker(n: int) -> None:
        for r in range(rounds):
            holder = f"w{n}-{r}"
            index = store.acquire_slot("a", "", limit=limit, holder=holder, until=T0 + S, now=T0)
            if index is not None:
                with guard:
                    assert index not in holding, index
                    holding.add(index)
                    most[0] = max(most[0], len(holding))
                with guard:
                    holding.discard(index)
                assert store.release_slot("a", "", index, holder=holder)
            token = store.acquire_lease("x", owner=holder, until=T0 + S, now=T0)
            if token is not None:
                with guard:
                    assert not lease_holders[0], token
                    lease_holders[0] = 1
                    leases.append(token)
                with guard:
                    lease_holders[0] = 0
                assert store.release_lease("x", owner=holder, token=token)
            taken = store.take_rate_token("a", "", limit=500, window_start=T0, window_end=T0 + S)
            with guard:
                tokens.append(taken)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= most[0] <= limit
    assert leases == sorted(leases)
    assert leases == list(range(1, len(leases) + 1))
    assert tokens.count(True) == 500
    assert store.held_slots(now=T0) == {}
    assert store.get_lease("x") is None
