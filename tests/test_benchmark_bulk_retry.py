"""The bulk-retry benchmark still runs and checks itself, at its --quick size against the test
mongod (a ``dogs worker`` process beside it)."""

from __future__ import annotations

import pytest
from benchmarks import bulk_retry


@pytest.mark.mongo
def test_bulk_retry_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = bulk_retry.main(["--quick", "--uri", mongodb_uri, "--baseline", "1"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Bulk retry" in out
    assert "Claim wait of the probes" in out
    assert "registry document" in out
