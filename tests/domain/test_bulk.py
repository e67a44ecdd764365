"""Bulk actions' pure rules (dogs_core.domain.bulk): the selection's checks and matching, the
creation-time bounds of ids, error types, what each action does to each state, the documents
a resumable action keeps."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
import uuid6
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.bulk import (
    BulkAction,
    BulkReport,
    BulkSelection,
    Modify,
    RecordKind,
    Remove,
    RescheduleTo,
    Skip,
    SkipReason,
    TimeField,
    bulk_decision,
    bulk_selection,
    check_chunk_size,
    check_selection,
    counts_in_words,
    created_id_bound,
    error_type_matches,
    record_kind,
)
from dogs_core.domain.records import Hold, HoldReason, JobRecord, JobState, JobStatus, JobType
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.errors import EmptySelectionError, InvalidOptionError

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def record(
    state: JobState = JobState.DUE, *, kind: JobType = JobType.EVENT, **fields: object
) -> JobRecord:
    values: dict[str, object] = {"next_run_at": NOW - S}
    if state is JobState.SCHEDULED:
        values["next_run_at"] = NOW + S
    elif state is JobState.RUNNING:
        values.update(locked_until=NOW + 30 * S, lock_id="lock")
    elif state is JobState.STALE:
        values.update(locked_until=NOW - S, lock_id="lock")
    elif state is JobState.RETRYING:
        values["tries"] = 1
    elif state is JobState.FAILED:
        values.update(status=JobStatus.MAX_TRIES_REACHED, tries=3, max_tries_reached_at=NOW)
    elif state is JobState.HELD:
        values.update(next_run_at=NOW + S, held=Hold(HoldReason.CONCURRENCY, NOW - S, NOW + S))
    elif state is JobState.SLEEPING:
        values.update(next_run_at=NOW + S, sleeping_until=NOW + S)
    values.update(fields)
    values.setdefault("id", str(uuid6.uuid7()))
    built = JobRecord(job_name="a", type=kind, priority=100, **values)  # type: ignore[arg-type]
    assert built.state(NOW) is state
    return built


# -- the selection ------------------------------------------------------------------------------


def test_a_selection_is_checked_field_by_field() -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"state": "bogus"}, "state"),
        ({"state": 3}, "state"),
        ({"error_type": "Bad Error"}, "error_type"),
        ({"error_type": "  "}, "error_type"),
        ({"time_field": "birthday"}, "time_field"),
        ({"since": "yesterday"}, "since"),
        ({"since": datetime(2030, 1, 1)}, "since"),
        ({"since": NOW, "until": NOW}, "until"),
        ({"job_name": 3}, "job_name"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidOptionError) as error:
            bulk_selection(**kwargs)  # type: ignore[arg-type]
        assert error.value.field == field, kwargs


def test_every_filter_must_hold() -> None:
    failed = record(JobState.FAILED)
    assert bulk_selection().matches(failed, NOW, None)
    assert bulk_selection(job_name="a", state="failed").matches(failed, NOW, None)
    assert not bulk_selection(job_name="b").matches(failed, NOW, None)
    assert not bulk_selection(state=JobState.DUE).matches(failed, NOW, None)
    with_error = bulk_selection(error_type="ValueError")
    assert with_error.matches(failed, NOW, "ValueError")
    assert not with_error.matches(failed, NOW, None)
    in_range = bulk_selection(time_field="failed", since=NOW - S, until=NOW + S)
    assert in_range.matches(failed, NOW, None)
    assert not in_range.matches(record(JobState.DUE), NOW, None)  # never failed: no time


@pytest.mark.parametrize("field", [TimeField.NEXT_RUN, TimeField.LAST_RUN])
def test_time_ranges_are_since_inclusive_until_exclusive(field: TimeField) -> None:
    one = record(JobState.DUE, next_run_at=NOW - S, last_run_at=NOW - S)
    assert bulk_selection(time_field=field, since=NOW - S).matches(one, NOW, None)
    assert not bulk_selection(time_field=field, until=NOW - S).matches(one, NOW, None)
    assert bulk_selection(time_field=field.value, until=NOW).matches(one, NOW, None)


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1)))
def test_created_bounds_order_ids_as_their_times(moment: datetime) -> None:
    at = moment.replace(tzinfo=UTC)
    made = str(uuid6.uuid7())  # now
    bound = created_id_bound(at)
    assert (made >= bound) == (at <= datetime.now(UTC))
    assert len(bound) == 13
    selection = bulk_selection(since=at) if at < datetime.now(UTC) else bulk_selection(until=at)
    assert selection.matches(record(id=made), NOW, None)


def test_a_bound_before_the_epoch_is_the_smallest() -> None:
    assert created_id_bound(datetime(1960, 1, 1, tzinfo=UTC)) == "00000000-0000"


@pytest.mark.parametrize(
    ("stored", "wanted", "matches"),
    [
        ("ValueError", "ValueError", True),
        ("ValueError", "builtins.ValueError", True),
        ("builtins.ValueError", "builtins.ValueError", True),
        ("myapp.ValueError", "builtins.ValueError", False),
        ("myapp.errors.QuotaExceeded", "QuotaExceeded", True),
        ("myapp.errors.QuotaExceeded", "errors.QuotaExceeded", True),
        ("myapp.errors.QuotaExceeded", "Exceeded", False),
        (None, "ValueError", False),
    ],
)
def test_error_types(stored: str | None, wanted: str, matches: bool) -> None:
    assert error_type_matches(stored, wanted) is matches


def test_the_selection_in_words_and_back() -> None:
    assert bulk_selection().describe() == "jobs"
    full = bulk_selection(
        job_name="send_email", state="failed", error_type="ConnectionError",
        time_field="last_run", since=NOW - S, until=NOW,
    )  # fmt: skip
    assert full.describe() == (
        "failed jobs of send_email whose last error is ConnectionError, last run from "
        "2030-05-01 11:59:59 UTC to 2030-05-01 12:00:00 UTC"
    )
    assert bulk_selection(since=NOW).describe() == "jobs, created from 2030-05-01 12:00:00 UTC"
    assert (
        bulk_selection(time_field="next_run", until=NOW)
        .describe()
        .endswith("due before 2030-05-01 12:00:00 UTC")
    )
    assert BulkSelection.from_document(full.to_document()) == full
    # an entry written before "all" existed, without a filter, meant every record
    assert BulkSelection.from_document({}) == BulkSelection(all=True)
    assert BulkSelection.from_document({"all": False}) == BulkSelection()


@pytest.mark.parametrize(("size", "ok"), [(1, True), (5_000, True), (0, False), (5_001, False)])
def test_chunk_sizes(size: int, ok: bool) -> None:
    if ok:
        assert check_chunk_size(size) == size
    else:
        with pytest.raises(InvalidOptionError, match="chunk_size"):
            check_chunk_size(size)


# -- what each action does ------------------------------------------------------------------------


@pytest.mark.parametrize("state", list(JobState))
def test_retry_is_retry_now_but_for_running_jobs(state: JobState) -> None:
    decision = bulk_decision(BulkAction.RETRY, record(state), NOW)
    if state is JobState.RUNNING:
        assert decision == Skip(SkipReason.RUNNING)
        return
    assert isinstance(decision, Modify)
    assert decision.change.next_run_at == NOW
    assert decision.change.revive is (state is JobState.FAILED)
    assert decision.change.tries == (0 if state is JobState.FAILED else None)


@pytest.mark.parametrize("state", list(JobState))
def test_cancel_and_delete(state: JobState) -> None:
    cancel = bulk_decision(BulkAction.CANCEL, record(state), NOW)
    assert cancel == (Skip(SkipReason.FAILED) if state is JobState.FAILED else Remove())
    delete = bulk_decision(BulkAction.DELETE, record(state), NOW)
    assert delete == (Skip(SkipReason.RUNNING) if state is JobState.RUNNING else Remove())


def test_a_recurrent_record_is_not_cancelled_in_bulk() -> None:
    recurrent = record(JobState.DUE, kind=JobType.RECURRENT)
    assert bulk_decision(BulkAction.CANCEL, recurrent, NOW) == Skip(SkipReason.RECURRENT)


def test_reschedule_moves_and_or_changes_the_priority() -> None:
    failed = record(JobState.FAILED)
    later = bulk_decision(BulkAction.RESCHEDULE, failed, NOW, RescheduleTo(delay=60 * S))
    assert isinstance(later, Modify)
    assert (later.change.next_run_at, later.change.revive) == (NOW + 60 * S, True)
    at = bulk_decision(
        BulkAction.RESCHEDULE, record(), NOW, RescheduleTo(run_at=NOW + S, priority=3)
    )
    assert isinstance(at, Modify)
    assert (at.change.next_run_at, at.change.priority) == (NOW + S, 3)
    only = bulk_decision(BulkAction.RESCHEDULE, record(), NOW, RescheduleTo(priority=9))
    assert isinstance(only, Modify)
    assert only.change.next_run_at is None
    with pytest.raises(InvalidOptionError, match="run time or a priority"):
        bulk_decision(BulkAction.RESCHEDULE, record(), NOW)
    assert bulk_decision(BulkAction.RESCHEDULE, record(JobState.RUNNING), NOW) == Skip(
        SkipReason.RUNNING
    )


def test_reschedule_documents_round_trip() -> None:
    to = RescheduleTo(run_at=NOW, delay=90 * S, priority=2)
    assert RescheduleTo.from_document(to.to_document()) == to
    assert RescheduleTo.from_document(None) is None
    assert RescheduleTo.from_document({"priority": 1}) == RescheduleTo(priority=1)


def test_the_report_totals_its_skips() -> None:
    report = BulkReport(
        BulkAction.DELETE, BulkSelection(), False, 5, skipped={"running": 2, "x": 1}
    )
    assert report.skipped_total == 3


# -- only what it names (issue 40) --------------------------------------------------------------

_SPEC = ScheduleSpec(job="a", every=timedelta(hours=1))
_KIND_FIELDS: dict[RecordKind, dict[str, object]] = {
    RecordKind.JOB: {},
    RecordKind.SCHEDULE: {"schedule": _SPEC, "job_name": "nightly"},
    RecordKind.STEP: {"workflow": {"id": "wf", "step": "b"}},
}


def _of_kind(kind: RecordKind) -> JobRecord:
    fields = dict(_KIND_FIELDS[kind])
    name = str(fields.pop("job_name", "a"))
    return dataclasses.replace(record(), job_name=name, **fields)  # type: ignore[arg-type]


@given(
    kinds=st.none() | st.frozensets(st.sampled_from(list(RecordKind)), min_size=1),
    job_name=st.sampled_from([None, "a", "nightly"]),
    kind=st.sampled_from(list(RecordKind)),
)
def test_a_selection_takes_a_kind_only_when_it_names_it(
    kinds: frozenset[RecordKind] | None, job_name: str | None, kind: RecordKind
) -> None:
    one = _of_kind(kind)
    assert record_kind(one) is kind
    selection = BulkSelection(job_name=job_name, kinds=kinds, all=True)
    taken = selection.matches(one, NOW, None)
    named = job_name is None or one.job_name == job_name
    if kinds is not None:
        assert taken == (kind in kinds and named)
    else:
        # plain jobs; a schedule only named by its id; a step never by default
        by_name = kind is RecordKind.SCHEDULE and job_name == "nightly"
        assert taken == (named and (kind is RecordKind.JOB or by_name))
    # counting each kind apart adds up to the selection
    assert taken == any(selection.of_kind(k).matches(one, NOW, None) for k in selection.taken_kinds)


@given(
    name=st.sampled_from([None, "a"]),
    state=st.sampled_from([None, JobState.FAILED]),
    tags=st.sampled_from([(), ("t",)]),
    schedules=st.booleans(),
    steps=st.booleans(),
    every=st.booleans(),
)
def test_no_filter_needs_all(
    name: str | None,
    state: JobState | None,
    tags: tuple[str, ...],
    schedules: bool,
    steps: bool,
    every: bool,
) -> None:
    selection = bulk_selection(
        job_name=name, state=state, tags=tags or None,
        include_schedules=schedules, include_steps=steps, all=every,
    )  # fmt: skip
    unfiltered = name is None and state is None and not tags
    assert selection.unfiltered is unfiltered
    if unfiltered and not every:
        with pytest.raises(EmptySelectionError, match="no filter given"):
            check_selection(selection)
    else:
        assert check_selection(selection) is selection
    assert BulkSelection.from_document(selection.to_document()) == selection


def test_kinds_in_words_and_their_checks() -> None:
    assert bulk_selection(all=True, include_steps=True).describe() == "jobs and workflow steps"
    assert bulk_selection(all=True, kinds=list(RecordKind)).describe() == (
        "jobs, run-time schedules and workflow steps"
    )
    counts = {RecordKind.JOB: 0, RecordKind.SCHEDULE: 1, RecordKind.STEP: 2}
    assert counts_in_words(counts) == "1 run-time schedule, 2 workflow steps"
    assert counts_in_words({RecordKind.JOB: 0}) == "0 jobs"
    assert bulk_selection(all=True, kinds=["schedule"]).describe() == "run-time schedules"
    assert bulk_selection(job_name="nightly").describe() == "jobs of nightly"
    with pytest.raises(InvalidOptionError, match="kinds"):
        bulk_selection(kinds=["schedules"])
    with pytest.raises(InvalidOptionError, match="kinds"):
        bulk_selection(kinds=[])
    with pytest.raises(InvalidOptionError, match="all"):
        bulk_selection(all="yes")  # type: ignore[arg-type]
