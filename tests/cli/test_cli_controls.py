"""``dogs pause``, ``dogs resume`` and what ``dogs status`` shows of the fleet controls
(dogs_cli.controls): bad input without a server, then the commands against the real
mongod, with a real worker that leaves a paused name alone until it is resumed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from typer.testing import CliRunner

from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from tests.cli import cli_jobs
from tests.cli.test_cli import REGISTRY, assert_clean_error, invoke


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# ----------------------------------------------------------------------------------------------
# Without a server
# ----------------------------------------------------------------------------------------------


def test_help_lists_pause_and_resume(runner: CliRunner) -> None:
    top = invoke(runner, "--help")
    assert top.exit_code == 0
    for command in ("pause", "resume"):
        assert command in top.stdout
        result = invoke(runner, command, "--help")
        assert result.exit_code == 0, result.output
        assert "--all" in result.stdout
        assert "--controls-collection" in result.stdout
    assert "--controls-collection" in invoke(runner, "status", "--help").stdout


@pytest.mark.parametrize("command", ["pause", "resume"])
@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ([], ["pass a job NAME, or --all to {command} every job"]),
        (["nap", "--all"], ["pass a job NAME or --all, not both"]),
        (["*"], ["NAME '*': pass --all to {command} every job"]),
        ([" "], ["NAME ' ': must not be empty"]),
        (["nap"], ["no MongoDB URI"]),
    ],
)
def test_input_errors(
    runner: CliRunner, command: str, args: list[str], fragments: list[str]
) -> None:
    result = invoke(runner, command, *args, "--database", "app")
    assert_clean_error(result, *(fragment.format(command=command) for fragment in fragments))


# ----------------------------------------------------------------------------------------------
# Against the real mongod
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def db_env(mongodb_uri: str, mongo_database_name: str) -> dict[str, str | None]:
    return {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": mongo_database_name}


@pytest.fixture
def dogs(runner: CliRunner, db_env: dict[str, str | None]) -> Callable[..., Any]:
    """``dogs(*args, code=0)``: run the command against the test database, check its exit."""

    def call(*args: str, code: int = 0) -> Any:
        result = invoke(runner, *args, env=db_env)
        assert result.exit_code == code, (args, result.exit_code, result.output)
        return result

    return call


@pytest.fixture
def store(
    sync_mongo_client: MongoClient[dict[str, Any]], mongo_database_name: str
) -> MongoJobStore:
    return MongoJobStore(sync_mongo_client, mongo_database_name)


def status_rows(dogs: Callable[..., Any], *args: str) -> dict[str, Any]:
    return {row["job_name"]: row for row in json.loads(dogs("status", "--json", *args).stdout)}


def schedule(dogs: Callable[..., Any], job: str, *args: str) -> str:
    result = dogs("schedule", REGISTRY, job, *args)
    assert result.stdout.startswith("Scheduled "), result.stdout
    return str(result.stdout.split()[1])


@pytest.mark.mongo
def test_pause_and_resume_a_name(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    schedule(dogs, "nap", "--run-in", "1h")
    paused = dogs("pause", "nap")
    assert paused.stdout.strip() == (
        "Paused nap: Python workers stop claiming it at once (within one poll interval "
        "without change streams); running executions finish."
    )
    assert "Note:" not in paused.stderr
    assert store.paused_names() == frozenset({"nap"})
    assert dogs("pause", "nap").stdout.strip() == "nap was already paused."

    table = dogs("status").stdout
    assert "Paused" in table
    assert "Every job is paused" not in table
    assert status_rows(dogs)["nap"]["paused"] is True

    assert dogs("resume", "nap").stdout.strip() == "Resumed nap."
    assert store.paused_names() == frozenset()
    assert dogs("resume", "nap").stdout.strip() == "nap was not paused."
    assert "Paused" not in dogs("status").stdout, "no column while nothing is paused"
    assert status_rows(dogs)["nap"]["paused"] is False


@pytest.mark.mongo
def test_a_name_without_records_is_refused_unless_forced(dogs: Callable[..., Any]) -> None:
    """Issue 29: ``dogs pause send_newslettr`` (a typo) paused a name no worker knows, exit 0."""
    schedule(dogs, "nap", "--run-in", "1h")
    refused = dogs("pause", "napp", code=2)
    assert "Error: NAME napp: no job of that name has records or history" in refused.stderr
    assert "did you mean 'nap'?" in refused.stderr
    assert "napp" not in status_rows(dogs)
    result = dogs("pause", "napp", "--force")
    assert result.stdout.startswith("Paused napp: ")
    assert "Note: no job records named 'napp' right now." in result.stderr
    rows = status_rows(dogs)
    assert rows["napp"]["paused"] is True, "a paused name gets a row of its own"
    assert rows["napp"]["due"] == 0
    assert "napp" in dogs("status").stdout


@pytest.mark.mongo
def test_the_pause_of_every_job_is_a_pause_of_its_own(
    dogs: Callable[..., Any], store: MongoJobStore
) -> None:
    schedule(dogs, "nap", "--run-in", "1h")
    schedule(dogs, "greet", "--params", '{"name": "Ada"}', "--run-in", "1h")
    dogs("pause", "greet")
    every = dogs("pause", "--all")
    assert every.stdout.startswith("Paused every job: Python workers stop claiming at once")
    assert dogs("pause", "--all").stdout.strip() == "Every job was already paused."
    assert store.paused_names() == frozenset({"*", "greet"})

    table = dogs("status").stdout
    assert table.startswith("Every job is paused (dogs resume --all lifts it).")
    rows = status_rows(dogs)
    assert rows["nap"]["paused"] is True, "under the pause of every job"
    assert rows["greet"]["paused"] is True
    assert "*" not in rows

    under = dogs("resume", "nap").stdout
    assert under.splitlines() == [
        "nap was not paused.",
        "Every job is still paused, nap too (dogs resume --all).",
    ]
    lifted = dogs("resume", "--all").stdout
    assert lifted.splitlines() == [
        "Resumed every job.",
        "Still paused on their own: greet (dogs resume NAME).",
    ]
    assert store.paused_names() == frozenset({"greet"})
    assert dogs("resume", "--all").stdout.startswith("There was no pause of every job.")
    rows = status_rows(dogs)
    assert (rows["nap"]["paused"], rows["greet"]["paused"]) == (False, True)


@pytest.mark.mongo
def test_status_shows_the_slots_held(dogs: Callable[..., Any], store: MongoJobStore) -> None:
    schedule(dogs, "nap", "--run-in", "1h")
    assert "Slots held" not in dogs("status").stdout, "no column while no slot is held"
    assert status_rows(dogs)["nap"]["held_slots"] == 0
    now = datetime.now(UTC)
    for holder in ("h1", "h2"):
        index = store.acquire_slot(
            "render", "", limit=3, holder=holder, until=now + timedelta(minutes=1), now=now
        )
        assert index is not None
    store.acquire_slot(
        "nap", "k", limit=1, holder="h3", until=now - timedelta(seconds=1), now=now
    )  # already lapsed: not held

    rows = status_rows(dogs)
    assert rows["render"]["held_slots"] == 2, "a name holding slots gets a row"
    assert rows["nap"]["held_slots"] == 0
    table = dogs("status").stdout
    assert "Slots held" in table
    line = next(line for line in table.splitlines() if "render" in line)
    assert line.rstrip("│ ").endswith("2")
    store.release_slot("render", "", 0, holder="h1")
    assert status_rows(dogs)["render"]["held_slots"] == 1


@pytest.mark.mongo
def test_the_controls_collection_option(
    dogs: Callable[..., Any],
    sync_mongo_client: MongoClient[dict[str, Any]],
    mongo_database_name: str,
) -> None:
    schedule(dogs, "nap", "--run-in", "1h")
    dogs("pause", "nap", "--controls-collection", "my_controls")
    controls = sync_mongo_client[mongo_database_name]["my_controls"]
    assert controls.count_documents({"kind": "pause", "jobName": "nap"}) == 1
    assert status_rows(dogs)["nap"]["paused"] is False, "the default collection has no pause"
    assert status_rows(dogs, "--controls-collection", "my_controls")["nap"]["paused"] is True
    assert dogs("resume", "nap").stdout.strip() == "nap was not paused."
    dogs("resume", "nap", "--controls-collection", "my_controls")
    assert controls.count_documents({"kind": "pause"}) == 0


@pytest.fixture
def worker(mongodb_uri: str, mongo_database_name: str) -> Iterator[None]:
    """A real worker (the blocking facade) for the registry's jobs, polling every 50 ms."""
    container = DogsContainer(uri=mongodb_uri, database=mongo_database_name, driver="sync")
    workers = container.blocking_workers(cli_jobs.jobs, poll_interval=0.05, workers_count=2)
    workers.start()
    try:
        yield
    finally:
        workers.stop(grace=5)
        container.close()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.mongo
def test_a_worker_leaves_a_paused_name_alone_until_it_is_resumed(
    dogs: Callable[..., Any],
    store: MongoJobStore,
    request: pytest.FixtureRequest,
) -> None:
    dogs("pause", "greet", "--force")  # before its first record
    greeting = schedule(dogs, "greet", "--params", '{"name": "Ada"}')
    # The worker reads the pauses before its first claim.
    request.getfixturevalue("worker")
    # A job of another name, due after the greeting: once it has run, the worker has claimed
    # past the greeting, which it would have taken first were it not paused.
    canary = schedule(dogs, "nap")
    wait_until(lambda: store.get_record(canary) is None, "the other job to run")
    record = store.get_record(greeting)
    assert record is not None
    assert (record.tries or 0, record.locked_until) == (0, None), "never claimed while paused"
    assert status_rows(dogs)["greet"]["due"] == 1

    dogs("resume", "greet")
    wait_until(lambda: store.get_record(greeting) is None, "the resumed job to run")
    rows = json.loads(dogs("history", "--job-id", greeting, "--json").stdout)
    assert [(row["status"], row["tries"]) for row in rows] == [("success", 1)]
