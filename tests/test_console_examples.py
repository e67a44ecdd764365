"""The operator's console examples run by themselves and say what they should: the bulk
retry, workers and audit from Python (in-memory, and on the real mongod), and the dashboard
mounted with an auth callable."""

from __future__ import annotations

import pytest
from examples import dashboard_auth, operators_console


def test_operators_console(capsys: pytest.CaptureFixture[str]) -> None:
    operators_console.main([])
    out = capsys.readouterr().out
    assert "is running, 4 slots, jobs send_email, resize_image" in out
    assert "failed with ConnectionRefusedError: 7 (a dry run)" in out
    assert "retried 7 of 7 (chunk 3)" in out
    assert "still failed: ['resize_image']" in out
    assert "now running -> quiet (taken within 10 s)" in out
    assert "audit: bulk_retry of 'failed jobs whose last error is ConnectionRefusedError'" in out
    assert "by alice (api): 7" in out


@pytest.mark.mongo
def test_operators_console_on_mongodb(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    operators_console.main(["--uri", mongodb_uri])
    out = capsys.readouterr().out
    assert "retried 7 of 7" in out
    assert "still failed: ['resize_image']" in out


def test_dashboard_auth(capsys: pytest.CaptureFixture[str]) -> None:
    dashboard_auth.main(["--check"])
    out = capsys.readouterr().out
    for line in (
        "anonymous: 307 to /signin?next=/dogs/jobs/",
        "bob (a viewer) sees the job: 200, buttons: False",
        "bob cancels: 403",
        "alice cancels: 303, then 200",
        "by alice (dashboard)",
    ):
        assert line in out, out
