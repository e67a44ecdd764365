"""The decision of a claim that took over a killed attempt's lock (pure)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from dogs_core.domain.definitions import JobDefinition
from dogs_core.domain.outcome import Delete, OutcomePolicy, Reschedule
from dogs_core.domain.records import (
    ClaimedJob,
    HistoryRecord,
    HistoryStatus,
    JobType,
    PreviousAttempt,
)
from dogs_core.domain.takeover import (
    completion_of_finished_attempt,
    previous_attempt_row,
    unsettled_success,
)
from dogs_core.jobs import Jobs

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = OutcomePolicy(timedelta(seconds=30), max_tries=None, max_tries_reached_retention=None)


def _definitions() -> tuple[JobDefinition, JobDefinition]:
    jobs = Jobs()

    @jobs.event
    async def event(params: None, ctx: object) -> None:
        pass

    @jobs.recurrent(run_every=60)
    async def tick(ctx: object) -> None:
        pass

    return event, tick


def _job(kind: JobType, *, previous: str | None = "old") -> ClaimedJob:
    attempt = None if previous is None else PreviousAttempt(previous, NOW, NOW, tries=1)
    return ClaimedJob(
        job_id="j1",
        execution_id="new",
        job_name="event" if kind is JobType.EVENT else "tick",
        type=kind,
        params=None,
        tries=2,
        priority=100,
        locked_until=NOW + timedelta(seconds=30),
        was_stale=True,
        next_run_at=NOW,
        previous_attempt=attempt,
    )


def _row(status: HistoryStatus, execution_id: str = "old") -> HistoryRecord:
    return HistoryRecord(
        execution_id=execution_id,
        job_id="j1",
        job_name="event",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=NOW,
        ended_at=NOW,
        status=status,
        expires_at=NOW + timedelta(days=1),
    )


def test_a_success_row_of_the_killed_attempt_means_complete_instead_of_run() -> None:
    event, tick = _definitions()
    ok = _row(HistoryStatus.SUCCESS)
    done = completion_of_finished_attempt(event, _job(JobType.EVENT), ok, POLICY, NOW, 0.5)
    assert isinstance(done, Delete)
    moved = completion_of_finished_attempt(tick, _job(JobType.RECURRENT), ok, POLICY, NOW, 0.5)
    assert isinstance(moved, Reschedule)
    assert moved.reset_tries
    assert moved.next_run_at > NOW


def test_anything_else_means_run() -> None:
    event, _ = _definitions()
    job = _job(JobType.EVENT)
    for status in (HistoryStatus.ERROR, HistoryStatus.SNOOZED, HistoryStatus.STALE):
        assert completion_of_finished_attempt(event, job, _row(status), POLICY, NOW, 0.5) is None
    assert completion_of_finished_attempt(event, job, None, POLICY, NOW, 0.5) is None
    other = _row(HistoryStatus.SUCCESS, execution_id="older")
    assert completion_of_finished_attempt(event, job, other, POLICY, NOW, 0.5) is None
    mismatch = _job(JobType.RECURRENT)
    ok = _row(HistoryStatus.SUCCESS)
    assert completion_of_finished_attempt(event, mismatch, ok, POLICY, NOW, 0.5) is None


def test_the_previous_row_is_found_by_its_execution_id() -> None:
    rows = [_row(HistoryStatus.SUCCESS, "older"), _row(HistoryStatus.ERROR, "old")]
    assert previous_attempt_row(_job(JobType.EVENT), rows) == rows[1]
    assert previous_attempt_row(_job(JobType.EVENT, previous=None), rows) is None
    assert previous_attempt_row(_job(JobType.EVENT), rows[:1]) is None


def _attempt(tries: int, started: datetime = NOW) -> PreviousAttempt:
    return PreviousAttempt("dead-claimer", started, started + timedelta(seconds=30), tries=tries)


def test_a_success_an_earlier_try_left_unsettled_is_found_without_its_own_row() -> None:
    # The claimer that was completing it died: no row of its own; the success is the newest row.
    event, _ = _definitions()
    ok = _row(HistoryStatus.SUCCESS, "first")  # tries 1
    later = dataclasses.replace(_job(JobType.EVENT), tries=3, previous_attempt=_attempt(2))
    assert previous_attempt_row(later, [ok]) == ok
    assert unsettled_success(_attempt(2), [ok]) == ok
    assert isinstance(completion_of_finished_attempt(event, later, ok, POLICY, NOW, 0.5), Delete)


def test_a_success_is_unsettled_only_when_it_is_newest_and_of_fewer_tries() -> None:
    ok = _row(HistoryStatus.SUCCESS, "first")
    # a landed recurrent success resets tries: the next slot's claim has no more tries than it
    assert unsettled_success(_attempt(1), [ok]) is None
    # a newer row of another kind (an error of the next slot) means the success was settled
    error = dataclasses.replace(
        _row(HistoryStatus.ERROR, "next"), started_at=NOW + timedelta(minutes=1)
    )
    assert unsettled_success(_attempt(2, NOW + timedelta(minutes=2)), [ok, error]) is None
    # a success started after the attempt it is matched with is not its predecessor
    assert unsettled_success(_attempt(2, NOW - timedelta(minutes=1)), [ok]) is None
    assert unsettled_success(_attempt(2), []) is None
    superseded = _row(HistoryStatus.SUPERSEDED, "first")
    assert unsettled_success(_attempt(2), [superseded]) is None
