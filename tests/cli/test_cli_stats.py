"""``dogs stats`` (dogs_cli.stats): bad input without a server, then the table and the
JSON of history rows written to the real mongod."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobType
from dogs_core.ids import new_execution_id, new_record_id
from dogs_mongo import MongoJobStore
from tests.cli.test_cli import assert_clean_error, invoke


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--window", "soon"], ["--window soon", "cannot parse"]),
        (["--window", "0s"], ["--window 0s", "greater than zero"]),
        (["--window", "8d"], ["--window 8d", "at most 7d"]),
        (["--name", " "], ["--name", "must not be empty"]),
        ([], ["no MongoDB URI"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, "stats", *args, "--database", "app"), *fragments)


def test_help(runner: CliRunner) -> None:
    result = invoke(runner, "stats", "--help")
    assert result.exit_code == 0
    for flag in ("--name", "--window", "--json"):
        assert flag in result.stdout


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    return store


def _row(
    name: str, ago: timedelta, ms: int, status: HistoryStatus, error_type: str | None = None
) -> HistoryRecord:
    started = datetime.now(UTC) - ago
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=new_record_id(),
        job_name=name,
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=ms),
        status=status,
        expires_at=started + timedelta(days=7),
        error_type=error_type,
    )


def _seed(store: MongoJobStore) -> None:
    minute = timedelta(minutes=1)
    store.write_history_many(
        [
            *(_row("send_email", i * minute, 100 + i, HistoryStatus.SUCCESS) for i in range(1, 9)),
            _row("send_email", 20 * minute, 900, HistoryStatus.ERROR, "smtplib.SMTPException"),
            _row("send_email", 21 * minute, 50, HistoryStatus.STALE),
            _row("report", 3 * minute, 2500, HistoryStatus.SUCCESS),
            _row("report", timedelta(hours=2), 10, HistoryStatus.SUCCESS),  # outside 1h
        ]
    )


@pytest.mark.mongo
def test_the_table(runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore) -> None:
    _seed(store)
    result = invoke(runner, "stats", env={**db_env, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Dogs stats, the 1h before" in out
    for header in (
        "Attempts", "Succeeded", "Errors", "Stale", "Cancelled", "Snoozed", "Attempt success",
        "Failed jobs", "Job success", "p50", "p95", "Max", "Attempts/min",
    ):  # fmt: skip
        assert header in out
    send = next(line for line in out.splitlines() if "send_email" in line and "%" in line)
    assert send.split("│")[2].strip() == "10"  # attempts
    assert "80.0%" in send  # 8 of 8 + 1 + 1
    assert "900 ms" in send  # the max
    assert "Errors by type" in out
    assert "smtplib.SMTPException" in out
    report = next(line for line in out.splitlines() if "report" in line and "%" in line)
    assert "2.5 s" in report


@pytest.mark.mongo
def test_json_of_one_name_over_a_window(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    _seed(store)
    result = invoke(runner, "stats", "--name", "report", "--window", "3h", "--json", env=db_env)
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)
    assert report["job_name"] == "report"
    assert report["runs"] == report["attempts"] == 2
    assert report["attempt_success_rate"] == report["job_success_rate"] == 1.0
    assert report["duration_max_ms"] == 2500.0
    assert len(report["throughput"]) in (180, 181)
    assert sum(count for _, count in report["throughput"]) == 2
    assert report["until"].endswith("Z")


@pytest.mark.mongo
def test_no_runs(runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore) -> None:
    result = invoke(runner, "stats", "--window", "15m", env=db_env)
    assert result.exit_code == 0, result.output
    assert "No attempts in the 15m before" in result.stdout
    as_json = invoke(runner, "stats", "--json", env=db_env)
    assert json.loads(as_json.stdout) == []


def _sample(page: str, command: str) -> str:
    """The text block of docs/stats.md that follows ``$ command``."""
    start = page.index(f"$ {command}\n") + len(command) + 3
    return page[start : page.index("```", start)]


def _headers(text: str) -> list[list[str]]:
    """The header cells of each Rich table in ``text``."""
    return [
        [cell.strip() for cell in line.strip().strip("┃").split("┃")]
        for line in text.splitlines()
        if line.strip().startswith("┃")
    ]


def test_the_pages_samples_have_what_the_command_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/stats.md's sample output: the same tables, columns and JSON fields as the code
    prints today (the page was once two renames behind)."""
    from dogs_cli.stats import print_stats
    from dogs_core import DogsClient, Jobs
    from dogs_testing import InMemoryJobStore

    store = InMemoryJobStore()
    store.sync.write_history_many(
        [
            _row("email", timedelta(minutes=2), 40, HistoryStatus.SUCCESS),
            _row("email", timedelta(minutes=1), 60, HistoryStatus.ERROR, "app.Declined"),
        ]
    )
    client = DogsClient(store, Jobs())
    until = datetime.now(UTC)
    window = timedelta(hours=1)
    rows = anyio.run(lambda: client.stats(window=window, until=until))
    monkeypatch.setenv("COLUMNS", "300")
    print_stats(rows, window=window, until=until, as_json=False)
    printed = capsys.readouterr().out
    print_stats(rows, window=window, until=until, as_json=True)
    fields = list(json.loads(capsys.readouterr().out)[0])
    page = (Path(__file__).resolve().parents[2] / "docs" / "stats.md").read_text()
    table = _sample(page, "dogs stats")
    assert _headers(table) == _headers(printed)
    titles = [line.strip() for line in printed.splitlines() if line.strip()[:1].isalpha()]
    assert [title.split(" before ")[0] for title in titles] == [
        "Dogs stats, the 1h",
        "Errors by type",
    ]
    for title in titles:
        assert title.split(" before ")[0] in table
    shown = _sample(page, "dogs stats --name email --window 15m --json")
    assert re.findall(r'^    "(\w+)":', shown, flags=re.MULTILINE) == fields
