"""The other options of issue 27, pure: tags, runtime schedules' specs and ids, and the
decisions before a run (a start deadline passed, a paused schedule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dogs_core.domain.definitions import EventJobDefinition, RecurrentJobDefinition
from dogs_core.domain.outcome import Defer, Delete, OutcomePolicy, decide_before_run, expired
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobType
from dogs_core.domain.runtime_schedules import (
    MAX_SCHEDULE_ID_LENGTH,
    first_run_at,
    schedule_spec,
    validate_schedule_id,
)
from dogs_core.domain.tags import (
    MAX_TAG_LENGTH,
    MAX_TAGS,
    InvalidTagsError,
    validate_tag_filter,
    validate_tags,
)
from dogs_core.domain.uniqueness import PARKED_AT
from dogs_core.errors import InvalidOptionError, InvalidScheduleError

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
POLICY = OutcomePolicy(timedelta(minutes=1), max_tries=3, max_tries_reached_retention=None)


# -- tags ------------------------------------------------------------------------------------


def test_tags_are_kept_once_in_order() -> None:
    assert validate_tags(["b", "a", "b"]) == ("b", "a")
    assert validate_tags(None) == ()
    assert validate_tags(("x",)) == ("x",)
    assert validate_tag_filter("a") == ("a",)
    assert validate_tag_filter(None) is None


@pytest.mark.parametrize(
    "tags",
    [
        "report",  # a bare string
        [1],
        [""],
        ["x" * (MAX_TAG_LENGTH + 1)],
        [f"t{i}" for i in range(MAX_TAGS + 1)],
        ["$where"],
        ["a\x00b"],
        42,
    ],
)
def test_bad_tags_are_refused(tags: object) -> None:
    with pytest.raises(InvalidTagsError) as raised:
        validate_tags(tags)
    assert raised.value.field.startswith("tags")


def test_an_empty_tag_filter_is_refused() -> None:
    with pytest.raises(InvalidTagsError):
        validate_tag_filter([])


# -- runtime schedules ----------------------------------------------------------------------


def test_a_spec_is_cron_or_every() -> None:
    cron = schedule_spec("report", cron="0 3 * * *", timezone="Europe/Paris")
    assert (cron.cron, cron.timezone, cron.every) == ("0 3 * * *", "Europe/Paris", None)
    assert first_run_at(cron, NOW) == datetime(2026, 5, 2, 1, 0, tzinfo=UTC)  # 03:00 Paris
    every = schedule_spec("report", every="5m", misfire="skip")
    assert every.every == timedelta(minutes=5)
    assert first_run_at(every, NOW) == NOW + timedelta(minutes=5)
    assert every.describe() == "every 0:05:00"
    assert not cron.same_timing(every)
    assert cron.same_timing(schedule_spec("other", cron="0 3 * * *", timezone="Europe/Paris"))


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({}, InvalidScheduleError),
        ({"cron": "61 * * * *", "timezone": "UTC"}, InvalidScheduleError),
        ({"cron": "0 3 * * *"}, InvalidScheduleError),  # no timezone
        ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, InvalidScheduleError),
        ({"cron": "0 3 * * *", "timezone": "UTC", "every": 60}, InvalidScheduleError),
        ({"every": 0}, InvalidScheduleError),
        ({"every": "-5m"}, InvalidScheduleError),
        ({"every": 60, "misfire": "sometimes"}, InvalidOptionError),
        ({"every": 60, "max_catch_up": 3}, InvalidOptionError),
        ({"cron": 5, "timezone": "UTC"}, InvalidScheduleError),
    ],
)
def test_a_bad_spec_names_its_option(options: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        schedule_spec("report", **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule_id", ["", "   ", "x" * (MAX_SCHEDULE_ID_LENGTH + 1), 5, "a\0b"])
def test_a_bad_schedule_id_is_refused(schedule_id: object) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        validate_schedule_id(schedule_id)
    assert raised.value.field == "schedule_id"


# -- before a run ---------------------------------------------------------------------------


async def _handler(params: object, ctx: object) -> None: ...


async def _recurrent(ctx: object) -> None: ...


EVENT = EventJobDefinition("send", _handler)
RECURRENT = RecurrentJobDefinition("nightly-acme", _recurrent, run_every="1h")


def _claimed(kind: JobType = JobType.EVENT, **fields: object) -> ClaimedJob:
    base: dict[str, object] = {
        "job_id": "j",
        "execution_id": "e",
        "job_name": "send" if kind is JobType.EVENT else "nightly-acme",
        "type": kind,
        "params": None,
        "tries": 1,
        "priority": 100,
        "locked_until": NOW + timedelta(minutes=1),
        "next_run_at": NOW,
    }
    return ClaimedJob(**{**base, **fields})  # type: ignore[arg-type]


def test_a_job_past_its_deadline_is_deleted_with_an_expired_row() -> None:
    late = _claimed(start_before=NOW - timedelta(seconds=1))
    assert expired(late, NOW)
    assert decide_before_run(EVENT, late, POLICY, NOW) == Delete(HistoryStatus.EXPIRED)
    on_time = _claimed(start_before=NOW)
    assert decide_before_run(EVENT, on_time, POLICY, NOW) is None
    retried = _claimed(start_before=NOW - timedelta(seconds=1), tries=2)
    assert decide_before_run(EVENT, retried, POLICY, NOW) is None  # it had started in time
    recovered = _claimed(start_before=NOW - timedelta(seconds=1), was_stale=True)
    assert decide_before_run(EVENT, recovered, POLICY, NOW) is None


def test_a_paused_schedule_is_parked_again_with_its_try_given_back() -> None:
    spec = schedule_spec("send", every="1h", paused=True)
    job = _claimed(JobType.RECURRENT, schedule=spec, tries=3)
    assert decide_before_run(RECURRENT, job, POLICY, NOW) == Defer(PARKED_AT, tries=2)
    running = _claimed(JobType.RECURRENT, schedule=schedule_spec("send", every="1h"))
    assert decide_before_run(RECURRENT, running, POLICY, NOW) is None
