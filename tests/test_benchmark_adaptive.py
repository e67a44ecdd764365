"""benchmarks/adaptive.py still runs: at ``--quick`` size on memory and the test mongod, with
two instances, and it rejects bad sizes. No timing is asserted: only that it exits 0 (every job
ran once, nothing left) and prints its tables."""

from __future__ import annotations

import pytest
from benchmarks import adaptive

pytestmark = [pytest.mark.mongo, pytest.mark.slow]


def test_adaptive_quick(mongodb_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--quick", "--uri", mongodb_uri, "--repeat", "1", "--instances", "2"]
    configs = ["--config", "fixed", "--config", "defaults", "--config", "tuned"]
    status = adaptive.main([*argv, *configs, "--try", "8:4:2"])
    out = capsys.readouterr().out
    assert status == 0, out
    for config in ("fixed", "defaults", "tuned", "8:4:2"):
        assert config in out
    assert "Jobs/s by configuration" in out


@pytest.mark.parametrize(
    "argv",
    [["--instances", "0"], ["--repeat", "0"], ["--try", "8:x:2"], ["--try", "8:0:2"]],
)
def test_adaptive_rejects_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        adaptive.main(argv)
