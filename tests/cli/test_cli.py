"""The ``dogs`` command (dogs_cli): errors without a server, the commands against the real
mongod with typer's CliRunner, and the SIGTERM drain of ``dogs worker`` in a subprocess."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from typer.testing import CliRunner

from dogs_cli import app
from dogs_cli.common import load_registry
from dogs_cli.output import format_age
from dogs_core import HistoryStatus, Jobs, Scheduled
from dogs_core.runtime.plumbing.settings import WORKER_OPTIONS
from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from dogs_mongo.mongod import start_local_mongod

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "tests.cli.cli_jobs:jobs"
UNREACHABLE = "mongodb://127.0.0.1:1/?directConnection=true"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str, env: dict[str, str | None] | None = None) -> Any:
    """Run ``dogs *args`` in process, without the caller's Dogs environment variables."""
    environment: dict[str, str | None] = {
        "DOGS_MONGODB_URI": None,
        "DOGS_MONGODB_DATABASE": None,
        "DOGS_N_PARTITIONS": None,
    }
    environment.update(env or {})
    return runner.invoke(app, list(args), env=environment)


def assert_clean_error(result: Any, *fragments: str, code: int = 2) -> None:
    """Exit ``code``, one ``Error:`` line on stderr, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


# ----------------------------------------------------------------------------------------------
# Without a server
# ----------------------------------------------------------------------------------------------


def test_help_lists_the_commands(runner: CliRunner) -> None:
    result = invoke(runner, "--help")
    assert result.exit_code == 0
    for command in ("worker", "schedule", "status", "unlock-all", "mongod"):
        assert command in result.stdout


def test_version_is_the_installed_package_version(runner: CliRunner) -> None:
    result = invoke(runner, "--version")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"dogs {importlib.metadata.version('dogs-py')}\n"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["tests.no_such_module:jobs", "nap"], ["cannot import", "tests.no_such_module"]),
        (["tests.cli.cli_jobs:missing", "nap"], ["has no attribute", "missing"]),
        (["tests.cli.cli_jobs:not_a_registry", "nap"], ["not a dogs_core.Jobs registry", "int"]),
        (["tests.cli.cli_jobs:", "nap"], ["expected MODULE:REGISTRY"]),
        ([REGISTRY, "no_such_job"], ["unknown job name", "no_such_job", "nap"]),
        ([REGISTRY, "hourly"], ["recurrent job"]),
        ([REGISTRY, "nap", "--params", "{not json"], ["--params is not valid JSON"]),
        ([REGISTRY, "nap", "--params", "[1, 2]"], ["params"]),
        ([REGISTRY, "greet", "--params", '{"nom": "x"}'], ["Greeting"]),
        ([REGISTRY, "nap", "--run-in", "5 parsecs"], ["--run-in", "cannot parse the duration"]),
        ([REGISTRY, "nap", "--run-in", "-5"], ["--run-in", "negative"]),
        ([REGISTRY, "nap", "--run-at", "tomorrow"], ["--run-at", "ISO 8601"]),
        ([REGISTRY, "nap", "--run-at", "2030-01-01T09:00"], ["--run-at", "timezone"]),
        ([REGISTRY, "nap", "--run-in", "5m", "--run-at", "2030-01-01T09:00Z"], ["not both"]),
        ([REGISTRY, "nap"], ["no MongoDB URI", "DOGS_MONGODB_URI"]),
        ([REGISTRY, "nap", "--uri", "http://example.com"], ["uri=", "mongodb://"]),
        ([REGISTRY, "nap", "--uri", UNREACHABLE, "--timeout", "0"], ["--timeout"]),
    ],
)
def test_schedule_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, "schedule", *args), *fragments)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["tests.no_such_module:jobs"], ["cannot import"]),
        (["tests.cli.cli_jobs:empty"], ["has no jobs"]),
        ([REGISTRY, "--workers-count", "0"], ["--workers-count 0: must be at least 1"]),
        ([REGISTRY, "-c", "many"], ["--workers-count many: must be an integer"]),
        ([REGISTRY, "--poll-interval", "often"], ["--poll-interval"]),
        ([REGISTRY, "--lock-time", "-3"], ["--lock-time -3: a duration cannot be negative"]),
        ([REGISTRY, "--lock-time", "0"], ["--lock-time 0: must be greater than zero"]),
        ([REGISTRY, "--max-tries", "many"], ["--max-tries"]),
        ([REGISTRY, "--max-tries", "0"], ["--max-tries 0: must be at least 1"]),
        ([REGISTRY, "--grace", "forever"], ["--grace"]),
        ([REGISTRY, "--n-partitions", "0"], ["--n-partitions 0: must be at least 1"]),
        ([REGISTRY, "--uri", UNREACHABLE, "--timeout", "0"], ["--timeout 0.0: must be greater"]),
        ([REGISTRY], ["no MongoDB URI"]),
    ],
)
def test_worker_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    result = invoke(runner, "worker", *args, "--database", "app")
    assert_clean_error(result, *fragments)
    for field in ("default_lock_time=", "workers_count=", "max_tries=", "n_partitions="):
        assert field not in result.stderr, "a CLI error names the flag, not the option"


def test_schedule_names_the_partition_flag(runner: CliRunner) -> None:
    result = invoke(
        runner, "schedule", REGISTRY, "nap", "--n-partitions", "0", "--uri", UNREACHABLE
    )
    assert_clean_error(result, "--n-partitions 0: must be at least 1")


def test_the_worker_flags_come_from_the_worker_settings_table(runner: CliRunner) -> None:
    result = invoke(runner, "worker", "--help")
    assert result.exit_code == 0, result.output
    flagged = [option for option in WORKER_OPTIONS if option.flag is not None]
    assert {option.name for option in flagged} >= {
        "workers_count",
        "poll_interval",
        "default_lock_time",
        "max_tries",
        "n_partitions",
    }
    for option in flagged:
        assert option.flag in result.stdout, option
    wide = invoke(runner, "worker", "--help", env={"COLUMNS": "300"}).stdout
    assert "needs the dogs-py[prometheus] extra" in wide, "Rich must not eat '[prometheus]'"


@pytest.mark.parametrize(
    "args",
    [
        ["schedule", REGISTRY, "nap", "--database", "app"],
        ["status", "--database", "app"],
        ["unlock-all", "--yes", "--database", "app"],
    ],
)
def test_an_unreachable_server_is_a_clean_error(runner: CliRunner, args: list[str]) -> None:
    started = time.monotonic()
    result = invoke(runner, *args, "--uri", UNREACHABLE, "--timeout", "0.2")
    assert_clean_error(result, "cannot reach MongoDB", "127.0.0.1:1", "--timeout")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("driver", ["async", "sync"])
def test_a_worker_waits_for_an_unreachable_server_then_exits_2(
    runner: CliRunner, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Started during an outage, the worker keeps trying for --startup-timeout (a WARNING line
    per attempt), then exits 2 saying why."""
    caplog.set_level(logging.WARNING, logger="dogs")
    args = ["worker", REGISTRY, "--database", "app", "--driver", driver, "--uri", UNREACHABLE]
    result = invoke(runner, *args, "--timeout", "0.2", "--startup-timeout", "2s")
    assert_clean_error(
        result, "cannot reach MongoDB", "127.0.0.1:1", "within 2s of starting (--startup-timeout)"
    )
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("waiting up to 2s for it (--startup-timeout)" in line for line in warned), warned
    retries = [line for line in warned if "workers starting: up to 2s" in line]
    assert len(retries) >= 2, warned  # tried again, not given up at the first failure


