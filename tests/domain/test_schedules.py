"""Durations, next-run rules, event run times and retry backoff."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dogs_core.domain import schedules
from dogs_core.domain.schedules import (
    DEFAULT_MAX_TRIES,
    CronSchedule,
    CustomSchedule,
    RetryPolicy,
    RunEvery,
    backoff_delay,
    base_delay,
    ensure_utc,
    event_run_at,
    next_run_after,
    parse_duration,
    parse_optional_duration,
    parse_positive_duration,
    schedule_rule,
)
from dogs_core.errors import InvalidOptionError, InvalidScheduleError

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

aware_datetimes = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(2090, 1, 1),
    timezones=st.sampled_from([UTC, ZoneInfo("America/Santiago"), ZoneInfo("Europe/Paris")]),
    allow_imaginary=False,  # wall times in a DST gap never compare equal across zones
)
durations = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650))
positive_durations = st.timedeltas(
    min_value=timedelta(microseconds=1), max_value=timedelta(days=3650)
)


def _assert_names(error: pytest.ExceptionInfo[Any], field: str) -> None:
    assert error.value.field == field
    assert field in str(error.value)


# --------------------------------------------------------------------------------------------
# parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1m", timedelta(minutes=1)),
        ("24h", timedelta(hours=24)),
        ("1d", timedelta(days=1)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("2 days", timedelta(days=2)),
        ("1w", timedelta(weeks=1)),
        ("100ms", timedelta(milliseconds=100)),
        ("10", timedelta(seconds=10)),
        (" 5m ", timedelta(minutes=5)),
        ("0", timedelta(0)),
        ("+5s", timedelta(seconds=5)),
    ],
)
def test_parse_duration_strings(text: str, expected: timedelta) -> None:
    assert parse_duration(text, field="lock_time") == expected


@given(durations)
def test_parse_duration_timedelta_round_trips(value: timedelta) -> None:
    assert parse_duration(value, field="f") == value


@given(st.integers(min_value=0, max_value=10**9))
def test_parse_duration_int_is_seconds(value: int) -> None:
    assert parse_duration(value, field="f") == timedelta(seconds=value)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_parse_duration_float_is_seconds(value: float) -> None:
    assert parse_duration(value, field="f") == timedelta(seconds=value)


@given(
    st.integers(min_value=0, max_value=1000),
    st.integers(min_value=0, max_value=59),
    st.integers(min_value=0, max_value=59),
)
def test_parse_duration_composite_strings(hours: int, minutes: int, seconds: int) -> None:
    expected = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    assert parse_duration(f"{hours}h{minutes}m{seconds}s", field="f") == expected
    assert parse_duration(f"{int(expected.total_seconds())}s", field="f") == expected
    assert parse_duration(f"{hours}h {minutes}m", field="f") == expected - timedelta(
        seconds=seconds
    )


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        -1,
        -0.5,
        timedelta(seconds=-1),
        "-1m",
        "- 5s",
        math.nan,
        math.inf,
        -math.inf,
        "nan",
        "inf",
        "",
        "   ",
        "junk",
        "1.5.5",
        "5 parsecs",
        "1e999",
        1e300,
        None,
        [1],
        object(),
        b"1m",
    ],
)
def test_parse_duration_rejects_bad_values(value: object) -> None:
    with pytest.raises(InvalidScheduleError) as error:
        parse_duration(value, field="run_every")  # type: ignore[arg-type]
    _assert_names(error, "run_every")
    assert error.value.value is value


def test_parse_duration_error_type_can_be_chosen() -> None:
    with pytest.raises(InvalidOptionError) as error:
        parse_duration("soon", field="lock_time", error=InvalidOptionError)
    _assert_names(error, "lock_time")
    assert "'soon'" in str(error.value)


@pytest.mark.parametrize("value", [0, 0.0, "0s", timedelta(0), "0"])
def test_parse_positive_duration_rejects_zero(value: object) -> None:
    with pytest.raises(InvalidScheduleError, match="greater than zero") as error:
        parse_positive_duration(value, field="run_every")  # type: ignore[arg-type]
    _assert_names(error, "run_every")


@given(positive_durations)
def test_parse_positive_duration_accepts_positive(value: timedelta) -> None:
    assert parse_positive_duration(value, field="f") == value


def test_parse_optional_duration() -> None:
    assert parse_optional_duration(None, field="f") is None
    assert parse_optional_duration(0, field="f") == timedelta(0)
    assert parse_optional_duration("1m", field="f", positive=True) == timedelta(minutes=1)
    with pytest.raises(InvalidOptionError):
        parse_optional_duration(0, field="f", positive=True, error=InvalidOptionError)


# --------------------------------------------------------------------------------------------
# ensure_utc


class _NoOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 1, 1),
        datetime(2026, 1, 1, tzinfo=_NoOffset()),
        "2026-01-01T00:00:00Z",
        1_700_000_000,
        None,
    ],
)
def test_ensure_utc_rejects_naive_and_non_datetimes(value: object) -> None:
    with pytest.raises(InvalidScheduleError) as error:
        ensure_utc(value, field="run_at")
    _assert_names(error, "run_at")


@given(aware_datetimes)
def test_ensure_utc_converts_to_utc(value: datetime) -> None:
    result = ensure_utc(value, field="f")
    assert result.tzinfo is UTC
    # ambiguous wall times never compare equal across zones (PEP 495): compare instants
    assert result.timestamp() == value.timestamp()


def test_naive_datetime_message_is_helpful() -> None:
    with pytest.raises(InvalidScheduleError, match="timezone-aware"):
        ensure_utc(datetime(2026, 1, 1), field="now")


# --------------------------------------------------------------------------------------------
# RunEvery


@given(aware_datetimes, positive_durations)
def test_run_every_is_a_fixed_delay_from_now(now: datetime, interval: timedelta) -> None:
    result = next_run_after(RunEvery(interval), now)
    assert result == now.astimezone(UTC) + interval  # elapsed time, not wall-clock time
    assert result.tzinfo is UTC


def test_run_every_normalizes_loose_input() -> None:
    assert RunEvery("5m").interval == timedelta(minutes=5)  # type: ignore[arg-type]
    assert RunEvery(30).interval == timedelta(seconds=30)  # type: ignore[arg-type]


@pytest.mark.parametrize("interval", [0, -1, "0s", "junk", True, timedelta(0)])
def test_run_every_rejects_non_positive_intervals(interval: object) -> None:
    with pytest.raises(InvalidScheduleError) as error:
        RunEvery(interval)  # type: ignore[arg-type]
    _assert_names(error, "run_every")


def test_run_every_rejects_unknown_anchor() -> None:
    with pytest.raises(InvalidScheduleError) as error:
        RunEvery(timedelta(minutes=1), anchor="start")  # type: ignore[arg-type]
    _assert_names(error, "anchor")


@given(
    aware_datetimes,
    positive_durations,
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=365)),
)
def test_run_every_slot_anchor_is_fixed_rate(
    scheduled_at: datetime, interval: timedelta, late_by: timedelta
) -> None:
    # Add in UTC: aware arithmetic in a local zone drops ``fold`` and can move "now" before
    # the scheduled slot around a DST fall-back.
    now = scheduled_at.astimezone(UTC) + late_by
    result = next_run_after(RunEvery(interval, anchor="slot"), now, scheduled_at=scheduled_at)
    assert result > now
    assert result - interval <= now  # the first slot after now: missed slots are skipped
    assert (result - scheduled_at) % interval == timedelta(0)
    assert result.tzinfo is UTC


def test_run_every_slot_anchor_edge_cases() -> None:
    rule = RunEvery(timedelta(minutes=10), anchor="slot")
    future = NOW + timedelta(minutes=3)
    assert next_run_after(rule, NOW, scheduled_at=future) == future
    assert next_run_after(rule, NOW) == NOW + timedelta(minutes=10)  # no slot: completion
    assert next_run_after(rule, NOW, scheduled_at=NOW) == NOW + timedelta(minutes=10)
    with pytest.raises(InvalidScheduleError) as error:
        next_run_after(rule, NOW, scheduled_at=datetime(2026, 1, 1))
    _assert_names(error, "scheduled_at")


# --------------------------------------------------------------------------------------------
# CronSchedule


def test_cron_in_santiago_matches_the_reference_example() -> None:
    rule = CronSchedule("0 9 * * *", "America/Santiago")
    assert next_run_after(rule, NOW) == datetime(2026, 5, 1, 13, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "now", "expected"),
    [
        # 03:00 Paris in winter (UTC+1)
        ("0 3 * * *", "Europe/Paris", datetime(2026, 1, 10, 5, tzinfo=UTC), "2026-01-11T02:00"),
        # exactly at an occurrence: strictly after, so the next day
        ("0 9 * * *", "UTC", datetime(2026, 5, 1, 9, tzinfo=UTC), "2026-05-02T09:00"),
        ("@hourly", "UTC", datetime(2026, 5, 1, 9, 30, tzinfo=UTC), "2026-05-01T10:00"),
        ("@daily", "UTC", datetime(2026, 5, 1, 9, 30, tzinfo=UTC), "2026-05-02T00:00"),
        ("@weekly", "UTC", datetime(2026, 5, 1, 9, tzinfo=UTC), "2026-05-03T00:00"),
        ("@monthly", "UTC", datetime(2026, 5, 1, 9, tzinfo=UTC), "2026-06-01T00:00"),
        ("@YEARLY", "UTC", datetime(2026, 5, 1, 9, tzinfo=UTC), "2027-01-01T00:00"),
        # a seconds field
        ("*/15 * * * * *", "UTC", datetime(2026, 5, 1, 9, 0, 7, tzinfo=UTC), "2026-05-01T09:00:15"),
        # fall back in Paris (2026-10-25, 03:00 CEST -> 02:00 CET). `now` is 02:10 CET, inside
        # the repeated hour: today's 02:30 resolves to the first (CEST) one, already past.
        (
            "30 2 * * *",
            "Europe/Paris",
            datetime(2026, 10, 25, 1, 10, tzinfo=UTC),
            "2026-10-26T01:30",
        ),
        # spring forward in Paris (2026-03-29, 02:00 CET -> 03:00 CEST): 02:30 does not exist
        ("30 2 * * *", "Europe/Paris", datetime(2026, 3, 28, 23, tzinfo=UTC), "2026-03-29T01:00"),
    ],
)
def test_cron_table(expression: str, zone: str, now: datetime, expected: str) -> None:
    result = next_run_after(CronSchedule(expression, zone), now)
    assert result == datetime.fromisoformat(expected).replace(tzinfo=UTC)
    assert result.tzinfo is UTC


@given(
    aware_datetimes,
    st.sampled_from(["0 9 * * *", "*/5 * * * *", "30 2 * * *", "0 0 L * *", "15 10 * * MON-FRI"]),
    st.sampled_from(["UTC", "America/Santiago", "Europe/Paris", "Asia/Kolkata"]),
)
def test_cron_next_run_is_the_first_occurrence_strictly_after_now(
    now: datetime, expression: str, zone: str
) -> None:
    rule = CronSchedule(expression, zone)
    result = next_run_after(rule, now)
    assert result > now
    assert result.tzinfo is UTC
    # it is an occurrence: asking again from just before it gives it back
    assert next_run_after(rule, result - timedelta(microseconds=1)) == result
    # and it is the first one: from any point between now and it, the answer is the same
    # (computed in UTC: wall-clock arithmetic on a fold=1 time would step back an hour)
    now_utc = now.astimezone(UTC)
    assert next_run_after(rule, now_utc + (result - now_utc) / 2) == result


def test_cron_accepts_a_zoneinfo_and_exposes_the_zone() -> None:
    rule = CronSchedule("0 9 * * *", ZoneInfo("Europe/Paris"))  # type: ignore[arg-type]
    assert rule.timezone == "Europe/Paris"
    assert rule.zone == ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    "expression",
    ["", "* * *", "61 * * * *", "a b c d e", "0 0 30 2 *", "*/0 * * * *", "@often", "0 0 ? * *"],
)
def test_cron_rejects_invalid_expressions(expression: str) -> None:
    with pytest.raises(InvalidScheduleError, match="invalid cron expression") as error:
        CronSchedule(expression, "UTC")
    _assert_names(error, "cron")


def test_cron_rejects_a_non_string_expression() -> None:
    with pytest.raises(InvalidScheduleError) as error:
        CronSchedule(5, "UTC")  # type: ignore[arg-type]
    _assert_names(error, "cron")


@pytest.mark.parametrize(
    "zone",
    [
        "Nope/Zone",
        "",
        "../etc/passwd",
        "/etc/localtime",
        "utc",
        5,
        None,
        "America/santiago",
        "America",
        "zone.tab",
    ],
)
def test_cron_rejects_invalid_timezones(zone: object) -> None:
    with pytest.raises(InvalidScheduleError) as error:
        CronSchedule("0 9 * * *", zone)  # type: ignore[arg-type]
    _assert_names(error, "timezone")


@given(st.text(alphabet="0123456789*/,-LW#? @abcdefghijklmnopqrstuvwxyzMONTUEFRI", max_size=30))
def test_cron_parsing_never_leaks_another_exception(expression: str) -> None:
    field = None
    try:
        CronSchedule(expression, "UTC")
    except InvalidScheduleError as error:
        field = error.field
    assert field in (None, "cron")


def test_cron_without_any_occurrence_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = CronSchedule("0 9 * * *", "UTC")

    def no_occurrences(expression: object, start: datetime) -> Iterator[datetime]:
        return iter(())

    monkeypatch.setattr(schedules, "_cron_iter", no_occurrences)
    with pytest.raises(InvalidScheduleError, match="no occurrence") as error:
        next_run_after(rule, NOW)
    _assert_names(error, "cron")


def test_next_run_after_rejects_naive_now_and_unknown_rules() -> None:
    with pytest.raises(InvalidScheduleError) as error:
        next_run_after(RunEvery(timedelta(1)), datetime(2026, 1, 1))
    _assert_names(error, "now")
    with pytest.raises(InvalidScheduleError) as error:
        next_run_after("every day", NOW)  # type: ignore[arg-type]
    _assert_names(error, "schedule")


# --------------------------------------------------------------------------------------------
# CustomSchedule


def test_custom_schedule_is_called_with_now_and_returns_utc() -> None:
    seen: list[datetime] = []
    santiago = ZoneInfo("America/Santiago")

    def tomorrow_at_nine(now: datetime) -> datetime:
        seen.append(now)
        return datetime(2026, 5, 2, 9, tzinfo=santiago)

    result = next_run_after(CustomSchedule(tomorrow_at_nine), NOW.astimezone(santiago))
    assert seen == [NOW]
    assert seen[0].tzinfo is UTC
    assert result == datetime(2026, 5, 2, 13, tzinfo=UTC)
    assert result.tzinfo is UTC


def test_custom_schedule_may_return_a_past_time() -> None:
    past = NOW - timedelta(days=1)
    assert next_run_after(CustomSchedule(lambda now: past), NOW) == past


@pytest.mark.parametrize(
    "returned",
    [datetime(2026, 5, 2, 9), datetime(2026, 5, 2).date(), "2026-05-02", None, 1_700_000_000],
)
def test_custom_schedule_must_return_an_aware_datetime(returned: object) -> None:
    rule = CustomSchedule(lambda now: returned)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidScheduleError, match="timezone-aware datetime") as error:
        next_run_after(rule, NOW)
    _assert_names(error, "next_run")


def test_custom_schedule_errors_propagate() -> None:
    def broken(now: datetime) -> datetime:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        next_run_after(CustomSchedule(broken), NOW)


def test_custom_schedule_needs_a_callable() -> None:
    with pytest.raises(InvalidScheduleError) as error:
        CustomSchedule("tomorrow")  # type: ignore[arg-type]
    _assert_names(error, "next_run")


# --------------------------------------------------------------------------------------------
# schedule_rule: exactly one rule


def _next_run(now: datetime) -> datetime:
    return now + timedelta(hours=1)


def test_schedule_rule_builds_each_kind() -> None:
    assert schedule_rule(run_every="5m") == RunEvery(timedelta(minutes=5))
    assert schedule_rule(cron="0 9 * * *", timezone="UTC") == CronSchedule("0 9 * * *", "UTC")
    assert schedule_rule(cron="0 9 * * *", timezone=ZoneInfo("UTC")) == CronSchedule(
        "0 9 * * *", "UTC"
    )
    assert schedule_rule(next_run=_next_run) == CustomSchedule(_next_run)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_every": "5m", "cron": "0 9 * * *", "timezone": "UTC"}, "cron"),
        ({"run_every": "5m", "next_run": _next_run}, "next_run"),
        ({"cron": "0 9 * * *", "timezone": "UTC", "next_run": _next_run}, "next_run"),
        ({"run_every": 60, "cron": "0 9 * * *", "timezone": "UTC", "next_run": _next_run}, "cron"),
    ],
)
def test_schedule_rule_rejects_conflicting_options(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidScheduleError, match="conflicting options") as error:
        schedule_rule(**options)
    _assert_names(error, field)


def test_schedule_rule_requires_a_timezone_for_cron_only() -> None:
    with pytest.raises(InvalidScheduleError, match="require a timezone") as error:
        schedule_rule(cron="0 9 * * *")
    _assert_names(error, "timezone")
    with pytest.raises(InvalidScheduleError, match="only applies to a cron") as error:
        schedule_rule(run_every="5m", timezone="UTC")
    _assert_names(error, "timezone")


def test_schedule_rule_requires_one_rule() -> None:
    with pytest.raises(InvalidScheduleError, match="needs one of") as error:
        schedule_rule()
    _assert_names(error, "schedule")


def test_schedule_rule_validates_each_value() -> None:
    with pytest.raises(InvalidScheduleError) as error:
        schedule_rule(run_every=-5)
    _assert_names(error, "run_every")
    with pytest.raises(InvalidScheduleError) as error:
        schedule_rule(cron="0 9 * * *", timezone="Mars/Olympus")
    _assert_names(error, "timezone")


# --------------------------------------------------------------------------------------------
# event_run_at


def test_event_run_at_table() -> None:
    assert event_run_at(NOW) == NOW
    assert event_run_at(NOW, run_in=0) == NOW
    assert event_run_at(NOW, run_in="5m") == NOW + timedelta(minutes=5)
    assert event_run_at(NOW, run_in=timedelta(hours=1)) == NOW + timedelta(hours=1)
    paris = datetime(2026, 5, 1, 16, tzinfo=ZoneInfo("Europe/Paris"))
    result = event_run_at(NOW, run_at=paris)
    assert result == datetime(2026, 5, 1, 14, tzinfo=UTC)
    assert result.tzinfo is UTC
    past = NOW - timedelta(days=3)
    assert event_run_at(NOW, run_at=past) == past
    assert event_run_at(NOW.astimezone(timezone(timedelta(hours=-4)))).tzinfo is UTC


@given(aware_datetimes, durations)
def test_event_run_at_run_in_property(now: datetime, run_in: timedelta) -> None:
    result = event_run_at(now, run_in=run_in)
    assert result == now.astimezone(UTC) + run_in
    assert result.tzinfo is UTC


def test_event_run_at_rejects_conflicts_and_bad_values() -> None:
    with pytest.raises(InvalidScheduleError, match="conflicting options") as error:
        event_run_at(NOW, run_in=5, run_at=NOW)
    _assert_names(error, "run_at")
    with pytest.raises(InvalidScheduleError) as error:
        event_run_at(NOW, run_in=-5)
    _assert_names(error, "run_in")
    with pytest.raises(InvalidScheduleError) as error:
        event_run_at(NOW, run_at=datetime(2026, 1, 1))
    _assert_names(error, "run_at")
    with pytest.raises(InvalidScheduleError) as error:
        event_run_at(datetime(2026, 1, 1))
    _assert_names(error, "now")


# --------------------------------------------------------------------------------------------
# Retry backoff


def test_default_constants() -> None:
    assert DEFAULT_MAX_TRIES == 20
    policy = RetryPolicy()
    assert policy == RetryPolicy(timedelta(seconds=2), 2.0, timedelta(hours=1), 0.2)
    assert [base_delay(policy, n).total_seconds() for n in (1, 2, 3, 4)] == [2, 4, 8, 16]
    assert base_delay(policy, 12) == timedelta(hours=1)
    assert base_delay(policy, 11) == timedelta(seconds=2048)


def test_retry_policy_accepts_loose_durations() -> None:
    policy = RetryPolicy(base="1s", max_delay=600, factor=3, jitter=0)  # type: ignore[arg-type]
    assert policy.base == timedelta(seconds=1)
    assert policy.max_delay == timedelta(minutes=10)
    assert isinstance(policy.factor, float)
    assert isinstance(policy.jitter, float)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"base": -1}, "retry.base"),
        ({"base": "junk"}, "retry.base"),
        ({"max_delay": math.inf}, "retry.max_delay"),
        ({"base": 10, "max_delay": 5}, "retry.max_delay"),
        ({"factor": 0.5}, "retry.factor"),
        ({"factor": math.nan}, "retry.factor"),
        ({"factor": True}, "retry.factor"),
        ({"factor": "2"}, "retry.factor"),
        ({"jitter": -0.1}, "retry.jitter"),
        ({"jitter": 1.5}, "retry.jitter"),
        ({"jitter": math.inf}, "retry.jitter"),
    ],
)
def test_retry_policy_validation(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptionError) as error:
        RetryPolicy(**options)
    _assert_names(error, field)


policies = st.builds(
    RetryPolicy,
    base=st.timedeltas(min_value=timedelta(0), max_value=timedelta(minutes=10)),
    factor=st.floats(min_value=1, max_value=10),
    max_delay=st.timedeltas(min_value=timedelta(minutes=10), max_value=timedelta(days=1)),
    jitter=st.floats(min_value=0, max_value=1),
)
attempts = st.integers(min_value=1, max_value=10_000)
rands = st.floats(min_value=0, max_value=1, exclude_max=True)


@given(policies, attempts, attempts)
def test_base_delay_is_monotone_and_capped(policy: RetryPolicy, a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert base_delay(policy, low) <= base_delay(policy, high) <= policy.max_delay
    assert base_delay(policy, 1) == min(policy.base, policy.max_delay)


@given(policies, attempts, rands)
def test_backoff_delay_stays_within_bounds(policy: RetryPolicy, attempt: int, rand: float) -> None:
    delay = backoff_delay(policy, attempt, rand)
    raw = base_delay(policy, attempt)
    assert timedelta(0) <= delay <= policy.max_delay * (1 + policy.jitter)
    tolerance = timedelta(microseconds=2)
    assert raw * (1 - policy.jitter) - tolerance <= delay <= raw * (1 + policy.jitter) + tolerance


@given(policies, attempts, attempts, rands)
def test_backoff_delay_grows_with_attempt_for_a_fixed_rand(
    policy: RetryPolicy, a: int, b: int, rand: float
) -> None:
    low, high = sorted((a, b))
    assume(low != high)
    tolerance = timedelta(microseconds=1)
    assert backoff_delay(policy, low, rand) <= backoff_delay(policy, high, rand) + tolerance


def test_backoff_formula_examples() -> None:
    policy = RetryPolicy()
    assert backoff_delay(policy, 1, 0.5) == timedelta(seconds=2)
    assert backoff_delay(policy, 1, 0.0) == timedelta(seconds=1.6)
    assert backoff_delay(policy, 3, 0.75) == timedelta(seconds=8 * 1.1)
    assert backoff_delay(policy, 10**6, 0.999999) <= timedelta(hours=1.2)
    assert backoff_delay(RetryPolicy(base=timedelta(0), jitter=0), 5, 0.3) == timedelta(0)
    flat = RetryPolicy(base=timedelta(seconds=5), factor=1, jitter=0)
    assert backoff_delay(flat, 50, 0.9) == timedelta(seconds=5)
    capped = RetryPolicy(base=timedelta(seconds=5), max_delay=timedelta(seconds=5), jitter=0)
    assert backoff_delay(capped, 50, 0.9) == timedelta(seconds=5)


@pytest.mark.parametrize("attempt", [0, -1, True, 1.5, "1"])
def test_backoff_rejects_bad_attempts(attempt: object) -> None:
    with pytest.raises(InvalidOptionError) as error:
        backoff_delay(RetryPolicy(), attempt, 0.5)  # type: ignore[arg-type]
    _assert_names(error, "attempt")


@pytest.mark.parametrize("rand", [1.0, -0.1, math.nan, True, "0.5", None])
def test_backoff_rejects_bad_rand(rand: object) -> None:
    with pytest.raises(InvalidOptionError) as error:
        backoff_delay(RetryPolicy(), 1, rand)  # type: ignore[arg-type]
    _assert_names(error, "rand")
