"""Uniqueness at the door (pure): which key a call holds, and what a call does when the key is
taken: skip it, replace the pending record, debounce it, or throttle.

:class:`Unique` is the ``unique=`` option of ``schedule``, validated at construction::

    Unique(key="cust:42", period="10m")                   # taken while it exists, then 10 minutes
    Unique(by=("customer_id",), states="pending")         # key from params, held while pending
    Unique(key="reindex", on_conflict="replace")          # the newest params win
    Unique(key=k, on_conflict="debounce", delay="30s", max_wait="5m")
    Unique(key=k, on_conflict="throttle", period="1m")    # at most one per minute, the rest dropped

The key
    ``key`` is used as given; ``by`` names params fields (dotted paths reach into nested
    mappings) whose values are hashed into the key by :func:`params_key`. A job's
    ``unique_scope="job"`` (or ``Unique(scope="job")``) prefixes the job name, as ``unique_key=``
    does. The key is stored in Dogs' ``uniqueIdentifier`` and held by its sparse unique index,
    so a Node ``scheduleJob`` with the same identifier sees the duplicate while the record
    exists.

Stable hashing (:func:`canonical_bytes`)
    The values of the ``by`` fields are encoded canonically, then hashed with SHA-256; the key is
    ``by:<fields>:<first 32 hex digits>``. The encoding is type-tagged and independent of dict
    order, Python version and process: ``None``; ``True``/``False`` (distinct from 1 and 0, as
    in BSON); numbers by value as MongoDB compares them (``1``, ``1.0`` and ``Int64(1)`` are one
    key; ``-0.0`` is ``0``; NaN is one value; ``Decimal128`` by its decimal text); strings
    (UTF-8); bytes; timezone-aware datetimes as UTC milliseconds (BSON's precision); UUIDs;
    other ``bson`` values (ObjectId...) by type name and text; lists and tuples in order;
    mappings by sorted keys (``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are one key, unlike
    BSON's byte comparison). A missing field is an error, not a null.

What holds the key (``states``)
    The states of the holding record in which it holds the key: ``"pending"`` (scheduled, due,
    awaiting a retry, or waiting for recovery after its worker died), ``"running"`` (its lock is
    live) and ``"failed"`` (an event record at its attempt limit). The default, all three, is
    Dogs' rule: held while the record exists. A record in another state gives the key up
    (:class:`TakeKey`): its ``uniqueIdentifier`` is removed and the new call's record takes it.
    ``period`` keeps the key taken for that long after the record ended (succeeded, discarded,
    failed) even once it is gone.

On a taken key (``on_conflict``, decided by :func:`resolve`)
    ``"skip"`` (default): nothing is written, ``Duplicate``. ``"replace"``: a pending holder
    takes the new params, run time, priority, tags and deadline (``Replaced``); a running one is
    left alone, and the new call's record waits behind it (its run time is no earlier than the
    running lock's deadline, :class:`TakeKey` with ``behind``). ``"debounce"``: a pending holder
    takes the new params and its run time moves to ``now + delay``, but never past
    ``first call + max_wait`` (:func:`debounced_run_at`, ``Debounced``); a running holder is
    treated as for replace. A failed holder is never replaced: ``Duplicate``. ``"throttle"``: the
    first call of each ``period`` (counted from that call) schedules; every other call in the
    period is dropped (``Duplicate`` with ``reason="throttle"``), whatever became of the record.
    A record **parked** by a call that is still checking its key's window is never the answer
    (it may be dropped): the call waits for it (:class:`Wait`), so every ``Duplicate`` names a
    record that exists or ran.

Nothing here does I/O: the scheduling client (:mod:`dogs_core.runtime.uniqueness`) performs the
decisions through the store's uniqueness role (:mod:`dogs_core.ports.uniqueness`).
"""

from __future__ import annotations

import enum
import hashlib
import math
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, TypeAlias

from dogs_core.domain import validation
from dogs_core.domain.records import (
    JobRecord,
    JobState,
)
from dogs_core.domain.values import value
from dogs_core.errors import InvalidOptionError, UniqueError

