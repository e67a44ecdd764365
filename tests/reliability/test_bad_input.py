"""Bad input at every public entry point: a specific error, a message naming the field and the
value, and nothing written.

One table of cases covers job definitions (``Jobs.event`` / ``Jobs.recurrent`` options and
handlers), the scheduling client (``DogsClient.schedule`` / ``schedule_many`` arguments and
params), worker options (``WorkerSettings``, ``Workers``, ``BlockingWorkers``, ``Workers.stop``)
and the client's own options. Each case runs against a fresh in-memory store that must still be
empty afterwards. Params over the 16 MiB BSON limit are tried against both stores: the real
MongoDB store (``AsyncMongoJobStore``) and the in-memory one.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pydantic
import pytest
from pymongo import AsyncMongoClient

from dogs_core.domain.records import Scheduled
from dogs_core.domain.schedules import RetryPolicy
from dogs_core.errors import (
    DogsError,
    InvalidOptionError,
    InvalidParamsError,
    InvalidScheduleError,
    JobNotRegisteredError,
    UnknownJobError,
    ValidationError,
    shown_value,
)
from dogs_core.jobs import Jobs, event_job
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime import DogsClient, JobContext, ScheduleItem, Workers, WorkerSettings
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_mongo import AsyncMongoJobStore
from dogs_testing.memory import InMemoryJobStore

Params = dict[str, Any] | None

NAN = math.nan
INF = math.inf
OVER_16_MIB = {"blob": "x" * (16 * 1024 * 1024 + 1)}
"""Params whose record is over MongoDB's 16 MiB document limit."""

TRIED: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _print_count() -> Iterator[None]:
    yield
    if TRIED:
        print(f"\nbad inputs tried: {len(TRIED)}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the Mongo cases need it; the in-memory ones do not care


# -- the world each case runs in -------------------------------------------------------------------


async def send(params: Params, ctx: object) -> None:
    return None


async def tick(ctx: object) -> None:
    return None


class Order(pydantic.BaseModel):
    order_id: int


@dataclass
class Point:
    x: int
    y: int


async def place(params: Order, ctx: object) -> None:
    return None


async def draw(params: Point, ctx: object) -> None:
    return None


class Opaque:
    """A value MongoDB cannot store, with a stable repr."""

    def __repr__(self) -> str:
        return "Opaque()"


OPAQUE = Opaque()


@dataclass
class Env:
    store: AsyncJobStore
    jobs: Jobs
    client: DogsClient


def make_env(store: AsyncJobStore) -> Env:
    jobs = Jobs()
    jobs.event(send)
    jobs.event(place)
    jobs.event(draw)
    jobs.recurrent(run_every=60)(tick)
    return Env(store, jobs, DogsClient(store, jobs))


class _NotAFunction:
    """Callable instances are fine; a class whose instances take no arguments is not."""


def _generator(params: Params, ctx: object) -> Iterator[int]:
    yield 1


def _three(a: object, b: object, c: object) -> None:
    return None


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"n": value}
    return value


# -- the table -------------------------------------------------------------------------------------

Call = Callable[[Env], Any]
NO_VALUE = object()
"""The message is not checked for a value (a callable, a huge structure)."""
SAME = object()
"""The value shown is the params themselves."""


def _show(value: object) -> str:
    """A short, stable test id for a value (no memory addresses)."""
    if callable(value) and hasattr(value, "__name__"):
        return str(value.__name__)
    text = repr(value)
    return text if len(text) <= 30 else f"{text[:24]}...({len(text)})"


def _kw(option: str, value: object) -> dict[str, Any]:
    return {option: value}


@dataclass(frozen=True)
class Case:
    id: str
    call: Call
    error: type[DogsError]
    field: str
    value: object = NO_VALUE
    bug: str | None = None
    """Set for a case that fails today: it runs as a strict xfail with this reason."""


