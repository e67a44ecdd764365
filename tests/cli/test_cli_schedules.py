"""``dogs schedules`` (dogs_cli.schedules), ``dogs schedule --tag --start-before`` and
``dogs jobs list --tag`` against the real mongod: a runtime schedule set (twice: idempotent),
listed, shown, paused, resumed and deleted; the errors of each, with their exit codes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient
from typer.testing import CliRunner

from dogs_mongo import MongoJobStore
from dogs_mongo.container import DogsContainer
from dogs_mongo.queries.registry import DEFAULT_WORKERS_COLLECTION
from tests.cli import cli_jobs
from tests.cli.test_cli import REGISTRY, assert_clean_error, invoke

pytestmark = pytest.mark.mongo


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def env(
    mongodb_uri: str, sync_mongo_client: MongoClient[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    database = f"dogs_cli_schedules_{uuid.uuid4().hex[:10]}"
    try:
        yield {"DOGS_MONGODB_URI": mongodb_uri, "DOGS_MONGODB_DATABASE": database}
    finally:
        sync_mongo_client.drop_database(database)


def test_a_schedule_from_set_to_delete(runner: CliRunner, env: dict[str, Any]) -> None:
    set_args = ["schedules", "set", "greet-ada", "greet", "--every", "1h", "--params",
                '{"name": "ada"}', "--registry", REGISTRY]  # fmt: skip
    created = invoke(runner, *set_args, env=env)
    assert created.exit_code == 0, created.output
    assert created.stdout.startswith("Created greet-ada: every 1:00:00 of greet, next run ")
    again = invoke(runner, *set_args, env=env)
    assert again.stdout.startswith("Unchanged greet-ada")
    listed = json.loads(invoke(runner, "schedules", "list", "--json", env=env).stdout)
    assert [(s["id"], s["source"], s["job"], s["params"]) for s in listed] == [
        ("greet-ada", "runtime", "greet", {"name": "ada"})
    ]
    assert "greet-ada" in invoke(runner, "schedules", "list", env=env).stdout
    paused = invoke(runner, "schedules", "pause", "greet-ada", env=env)
    assert paused.stdout.startswith("Paused greet-ada")
    shown = json.loads(invoke(runner, "schedules", "show", "greet-ada", "--json", env=env).stdout)
    assert (shown["paused"], shown["next_run_at"]) == (True, None)
    resumed = invoke(runner, "schedules", "resume", "greet-ada", env=env)
    assert resumed.stdout.startswith("Resumed greet-ada: next run ")
    assert (
        invoke(runner, "schedules", "delete", "greet-ada", env=env).stdout == "Deleted greet-ada.\n"
    )
    gone = invoke(runner, "schedules", "delete", "greet-ada", env=env)
    assert (gone.exit_code, gone.stdout) == (1, "Not found: no schedule greet-ada\n")
    missing = invoke(runner, "schedules", "pause", "greet-ada", env=env)
    assert (missing.exit_code, missing.stdout) == (1, "no schedule 'greet-ada'\n")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--every", "0"], "--every 0: must be greater than zero"),
        (["--cron", "0 25 * * *", "--timezone", "UTC"], "cron"),
        (["--cron", "0 3 * * *"], "timezone"),
        (["--every", "1h", "--params", "[1]"], "must be a JSON object"),
        (["--every", "1h", "--params", "{"], "not JSON"),
        (["--every", "1h", "--misfire", "twice"], "misfire"),
        (["--every", "soon"], "--every"),
    ],
)
def test_bad_sets_are_one_line(
    runner: CliRunner, env: dict[str, Any], args: list[str], fragment: str
) -> None:
    result = invoke(runner, "schedules", "set", "s", "greet", *args, env=env)
    assert_clean_error(result, fragment)


def test_a_job_name_no_running_worker_runs_is_refused(
    runner: CliRunner,
    env: dict[str, Any],
    mongodb_uri: str,
    sync_mongo_client: MongoClient[dict[str, Any]],
) -> None:
    """Without --registry the name is checked against the running workers' registry: a typo
    would leave a schedule due forever. With no worker registered, a warning says so."""
    unchecked = invoke(runner, "schedules", "set", "s0", "gret", "--every", "1h", env=env)
    assert unchecked.exit_code == 0, unchecked.output
    assert "no running worker is registered, so the job name gret was not checked" in (
        unchecked.stderr
    )
    container = DogsContainer(uri=mongodb_uri, database=env["DOGS_MONGODB_DATABASE"], driver="sync")
    workers = container.blocking_workers(cli_jobs.jobs, poll_interval=0.05)
    workers.start()
    try:
        deadline = time.monotonic() + 60  # a bound on waiting for its first beat
        registry = sync_mongo_client[env["DOGS_MONGODB_DATABASE"]][DEFAULT_WORKERS_COLLECTION]
        while registry.count_documents({}) == 0:
            assert time.monotonic() < deadline, "the worker never registered"
            time.sleep(0.05)
        typo = invoke(runner, "schedules", "set", "s1", "gret", "--every", "1h", env=env)
        assert_clean_error(typo, "JOB gret: no running worker runs this job", "greet")
        known = invoke(runner, "schedules", "set", "s2", "greet", "--every", "1h", env=env)
        assert known.exit_code == 0, known.output
        assert "Warning" not in known.stderr
        assert known.stdout.startswith("Created s2")
        by_code = ["schedules", "set", "s3", "greet", "--every", "1h", "--registry", REGISTRY,
                   "--params", '{"name": "ada"}']  # fmt: skip
        checked = invoke(runner, *by_code, env=env)
        assert checked.exit_code == 0, checked.output
    finally:
        workers.stop(grace=0)
        container.close()
    listed = json.loads(invoke(runner, "schedules", "list", "--json", env=env).stdout)
    assert sorted(s["id"] for s in listed if s["source"] == "runtime") == ["s0", "s2", "s3"]


def test_tags_and_a_deadline_from_the_shell(runner: CliRunner, env: dict[str, Any]) -> None:
    scheduled = invoke(runner, "schedule", REGISTRY, "greet", "--params", '{"name": "bo"}',
                       "--run-in", "1h", "--start-before", "2h", "--tag", "tenant:acme",
                       "--tag", "vip", env=env)  # fmt: skip
    assert scheduled.exit_code == 0, scheduled.output
    job_id = scheduled.stdout.split()[1]
    page = json.loads(invoke(runner, "jobs", "list", "--tag", "vip", "--json", env=env).stdout)
    assert [job["id"] for job in page["jobs"]] == [job_id]
    none = json.loads(invoke(runner, "jobs", "list", "--tag", "other", "--json", env=env).stdout)
    assert none["jobs"] == []
    # a tag with a search (params, owner, creation time): both must hold
    searched = invoke(runner, "jobs", "list", "--tag", "vip", "--param", "name=bo", "--json",
                      env=env)  # fmt: skip
    assert [job["id"] for job in json.loads(searched.stdout)["jobs"]] == [job_id]
    other = invoke(runner, "jobs", "list", "--tag", "vip", "--param", "name=al", "--json", env=env)
    assert json.loads(other.stdout)["jobs"] == []
    bad = invoke(runner, "schedule", REGISTRY, "greet", "--params", '{"name": "x"}', "--tag",
                 "$x", env=env)  # fmt: skip
    assert_clean_error(bad, "--tag[0]")


def test_a_code_jobs_rule_shows_with_the_registry(
    runner: CliRunner, env: dict[str, Any], sync_mongo_client: MongoClient[dict[str, Any]]
) -> None:
    store = MongoJobStore(sync_mongo_client, env["DOGS_MONGODB_DATABASE"])
    store.setup()
    store.ensure_recurrent("hourly", priority=1000, partition=0, now=datetime.now(UTC))
    bare = json.loads(invoke(runner, "schedules", "list", "--json", env=env).stdout)
    assert [(s["id"], s["source"], s["rule"]) for s in bare] == [("hourly", "code", None)]
    with_code = invoke(runner, "schedules", "list", "--json", "--registry", REGISTRY, env=env)
    assert [s["rule"] for s in json.loads(with_code.stdout)] == ["every 1:00:00"]
    shown = invoke(runner, "schedules", "show", "hourly", "--registry", REGISTRY, env=env)
    assert "rule         every 1:00:00\n" in shown.stdout