__all__ = [
    "ALL_STATES",
    "MAX_BY_FIELDS",
    "PARKED_AT",
    "PARK_GRACE",
    "Conflict",
    "Debounce",
    "HoldState",
    "OnConflict",
    "PendingUpdate",
    "Replace",
    "Skip",
    "TakeKey",
    "Unique",
    "UniqueError",
    "UniqueHold",
    "Wait",
    "canonical_bytes",
    "debounced_next_run",
    "debounced_run_at",
    "hold_state",
    "is_parked",
    "params_key",
    "resolve",
]

OnConflict: TypeAlias = Literal["skip", "replace", "debounce", "throttle"]
_ON_CONFLICT: Final = ("skip", "replace", "debounce", "throttle")

#: The most params fields ``by`` may name.
MAX_BY_FIELDS: Final = 16

#: The run time of a record parked while its call checks the key's window: no claim (ours or a
#: Node worker's) takes a record due in the year 9999. A plain BSON date.
PARKED_AT: Final = datetime(9999, 12, 31, tzinfo=UTC)

#: A parked record older than this was left by a call that died between its two writes: the
#: next call of its key finishes it (publishes it, or drops it in a live window).
PARK_GRACE: Final = timedelta(seconds=30)

_HASH_DIGITS: Final = 32


class HoldState(enum.StrEnum):
    """Where a record holding a unique key stands, for ``Unique(states=...)``."""

    PENDING = "pending"
    """Not running: scheduled, due, awaiting a retry, or stale (its worker died)."""
    RUNNING = "running"
    """Its lock is live."""
    FAILED = "failed"
    """An event record at its attempt limit (``maxTriesReached``)."""


ALL_STATES: Final = frozenset(HoldState)
"""Dogs' rule: the key is held while the record exists."""


@dataclass(frozen=True, slots=True)
class Unique:
    """The ``unique=`` option of ``schedule``: see the module documentation.

    ``key`` (a non-empty string) or ``by`` (params fields, hashed into the key), not both;
    ``scope`` ``"global"`` or ``"job"`` (``None``: the job's ``unique_scope``); ``states`` (a
    state or several: ``"pending"``, ``"running"``, ``"failed"``; default all three);
    ``period`` (a positive duration: the window after the record ended, or the throttle's
    period, which it requires); ``on_conflict`` (``"skip"``, ``"replace"``, ``"debounce"`` or
    ``"throttle"``); ``delay`` (debounce only, required: how long after the last call the job
    runs) and ``max_wait`` (debounce only, at least ``delay``: the latest run counted from the
    first call). Every bad value raises :class:`UniqueError` naming it.
    """

    key: str | None = None
    by: tuple[str, ...] | None = None
    scope: Literal["global", "job"] | None = None
    states: frozenset[HoldState] = field(default=ALL_STATES)
    period: timedelta | None = None
    on_conflict: OnConflict = "skip"
    delay: timedelta | None = None
    max_wait: timedelta | None = None

    def __init__(
        self,
        key: str | None = None,
        *,
        by: Iterable[str] | str | None = None,
        scope: Literal["global", "job"] | None = None,
        states: Iterable[HoldState | str] | HoldState | str | None = None,
        period: validation.DurationLike | None = None,
        on_conflict: OnConflict = "skip",
        delay: validation.DurationLike | None = None,
        max_wait: validation.DurationLike | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "key", _key(key))
        set_(self, "by", _by(by))
        if (self.key is None) == (self.by is None):
            given = "both" if self.key is not None else "neither"
            reason = f"give exactly one of key= and by= ({given} given)"
            raise UniqueError("unique.key", key, reason)
        if scope is not None and scope not in ("global", "job"):
            raise UniqueError("unique.scope", scope, "must be 'global', 'job' or None")
        set_(self, "scope", scope)
        if on_conflict not in _ON_CONFLICT:
            raise UniqueError("unique.on_conflict", on_conflict, f"must be one of {_ON_CONFLICT}")
        set_(self, "on_conflict", on_conflict)
        set_(self, "states", _states(states, on_conflict))
        set_(self, "period", _positive("unique.period", period))
        set_(self, "delay", _positive("unique.delay", delay))
        set_(self, "max_wait", _positive("unique.max_wait", max_wait))
        self._check_combination()

    def _check_combination(self) -> None:
        mode = self.on_conflict
        if mode == "throttle" and self.period is None:
            raise UniqueError("unique.period", None, "on_conflict='throttle' needs a period")
        if mode != "debounce":
            for name in ("delay", "max_wait"):
                if getattr(self, name) is not None:
                    reason = f"only applies to on_conflict='debounce', not {mode!r}"
                    raise UniqueError(f"unique.{name}", getattr(self, name), reason)
            return
        if self.delay is None:
            raise UniqueError("unique.delay", None, "on_conflict='debounce' needs a delay")
        if self.max_wait is not None and self.max_wait < self.delay:
            raise UniqueError(
                "unique.max_wait",
                self.max_wait,
                f"must be at least the delay ({self.delay}): the run is never before it",
            )

    @property
    def plain(self) -> bool:
        """Whether this is what ``unique_key=`` does: skip while the record exists, no window.
        Such a call needs nothing but Dogs' unique index."""
        return self.on_conflict == "skip" and self.states == ALL_STATES and self.period is None

    @property
    def window(self) -> timedelta | None:
        """How long the key stays taken after its record ended (not for throttle, whose
        period runs from the call)."""
        return None if self.on_conflict == "throttle" else self.period


