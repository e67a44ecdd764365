"""``dogs dashboard``: its input checks without a server, the one-line message without the
extra, and a real run against the session's mongod (served, read-only, stopped by SIGTERM
with exit 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from typer.testing import CliRunner

from tests.cli.test_cli import assert_clean_error, invoke
from tests.dashboard.serving import free_port


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_help(runner: CliRunner) -> None:
    assert "dashboard" in invoke(runner, "--help").stdout
    result = invoke(runner, "dashboard", "--help")
    assert result.exit_code == 0, result.output
    for flag in ("--host", "--port", "--read-only", "--secret-env", "--uri", "--refresh"):
        assert flag in result.stdout


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--port", "0"], {}, "--port=0: expected a port number between 1 and 65535"),
        (["--port", "70000"], {}, "--port=70000"),
        (["--host", " "], {}, "--host: must not be empty"),
        (["--refresh", "-1"], {}, "--refresh=-1"),
        (["--secret-env", "DOGS_TEST_NO_SUCH_VAR"], {}, "is not set or empty"),
        (["--secret-env", "DOGS_TEST_SECRET"], {"DOGS_TEST_SECRET": "short"}, "at least 16"),
        ([], {}, "no MongoDB URI"),
    ],
)
def test_input_errors(
    runner: CliRunner, args: list[str], env: dict[str, str | None], fragment: str
) -> None:
    result = invoke(runner, "dashboard", *args, env={"DOGS_TEST_NO_SUCH_VAR": None, **env})
    assert_clean_error(result, fragment)


def test_without_the_extra(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dogs_dashboard", None)
    result = invoke(runner, "dashboard", "--uri", "mongodb://127.0.0.1:1/app")
    assert_clean_error(result, "needs the dashboard extra", "pip install 'dogs-py[dashboard]'")


@pytest.mark.mongo
def test_serves_until_sigterm(mongodb_uri: str) -> None:
    port = free_port()
    database = f"dogs_cli_dashboard_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "dogs_cli", "dashboard", "--uri", mongodb_uri]
    command += ["--database", database, "--port", str(port), "--read-only", "--log-level", "error"]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DOGS_MONGODB_URI": ""},
    )
    try:
        page = _get_when_up(f"http://127.0.0.1:{port}/", process)
        assert 'id="read-only"' in page
        assert mongodb_uri in page
        request = urllib.request.Request(f"http://127.0.0.1:{port}/actions/pause", data=b"name=x")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"http://127.0.0.1:{port}/" in out
    assert "(read-only)" in out
    assert "dogs dashboard: stopped" in out


def _get_when_up(url: str, process: subprocess.Popen[str]) -> str:
    for _ in range(300):
        if process.poll() is not None:
            raise AssertionError(f"dogs dashboard exited: {process.communicate()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise AssertionError("dogs dashboard did not answer")
