"""The fleet controls' pure parts: rate windows, limit keys, RateLimit and admission."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.controls import (
    DEFAULT_KEY,
    MAX_KEY_LENGTH,
    RateLimit,
    admission,
    check_lease,
    check_limit_key,
    check_slot,
    limit_key,
    rate_limit_option,
    rate_window,
)
from dogs_core.errors import InvalidOptionError

moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
periods = st.integers(1, 10**9).map(lambda ms: timedelta(milliseconds=ms))


@given(now=moments, period=periods)
def test_the_window_of_a_moment_contains_it_and_its_neighbours_tile_time(
    now: datetime, period: timedelta
) -> None:
    start, end = rate_window(now, period)
    assert start <= now < end
    assert end - start == period
    assert rate_window(end, period)[0] == end  # the next window starts where this one ends
    assert rate_window(start, period) == (start, end)
    assert start.microsecond % 1000 == 0  # whole milliseconds, as stores keep times


def test_limit_keys() -> None:
    assert limit_key(None, {"a": 1}, field="k", job="j") == DEFAULT_KEY
    assert limit_key(lambda p: p["a"], {"a": "acct-1"}, field="k", job="j") == "acct-1"
    assert limit_key(lambda p: p["a"], {"a": 42}, field="k", job="j") == "42"
    bad_keys: list[object] = ["", True, None, 1.5, "x" * (MAX_KEY_LENGTH + 1)]
    for bad in bad_keys:

        def returns(params: Any, bad: object = bad) -> object:
            return bad

        with pytest.raises(InvalidOptionError, match="concurrency_key"):
            limit_key(returns, {}, field="concurrency_key", job="j")

    def broken(params: Any) -> str:
        raise KeyError("account")

    with pytest.raises(InvalidOptionError, match="raised KeyError"):
        limit_key(broken, {}, field="concurrency_key", job="j")


def test_rate_limits_are_checked() -> None:
    assert RateLimit(3, "1m").period == timedelta(minutes=1)
    assert rate_limit_option((5, 10)) == RateLimit(5, 10)
    assert rate_limit_option(None) is None
    for limit, period in ((0, 1), (True, 1), (1, 0), (1, "soon"), (1, timedelta(microseconds=10))):
        with pytest.raises(InvalidOptionError, match="rate_limit"):
            RateLimit(limit, period)
    with pytest.raises(InvalidOptionError, match=r"rate_limit\.key"):
        RateLimit(1, 1, key="account")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="rate_limit"):
        rate_limit_option([5, 10])


def test_admission_names_what_a_job_needs() -> None:
    now = datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC)
    nothing = admission(
        job_name="j",
        global_concurrency=None,
        concurrency_key=None,
        rate_limit=None,
        params=None,
        now=now,
    )
    assert not nothing.needed
    both = admission(
        job_name="j",
        global_concurrency=3,
        concurrency_key=lambda p: p["acct"],
        rate_limit=RateLimit(10, 5, key=lambda p: p["region"]),
        params={"acct": "a1", "region": "eu"},
        now=now,
    )
    assert both.needed
    assert (both.slot_key, both.slots, both.rate_key, both.rate) == ("a1", 3, "eu", 10)
    assert (both.window_start, both.window_end) == (
        now - timedelta(seconds=2),
        now + timedelta(seconds=3),
    )


def test_store_input_checks() -> None:
    check_limit_key("job", "")
    check_slot("job", "key", 0, "holder")
    check_lease("lock", "owner", 1)
    with pytest.raises(InvalidOptionError, match="job_name"):
        check_limit_key("", "")
    with pytest.raises(InvalidOptionError, match="key"):
        check_limit_key("job", 7)
    with pytest.raises(InvalidOptionError, match="index"):
        check_slot("job", "", -1, "holder")
    with pytest.raises(InvalidOptionError, match="holder"):
        check_slot("job", "", 0, "")
    with pytest.raises(InvalidOptionError, match="token"):
        check_lease("lock", "owner", 0)
