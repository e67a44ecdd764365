"""The operator calls of the client against a MongoDB that is not there (issue 16, item 2):
each runs under ``operation_timeout``, as ``schedule()`` does, and raises
:class:`StoreUnavailableError` naming the redacted URI. Checked by what happened (the error,
the deadline the last log line states), never by the wall clock; ``fail_after`` only guards
against a hang.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from dogs_core.errors import StoreUnavailableError
from dogs_mongo import DogsContainer
from tests.mongo.test_unreachable import GUARD, _closed_port, _jobs, _retry_lines

DEADLINE = 0.6  # seconds: server selection 0.2 s per attempt

CALLS: dict[str, Callable[[Any], Awaitable[object]]] = {
    "cancel": lambda c: c.cancel("01a2332e-e08e-7cec-a8fa-f831fc4016d1"),
    "retry_now": lambda c: c.retry_now("01a2332e-e08e-7cec-a8fa-f831fc4016d1"),
    "reschedule": lambda c: c.reschedule("01a2332e-e08e-7cec-a8fa-f831fc4016d1", run_in=5),
    "delete": lambda c: c.delete("01a2332e-e08e-7cec-a8fa-f831fc4016d1"),
    "delete_jobs": lambda c: c.delete_jobs(state="failed"),
    "find_jobs": lambda c: c.find_jobs(),
    "get_executions": lambda c: c.get_executions("unreachable.job"),
    "get_result": lambda c: c.get_result("01a2332e-e08e-7cec-a8fa-f831fc4016d1"),
    "stats": lambda c: c.stats(),
    "pause": lambda c: c.pause("unreachable.job"),
    "resume": lambda c: c.resume("unreachable.job"),
    "paused": lambda c: c.paused(),
    "status": lambda c: c.status(),
}


@pytest.mark.anyio
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_each_operator_call_gives_up_within_the_operation_timeout(
    call: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    container = DogsContainer(
        uri=f"mongodb://dogs:s3cret@127.0.0.1:{port}/app",
        driver="async",
        operation_timeout=DEADLINE,
    )
    client = container.client(_jobs())
    try:
        with (
            caplog.at_level(logging.WARNING, logger="dogs"),
            anyio.fail_after(GUARD),
            pytest.raises(StoreUnavailableError) as raised,
        ):
            await CALLS[call](client)
    finally:
        await container.aclose()
    message = str(raised.value)
    assert f"mongodb://dogs:***@127.0.0.1:{port}/app" in message, "the URI, password redacted"
    assert "s3cret" not in message
    assert "\n" not in message
    last = _retry_lines(caplog)[-1]
    assert last.levelno == logging.ERROR
    assert f"(deadline {DEADLINE:g}s)" in last.getMessage(), "gave up on the deadline"