def test_a_bad_startup_timeout_names_its_flag(runner: CliRunner) -> None:
    result = invoke(runner, "worker", REGISTRY, "--database", "app", "--startup-timeout", "soon")
    assert_clean_error(result, "--startup-timeout")


def test_the_uri_password_is_not_printed(runner: CliRunner) -> None:
    uri = "mongodb://app:s3cret@127.0.0.1:1/?directConnection=true"
    result = invoke(runner, "status", "--database", "app", "--uri", uri, "--timeout", "0.2")
    assert_clean_error(result, "app:***@")
    assert "s3cret" not in result.output


def test_load_registry_forms() -> None:
    from tests.cli import cli_jobs

    assert load_registry("tests.cli.cli_jobs:jobs") is cli_jobs.jobs
    assert load_registry("tests.cli.cli_jobs") is cli_jobs.jobs, "MODULE alone means MODULE:jobs"
    assert isinstance(load_registry(" tests.cli.cli_jobs:empty "), Jobs)


def test_format_age() -> None:
    assert format_age(timedelta(seconds=-3)) == "0s"
    assert format_age(timedelta(seconds=45)) == "45s"
    assert format_age(timedelta(minutes=3, seconds=12)) == "3m 12s"
    assert format_age(timedelta(hours=2, minutes=5, seconds=9)) == "2h 5m"
    assert format_age(timedelta(days=3, hours=4, minutes=1)) == "3d 4h"


# ----------------------------------------------------------------------------------------------
# Against the real mongod
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def store(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, mongo_database_name)


