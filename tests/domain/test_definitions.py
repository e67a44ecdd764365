"""Job definitions, their option validation, on_error outcomes and params handling."""

from __future__ import annotations

import dataclasses
import functools
import math
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

import pydantic
import pytest
from bson import Int64, ObjectId
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.definitions import (
    DEFAULT_HEARTBEAT_FRACTION,
    Discard,
    EventJobDefinition,
    JobType,
    RecurrentJobDefinition,
    Retry,
    check_bson_storable,
    is_async_callable,
    is_params_model,
    load_params,
    normalize_on_error_result,
    retry_run_at,
    to_bson_storable,
    validate_params,
)
from dogs_core.domain.schedules import CronSchedule, CustomSchedule, RetryPolicy, RunEvery
from dogs_core.errors import InvalidOptionError, InvalidParamsError, InvalidScheduleError

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Welcome(pydantic.BaseModel):
    user_id: int
    locale: str = "en"


class AllDefaults(pydantic.BaseModel):
    retries: int = 3


class WithSet(pydantic.BaseModel):
    tags: set[str]


@dataclasses.dataclass
class Invoice:
    invoice_id: int
    lines: list[str] = dataclasses.field(default_factory=list)


def event_handler(params: Any, ctx: Any) -> None:
    return None


async def async_event_handler(params: Any, ctx: Any) -> None:
    return None


def welcome_handler(params: Welcome, ctx: Any) -> None:
    return None


def invoice_handler(params: Invoice, ctx: Any) -> None:
    return None


def recurrent_handler(ctx: Any) -> None:
    return None


def on_error_event(error: BaseException, params: Any, ctx: Any) -> Retry:
    return Retry()


def on_error_recurrent(error: BaseException, params: None, ctx: Any) -> Discard:
    return Discard()


def _event(**options: Any) -> EventJobDefinition:
    return EventJobDefinition("job", event_handler, **options)


def _recurrent(**options: Any) -> RecurrentJobDefinition:
    options.setdefault("run_every", "5m")
    return RecurrentJobDefinition("tick", recurrent_handler, **options)


def _assert_names(error: pytest.ExceptionInfo[Any], field: str) -> None:
    assert error.value.field == field
    assert field in str(error.value)


# --------------------------------------------------------------------------------------------
# Retry / Discard / on_error results


def test_retry_variants() -> None:
    assert Retry() == Retry(None, None)
    assert Retry(run_in="5m").run_in == timedelta(minutes=5)  # type: ignore[arg-type]
    paris = datetime(2026, 5, 1, 16, tzinfo=ZoneInfo("Europe/Paris"))
    retry = Retry(run_at=paris)
    assert retry.run_at == datetime(2026, 5, 1, 14, tzinfo=UTC)
    assert retry.run_at is not None
    assert retry.run_at.tzinfo is UTC
    assert Discard() == Discard()


def test_retry_rejects_conflicts_and_bad_values() -> None:
    with pytest.raises(InvalidScheduleError, match="conflicting options") as error:
        Retry(run_in=timedelta(1), run_at=NOW)
    _assert_names(error, "run_at")
    with pytest.raises(InvalidScheduleError) as error:
        Retry(run_in=-1)  # type: ignore[arg-type]
    _assert_names(error, "run_in")
    with pytest.raises(InvalidScheduleError) as error:
        Retry(run_at=datetime(2026, 1, 1))
    _assert_names(error, "run_at")


def test_normalize_on_error_result() -> None:
    assert normalize_on_error_result(None, job_name="j") == Retry()
    retry = Retry(run_in=timedelta(seconds=5))
    assert normalize_on_error_result(retry, job_name="j") is retry
    discard = Discard()
    assert normalize_on_error_result(discard, job_name="j") is discard
    with pytest.raises(InvalidOptionError, match="job 'j'") as error:
        normalize_on_error_result({"action": "retry"}, job_name="j")
    _assert_names(error, "on_error")