def _key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or "\x00" in key:
        raise UniqueError("unique.key", key, "must be a non-empty string without NUL")
    return key


def _by(by: object) -> tuple[str, ...] | None:
    if by is None:
        return None
    fields = (by,) if isinstance(by, str) else by
    if not isinstance(fields, Iterable):
        raise UniqueError("unique.by", by, "must be a params field name or a tuple of them")
    names = tuple(fields)
    if not names:
        raise UniqueError("unique.by", by, "must name at least one params field")
    if len(names) > MAX_BY_FIELDS:
        raise UniqueError("unique.by", by, f"must name at most {MAX_BY_FIELDS} fields")
    for name in names:
        if not isinstance(name, str) or not name or name.startswith(".") or ".." in name:
            raise UniqueError("unique.by", name, "each field must be a name such as 'id' or 'a.b'")
        if name.endswith(".") or name.startswith("$"):
            raise UniqueError("unique.by", name, "each field must be a name such as 'id' or 'a.b'")
    if len(set(names)) != len(names):
        raise UniqueError("unique.by", by, "names a field twice")
    return names


def _states(states: object, on_conflict: str) -> frozenset[HoldState]:
    if states is None:
        return ALL_STATES
    if on_conflict == "throttle":
        raise UniqueError(
            "unique.states", states, "does not apply to throttle (its period runs from the call)"
        )
    given = [states] if isinstance(states, str) else states
    if not isinstance(given, Iterable):
        raise UniqueError("unique.states", states, "must be a state or a collection of states")
    try:
        chosen = frozenset(HoldState(str(state)) for state in given)
    except ValueError:
        choices = ", ".join(state.value for state in HoldState)
        raise UniqueError("unique.states", states, f"each state must be one of {choices}") from None
    if not chosen:
        raise UniqueError("unique.states", states, "must name at least one state")
    return chosen


def _positive(name: str, value: object) -> timedelta | None:
    if value is None:
        return None
    try:
        return validation.positive_duration(name, value)
    except InvalidOptionError as error:
        raise UniqueError(name, value, error.reason) from None


# --------------------------------------------------------------------------------------------
# The key


def params_key(fields: tuple[str, ...], params: Mapping[str, Any] | None) -> str:
    """The key of ``Unique(by=fields)`` for the stored ``params``:
    ``by:<fields joined by ,>:<32 hex digits of SHA-256>`` over the canonical encoding of the
    fields' values (:func:`canonical_bytes`). A field missing from params raises
    :class:`UniqueError` naming it."""
    values = [_field(params, name) for name in fields]
    digest = hashlib.sha256(canonical_bytes(values)).hexdigest()[:_HASH_DIGITS]
    return f"by:{','.join(fields)}:{digest}"


