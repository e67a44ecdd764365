"""The log-line options of a job (``store_logs``, ``max_log_lines``), line ids and the reads'
input checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core import EventJobDefinition, RecurrentJobDefinition
from dogs_core.domain.log_lines import (
    DEFAULT_MAX_LOG_LINES,
    MAX_LOG_LINES,
    MAX_LOG_MESSAGE,
    check_log_page,
    check_owner_id,
    clip,
    dropped_line,
    level_name,
    line_id,
    log_options,
)
from dogs_core.errors import InvalidOptionError


async def handler(params: None, ctx: object) -> None:
    return None


@pytest.mark.parametrize(
    ("store_logs", "level"),
    [(False, None), (None, None), (True, 20), ("debug", 10), (" Warning ", 30), (0, 0), (25, 25)],
)
def test_store_logs_levels(store_logs: object, level: int | None) -> None:
    assert log_options(store_logs, DEFAULT_MAX_LOG_LINES) == (level, DEFAULT_MAX_LOG_LINES)


@pytest.mark.parametrize(
    ("store_logs", "max_log_lines", "field_name"),
    [
        ("LOUD", 10, "store_logs"),
        (-1, 10, "store_logs"),
        (51, 10, "store_logs"),
        (2.5, 10, "store_logs"),
        (True, 0, "max_log_lines"),
        (True, MAX_LOG_LINES + 1, "max_log_lines"),
        (True, True, "max_log_lines"),
        (True, "100", "max_log_lines"),
    ],
)
def test_bad_log_options_name_their_field(
    store_logs: object, max_log_lines: object, field_name: str
) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        log_options(store_logs, max_log_lines)
    assert raised.value.field == field_name


def test_the_definitions_take_the_options() -> None:
    event = EventJobDefinition("kept", handler, store_logs="info", max_log_lines=50)
    assert (event.log_level, event.max_log_lines) == (20, 50)
    plain = EventJobDefinition("plain", handler)
    assert (plain.log_level, plain.max_log_lines) == (None, DEFAULT_MAX_LOG_LINES)

    async def tick(ctx: object) -> None:
        return None

    recurrent = RecurrentJobDefinition("tick", tick, run_every="1m", store_logs=True)
    assert recurrent.log_level == 20


def test_lines_without_history_conflict() -> None:
    with pytest.raises(InvalidOptionError, match="save_executions_for=0"):
        EventJobDefinition("nohistory", handler, store_logs=True, save_executions_for=0)
    with pytest.raises(InvalidOptionError, match="store_logs"):
        EventJobDefinition("badlevel", handler, store_logs="LOUD")


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    st.integers(min_value=0, max_value=MAX_LOG_LINES),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)),
    st.integers(min_value=0, max_value=MAX_LOG_LINES),
)
def test_line_ids_sort_by_time_then_line(
    at: datetime, seq: int, later: timedelta, other_seq: int
) -> None:
    first = line_id(at, "exec1", seq)
    second = line_id(at + later, "exec1", max(seq, other_seq) + 1)
    assert first < second


def test_texts_and_checks() -> None:
    assert dropped_line(1, 5) == "1 line dropped (max_log_lines=5 per execution)"
    assert dropped_line(7, 5).startswith("7 lines dropped")
    assert level_name(20) == "INFO"
    assert level_name(25) == "Level 25"
    assert clip("short") == "short"
    cut = clip("x" * (MAX_LOG_MESSAGE + 10))
    assert cut.endswith("[10 more characters]")
    assert check_log_page(10, None) == (10, None)
    assert check_owner_id("abc") == "abc"
    for limit, after in ((0, None), (10_001, None), (True, None), (10, ""), (10, 5)):
        with pytest.raises(InvalidOptionError):
            check_log_page(limit, after)
    for owner in ("", None, 42):
        with pytest.raises(InvalidOptionError):
            check_owner_id(owner)