def test_retry_run_at() -> None:
    definition = _event()
    assert retry_run_at(definition, Retry(run_in=timedelta(minutes=1)), NOW, 3, 0.5) == (
        NOW + timedelta(minutes=1)
    )
    later = NOW + timedelta(days=1)
    assert retry_run_at(definition, Retry(run_at=later), NOW, 3, 0.5) == later
    assert retry_run_at(definition, Retry(), NOW, 1, 0.5) == NOW + timedelta(seconds=2)
    assert retry_run_at(definition, Retry(), NOW, 3, 0.5) == NOW + timedelta(seconds=8)
    slow = _event(retry=RetryPolicy(base=timedelta(minutes=1), jitter=0))
    assert retry_run_at(slow, Retry(), NOW, 2, 0.9) == NOW + timedelta(minutes=2)


# --------------------------------------------------------------------------------------------
# Event definitions


def test_event_defaults() -> None:
    definition = _event()
    assert definition.type is JobType.EVENT
    assert definition.name == "job"
    assert definition.handler is event_handler
    assert definition.priority == 100
    assert definition.lock_time is None
    assert definition.max_tries is None
    assert definition.max_parallel_executions_per_server is None
    assert definition.save_executions_for == timedelta(days=7)
    assert definition.on_error is None
    assert definition.on_stale is None
    assert definition.retry == RetryPolicy()
    assert definition.params_model is None
    assert definition.cancel_on_stale is True
    assert definition.heartbeat is False
    assert definition.heartbeat_fraction is None
    assert definition.heartbeat_interval(timedelta(seconds=30)) is None
    assert definition.timeout is None
    assert definition.unique_scope == "global"
    assert definition.is_async is False


def test_event_accepts_every_option() -> None:
    policy = RetryPolicy(base=timedelta(seconds=1))
    definition = EventJobDefinition(
        "full",
        async_event_handler,
        priority=0,
        lock_time="2m",
        max_tries=5,
        max_parallel_executions_per_server=0,
        save_executions_for=0,
        on_error=on_error_event,
        on_stale=event_handler,
        retry=policy,
        params_model=Welcome,
        cancel_on_stale=False,
        heartbeat=0.25,
        timeout=90,
        unique_scope="job",
    )
    assert definition.priority == 0
    assert definition.lock_time == timedelta(minutes=2)
    assert definition.max_tries == 5
    assert definition.max_parallel_executions_per_server == 0
    assert definition.save_executions_for == timedelta(0)
    assert definition.on_error is on_error_event
    assert definition.on_stale is event_handler
    assert definition.retry is policy
    assert definition.params_model is Welcome
    assert definition.cancel_on_stale is False
    assert definition.heartbeat_fraction == 0.25
    assert definition.heartbeat_interval(timedelta(minutes=2)) == timedelta(seconds=30)
    assert definition.timeout == timedelta(seconds=90)
    assert definition.unique_scope == "job"
    assert definition.is_async is True


@pytest.mark.parametrize("priority", [0, -5, 1, 100, 2**53 - 1, -(2**53 - 1)])
def test_priority_accepts_any_node_safe_int(priority: int) -> None:
    assert _event(priority=priority).priority == priority


@pytest.mark.parametrize("value", ["2m", 120, 120.0, timedelta(minutes=2)])
def test_durations_accept_every_form(value: Any) -> None:
    definition = _event(lock_time=value, timeout=value, save_executions_for=value)
    assert definition.lock_time == definition.timeout == timedelta(minutes=2)
    assert definition.save_executions_for == timedelta(minutes=2)


def test_heartbeat_true_is_a_third_of_the_lock_time() -> None:
    definition = _event(heartbeat=True)
    assert definition.heartbeat_fraction == DEFAULT_HEARTBEAT_FRACTION == 1 / 3
    assert definition.heartbeat_interval(timedelta(seconds=30)) == timedelta(seconds=10)