def event_option(option: str, value: object, error: type[DogsError] = InvalidOptionError) -> Case:
    def call(env: Env) -> Any:
        return env.jobs.event(name=f"bad_{option}", **_kw(option, value))(send)

    return Case(f"event.{option}={_show(value)}", call, error, option, value)


def recurrent_option(
    option: str, value: object, error: type[DogsError] = InvalidOptionError, **others: Any
) -> Case:
    def call(env: Env) -> Any:
        options = {"run_every": 60, **others, option: value}
        return env.jobs.recurrent(name=f"bad_{option}", **options)(tick)

    return Case(f"recurrent.{option}={_show(value)}", call, error, option, value)


def schedule(field: str, value: object, error: type[DogsError], **kwargs: Any) -> Case:
    async def call(env: Env) -> Any:
        return await env.client.schedule("send", **kwargs)

    tag = "+".join(sorted(kwargs))
    return Case(f"schedule.{tag}={_show(value)}", call, error, field, value)


def schedule_params(
    params: object, field: str = "params", value: object = SAME, job: str = "send"
) -> Case:
    async def call(env: Env) -> Any:
        return await env.client.schedule(job, params)

    shown = params if value is SAME else value
    return Case(f"schedule.{job}.params={_show(params)}", call, InvalidParamsError, field, shown)


def schedule_many(
    items: Any,
    field: str,
    value: object,
    error: type[DogsError] = InvalidOptionError,
    job: str = "send",
) -> Case:
    async def call(env: Env) -> Any:
        result = await env.client.schedule_many(job, items)
        # Per-item validation: a batch of only bad items writes nothing and reports each one.
        assert result.scheduled_count == 0, result
        assert result.errors, result
        raise result.errors[0].error

    return Case(f"schedule_many.{field}={_show(value)}", call, error, field, value)


def worker_option(option: str, value: object, error: type[DogsError] = InvalidOptionError) -> Case:
    def call(env: Env) -> Any:
        return Workers(env.store, env.jobs, **_kw(option, value))

    return Case(f"workers.{option}={_show(value)}", call, error, option, value)


def settings_option(
    option: str, value: object, error: type[DogsError] = InvalidOptionError
) -> Case:
    return Case(
        f"settings.{option}={_show(value)}",
        lambda env: WorkerSettings(**_kw(option, value)),
        error,
        option,
        value,
    )


def blocking_option(
    option: str, value: object, error: type[DogsError] = InvalidOptionError
) -> Case:
    return Case(
        f"blocking.{option}={_show(value)}",
        lambda env: BlockingWorkers(env.store, env.jobs, **_kw(option, value)),
        error,
        option,
        value,
    )


def stop_grace(value: object) -> Case:
    async def call(env: Env) -> Any:
        workers = Workers(env.store, env.jobs)
        await workers.stop(value)  # type: ignore[arg-type]

    return Case(f"workers.stop(grace={value!r})", call, InvalidScheduleError, "grace", value)


NAIVE = datetime(2030, 1, 1)
DURATIONS_BAD: list[object] = [-1, -0.5, NAN, INF, -INF, "soon", "", True, [1], timedelta(-1)]

