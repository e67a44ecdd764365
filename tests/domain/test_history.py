"""The history row of a finished execution: which fields it copies, how it stores the result and
the error, and how it dates an execution that never started or whose clock went backwards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dogs_core.domain.definitions import EventJobDefinition, JobDefinition, RecurrentJobDefinition
from dogs_core.domain.history import error_message, history_record
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus, JobType
from dogs_core.errors import JobTimeoutError

STARTED = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENDED = STARTED + timedelta(seconds=3)


def event_handler(params: Any, ctx: Any) -> None:
    return None


def recurrent_handler(ctx: Any) -> None:
    return None


EVENT = EventJobDefinition("send", event_handler, save_executions_for=timedelta(days=2))
RECURRENT = RecurrentJobDefinition("tick", recurrent_handler, run_every="1m")


def claimed(definition: JobDefinition = EVENT, **changes: Any) -> ClaimedJob:
    fields: dict[str, Any] = {
        "job_id": "job-1",
        "execution_id": "exec-1",
        "job_name": definition.name,
        "type": definition.type,
        "params": {"to": "ada@example.org"} if definition.type is JobType.EVENT else None,
        "tries": 2,
        "priority": 40,
        "locked_until": ENDED + timedelta(minutes=5),
        "partition": 3,
        "unique_identifier": "welcome-ada" if definition.type is JobType.EVENT else None,
    }
    fields.update(changes)
    return ClaimedJob(**fields)


def record(
    job: ClaimedJob | None = None,
    definition: JobDefinition = EVENT,
    status: HistoryStatus = HistoryStatus.SUCCESS,
    *,
    started_at: datetime | None = STARTED,
    ended_at: datetime = ENDED,
    result: Any = None,
    error: BaseException | None = None,
) -> HistoryRecord:
    row = history_record(
        claimed(definition) if job is None else job,
        definition,
        status,
        started_at=started_at,
        ended_at=ended_at,
        result=result,
        error=error,
    )
    assert row is not None
    return row


# -- no history -----------------------------------------------------------------------------------


@pytest.mark.parametrize("definition_kind", ["event", "recurrent"])
def test_no_row_when_the_job_keeps_no_history(definition_kind: str) -> None:
    definition: JobDefinition = (
        EventJobDefinition("quiet", event_handler, save_executions_for=0)
        if definition_kind == "event"
        else RecurrentJobDefinition(
            "quiet", recurrent_handler, run_every="1m", save_executions_for="0s"
        )
    )
    for status in HistoryStatus:
        assert (
            history_record(
                claimed(definition),
                definition,
                status,
                started_at=STARTED,
                ended_at=ENDED,
                result={"kept": False},
                error=ValueError("lost"),
            )
            is None
        )


# -- fields ---------------------------------------------------------------------------------------


def test_an_event_row_copies_the_claimed_job() -> None:
    row = record(result={"sent": True})
    assert row == HistoryRecord(
        execution_id="exec-1",
        job_id="job-1",
        job_name="send",
        type=JobType.EVENT,
        priority=40,
        tries=2,
        started_at=STARTED,
        ended_at=ENDED,
        status=HistoryStatus.SUCCESS,
        expires_at=ENDED + timedelta(days=2),
        params={"to": "ada@example.org"},
        result={"sent": True},
        error_message=None,
        unique_identifier="welcome-ada",
        outcome="succeeded",
    )
    assert row.duration_ms == 3_000


def test_a_recurrent_row_uses_the_default_retention() -> None:
    row = record(claimed(RECURRENT), RECURRENT, HistoryStatus.STALE)
    assert row.type is JobType.RECURRENT
    assert row.job_name == "tick"
    assert row.params is None
    assert row.unique_identifier is None
    assert row.status is HistoryStatus.STALE
    assert row.expires_at == ENDED + RECURRENT.save_executions_for
    assert RECURRENT.save_executions_for == timedelta(days=7)


def test_an_error_row_keeps_the_error_message() -> None:
    row = record(status=HistoryStatus.ERROR, error=RuntimeError("smtp down"))
    assert row.status is HistoryStatus.ERROR
    assert row.error_message == "smtp down"
    assert row.result is None


# -- the result -----------------------------------------------------------------------------------


def test_a_storable_result_is_kept_as_a_plain_copy() -> None:
    row = record(result={"ids": (1, 2), "at": STARTED, "nested": {"ok": None}})
    assert row.result == {"ids": [1, 2], "at": STARTED, "nested": {"ok": None}}
    assert record(result=7).result == 7
    assert record(result="done").result == "done"


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


@pytest.mark.parametrize(
    "result",
    [
        Opaque(),
        Decimal("1.5"),
        {"amount": Decimal("1.5")},
        {1: "non-str key"},
        2**70,
        datetime(2026, 1, 1),  # naive
        {"$set": 1},
    ],
    ids=["object", "decimal", "nested-decimal", "int-key", "int-too-big", "naive", "dollar-key"],
)
def test_a_result_that_is_not_bson_storable_is_kept_as_its_repr(result: object) -> None:
    assert record(result=result).result == repr(result)


# -- dates ----------------------------------------------------------------------------------------


def test_an_execution_that_never_started_is_dated_at_its_end() -> None:
    row = record(started_at=None, status=HistoryStatus.STALE)
    assert row.started_at == ENDED
    assert row.ended_at == ENDED
    assert row.duration_ms == 0


def test_an_end_before_the_start_is_clamped_to_the_start() -> None:
    row = record(started_at=ENDED, ended_at=STARTED)
    assert row.started_at == ENDED
    assert row.ended_at == ENDED
    assert row.duration_ms == 0


moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    started_at=st.one_of(st.none(), moments),
    ended_at=moments,
    retention=st.timedeltas(min_value=timedelta(milliseconds=1), max_value=timedelta(days=365)),
)
def test_a_row_never_ends_before_it_starts(
    started_at: datetime | None, ended_at: datetime, retention: timedelta
) -> None:
    definition = EventJobDefinition("send", event_handler, save_executions_for=retention)
    row = record(claimed(definition), definition, started_at=started_at, ended_at=ended_at)
    assert row.started_at == (ended_at if started_at is None else started_at)
    assert row.ended_at == max(ended_at, row.started_at)
    assert row.duration_ms >= 0
    assert row.expires_at == ended_at + retention


# -- error messages -------------------------------------------------------------------------------


class Quiet(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ValueError("bad value"), "bad value"),
        (ValueError(), "ValueError"),
        (Quiet(), "Quiet"),
        (Quiet(""), "Quiet"),
        (KeyError("k"), "'k'"),
        (KeyError(), "KeyError"),
        (TimeoutError(), "TimeoutError"),
    ],
)
def test_error_message(error: BaseException, message: str) -> None:
    assert error_message(error) == message


def test_a_timed_out_attempt_keeps_the_timeout_message() -> None:
    row = record(status=HistoryStatus.ERROR, error=JobTimeoutError("send ran past its 5s timeout"))
    assert row.error_message == "send ran past its 5s timeout"
    assert record(status=HistoryStatus.ERROR, error=JobTimeoutError()).error_message == (
        "JobTimeoutError"
    )
