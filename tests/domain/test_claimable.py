"""The claimable rule: its evaluation against the rule as the store port words it, and its
agreement with :meth:`JobRecord.state`."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.claimable import (
    CLAIMABLE,
    CLAIMABLE_STATES,
    DUE,
    FAILED,
    IN_PARTITION,
    LOCK_FREE,
    NAME_REQUESTED,
    NOT_FAILED,
    ClaimScope,
    is_claimable,
    is_failed,
)
from dogs_core.domain.records import JobRecord, JobState, JobStatus, JobType
from tests.claimable_strategies import T0, clocks, records, scopes


def _as_the_port_words_it(record: JobRecord, scope: ClaimScope) -> bool:
    """``dogs_core.ports``' eligibility, word for word: the partition is the requested one,
    the name one of the requested ones, ``next_run_at <= now``, the lock missing or
    ``locked_until <= now``, and not an event record in status ``maxTriesReached``."""
    return (
        record.partition == scope.partition
        and record.job_name in scope.job_names
        and record.next_run_at <= scope.now
        and (record.locked_until is None or record.locked_until <= scope.now)
        and not (record.type is JobType.EVENT and record.status is JobStatus.MAX_TRIES_REACHED)
    )


@given(record=records("r"), scope=scopes)
def test_the_rule_is_the_ports_eligibility(record: JobRecord, scope: ClaimScope) -> None:
    assert is_claimable(record, scope) == _as_the_port_words_it(record, scope)


@given(record=records("r"), scope=scopes)
def test_a_record_in_scope_is_claimable_when_due_in_a_claimable_state(
    record: JobRecord, scope: ClaimScope
) -> None:
    in_scope = record.partition == scope.partition and record.job_name in scope.job_names
    state = record.state(scope.now)
    due = record.next_run_at <= scope.now
    assert is_claimable(record, scope) == (in_scope and state in CLAIMABLE_STATES and due)
    if state is JobState.DUE:
        assert due
    if state is JobState.SCHEDULED:
        assert not due


@given(record=records("r"), now=clocks)
def test_failed_is_the_failed_state(record: JobRecord, now: datetime) -> None:
    assert is_failed(record) == (record.state(now) is JobState.FAILED)
    assert is_failed(record) == (not NOT_FAILED.holds(record))


def test_the_rule_has_its_five_clauses_in_order() -> None:
    assert CLAIMABLE == (IN_PARTITION, NAME_REQUESTED, DUE, LOCK_FREE, NOT_FAILED)
    assert NOT_FAILED.clauses == FAILED


def test_every_clause_reads_a_field_of_the_record() -> None:
    fields = {field.name for field in dataclasses.fields(JobRecord)}
    read = [IN_PARTITION.field, NAME_REQUESTED.field, DUE.field, LOCK_FREE.field]
    assert {*read, *(clause.field for clause in FAILED)} <= fields


@given(
    record=records("r").filter(lambda r: r.partition is None),
    scope=scopes,
    names=st.frozensets(st.sampled_from("abc")),
)
def test_a_scope_without_partition_asks_about_records_without_one(
    record: JobRecord, scope: ClaimScope, names: frozenset[str]
) -> None:
    assert not is_claimable(record, scope)
    mine = ClaimScope(partition=None, job_names=names, now=scope.now)
    assert is_claimable(record, mine) == _as_the_port_words_it(record, mine)


def test_a_lock_expiring_now_is_free_and_a_record_due_now_is_due() -> None:
    record = JobRecord(
        id="r",
        job_name="a",
        type=JobType.EVENT,
        priority=100,
        next_run_at=T0,
        partition=0,
        locked_until=T0,
        lock_id="l",
    )
    assert is_claimable(record, ClaimScope(partition=0, job_names=("a",), now=T0))
    assert record.state(T0) is JobState.STALE
