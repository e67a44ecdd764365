"""Messages name a bad value as its user would type it: a duration as ``0s`` or ``8d``, a time
in ISO 8601, never a Python constructor (issue 40: ``run_every=datetime.timedelta(0)`` and
``since=datetime.datetime(...)`` were printed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dogs_core import DogsClient, Jobs
from dogs_core.domain import validation
from dogs_core.errors import InvalidOptionError, InvalidScheduleError, duration_text, shown_value
from dogs_testing import InMemoryJobStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(days=8), "8d"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(seconds=0.25), "0.25s"),
        (timedelta(seconds=-5), "-5s"),
        (timedelta(days=1, seconds=1.5), "1d1.5s"),
    ],
)
def test_a_duration_is_shown_as_the_parsers_read_it(value: timedelta, text: str) -> None:
    assert duration_text(value) == text
    if value >= timedelta(0):  # the parsers refuse a negative one, and say so with this text
        assert validation.duration("d", text) == value


def test_a_time_is_shown_in_iso_8601() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert shown_value(at) == "2030-01-02T03:04:05+00:00"
    assert str(InvalidOptionError("since", at, "x")) == "since=2030-01-02T03:04:05+00:00: x"


async def test_the_client_messages_carry_no_python_repr() -> None:
    jobs = Jobs()

    @jobs.event
    async def nap(params: dict[str, Any], ctx: object) -> None: ...

    client = DogsClient(InMemoryJobStore(), jobs)
    with pytest.raises(InvalidScheduleError) as every:
        await client.schedules.upsert("s", "nap", every=timedelta(0))
    assert str(every.value) == "run_every=0s: must be greater than zero"
    with pytest.raises(InvalidOptionError) as window:
        await client.errors(window="8d")
    assert str(window.value) == "window=8d: must be at most 7d (the history's default retention)"
    for error in (every.value, window.value):
        assert "datetime." not in str(error)