@pytest.mark.mongo
def test_schedule_status_and_unlock_all(
    runner: CliRunner, db_env: dict[str, str | None], store: MongoJobStore
) -> None:
    result = invoke(
        runner, "schedule", REGISTRY, "nap", "--params", '{"seconds": 1}', "--unique-key", "k1",
        env=db_env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Scheduled ")
    job_id = result.stdout.split()[1]
    record = store.get_record(job_id)
    assert record is not None
    assert record.job_name == "nap"
    assert record.params == {"seconds": 1}

    again = invoke(runner, "schedule", REGISTRY, "nap", "--unique-key", "k1", env=db_env)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"Duplicate {job_id}")

    later = invoke(
        runner, "schedule", REGISTRY, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h",
        "--priority", "7", env=db_env,
    )  # fmt: skip
    assert later.exit_code == 0, later.output
    greet_record = store.get_record(later.stdout.split()[1])
    assert greet_record is not None
    assert greet_record.priority == 7
    assert greet_record.params == {"name": "Ada"}
    in_an_hour = datetime.now(UTC) + timedelta(hours=1)
    assert abs((greet_record.next_run_at - in_an_hour).total_seconds()) < 60

    at = invoke(
        runner, "schedule", REGISTRY, "nap", "--run-at", "2020-01-01T00:00:00+00:00", env=db_env
    )
    assert at.exit_code == 0, at.output

    table = invoke(runner, "status", env=db_env)
    assert table.exit_code == 0, table.output
    assert "nap" in table.stdout
    assert "greet" in table.stdout
    assert "Oldest due" in table.stdout

    as_json = invoke(runner, "status", "--json", env=db_env)
    assert as_json.exit_code == 0, as_json.output
    rows = {row["job_name"]: row for row in json.loads(as_json.stdout)}
    assert rows["nap"]["due"] == 2
    assert rows["greet"]["scheduled_later"] == 1
    assert rows["nap"]["oldest_due_at"].startswith("2020-01-01T00:00:00")
    assert rows["nap"]["oldest_due_age_seconds"] > 3 * 365 * 86400
    assert rows["greet"]["oldest_due_at"] is None

    # A lock to release: claim the record as a worker would.
    claimed = store.claim(_claim_request("nap"))
    assert claimed is not None
    refused = runner.invoke(app, ["unlock-all"], input="n\n", env=db_env)
    assert refused.exit_code == 1
    record = store.get_record(claimed.job_id)
    assert record is not None
    assert record.locked_until is not None
    assert record.locked_until > datetime.now(UTC)
    confirmed = runner.invoke(app, ["unlock-all"], input="y\n", env=db_env)
    assert confirmed.exit_code == 0, confirmed.output
    assert "Unlocked 1 job record(s)." in confirmed.stdout
    record = store.get_record(claimed.job_id)
    assert record is not None
    assert record.locked_until is None or record.locked_until <= datetime.now(UTC)
    assert "Unlocked 0" in invoke(runner, "unlock-all", "--yes", env=db_env).stdout


@pytest.mark.mongo
def test_status_of_an_empty_database(runner: CliRunner, db_env: dict[str, str | None]) -> None:
    result = invoke(runner, "status", "--driver", "sync", env=db_env)
    assert result.exit_code == 0, result.output
    assert "No job records" in result.stdout
    assert json.loads(invoke(runner, "status", "--json", env=db_env).stdout) == []


@pytest.mark.mongo
def test_a_database_is_required(runner: CliRunner, mongodb_uri: str) -> None:
    # The session mongod's URI names no database.
    result = invoke(runner, "status", env={"DOGS_MONGODB_URI": mongodb_uri})
    assert_clean_error(result, "database")


def _claim_request(job_name: str) -> Any:
    from dogs_core.domain.records import ClaimRequest
    from dogs_core.ids import new_execution_id

    now = datetime.now(UTC)
    return ClaimRequest(
        job_names=(job_name,),
        partition=0,
        hint="byJobName",
        now=now,
        locked_until=now + timedelta(minutes=5),
        lock_id=new_execution_id(),
    )


# ----------------------------------------------------------------------------------------------
# Subprocesses: the SIGTERM drain of `dogs worker`, and `dogs mongod`
# ----------------------------------------------------------------------------------------------


class Process:
    """A ``python -m dogs_cli ...`` child whose stderr (or stdout) lines are read by a
    thread, so the test can wait for a line with a deadline."""

    def __init__(self, *args: str, watch: str = "stderr") -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("DOGS_")}
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "dogs_cli", *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if watch == "stdout" else subprocess.DEVNULL,
            stderr=subprocess.PIPE if watch == "stderr" else subprocess.DEVNULL,
            text=True,
        )
        stream = self.popen.stdout if watch == "stdout" else self.popen.stderr
        assert stream is not None
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, fragment: str, timeout: float = 15.0) -> str:
        for seen in self.lines:
            if fragment in seen:
                return seen
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no line with {fragment!r} in time; output:\n" + self.text())

    def text(self) -> str:
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.lines.append(line)
        return "\n".join(self.lines)

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int:
        code = self.popen.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


