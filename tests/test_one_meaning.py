"""One input means one thing at every edge: a filter or a window typed on the ``dogs`` command
line, in a dashboard URL or given to the client is read by the same declaration
(:mod:`dogs_core.domain.filters`), so each edge accepts and refuses alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import typer.main
from starlette.testclient import TestClient
from typer.testing import CliRunner

from dogs_cli.app import app as cli
from dogs_core import InvalidOptionError, Jobs
from dogs_core.domain.filters import EXECUTION_FILTERS, filters_from_text, parse_moment
from dogs_core.runtime import DogsClient
from dogs_dashboard import create_app
from dogs_testing import InMemoryJobStore
from tests.cli.test_cli import invoke

#: Windows of the errors report: (typed, accepted?).
WINDOWS = [("1d", True), ("15m", True), ("7d", True), ("0", False), ("8d", False), ("soon", False)]
NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    with TestClient(create_app(DogsClient(InMemoryJobStore(), Jobs()))) as client:
        yield client


def _client_accepts(window: str) -> bool:
    async def read() -> None:
        await DogsClient(InMemoryJobStore(), Jobs()).errors(window=window)

    try:
        anyio.run(read)
    except InvalidOptionError:
        return False
    return True


@pytest.mark.parametrize(("window", "accepted"), WINDOWS)
def test_a_window_is_accepted_or_refused_by_every_edge_alike(
    http: TestClient, window: str, accepted: bool
) -> None:
    result = invoke(CliRunner(), "errors", "--window", window, "--database", "app")
    assert result.exit_code == 2
    cli_refused = f"--window {window}" in result.stderr
    page = http.get("/errors", params={"window": window})
    assert (not cli_refused, page.status_code == 200, _client_accepts(window)) == (accepted,) * 3
    if not accepted:
        assert "datetime" not in result.stderr
        assert "timedelta" not in result.stderr


def test_the_history_commands_flags_are_the_declared_filters() -> None:
    group: Any = typer.main.get_command(cli)
    history = group.commands["history"]
    flags = {opt for param in history.params for opt in getattr(param, "opts", ())}
    helps = {param.opts[0]: param.help for param in history.params if getattr(param, "opts", ())}
    for one in EXECUTION_FILTERS:
        assert one.flag in flags
        assert helps[one.flag] == one.help


@pytest.mark.parametrize(
    ("texts", "field"),
    [
        ({"status": "exploded"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"param": "no-equals-sign"}, "param"),
        ({"owner": "/"}, "owner"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_filter_names_its_key_at_every_edge(
    http: TestClient, texts: dict[str, str], field: str
) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        filters_from_text(EXECUTION_FILTERS, texts, NOW)
    assert raised.value.field == field
    if field != "colour":  # the command line has no flag for an unknown filter
        flag = next(one.flag for one in EXECUTION_FILTERS if one.key == field)
        result = invoke(CliRunner(), "history", flag, texts[field], "--database", "app")
        assert result.exit_code == 2
        assert f"{flag} " in result.stderr
        assert http.get("/executions", params=texts).status_code == 400


def test_a_time_without_a_zone_is_utc_everywhere() -> None:
    assert parse_moment("since", "2030-01-01T09:00", NOW) == datetime(2030, 1, 1, 9, tzinfo=UTC)
    assert parse_moment("since", "2h", NOW) == NOW - timedelta(hours=2)
    offset = parse_moment("since", "2030-01-01T09:00+02:00", NOW)
    assert offset == datetime(2030, 1, 1, 7, tzinfo=UTC)
    assert offset.tzinfo is UTC
