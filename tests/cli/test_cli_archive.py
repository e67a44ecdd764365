"""``dogs archive`` (dogs_cli.archive): bad input without a server, then a dry run, a run
with a line per batch and its summary, ``--json``, ``--max-batches`` and the archive names, on
the real mongod."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dogs_core.domain.archiving import ArchiveKind
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
        ([], ["--older-than"]),
        (["--older-than", "soon"], ["--older-than soon", "cannot parse"]),
        (["--older-than", "0s"], ["--older-than 0s", "greater than zero"]),
        (["--older-than", "1d", "--batch-size", "0"], ["--batch-size 0", "1..10000"]),
        (["--older-than", "1d", "--batch-size", "10001"], ["--batch-size 10001"]),
        (["--older-than", "1d", "--max-batches", "0"], ["--max-batches 0", "at least 1"]),
        (["--older-than", "1d", "--no-history", "--no-failed"], ["nothing to archive"]),
        (["--older-than", "1d", "--history-archive", " "], ["--history-archive", "empty"]),
        (["--older-than", "1d"], ["no MongoDB URI"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    result = invoke(runner, "archive", *args, "--database", "app")
    if not args:  # typer's own usage error for the missing required option
        assert result.exit_code == 2
        assert "--older-than" in result.output
        return
    assert_clean_error(result, *fragments)


def test_help(runner: CliRunner) -> None:
    result = invoke(runner, "archive", "--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--older-than", "--batch-size", "--no-history", "--no-failed", "--dry-run"):
        assert flag in result.stdout


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup()
    now = datetime.now(UTC)
    rows = [_row(now - timedelta(days=40, minutes=n)) for n in range(5)]
    store.write_history_many([*rows, _row(now - timedelta(days=1))])
    return store


def _row(started: datetime) -> HistoryRecord:
    return HistoryRecord(
        execution_id=new_execution_id(),
        job_id=new_record_id(),
        job_name="send",
        type=JobType.EVENT,
        priority=100,
        tries=1,
        started_at=started,
        ended_at=started + timedelta(milliseconds=5),
        status=HistoryStatus.SUCCESS,
        expires_at=started + timedelta(days=400),
    )


@pytest.mark.mongo
def test_a_dry_run_then_a_run(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    dry = invoke(runner, "archive", "--older-than", "30d", "--dry-run", env=db_env)
    assert dry.exit_code == 0, dry.output
    assert "Would archive" in dry.stdout
    assert store.history_collection.count_documents({}) == 6
    result = invoke(
        runner,
        "archive",
        "--older-than",
        "30d",
        "--batch-size",
        "2",
        env={**db_env, "COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "history: batch 1 moved 2, 2 in all" in result.stderr
    assert "history: batch 3 moved 1, 5 in all" in result.stderr
    assert "Note:" in result.stderr  # 30d outlives the default retention of 7 days
    assert "Archived" in result.stdout
    total = next(line for line in result.stdout.splitlines() if "total" in line)
    assert "5" in total
    assert store.history_collection.count_documents({}) == 1
    assert store.archive_collection(ArchiveKind.HISTORY).count_documents({}) == 5


@pytest.mark.mongo
def test_json_max_batches_and_collection_names(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    args = ["archive", "--older-than", "3d", "--batch-size", "2", "--no-failed", "--json"]
    first = invoke(runner, *args, "--max-batches", "1", "--history-archive", "cold", env=db_env)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["moved"] == {"history": 2}
    assert report["batches"] == 1
    assert report["complete"] is False
    second = invoke(runner, *args, "--history-archive", "cold", env=db_env)
    assert json.loads(second.stdout)["moved"] == {"history": 3}
    assert "Note:" not in second.stderr
    assert store.history_collection.database["cold"].count_documents({}) == 5
