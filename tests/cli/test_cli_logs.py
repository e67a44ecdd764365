"""``dogs jobs logs`` and the progress of ``dogs jobs show`` (dogs_cli.logs, cli.tables):
bad input without a server, then a running job's progress and lines on the real mongod, and
``--follow`` until the job ends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dogs_core.domain.progress import Progress
from dogs_core.domain.records import HistoryRecord, HistoryStatus
from dogs_core.domain.settle import Settlement
from dogs_mongo import MongoJobStore
from dogs_testing.contract.following import log_line
from dogs_testing.settling import completed
from tests.cli.test_cli import REGISTRY, assert_clean_error, invoke
from tests.cli.test_cli_jobs import claim, schedule

UNKNOWN_ID = "01900000-0000-7000-8000-000000000000"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["jobs", "logs", UNKNOWN_ID, "--limit", "0"], ["--limit"]),
        (["jobs", "logs", UNKNOWN_ID, "--poll-interval", "0"], ["--poll-interval 0"]),
        (["jobs", "logs", " "], ["ID"]),
        (["jobs", "logs", UNKNOWN_ID], ["no MongoDB URI"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, *args), *fragments)


def test_help(runner: CliRunner) -> None:
    result = invoke(runner, "jobs", "logs", "--help")
    assert result.exit_code == 0
    for flag in ("--follow", "--json", "--after"):
        assert flag in result.stdout


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(sync_mongo_client: Any, mongo_database_name: str) -> MongoJobStore:
    store = MongoJobStore(sync_mongo_client, mongo_database_name)
    store.setup_following()
    return store


@pytest.fixture
def dogs(runner: CliRunner, db_env: dict[str, str | None]) -> Callable[..., Any]:
    def call(*args: str, code: int = 0) -> Any:
        result = invoke(runner, *args, env=db_env)
        assert result.exit_code == code, (args, result.exit_code, result.output)
        return result

    return call


def _running(dogs: Callable[..., Any], store: MongoJobStore) -> tuple[str, str]:
    """A nap job held by an execution that reported 42% and logged two lines."""
    job_id = schedule(dogs, "nap")
    assert claim(store, "nap", lock_for=timedelta(minutes=5)) == job_id
    record = store.get_record(job_id)
    assert record is not None
    assert record.lock_id is not None
    execution = record.lock_id
    now = datetime.now(UTC)
    progress = Progress(0.42, "chunk 42/100", {"rows": 4200}, now, execution)
    assert store.write_progress(job_id, execution, progress, locked_until=None)
    store.write_log_lines(
        [
            log_line(execution, job_id, seq, at=now + seq * timedelta(milliseconds=5))
            for seq in (0, 1)
        ]
    )
    return job_id, execution


@pytest.mark.mongo
def test_show_and_logs_of_a_running_job(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    job_id, execution = _running(dogs, store)
    table = dogs("jobs", "show", job_id).stdout
    assert "Progress" in table
    assert '42% chunk 42/100 {"rows": 4200}' in table
    shown = json.loads(dogs("jobs", "show", job_id, "--json").stdout)
    assert shown["job"]["progress"]["fraction"] == 0.42
    assert shown["job"]["progress"]["execution_id"] == execution

    printed = dogs("jobs", "logs", job_id).stdout.splitlines()
    assert len(printed) == 3  # two lines, the second with a one-line exception
    assert printed[0].endswith(f"INFO     [{execution}] line 0")
    assert printed[2] == "    Traceback ..."
    assert dogs("jobs", "logs", execution).stdout.splitlines() == printed
    documents = [
        json.loads(line)
        for line in dogs("jobs", "logs", job_id, "--json").stdout.split("\n")
        if line
    ]
    assert [d["message"] for d in documents] == ["line 0", "line 1"]
    after = dogs("jobs", "logs", job_id, "--after", documents[0]["id"]).stdout
    assert "line 0" not in after
    assert "line 1" in after
    missing = dogs("jobs", "logs", UNKNOWN_ID, code=1)
    assert "no job and no execution" in missing.stderr


@pytest.mark.mongo
def test_follow_prints_lines_until_the_job_ends(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    job_id, execution = _running(dogs, store)

    def the_job_goes_on() -> None:
        time.sleep(0.5)
        later = datetime.now(UTC)
        store.write_log_lines([log_line(execution, job_id, 2, at=later, message="later")])
        row = HistoryRecord(
            execution_id=execution,
            job_id=job_id,
            job_name="nap",
            type=store.get_record(job_id).type,  # type: ignore[union-attr]
            priority=100,
            tries=1,
            started_at=later - timedelta(seconds=1),
            ended_at=later,
            status=HistoryStatus.SUCCESS,
            expires_at=later + timedelta(days=1),
        )
        assert store.settle_many([Settlement(job_id, execution, completed(), row)]) == [True]

    worker = threading.Thread(target=the_job_goes_on)
    worker.start()
    try:
        followed = dogs("jobs", "logs", job_id, "--follow", "--poll-interval", "200ms")
    finally:
        worker.join()
    lines = followed.stdout.splitlines()
    assert [line.split("] ", 1)[1] for line in lines if "] " in line] == [
        "line 0",
        "line 1",
        "later 2",
    ]
    assert f"-- {job_id} has ended" in followed.stderr
    ended = dogs("jobs", "show", job_id).stdout
    assert "no record" in ended


@pytest.mark.mongo
def test_a_job_without_lines(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    job_id = schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h")
    assert dogs("jobs", "logs", job_id).stdout == ""
    assert REGISTRY