def test_effective_values() -> None:
    default_lock = timedelta(seconds=30)
    assert _event().effective_lock_time(default_lock) == default_lock
    assert _event(lock_time=5).effective_lock_time(default_lock) == timedelta(seconds=5)
    assert _event().effective_max_tries(20) == 20
    assert _event().effective_max_tries(None) is None
    assert _event(max_tries=3).effective_max_tries(20) == 3


def _three(a: Any, b: Any, c: Any) -> None: ...


def _one(a: Any) -> None: ...


def _kwonly(a: Any, b: Any, *, c: Any) -> None: ...


def _generator(a: Any, b: Any) -> Any:
    yield a


async def _async_generator(a: Any, b: Any) -> Any:
    yield a


BAD_EVENT_OPTIONS: list[tuple[str, Any]] = [
    ("name", ""),
    ("name", "   "),
    ("name", 5),
    ("name", None),
    ("name", "x" * 201),
    ("name", "a\x00b"),
    ("handler", "not callable"),
    ("handler", _one),
    ("handler", _three),
    ("handler", _kwonly),
    ("handler", _generator),
    ("handler", _async_generator),
    ("priority", True),
    ("priority", 1.5),
    ("priority", "1"),
    ("priority", None),
    ("priority", 2**63),
    ("lock_time", 0),
    ("lock_time", -1),
    ("lock_time", "junk"),
    ("lock_time", True),
    ("lock_time", math.nan),
    ("max_tries", 0),
    ("max_tries", -1),
    ("max_tries", True),
    ("max_tries", 1.5),
    ("max_parallel_executions_per_server", -1),
    ("max_parallel_executions_per_server", False),
    ("max_parallel_executions_per_server", "2"),
    ("save_executions_for", -1),
    ("save_executions_for", "junk"),
    ("save_executions_for", math.inf),
    ("save_executions_for", None),
    ("on_error", "log it"),
    ("on_error", _one),
    ("on_stale", _three),
    ("retry", "fast"),
    ("retry", {"base": 1}),
    ("params_model", int),
    ("params_model", "Welcome"),
    ("params_model", Welcome(user_id=1)),
    ("cancel_on_stale", 1),
    ("cancel_on_stale", None),
    ("heartbeat", 0),
    ("heartbeat", 1),
    ("heartbeat", 1.5),
    ("heartbeat", -0.1),
    ("heartbeat", math.nan),
    ("heartbeat", "yes"),
    ("heartbeat", None),
    ("timeout", 0),
    ("timeout", -1),
    ("timeout", "never"),
    ("unique_scope", "all"),
    ("unique_scope", None),
]


@pytest.mark.parametrize(("field", "value"), BAD_EVENT_OPTIONS)
def test_event_rejects_bad_options(field: str, value: Any) -> None:
    arguments: dict[str, Any] = {"name": "job", "handler": event_handler, field: value}
    with pytest.raises(InvalidOptionError) as error:
        EventJobDefinition(**arguments)
    _assert_names(error, field)


def test_handler_arity_message_shows_the_call_convention() -> None:
    with pytest.raises(InvalidOptionError, match=r"handler\(params, ctx\)"):
        EventJobDefinition("job", _one)
    with pytest.raises(InvalidOptionError, match=r"on_error\(error, params, ctx\)"):
        _recurrent(on_error=recurrent_handler)


def _star(*args: Any) -> None: ...


def _defaults(params: Any, ctx: Any, extra: int = 1, *, flag: bool = False) -> None: ...


def _one_default(params: Any, ctx: Any = None) -> None: ...


class _CallableObject:
    def __call__(self, params: Any, ctx: Any) -> None: ...


class _AsyncCallableObject:
    async def __call__(self, params: Any, ctx: Any) -> None: ...


@pytest.mark.parametrize(
    "handler",
    [
        _star,
        _defaults,
        _one_default,
        _CallableObject(),
        _AsyncCallableObject(),
        functools.partial(_three, 1),
        lambda params, ctx: None,
        max,  # a builtin without a signature: not checked
    ],
)
def test_handler_arity_is_checked_loosely(handler: Any) -> None:
    assert EventJobDefinition("job", handler).handler is handler


