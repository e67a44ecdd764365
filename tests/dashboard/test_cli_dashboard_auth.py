"""``dogs dashboard`` with credentials from environment variables: the checks of
``--token-env`` and ``--basic-auth-env`` (no secret ever echoed), the warning of a public
interface without them, and a real run against the session's mongod that sends a browser to
the token login, lets a script in with its bearer token, and refuses a viewer's POST."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import pytest
from typer.testing import CliRunner

from tests.cli.test_cli import assert_clean_error, invoke
from tests.dashboard.serving import free_port
from tests.dashboard.test_cli_dashboard import _get_when_up

OPS = "ops-token-0123456789"
VIEWER = "viewer-token-0123456789"


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["--token-env", "DOGS_TEST_NO_SUCH_VAR"], {}, "--token-env DOGS_TEST_NO_SUCH_VAR: the"),
        (["--token-env", "DOGS_TEST_T"], {"DOGS_TEST_T": "ops:short"}, "shorter than 8"),
        (["--basic-auth-env", "DOGS_TEST_U"], {"DOGS_TEST_U": "justaname"}, "USER:PASSWORD"),
        (["--sign-in-failures", "-1"], {}, "--sign-in-failures=-1: must be 0 or more"),
        (["--sign-in-max-delay", "0.5"], {}, "--sign-in-max-delay=0.5: must be 1 to 86400"),
    ],
)
def test_credential_errors(args: list[str], env: dict[str, str | None], fragment: str) -> None:
    runner = CliRunner()
    uri = ["--uri", "mongodb://127.0.0.1:1/app"]
    result = invoke(runner, "dashboard", *uri, *args, env={"DOGS_TEST_NO_SUCH_VAR": None, **env})
    assert_clean_error(result, fragment)
    assert "short" not in result.output.replace("shorter", "")


def test_help_names_the_credential_flags() -> None:
    result = invoke(CliRunner(), "dashboard", "--help")
    assert "--token-env" in result.stdout
    assert "--basic-auth-env" in result.stdout
    assert "--sign-in-failures" in result.stdout
    assert "--sign-in-max-delay" in result.stdout


@pytest.mark.mongo
def test_tokens_from_the_environment(mongodb_uri: str) -> None:
    port = free_port()
    database = f"dogs_cli_dashboard_auth_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "dogs_cli", "dashboard", "--uri", mongodb_uri]
    command += ["--database", database, "--port", str(port), "--token-env", "DOGS_TOKENS"]
    command += ["--host", "127.0.0.1", "--log-level", "error"]
    tokens = f"ops:{OPS},ci:{VIEWER}:viewer"
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DOGS_MONGODB_URI": "", "DOGS_TOKENS": tokens},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        login = _get_when_up(f"{base}/", process)  # followed to the login page
        assert 'id="login-form"' in login
        ops = urllib.request.Request(f"{base}/workers", headers={"Authorization": f"Bearer {OPS}"})
        with urllib.request.urlopen(ops, timeout=10) as response:
            page = response.read().decode()
        assert 'id="user">ops' in page
        assert 'id="workers-table"' in page
        viewer = urllib.request.Request(
            f"{base}/actions/pause", data=b"name=x", headers={"Authorization": f"Bearer {VIEWER}"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(viewer, timeout=10)
        assert refused.value.code == 403
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "sign-in required" in out
    assert OPS not in out + err