CASES: list[Case] = [
    # Job definitions: names and handlers
    Case(
        "event.name=''", lambda env: env.jobs.event(name="")(send), InvalidOptionError, "name", ""
    ),
    Case(
        "event.name=5",
        lambda env: env.jobs.event(name=5)(send),  # type: ignore[call-overload]
        InvalidOptionError,
        "name",
        5,
    ),
    Case(
        "event.name=long",
        lambda env: env.jobs.event(name="n" * 201)(send),
        InvalidOptionError,
        "name",
        "n" * 201,
    ),
    Case(
        "event.name=NUL",
        lambda env: env.jobs.event(name="a\x00b")(send),
        InvalidOptionError,
        "name",
        "a\x00b",
    ),
    Case(
        "event.handler=not callable",
        lambda env: env.jobs.event(42),  # type: ignore[call-overload]
        InvalidOptionError,
        "name",  # no name can be derived from 42
    ),
    Case(
        "event.handler=generator",
        lambda env: env.jobs.event(_generator),
        InvalidOptionError,
        "handler",
    ),
    Case(
        "event.handler=three args",
        lambda env: env.jobs.event(_three),
        InvalidOptionError,
        "handler",
    ),
    Case(
        "recurrent.handler=two args",
        lambda env: env.jobs.recurrent(name="r", run_every=5)(send),
        InvalidOptionError,
        "handler",
    ),
    Case(
        "jobs.add=not a definition",
        lambda env: env.jobs.add("send"),  # type: ignore[arg-type]
        InvalidOptionError,
        "definition",
        "send",
    ),
    # Event job options
    *[event_option("priority", v) for v in ("high", 1.5, True, 2**63, -(2**63) - 1, None)],
    *[event_option("lock_time", v) for v in (*DURATIONS_BAD, 0)],
    *[event_option("timeout", v) for v in (*DURATIONS_BAD, 0)],
    *[event_option("save_executions_for", v) for v in DURATIONS_BAD],
    *[event_option("max_tries", v) for v in (0, -1, 1.5, "3", True, NAN)],
    *[event_option("max_parallel_executions_per_server", v) for v in (-1, 2.5, "2", False)],
    *[event_option("on_error", v) for v in ("retry", 42, _generator, _NotAFunction)],
    *[event_option("on_stale", v) for v in ("x", 3.14)],
    *[event_option("retry", v) for v in ("fast", 3, {"base": 1})],
    *[event_option("params_model", v) for v in (int, "Order", Order(order_id=1))],
    *[event_option("cancel_on_stale", v) for v in ("yes", 1, None)],
    *[event_option("heartbeat", v) for v in (0, 1, 1.5, -0.1, NAN, INF, "often")],
    *[event_option("unique_scope", v) for v in ("everywhere", None, 1)],
    # Retry policies
    Case(
        "retry.base=-1",
        lambda env: RetryPolicy(base=-1),  # type: ignore[arg-type]
        InvalidOptionError,
        "retry.base",
        -1,
    ),
    Case(
        "retry.factor=0.5", lambda env: RetryPolicy(factor=0.5), InvalidOptionError, "retry.factor"
    ),
    Case(
        "retry.factor=nan", lambda env: RetryPolicy(factor=NAN), InvalidOptionError, "retry.factor"
    ),
    Case(
        "retry.jitter=2", lambda env: RetryPolicy(jitter=2), InvalidOptionError, "retry.jitter", 2
    ),
    Case(
        "retry.max_delay<base",
        lambda env: RetryPolicy(base=timedelta(seconds=10), max_delay=timedelta(seconds=1)),
        InvalidOptionError,
        "retry.max_delay",
    ),
    # Recurrent job schedules
    *[
        recurrent_option("run_every", v, InvalidScheduleError)
        for v in (*DURATIONS_BAD, 0, timedelta(0))
    ],
    recurrent_option("cron", "not a cron", InvalidScheduleError, run_every=None, timezone="UTC"),
    recurrent_option("cron", "61 * * * *", InvalidScheduleError, run_every=None, timezone="UTC"),
    recurrent_option("cron", "* * * *", InvalidScheduleError, run_every=None, timezone="UTC"),
    recurrent_option("cron", 5, InvalidScheduleError, run_every=None, timezone="UTC"),
    recurrent_option(
        "timezone", "Mars/Olympus", InvalidScheduleError, run_every=None, cron="0 3 * * *"
    ),
    recurrent_option("timezone", 2, InvalidScheduleError, run_every=None, cron="0 3 * * *"),
    recurrent_option("timezone", None, InvalidScheduleError, run_every=None, cron="0 3 * * *"),
    recurrent_option("cron", "0 3 * * *", InvalidScheduleError),  # with run_every: conflicting
    recurrent_option("next_run", "tomorrow", InvalidScheduleError, run_every=None),
    recurrent_option("schedule", "daily", InvalidScheduleError, run_every=None),
    recurrent_option("priority", "low"),
    recurrent_option("lock_time", -5),
    Case(
        "recurrent.no schedule",
        lambda env: env.jobs.recurrent(name="r")(tick),
        InvalidScheduleError,
        "run_every",
    ),
    # The scheduling client: which job
    Case(
        "schedule.job='nope'",
        lambda env: env.client.schedule("nope"),
        UnknownJobError,
        "job name",
        "nope",
    ),
    Case(
        "schedule.job=recurrent",
        lambda env: env.client.schedule("tick"),
        InvalidOptionError,
        "job",
        "tick",
    ),
    Case(
        "schedule.job=unregistered",
        lambda env: env.client.schedule(event_job(send, name="stranger")),
        JobNotRegisteredError,
        "stranger",
    ),
    Case(
        "schedule.job=5",
        lambda env: env.client.schedule(5),  # type: ignore[arg-type]
        InvalidOptionError,
        "job",
        5,
    ),
    Case(
        "schedule_many.job='nope'",
        lambda env: env.client.schedule_many("nope", [ScheduleItem()]),
        UnknownJobError,
        "job name",
        "nope",
    ),
    # ... when
    *[schedule("run_in", v, InvalidScheduleError, run_in=v) for v in DURATIONS_BAD],
    schedule("run_at", NAIVE, InvalidScheduleError, run_at=NAIVE),
    schedule("run_at", "tomorrow", InvalidScheduleError, run_at="tomorrow"),
    schedule("run_at", 1_700_000_000, InvalidScheduleError, run_at=1_700_000_000),
    schedule(
        "run_at",
        datetime(2030, 1, 1, tzinfo=UTC),
        InvalidScheduleError,
        run_in=5,
        run_at=datetime(2030, 1, 1, tzinfo=UTC),
    ),
    # ... priority and unique key
    *[schedule("priority", v, InvalidOptionError, priority=v) for v in ("x", 1.5, 2**64, True)],
    *[
        schedule("unique_key", v, InvalidOptionError, unique_key=v)
        for v in ("", 5, "k" * 1025, b"key")
    ],
    # ... params that cannot be stored
    schedule_params("a string"),
    schedule_params([1, 2, 3]),
    schedule_params(42),
    schedule_params({1: "int key"}, value=1),
    schedule_params({"$set": 1}, "params['$set']", "$set"),
    schedule_params({"a\x00b": 1}, "params['a\\x00b']", "a\x00b"),
    schedule_params({"s": {1, 2}}, "params.s", {1, 2}),
    schedule_params({"o": OPAQUE}, "params.o", OPAQUE),
    schedule_params({"when": NAIVE}, "params.when", NAIVE),
    schedule_params({"big": 2**64}, "params.big", 2**64),
    schedule_params({"nested": [{"x": {3}}]}, "params.nested[0].x", {3}),
    schedule_params({"deep": _nested(120)}, "params.deep", NO_VALUE),
    schedule_params({"order_id": "not a number"}, "params", {"order_id": "not a number"}, "place"),
    schedule_params({"wrong": 1}, "params", {"wrong": 1}, "place"),
    schedule_params({"x": 1}, "params", {"x": 1}, "draw"),
    schedule_params({"x": 1, "y": 2, "z": 3}, "params", {"x": 1, "y": 2, "z": 3}, "draw"),
    # ... bulk items
    schedule_many([42], "items[0]", 42),
    schedule_many(["x", None], "items[0]", "x"),
    schedule_many([{"params": {}, "when": 5}], "items[0]", ["when"]),
    schedule_many([ScheduleItem(run_in=-1)], "run_in", -1, InvalidScheduleError),
    schedule_many([{"priority": "high"}], "priority", "high"),
    # Workers and their settings
    *[worker_option("workers_count", v) for v in (0, -1, 1.5, "4", True, None)],
    *[worker_option("n_partitions", v) for v in (0, -3, 1.5, "2", True)],
    *[worker_option("poll_interval", v) for v in (*DURATIONS_BAD, 0)],
    *[worker_option("default_lock_time", v) for v in (*DURATIONS_BAD, 0)],
    *[worker_option("probe_interval", v) for v in (0, -1, NAN, INF)],
    *[worker_option("max_tries", v) for v in (0, -1, 2.5)],
    *[worker_option("max_tries_reached_retention", v) for v in (-1, NAN, INF, "forever")],
    *[worker_option("claim_concurrency", v) for v in (0, -2, 1.5)],
    *[worker_option("probe_enabled", v) for v in ("yes", 1, None)],
    *[worker_option("reconcile_enabled", v) for v in ("no", 0)],
    worker_option("on_max_tries_reached", "alert"),
    Case(
        "workers.jobs=list",
        lambda env: Workers(env.store, [send]),  # type: ignore[arg-type]
        InvalidOptionError,
        "jobs",
    ),
    Case("workers.jobs=empty", lambda env: Workers(env.store, Jobs()), InvalidOptionError, "jobs"),
    Case(
        "workers.settings+options",
        lambda env: Workers(env.store, env.jobs, WorkerSettings(), workers_count=2),
        InvalidOptionError,
        "options",
        ["workers_count"],
    ),
    *[settings_option("workers_count", v) for v in (0, "many")],
    *[settings_option("default_lock_time", v) for v in (NAN, -INF)],
    *[blocking_option("workers_count", v) for v in (0, 2.5)],
    *[blocking_option("poll_interval", v) for v in (INF, "never")],
    *[blocking_option("n_partitions", v) for v in (0,)],
    *[stop_grace(v) for v in (-1, NAN, "later")],
    # The client's own options
    Case(
        "client.n_partitions=0",
        lambda env: DogsClient(env.store, env.jobs, n_partitions=0),
        InvalidOptionError,
        "n_partitions",
        0,
    ),
    Case(
        "client.get_executions.limit=-1",
        lambda env: env.client.get_executions("send", limit=-1),
        InvalidOptionError,
        "limit",
        -1,
    ),
    Case(
        "client.get_job=''",
        lambda env: env.client.get_job(""),
        InvalidOptionError,
        "job_id",
        "",
    ),
]


