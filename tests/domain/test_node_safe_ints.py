"""Numbers a Node worker can read (issue 16 item 3): priorities and params ints are limited to
what a JavaScript number holds exactly, +/-(2**53 - 1); a ``bson.Int64`` is the explicit opt-out
of a Python-only fleet; a handler result beyond the range is kept in history as its ``repr``.

The values that broke Node Dogs 4.6.8 in the measurement were priorities 2**62 and 2**63 - 1."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pydantic
import pytest
from bson import Int64
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain import validation
from dogs_core.domain.definitions import (
    EventJobDefinition,
    RecurrentJobDefinition,
    to_bson_storable,
    validate_params,
)
from dogs_core.domain.history import history_record
from dogs_core.domain.records import ClaimedJob, HistoryStatus, JobType
from dogs_core.domain.validation import (
    MAX_SAFE_INTEGER,
    MIN_SAFE_INTEGER,
    NODE_SAFE_INT_RANGE,
    is_node_safe_int,
)
from dogs_core.errors import InvalidOptionError, InvalidParamsError

SAFE = st.integers(min_value=MIN_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
UNSAFE = st.integers(min_value=MAX_SAFE_INTEGER + 1) | st.integers(max_value=MIN_SAFE_INTEGER - 1)
#: The priorities that broke a Node worker in the measurement, and the first ints past the range.
BROKE_NODE = [2**62, 2**63 - 1, 2**53, -(2**53), -(2**63)]


async def handler(params: dict[str, Any] | None, ctx: Any) -> None:
    return None


async def tick(ctx: Any) -> None:
    return None


def test_the_range_is_javascripts_safe_integers() -> None:
    assert MAX_SAFE_INTEGER == 9_007_199_254_740_991 == 2**53 - 1
    assert MIN_SAFE_INTEGER == -MAX_SAFE_INTEGER
    assert NODE_SAFE_INT_RANGE[0] == MIN_SAFE_INTEGER
    assert NODE_SAFE_INT_RANGE[-1] == MAX_SAFE_INTEGER
    # Every int of the range is exact as an IEEE double (a JavaScript number); 2**53 + 1 is not.
    assert float(MAX_SAFE_INTEGER) == MAX_SAFE_INTEGER
    assert int(float(2**53 + 1)) != 2**53 + 1


@pytest.mark.parametrize("value", [0, 1, -1, MAX_SAFE_INTEGER, MIN_SAFE_INTEGER])
def test_priorities_within_the_range_are_kept(value: int) -> None:
    assert validation.priority("priority", value) == value


@pytest.mark.parametrize("value", BROKE_NODE)
def test_priorities_beyond_the_range_are_refused_naming_field_and_value(value: int) -> None:
    with pytest.raises(InvalidOptionError) as error:
        validation.priority("priority", value)
    assert (error.value.field, error.value.value) == ("priority", value)
    message = str(error.value)
    assert message.startswith(f"priority={value}:")
    assert "9007199254740991" in message
    assert "Node" in message


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_priorities_that_are_not_ints_are_refused(value: object) -> None:
    with pytest.raises(InvalidOptionError, match="must be an int"):
        validation.priority("priority", value)


@given(SAFE)
def test_any_safe_int_is_a_priority(value: int) -> None:
    assert is_node_safe_int(value)
    assert validation.priority("priority", value) == value


@given(UNSAFE)
def test_any_unsafe_int_is_refused_as_a_priority(value: int) -> None:
    assert not is_node_safe_int(value)
    with pytest.raises(InvalidOptionError):
        validation.priority("priority", value)


def test_an_int64_priority_is_checked_like_an_int_and_stored_as_one() -> None:
    kept = validation.priority("priority", Int64(5))
    assert (kept, type(kept)) == (5, int)
    with pytest.raises(InvalidOptionError):
        validation.priority("priority", Int64(2**62))


@pytest.mark.parametrize("value", [2**62, 2**63 - 1, 2**53])
def test_job_definitions_refuse_a_priority_node_cannot_read(value: int) -> None:
    with pytest.raises(InvalidOptionError, match=r"^priority="):
        EventJobDefinition("big", handler, priority=value)
    with pytest.raises(InvalidOptionError, match=r"^priority="):
        RecurrentJobDefinition("tick", tick, run_every=60, priority=value)
    assert EventJobDefinition("ok", handler, priority=MAX_SAFE_INTEGER).priority == 2**53 - 1


def _event() -> EventJobDefinition:
    return EventJobDefinition("orders", handler)


@pytest.mark.parametrize(
    ("params", "path", "value"),
    [
        ({"n": 2**53}, "params.n", 2**53),
        ({"n": -(2**53)}, "params.n", -(2**53)),
        ({"order": {"total": 2**62}}, "params.order.total", 2**62),
        ({"ids": [1, 2**63 - 1]}, "params.ids[1]", 2**63 - 1),
        ({"n": 2**64}, "params.n", 2**64),
    ],
)
def test_params_ints_beyond_the_range_are_refused_with_their_path(
    params: dict[str, Any], path: str, value: int
) -> None:
    with pytest.raises(InvalidParamsError) as error:
        validate_params(_event(), params)
    assert (error.value.field, error.value.value) == (path, value)
    message = str(error.value)
    assert message.startswith(f"{path}={value}: job 'orders':")
    assert "as a string" in message
    assert "float" in message
    assert "bson.Int64" in message


@pytest.mark.parametrize("value", [MAX_SAFE_INTEGER, MIN_SAFE_INTEGER, 0, 2**31, -(2**31) - 1])
def test_params_ints_within_the_range_are_stored_as_given(value: int) -> None:
    stored = validate_params(_event(), {"n": value, "deep": [{"m": value}]})
    assert stored == {"n": value, "deep": [{"m": value}]}


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), SAFE))
def test_any_mapping_of_safe_ints_is_stored_unchanged(params: dict[str, int]) -> None:
    assert validate_params(_event(), params) == (params or {})


@given(UNSAFE)
def test_any_unsafe_int_in_params_is_refused(value: int) -> None:
    with pytest.raises(InvalidParamsError, match=r"^params\.x\.n="):
        validate_params(_event(), {"x": {"n": value}})


@pytest.mark.parametrize("value", [2**62, 2**63 - 1, -(2**63), 5])
def test_a_bson_int64_is_the_explicit_opt_out_and_is_kept_as_an_int64(value: int) -> None:
    stored = validate_params(_event(), {"n": Int64(value)})
    assert stored is not None
    assert (stored["n"], type(stored["n"])) == (value, Int64)


def test_a_bson_int64_must_still_fit_in_64_bits() -> None:
    with pytest.raises(InvalidParamsError, match=r"^params\.n=.*fit in 64 bits"):
        validate_params(_event(), {"n": Int64(2**63)})


@dataclasses.dataclass
class Order:
    total: int


def test_a_params_model_whose_dump_holds_an_unsafe_int_is_refused() -> None:
    definition = EventJobDefinition("order", handler, params_model=Order)
    with pytest.raises(InvalidParamsError, match=r"^params\.total=4611686018427387904"):
        validate_params(definition, Order(2**62))
    assert validate_params(definition, Order(MAX_SAFE_INTEGER)) == {"total": MAX_SAFE_INTEGER}


class Ledger(pydantic.BaseModel):
    """The documented way for a pydantic model to opt out: serialize the field as an Int64."""

    balance: Annotated[int, pydantic.PlainSerializer(Int64, return_type=Any)]


def test_a_pydantic_field_serialized_as_int64_is_stored_as_one() -> None:
    definition = EventJobDefinition("ledger", handler, params_model=Ledger)
    stored = validate_params(definition, {"balance": 2**62})
    assert stored is not None
    assert (stored["balance"], type(stored["balance"])) == (2**62, Int64)


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _claimed(params: dict[str, Any] | None = None) -> ClaimedJob:
    return ClaimedJob(
        job_id="j1",
        job_name="orders",
        type=JobType.EVENT,
        params=params,
        tries=1,
        priority=100,
        execution_id="e1",
        locked_until=NOW + timedelta(seconds=30),
        next_run_at=NOW,
    )


@pytest.mark.parametrize(
    "result", [2**62, {"total": 2**53}, [1, -(2**63)], {"deep": {"n": 2**63 - 1}}]
)
def test_a_result_with_an_unsafe_int_is_kept_in_history_as_its_repr(result: object) -> None:
    row = history_record(_claimed(), _event(), HistoryStatus.SUCCESS, started_at=NOW, ended_at=NOW)
    assert row is not None
    assert row.result is None
    row = history_record(
        _claimed(), _event(), HistoryStatus.SUCCESS, started_at=NOW, ended_at=NOW, result=result
    )
    assert row is not None
    assert row.result == repr(result)


@pytest.mark.parametrize(
    "result", [MAX_SAFE_INTEGER, {"total": MIN_SAFE_INTEGER}, {"big": Int64(2**62)}]
)
def test_a_result_node_can_read_or_an_int64_is_kept_as_is(result: object) -> None:
    row = history_record(
        _claimed(), _event(), HistoryStatus.SUCCESS, started_at=NOW, ended_at=NOW, result=result
    )
    assert row is not None
    assert row.result == result


def test_to_bson_storable_names_the_result_path() -> None:
    with pytest.raises(InvalidParamsError, match=r"^result\.total="):
        to_bson_storable({"total": 2**53}, path="result")
