"""Fleet-wide controls of a job name, decided without I/O: pause, global concurrency, rate
limits, and the lease (a distributed lock for application code).

Every control is kept in the store, so it holds across every Python worker sharing it (Node Dogs
workers ignore them). The runtime asks :func:`admission` what a claimed job needs before its
handler may start (a concurrency slot, a rate token), takes it with one atomic store write each,
and gives the job back untouched (its try not counted) when the store refuses.

Global concurrency
    ``global_concurrency=N``: at most N executions of the name (of one key, with
    ``concurrency_key``) hold a slot at any instant, across the fleet. A slot is a stored
    document taken by one conditional write (free, or its holder's time ran out); its expiry
    follows the holder's job lock (every lock renewal renews it), so a crashed worker's slot
    comes back when its lock expires, and a live one is never taken from it.
Rate limits
    ``rate_limit=RateLimit(N, period)``: at most N starts per **fixed window** of ``period``
    (windows aligned to the Unix epoch in UTC). A start takes one token of the current window by
    one conditional increment. Fixed windows are exact within each window; across a boundary up
    to 2N starts can fall within one ``period`` (N at the end of one window, N at the start of
    the next), the usual trade of fixed windows for one write per start. A refused job waits
    for the next window: its name is left out of claims until then (no busy loop).
Pause
    A paused name (or every name, :data:`EVERY_JOB`) is left out of every claim; what runs
    finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dogs_core.domain import validation
from dogs_core.errors import InvalidOptionError

__all__ = [
    "DEFAULT_KEY",
    "EVERY_JOB",
    "MAX_KEY_LENGTH",
    "Admission",
    "Lease",
    "RateLimit",
    "check_lease",
    "check_limit_key",
    "check_slot",
    "limit_key",
    "rate_window",
]

#: The pause of every job name.
EVERY_JOB = "*"
#: The key of a limit without a key function: the whole job name.
DEFAULT_KEY = ""
MAX_KEY_LENGTH = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, init=False)
class RateLimit:
    """At most ``limit`` starts per ``period`` (a fixed window; a timedelta, seconds or a string
    such as ``"1m"``) across the fleet, per value of ``key(params)`` when given (for example
    ``key=lambda p: p.account_id``)."""

    limit: int
    period: timedelta
    key: Callable[[Any], object] | None

    def __init__(
        self,
        limit: int,
        period: validation.DurationLike,
        key: Callable[[Any], object] | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "limit", validation.positive_int("rate_limit.limit", limit))
        window = validation.positive_duration("rate_limit.period", period)
        if window < timedelta(milliseconds=1):
            raise InvalidOptionError("rate_limit.period", period, "must be at least 1 ms")
        set_(self, "period", window)
        if key is not None:
            validation.callable_value("rate_limit.key", key)
        set_(self, "key", key)


def rate_limit_option(value: object) -> RateLimit | None:
    """A definition's ``rate_limit``: ``None``, a :class:`RateLimit`, or ``(limit, period)``."""
    if value is None or isinstance(value, RateLimit):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return RateLimit(value[0], value[1])
    raise InvalidOptionError(
        "rate_limit", value, "expected None, RateLimit(limit, period) or a (limit, period) tuple"
    )


@dataclass(frozen=True, slots=True)
class Admission:
    """What one claimed job needs before its handler starts: a slot among ``slots`` of
    ``slot_key`` (``None``: no concurrency limit), a token among ``rate`` starts of the window
    ``[window_start, window_end)`` of ``rate_key`` (``None``: no rate limit)."""

    slot_key: str | None = None
    slots: int = 0
    rate_key: str | None = None
    rate: int = 0
    window_start: datetime | None = None
    window_end: datetime | None = None

    @property
    def needed(self) -> bool:
        return self.slot_key is not None or self.rate_key is not None


def admission(
    *,
    job_name: str,
    global_concurrency: int | None,
    concurrency_key: Callable[[Any], object] | None,
    rate_limit: RateLimit | None,
    params: Any,
    now: datetime,
) -> Admission:
    """The slot and the rate token a job of ``job_name`` with ``params`` (as the handler gets
    them) needs at ``now``. Raises :class:`InvalidOptionError` when a key function fails or
    returns a bad key."""
    slot_key = None
    if global_concurrency is not None:
        slot_key = limit_key(concurrency_key, params, field="concurrency_key", job=job_name)
    if rate_limit is None:
        return Admission(slot_key, global_concurrency or 0)
    rate_key = limit_key(rate_limit.key, params, field="rate_limit.key", job=job_name)
    start, end = rate_window(now, rate_limit.period)
    return Admission(slot_key, global_concurrency or 0, rate_key, rate_limit.limit, start, end)


def limit_key(func: Callable[[Any], object] | None, params: Any, *, field: str, job: str) -> str:
    """``func(params)`` as a limit key: a string (ints are accepted and written as digits) of at
    most :data:`MAX_KEY_LENGTH` characters; :data:`DEFAULT_KEY` without a function."""
    if func is None:
        return DEFAULT_KEY
    try:
        key = func(params)
    except Exception as error:
        raise InvalidOptionError(field, func, f"job {job!r}: raised {error!r}") from error
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidOptionError(
            field, key, f"job {job!r}: must return a non-empty str of at most {MAX_KEY_LENGTH}"
        )
    return key


def rate_window(now: datetime, period: timedelta) -> tuple[datetime, datetime]:
    """The fixed window ``[start, end)`` of ``period`` that contains ``now`` (windows aligned
    to the Unix epoch, in whole milliseconds)."""
    period_ms = max(1, period // timedelta(milliseconds=1))
    now_ms = (now - _EPOCH) // timedelta(milliseconds=1)
    start_ms = now_ms - now_ms % period_ms
    start = _EPOCH + timedelta(milliseconds=start_ms)
    return start, start + timedelta(milliseconds=period_ms)


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lease of the lock ``name``: ``token`` (the fencing token) grows with every
    acquisition of ``name``; ``expires_at`` is when it lapses unless renewed."""

    name: str
    owner: str
    token: int
    expires_at: datetime


def check_limit_key(job_name: object, key: object) -> None:
    """A store's check of a job name (non-empty) and a limit key (``""`` is the whole name's,
    at most :data:`MAX_KEY_LENGTH` characters): ``InvalidOptionError`` naming the field."""
    validation.text("job_name", job_name)
    if not isinstance(key, str) or len(key) > MAX_KEY_LENGTH:
        raise InvalidOptionError("key", key, f"must be a str of at most {MAX_KEY_LENGTH}")


def check_slot(job_name: object, key: object, index: object, holder: object) -> None:
    """A store's check of a slot's name, key, index (>= 0) and holder (non-empty)."""
    check_limit_key(job_name, key)
    validation.integer("index", index, minimum=0)
    validation.text("holder", holder)


def check_lease(name: object, owner: object, token: object) -> None:
    """A store's check of a lease's name and owner (non-empty) and token (>= 1)."""
    validation.text("name", name)
    validation.text("owner", owner)
    validation.positive_int("token", token)