def test_is_async_detection() -> None:
    assert is_async_callable(async_event_handler)
    assert is_async_callable(functools.partial(async_event_handler, 1))
    assert is_async_callable(_AsyncCallableObject())
    assert not is_async_callable(_CallableObject())
    assert not is_async_callable(event_handler)
    assert not is_async_callable(lambda: None)
    assert not is_async_callable(_CallableObject)
    assert not is_async_callable(max)
    assert EventJobDefinition("job", _AsyncCallableObject()).is_async


def test_definitions_are_frozen_and_compare_by_identity() -> None:
    first, second = _event(), _event()
    assert first != second
    assert first == first
    assert len({first, second, first}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.priority = 5  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Recurrent definitions


def _next_run(now: datetime) -> datetime:
    return now + timedelta(hours=1)


def test_recurrent_schedules() -> None:
    every = _recurrent(run_every="5m")
    assert every.type is JobType.RECURRENT
    assert every.schedule == RunEvery(timedelta(minutes=5))
    cron = RecurrentJobDefinition("c", recurrent_handler, cron="0 3 * * *", timezone="Europe/Paris")
    assert cron.schedule == CronSchedule("0 3 * * *", "Europe/Paris")
    custom = RecurrentJobDefinition("n", recurrent_handler, next_run=_next_run)
    assert custom.schedule == CustomSchedule(_next_run)
    rule = RunEvery(timedelta(minutes=1), anchor="slot")
    assert RecurrentJobDefinition("s", recurrent_handler, schedule=rule).schedule is rule


def test_recurrent_defaults_and_options() -> None:
    definition = _recurrent()
    assert definition.priority == 1000, "recurrent jobs go before the events' default 100"
    assert definition.lock_time is None
    assert definition.save_executions_for == timedelta(days=7)
    assert definition.cancel_on_stale is True
    assert definition.heartbeat_fraction is None
    assert definition.heartbeat_interval(timedelta(seconds=30)) is None
    assert definition.effective_lock_time(timedelta(seconds=30)) == timedelta(seconds=30)
    full = _recurrent(
        priority=0,
        lock_time="20m",
        save_executions_for=0,
        on_error=on_error_recurrent,
        on_stale=event_handler,
        heartbeat=True,
        timeout="1h",
        cancel_on_stale=False,
    )
    assert full.priority == 0
    assert full.effective_lock_time(timedelta(seconds=30)) == timedelta(minutes=20)
    assert full.heartbeat_interval(timedelta(minutes=30)) == timedelta(minutes=10)
    assert full.heartbeat_fraction == DEFAULT_HEARTBEAT_FRACTION
    assert full.timeout == timedelta(hours=1)
    assert full.on_error is on_error_recurrent


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_every": "5m", "cron": "0 3 * * *", "timezone": "UTC"}, "cron"),
        ({"run_every": "5m", "next_run": _next_run}, "next_run"),
        ({"schedule": RunEvery(timedelta(1)), "run_every": "5m"}, "run_every"),
        ({"schedule": RunEvery(timedelta(1)), "timezone": "UTC"}, "timezone"),
        ({"schedule": RunEvery(timedelta(1)), "cron": "0 3 * * *"}, "cron"),
        ({"schedule": RunEvery(timedelta(1)), "next_run": _next_run}, "next_run"),
    ],
)
def test_recurrent_rejects_conflicting_schedules(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidScheduleError, match="conflicting options") as error:
        RecurrentJobDefinition("r", recurrent_handler, **options)
    _assert_names(error, field)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({}, "schedule"),
        ({"schedule": "every 5 minutes"}, "schedule"),
        ({"cron": "0 3 * * *"}, "timezone"),
        ({"cron": "0 3 * * *", "timezone": "Mars/Base"}, "timezone"),
        ({"cron": "not a cron", "timezone": "UTC"}, "cron"),
        ({"run_every": 0}, "run_every"),
        ({"next_run": "tomorrow"}, "next_run"),
    ],
)
def test_recurrent_rejects_bad_schedules(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidScheduleError) as error:
        RecurrentJobDefinition("r", recurrent_handler, **options)
    _assert_names(error, field)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("handler", event_handler),
        ("priority", 1.0),
        ("lock_time", 0),
        ("save_executions_for", -1),
        ("on_error", recurrent_handler),
        ("on_stale", on_error_event),
        ("retry", 3),
        ("cancel_on_stale", "yes"),
        ("heartbeat", 2),
        ("timeout", -3),
    ],
)
def test_recurrent_rejects_bad_options(field: str, value: Any) -> None:
    arguments: dict[str, Any] = {"name": "r", "handler": recurrent_handler, "run_every": 60}
    arguments[field] = value
    with pytest.raises(InvalidOptionError) as error:
        RecurrentJobDefinition(**arguments)
    _assert_names(error, field)