async def _call(case: Case, env: Env) -> None:
    result = case.call(env)
    if isinstance(result, Awaitable):
        await result


async def _run(case: Case, env: Env) -> DogsError:
    TRIED.append(case.id)
    with pytest.raises(DogsError) as caught:
        await _call(case, env)
    return caught.value


def _check(case: Case, error: BaseException) -> None:
    assert isinstance(error, case.error), f"{case.id}: {type(error).__name__}: {error}"
    message = str(error)
    assert case.field in message, f"{case.id}: the message does not name {case.field!r}: {message}"
    if case.value is not NO_VALUE:
        shown = shown_value(case.value)  # as messages show values: no Python constructor
        assert shown[:40] in message, f"{case.id}: the message does not show {shown}: {message}"
    if isinstance(error, ValidationError):
        assert error.value is case.value or error.value == case.value or case.value is NO_VALUE


async def _assert_empty(store: AsyncJobStore) -> None:
    assert await store.find_records() == [], "something was written"
    for name in ("send", "place", "draw", "tick"):
        assert await store.read_history(name) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.bug)] if case.bug else [],
        )
        for case in CASES
    ],
)
async def test_bad_input_is_refused_and_nothing_is_written(case: Case) -> None:
    env = make_env(InMemoryJobStore())
    error = await _run(case, env)
    _check(case, error)
    await _assert_empty(env.store)


