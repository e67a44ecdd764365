"""``dogs worker --health-port`` against a mongod of its own, stopped under the running worker
and started again: /readyz turns 503 with the reason and back to 200 once the change feed has
reopened, /healthz stays 200 throughout; a port in use ends the command naming the flag."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dogs_mongo.mongod import start_local_mongod

pytestmark = [pytest.mark.mongo, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def probe(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def until(port: int, path: str, wanted: Callable[[int, dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 40
    while True:
        status, body = probe(port, path)
        if wanted(status, body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} still answers {status} {body}")
        time.sleep(0.1)


def test_readiness_follows_mongod_going_away_and_coming_back(tmp_path: Path) -> None:
    from tests.cli.test_cli import Process

    mongod = start_local_mongod(tmp_path / "db")  # kept data: restarted on the same port
    port = free_port()
    worker = Process(
        *("worker", "tests.cli.cli_jobs:jobs", "--uri", mongod.uri, "--database", "health"),
        *("--timeout", "1", "--poll-interval", "0.2", "--health-port", str(port)),
    )
    try:
        worker.wait_for("serving /healthz and /readyz")
        ready = until(port, "/readyz", lambda status, _: status == 200)
        assert ready == {
            "status": "ok",
            "reason": "claiming",
            "phase": "running",
            "change_feed": "open",
            "store": "answering",
        }
        mongod.stop()
        down = until(port, "/readyz", lambda status, _: status == 503)
        assert down["store"] == "unreachable", down
        assert down["reason"].startswith("the database "), down
        status, alive = probe(port, "/healthz")
        assert (status, alive["status"], alive["phase"]) == (200, "ok", "running")

        mongod = start_local_mongod(tmp_path / "db", port=mongod.port)
        back = until(port, "/readyz", lambda status, _: status == 200)
        assert back["change_feed"] == "open"
        worker.signal(2)
        assert worker.wait(timeout=30) == 0, worker.text()
    finally:
        worker.popen.kill()
        mongod.stop()


def test_a_health_port_in_use_is_named(mongodb_uri: str) -> None:
    from typer.testing import CliRunner

    from dogs_cli import app

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["worker", "tests.cli.cli_jobs:jobs", "--uri", mongodb_uri, "--database", "health"]
        result = CliRunner().invoke(app, [*args, "--health-port", str(port)])
    assert result.exit_code == 2, result.output
    assert (
        f"--health-port {port}: cannot listen on 0.0.0.0:{port}: the address is already in use"
        in result.stderr
    )