def test_recurrent_has_no_event_only_options() -> None:
    with pytest.raises(TypeError):
        RecurrentJobDefinition("r", recurrent_handler, run_every=60, max_tries=3)  # type: ignore[call-arg]


# --------------------------------------------------------------------------------------------
# Params models


def test_params_model_is_derived_from_the_handler_annotation() -> None:
    assert EventJobDefinition("w", welcome_handler).params_model is Welcome
    assert EventJobDefinition("i", invoice_handler).params_model is Invoice
    assert EventJobDefinition("e", event_handler).params_model is None
    assert EventJobDefinition("s", _star).params_model is None
    assert EventJobDefinition("m", max).params_model is None
    assert EventJobDefinition("w", welcome_handler, params_model=Invoice).params_model is Invoice


def test_params_model_derivation_with_real_and_unresolvable_annotations() -> None:
    def real(params: Any, ctx: Any) -> None: ...

    real.__annotations__ = {"params": Welcome, "ctx": Any}
    assert EventJobDefinition("r", real).params_model is Welcome

    def unresolvable(params: Any, ctx: Any) -> None: ...

    unresolvable.__annotations__ = {"params": "DoesNotExist", "ctx": "Any"}
    assert EventJobDefinition("u", unresolvable).params_model is None

    def mapping(params: dict[str, int], ctx: Any) -> None: ...

    assert EventJobDefinition("d", mapping).params_model is None


def test_is_params_model() -> None:
    assert is_params_model(Welcome)
    assert is_params_model(Invoice)
    assert not is_params_model(Welcome(user_id=1))
    assert not is_params_model(Invoice(1))
    assert not is_params_model(dict)
    assert not is_params_model("Welcome")


def _welcome_job() -> EventJobDefinition:
    return EventJobDefinition("send_welcome", welcome_handler)


def test_validate_params_with_pydantic_coerces() -> None:
    definition = _welcome_job()
    assert validate_params(definition, {"user_id": "10"}) == {"user_id": 10, "locale": "en"}
    assert validate_params(definition, MappingProxyType({"user_id": 7})) == {
        "user_id": 7,
        "locale": "en",
    }
    assert validate_params(definition, Welcome(user_id=3, locale="es")) == {
        "user_id": 3,
        "locale": "es",
    }


@pytest.mark.parametrize("params", [{"user_id": "ten"}, {}, None, 5, "user_id=1", [1]])
def test_validate_params_with_pydantic_rejects(params: object) -> None:
    with pytest.raises(InvalidParamsError, match="send_welcome") as error:
        validate_params(_welcome_job(), params)
    _assert_names(error, "params")


def test_validate_params_none_with_an_all_defaults_model() -> None:
    def handler(params: AllDefaults, ctx: Any) -> None: ...

    definition = EventJobDefinition("defaults", handler)
    assert validate_params(definition, None) == {"retries": 3}
    loaded = load_params(definition, None)
    assert isinstance(loaded, AllDefaults)
    assert loaded.retries == 3


