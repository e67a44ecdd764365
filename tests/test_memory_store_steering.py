"""Tests of the in-memory store's steering beyond the contract: ``find_jobs``,
``status_counts`` and ``delete_jobs`` against brute force over :meth:`JobRecord.state`, TTL
after a revive, argument checks. The shared semantics are in the contract suite
(tests/test_memory_store_contract.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.records import (
    Duplicate,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    NameStatus,
)
from dogs_core.domain.steering import JobChange
from dogs_core.errors import InvalidOptionError, StoreError
from dogs_core.ids import new_execution_id, new_record_id
from dogs_testing.memory import SyncInMemoryJobStore
from dogs_testing.settling import rescheduled, settle_one_sync, terminal
from tests.test_memory_store import (
    DAY,
    MS,
    NAMES,
    T0,
    ManualClock,
    S,
    check_index,
    new_job,
    request,
    scheduled_id,
)


def test_a_revived_record_outlives_its_old_expiry() -> None:
    """``modify_job(revive=True)`` removes ``expires_at``: the TTL emulation's heap entry of
    the old deadline must not purge the record."""
    clock = ManualClock(T0)
    store = SyncInMemoryJobStore(clock=clock)
    job_id = scheduled_id(store.insert_job(new_job(uid="u")))
    claimed = store.claim(request())
    assert claimed is not None
    assert settle_one_sync(store, job_id, claimed.lock_id, terminal(T0, expires_at=T0 + DAY))
    revived = store.modify_record(job_id, JobChange(tries=0, revive=True), now=T0)
    assert revived is not None
    assert revived.expires_at is None
    clock.current = T0 + 2 * DAY
    assert store.get_record(job_id) == revived
    assert isinstance(store.insert_job(new_job(uid="u")), Duplicate)


def test_insert_record_truncates_the_release_time() -> None:
    store = SyncInMemoryJobStore()
    record = JobRecord(
        id=new_record_id(),
        job_name="a",
        type=JobType.EVENT,
        priority=1,
        next_run_at=T0,
        lock_id="l",
        locked_until=T0 + timedelta(microseconds=1_500),
        lock_released_at=T0 + timedelta(microseconds=1_999),
    )
    store.insert_record(record)
    stored = store.get_record(record.id)
    assert stored is not None
    assert (stored.locked_until, stored.lock_released_at) == (T0 + MS, T0 + MS)
    assert stored.lock_released


def test_get_executions_refuses_an_unknown_status() -> None:
    store = SyncInMemoryJobStore()
    for status in ("done", 3):
        with pytest.raises(InvalidOptionError) as refused:
            store.read_history("a", status=status)  # type: ignore[arg-type]
        assert refused.value.field == "status"
    assert store.read_history("a", status="success") == []  # type: ignore[arg-type]


def test_steering_refuses_bad_arguments() -> None:
    store = SyncInMemoryJobStore()
    job_id = scheduled_id(store.insert_job(new_job()))
    cases: list[tuple[str, Callable[[], object]]] = [
        ("state", lambda: store.find_records(state="lost", now=T0)),  # type: ignore[arg-type]
        ("after", lambda: store.find_records(after=3)),  # type: ignore[arg-type]
        ("job_name", lambda: store.find_records(job_name=["a"])),  # type: ignore[arg-type]
        ("change", lambda: store.modify_record(job_id, {"priority": 1}, now=T0)),  # type: ignore[arg-type]
        ("state", lambda: store.delete_records(job_name=None, state=JobState.RUNNING, now=T0)),
        ("dry_run", lambda: store.delete_records(job_name=None, state="due", now=T0, dry_run=1)),  # type: ignore[arg-type]
        ("unless_failed", lambda: store.delete_record(job_id, unless_failed=None)),  # type: ignore[arg-type]
        (
            "settlements[0].command.tries",
            lambda: settle_one_sync(store, job_id, "x", rescheduled(T0, tries=-1)),
        ),
    ]
    for field, call in cases:
        with pytest.raises(InvalidOptionError) as refused:
            call()
        assert refused.value.field == field
    assert [r.id for r in store.find_records(state="due", now=T0)] == [job_id]  # type: ignore[arg-type]


# ---------------------------------------------------------------------- steering vs brute force

steering_specs = st.tuples(
    st.sampled_from(NAMES),
    st.sampled_from([JobType.EVENT, JobType.EVENT, JobType.RECURRENT]),
    st.integers(-3, 3),  # next_run_at offset (s)
    st.booleans(),  # terminal status
    st.one_of(st.none(), st.integers(-2, 2)),  # locked_until offset (s)
    st.one_of(st.none(), st.integers(-3, 3)),  # lock_released_at offset (s)
    st.sampled_from([None, 0, 1, 2]),  # tries
    st.one_of(st.none(), st.sampled_from(["u1", "u2", "u3"])),  # unique identifier
)
SteeringSpec = tuple[str, JobType, int, bool, int | None, int | None, int | None, str | None]


def steering_store(specs: list[SteeringSpec]) -> SyncInMemoryJobStore:
    """A store of the records of ``specs`` (the unique constraints kept: a taken identifier
    or a second recurrent record of a name is dropped)."""
    store = SyncInMemoryJobStore()
    for name, job_type, offset, is_terminal, lock, is_released, tries, uid in specs:
        record = JobRecord(
            id=new_record_id(),
            job_name=name,
            type=job_type,
            priority=1,
            next_run_at=T0 + offset * S,
            partition=0,
            unique_identifier=uid,
            status=JobStatus.MAX_TRIES_REACHED if is_terminal else None,
            lock_id=None if lock is None else new_execution_id(),
            locked_until=None if lock is None else T0 + lock * S,
            lock_released_at=None if is_released is None else T0 + is_released * S,
            tries=tries,
        )
        with contextlib.suppress(StoreError):
            store.insert_record(record)
    return store


def every_record(store: SyncInMemoryJobStore) -> list[JobRecord]:
    records = store.all_records()
    assert records == store.find_records(limit=10_000)
    return records


@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(steering_specs, max_size=30),
    name=st.sampled_from([None, *NAMES]),
    state=st.sampled_from([None, *JobState]),
    uid=st.sampled_from([None, "u1", "u2", "nobody"]),
    after_index=st.one_of(st.none(), st.integers(0, 30)),
    limit=st.integers(1, 8),
    now_offset=st.integers(-3, 3),
)
def test_find_jobs_matches_a_brute_force_filter(
    specs: list[SteeringSpec],
    name: str | None,
    state: JobState | None,
    uid: str | None,
    after_index: int | None,
    limit: int,
    now_offset: int,
) -> None:
    store = steering_store(specs)
    records = every_record(store)
    assert [r.id for r in records] == sorted(r.id for r in records)
    now = T0 + now_offset * S
    after = None
    if after_index is not None and records:
        after = records[after_index % len(records)].id
    expected = [
        r
        for r in records
        if name in (None, r.job_name)
        and uid in (None, r.unique_identifier)
        and (state is None or r.state(now) is state)
        and (after is None or r.id > after)
    ][:limit]
    found = store.find_records(
        job_name=name, state=state, unique_identifier=uid, after=after, limit=limit, now=now
    )
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(steering_specs, max_size=30),
    now_offset=st.integers(-3, 3),
    name=st.sampled_from([None, *NAMES]),
    state=st.sampled_from([s for s in JobState if s is not JobState.RUNNING]),
)
def test_status_counts_and_delete_jobs_match_record_state(
    specs: list[SteeringSpec], now_offset: int, name: str | None, state: JobState
) -> None:
    store = steering_store(specs)
    now = T0 + now_offset * S
    records = every_record(store)
    for status in store.status_counts(now=now):
        mine = [r for r in records if r.job_name == status.job_name]
        states = [r.state(now) for r in mine]
        waiting = [
            r
            for r, s in zip(mine, states, strict=True)
            if s is JobState.STALE
            or (s in (JobState.DUE, JobState.RETRYING) and r.next_run_at <= now)
        ]
        assert status == NameStatus(
            job_name=status.job_name,
            due=len(waiting) - states.count(JobState.STALE),
            scheduled_later=len(mine) - len(waiting) - states.count(JobState.RUNNING)
            - states.count(JobState.FAILED),
            running=states.count(JobState.RUNNING),
            stale=states.count(JobState.STALE),
            terminal=states.count(JobState.FAILED),
            oldest_due_at=min((r.next_run_at for r in waiting), default=None),
        )  # fmt: skip
    doomed = {r.id for r in records if r.state(now) is state and name in (None, r.job_name)}
    assert store.delete_records(job_name=name, state=state, now=now, dry_run=True) == len(doomed)
    assert every_record(store) == records
    assert store.delete_records(job_name=name, state=state, now=now) == len(doomed)
    assert [r.id for r in every_record(store)] == [r.id for r in records if r.id not in doomed]
    check_index(store)