def test_the_table_covers_every_public_entry_point() -> None:
    prefixes = {case.id.split(".", 1)[0].split("(", 1)[0].split("=", 1)[0] for case in CASES}
    assert {
        "event",
        "recurrent",
        "jobs",
        "retry",
        "schedule",
        "schedule_many",
        "workers",
        "settings",
        "blocking",
        "client",
    } <= prefixes
    assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


# -- params over 16 MiB ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.mongo
async def test_params_over_16_mib_are_refused_by_the_mongo_store(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    env = make_env(store)
    case = schedule_params(OVER_16_MIB, "params", NO_VALUE)
    error = await _run(case, env)
    _check(case, error)
    assert "16777216" in str(error) or "16 MiB" in str(error), str(error)
    await _assert_empty(store)


@pytest.mark.anyio
@pytest.mark.mongo
async def test_an_oversized_item_of_a_batch_is_an_item_error_in_the_mongo_store(
    async_mongo_client: AsyncMongoClient[dict[str, Any]], mongo_database_name: str
) -> None:
    store = AsyncMongoJobStore(async_mongo_client, mongo_database_name)
    env = make_env(store)
    TRIED.append("schedule_many.params=over 16 MiB (mongo)")
    result = await env.client.schedule_many(
        "send", [ScheduleItem(params={"n": 1}), ScheduleItem(params=OVER_16_MIB)]
    )
    assert result.scheduled_count == 1
    assert [item.index for item in result.errors] == [1]
    assert isinstance(result.errors[0].error, InvalidParamsError)
    assert "params" in str(result.errors[0].error)
    records = await store.find_records()
    assert [record.params for record in records] == [{"n": 1}]


@pytest.mark.anyio
async def test_params_over_16_mib_are_refused_by_the_memory_store() -> None:
    env = make_env(InMemoryJobStore())
    case = schedule_params(OVER_16_MIB, "params", NO_VALUE)
    TRIED.append(case.id + " (memory)")
    try:
        outcome = await env.client.schedule("send", OVER_16_MIB)
    except DogsError as error:
        _check(case, error)
        await _assert_empty(env.store)
        return
    assert not isinstance(outcome, Scheduled), "a 16 MiB + 1 byte record was stored"


# -- inside a handler, and the blocking client ----------------------------------------------------


@pytest.mark.anyio
async def test_bad_lock_extensions_inside_a_handler_are_refused() -> None:
    store = InMemoryJobStore()
    jobs = Jobs()
    seen: list[BaseException] = []
    bad: list[object] = [-1, NAN, INF, "never", True, None]
    done = anyio.Event()

    @jobs.event
    async def extend(params: Params, ctx: JobContext) -> None:
        for value in bad:
            TRIED.append(f"ctx.extend_lock_time({value!r})")
            try:
                await ctx.extend_lock_time(value)  # type: ignore[arg-type]
            except DogsError as error:
                seen.append(error)
        done.set()

    await DogsClient(store, jobs).schedule(extend)
    async with Workers(store, jobs, poll_interval=0.05) as workers:
        with anyio.fail_after(5):
            await done.wait()
        await workers.stop()
    assert len(seen) == len(bad), seen
    for value, error in zip(bad, seen, strict=True):
        assert isinstance(error, InvalidScheduleError), error
        assert "duration" in str(error)
        assert repr(value) in str(error)


def test_the_blocking_client_refuses_bad_input_and_writes_nothing() -> None:
    store = InMemoryJobStore()
    env = make_env(store)
    cases: list[tuple[Callable[[BlockingDogsClient], Any], type[DogsError], str]] = [
        (lambda c: c.schedule("nope"), UnknownJobError, "'nope'"),
        (lambda c: c.schedule("send", {"$bad": 1}), InvalidParamsError, "$bad"),
        (lambda c: c.schedule("send", run_in=NAN), InvalidScheduleError, "run_in=nan"),
        (
            lambda c: c.schedule("send", priority="x"),  # type: ignore[arg-type]
            InvalidOptionError,
            "priority='x'",
        ),
        (lambda c: c.schedule_many("tick", [ScheduleItem()]), InvalidOptionError, "'tick'"),
    ]
    with BlockingDogsClient(store, env.jobs) as client:
        for call, error, shown in cases:
            TRIED.append(f"blocking client: {shown}")
            with pytest.raises(error) as caught:
                call(client)
            assert shown in str(caught.value)
        assert client.find_jobs().jobs == ()