def test_validate_params_rejects_a_model_dump_that_is_not_storable() -> None:
    def handler(params: WithSet, ctx: Any) -> None: ...

    with pytest.raises(InvalidParamsError, match="set") as error:
        validate_params(EventJobDefinition("tags", handler), {"tags": ["a"]})
    _assert_names(error, "params.tags")


def test_validate_params_rejects_a_model_that_is_not_a_document() -> None:
    numbers = pydantic.RootModel[list[int]]
    definition = EventJobDefinition("numbers", event_handler, params_model=numbers)
    with pytest.raises(InvalidParamsError, match="must serialize to a mapping") as error:
        validate_params(definition, numbers([1, 2]))
    _assert_names(error, "params")


def test_validate_params_with_a_dataclass() -> None:
    definition = EventJobDefinition("invoice", invoice_handler)
    assert validate_params(definition, {"invoice_id": 4}) == {"invoice_id": 4, "lines": []}
    assert validate_params(definition, Invoice(5, ["a"])) == {"invoice_id": 5, "lines": ["a"]}
    with pytest.raises(InvalidParamsError, match="do not match Invoice") as error:
        validate_params(definition, {"wrong": 1})
    _assert_names(error, "params")
    with pytest.raises(InvalidParamsError, match="'invoice'"):
        validate_params(definition, None)


def test_validate_params_without_a_model() -> None:
    definition = _event()
    assert validate_params(definition, None) is None
    stored = validate_params(definition, {"a": (1, 2), "b": MappingProxyType({"c": None})})
    assert stored == {"a": [1, 2], "b": {"c": None}}
    assert type(stored) is dict
    assert type(stored["b"]) is dict


@pytest.mark.parametrize("params", [[1, 2], "text", 5, Welcome(user_id=1), Invoice(1)])
def test_validate_params_without_a_model_needs_a_mapping(params: object) -> None:
    with pytest.raises(InvalidParamsError, match="params_model") as error:
        validate_params(_event(), params)
    _assert_names(error, "params")


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"a": {1, 2}}, "params.a"),
        ({"a": [1, {"b": object()}]}, "params.a[1].b"),
        ({"at": datetime(2026, 1, 1)}, "params.at"),
        ({"day": date(2026, 1, 1)}, "params.day"),
        ({"amount": Decimal("1.5")}, "params.amount"),
        ({"big": 2**63}, "params.big"),
        ({"small": -(2**63) - 1}, "params.small"),
        ({"wait": timedelta(1)}, "params.wait"),
        ({"nested": {"x": frozenset()}}, "params.nested.x"),
        ({1: "a"}, "params"),
        ({"a": {("t",): 1}}, "params.a"),
        ({"a\x00b": 1}, "params['a\\x00b']"),
        ({"$set": 1}, "params['$set']"),
        ({"a": {"$where": "x"}}, "params.a['$where']"),
        ({"dotted.key": {"bad": {1}}}, "params['dotted.key'].bad"),
    ],
)
def test_non_bson_params_are_rejected_with_their_path(params: Any, path: str) -> None:
    with pytest.raises(InvalidParamsError, match="job 'job'") as error:
        validate_params(_event(), params)
    _assert_names(error, path)


def test_deep_and_cyclic_params_are_rejected() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(150):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(InvalidParamsError, match="nested more than 100"):
        validate_params(_event(), deep)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(InvalidParamsError, match="nested more than 100"):
        validate_params(_event(), {"loop": cyclic})


def test_bson_storable_values_are_accepted() -> None:
    value = {
        "none": None,
        "bool": True,
        "int": 2**53 - 1,
        "neg": -(2**53 - 1),
        "int64": Int64(2**63 - 1),
        "float": 1.5,
        "nan": math.nan,
        "str": "héllo",
        "nul_in_value": "a\x00b",
        "bytes": b"\x00\x01",
        "uuid": uuid.uuid4(),
        "at": NOW,
        "at_paris": datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/Paris")),
        "oid": ObjectId(),
        "list": [1, [2, {"x": 3}]],
        "dotted.key": 1,
    }
    check_bson_storable(value)
    assert to_bson_storable(value) is not value
    with pytest.raises(InvalidParamsError) as error:
        check_bson_storable({"a": {1}}, "payload")
    assert str(error.value).startswith("payload.a=")
    assert "job" not in str(error.value)


