"""``dogs workflows`` (dogs_cli.workflows): bad input without a server, then list, show,
retry and cancel against the real mongod, the workflows run by a real worker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from examples import workflows as example
from typer.testing import CliRunner

from dogs_core import DogsClient
from dogs_mongo import AsyncMongoJobStore
from dogs_mongo.container import DogsContainer
from tests.cli.test_cli import assert_clean_error, invoke

UNKNOWN_ID = "01900000-0000-7000-8000-000000000000"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_help_lists_the_workflow_commands(runner: CliRunner) -> None:
    assert "workflows" in invoke(runner, "--help").stdout
    result = invoke(runner, "workflows", "--help")
    assert result.exit_code == 0, result.output
    for command in ("list", "show", "cancel", "retry"):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["workflows", "list", "--state", "done"], ["--state done", "expected one of", "failed"]),
        (["workflows", "list", "--limit", "0"], ["--limit 0", "at least 1 and at most 1000"]),
        (["workflows", "list", "--limit", "lots"], ["--limit lots", "must be an integer"]),
        (["workflows", "list", "--skip", "-1"], ["--skip -1", "at least 0"]),
        (["workflows", "show", " "], ["ID", "not an id"]),
        (["workflows", "list"], ["no MongoDB URI"]),
    ],
)
def test_input_errors(runner: CliRunner, args: list[str], fragments: list[str]) -> None:
    assert_clean_error(invoke(runner, *args, "--database", "app"), *fragments)


@pytest.fixture
def dogs(runner: CliRunner, mongodb_uri: str, mongo_database_name: str) -> Callable[..., Any]:
    env: dict[str, str | None] = {
        "DOGS_MONGODB_URI": mongodb_uri,
        "DOGS_MONGODB_DATABASE": mongo_database_name,
    }

    def call(*args: str, code: int = 0) -> Any:
        result = invoke(runner, *args, env=env)
        assert result.exit_code == code, (args, result.exit_code, result.output)
        return result

    return call


@pytest.fixture
def worker(mongodb_uri: str, mongo_database_name: str) -> Iterator[None]:
    """A real worker (the blocking facade) of the example's jobs."""
    container = DogsContainer(uri=mongodb_uri, database=mongo_database_name, driver="sync")
    workers = container.blocking_workers(example.jobs, poll_interval=0.05, workers_count=4)
    workers.start()
    try:
        yield
    finally:
        workers.stop(grace=5)
        container.close()


def start_policies(uri: str, database: str) -> list[str]:
    async def go() -> list[str]:
        store = AsyncMongoJobStore.from_uri(uri, database)
        try:
            return await example.start_policies(DogsClient(store, example.jobs))
        finally:
            await store.close()

    return anyio.run(go)


@pytest.mark.mongo
@pytest.mark.usefixtures("worker")
def test_list_show_retry_and_cancel(
    dogs: Callable[..., Any], mongodb_uri: str, mongo_database_name: str
) -> None:
    failing, skipping, continuing = start_policies(mongodb_uri, mongo_database_name)
    deadline = time.monotonic() + 30
    while True:
        listed = json.loads(dogs("workflows", "list", "--json").stdout)
        if all(item["state"] != "running" for item in listed):
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.05)
    states = {item["id"]: item["state"] for item in listed}
    assert states == {failing: "failed", skipping: "completed", continuing: "completed"}
    failed_only = json.loads(dogs("workflows", "list", "--state", "failed", "--json").stdout)
    assert [item["id"] for item in failed_only] == [failing]
    assert failed_only[0]["counts"]["skipped"] == 1

    shown = dogs("workflows", "show", skipping).stdout
    assert "state: completed" in shown
    assert "[x] index (failed)  <- fetch" in shown
    assert "[-] report (skipped)  <- parse, index" in shown
    assert "cannot index https://broken/skip" in shown
    steps = json.loads(dogs("workflows", "show", continuing, "--json").stdout)["steps"]
    report = next(step for step in steps if step["name"] == "report")
    assert report["state"] == "succeeded"
    assert "index=failed" in report["outcome"]["result"]

    retried = dogs("workflows", "retry", failing)
    assert retried.stdout.startswith(f"Retried workflow {failing}: 2 steps to run again")
    not_cancelled = dogs("workflows", "cancel", skipping, code=1)
    assert f"Not cancelled: workflow {skipping} is completed" in not_cancelled.stdout
    assert "not found" in dogs("workflows", "show", UNKNOWN_ID, code=1).stderr