def _field(params: Mapping[str, Any] | None, path: str) -> object:
    current: object = params
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            known = sorted(params) if isinstance(params, Mapping) else []
            reason = f"params have no field {path!r} (their fields: {', '.join(known) or 'none'})"
            raise UniqueError("unique.by", path, reason)
        current = current[part]
    return current


def canonical_bytes(value: object) -> bytes:
    """The canonical, type-tagged encoding of a BSON-like value (see the module documentation):
    equal values as MongoDB compares them (but mappings regardless of key order) give equal
    bytes, different ones different bytes."""
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def _encode(value: object, out: bytearray) -> None:
    if value is None:
        out += b"n"
    elif isinstance(value, bool):
        out += b"T" if value else b"F"
    elif isinstance(value, int | float):
        _number(value, out)
    elif isinstance(value, str):
        _chunk(b"s", value.encode("utf-8"), out)
    elif isinstance(value, bytes):
        _chunk(b"b", value, out)
    elif isinstance(value, datetime):
        if value.utcoffset() is None:
            raise UniqueError("unique.by", value, "naive datetimes are ambiguous")
        millis = math.floor((value - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))
        out += b"d" + struct.pack(">q", millis)
    elif isinstance(value, uuid.UUID):
        out += b"u" + value.bytes
    elif isinstance(value, Mapping):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda item: item[0])
        out += b"{" + struct.pack(">I", len(items))
        for key, item in items:
            _chunk(b"k", key.encode("utf-8"), out)
            _encode(item, out)
    elif isinstance(value, list | tuple):
        out += b"[" + struct.pack(">I", len(value))
        for item in value:
            _encode(item, out)
    else:
        _other(value, out)


def _number(value: int | float, out: bytearray) -> None:
    """Numbers by value: an integral float is its int (1.0 is 1), -0.0 is 0, NaN is one value,
    infinities are themselves."""
    if isinstance(value, float):
        if math.isnan(value):
            out += b"N"
            return
        if math.isinf(value):
            out += b"I+" if value > 0 else b"I-"
            return
        if value.is_integer():
            value = int(value)
    if isinstance(value, int):
        _chunk(b"i", str(int(value)).encode(), out)
    else:
        _chunk(b"f", repr(float(value)).encode(), out)


def _other(value: object, out: bytearray) -> None:
    """A ``bson`` value (ObjectId, Decimal128, Int64, Timestamp...): by type name and text;
    an Int64 is an int already. Anything else cannot be stored, so it cannot be a key."""
    kind = type(value)
    if kind.__module__.split(".")[0] != "bson":
        raise UniqueError("unique.by", value, f"a {kind.__name__} value cannot be stored as BSON")
    if kind.__name__ == "Decimal128":
        _decimal(str(value), out)
        return
    _chunk(b"x", f"{kind.__name__}:{value}".encode(), out)


def _decimal(text: str, out: bytearray) -> None:
    """A Decimal128 by value: the same key as the int of the same value when it is integral
    (and NaN and the infinities as the float ones); otherwise by its decimal text."""
    number = float(text)  # Decimal128 text always parses ("NaN", "Infinity", "1.5E+3"...)
    exact_int = math.isfinite(number) and number.is_integer() and abs(number) < 2**53
    if exact_int or not math.isfinite(number):
        _number(number, out)
    else:
        _chunk(b"D", text.encode(), out)


def _chunk(tag: bytes, payload: bytes, out: bytearray) -> None:
    out += tag + struct.pack(">I", len(payload)) + payload


# --------------------------------------------------------------------------------------------
# What holds the key, and what a call does when it is taken


@value
class UniqueHold:
    """Key ``key`` is taken until ``until``, by record ``job_id`` (which may be gone)."""

    key: str
    job_id: str
    until: datetime


@value
class PendingUpdate:
    """What a replace or a debounce writes on a pending record: its params, priority, tags and
    start deadline, and its run time: ``next_run_at`` for a replace; for a debounce
    (``debounce``, the delay), :func:`debounced_next_run` of the record as it is at the write
    (the store computes it, so concurrent debounces of one record keep the latest time)."""

    params: object
    next_run_at: datetime
    priority: int
    tags: tuple[str, ...] = ()
    start_before: datetime | None = None
    debounce: timedelta | None = None