def _schedule_naps(uri: str, database: str, *naps: tuple[str, float]) -> dict[str, str]:
    from tests.cli.cli_jobs import jobs

    container = DogsContainer(uri=uri, database=database, driver="sync")
    try:
        with container.blocking_client(jobs) as client:
            ids = {}
            for tag, seconds in naps:
                outcome = client.schedule("nap", {"tag": tag, "seconds": seconds})
                assert isinstance(outcome, Scheduled)
                ids[tag] = outcome.id
            return ids
    finally:
        container.close()


def _worker_args(uri: str, database: str, grace: str) -> list[str]:
    return [
        "worker", REGISTRY, "--uri", uri, "--database", database, "--poll-interval", "0.1",
        "--grace", grace, "--workers-count", "4", "--log-level", "INFO",
    ]  # fmt: skip


@pytest.mark.mongo
@pytest.mark.slow
@pytest.mark.mongo
def test_a_worker_started_during_an_outage_starts_once_the_server_is_back(
    processes: list[Process],
) -> None:
    """The issue's case: the server is down when ``dogs worker`` starts (nothing listens on
    its port yet); the worker waits (a WARNING per attempt) instead of exiting 2, and starts
    once a mongod comes up on that port."""
    with socket.socket() as probe:  # a port nothing listens on, for now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
    worker = Process(
        "worker", REGISTRY, "--uri", uri, "--database", "dogs_outage", "--timeout", "0.5",
        "--startup-timeout", "300s", "--poll-interval", "0.2",
    )  # fmt: skip
    processes.append(worker)
    worker.wait_for("waiting up to 300s for it (--startup-timeout)", timeout=60)
    worker.wait_for("workers starting: up to 300s", timeout=60)  # retried, not given up
    with start_local_mongod(port=port):
        worker.wait_for("workers started", timeout=120)
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, worker.text()
    assert not [line for line in worker.text().splitlines() if line.startswith("Error: ")]


def test_sigterm_drains_then_exits_zero(
    mongodb_uri: str, mongo_database_name: str, store: MongoJobStore, processes: list[Process]
) -> None:
    ids = _schedule_naps(mongodb_uri, mongo_database_name, ("short", 1.0), ("long", 60.0))
    worker = Process(*_worker_args(mongodb_uri, mongo_database_name, grace="1.5s"), "--log-jobs")
    processes.append(worker)
    worker.wait_for("workers started")
    worker.wait_for("job short started")
    worker.wait_for("job long started")
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    worker.wait_for("draining")
    assert worker.wait(timeout=15) == 0, worker.text()
    assert time.monotonic() - signalled < 10
    output = worker.text()
    assert "job short finished" in output, "a job that ends within the grace period finishes"
    assert "job long finished" not in output
    # --log-jobs: a line as each job starts and ends, naming the job and its outcome.
    assert f"started nap ({ids['short']}), try 1" in output
    assert f"nap ({ids['short']}) succeeded in" in output
    assert f"nap ({ids['long']}) cancelled in" in output
    # The short job completed: its record is gone and its history says success.
    assert store.get_record(ids["short"]) is None
    history = store.read_history("nap")
    assert [row.job_id for row in history if row.status is HistoryStatus.SUCCESS] == [ids["short"]]
    # The long one was cancelled after the grace period and its lock released at once.
    long_record = store.get_record(ids["long"])
    assert long_record is not None
    assert long_record.locked_until is not None
    assert long_record.locked_until <= datetime.now(UTC)


@pytest.mark.mongo
@pytest.mark.slow
def test_a_second_sigterm_exits_at_once(
    mongodb_uri: str, mongo_database_name: str, store: MongoJobStore, processes: list[Process]
) -> None:
    ids = _schedule_naps(mongodb_uri, mongo_database_name, ("long", 60.0))
    worker = Process(*_worker_args(mongodb_uri, mongo_database_name, grace="60s"))
    processes.append(worker)
    worker.wait_for("job long started")
    worker.signal(signal.SIGTERM)
    worker.wait_for("draining")
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.wait(timeout=10)
    assert code != 0
    assert time.monotonic() - signalled < 5
    assert "exiting at once" in worker.text()
    record = store.get_record(ids["long"])
    assert record is not None
    assert record.locked_until is not None
    assert record.locked_until > datetime.now(UTC), "the lock is left to expire, as after a crash"


@pytest.mark.mongo
@pytest.mark.slow
def test_dogs_mongod_serves_until_interrupted(processes: list[Process]) -> None:
    server = Process("mongod", watch="stdout")
    processes.append(server)
    line = server.wait_for("export DOGS_MONGODB_URI=", timeout=60)
    uri = line.split("=", 1)[1].strip("'")
    server.wait_for("Press Ctrl-C to stop.")
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
    with client:
        assert client.admin.command("hello")["isWritablePrimary"]
    server.signal(signal.SIGINT)
    assert server.wait(timeout=30) == 0, server.text()
    assert "mongod stopped." in server.text()
