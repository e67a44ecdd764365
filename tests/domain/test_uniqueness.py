"""Unique keys (pure): the ``Unique`` option's checks, the stable hashing of params fields, what
holds a key, the conflict table and the debounce arithmetic.

The conflict table is written a second time here, as an independent reference
(:func:`expected`), and checked against :func:`resolve` on generated holders and options.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.records import JobRecord, JobStatus, JobType
from dogs_core.domain.uniqueness import (
    ALL_STATES,
    PARK_GRACE,
    Debounce,
    HoldState,
    Replace,
    Skip,
    TakeKey,
    Unique,
    UniqueError,
    Wait,
    canonical_bytes,
    debounced_run_at,
    hold_state,
    params_key,
    resolve,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)

# -- the option's checks ----------------------------------------------------------------------

BAD_OPTIONS = [
    ({}, "unique.key"),  # neither key nor by
    ({"key": "k", "by": ("a",)}, "unique.key"),  # both
    ({"key": ""}, "unique.key"),
    ({"key": 42}, "unique.key"),
    ({"by": ()}, "unique.by"),
    ({"by": ("a", "a")}, "unique.by"),
    ({"by": ("",)}, "unique.by"),
    ({"by": ("a..b",)}, "unique.by"),
    ({"by": ("$where",)}, "unique.by"),
    ({"by": tuple(f"f{i}" for i in range(17))}, "unique.by"),
    ({"key": "k", "scope": "tenant"}, "unique.scope"),
    ({"key": "k", "states": "done"}, "unique.states"),
    ({"key": "k", "states": ()}, "unique.states"),
    ({"key": "k", "period": 0}, "unique.period"),
    ({"key": "k", "period": -5}, "unique.period"),
    ({"key": "k", "period": "soon"}, "unique.period"),
    ({"key": "k", "on_conflict": "merge"}, "unique.on_conflict"),
    ({"key": "k", "on_conflict": "throttle"}, "unique.period"),
    ({"key": "k", "on_conflict": "throttle", "period": 60, "states": "pending"}, "unique.states"),
    ({"key": "k", "on_conflict": "debounce"}, "unique.delay"),
    ({"key": "k", "on_conflict": "debounce", "delay": 0}, "unique.delay"),
    ({"key": "k", "on_conflict": "debounce", "delay": 30, "max_wait": 10}, "unique.max_wait"),
    ({"key": "k", "delay": 30}, "unique.delay"),
    ({"key": "k", "on_conflict": "replace", "max_wait": 30}, "unique.max_wait"),
]


@pytest.mark.parametrize(("options", "field"), BAD_OPTIONS)
def test_a_bad_option_names_its_field(options: dict[str, object], field: str) -> None:
    with pytest.raises(UniqueError) as raised:
        Unique(**options)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_defaults_are_dogs_rule() -> None:
    unique = Unique("k")
    assert unique.states == ALL_STATES
    assert unique.plain
    assert unique.window is None
    assert not Unique("k", period="1m").plain
    assert Unique("k", period="1m").window == timedelta(minutes=1)
    assert Unique("k", on_conflict="throttle", period="1m").window is None
    assert Unique(by="id").by == ("id",)
    assert Unique("k", states="pending").states == {HoldState.PENDING}


# -- stable hashing -----------------------------------------------------------------------------


def test_the_key_of_a_known_value_never_changes() -> None:
    """The documented encoding, pinned: a change here changes every stored derived key."""
    params = {"customer_id": 42, "region": "eu", "at": datetime(2026, 1, 1, tzinfo=UTC)}
    # The values in field order, as a list: "[" + count, then each value tagged ("i" an
    # integer's decimal text, "s" a UTF-8 string), every payload preceded by its length.
    encoded = b"[\0\0\0\x02" + b"i\0\0\0\x0242" + b"s\0\0\0\x02eu"
    assert canonical_bytes([42, "eu"]) == encoded
    digest = hashlib.sha256(encoded).hexdigest()[:32]
    assert params_key(("customer_id", "region"), params) == f"by:customer_id,region:{digest}"
    assert digest == "2dd146a949f69645f42b6b87dea52f96"


def test_values_equal_as_mongodb_compares_them_give_one_key() -> None:
    same = [
        ({"a": 1, "b": [1, 2.0]}, {"b": [1.0, 2], "a": 1.0}),
        ({"x": {"p": 1, "q": 2}}, {"x": {"q": 2, "p": 1}}),
        ({"x": -0.0}, {"x": 0}),
        ({"x": float("nan")}, {"x": float("nan")}),
        ({"x": datetime(2026, 1, 1, 12, tzinfo=UTC)}, {"x": datetime(2026, 1, 1, 12, 0, 0, 400)}),
    ]
    for left, right in same[:4]:
        assert canonical_bytes(left) == canonical_bytes(right)
    with pytest.raises(UniqueError):
        canonical_bytes(same[4][1])  # a naive datetime is refused


def test_different_types_give_different_keys() -> None:
    values: list[object] = [
        None, True, False, 1, 0, "1", b"1", 1.5, [1], (2,), {"1": 1}, "", [], {},
        uuid.UUID(int=1), datetime(2026, 1, 1, tzinfo=UTC), math.inf, -math.inf,
    ]  # fmt: skip
    encoded = [canonical_bytes(value) for value in values]
    assert len(set(encoded)) == len(values)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values, json_values)
def test_equal_encodings_mean_equal_values(left: object, right: object) -> None:
    """No two different values share an encoding (numbers by value: 1 and 1.0 are equal)."""
    if canonical_bytes(left) == canonical_bytes(right):
        assert _normalized(left) == _normalized(right)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=6), st.randoms())
def test_key_order_does_not_matter(params: dict[str, object], rng: object) -> None:
    items = list(params.items())
    rng.shuffle(items)  # type: ignore[attr-defined]
    assert canonical_bytes(params) == canonical_bytes(dict(items))


def _normalized(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", float(value) if not float(value).is_integer() else int(value))
    if isinstance(value, dict):
        return ("map", sorted((k, _normalized(v)) for k, v in value.items()))
    assert isinstance(value, list | tuple)
    return ("list", [_normalized(v) for v in value])


def test_a_missing_field_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(UniqueError, match=r"no field 'customer'.*customer_id"):
        params_key(("customer",), {"customer_id": 1})
    with pytest.raises(UniqueError):
        params_key(("a.b",), {"a": 1})
    assert params_key(("a.b",), {"a": {"b": 2}}) == params_key(("a.b",), {"a": {"b": 2.0}})


def test_an_unstorable_value_is_refused() -> None:
    with pytest.raises(UniqueError, match="set"):
        params_key(("a",), {"a": {1, 2}})


# -- what holds the key, and the conflict table -----------------------------------------------

holders = st.builds(
    lambda state, parked_for, tries: _holder(state, parked_for, tries),
    st.sampled_from(["scheduled", "due", "running", "stale", "retrying", "failed"]),
    st.none() | st.integers(0, 60),
    st.integers(0, 3),
)
uniques = st.builds(
    lambda mode, states, cap: Unique(
        "k",
        on_conflict=mode,
        states=states,
        delay=30 if mode == "debounce" else None,
        max_wait=cap if mode == "debounce" else None,
    ),
    st.sampled_from(["skip", "replace", "debounce"]),
    st.sets(st.sampled_from(list(HoldState)), min_size=1),
    st.none() | st.integers(30, 600),
)


def _holder(state: str, parked_for: int | None, tries: int) -> JobRecord:
    locked = {
        "running": NOW + 60 * S,
        "stale": NOW - 60 * S,
    }.get(state)
    return JobRecord(
        id="holder",
        job_name="job",
        type=JobType.EVENT,
        priority=100,
        next_run_at=NOW + (60 * S if state == "scheduled" else -60 * S),
        unique_identifier="k",
        locked_until=locked,
        lock_id=None if locked is None else "lock",
        tries=tries if state in ("retrying", "failed") else None,
        status=JobStatus.MAX_TRIES_REACHED if state == "failed" else None,
        debounce_until=NOW + 120 * S,
        parked_at=None if parked_for is None else NOW - parked_for * S,
    )


def expected(unique: Unique, holder: JobRecord) -> object:
    """The module's table, written again."""
    state = {"failed": HoldState.FAILED, "running": HoldState.RUNNING}.get(
        "failed" if holder.status else "running" if holder.locked_until == NOW + 60 * S else "",
        HoldState.PENDING,
    )
    if holder.parked_at is not None:
        return Wait("holder", abandoned=NOW - holder.parked_at > PARK_GRACE)
    if state not in unique.states:
        return TakeKey("holder", state)
    if unique.on_conflict == "skip" or state is HoldState.FAILED:
        return Skip("holder")
    if state is HoldState.RUNNING:
        return TakeKey("holder", state, behind=holder.locked_until)
    if unique.on_conflict == "replace":
        return Replace("holder")
    assert unique.delay is not None
    capped = min(NOW + unique.delay, holder.debounce_until or NOW + unique.delay)
    return Debounce("holder", capped)


@given(uniques, holders)
def test_resolve_follows_the_table(unique: Unique, holder: JobRecord) -> None:
    assert resolve(unique, holder, NOW) == expected(unique, holder)


@given(holders)
def test_hold_states_follow_the_record_states(holder: JobRecord) -> None:
    state = hold_state(holder, NOW)
    assert (state is HoldState.FAILED) == (holder.status is JobStatus.MAX_TRIES_REACHED)
    running = holder.locked_until is not None and holder.locked_until > NOW
    assert (state is HoldState.RUNNING) == (running and holder.status is None)


@given(
    st.integers(0, 10_000).map(lambda s: NOW + s * S),
    st.integers(1, 600).map(lambda s: s * S),
    st.none() | st.integers(0, 10_000).map(lambda s: NOW + s * S),
)
def test_a_debounced_time_is_never_past_its_cap(
    now: datetime, delay: timedelta, cap: datetime | None
) -> None:
    run_at = debounced_run_at(now, delay, cap)
    assert run_at <= now + delay
    if cap is None or now + delay <= cap:
        assert run_at == now + delay
    else:
        assert run_at == cap
    later = debounced_run_at(now + S, delay, cap)
    assert later >= run_at  # a later call never moves the run earlier
