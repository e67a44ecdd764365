"""schedule() against a MongoDB that is not there (a closed local port, real PyMongo): it
fails within ``operation_timeout`` with :class:`StoreUnavailableError`, whose one-line message
names the redacted URI and the cause, after one short warning per retry.

The bound is checked by what happened (how many attempts, the deadline each log line states),
never by the machine's wall clock; ``fail_after`` is only a guard against a hang.
"""

from __future__ import annotations

import logging
import socket
from datetime import timedelta
from typing import Any

import anyio
import pytest
from pymongo import MongoClient
from pymongo.errors import ServerSelectionTimeoutError

from dogs_core import JobContext, Jobs
from dogs_core.errors import InvalidOptionError, StoreUnavailableError, TransientStoreError
from dogs_mongo import DogsContainer
from dogs_mongo.errors import name_uri, summarize
from dogs_mongo.settings import DogsSettings

GUARD = 30  # seconds: only against a hang


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _jobs() -> Jobs:
    jobs = Jobs()

    @jobs.event(name="unreachable.job")
    async def job(params: None, ctx: JobContext) -> None:
        pass

    return jobs


def _retry_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "dogs.retry"]


def _check_error(error: StoreUnavailableError, port: int) -> None:
    message = str(error)
    assert f"mongodb://dogs:***@127.0.0.1:{port}/app" in message, "the URI, password redacted"
    assert "s3cret" not in message
    assert f"127.0.0.1:{port} (connection refused)" in message, "the cause"
    assert "\n" not in message
    assert "Topology Description" not in message
    assert "configured timeouts" not in message
    assert isinstance(error, TransientStoreError)
    assert error.write_may_have_applied is False
    assert isinstance(error.__cause__, ServerSelectionTimeoutError), "PyMongo's error chained"


def _check_log(caplog: pytest.LogCaptureFixture, deadline: float) -> None:
    lines = _retry_lines(caplog)
    *retries, last = lines
    assert retries, "at least one retry (attempts of 1.33 s in a 4 s deadline)"
    for record in lines:
        assert record.exc_info is None
        assert "\n" not in record.getMessage()
        assert "Topology Description" not in record.getMessage()
    assert all(r.levelno == logging.WARNING for r in retries)
    assert last.levelno == logging.ERROR
    assert f"(deadline {deadline:g}s)" in last.getMessage()


@pytest.mark.anyio
@pytest.mark.parametrize("driver", ["async", "sync"])
async def test_schedule_fails_within_the_operation_timeout(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    container = DogsContainer(
        uri=f"mongodb://dogs:s3cret@127.0.0.1:{port}/app",
        driver=driver,
        operation_timeout=4,  # server selection 1.33 s per attempt
    )
    client = container.client(_jobs())
    try:
        with (
            caplog.at_level(logging.WARNING, logger="dogs"),
            anyio.fail_after(GUARD),
            pytest.raises(StoreUnavailableError) as raised,
        ):
            await client.schedule("unreachable.job")
    finally:
        await container.aclose()
    _check_error(raised.value, port)
    _check_log(caplog, 4)


def test_the_blocking_client_fails_the_same_way(caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    container = DogsContainer(
        uri=f"mongodb://dogs:s3cret@127.0.0.1:{port}/app", driver="sync", operation_timeout="4s"
    )
    with (
        caplog.at_level(logging.WARNING, logger="dogs"),
        container.blocking_client(_jobs()) as client,
        pytest.raises(StoreUnavailableError) as raised,
    ):
        client.schedule("unreachable.job")
    container.close()
    _check_error(raised.value, port)
    _check_log(caplog, 4)


def test_the_defaults_bound_schedule_at_15_seconds() -> None:
    settings = DogsSettings.from_config({"uri": "mongodb://localhost/app"})
    assert settings.operation_timeout == timedelta(seconds=15)
    assert settings.operation_seconds() == 15
    assert settings.client_kwargs()["serverSelectionTimeoutMS"] == 5000, "a third of it"


def test_server_selection_timeout_overrides_the_derived_one() -> None:
    settings = DogsSettings.from_config({"server_selection_timeout": 2, "operation_timeout": 30})
    assert settings.client_kwargs()["serverSelectionTimeoutMS"] == 2000
    unbounded = DogsSettings.from_config({"operation_timeout": None})
    assert unbounded.operation_seconds() is None
    assert "serverSelectionTimeoutMS" not in unbounded.client_kwargs(), "PyMongo's 30 s"


@pytest.mark.parametrize("bad", [0, -1, "soon", [15]])
def test_a_bad_operation_timeout_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(InvalidOptionError) as raised:
        DogsContainer(operation_timeout=bad)
    assert raised.value.field == "operation_timeout"


def test_summarize_names_each_server_and_its_cause() -> None:
    ports = (_closed_port(), _closed_port())
    uri = f"mongodb://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/?replicaSet=rs0"
    name_uri(uri, uri)
    client: MongoClient[dict[str, Any]] = MongoClient(uri, serverSelectionTimeoutMS=200)
    try:
        with pytest.raises(ServerSelectionTimeoutError) as raised:
            client.db.jobs.insert_one({})
    finally:
        client.close()
    first, second = sorted(f"127.0.0.1:{port}" for port in ports)
    assert summarize(raised.value) == (
        f"no MongoDB server reachable at {uri} within 0.2s: "
        f"{first} (connection refused), {second} (connection refused)"
    )
