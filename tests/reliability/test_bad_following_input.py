"""Bad input to following a job: each case raises a specific ``DogsError`` naming the field and
writes nothing (no record, no progress, no log line).

The options of a job (``store_logs``, ``max_log_lines``) and of the workers
(``progress_interval``), the reads (``get_logs``, ``follow_logs``, ``watch_progress``) against
an empty in-memory store; and every bad report of ``ctx.progress`` from one running handler, which
also goes on after each refusal."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from dogs_core import DogsClient, EventJobDefinition, Jobs, Workers
from dogs_core.domain.progress import MAX_PROGRESS_DATA_BYTES, MAX_PROGRESS_MESSAGE
from dogs_core.errors import (
    DogsError,
    InvalidIdError,
    InvalidOptionError,
    InvalidProgressError,
    JobNotFoundError,
    MissingRoleError,
)
from dogs_core.ports import REQUIRED_ROLES, Role
from dogs_core.runtime import JobContext
from dogs_testing.memory import InMemoryJobStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def send(params: None, ctx: object) -> None:
    return None


class Older(InMemoryJobStore):
    """A store written before the following role."""

    @property
    def roles(self) -> frozenset[Role]:
        return REQUIRED_ROLES


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[InMemoryJobStore], Any]
    error: type[DogsError]
    field: str


def _definition(**options: Any) -> Callable[[InMemoryJobStore], Any]:
    return lambda store: EventJobDefinition("bad", send, **options)


def _client(store: InMemoryJobStore) -> DogsClient:
    return DogsClient(store, Jobs())


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


def _logged() -> Jobs:
    jobs = Jobs()
    jobs.event(store_logs=True)(send)
    return jobs


UNKNOWN = "0190c2c4-0000-7000-8000-000000000000"  # an id no job has

CASES = [
    Case("store_logs=LOUD", _definition(store_logs="LOUD"), InvalidOptionError, "store_logs"),
    Case("store_logs=-1", _definition(store_logs=-1), InvalidOptionError, "store_logs"),
    Case("store_logs=1.5", _definition(store_logs=1.5), InvalidOptionError, "store_logs"),
    Case("max_log_lines=0", _definition(max_log_lines=0), InvalidOptionError, "max_log_lines"),
    Case(
        "max_log_lines=10**6",
        _definition(store_logs=True, max_log_lines=10**6),
        InvalidOptionError,
        "max_log_lines",
    ),
    Case(
        "store_logs without history",
        _definition(store_logs=True, save_executions_for=0),
        InvalidOptionError,
        "store_logs",
    ),
    Case(
        "progress_interval=0",
        lambda store: Workers(store, _logged(), progress_interval=0),
        InvalidOptionError,
        "progress_interval",
    ),
    Case(
        "store_logs on an older store",
        lambda store: Workers(Older(), _logged()),
        MissingRoleError,
        Role.FOLLOWING.value,
    ),
    Case("get_logs('')", lambda store: _client(store).get_logs(""), InvalidOptionError, "id"),
    Case("get_logs(not an id)", lambda store: _client(store).get_logs("x"), InvalidIdError, "id"),
    Case(
        "get_logs(after=garbage)",
        lambda store: _client(store).get_logs(UNKNOWN, after="garbage"),
        InvalidIdError,
        "after",
    ),
    Case(
        "get_logs(unknown)",
        lambda store: _client(store).get_logs(UNKNOWN),
        JobNotFoundError,
        "",
    ),
    Case(
        "get_logs(limit=0)",
        lambda store: _client(store).get_logs(UNKNOWN, limit=0),
        InvalidOptionError,
        "limit",
    ),
    Case(
        "get_logs(after='')",
        lambda store: _client(store).get_logs(UNKNOWN, after=""),
        InvalidOptionError,
        "after",
    ),
    Case(
        "follow_logs(poll_interval=0)",
        lambda store: _drain(_client(store).follow_logs(UNKNOWN, poll_interval=0)),
        InvalidOptionError,
        "poll_interval",
    ),
    Case(
        "follow_logs(unknown)",
        lambda store: _drain(_client(store).follow_logs(UNKNOWN)),
        JobNotFoundError,
        "",
    ),
    Case(
        "watch_progress('')",
        lambda store: _drain(_client(store).watch_progress("")),
        InvalidOptionError,
        "job_id",
    ),
    Case(
        "watch_progress(unknown)",
        lambda store: _drain(_client(store).watch_progress(UNKNOWN)),
        JobNotFoundError,
        "",
    ),
    Case(
        "get_logs on an older store",
        lambda store: _client(Older()).get_logs(UNKNOWN),
        MissingRoleError,
        Role.FOLLOWING.value,
    ),
]


async def _called(case: Case, store: InMemoryJobStore) -> None:
    result = case.call(store)
    if hasattr(result, "__await__"):
        await result


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_bad_input_is_refused_and_nothing_is_written(case: Case) -> None:
    store = InMemoryJobStore()
    with pytest.raises(case.error) as raised:
        await _called(case, store)
    error = raised.value
    if case.field:
        # a missing role is named as the role, a refused value by its field
        named = error.role if isinstance(error, MissingRoleError) else getattr(error, "field", None)
        assert named == case.field, error
    assert await store.find_records() == []
    assert store.sync._lines == {}


BAD_REPORTS: list[tuple[object, object, object, str]] = [
    (1.5, None, None, "fraction"),
    (-0.1, None, None, "fraction"),
    (math.nan, None, None, "fraction"),
    (True, None, None, "fraction"),
    (None, None, None, "fraction"),
    (0.5, "x" * (MAX_PROGRESS_MESSAGE + 1), None, "message"),
    (0.5, b"bytes", None, "message"),
    (0.5, None, ["not", "a", "mapping"], "data"),
    (0.5, None, {"tags": {"a", "b"}}, "data.tags"),
    (0.5, None, {"blob": "x" * MAX_PROGRESS_DATA_BYTES}, "data"),
]


async def test_bad_progress_reports_are_refused_and_nothing_is_written() -> None:
    jobs = Jobs()
    refused: list[tuple[type[BaseException], str]] = []

    @jobs.event
    async def reporter(params: None, ctx: JobContext) -> str:
        for fraction, message, data, _ in BAD_REPORTS:
            try:
                await ctx.progress(fraction, message, data=data)  # type: ignore[arg-type]
            except DogsError as error:
                refused.append((type(error), getattr(error, "field", "")))
        return "went on"

    store = InMemoryJobStore()
    client = DogsClient(store, jobs)
    outcome = await client.schedule(reporter)
    async with Workers(store, jobs, poll_interval="50ms") as workers:
        row = await client.wait_for(outcome.id, timeout=30)  # type: ignore[union-attr]
        await workers.stop()
    assert refused == [(InvalidProgressError, field) for *_, field in BAD_REPORTS]
    assert row.result == "went on"
    assert row.progress is None, "nothing was staged"
    with anyio.fail_after(5):
        assert await client.get_logs(outcome.id) == []  # type: ignore[union-attr]