bson_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.uuids()
    | st.datetimes(timezones=st.just(UTC))
)
bson_keys = st.text(min_size=1).filter(lambda k: "\x00" not in k and not k.startswith("$"))
bson_values = st.recursive(
    bson_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(bson_keys, children, max_size=4)
    ),
    max_leaves=20,
)


def _lists(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


@given(st.dictionaries(bson_keys, bson_values, max_size=5))
def test_storable_params_round_trip(params: dict[str, Any]) -> None:
    stored = validate_params(_event(), params)
    assert stored == _lists(params)
    assert load_params(_event(), stored) == stored


@given(st.dictionaries(bson_keys, bson_values, min_size=1, max_size=5), st.data())
def test_one_bad_value_anywhere_is_found(params: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(params)))
    params[key] = [params[key], {"bad": {1, 2}}]
    with pytest.raises(InvalidParamsError) as error:
        validate_params(_event(), params)
    assert error.value.field.endswith("[1].bad")
    assert error.value.value == {1, 2}


# --------------------------------------------------------------------------------------------
# load_params


def test_load_params() -> None:
    welcome = _welcome_job()
    loaded = load_params(welcome, {"user_id": 10, "locale": "fr"})
    assert loaded == Welcome(user_id=10, locale="fr")
    invoice = EventJobDefinition("invoice", invoice_handler)
    assert load_params(invoice, {"invoice_id": 1, "lines": ["x"]}) == Invoice(1, ["x"])
    assert load_params(_event(), {"a": 1}) == {"a": 1}
    assert load_params(_event(), None) is None
    assert load_params(_recurrent(), None) is None


def test_load_params_rejects_stored_params_that_no_longer_fit() -> None:
    with pytest.raises(InvalidParamsError, match="stored params do not match Welcome") as error:
        load_params(_welcome_job(), {"user_id": "not a number"})
    _assert_names(error, "params")
    with pytest.raises(InvalidParamsError, match="stored params do not match Invoice"):
        load_params(EventJobDefinition("invoice", invoice_handler), {"other": 1})


# ----------------------------------------------------------------------------------------------
# The messages of params keys MongoDB cannot store


def _params_error(params: object) -> InvalidParamsError:
    with pytest.raises(InvalidParamsError) as raised:
        to_bson_storable(params, path="params", job="send")
    return raised.value


def test_a_key_that_is_not_a_string_is_named_as_a_key() -> None:
    error = _params_error({1: "a"})
    assert str(error) == "params key 1: job 'send': keys must be strings, not int"
    assert (error.field, error.value) == ("params", 1)
    assert error.reason == "job 'send': keys must be strings, not int"


def test_a_dollar_key_says_why_it_is_refused_once() -> None:
    error = _params_error({"$where": "1 == 1"})
    assert str(error) == (
        "params['$where']: job 'send': key not allowed: it starts with '$' (MongoDB operators do)"
    )
    assert (error.field, error.value) == ("params['$where']", "$where")
    assert str(error).count("$where") == 1


def test_a_nested_bad_key_names_its_path() -> None:
    assert str(_params_error({"a": {2: "x"}})).startswith("params.a key 2: ")
    error = _params_error({"a": [{"b\x00": 1}]})
    assert str(error).startswith("params.a[0]['b\\x00']: job 'send': key not allowed: ")
    assert "NUL" in str(error)


def test_params_functions_are_reexported_from_definitions() -> None:
    from dogs_core.domain import definitions, params

    for name in params.__all__:
        assert getattr(definitions, name) is getattr(params, name)