def debounced_next_run(
    current: datetime, now: datetime, delay: timedelta, until: datetime | None
) -> datetime:
    """The run time a debounce at ``now`` gives a record due at ``current`` whose cap is
    ``until``: :func:`debounced_run_at`, never earlier than it already is (two calls racing
    keep the later time, in either order)."""
    return max(current, debounced_run_at(now, delay, until))


def hold_state(record: JobRecord, now: datetime) -> HoldState:
    """The :class:`HoldState` of ``record`` at ``now``."""
    state = record.state(now)
    if state is JobState.FAILED:
        return HoldState.FAILED
    if state is JobState.RUNNING:
        return HoldState.RUNNING
    return HoldState.PENDING


def is_parked(record: JobRecord) -> bool:
    """A record written by a call that has not yet checked its key's window: it is not run,
    replaced or taken over until that call publishes (or drops) it."""
    return record.parked_at is not None


@dataclass(frozen=True, slots=True)
class Skip:
    """Write nothing: the holder keeps the key (``Duplicate``)."""

    holder: str


@dataclass(frozen=True, slots=True)
class TakeKey:
    """The holder does not hold the key in its ``state``: remove its identifier (compare and
    set on that state) and schedule the new record. ``behind``: the new record's run time is no
    earlier than this (the running holder's lock deadline, for replace and debounce)."""

    holder: str
    state: HoldState
    behind: datetime | None = None


@dataclass(frozen=True, slots=True)
class Replace:
    """Give the pending holder the new call's params, run time, priority, tags and deadline."""

    holder: str


@dataclass(frozen=True, slots=True)
class Debounce:
    """Give the pending holder the new params and move its run time to ``run_at``."""

    holder: str
    run_at: datetime


@dataclass(frozen=True, slots=True)
class Wait:
    """The holder is parked by a call still checking its window: try again in a moment (or,
    once it is older than :data:`PARK_GRACE`, finish that call's work: ``abandoned``). Whatever
    the call's ``on_conflict``: a parked record may yet be dropped, so it is never reported."""

    holder: str
    abandoned: bool = False


Conflict: TypeAlias = Skip | TakeKey | Replace | Debounce | Wait


def resolve(unique: Unique, holder: JobRecord, now: datetime) -> Conflict:
    """What a call with ``unique`` does about ``holder``, the record holding its key at ``now``
    (the decision table of the module documentation). Throttle never gets here: its key is
    held by the period alone."""
    if holder.parked_at is not None:
        # Never a Skip, even for a skip: its call may still drop it (a window opened), and a
        # Duplicate must name a record that exists. Its call ends in two steps; then the key's
        # holder is the published record, or the window's (whose record ran).
        return Wait(holder.id, abandoned=now - holder.parked_at > PARK_GRACE)
    state = hold_state(holder, now)
    mode = unique.on_conflict
    if state not in unique.states:
        return TakeKey(holder.id, state)
    if mode == "skip" or state is HoldState.FAILED:
        return Skip(holder.id)
    if state is HoldState.RUNNING:
        return TakeKey(holder.id, state, behind=holder.locked_until)
    if mode == "replace":
        return Replace(holder.id)
    assert unique.delay is not None  # checked by Unique
    return Debounce(holder.id, debounced_run_at(now, unique.delay, holder.debounce_until))


def debounced_run_at(now: datetime, delay: timedelta, until: datetime | None) -> datetime:
    """A debounced run time: ``now + delay``, but never past ``until`` (the first call plus
    ``max_wait``; ``None``: no cap). A cap already passed gives the cap: the job is due."""
    pushed = now + delay
    return pushed if until is None or pushed <= until else until


#: The most rounds of one call (each a lost race or a wait for a parked holder).
MAX_ROUNDS: Final = 50

#: Seconds between two looks at a parked holder (doubled up to a tenth of a second).
FIRST_RACE_WAIT: Final = 0.002
